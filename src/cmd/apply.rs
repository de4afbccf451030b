//! `topo-tune apply`: start a rollout (plan, candidates per node, waves) or resume one, drive
//! it to its end (`flow::rollout`), and report every wave's figures and decision.

use super::{finish, Done};
use crate::canary::state::{Phase, Rollout, RolloutStatus, Store};
use crate::cli::ApplyArgs;
use crate::error::Error;
use crate::exit;
use crate::model::{Failure, FailureKind};
use crate::report::apply::{render_apply, ApplyDetail, ApplyPayload};
use crate::report::envelope::{Envelope, NodeRow};
use crate::report::Printer;

pub(crate) fn run(args: &ApplyArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let (r, store) = crate::flow::rollout::run(&s, printer)?;
    report(&r, &store, printer)
}

fn report(r: &Rollout, store: &Store, printer: &Printer) -> Result<Done, Error> {
    let mut rows = Vec::new();
    for (i, w) in r.waves.iter().enumerate() {
        for h in &w.hosts {
            let detail = ApplyDetail {
                wave: Some(i + 1),
                wave_name: Some(w.name.clone()),
                phase: Some(w.phase),
                run_id: (w.phase == Phase::Promoted && w.changed.contains(h)).then(|| w.run_id.clone()),
            };
            let changed = w.phase == Phase::Promoted && w.changed.contains(h);
            rows.push(match w.failures.get(h) {
                Some(m) => NodeRow::failed(h, Failure::new(FailureKind::WriteFailed, m.clone()), detail),
                None => NodeRow::ok(h, changed, detail),
            });
        }
    }
    for (h, why) in &r.untouched {
        rows.push(NodeRow::failed(
            h,
            Failure::new(FailureKind::Skipped, why.clone()),
            ApplyDetail::default(),
        ));
    }
    let promoted = r.waves.iter().filter(|w| w.phase == Phase::Promoted).count();
    let exit_code = match r.status {
        RolloutStatus::Completed => exit::OK,
        // Stopped before its end (a staged copy left behind): `--resume` finishes it.
        RolloutStatus::Running => exit::PARTIAL_FAILURE,
        RolloutStatus::Halted => exit::HALTED,
        RolloutStatus::Failed => exit::PARTIAL_FAILURE,
    };
    let msg = format!(
        "apply {}: {} — {promoted} of {} wave(s) promoted; record: {}",
        r.id,
        format!("{:?}", r.status).to_lowercase(),
        r.waves.len(),
        store.show(&r.id)
    );
    let envelope = Envelope {
        command: "apply",
        changed: rows.iter().any(|x| x.changed),
        failed: exit_code != exit::OK,
        msg,
        exit_code,
        nodes: rows,
        payload: ApplyPayload {
            rollout: r.clone(),
            state_file: store.show(&r.id),
        },
    };
    finish(printer, envelope, render_apply)
}
