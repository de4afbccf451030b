//! A fabric of several planes, one `ibnetdiscover` capture each: the captures joined into one
//! reading (each switch and host port marked with its plane), refused when two of them share
//! a switch (the same plane twice), and each host's ports held against its peers' plane by
//! plane. Pure.

use super::derive::{self, Discovered, Finding, Plane, Severity};
use super::ibnet::{Kind, Node};
use std::collections::{BTreeMap, HashMap};

/// At most this many planes (captures) in one fabric.
pub(crate) const MAX_PLANES: usize = 16;

/// Two captures that hold one switch: not two planes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedSwitch {
    pub(crate) first: usize,
    pub(crate) second: usize,
    pub(crate) guid: String,
}

/// The captures' nodes as one list, and each switch GUID's plane.
pub(crate) struct Joined {
    pub(crate) nodes: Vec<Node>,
    pub(crate) plane_of: HashMap<String, u32>,
}

/// Join the planes' nodes; a switch GUID in two captures is refused (the same plane read
/// twice, or one plane captured from two of its ports).
pub(crate) fn join(planes: Vec<Vec<Node>>) -> Result<Joined, SharedSwitch> {
    let mut plane_of: HashMap<String, u32> = HashMap::new();
    let mut nodes = Vec::new();
    for (i, plane) in planes.into_iter().enumerate() {
        for n in plane {
            if n.kind == Kind::Switch {
                if let Some(first) = plane_of.insert(n.id.clone(), i as u32) {
                    if first != i as u32 {
                        return Err(SharedSwitch {
                            first: first as usize,
                            second: i,
                            guid: n.id.clone(),
                        });
                    }
                }
            }
            nodes.push(n);
        }
    }
    Ok(Joined { nodes, plane_of })
}

/// Mark each switch and host port with its plane, say what each plane holds, find each
/// plane's own cut parts, each HCA's plane, and hosts whose ports in a plane fall short of
/// their peers'.
pub(crate) fn mark(d: &mut Discovered, plane_of: &HashMap<String, u32>, files: &[String]) {
    let mut by_name: HashMap<String, u32> = HashMap::new();
    for s in &mut d.switches {
        s.plane = plane_of.get(&s.id).copied();
        if let Some(p) = s.plane {
            by_name.insert(s.name.clone(), p);
        }
    }
    for h in &mut d.hosts {
        for p in &mut h.ports {
            p.plane = by_name.get(&p.switch).copied();
        }
    }
    for (i, file) in files.iter().enumerate() {
        let mine: Vec<&derive::Switch> = d.switches.iter().filter(|s| s.plane == Some(i as u32)).collect();
        if let Some(mut f) = derive::planes(mine.iter().copied()) {
            f.what = format!("{file}: {}", f.what);
            d.findings.push(f);
        }
        let ports = d
            .hosts
            .iter()
            .flat_map(|h| &h.ports)
            .filter(|p| p.plane == Some(i as u32));
        d.planes.push(Plane {
            file: file.clone(),
            switches: mine.len(),
            hosts: d
                .hosts
                .iter()
                .filter(|h| h.ports.iter().any(|p| p.plane == Some(i as u32)))
                .count(),
            host_ports: ports.count(),
        });
    }
    d.hca_planes = hca_planes(d);
    d.findings.extend(short_of_planes(d, files));
}

/// HCA → plane, when each rail HCA's ports all land in one plane.
fn hca_planes(d: &Discovered) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = BTreeMap::new();
    for p in d.hosts.iter().flat_map(|h| &h.ports) {
        let (Some(plane), true) = (p.plane, d.rail_hcas.contains_key(&p.port)) else {
            continue;
        };
        if *out.entry(p.port.clone()).or_insert(plane) != plane {
            return BTreeMap::new();
        }
    }
    out
}

/// Hosts with several ports (compute hosts; one-port login and storage hosts are in one
/// plane by design) that have fewer ports in a plane than most such hosts there.
fn short_of_planes(d: &Discovered, files: &[String]) -> Vec<Finding> {
    let counts = |ports: &[derive::HostPort]| {
        let mut c = vec![0u32; files.len()];
        for p in ports {
            if let Some(k) = p.plane.and_then(|k| c.get_mut(k as usize)) {
                *k += 1;
            }
        }
        c
    };
    let multi: Vec<(&str, Vec<u32>)> = d
        .hosts
        .iter()
        .filter(|h| h.ports.len() > 1)
        .map(|h| (h.name.as_str(), counts(&h.ports)))
        .collect();
    let usual: Vec<u32> = (0..files.len())
        .map(|k| {
            let mut tally: BTreeMap<u32, usize> = BTreeMap::new();
            for (_, c) in &multi {
                *tally.entry(c[k]).or_default() += 1;
            }
            tally
                .into_iter()
                .max_by_key(|(n, count)| (*count, *n))
                .map_or(0, |(n, _)| n)
        })
        .collect();
    let mut out = Vec::new();
    for (host, c) in &multi {
        for (k, file) in files.iter().enumerate() {
            if c[k] < usual[k] {
                out.push(Finding {
                    severity: Severity::Fail,
                    code: "plane-ports",
                    what: format!(
                        "{host} has {} port(s) in plane {k} ({file}) where its peers have {}: a port down or uncabled, so its traffic on that plane has no way in",
                        c[k], usual[k]
                    ),
                    fix: format!("check {host}'s ports of plane {k} (ibstat on {host}, the leaf's port state)"),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(id: &str) -> Node {
        Node {
            kind: Kind::Switch,
            id: id.into(),
            ports: 36,
            desc: String::new(),
            lid: None,
            line: 1,
            links: Vec::new(),
        }
    }

    #[test]
    fn one_switch_in_two_captures_is_refused() {
        let a = vec![switch("S-01"), switch("S-02")];
        let b = vec![switch("S-03"), switch("S-02")];
        let e = join(vec![a.clone(), b]).err().unwrap();
        assert_eq!((e.first, e.second, e.guid.as_str()), (0, 1, "S-02"));
        let j = join(vec![a, vec![switch("S-04")]]).ok().unwrap();
        assert_eq!(j.nodes.len(), 3);
        assert_eq!(j.plane_of["S-04"], 1);
    }
}
