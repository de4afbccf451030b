//! Simulated nodes: a snapshot made from a bundled profile, an hwloc XML export, or an NCCL
//! topology file (`simulate:` in cluster.yaml). No machine is touched. Each source is read
//! once per run, whatever the number of nodes made from it; an hwloc export given as a file is
//! imported the way `probe --from-hwloc-xml` imports it (in a child process, from the CLI).

use crate::config::{profile_xml, NodeSpec};
use crate::model::NodeSnapshot;
use crate::model::{Failure, FailureKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

type Cached = Result<Arc<NodeSnapshot>, Failure>;

/// One slot per source: concurrent requests for the same source wait for one reading.
fn slot(source: &str) -> Arc<OnceLock<Cached>> {
    static SOURCES: OnceLock<Mutex<HashMap<String, Arc<OnceLock<Cached>>>>> = OnceLock::new();
    let map = SOURCES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    Arc::clone(map.entry(source.to_string()).or_default())
}

pub(crate) fn snapshot(node: &NodeSpec) -> Result<NodeSnapshot, Failure> {
    let source = node
        .simulate
        .as_deref()
        .ok_or_else(|| Failure::new(FailureKind::SimulationFailed, "no `simulate:` source"))?;
    from_source(source, &node.host)
}

/// The one snapshot of a source, shared by every node made from it (named `simulated`:
/// callers that show a host name use the node's). Checked once, as a node's answer is.
pub(crate) fn shared(node: &NodeSpec) -> Result<Arc<NodeSnapshot>, Failure> {
    let source = node
        .simulate
        .as_deref()
        .ok_or_else(|| Failure::new(FailureKind::SimulationFailed, "no `simulate:` source"))?;
    slot(source).get_or_init(|| read_source(source).map(Arc::new)).clone()
}

/// A snapshot named `hostname` from a profile name or a topology file path.
pub fn from_source(source: &str, hostname: &str) -> Result<NodeSnapshot, Failure> {
    let cached = slot(source).get_or_init(|| read_source(source).map(Arc::new)).clone()?;
    let mut snap = (*cached).clone();
    snap.hostname = hostname.to_string();
    Ok(snap)
}

fn read_source(source: &str) -> Result<NodeSnapshot, Failure> {
    let failed = |m: String| Failure::new(FailureKind::SimulationFailed, m);
    match profile_xml(source) {
        Some(text) => crate::probe::snapshot_from_xml_text(text, &format!("profile:{source}"), Some("simulated")),
        None => crate::probe::snapshot_of_file(std::path::Path::new(source)),
    }
    .map_err(|e| failed(format!("simulate: {e}")))
    .and_then(|snap| {
        crate::model::snapshot_check::check(&snap).map_err(|e| failed(format!("simulate: {e}")))?;
        Ok(snap)
    })
}
