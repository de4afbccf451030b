//! `irq-pin` where it is asked for: this machine (or a `--fsroot` tree, its side effects
//! through the tree's own `System`), or every node of a cluster through the node protocol.

use super::reach::{machine_jobs, on_nodes};
use super::settings::{IrqPinSettings, Scope};
use crate::error::Error;
use crate::irq::pin::PinReport;
use crate::irq::system::System;
use crate::model::NodeOutcome;
use crate::node::calls::IrqPin;
use crate::report::envelope::NodeRow;
use crate::report::irq::PinDetail;
use crate::report::Printer;
use crate::transport::NodeEnv;

/// One row per node pinned (this machine's row is named by its own hostname); on this
/// machine an error is the command's.
pub(crate) fn pin(s: &IrqPinSettings, printer: &Printer) -> Result<Vec<NodeRow<Option<PinDetail>>>, Error> {
    let call = IrqPin(s.request.clone());
    match &s.scope {
        Scope::Here { fsroot } => {
            let env = NodeEnv {
                fsroot: fsroot.clone(),
                ..NodeEnv::live()
            };
            let sys: &dyn System = crate::irq::system::for_root(fsroot.as_deref());
            let report = call.run(&env, sys)?;
            Ok(vec![NodeRow::ok(
                &report.hostname,
                report.changed,
                Some(PinDetail::from(&report)),
            )])
        }
        Scope::Cluster { inv, reach } => {
            let jobs = machine_jobs(inv, |_| call.clone());
            let outcomes: Vec<NodeOutcome<PinReport>> = on_nodes(inv, reach, printer, jobs)?;
            Ok(outcomes
                .iter()
                .map(|o| NodeRow::from_outcome(o, |r| (r.changed, Some(PinDetail::from(r))), || None))
                .collect())
        }
    }
}
