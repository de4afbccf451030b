//! `doctor`'s checks where they are asked for: this machine (or a `--fsroot` tree), or every
//! node of a cluster through the node protocol; and node-exporter's textfile of the results.

use super::reach::{machine_jobs, on_nodes};
use super::settings::{DoctorSettings, Scope};
use crate::doctor::DoctorRequest;
use crate::error::Error;
use crate::node::calls::Doctor;
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
            let outcomes = on_nodes(inv, reach, printer, jobs)?;
            Ok(outcomes
                .iter()
                .map(|o| NodeRow::from_outcome(o, |r| (false, Some(DoctorDetail::from(r))), || None))
                .collect())
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
