//! `doctor`'s checks where they are asked for: this machine (or a `--fsroot` tree), or every
//! node of a cluster through the node protocol; and node-exporter's textfile of the results.

use super::gather::Names;
use super::reach::{machine_jobs, on_nodes};
use super::settings::{DoctorSettings, Scope};
use crate::config::Inventory;
use crate::doctor::DoctorRequest;
use crate::error::Error;
use crate::model::{Failure, FailureKind, NodeOutcome};
use crate::node::calls::{Doctor, DoctorReport};
use crate::report::doctor::DoctorDetail;
use crate::report::envelope::NodeRow;
use crate::report::Printer;
use crate::transport::NodeEnv;

/// One row per node checked (this machine's row is named by its own hostname).
pub(crate) fn checks(s: &DoctorSettings, printer: &Printer) -> Result<Vec<NodeRow<Option<DoctorDetail>>>, Error> {
    let call = Doctor(DoctorRequest {
        reserved: s.reserved.clone(),
        nccl_version: s.nccl_version,
    });
    match &s.scope {
        Scope::Here { fsroot } => {
            let env = NodeEnv {
                fsroot: fsroot.clone(),
                nvml_fixture: s.nvml_fixture.clone(),
                ..NodeEnv::live()
            };
            let report = call.run(&env)?;
            Ok(vec![NodeRow::ok(
                &report.hostname,
                false,
                Some(DoctorDetail::from(&report)),
            )])
        }
        Scope::Cluster { inv, reach } => {
            let jobs = machine_jobs(inv, |_| call.clone());
            let mut outcomes = on_nodes(inv, reach, printer, jobs)?;
            let names = Names::of(inv);
            for o in &mut outcomes {
                refuse_another_nodes(o, inv, &names);
            }
            add_consistency(&mut outcomes);
            Ok(outcomes
                .iter()
                .map(|o| NodeRow::from_outcome(o, |r| (false, Some(DoctorDetail::from(r))), || None))
                .collect())
        }
    }
}

/// A node that answers as another node of the inventory (a crossed ssh alias, a cloned
/// image's stale hostname) would show, count and gauge that node's checks twice: its
/// answer is refused.
fn refuse_another_nodes(o: &mut NodeOutcome<DoctorReport>, inv: &Inventory, names: &Names) {
    let Ok(report) = &o.result else { return };
    let Some(node) = inv.nodes.iter().find(|n| n.host == o.host) else {
        return;
    };
    if let Some(other) = names.other_node(node, &report.hostname) {
        let why = format!(
            "the answer is refused: it comes from `{other}`, another node of the inventory, not `{}`",
            o.host
        );
        o.result = Err(Failure::new(FailureKind::BadAnswer, why));
    }
}

/// The nodes that answered, held to each other: each gets its `cluster-consistency` row (its
/// NCCL, driver, CUDA, kernel and NIC firmware against its class's majority).
fn add_consistency(outcomes: &mut [NodeOutcome<DoctorReport>]) {
    let judged: Vec<(String, crate::doctor::Finding)> = {
        let nodes: Vec<(&str, &crate::doctor::consistency::Versions)> = outcomes
            .iter()
            .filter_map(|o| Some((o.host.as_str(), o.result.as_ref().ok()?.versions.as_ref()?)))
            .collect();
        crate::doctor::consistency::compare(&nodes)
            .into_iter()
            .map(|(h, f)| (h.to_string(), f))
            .collect()
    };
    for (host, finding) in judged {
        if let Some(Ok(report)) = outcomes.iter_mut().find(|o| o.host == host).map(|o| o.result.as_mut()) {
            report
                .checks
                .push(crate::doctor::Check::of(crate::doctor::consistency::CHECK, finding));
        }
    }
}

/// The metrics file, replaced atomically (temp + fsync + rename, no link followed).
pub(crate) fn write_textfile(dir: &std::path::Path, rows: &[NodeRow<Option<DoctorDetail>>]) -> Result<String, Error> {
    use crate::apply::{tree::Tree, writer::WriteError};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = crate::report::metrics::textfile(rows, now);
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    tree.write(crate::report::metrics::TEXTFILE, text.as_bytes(), 0o644)
        .map_err(WriteError::from)?;
    Ok(dir.join(crate::report::metrics::TEXTFILE).display().to_string())
}
