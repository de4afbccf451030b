//! AWS `DescribeInstanceTopology`'s answer (`aws ec2 describe-instance-topology`): each instance
//! with its network nodes, top level first. Each instance becomes a host with one port on its
//! bottom-level node; the levels above are the switches above it (AWS documents the list as
//! "the network nodes, from the top of the hierarchy to the bottom", up to 3 or 4 levels).

use super::ibnet::{Kind, Link, Node, ParseError};
use serde::Deserialize;

/// The most instances an answer may hold here, and network nodes per instance.
const MAX_INSTANCES: usize = 100_000;
const MAX_LEVELS: usize = 8;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    instances: Vec<Instance>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Instance {
    instance_id: String,
    network_nodes: Vec<String>,
    #[serde(default)]
    group_name: Option<String>,
}

fn plain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Placement group (`GroupName`; `-` for none) → its instances.
pub(crate) type Groups = std::collections::BTreeMap<String, Vec<String>>;

/// The instances as the nodes of a capture: a switch per network node (its id as its name),
/// a CA per instance described `<instance-id> ena`; and each placement group's instances (an
/// answer mixing groups is told, naming the instances).
pub(crate) fn parse(text: &str) -> Result<(Vec<Node>, Groups), ParseError> {
    let bad = |m: String| ParseError { line: 0, message: m };
    let a: Answer = serde_json::from_str(text).map_err(|e| ParseError {
        line: e.line(),
        message: format!("not a DescribeInstanceTopology answer: {e}"),
    })?;
    if a.instances.is_empty() || a.instances.len() > MAX_INSTANCES {
        return Err(bad(format!(
            "{} instances: 1 to {MAX_INSTANCES} expected",
            a.instances.len()
        )));
    }
    let mut groups = Groups::new();
    let mut switches: std::collections::BTreeMap<String, Node> = std::collections::BTreeMap::new();
    let id_of = |k: usize| format!("S-{k:016x}");
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    // Links already made (either way round): a lookup, not a scan of a node's links (quadratic
    // under a node with 20,000 instances below it).
    let mut joined: std::collections::HashSet<(usize, usize)> = std::collections::HashSet::new();
    for (i, inst) in a.instances.iter().enumerate() {
        check_instance(i, inst, &mut seen)?;
        let group = inst
            .group_name
            .clone()
            .filter(|g| plain(g))
            .unwrap_or_else(|| "-".into());
        groups.entry(group).or_default().push(inst.instance_id.clone());
        for nn in &inst.network_nodes {
            let next = index.len();
            let k = *index.entry(nn.clone()).or_insert(next);
            switches.entry(nn.clone()).or_insert_with(|| Node {
                kind: Kind::Switch,
                id: id_of(k),
                ports: super::ibnet::MAX_PORTS,
                desc: nn.clone(),
                lid: None,
                line: 0,
                links: Vec::new(),
            });
        }
        // Each level joined to the one below it (top first), and the bottom to the instance.
        for pair in inst.network_nodes.windows(2) {
            let (a, b) = (index[&pair[0]], index[&pair[1]]);
            if !joined.insert((a.min(b), a.max(b))) {
                continue;
            }
            if let Some(up) = switches.get_mut(&pair[0]) {
                up.links.push(link(&id_of(b), None));
            }
            if let Some(down) = switches.get_mut(&pair[1]) {
                down.links.push(link(&id_of(a), None));
            }
        }
        let host = format!("H-{:016x}", i + 1);
        let bottom = inst.network_nodes.last().map(String::as_str).unwrap_or_default();
        if let Some(s) = switches.get_mut(bottom) {
            s.links.push(link(&host, Some(format!("{} ena", inst.instance_id))));
        }
    }
    let mut nodes: Vec<Node> = switches.into_values().collect();
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((nodes, groups))
}

/// Each instance's port described by its host name where `map` has one (`<host> ena`), so the
/// fabric's hosts are the cluster's; the instances it does not map are returned.
pub(crate) fn name_instances(nodes: &mut [Node], map: &std::collections::HashMap<String, String>) -> Vec<String> {
    let mut unmapped = Vec::new();
    for l in nodes.iter_mut().flat_map(|n| n.links.iter_mut()) {
        let Some(id) = l.peer_desc.as_deref().and_then(|d| d.strip_suffix(" ena")) else {
            continue;
        };
        match map.get(id) {
            Some(host) => l.peer_desc = Some(format!("{host} ena")),
            None => unmapped.push(id.to_string()),
        }
    }
    unmapped
}

/// One instance as an answer must hold it: a plain id not seen before, 1 to `MAX_LEVELS`
/// network nodes, none twice, each a plain id.
fn check_instance<'a>(
    i: usize,
    inst: &'a Instance,
    seen: &mut std::collections::HashMap<&'a str, usize>,
) -> Result<(), ParseError> {
    let bad = |m: String| ParseError { line: 0, message: m };
    if !plain(&inst.instance_id) || inst.network_nodes.is_empty() || inst.network_nodes.len() > MAX_LEVELS {
        return Err(bad(format!(
            "Instances[{i}]: an InstanceId and 1 to {MAX_LEVELS} NetworkNodes expected"
        )));
    }
    if let Some(first) = seen.insert(inst.instance_id.as_str(), i) {
        return Err(bad(format!(
            "Instances[{i}]: {} is Instances[{first}] again: one answer lists each instance once",
            inst.instance_id
        )));
    }
    let distinct: std::collections::HashSet<&String> = inst.network_nodes.iter().collect();
    if distinct.len() != inst.network_nodes.len() {
        return Err(bad(format!(
            "Instances[{i}].NetworkNodes: a network node twice in one path"
        )));
    }
    if let Some(nn) = inst.network_nodes.iter().find(|n| !plain(n)) {
        return Err(bad(format!(
            "Instances[{i}].NetworkNodes: {nn:?} is not a network node id"
        )));
    }
    Ok(())
}

fn link(peer: &str, desc: Option<String>) -> Link {
    Link {
        port: 0,
        peer: peer.to_string(),
        peer_port: 0,
        peer_desc: desc,
        ca_lid: Some(1),
        width: None,
        speed: None,
        line: 0,
    }
}
