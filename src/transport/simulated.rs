//! Simulated nodes: a snapshot made from a bundled profile, an hwloc XML export, or an NCCL
//! topology file (`simulate:` in cluster.yaml). No machine is touched.

use super::{Failure, FailureKind};
use crate::config::{profile_xml, NodeSpec};
use crate::model::NodeSnapshot;

pub fn snapshot(node: &NodeSpec) -> Result<NodeSnapshot, Failure> {
    let source = node
        .simulate
        .as_deref()
        .ok_or_else(|| Failure::new(FailureKind::SimulationFailed, "no `simulate:` source"))?;
    from_source(source, &node.host)
}

/// A snapshot named `hostname` from a profile name or a topology file path.
pub fn from_source(source: &str, hostname: &str) -> Result<NodeSnapshot, Failure> {
    let failed = |m: String| Failure::new(FailureKind::SimulationFailed, m);
    let (text, origin) = match profile_xml(source) {
        Some(text) => (text.to_string(), format!("profile:{source}")),
        None => (
            crate::input::read_text(
                std::path::Path::new(source),
                crate::input::TOPOLOGY_LIMIT,
                "topology file",
            )
            .map_err(|e| failed(format!("simulate: {source}: {e}")))?,
            source.to_string(),
        ),
    };
    crate::probe::snapshot_from_xml_text(&text, &origin, Some(hostname)).map_err(|e| failed(e.to_string()))
}
