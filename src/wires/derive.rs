//! The fabric as the wires say it is, from a parsed capture: switches by level (a leaf has host
//! ports; each level above is the switches one hop further), parallel links per switch pair,
//! each host's ports and the leaf each lands on, the leaf groups (leaves that share hosts: a
//! scalable unit) and their rails — on a rail-optimised fabric the same HCA of every host of a
//! group lands on the same leaf — and what is wrong: a port on another rail's leaf, a leaf with
//! fewer uplinks than its peers, a leaf–spine pair its peers have and it lacks, a link trained
//! below its peers, host ports without a LID, two ports claiming one host and HCA. Pure.

use super::ibnet::{lane_gbps, Kind, Node};
use crate::model::{natural_cmp, natural_key};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the wires say.
#[cfg(test)]
mod tests {
    use super::*;

    fn switch(desc: &str) -> Node {
        Node {
            kind: Kind::Switch,
            id: "S-0000000000000001".into(),
            ports: 36,
            desc: desc.into(),
            lid: None,
            line: 1,
            links: Vec::new(),
        }
    }

    #[test]
    fn switch_names_from_descriptions() {
        assert_eq!(
            switch_name(&switch("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1")),
            "A09-P1-IBLEAF-04-04"
        );
        assert_eq!(switch_name(&switch("MF0;ib5:SX6036/U1")), "ib5");
        assert_eq!(switch_name(&switch("MF0;ibcore1:CS7500/L05/U1")), "ibcore1-L05-U1");
        assert_eq!(switch_name(&switch("MF0;ibcore1:CS7500/S02/U1")), "ibcore1-S02-U1");
        assert_eq!(
            switch_name(&switch("")),
            "S-0000000000000001",
            "no description: the GUID"
        );
        assert_eq!(
            switch_name(&switch("Quantum Mellanox Technologies")),
            "S-0000000000000001"
        );
        assert_eq!(
            host_and_hca("a08-p1-dgx-04-c17 mlx5_5"),
            Some(("a08-p1-dgx-04-c17".into(), "mlx5_5".into()))
        );
        assert_eq!(host_and_hca("MT4129 ConnectX7   Mellanox Technologies"), None);
        assert_eq!(host_and_hca("localhost HCA-1"), None);
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Discovered {
    pub(crate) switches: Vec<Switch>,
    pub(crate) hosts: Vec<Host>,
    pub(crate) groups: Vec<Group>,
    /// Rails per host of the compute groups (those whose hosts spread their ports over rail
    /// leaves); `null` when there are none, or a group of multi-port hosts is not
    /// rail-optimised. Groups of one-port hosts (login, storage, management) do not decide it.
    pub(crate) rails: Option<u32>,
    /// Ports no host name can be given to (an unset node description, a default host name).
    pub(crate) unnamed_ports: Vec<UnnamedPort>,
    /// SHARP aggregation nodes and other CAs that are no host.
    pub(crate) aggregation_nodes: usize,
    /// HCA → its rail across the compute groups (each rail leaf's HCA, in the HCAs' natural
    /// order), when every rail is one HCA name; empty otherwise.
    pub(crate) rail_hcas: BTreeMap<String, u32>,
    /// HCA → its plane, when the fabric is several planes (one capture each) and each HCA
    /// lands in one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) hca_planes: BTreeMap<String, u32>,
    /// Hosts of the compute groups with a port on another HCA's rail leaf, and why: no
    /// rail-dependent NCCL setting is made for them.
    pub(crate) off_rail: BTreeMap<String, String>,
    /// The planes read, one capture each, when more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) planes: Vec<Plane>,
    pub(crate) findings: Vec<Finding>,
}

/// One plane of a fabric read from several captures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Plane {
    pub(crate) file: String,
    pub(crate) switches: usize,
    pub(crate) hosts: usize,
    pub(crate) host_ports: usize,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Switch {
    pub(crate) name: String,
    pub(crate) id: String,
    /// 1: a leaf (host ports); 2: one hop above the leaves; …; `null`: joined to no leaf.
    pub(crate) level: Option<u32>,
    pub(crate) host_ports: u32,
    /// Links to switches one level up.
    pub(crate) uplinks: u32,
    /// Peer switch → parallel links.
    pub(crate) links: BTreeMap<String, u32>,
    /// Its plane (0-based), when several planes were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) plane: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) ports: Vec<HostPort>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct HostPort {
    /// The HCA as its node description names it (`mlx5_5`, `HCA-1`).
    pub(crate) port: String,
    pub(crate) switch: String,
    pub(crate) switch_port: u32,
    /// Its rail in its group (0-based), `null` when the group is not rail-optimised.
    pub(crate) rail: Option<u32>,
    /// `4xNDR`.
    pub(crate) speed: Option<String>,
    pub(crate) lid: Option<u32>,
    /// Its plane (0-based), when several planes were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) plane: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct UnnamedPort {
    pub(crate) id: String,
    pub(crate) desc: String,
    pub(crate) switch: String,
    pub(crate) switch_port: u32,
}

/// Leaves that share hosts (a scalable unit), with their rails.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Group {
    pub(crate) name: String,
    /// Leaves in rail order (rail-optimised) or name order.
    pub(crate) leaves: Vec<String>,
    pub(crate) hosts: Vec<String>,
    pub(crate) rails: Option<u32>,
    /// Why the group has no rails, when it has hosts and none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) not_rail_optimised: Option<String>,
    /// Its hosts have one port each: login, storage or management hosts beside the compute
    /// fabric, not a compute group that lacks rails.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) single_port_hosts: bool,
    /// The switches above the group's leaves.
    pub(crate) spines: Vec<String>,
    /// What the group's leaves carry up together, Gb/s (each link at its rate).
    pub(crate) uplink_gbps: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    pub(crate) code: &'static str,
    pub(crate) what: String,
    pub(crate) fix: String,
}

/// A node description's switch name: `MF0;A09-P1-IBLEAF-04-04:MQM9701/U1` →
/// `A09-P1-IBLEAF-04-04`; an ASIC of a director chassis, `MF0;ibcore1:CS7500/L05/U1` (a line
/// card) or `…/S02/U1` (a spine card), keeps its card and ASIC: `ibcore1-L05-U1`.
fn switch_name(n: &Node) -> String {
    let d = n.desc.trim();
    let d = d.split_once(';').map_or(d, |(_, r)| r);
    let (box_name, model) = d.split_once(':').map_or((d, ""), |(l, m)| (l.trim(), m.trim()));
    let parts: Vec<&str> = model.split('/').collect();
    let name = match parts.as_slice() {
        [_, card, asic] => format!("{box_name}-{card}-{asic}"),
        _ => box_name.to_string(),
    };
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if plain {
        name
    } else {
        n.id.clone()
    }
}

/// Host names ibnetdiscover shows for machines nobody named.
const DEFAULT_HOSTS: [&str; 3] = ["localhost", "ubuntu", "(none)"];

/// `a08-p1-dgx-04-c17 mlx5_5` → (host, HCA); an unset description (`MT4129 ConnectX7
/// Mellanox Technologies`), a SHARP node or a default host name → `None`.
fn host_and_hca(desc: &str) -> Option<(String, String)> {
    let words: Vec<&str> = desc.split_whitespace().collect();
    match words.as_slice() {
        [host, hca] if !DEFAULT_HOSTS.contains(host) && !host.starts_with("MT") => {
            Some((host.to_string(), hca.to_string()))
        }
        [host] if !DEFAULT_HOSTS.contains(host) && !host.starts_with("MT") => Some((host.to_string(), "port".into())),
        _ => None,
    }
}

/// Whether a description's host and HCA are one host name and one device name each (a
/// range `gpu[1-3]` or a list `gpu1,gpu2` is none: it would become hosts in fabric.yaml
/// and `Nodes=gpu[1-3]` in topology.conf).
fn plain_names(host: &str, hca: &str) -> bool {
    crate::model::snapshot_check::host_name(host).is_ok()
        && !hca.is_empty()
        && hca.len() <= 64
        && hca.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn aggregation(desc: &str) -> bool {
    desc.contains("Aggregation Node")
}

/// Links' Gb/s: `4xNDR` → 400.
fn gbps(width: Option<u32>, speed: Option<&str>) -> Option<f64> {
    Some(f64::from(width?) * lane_gbps(speed?)?)
}

/// Derive the fabric from a capture; `names`: node GUID (16 hex digits, lower case) → host
/// name, for CAs whose own description names none.
pub(crate) fn derive(nodes: &[Node], names: &HashMap<String, String>) -> Discovered {
    let switch_ids: HashMap<&str, String> = unique_names(nodes);
    let mut r = Reading {
        sw: nodes
            .iter()
            .filter(|n| n.kind == Kind::Switch)
            .map(|n| {
                let name = switch_ids[n.id.as_str()].clone();
                let s = Switch {
                    name: name.clone(),
                    id: n.id.clone(),
                    level: None,
                    host_ports: 0,
                    uplinks: 0,
                    links: BTreeMap::new(),
                    plane: None,
                };
                (name, s)
            })
            .collect(),
        ..Reading::default()
    };
    for n in nodes.iter().filter(|n| n.kind == Kind::Switch) {
        r.block(n, &switch_ids[n.id.as_str()], &switch_ids, names);
    }
    let Reading {
        mut sw,
        mut hosts,
        unnamed,
        aggregation_nodes,
        mut findings,
        link_rates,
        not_names,
        impossible,
        ..
    } = r;
    findings.extend(impossible.into_iter().map(impossible_cabling));
    findings.extend(not_host_names(&not_names));
    for ports in hosts.values_mut() {
        ports.sort_by(|a, b| natural_cmp(&a.port, &b.port));
    }
    let empty = levels(&mut sw);
    findings.extend(hosts_on_spines(&sw, &hosts));
    findings.extend(empty.iter().map(|name| Finding {
        severity: Severity::Warn,
        code: "leaf-without-hosts",
        what: format!("{name} carries no host port and hangs below the spines like a leaf: a leaf whose hosts are down, uncabled or not yet installed"),
        fix: format!("check {name}'s host cables and the hosts behind it (iblinkinfo -S on {name}); a spare leaf left in the fabric can stay"),
    }));
    let mut groups = groups(&sw, &mut hosts);
    // Each rail group's leaves → the HCA most of their ports are, once: the wrong-rail check,
    // the rail map and the ports' rail numbers all read it.
    let leaf_hcas = leaf_hcas(&groups, &hosts);
    findings.extend(miscabled(&groups, &hosts, &leaf_hcas));
    findings.extend(uplink_findings(&sw, &groups));
    findings.extend(slow_links(&link_rates));
    findings.extend(unnamed_finding(&unnamed));
    let up_gbps = uplink_gbps(nodes, &switch_ids, &sw);
    for g in &mut groups {
        g.uplink_gbps = g
            .leaves
            .iter()
            .filter_map(|l| up_gbps.get(l.as_str()))
            .fold(0.0, |a, b| a + b);
    }
    let rails = common_rails(&groups);
    findings.extend(short_groups(&groups, rails));
    let rail_map = rail_map(&groups, &hosts, rails, &leaf_hcas);
    findings.extend(rail_map.named_apart);
    fabric_rails(&groups, &mut hosts, &rail_map.hcas, &leaf_hcas);
    Discovered {
        switches: sw.into_values().collect(),
        hosts: hosts.into_iter().map(|(name, ports)| Host { name, ports }).collect(),
        groups,
        rails,
        unnamed_ports: unnamed,
        aggregation_nodes,
        rail_hcas: rail_map.hcas,
        hca_planes: BTreeMap::new(),
        off_rail: rail_map.off_rail,
        planes: Vec::new(),
        findings,
    }
}

/// What the switch blocks' port lines give, gathered port by port.
#[derive(Default)]
struct Reading<'a> {
    sw: BTreeMap<String, Switch>,
    hosts: BTreeMap<String, Vec<HostPort>>,
    unnamed: Vec<UnnamedPort>,
    aggregation_nodes: usize,
    findings: Vec<Finding>,
    /// (host, HCA) → the port that claimed it first.
    seen_ports: HashMap<(String, String), &'a str>,
    /// (between switches, lanes, speed, where) of every link end.
    /// Where is the switch and its port: a message is made only for a slow link.
    link_rates: Vec<LinkRate<'a>>,
    /// Ports whose description is not one host name, quoted with where they are.
    not_names: Vec<String>,
    /// Cabling that cannot be: a switch cabled to itself, a port listed twice.
    impossible: Vec<String>,
}

/// One link end's rate: between switches, lanes, speed, the switch and its port.
type LinkRate<'a> = (bool, Option<u32>, Option<&'a str>, &'a str, u32);

impl<'a> Reading<'a> {
    /// A switch's block, port by port; cabling that cannot be is noted, not read.
    fn block(&mut self, n: &'a Node, me: &'a str, ids: &HashMap<&str, String>, names: &HashMap<String, String>) {
        let mut listed = std::collections::HashSet::new();
        for l in &n.links {
            // Port 0 is an AWS answer's (it numbers no ports).
            if l.port != 0 && !listed.insert(l.port) {
                self.impossible.push(format!(
                    "{me} port {} is listed twice (line {}): one port, one cable",
                    l.port, l.line
                ));
                continue;
            }
            if l.peer == n.id {
                self.impossible.push(format!(
                    "{me} port {} is cabled to {me} itself (port {}, line {})",
                    l.port, l.peer_port, l.line
                ));
                continue;
            }
            self.port(me, l, ids, names);
        }
    }

    /// One port line of switch `me`: a link to a switch, a SHARP node, a named host port, or
    /// an unnamed one.
    fn port(
        &mut self,
        me: &'a str,
        l: &'a super::ibnet::Link,
        ids: &HashMap<&str, String>,
        names: &HashMap<String, String>,
    ) {
        self.link_rates
            .push((l.peer.starts_with("S-"), l.width, l.speed.as_deref(), me, l.port));
        if let Some(peer) = ids.get(l.peer.as_str()) {
            if let Some(s) = self.sw.get_mut(me) {
                *s.links.entry(peer.clone()).or_insert(0) += 1;
            }
            return;
        }
        let desc = l.peer_desc.clone().unwrap_or_default();
        if aggregation(&desc) {
            self.aggregation_nodes += 1;
            return;
        }
        if let Some(s) = self.sw.get_mut(me) {
            s.host_ports += 1;
        }
        let guid = l.peer.trim_start_matches("H-").to_ascii_lowercase();
        let described = host_and_hca(&desc);
        if described.as_ref().is_some_and(|(h, c)| !plain_names(h, c)) {
            self.not_names.push(format!("{me} port {}: {:?}", l.port, desc));
        }
        let named = described
            .filter(|(h, c)| plain_names(h, c))
            .or_else(|| names.get(&guid).map(|h| (h.clone(), format!("H-{guid}"))));
        let Some((host, hca)) = named else {
            if l.ca_lid.is_none() {
                self.findings.push(Finding {
                    severity: Severity::Fail,
                    code: "no-lid",
                    what: format!("{} (unnamed, on {me} port {}) has no LID", l.peer, l.port),
                    fix: "the subnet manager has not configured this port: check opensm/UFM's log and that the port is ACTIVE (ibstat)".into(),
                });
            }
            self.unnamed.push(UnnamedPort {
                id: l.peer.clone(),
                desc,
                switch: me.to_string(),
                switch_port: l.port,
            });
            return;
        };
        self.check_port(me, l, &host, &hca);
        let speed = match (l.width, &l.speed) {
            (Some(w), Some(s)) => Some(format!("{w}x{s}")),
            _ => None,
        };
        self.hosts.entry(host).or_default().push(HostPort {
            port: hca,
            switch: me.to_string(),
            switch_port: l.port,
            rail: None,
            speed,
            lid: l.ca_lid,
            plane: None,
        });
    }

    /// A host port claimed twice, or without a LID.
    fn check_port(&mut self, me: &str, l: &'a super::ibnet::Link, host: &str, hca: &str) {
        if let Some(other) = self
            .seen_ports
            .insert((host.to_string(), hca.to_string()), l.peer.as_str())
        {
            if other != l.peer {
                self.findings.push(Finding {
                    severity: Severity::Fail,
                    code: "duplicate-host-port",
                    what: format!("{host} {hca} is claimed by two ports ({other} and {}): two machines answer to one name", l.peer),
                    fix: "give each machine its own host name (node_desc follows the hostname: /sys/class/infiniband/*/node_desc)".into(),
                });
            }
        }
        if l.ca_lid.is_none() {
            self.findings.push(Finding {
                severity: Severity::Fail,
                code: "no-lid",
                what: format!("{host} {hca} (on {me} port {}) has no LID", l.port),
                fix: "the subnet manager has not configured this port: check opensm/UFM's log and that the port is ACTIVE (ibstat)".into(),
            });
        }
    }
}

/// Parts of an ibnetdiscover capture no link joins, when two or more carry hosts: two planes
/// pasted into one file (or a fabric cut in two), which no one fabric model describes. (An
/// AWS answer lists no level above its top nodes: its parts are never joined, and it is not
/// asked.)
pub(crate) fn planes<'a>(switches: impl IntoIterator<Item = &'a Switch>) -> Option<Finding> {
    let sw: BTreeMap<&str, &Switch> = switches.into_iter().map(|s| (s.name.as_str(), s)).collect();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut parts: Vec<(String, usize, u32)> = Vec::new();
    for start in sw.keys().copied() {
        if !seen.insert(start) {
            continue;
        }
        let (mut switches, mut host_ports) = (0usize, 0u32);
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            switches += 1;
            host_ports += sw[x].host_ports;
            for p in sw[x].links.keys() {
                if sw.contains_key(p.as_str()) && seen.insert(p) {
                    stack.push(p);
                }
            }
        }
        if host_ports > 0 {
            parts.push((start.to_string(), switches, host_ports));
        }
    }
    if parts.len() < 2 {
        return None;
    }
    let shown: Vec<String> = parts
        .iter()
        .take(8)
        .map(|(first, n, h)| format!("{n} switch(es) with {h} host port(s), from {first}"))
        .collect();
    Some(Finding {
        severity: Severity::Fail,
        code: "disconnected",
        what: format!(
            "the capture holds {} fabrics no link joins ({}): two planes in one file, or a fabric cut in two",
            parts.len(),
            shown.join("; ")
        ),
        fix: "capture each plane on its own (ibnetdiscover from a port of that plane) and read each file on its own; if it is one fabric, find the cut links (iblinkinfo)".into(),
    })
}

fn impossible_cabling(what: String) -> Finding {
    Finding {
        severity: Severity::Fail,
        code: "impossible-cabling",
        what,
        fix: "capture the fabric again (ibnetdiscover); if it stays, the capture was edited or the switch misreports its ports".into(),
    }
}

/// Host ports cabled to a switch above the leaves: their traffic to a leaf's hosts takes one
/// hop less than their peers', and a rail-optimised layout has no place for them.
fn hosts_on_spines(sw: &BTreeMap<String, Switch>, hosts: &BTreeMap<String, Vec<HostPort>>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (h, ports) in hosts {
        for p in ports {
            let Some(level) = sw.get(&p.switch).and_then(|s| s.level).filter(|l| *l >= 2) else {
                continue;
            };
            out.push(Finding {
                severity: Severity::Warn,
                code: "host-on-spine",
                what: format!(
                    "{h} {} is cabled to {} port {} (level {level}), a switch above the leaves",
                    p.port, p.switch, p.switch_port
                ),
                fix: format!(
                    "move {h} {} to a leaf port, or note it as a service host cabled to a spine by design",
                    p.port
                ),
            });
        }
    }
    out
}

/// Descriptions that are not one host name, quoted (the first 20, and how many more).
fn not_host_names(quoted: &[String]) -> Option<Finding> {
    let first = quoted.first()?;
    let shown = quoted.iter().take(20).cloned().collect::<Vec<_>>().join("; ");
    let more = quoted.len().saturating_sub(20);
    Some(Finding {
        severity: Severity::Warn,
        code: "not-a-host-name",
        what: format!(
            "{} port(s) describe something that is not one host name and are left unnamed: {shown}{}",
            quoted.len(),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ),
        fix: format!(
            "set the node description of each to `<hostname> <hca>` (the first: {first}); a range or a list names no one machine"
        ),
    })
}

fn unnamed_finding(unnamed: &[UnnamedPort]) -> Option<Finding> {
    let first = unnamed.first()?;
    Some(Finding {
        severity: Severity::Warn,
        code: "unnamed-ports",
        what: format!(
            "{} host port(s) name no host (an unset node description such as {:?}, or a default host name): left out of hosts and rails",
            unnamed.len(),
            first.desc
        ),
        fix: "set each HCA's node description to `<hostname> <hca>` (rdma-core's rdma-ndd does it at boot), or pass --guid-map FILE (`<guid> <hostname>` lines)".into(),
    })
}

/// Each switch's name from its description, made unique (a second `ib5` is `ib5-<guid>`).
fn unique_names(nodes: &[Node]) -> HashMap<&str, String> {
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut out = HashMap::new();
    for n in nodes.iter().filter(|n| n.kind == Kind::Switch) {
        let mut name = switch_name(n);
        if !taken.insert(name.clone()) {
            name = format!("{name}-{}", n.id.trim_start_matches("S-"));
            taken.insert(name.clone());
        }
        out.insert(n.id.as_str(), name);
    }
    out
}

/// The leaves: switches with host ports, less those above other leaves — a switch with host
/// ports cabled to other such switches is the upper one (a spine that also carries a few
/// hosts), the one joined to the most of them first, until no two leaves are cabled together.
fn leaves(sw: &BTreeMap<String, Switch>) -> BTreeSet<String> {
    let mut leaves: BTreeSet<String> = sw
        .values()
        .filter(|s| s.host_ports > 0)
        .map(|s| s.name.clone())
        .collect();
    loop {
        let joined = |s: &Switch, leaves: &BTreeSet<String>| s.links.keys().filter(|p| leaves.contains(*p)).count();
        let upper = leaves
            .iter()
            .map(|l| (joined(&sw[l], &leaves), sw[l].host_ports, l.clone()))
            .filter(|(n, _, _)| *n > 0)
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        match upper {
            Some((_, _, name)) => {
                leaves.remove(&name);
            }
            None => return leaves,
        }
    }
}

/// Level 1: the leaves; level k+1: switches joined to level k not yet placed. Returns the
/// leaves without hosts (placed at level 1, not above the spines).
fn levels(sw: &mut BTreeMap<String, Switch>) -> Vec<String> {
    let mut frontier: Vec<String> = leaves(sw).into_iter().collect();
    let mut level = 1;
    while !frontier.is_empty() {
        for f in &frontier {
            if let Some(s) = sw.get_mut(f) {
                s.level = Some(level);
            }
        }
        let next: BTreeSet<String> = frontier
            .iter()
            .flat_map(|f| sw[f].links.keys().cloned().collect::<Vec<_>>())
            .filter(|p| sw.get(p).is_some_and(|s| s.level.is_none()))
            .collect();
        frontier = next.into_iter().collect();
        level += 1;
    }
    // A switch without hosts above the spines that only hangs below them, cabled to spines a
    // leaf reaches (a subset of some leaf's peers): a leaf whose hosts are gone or not cabled,
    // not a core. A core reaches spines no one leaf does (one per pod), or sits above a level
    // the leaves do not reach.
    // Only the leaves below its first spine can hold all its peers: looked at there, not
    // across every leaf (100,000 leaves under the 98 cores of an AWS answer).
    let leaf_like = |s: &Switch| {
        let Some(first) = s.links.keys().next() else {
            return false;
        };
        sw[first]
            .links
            .keys()
            .filter(|l| sw[*l].level == Some(1))
            .any(|l| s.links.keys().all(|p| sw[l].links.contains_key(p)))
    };
    let empty_leaves: Vec<String> = sw
        .values()
        .filter(|s| s.host_ports == 0 && s.level == Some(3) && !s.links.is_empty())
        .filter(|s| s.links.keys().all(|p| sw[p].level == Some(2)))
        .filter(|s| leaf_like(s))
        .map(|s| s.name.clone())
        .collect();
    for name in &empty_leaves {
        if let Some(s) = sw.get_mut(name) {
            s.level = Some(1);
        }
    }
    let up: Vec<(String, u32)> = sw
        .values()
        .map(|s| {
            let n = s
                .links
                .iter()
                .filter(|(p, _)| matches!((sw[*p].level, s.level), (Some(a), Some(b)) if a == b + 1))
                .map(|(_, c)| *c)
                .sum();
            (s.name.clone(), n)
        })
        .collect();
    for (name, n) in up {
        if let Some(s) = sw.get_mut(&name) {
            s.uplinks = n;
        }
    }
    empty_leaves
}

/// Switches with host ports joined by hosts that have ports on both: each set a group, its
/// members in name order, the sets ordered by their first member.
fn components<'a>(sw: &'a BTreeMap<String, Switch>, hosts: &BTreeMap<String, Vec<HostPort>>) -> Vec<Vec<&'a str>> {
    // Every switch with host ports holds a group's hosts (a spine that carries a few hosts
    // too: its hosts are its own group).
    let leaves: Vec<&str> = sw
        .values()
        .filter(|s| s.host_ports > 0)
        .map(|s| s.name.as_str())
        .collect();
    let index: HashMap<&str, usize> = leaves.iter().enumerate().map(|(i, l)| (*l, i)).collect();
    let mut parent: Vec<usize> = (0..leaves.len()).collect();
    // Path halving: every walk shortens the chain it walked (linear in the hosts overall).
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for ports in hosts.values().filter(|ports| ports.len() > 1) {
        let on: Vec<usize> = ports
            .iter()
            .filter_map(|p| index.get(p.switch.as_str()).copied())
            .collect();
        for w in on.windows(2) {
            let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut members: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (i, l) in leaves.iter().enumerate() {
        members.entry(root(&mut parent, i)).or_default().push(l);
    }
    let mut ordered: Vec<Vec<&str>> = members.into_values().collect();
    for m in &mut ordered {
        m.sort_by(|a, b| natural_cmp(a, b));
    }
    ordered.sort_by(|a, b| natural_cmp(a[0], b[0]));
    ordered
}

/// The leaf groups, each group's rails when it is rail-optimised (some host spreads its ports
/// over the group's leaves), and each port's rail.
fn groups(sw: &BTreeMap<String, Switch>, hosts: &mut BTreeMap<String, Vec<HostPort>>) -> Vec<Group> {
    let ordered = components(sw, hosts);
    // Each switch's hosts, once: a group's hosts are its leaves' (looking through every host
    // per group was quadratic with 20,000 one-host leaves).
    let mut on: HashMap<String, Vec<String>> = HashMap::new();
    for (h, ports) in hosts.iter() {
        for p in ports {
            on.entry(p.switch.clone()).or_default().push(h.clone());
        }
    }
    let mut out = Vec::with_capacity(ordered.len());
    for (i, m) in ordered.iter().enumerate() {
        let mut gh: Vec<String> = m
            .iter()
            .flat_map(|l| on.get(*l).into_iter().flatten().cloned())
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        gh.sort_by(|a, b| natural_cmp(a, b));
        out.push(group(i, m, gh, sw, hosts));
    }
    out
}

fn group(
    i: usize,
    m: &[&str],
    gh: Vec<String>,
    sw: &BTreeMap<String, Switch>,
    hosts: &mut BTreeMap<String, Vec<HostPort>>,
) -> Group {
    // A one-leaf group's hosts land every port on it.
    let spread = m.len() > 1
        && gh.iter().any(|h| {
            hosts[h]
                .iter()
                .map(|p| p.switch.as_str())
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        });
    let (leaves, rails) = if spread {
        rail_order(m, &gh, hosts)
    } else {
        (m.iter().map(|s| s.to_string()).collect(), None)
    };
    if rails.is_some() {
        let rail_of: HashMap<&str, u32> = leaves.iter().enumerate().map(|(k, l)| (l.as_str(), k as u32)).collect();
        for h in &gh {
            if let Some(ports) = hosts.get_mut(h) {
                for p in ports.iter_mut() {
                    p.rail = rail_of.get(p.switch.as_str()).copied();
                }
            }
        }
    }
    let mut spines: Vec<String> = m
        .iter()
        .flat_map(|l| {
            sw[*l]
                .links
                .keys()
                .filter(|p| sw[*p].level == Some(2))
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    spines.sort_by(|a, b| natural_cmp(a, b));
    let single_port_hosts = !gh.is_empty() && gh.iter().all(|h| hosts[h].len() <= 1);
    let not_rail_optimised = (rails.is_none() && !gh.is_empty()).then(|| {
        if single_port_hosts {
            format!(
                "its {} host(s) have one port each: no rails (login, storage or management hosts beside a compute fabric, or a fabric of one port per host)",
                gh.len()
            )
        } else {
            format!(
                "its {} host(s) land every port on one leaf ({}): not rail-optimised",
                gh.len(),
                m.join(", ")
            )
        }
    });
    Group {
        name: if m.len() == 1 {
            m[0].to_string()
        } else {
            format!("su-{}", i + 1)
        },
        leaves,
        hosts: gh,
        rails,
        not_rail_optimised,
        single_port_hosts,
        spines,
        uplink_gbps: 0.0,
    }
}

/// The group's leaves ordered by rail: each leaf's rail is the HCA most of its ports are, and
/// rails go in the HCAs' natural order (`mlx5_0` < `mlx5_1` < `mlx5_4`; `HCA-1` < `HCA-2`).
fn rail_order(leaves: &[&str], gh: &[String], hosts: &BTreeMap<String, Vec<HostPort>>) -> (Vec<String>, Option<u32>) {
    let majority = majority_hca(leaves, gh, hosts);
    let mut ordered: Vec<String> = leaves.iter().map(|l| l.to_string()).collect();
    ordered.sort_by_cached_key(|l| (majority.get(l.as_str()).map(|h| natural_key(h)), natural_key(l)));
    (ordered, Some(leaves.len() as u32))
}

/// Each leaf → the HCA name most of its host ports carry.
fn majority_hca<'a>(
    leaves: &[&'a str],
    gh: &[String],
    hosts: &'a BTreeMap<String, Vec<HostPort>>,
) -> HashMap<&'a str, String> {
    let mut count: HashMap<&str, BTreeMap<&str, usize>> = HashMap::new();
    for h in gh {
        for p in &hosts[h] {
            *count
                .entry(p.switch.as_str())
                .or_default()
                .entry(p.port.as_str())
                .or_default() += 1;
        }
    }
    leaves
        .iter()
        .filter_map(|l| {
            let c = count.get(l)?;
            let (hca, _) = c.iter().max_by_key(|(_, n)| **n)?;
            Some((*l, hca.to_string()))
        })
        .collect()
}

/// Leaf → the HCA most of its host ports are, for one group's leaves (empty for a group
/// without rails).
type LeafHcas = HashMap<String, String>;

/// Each group's [`LeafHcas`], in the groups' order.
fn leaf_hcas(groups: &[Group], hosts: &BTreeMap<String, Vec<HostPort>>) -> Vec<LeafHcas> {
    groups
        .iter()
        .map(|g| match g.rails {
            Some(_) => {
                let leaves: Vec<&str> = g.leaves.iter().map(String::as_str).collect();
                majority_hca(&leaves, &g.hosts, hosts)
                    .into_iter()
                    .map(|(l, h)| (l.to_string(), h))
                    .collect()
            }
            None => LeafHcas::new(),
        })
        .collect()
}

/// A named port on a leaf whose ports are mostly another HCA, where the group has a leaf for
/// this HCA: cabled to the wrong rail.
fn miscabled(groups: &[Group], hosts: &BTreeMap<String, Vec<HostPort>>, leaf_hcas: &[LeafHcas]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (g, majority) in groups.iter().zip(leaf_hcas).filter(|(g, _)| g.rails.is_some()) {
        let leaf_of: HashMap<&str, &str> = majority.iter().map(|(l, h)| (h.as_str(), l.as_str())).collect();
        for h in &g.hosts {
            for p in &hosts[h] {
                let here = majority.get(p.switch.as_str());
                let Some(right) = leaf_of.get(p.port.as_str()) else {
                    continue;
                };
                if here.is_some_and(|m| m != &p.port) && *right != p.switch {
                    out.push(Finding {
                        severity: Severity::Fail,
                        code: "wrong-rail",
                        what: format!(
                            "{h} {} is cabled to {} port {} (the leaf of {}'s rail); the group's other {} ports land on {right}",
                            p.port,
                            p.switch,
                            p.switch_port,
                            here.map_or("?", |s| s.as_str()),
                            p.port
                        ),
                        fix: format!("move the cable of {h} {} to {right}: on a rail-optimised fabric a port on another rail's leaf crosses the spine for traffic that should stay on its rail", p.port),
                    });
                }
            }
        }
    }
    out
}

/// A leaf with fewer uplinks than the median of its level, and a spine its group's other
/// leaves reach that it does not.
fn uplink_findings(sw: &BTreeMap<String, Switch>, groups: &[Group]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut by_level: BTreeMap<u32, Vec<&Switch>> = BTreeMap::new();
    for s in sw.values() {
        if let Some(l) = s.level {
            by_level.entry(l).or_default().push(s);
        }
    }
    let top = by_level.keys().max().copied().unwrap_or(1);
    for (level, members) in by_level.iter().filter(|(l, _)| **l < top) {
        let mut counts: Vec<u32> = members.iter().map(|s| s.uplinks).collect();
        counts.sort_unstable();
        let median = counts[counts.len() / 2];
        for s in members.iter().filter(|s| s.uplinks < median) {
            out.push(Finding {
                severity: Severity::Warn,
                code: "fewer-uplinks",
                what: format!(
                    "{} (level {level}) has {} uplink(s) where its peers have {median}",
                    s.name, s.uplinks
                ),
                fix: format!(
                    "check the missing cables or ports of {} (ibportstate, the switch's port counters)",
                    s.name
                ),
            });
        }
    }
    for g in groups {
        for spine in &g.spines {
            let with: Vec<&String> = g.leaves.iter().filter(|l| sw[*l].links.contains_key(spine)).collect();
            if with.len() * 2 <= g.leaves.len() {
                continue;
            }
            for l in g.leaves.iter().filter(|l| !sw[*l].links.contains_key(spine)) {
                out.push(Finding {
                    severity: Severity::Warn,
                    code: "missing-uplink",
                    what: format!(
                        "{l} has no link to {spine}, which {} of the {} leaves of {} reach",
                        with.len(),
                        g.leaves.len(),
                        g.name
                    ),
                    fix: format!("cable {l} to {spine} (or find the link that is down: iblinkinfo)"),
                });
            }
        }
    }
    out
}

/// A link slower than the usual link of its kind (host links, switch links): fewer lanes or
/// an older speed.
fn slow_links(links: &[LinkRate]) -> Vec<Finding> {
    let mut out = Vec::new();
    for inter in [false, true] {
        let mut counts: BTreeMap<(u32, &str), usize> = BTreeMap::new();
        for (_, w, s, _, _) in links.iter().filter(|l| l.0 == inter) {
            if let (Some(w), Some(s)) = (w, s) {
                *counts.entry((*w, *s)).or_default() += 1;
            }
        }
        let Some(((w, s), _)) = counts.iter().max_by_key(|(_, n)| **n) else {
            continue;
        };
        let Some(usual) = gbps(Some(*w), Some(s)) else { continue };
        for (_, lw, ls, me, port) in links.iter().filter(|l| l.0 == inter) {
            if let Some(g) = gbps(*lw, *ls) {
                if g < usual {
                    out.push(Finding {
                        severity: Severity::Warn,
                        code: "slow-link",
                        what: format!(
                            "{me} port {port}: {}x{} ({g} Gb/s) where the fabric's {} links run {w}x{s} ({usual} Gb/s)",
                            lw.unwrap_or(0),
                            ls.unwrap_or("?"),
                            if inter { "switch" } else { "host" }
                        ),
                        fix: "reseat or replace the cable or transceiver; check both ends' port settings (ibportstate)"
                            .into(),
                    });
                }
            }
        }
    }
    out
}

/// What each switch carries to the level above, each link at its rate (a group's uplink is
/// its leaves' sum).
fn uplink_gbps<'a>(
    nodes: &[Node],
    ids: &'a HashMap<&str, String>,
    sw: &BTreeMap<String, Switch>,
) -> HashMap<&'a str, f64> {
    let level = |n: &str| sw.get(n).and_then(|s| s.level);
    let mut out = HashMap::new();
    for n in nodes.iter().filter(|n| n.kind == Kind::Switch) {
        let me = ids[n.id.as_str()].as_str();
        let mine = level(me);
        let total: f64 = n
            .links
            .iter()
            .filter(|l| {
                ids.get(l.peer.as_str())
                    .is_some_and(|p| matches!((level(p), mine), (Some(a), Some(b)) if a == b + 1))
            })
            .filter_map(|l| gbps(l.width, l.speed.as_deref()))
            .fold(0.0, |a, b| a + b);
        out.insert(me, total);
    }
    out
}

/// The fabric's rails: its compute groups' — every group of multi-port hosts rail-optimised,
/// the most rails any has (a group short of a leaf is a finding, not another fabric). Groups
/// of one-port hosts beside them (login, storage, management) are left out: every real fabric
/// carries some, and they have no rails to keep.
fn common_rails(groups: &[Group]) -> Option<u32> {
    let compute: Vec<&Group> = groups
        .iter()
        .filter(|g| !g.hosts.is_empty() && !g.single_port_hosts)
        .collect();
    if compute.is_empty() || compute.iter().any(|g| g.rails.is_none()) {
        return None;
    }
    compute.iter().filter_map(|g| g.rails).max()
}

/// The fabric's rails as NCCL can be told them: HCA → rail, and the hosts that break it.
struct RailMap {
    hcas: BTreeMap<String, u32>,
    off_rail: BTreeMap<String, String>,
    /// The groups name one rail by several HCAs (or several rails by one): no map.
    named_apart: Option<Finding>,
}

/// Each compute group's rail leaves carry one HCA each (its ports' majority), in rail order
/// (the HCAs' natural order). The groups with every rail give HCA → rail; sites name HCAs
/// apart across units (`HCA-1` in one, `mlx5_0` in another), so one rail may have several
/// names, but a name on two rails is no map. A group short of a leaf takes its names' rails
/// from the whole groups. A host with a port on a leaf of another HCA is off its rails,
/// whatever else it has.
fn rail_map(
    groups: &[Group],
    hosts: &BTreeMap<String, Vec<HostPort>>,
    rails: Option<u32>,
    leaf_hcas: &[LeafHcas],
) -> RailMap {
    let mut out = RailMap {
        hcas: BTreeMap::new(),
        off_rail: BTreeMap::new(),
        named_apart: None,
    };
    let Some(rails) = rails else { return out };
    let mut clash: Vec<String> = Vec::new();
    for (g, majority) in groups
        .iter()
        .zip(leaf_hcas)
        .filter(|(g, _)| g.rails.is_some() && !g.single_port_hosts)
    {
        if g.rails == Some(rails) {
            let mut names: Vec<&String> = majority.values().collect::<BTreeSet<_>>().into_iter().collect();
            names.sort_by(|a, b| natural_cmp(a, b));
            if names.len() == rails as usize {
                for (k, name) in (0..).zip(names) {
                    if *out.hcas.entry(name.clone()).or_insert(k) != k {
                        clash.push(format!(
                            "{name} is rail {} in one group and {k} in {}",
                            out.hcas[name], g.name
                        ));
                    }
                }
            }
        }
        for h in &g.hosts {
            for p in &hosts[h] {
                match majority.get(p.switch.as_str()) {
                    Some(m) if *m != p.port => {
                        out.off_rail.entry(h.clone()).or_insert_with(|| {
                            format!(
                                "{} is cabled to {} port {}, a leaf of {m}'s rail",
                                p.port, p.switch, p.switch_port
                            )
                        });
                    }
                    _ => {}
                }
            }
        }
    }
    let named: BTreeSet<u32> = out.hcas.values().copied().collect();
    if clash.is_empty() && named.len() == rails as usize {
        return out;
    }
    out.hcas.clear();
    out.named_apart = Some(Finding {
        severity: Severity::Warn,
        code: "rails-named-apart",
        what: match clash.first() {
            Some(c) => format!("the groups name their rails by HCA in different orders ({c}): no HCA → rail map is made and NCCL is given no rail ids"),
            None => format!("no group has all {rails} rails with one HCA name per rail leaf: no HCA → rail map is made and NCCL is given no rail ids"),
        },
        fix: "name the HCAs alike on every host (udev rules, or the same PCI slots), or cable each rail's leaves to one HCA name".into(),
    });
    out
}

/// Each compute port's rail as the fabric numbers it (its leaf's HCA's rail), not as its group
/// does: a group short of a leaf would number the rails after the gap one lower.
fn fabric_rails(
    groups: &[Group],
    hosts: &mut BTreeMap<String, Vec<HostPort>>,
    hcas: &BTreeMap<String, u32>,
    leaf_hcas: &[LeafHcas],
) {
    if hcas.is_empty() {
        return;
    }
    for (g, majority) in groups
        .iter()
        .zip(leaf_hcas)
        .filter(|(g, _)| g.rails.is_some() && !g.single_port_hosts)
    {
        for h in &g.hosts {
            if let Some(ports) = hosts.get_mut(h) {
                for p in ports.iter_mut() {
                    p.rail = majority.get(&p.switch).and_then(|hca| hcas.get(hca)).copied();
                }
            }
        }
    }
}

/// Groups with fewer rail leaves than the fabric has rails: a leaf missing (or down), its
/// rail's ports with nowhere to land.
fn short_groups(groups: &[Group], rails: Option<u32>) -> Vec<Finding> {
    let Some(r) = rails else { return Vec::new() };
    groups
        .iter()
        .filter(|g| g.rails.is_some_and(|n| n < r) && !g.hosts.is_empty())
        .map(|g| Finding {
            severity: Severity::Warn,
            code: "missing-leaf",
            what: format!(
                "{} has {} rail leaf/leaves where the fabric has {r} rails ({}): a leaf is missing or down, and its rail's ports have nowhere to land",
                g.name,
                g.rails.unwrap_or(0),
                g.leaves.join(", ")
            ),
            fix: format!("find the missing leaf of {} (power, its uplinks, the subnet manager's view) and its hosts' unconnected ports", g.name),
        })
        .collect()
}
