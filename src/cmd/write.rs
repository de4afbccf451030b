//! `init`'s write phase, `rollback`, and the node side of both (`write-node`).
//!
//! For every node: derive NCCL settings by rule (with reasons), build a bundle, and apply it
//! where the node's files live — under `DIR/<host>` with `--output-dir`, at `/` for a local
//! node, or on the node itself through ssh (`topo-tune write-node` reads the bundle on stdin,
//! so the same writer code runs on every node).

use super::init::Report;
use crate::apply::writer::{self, Action, Bundle, FileChange};
use crate::cli::{GatherArgs, OutputFormat, RollbackArgs, WriteNodeArgs};
use crate::config::{Inventory, NodeSpec, TransportKind};
use crate::error::Error;
use crate::exit;
use crate::nccl::conf::{render, Setting};
use crate::nccl::rules::{derive, Derived};
use crate::nccl::version::NcclVersion;
use crate::report::table;
use crate::transport::{ssh, CollectOptions, NodeOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the node side answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeWriteReport {
    pub files: Vec<FileReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileReport {
    pub path: String,
    pub action: Action,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

fn report_of(changes: &[FileChange], with_diff: bool) -> NodeWriteReport {
    NodeWriteReport {
        files: changes
            .iter()
            .map(|c| FileReport {
                path: c.path.clone(),
                action: c.action,
                reason: c.reason.clone(),
                diff: (with_diff && c.action != Action::Unchanged).then(|| writer::diff(c)),
            })
            .collect(),
    }
}

/// Apply (or check) a bundle under `root`, in-process.
pub fn write_local(root: &Path, bundle: &Bundle, check: bool) -> Result<NodeWriteReport, String> {
    let changes = writer::changes(root, bundle).map_err(|e| e.to_string())?;
    if check {
        return Ok(report_of(&changes, true));
    }
    let applied = writer::apply(root, changes, &writer::run_id()).map_err(|e| e.to_string())?;
    Ok(report_of(&applied, true))
}

/// `topo-tune write-node`: the node side, JSON in on stdin, JSON out on stdout.
pub fn write_node(args: &WriteNodeArgs) -> Result<String, Error> {
    let report = if args.rollback {
        let changes = writer::rollback(&args.root).map_err(|e| Error::Usage(e.to_string()))?;
        report_of(&changes, true)
    } else {
        let mut input = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().take(16 << 20), &mut input).map_err(|e| Error::Io {
            what: "reading the bundle on stdin".into(),
            source: e,
        })?;
        let bundle: Bundle =
            serde_json::from_str(&input).map_err(|e| Error::Usage(format!("stdin is not a topo-tune bundle: {e}")))?;
        write_local(&args.root, &bundle, args.check).map_err(Error::Usage)?
    };
    Ok(serde_json::to_string(&report).unwrap_or_default() + "\n")
}

use std::io::Read as _;

#[derive(Serialize)]
struct NodeRow {
    host: String,
    status: &'static str,
    changed: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    settings: Vec<Setting>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    files: Vec<FileReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl NodeRow {
    fn new(host: &str) -> NodeRow {
        NodeRow {
            host: host.to_string(),
            status: "ok",
            changed: false,
            settings: Vec::new(),
            notes: Vec::new(),
            files: Vec::new(),
            error: None,
        }
    }

    fn fail(&mut self, why: String) {
        self.status = "failed";
        self.error = Some(why);
    }
}

/// Where a node's files are: a directory here, or the node itself over ssh.
enum Target {
    Local(PathBuf),
    Ssh,
    Nowhere(String),
}

fn target(node: &NodeSpec, output_dir: Option<&Path>) -> Target {
    match (output_dir, node.transport) {
        (Some(d), _) => Target::Local(d.join(&node.host)),
        (None, TransportKind::Local) => Target::Local(PathBuf::from("/")),
        (None, TransportKind::Ssh) => Target::Ssh,
        (None, TransportKind::Simulated) => {
            Target::Nowhere("a simulated node exists only on paper: use --output-dir to see its files".into())
        }
    }
}

fn ssh_options(inv: &Inventory, gather: Option<&GatherArgs>) -> Result<CollectOptions, Error> {
    let path = match gather.and_then(|g| g.remote_binary.clone()) {
        Some(p) => p,
        None => std::env::current_exe().map_err(|e| Error::Io {
            what: "finding topo-tune's own binary".into(),
            source: e,
        })?,
    };
    let binary = ssh::LocalBinary::load(&path).map_err(|e| Error::Io {
        what: format!("reading {}", path.display()),
        source: e,
    })?;
    Ok(CollectOptions {
        forks: gather.and_then(|g| g.forks).unwrap_or(inv.ssh.forks).max(1),
        connect_timeout: std::time::Duration::from_secs(
            gather
                .and_then(|g| g.connect_timeout)
                .unwrap_or(inv.ssh.connect_timeout_s)
                .max(1),
        ),
        command_timeout: std::time::Duration::from_secs(
            gather
                .and_then(|g| g.command_timeout)
                .unwrap_or(inv.ssh.command_timeout_s)
                .max(1),
        ),
        max_fail: None,
        remote_binary: std::sync::Arc::new(binary),
        simulated_latency: std::time::Duration::ZERO,
    })
}

/// Run `write-node ARGS` on ssh nodes, one parsed report per node.
fn remote(
    inv: &Inventory,
    opts: &CollectOptions,
    jobs: Vec<(NodeSpec, Vec<String>, Option<Vec<u8>>)>,
) -> Result<Vec<Result<NodeWriteReport, String>>, Error> {
    Ok(fan_out(inv, opts, jobs)?
        .into_iter()
        .map(|r| {
            r.and_then(|out| {
                serde_json::from_slice::<NodeWriteReport>(&out)
                    .map_err(|e| format!("the node's answer is not a write report: {e}"))
            })
        })
        .collect())
}

/// Put remote answers into their rows: files on success, a failure otherwise.
fn merge_remote(rows: &mut [NodeRow], slots: Vec<usize>, answers: Vec<Result<NodeWriteReport, String>>) {
    for (slot, r) in slots.into_iter().zip(answers) {
        match r {
            Ok(rep) => rows[slot].files = rep.files,
            Err(e) => rows[slot].fail(e),
        }
    }
}

/// Run `topo-tune ARGS` on ssh nodes and return each node's stdout.
pub fn remote_tool(
    inv: &Inventory,
    nodes: Vec<NodeSpec>,
    args: Vec<String>,
) -> Result<Vec<Result<Vec<u8>, String>>, Error> {
    let opts = ssh_options(inv, None)?;
    fan_out(inv, &opts, nodes.into_iter().map(|n| (n, args.clone(), None)).collect())
}

/// The ssh fan-out behind every remote command: at most `forks` nodes at once, answers in
/// job order (a node whose task died reports an internal failure, never another's answer).
fn fan_out(
    inv: &Inventory,
    opts: &CollectOptions,
    jobs: Vec<(NodeSpec, Vec<String>, Option<Vec<u8>>)>,
) -> Result<Vec<Result<Vec<u8>, String>>, Error> {
    let runtime = super::async_runtime()?;
    let count = jobs.len();
    Ok(runtime.block_on(async {
        let Some(dir) = ssh::ControlDir::create() else {
            return (0..count)
                .map(|_| Err("could not create a private directory for ssh control sockets".to_string()))
                .collect();
        };
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(opts.forks));
        let mut set = tokio::task::JoinSet::new();
        for (i, (node, args, stdin)) in jobs.into_iter().enumerate() {
            let (sem, settings, opts, dir) = (sem.clone(), inv.ssh.clone(), opts.clone(), dir.clone());
            set.spawn(async move {
                let _permit = sem.acquire_owned().await.ok();
                let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                let (r, _) = ssh::run_tool_on_node(&node, &settings, &opts, &dir, &argv, stdin.as_deref()).await;
                (i, r.map(|(out, _)| out).map_err(|f| f.message))
            });
        }
        let mut out: Vec<Result<Vec<u8>, String>> = (0..count).map(|_| Err("internal failure".to_string())).collect();
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                out[i] = r;
            }
        }
        out
    }))
}

/// One probed node's settings and the files that carry them, or why it gets none.
fn node_bundle(
    outcome: &NodeOutcome,
    rails: Option<u32>,
    cluster_version: Option<NcclVersion>,
    overrides: &BTreeMap<String, String>,
) -> Result<(Derived, Bundle), String> {
    let snap = match &outcome.result {
        Ok((s, _)) => s,
        Err(f) => return Err(format!("not probed: {}", f.message)),
    };
    // The node's own NCCL when the probe found one, else cluster.yaml's.
    let version = snap.nccl_version.or(cluster_version);
    let derived = derive(snap, rails, version, overrides).map_err(|r| format!("refused setting: {r}"))?;
    let header = format!(
        "topo-tune {}: one line per setting; the reasons are in `topo-tune init --output json`",
        env!("CARGO_PKG_VERSION")
    );
    let dropin = render(&derived.settings, version, &header).map_err(|r| format!("refused setting: {r}"))?;
    let bundle = Bundle {
        dropin,
        topology_xml: derived.topology_xml.clone(),
        nccl_version: version,
    };
    Ok((derived, bundle))
}

/// `init` after collection: rules, bundles, writes, and the per-node summary.
pub fn init_write(
    inv: &Inventory,
    gather: &GatherArgs,
    outcomes: &[NodeOutcome],
    output_dir: Option<&Path>,
    check: bool,
    show_diff: bool,
    output: OutputFormat,
) -> Result<Report, Error> {
    let version = inv.nccl_version;
    let rails = inv.fabric.as_ref().and_then(|f| f.rails);
    let mut rows: Vec<NodeRow> = Vec::new();
    let mut remote_jobs = Vec::new();
    let mut remote_rows = Vec::new();
    for (o, spec) in outcomes.iter().zip(&inv.nodes) {
        let mut row = NodeRow::new(&o.host);
        let bundle = match node_bundle(o, rails, version, &inv.nccl) {
            Ok((derived, bundle)) => {
                row.settings = derived.settings;
                row.notes = derived.notes;
                bundle
            }
            Err(why) => {
                row.fail(why);
                rows.push(row);
                continue;
            }
        };
        match target(spec, output_dir) {
            Target::Local(root) => match write_local(&root, &bundle, check) {
                Ok(r) => row.files = r.files,
                Err(e) => row.fail(e),
            },
            Target::Nowhere(why) => row.fail(why),
            Target::Ssh => {
                // The node's own root: `/` (or its TOPO_TUNE_WRITE_ROOT).
                let mut args = vec!["write-node".to_string()];
                if check {
                    args.push("--check".into());
                }
                remote_jobs.push((
                    spec.clone(),
                    args,
                    Some(serde_json::to_vec(&bundle).unwrap_or_default()),
                ));
                remote_rows.push(rows.len());
            }
        }
        rows.push(row);
    }
    if !remote_jobs.is_empty() {
        let opts = ssh_options(inv, Some(gather))?;
        let answers = remote(inv, &opts, remote_jobs)?;
        merge_remote(&mut rows, remote_rows, answers);
    }
    for r in rows.iter_mut() {
        r.changed = r.files.iter().any(|f| f.action != Action::Unchanged);
        if !show_diff {
            r.files.iter_mut().for_each(|f| f.diff = None);
        }
    }
    finish(rows, check, output, "init")
}

fn finish(rows: Vec<NodeRow>, check: bool, output: OutputFormat, what: &str) -> Result<Report, Error> {
    let failed = rows.iter().filter(|r| r.status == "failed").count();
    let changed = rows.iter().any(|r| r.changed);
    let exit_code = if failed > 0 {
        exit::PARTIAL_FAILURE
    } else if check && changed {
        exit::CHANGES_PENDING
    } else {
        exit::OK
    };
    let verb = if check { "would change" } else { "changed" };
    let msg = format!(
        "{what}: {} node(s), {} {verb}, {failed} failed",
        rows.len(),
        rows.iter().filter(|r| r.changed).count()
    );
    let text = match output {
        OutputFormat::Json => {
            serde_json::to_string_pretty(&serde_json::json!({ "changed": changed && !check, "pending": check && changed, "failed": failed > 0, "msg": msg, "nodes": rows })).unwrap_or_default() + "\n"
        }
        OutputFormat::Human => {
            let mut t = table(&["Host", "Status", "File", "Action", "Why"]);
            let mut diffs = String::new();
            for r in &rows {
                if let Some(e) = &r.error {
                    t.add_row(vec![r.host.clone(), "FAILED".into(), "-".into(), "-".into(), e.clone()]);
                }
                for f in &r.files {
                    t.add_row(vec![r.host.clone(), r.status.into(), f.path.clone(), format!("{:?}", f.action).to_lowercase(), f.reason.clone()]);
                    if let Some(d) = &f.diff {
                        diffs.push_str(&format!("--- {} {}\n{d}", r.host, f.path));
                    }
                }
            }
            let mut settings = table(&["Host", "Setting", "Why"]);
            for r in &rows {
                for s in &r.settings {
                    settings.add_row(vec![r.host.clone(), format!("{}={}", s.name, s.value), s.reason.clone()]);
                }
            }
            format!("{settings}\n\n{t}\n{diffs}\n{msg}\n")
        }
    };
    Ok(Report { text, exit_code })
}

/// `topo-tune rollback`.
pub fn rollback(args: &RollbackArgs, output: OutputFormat) -> Result<Report, Error> {
    let inv = Inventory::load(&args.cluster_config)?;
    let mut rows = Vec::new();
    let mut remote_jobs = Vec::new();
    let mut remote_rows = Vec::new();
    for n in &inv.nodes {
        let mut row = NodeRow::new(&n.host);
        match target(n, args.output_dir.as_deref()) {
            Target::Local(root) => match writer::rollback(&root) {
                Ok(ch) => row.files = report_of(&ch, false).files,
                Err(e) => row.fail(e.to_string()),
            },
            Target::Nowhere(why) => row.fail(why),
            Target::Ssh => {
                remote_jobs.push((n.clone(), vec!["write-node".into(), "--rollback".into()], None));
                remote_rows.push(rows.len());
            }
        }
        rows.push(row);
    }
    if !remote_jobs.is_empty() {
        let opts = ssh_options(&inv, None)?;
        let answers = remote(&inv, &opts, remote_jobs)?;
        merge_remote(&mut rows, remote_rows, answers);
    }
    for r in rows.iter_mut() {
        r.changed = r.files.iter().any(|f| f.action != Action::Unchanged);
        r.files.iter_mut().for_each(|f| f.diff = None);
    }
    finish(rows, false, output, "rollback")
}
