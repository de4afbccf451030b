//! `topo-tune irq-pin` and `topo-tune doctor`.

use super::init::Report;
use crate::cli::{DoctorArgs, IrqPinArgs, IrqbalancePolicy, OutputFormat};
use crate::config::{Inventory, TransportKind};
use crate::error::Error;
use crate::exit;
use crate::irq::doctor::{self, Check, Status};
use crate::irq::{self, irqbalance, IrqError, PinAction};
use crate::model::CpuList;
use crate::probe::fsroot::FsRoot;
use crate::probe::{probe, ProbeRequest, Target};
use crate::report::table;
use std::path::PathBuf;

fn reserved(list: Option<&str>, cfg: Option<&PathBuf>) -> Result<CpuList, Error> {
    if let Some(l) = list {
        return CpuList::parse(l).map_err(|e| Error::Usage(format!("--reserve-cpus: {e}")));
    }
    match cfg {
        Some(p) => Ok(Inventory::load(p)?.reserved_cpus.unwrap_or_default()),
        None => Ok(CpuList::new()),
    }
}

/// One node's answer: its host and its JSON report, or why there is none.
type NodeAnswer = (String, Result<serde_json::Value, String>);

/// Run a command on every node of the cluster: `here` for `transport: local`, `topo-tune
/// ARGS` over ssh (its JSON on stdout), a reason for paper nodes. Answers in inventory order.
fn on_every_node(
    inv: &Inventory,
    here: &dyn Fn() -> Result<serde_json::Value, String>,
    remote_args: Vec<String>,
    paper: &str,
) -> Result<Vec<NodeAnswer>, Error> {
    let mut rows: Vec<NodeAnswer> = Vec::new();
    let mut remote = Vec::new();
    for n in &inv.nodes {
        let r = match n.transport {
            TransportKind::Local => here(),
            TransportKind::Simulated => Err(paper.to_string()),
            TransportKind::Ssh => {
                remote.push((n.clone(), rows.len()));
                Err("pending".into())
            }
        };
        rows.push((n.host.clone(), r));
    }
    if !remote.is_empty() {
        let answers = super::write::remote_tool(inv, remote.iter().map(|(n, _)| n.clone()).collect(), remote_args)?;
        for ((_, slot), r) in remote.iter().zip(answers) {
            rows[*slot].1 =
                r.and_then(|out| serde_json::from_slice(&out).map_err(|e| format!("not a topo-tune report: {e}")));
        }
    }
    Ok(rows)
}

fn snapshot(fsroot: Option<&PathBuf>) -> Result<crate::model::NodeSnapshot, Error> {
    Ok(probe(&ProbeRequest {
        target: Target::Machine {
            fsroot: fsroot.cloned(),
        },
        nvml_fixture: None,
    })?)
}

fn irq_error(e: IrqError) -> Error {
    match e {
        IrqError::NotRoot => Error::Usage(e.to_string()),
        other => Error::Irq(other.to_string()),
    }
}

pub fn irq_pin(args: &IrqPinArgs, output: OutputFormat) -> Result<Report, Error> {
    match &args.cluster_config {
        None => {
            let reserved = reserved(args.reserve_cpus.as_deref(), None)?;
            pin_here(args, &reserved, output)
        }
        Some(cfg) => pin_cluster(args, cfg, output),
    }
}

/// Every node of the cluster: local ones here, ssh ones by running `irq-pin` on them.
fn pin_cluster(args: &IrqPinArgs, cfg: &std::path::Path, output: OutputFormat) -> Result<Report, Error> {
    let inv = Inventory::load(cfg)?;
    let reserved = match &args.reserve_cpus {
        Some(l) => CpuList::parse(l).map_err(|e| Error::Usage(format!("--reserve-cpus: {e}")))?,
        None => inv.reserved_cpus.clone().unwrap_or_default(),
    };
    let irqbalance = if args.irqbalance == IrqbalancePolicy::Ban {
        "ban"
    } else {
        "warn"
    };
    let mut a: Vec<String> = ["--output", "json", "irq-pin", "--exit-zero", "--irqbalance", irqbalance]
        .map(String::from)
        .to_vec();
    if !reserved.is_empty() {
        a.extend(["--reserve-cpus".to_string(), reserved.to_string()]);
    }
    for (flag, on) in [
        ("--dry-run", args.dry_run),
        ("--include-control", args.include_control),
        ("--install", args.install),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    let here = || {
        pin_here(args, &reserved, OutputFormat::Json)
            .map_err(|e| e.to_string())
            .and_then(|rep| serde_json::from_str(&rep.text).map_err(|e| e.to_string()))
    };
    let rows = on_every_node(&inv, &here, a, "a simulated node has no interrupts to pin")?;
    let changed = rows.iter().any(|(_, r)| r.as_ref().is_ok_and(|v| v["changed"] == true));
    let failed = rows
        .iter()
        .any(|(_, r)| r.as_ref().map_or(true, |v| v["failed"] == true));
    let text = match output {
        OutputFormat::Json => {
            let nodes: Vec<serde_json::Value> = rows
                .iter()
                .map(|(h, r)| match r {
                    Ok(v) => serde_json::json!({"host": h, "changed": v["changed"], "failed": v["failed"], "msg": v["msg"], "notes": v["notes"], "plan": v["plan"]}),
                    Err(e) => serde_json::json!({"host": h, "changed": false, "failed": true, "error": e}),
                })
                .collect();
            serde_json::to_string_pretty(&serde_json::json!({"changed": changed, "failed": failed, "nodes": nodes}))
                .unwrap_or_default()
                + "\n"
        }
        OutputFormat::Human => {
            let mut t = table(&["Host", "Result"]);
            for (h, r) in &rows {
                t.add_row(vec![
                    h.clone(),
                    r.as_ref().map_or_else(
                        |e| format!("FAILED: {e}"),
                        |v| v["msg"].as_str().unwrap_or("").to_string(),
                    ),
                ]);
            }
            format!("{t}\n")
        }
    };
    Ok(Report {
        text,
        exit_code: if failed && !args.exit_zero {
            exit::PARTIAL_FAILURE
        } else {
            exit::OK
        },
    })
}

/// This machine (or the --fsroot tree).
fn pin_here(args: &IrqPinArgs, reserved: &CpuList, output: OutputFormat) -> Result<Report, Error> {
    let reserved = reserved.clone();
    let fs = args.fsroot.as_ref().map_or_else(FsRoot::live, FsRoot::new);
    let snap = snapshot(args.fsroot.as_ref())?;
    let topo = irq::read_cpu_topology(&fs);
    let mut plan = irq::plan(&snap, &topo, &reserved, args.include_control, &|n| {
        irq::is_managed(&fs, n)
    })
    .map_err(irq_error)?;
    let live = args.fsroot.is_none();
    if !args.dry_run && live && !irq::is_root() && plan.pins.iter().any(|p| p.action == PinAction::Set) {
        return Err(irq_error(IrqError::NotRoot));
    }
    let mut changed = false;
    let mut notes = plan.notes.clone();
    if !args.dry_run {
        irq::apply(&fs, &mut plan);
        changed |= plan.pins.iter().any(|p| p.action == PinAction::Set);
        // Remember what was pinned: doctor then tells pins undone from pins never made.
        let state =
            serde_json::to_string_pretty(&irq::PinState::of(&plan, args.include_control)).unwrap_or_default() + "\n";
        crate::apply::atomic::write_if_changed(&fs.path(irq::STATE_FILE), state.as_bytes(), 0o644).map_err(|e| {
            Error::Io {
                what: format!("writing {}", irq::STATE_FILE),
                source: e,
            }
        })?;
    }
    let ib = irqbalance::status(&fs);
    if ib.running && !ib.bans_mlx5 {
        match (args.irqbalance, args.dry_run) {
            (IrqbalancePolicy::Ban, false) => {
                let before = fs.read(&ib.config).unwrap_or_default();
                let after = irqbalance::with_ban(&before);
                if !before.is_empty() {
                    crate::apply::atomic::write_if_changed(&fs.path(&format!("{}.topo-tune.bak", ib.config)), before.as_bytes(), 0o644).map_err(|e| Error::Io { what: format!("backing up {}", ib.config), source: e })?;
                }
                changed |= crate::apply::atomic::write_if_changed(&fs.path(&ib.config), after.as_bytes(), 0o644).map_err(|e| Error::Io { what: format!("writing {}", ib.config), source: e })?;
                if live {
                    let ok = std::process::Command::new("systemctl").args(["try-restart", "irqbalance"]).status().is_ok_and(|s| s.success());
                    notes.push(format!("irqbalance: {} now bans mlx5 ({}); restart {}", ib.config, irqbalance::BAN, if ok { "done" } else { "FAILED: run `systemctl try-restart irqbalance`" }));
                } else {
                    notes.push(format!("irqbalance: {} now bans mlx5 ({}); not restarted (a --fsroot tree)", ib.config, irqbalance::BAN));
                }
            }
            _ => notes.push(format!("irqbalance is running and will move these interrupts again; `--irqbalance ban` adds {} to {} and restarts it", irqbalance::BAN, ib.config)),
        }
    }
    if args.install && !args.dry_run {
        let bin = std::env::current_exe().map_err(|e| Error::Io {
            what: "finding topo-tune's own binary".into(),
            source: e,
        })?;
        let mut extra = String::new();
        if !reserved.is_empty() {
            extra.push_str(&format!(" --reserve-cpus {reserved}"));
        }
        if args.include_control {
            extra.push_str(" --include-control");
        }
        let (unit, rule) = irq::render_persistence(&bin.display().to_string(), &extra);
        for (path, text) in [
            ("/etc/systemd/system/topo-tune-irq-pin.service", unit),
            ("/etc/udev/rules.d/99-topo-tune-irq-pin.rules", rule),
        ] {
            changed |= crate::apply::atomic::write_if_changed(&fs.path(path), text.as_bytes(), 0o644).map_err(|e| {
                Error::Io {
                    what: format!("writing {path}"),
                    source: e,
                }
            })?;
        }
        if live {
            let ok = std::process::Command::new("systemctl")
                .args(["daemon-reload"])
                .status()
                .is_ok_and(|s| s.success())
                && std::process::Command::new("systemctl")
                    .args(["enable", "topo-tune-irq-pin.service"])
                    .status()
                    .is_ok_and(|s| s.success());
            notes.push(format!(
                "installed topo-tune-irq-pin.service{}",
                if ok {
                    " (enabled)"
                } else {
                    ": enabling FAILED, run `systemctl enable topo-tune-irq-pin.service`"
                }
            ));
        } else {
            notes.push("installed the unit and udev rule under the --fsroot tree (not enabled)".into());
        }
    }
    let failed = plan.pins.iter().filter(|p| p.action == PinAction::Failed).count();
    let count = |a: PinAction| plan.pins.iter().filter(|p| p.action == a).count();
    let msg = format!(
        "{}{} to move, {} already placed, {} unsupported (managed), {} control left alone, {failed} failed",
        if args.dry_run { "dry run: " } else { "" },
        count(PinAction::Set),
        count(PinAction::Keep),
        count(PinAction::Unsupported),
        count(PinAction::Leave)
    );
    let text = match output {
        OutputFormat::Json => serde_json::to_string_pretty(&serde_json::json!({"changed": changed, "failed": failed > 0, "dry_run": args.dry_run, "msg": msg, "notes": notes, "plan": plan})).unwrap_or_default() + "\n",
        OutputFormat::Human => {
            let mut t = table(&["IRQ", "NIC", "Name", "Class", "Current", "Target", "Action", "Why"]);
            for p in &plan.pins {
                t.add_row(vec![
                    p.irq.to_string(),
                    p.nic.clone(),
                    p.name.clone().unwrap_or_default(),
                    format!("{:?}", p.class).to_lowercase(),
                    p.current.as_ref().map_or("?".into(), |c| c.to_string()),
                    p.target.as_ref().map_or("-".into(), |c| c.to_string()),
                    format!("{:?}", p.action).to_lowercase(),
                    p.reason.clone(),
                ]);
            }
            let notes: String = notes.iter().map(|n| format!("note: {n}\n")).collect();
            format!("{t}\n{notes}{msg}\n")
        }
    };
    Ok(Report {
        text,
        exit_code: if failed > 0 && !args.exit_zero {
            exit::PARTIAL_FAILURE
        } else {
            exit::OK
        },
    })
}

pub fn doctor(args: &DoctorArgs, output: OutputFormat) -> Result<Report, Error> {
    let mut nodes: Vec<(String, Result<Vec<Check>, String>)> = Vec::new();
    match &args.cluster_config {
        None => {
            let reserved = reserved(args.reserve_cpus.as_deref(), None)?;
            let fs = args.fsroot.as_ref().map_or_else(FsRoot::live, FsRoot::new);
            let snap = snapshot(args.fsroot.as_ref())?;
            nodes.push((snap.hostname.clone(), Ok(doctor::run(&fs, &snap, &reserved))));
        }
        Some(cfg) => {
            let inv = Inventory::load(cfg)?;
            let reserved = match &args.reserve_cpus {
                Some(l) => CpuList::parse(l).map_err(|e| Error::Usage(format!("--reserve-cpus: {e}")))?,
                None => inv.reserved_cpus.clone().unwrap_or_default(),
            };
            let mut a: Vec<String> = ["--output", "json", "doctor", "--exit-zero"].map(String::from).to_vec();
            if !reserved.is_empty() {
                a.extend(["--reserve-cpus".to_string(), reserved.to_string()]);
            }
            let here = || {
                let checks = snapshot(None)
                    .map(|s| doctor::run(&FsRoot::live(), &s, &reserved))
                    .map_err(|e| e.to_string())?;
                Ok(serde_json::json!({"nodes": [{"checks": checks}]}))
            };
            for (host, r) in on_every_node(&inv, &here, a, "a simulated node has no /proc or /sys to check")? {
                let checks = r.and_then(|doc| {
                    serde_json::from_value::<Vec<Check>>(doc["nodes"][0]["checks"].clone())
                        .map_err(|e| format!("not a doctor report: {e}"))
                });
                nodes.push((host, checks));
            }
        }
    }
    let any_fail = nodes
        .iter()
        .any(|(_, r)| r.as_ref().map_or(true, |c| c.iter().any(|x| x.status == Status::Fail)));
    let text = match output {
        OutputFormat::Json => {
            let list: Vec<serde_json::Value> = nodes
                .iter()
                .map(|(h, r)| match r {
                    Ok(c) => serde_json::json!({"host": h, "checks": c}),
                    Err(e) => serde_json::json!({"host": h, "error": e}),
                })
                .collect();
            serde_json::to_string_pretty(&serde_json::json!({"changed": false, "failed": any_fail, "nodes": list}))
                .unwrap_or_default()
                + "\n"
        }
        OutputFormat::Human => {
            let mut t = table(&["Host", "Check", "Status", "Detail", "Fix"]);
            for (h, r) in &nodes {
                match r {
                    Ok(checks) => {
                        for c in checks {
                            let st = match c.status {
                                Status::Pass => "pass",
                                Status::Skip => "skip",
                                Status::Warn => "WARN",
                                Status::Fail => "FAIL",
                            };
                            t.add_row(vec![
                                h.clone(),
                                c.check.clone(),
                                st.into(),
                                c.detail.clone(),
                                c.fix.clone(),
                            ]);
                        }
                    }
                    Err(e) => {
                        t.add_row(vec![h.clone(), "-".into(), "FAIL".into(), e.clone(), String::new()]);
                    }
                }
            }
            format!("{t}\n")
        }
    };
    Ok(Report {
        text,
        exit_code: if any_fail && !args.exit_zero {
            exit::CHECKS_FAILED
        } else {
            exit::OK
        },
    })
}
