//! `topo-tune init`: read cluster.yaml, collect one snapshot per node (ssh, local, simulated,
//! or `--from-probes` files), write them, and report per node what happened and why.

use crate::cli::{InitArgs, OutputFormat};
use crate::config::{Inventory, TransportKind};
use crate::error::Error;
use crate::exit;
use crate::model::NodeSnapshot;
use crate::report::table;
use crate::transport::{self, ssh::LocalBinary, CollectOptions, Deploy, Failure, FailureKind, NodeOutcome};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Report {
    pub text: String,
    pub exit_code: i32,
}

#[derive(Serialize)]
struct NodeRow {
    host: String,
    transport: &'static str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deploy: Option<Deploy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<String>,
    changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<FailureRow>,
}

#[derive(Serialize, Clone)]
struct FailureRow {
    kind: FailureKind,
    message: String,
}

#[derive(Serialize)]
struct Summary {
    nodes: usize,
    ok: usize,
    failed: usize,
    skipped: usize,
}

#[derive(Serialize)]
struct InitReport<'a> {
    changed: bool,
    failed: bool,
    msg: String,
    dry_run: bool,
    output_dir: Option<String>,
    summary: Summary,
    nodes: &'a [NodeRow],
}

pub fn run(args: &InitArgs, output: OutputFormat) -> Result<Report, Error> {
    let inv = Inventory::load(&args.gather.cluster_config)?;
    if args.dry_run {
        return Ok(dry_run(&inv, args, output));
    }
    if !args.collect_only {
        let outcomes = match &args.gather.from_probes {
            Some(dir) => from_probes(&inv, dir)?,
            None => collect(&inv, &args.gather, output)?,
        };
        return super::write::init_write(
            &inv,
            &args.gather,
            &outcomes,
            args.output_dir.as_deref(),
            args.check,
            args.diff,
            output,
        );
    }
    let out_dir = args
        .output_dir
        .clone()
        .ok_or_else(|| Error::Usage("init --collect-only needs --output-dir DIR (where the snapshots go)".into()))?;
    let started = Instant::now();
    let outcomes = match &args.gather.from_probes {
        Some(dir) => from_probes(&inv, dir)?,
        None => collect(&inv, &args.gather, output)?,
    };
    let elapsed = started.elapsed();

    let mut rows = Vec::new();
    let mut summary_nodes = Vec::new();
    for o in &outcomes {
        let transport = if args.gather.from_probes.is_some() {
            "files"
        } else {
            transport_name(o.transport)
        };
        let (status, snapshot, changed, failure, deploy) = match &o.result {
            Ok((snap, deploy)) => {
                let path = out_dir.join(&o.host).join("snapshot.json");
                let changed = crate::apply::atomic::write_if_changed(&path, snap.to_json_pretty().as_bytes(), 0o644)
                    .map_err(|e| Error::Io {
                        what: format!("writing {}", path.display()),
                        source: e,
                    })?;
                ("ok", Some(path.display().to_string()), changed, None, Some(*deploy))
            }
            Err(f) => {
                let status = if f.kind == FailureKind::Skipped {
                    "skipped"
                } else {
                    "failed"
                };
                (
                    status,
                    None,
                    false,
                    Some(FailureRow {
                        kind: f.kind,
                        message: f.message.clone(),
                    }),
                    None,
                )
            }
        };
        summary_nodes.push(serde_json::json!({"host": o.host, "status": status, "failure": failure.clone()}));
        rows.push(NodeRow {
            host: o.host.clone(),
            transport,
            status,
            duration_ms: Some(o.duration.as_millis() as u64),
            attempts: (o.attempts > 0).then_some(o.attempts),
            deploy,
            snapshot,
            changed,
            failure,
        });
    }
    // summary.json holds no timings, so an identical second run leaves it untouched.
    let summary_path = out_dir.join("summary.json");
    let summary_doc = serde_json::to_string_pretty(
        &serde_json::json!({ "cluster_config": inv.path.display().to_string(), "nodes": summary_nodes }),
    )
    .unwrap_or_default()
        + "\n";
    let summary_changed = crate::apply::atomic::write_if_changed(&summary_path, summary_doc.as_bytes(), 0o644)
        .map_err(|e| Error::Io {
            what: format!("writing {}", summary_path.display()),
            source: e,
        })?;

    let failed = rows.iter().filter(|r| r.status == "failed").count();
    let skipped = rows.iter().filter(|r| r.status == "skipped").count();
    let ok = rows.len() - failed - skipped;
    let changed = summary_changed || rows.iter().any(|r| r.changed);
    let msg = format!(
        "collected {ok} of {} nodes ({failed} failed, {skipped} skipped) in {:.1} s into {}",
        rows.len(),
        elapsed.as_secs_f64(),
        out_dir.display()
    );
    let exit_code = if failed + skipped > 0 {
        exit::PARTIAL_FAILURE
    } else {
        exit::OK
    };
    let text = match output {
        OutputFormat::Json => {
            let report = InitReport {
                changed,
                failed: exit_code != exit::OK,
                msg,
                dry_run: false,
                output_dir: Some(out_dir.display().to_string()),
                summary: Summary {
                    nodes: rows.len(),
                    ok,
                    failed,
                    skipped,
                },
                nodes: &rows,
            };
            serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
        }
        OutputFormat::Human => render(&rows, &msg),
    };
    Ok(Report { text, exit_code })
}

fn transport_name(t: TransportKind) -> &'static str {
    match t {
        TransportKind::Ssh => "ssh",
        TransportKind::Local => "local",
        TransportKind::Simulated => "simulated",
    }
}

fn render(rows: &[NodeRow], msg: &str) -> String {
    let mut t = table(&["Host", "Via", "Status", "Time", "Binary", "Detail"]);
    for r in rows {
        let detail = match (&r.failure, &r.snapshot) {
            (Some(f), _) => format!(
                "{}: {}",
                serde_json::to_value(f.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                f.message
            ),
            (None, Some(p)) => format!("{p}{}", if r.changed { " (changed)" } else { "" }),
            _ => String::new(),
        };
        let binary = match r.deploy {
            Some(Deploy::Uploaded) => "uploaded",
            Some(Deploy::Reused) => "reused",
            _ => "-",
        };
        let time = r
            .duration_ms
            .map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        let status = if r.status == "ok" {
            "ok".to_string()
        } else {
            r.status.to_uppercase()
        };
        t.add_row(vec![
            r.host.clone(),
            r.transport.to_string(),
            status,
            time,
            binary.to_string(),
            detail,
        ]);
    }
    format!("{t}\n{msg}\n")
}

fn dry_run(inv: &Inventory, args: &InitArgs, output: OutputFormat) -> Report {
    let rows: Vec<NodeRow> = inv
        .nodes
        .iter()
        .map(|n| NodeRow {
            host: n.host.clone(),
            transport: if args.gather.from_probes.is_some() {
                "files"
            } else {
                transport_name(n.transport)
            },
            status: "would_probe",
            duration_ms: None,
            attempts: None,
            deploy: None,
            snapshot: args
                .output_dir
                .as_ref()
                .map(|d| d.join(&n.host).join("snapshot.json").display().to_string()),
            changed: false,
            failure: None,
        })
        .collect();
    let msg = format!(
        "dry run: {} nodes would be probed ({} declared in {}); nothing was contacted",
        rows.len(),
        inv.nodes.len(),
        inv.path.display()
    );
    let text = match output {
        OutputFormat::Json => {
            serde_json::to_string_pretty(&InitReport {
                changed: false,
                failed: false,
                msg,
                dry_run: true,
                output_dir: args.output_dir.as_ref().map(|d| d.display().to_string()),
                summary: Summary {
                    nodes: rows.len(),
                    ok: 0,
                    failed: 0,
                    skipped: 0,
                },
                nodes: &rows,
            })
            .unwrap_or_default()
                + "\n"
        }
        OutputFormat::Human => {
            let mut t = table(&["Host", "Via", "Declared at", "Labels"]);
            for (r, n) in rows.iter().zip(&inv.nodes) {
                let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                t.add_row(vec![
                    r.host.clone(),
                    r.transport.to_string(),
                    n.declared_at.clone(),
                    labels.join(","),
                ]);
            }
            format!("{t}\n{msg}\n")
        }
    };
    Report {
        text,
        exit_code: exit::OK,
    }
}

pub(crate) fn collect(
    inv: &Inventory,
    args: &crate::cli::GatherArgs,
    output: OutputFormat,
) -> Result<Vec<NodeOutcome>, Error> {
    let binary_path = match &args.remote_binary {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| Error::Io {
            what: "finding topo-tune's own binary".into(),
            source: e,
        })?,
    };
    let needs_binary = inv.nodes.iter().any(|n| n.transport == TransportKind::Ssh);
    let remote_binary = if needs_binary {
        LocalBinary::load(&binary_path).map_err(|e| Error::Io {
            what: format!("reading {}", binary_path.display()),
            source: e,
        })?
    } else {
        LocalBinary {
            path: binary_path,
            bytes: Vec::new(),
            sha256: "0".repeat(64),
        }
    };
    let forks = args.forks.unwrap_or(inv.ssh.forks);
    if forks == 0 {
        return Err(Error::Usage("--forks must be at least 1".into()));
    }
    let opts = CollectOptions {
        forks,
        connect_timeout: Duration::from_secs(args.connect_timeout.unwrap_or(inv.ssh.connect_timeout_s).max(1)),
        command_timeout: Duration::from_secs(args.command_timeout.unwrap_or(inv.ssh.command_timeout_s).max(1)),
        max_fail: args.max_fail,
        remote_binary: Arc::new(remote_binary),
        simulated_latency: Duration::from_millis(args.simulate_latency_ms),
    };
    let show_progress = output == OutputFormat::Human && std::io::stderr().is_terminal();
    let bar = if show_progress {
        indicatif::ProgressBar::new(inv.nodes.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} nodes {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let runtime = super::async_runtime()?;
    let progress_bar = bar.clone();
    let progress: transport::Progress = Arc::new(move |o: &NodeOutcome| {
        progress_bar.inc(1);
        if o.result.is_err() {
            progress_bar.set_message(format!("(last failure: {})", o.host));
        }
    });
    let outcomes = runtime.block_on(transport::collect(inv, &opts, progress));
    bar.finish_and_clear();
    Ok(outcomes)
}

/// Snapshots gathered by another engine: `DIR/<host>.json` or `DIR/<host>/snapshot.json`.
pub(crate) fn from_probes(inv: &Inventory, dir: &Path) -> Result<Vec<NodeOutcome>, Error> {
    if !dir.is_dir() {
        return Err(Error::Io {
            what: format!("--from-probes {}", dir.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        });
    }
    Ok(inv
        .nodes
        .iter()
        .map(|n| {
            let start = Instant::now();
            let candidates: [PathBuf; 2] = [
                dir.join(format!("{}.json", n.host)),
                dir.join(&n.host).join("snapshot.json"),
            ];
            let result = match candidates.iter().find(|p| p.is_file()) {
                None => Err(Failure::new(
                    FailureKind::ProbeFileMissing,
                    format!("no {} or {}", candidates[0].display(), candidates[1].display()),
                )),
                Some(p) => read_probe_file(p),
            };
            NodeOutcome {
                host: n.host.clone(),
                transport: n.transport,
                duration: start.elapsed(),
                result: result.map(|s| (s, Deploy::NotNeeded)),
                attempts: 0,
            }
        })
        .collect())
}

fn read_probe_file(path: &Path) -> Result<NodeSnapshot, Failure> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::new(FailureKind::ProbeFileMissing, format!("{}: {e}", path.display())))?;
    if meta.len() > transport::ssh::MAX_ANSWER_BYTES {
        return Err(Failure::new(
            FailureKind::AnswerTooLarge,
            format!(
                "{} is larger than {} MiB",
                path.display(),
                transport::ssh::MAX_ANSWER_BYTES >> 20
            ),
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::new(FailureKind::ProbeFileMissing, format!("{}: {e}", path.display())))?;
    NodeSnapshot::from_json(&text).map_err(|e| Failure::new(FailureKind::BadAnswer, format!("{}: {e}", path.display())))
}
