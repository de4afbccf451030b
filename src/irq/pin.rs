//! `irq-pin` on one node: plan the pins, apply and verify them, remember them, keep
//! irqbalance off them, and optionally install boot-time re-pinning.

use super::irqbalance;
use super::system::System;
use super::{apply, is_managed, plan, read_cpu_topology, IrqError, IrqPlan, PinAction, PinState};
use crate::apply::tree::Tree;
use crate::model::files::{IRQ_STATE, IRQ_UDEV_RULE, IRQ_UNIT, IRQ_UNIT_NAME};
use crate::model::{CpuList, NodeSnapshot};
use crate::probe::fsroot::FsRoot;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IrqbalancePolicy {
    /// Say that irqbalance will undo the pins; change nothing about it.
    Warn,
    /// Add `--banmod=mlx5` to irqbalance's config and restart it (never stops it).
    Ban,
}

/// What `irq-pin` is asked to do on a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PinRequest {
    pub(crate) reserved: CpuList,
    pub(crate) include_control: bool,
    pub(crate) dry_run: bool,
    pub(crate) irqbalance: IrqbalancePolicy,
    pub(crate) install: bool,
    /// Put back what the first pin recorded instead of pinning (`--restore`).
    #[serde(default)]
    pub(crate) restore: bool,
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PinReport {
    pub(crate) hostname: String,
    pub(crate) changed: bool,
    pub(crate) dry_run: bool,
    pub(crate) msg: String,
    pub(crate) notes: Vec<String>,
    pub(crate) plan: IrqPlan,
}

/// Pin on the machine under `fs` (its snapshot already taken).
pub(crate) fn pin(fs: &FsRoot, snap: &NodeSnapshot, req: &PinRequest, sys: &dyn System) -> Result<PinReport, IrqError> {
    if req.restore {
        let r = super::restore::restore(fs, req.dry_run, sys)?;
        return Ok(PinReport {
            hostname: snap.hostname.clone(),
            changed: r.changed,
            dry_run: req.dry_run,
            msg: r.msg,
            notes: r.notes,
            plan: r.plan,
        });
    }
    let topo = read_cpu_topology(fs, snap)?;
    super::check_reserved(&topo, &req.reserved)?;
    let mut plan = plan(snap, &topo, &req.reserved, req.include_control, &|n| is_managed(fs, n))?;
    if !req.dry_run && !sys.is_root() && plan.pins.iter().any(|p| p.action == PinAction::Set) {
        return Err(IrqError::NotRoot);
    }
    let mut changed = false;
    let mut notes = plan.notes.clone();
    let ib = irqbalance::status(fs);
    if !req.dry_run {
        // What is about to change is written down first: `--restore` puts it back.
        super::restore::remember(fs, snap, &plan, about_to_ban(&ib, req))?;
        apply(fs, &mut plan);
        changed |= plan.pins.iter().any(|p| p.action == PinAction::Set);
        remember(fs, &plan, req.include_control)?;
    }
    changed |= keep_irqbalance_off(fs, &ib, req, sys, &mut notes)?;
    if req.install && !req.dry_run {
        changed |= install(fs, req, sys, &mut notes)?;
    }
    let msg = summary(&plan, req.dry_run);
    Ok(PinReport {
        hostname: snap.hostname.clone(),
        changed,
        dry_run: req.dry_run,
        msg,
        notes,
        plan,
    })
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> IrqError + '_ {
    move |source| IrqError::Io {
        what: what.to_string(),
        source,
    }
}

/// Remember what was pinned: `doctor` then tells pins undone from pins never made.
fn remember(fs: &FsRoot, plan: &IrqPlan, include_control: bool) -> Result<(), IrqError> {
    let state = serde_json::to_string_pretty(&PinState::of(plan, include_control)).map_err(|e| IrqError::Io {
        what: format!("serialising {IRQ_STATE}"),
        source: e.into(),
    })? + "\n";
    Tree::open(fs.root())?.write(IRQ_STATE, state.as_bytes(), 0o644)?;
    Ok(())
}

/// The irqbalance config `keep_irqbalance_off` is about to change, if it is.
fn about_to_ban<'a>(ib: &'a irqbalance::Status, req: &PinRequest) -> Option<&'a str> {
    (req.irqbalance == IrqbalancePolicy::Ban && !req.dry_run && ib.running && !ib.bans_mlx5)
        .then_some(ib.config.as_str())
}

/// irqbalance would move the pins again: ban mlx5 in its config (with `--irqbalance ban`) or
/// say so.
fn keep_irqbalance_off(
    fs: &FsRoot,
    ib: &irqbalance::Status,
    req: &PinRequest,
    sys: &dyn System,
    notes: &mut Vec<String>,
) -> Result<bool, IrqError> {
    if !ib.running || ib.bans_mlx5 {
        return Ok(false);
    }
    if req.irqbalance != IrqbalancePolicy::Ban || req.dry_run {
        notes.push(format!(
            "irqbalance is running and will move these interrupts again; `--irqbalance ban` adds {} to {} and restarts it",
            irqbalance::BAN,
            ib.config
        ));
        return Ok(false);
    }
    let tree = Tree::open(fs.root())?;
    let before = tree
        .read_text(&ib.config, irqbalance::CONFIG_LIMIT)?
        .unwrap_or_default();
    let after = irqbalance::with_ban(&before).map_err(|why| IrqError::Io {
        what: format!("{}: {why}", tree.show(&ib.config)),
        source: std::io::ErrorKind::InvalidData.into(),
    })?;
    // The backup keeps the operator's file as it was before topo-tune first touched it.
    let backup = format!("{}.topo-tune.bak", ib.config);
    if !before.is_empty() && tree.read(&backup, irqbalance::CONFIG_LIMIT)?.is_none() {
        tree.write(&backup, before.as_bytes(), 0o644)?;
    }
    let changed = tree.write(&ib.config, after.as_bytes(), 0o644)?;
    let restart = super::system::restart_irqbalance(sys);
    notes.push(format!(
        "irqbalance: {} now bans mlx5 ({}); {restart}",
        ib.config,
        irqbalance::BAN
    ));
    Ok(changed)
}

/// The boot unit and udev rule that pin again at boot and on driver reloads.
fn install(fs: &FsRoot, req: &PinRequest, sys: &dyn System, notes: &mut Vec<String>) -> Result<bool, IrqError> {
    let bin = sys.own_binary().map_err(io("finding topo-tune's own binary"))?;
    let mut args = String::new();
    if !req.reserved.is_empty() {
        args.push_str(&format!(" --reserve-cpus {}", req.reserved));
    }
    if req.include_control {
        args.push_str(" --include-control");
    }
    let bin = bin
        .to_str()
        .filter(|b| b.starts_with('/') && !b.chars().any(char::is_control))
        .ok_or_else(|| IrqError::Io {
            what: format!(
                "{}: the unit needs an absolute UTF-8 path without control characters",
                bin.display()
            ),
            source: std::io::ErrorKind::InvalidInput.into(),
        })?;
    let unit = include_str!("../../templates/topo-tune-irq-pin.service")
        .replace("{{BIN}}", &systemd_quote(bin))
        .replace("{{ARGS}}", &args);
    let rule = include_str!("../../templates/99-topo-tune-irq-pin.rules");
    let mut changed = false;
    let tree = Tree::open(fs.root())?;
    for (path, text) in [(IRQ_UNIT, unit.as_str()), (IRQ_UDEV_RULE, rule)] {
        changed |= tree.write(path, text.as_bytes(), 0o644)?;
    }
    let enabled = sys.systemctl(&["daemon-reload"]).and_then(|ok| {
        if ok {
            sys.systemctl(&["enable", IRQ_UNIT_NAME])
        } else {
            Some(false)
        }
    });
    notes.push(match enabled {
        Some(true) => format!("installed {IRQ_UNIT_NAME} (enabled)"),
        Some(false) => format!("installed {IRQ_UNIT_NAME}: enabling FAILED, run `systemctl enable {IRQ_UNIT_NAME}`"),
        None => "installed the unit and udev rule under the --fsroot tree (not enabled)".into(),
    });
    Ok(changed)
}

/// One word of an `ExecStart=` line, quoted as systemd.exec(5) and systemd.unit(5) read
/// it: inside double quotes, `\` and `"` escaped, `%` (a specifier) as `%%`, `$` (a variable)
/// as `$$`. A path with spaces or `%` then runs as itself.
pub(crate) fn systemd_quote(word: &str) -> String {
    let mut out = String::from("\"");
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the run leaves: a dry run says what is to move; a real one what it moved and what
/// is still left to move (the moves that failed).
fn summary(plan: &IrqPlan, dry_run: bool) -> String {
    let count = |a: PinAction| plan.pins.iter().filter(|p| p.action == a).count();
    let moves = if dry_run {
        format!("dry run: {} to move", count(PinAction::Set))
    } else {
        format!(
            "{} moved, {} left to move",
            count(PinAction::Set),
            count(PinAction::Failed)
        )
    };
    format!(
        "{moves}, {} already placed, {} unsupported (managed), {} control left alone, {} failed",
        count(PinAction::Keep),
        count(PinAction::Unsupported),
        count(PinAction::Leave),
        count(PinAction::Failed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::irq::system::FakeSystem;

    fn request(irqbalance: IrqbalancePolicy) -> PinRequest {
        PinRequest {
            reserved: CpuList::parse("0-3").unwrap(),
            include_control: false,
            dry_run: false,
            irqbalance,
            install: true,
            restore: false,
        }
    }

    #[test]
    fn install_writes_the_unit_and_enables_it_through_systemctl() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FsRoot::new(dir.path());
        let sys = FakeSystem {
            root: true,
            systemctl_ok: true,
            ..FakeSystem::default()
        };
        let mut notes = Vec::new();
        assert!(install(&fs, &request(IrqbalancePolicy::Warn), &sys, &mut notes).unwrap());
        let unit = std::fs::read_to_string(fs.path(IRQ_UNIT)).unwrap();
        assert!(
            unit.contains("ExecStart=\"/usr/local/bin/topo-tune\" irq-pin --reserve-cpus 0-3\n"),
            "{unit}"
        );
        assert_eq!(
            *sys.calls.lock().unwrap(),
            ["systemctl daemon-reload", "systemctl enable topo-tune-irq-pin.service"]
        );
        assert_eq!(notes, ["installed topo-tune-irq-pin.service (enabled)"]);
        // Again: same bytes, nothing changed; systemctl is still asked (it is idempotent).
        assert!(!install(&fs, &request(IrqbalancePolicy::Warn), &sys, &mut notes).unwrap());
    }

    #[test]
    fn a_running_irqbalance_is_banned_and_restarted_or_only_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/4242")).unwrap();
        std::fs::write(dir.path().join("proc/4242/comm"), "irqbalance\n").unwrap();
        std::fs::create_dir_all(dir.path().join("etc/default")).unwrap();
        std::fs::write(
            dir.path().join("etc/default/irqbalance"),
            "IRQBALANCE_ARGS=\"--policyscript=/x\"\n",
        )
        .unwrap();
        let fs = FsRoot::new(dir.path());
        let sys = FakeSystem {
            root: true,
            systemctl_ok: false,
            ..FakeSystem::default()
        };
        let mut notes = Vec::new();
        assert!(!keep_irqbalance_off(
            &fs,
            &irqbalance::status(&fs),
            &request(IrqbalancePolicy::Warn),
            &sys,
            &mut notes
        )
        .unwrap());
        assert!(sys.calls.lock().unwrap().is_empty(), "warn changes nothing");
        assert!(keep_irqbalance_off(
            &fs,
            &irqbalance::status(&fs),
            &request(IrqbalancePolicy::Ban),
            &sys,
            &mut notes
        )
        .unwrap());
        assert_eq!(*sys.calls.lock().unwrap(), ["systemctl try-restart irqbalance"]);
        assert!(
            notes[1].ends_with("restart FAILED: run `systemctl try-restart irqbalance`"),
            "{notes:?}"
        );
        assert_eq!(
            std::fs::read_to_string(fs.path("/etc/default/irqbalance.topo-tune.bak")).unwrap(),
            "IRQBALANCE_ARGS=\"--policyscript=/x\"\n",
            "the operator's file is backed up"
        );
    }

    #[test]
    fn exec_start_words_are_quoted_as_systemd_reads_them() {
        assert_eq!(systemd_quote("/opt/my tools/topo-tune"), "\"/opt/my tools/topo-tune\"");
        assert_eq!(systemd_quote("/opt/100%/t$x\\\""), "\"/opt/100%%/t$$x\\\\\\\"\"");
    }
}
