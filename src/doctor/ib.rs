//! `ib-ports`: every RDMA port NCCL uses for GPU traffic up at full rate — state `ACTIVE`,
//! physical state `LinkUp` (the kernel's sysfs-class-infiniband), its rate that of the
//! fastest port of the same HCA model on the node (and of the model's own top rate), a RoCE
//! port with a RoCE v2 GID (NCCL ≥ 2.21 picks one itself, older NCCL needs one), and the
//! error counters `link_downed`/`symbol_error` still since the last run (kept in
//! `/var/lib/topo-tune/ib-counters.json`): Azure's AzNHC `check_hw_ib`, `check_ib_link_flapping`.

use super::facts::{gpu_nics, Facts, Reach};
use super::finding::{Finding, Status};
use crate::model::snapshot::{LinkLayer, Nic};
use std::collections::BTreeMap;

/// Where the counters of the last run are kept (under the node's root).
pub(crate) const COUNTERS: &str = "/var/lib/topo-tune/ib-counters.json";

/// The top rate of an HCA model (NVIDIA's ConnectX product briefs), by PCI id.
fn model_rate_gbps(pci_id: &str) -> Option<f64> {
    Some(match pci_id {
        "15b3:1017" | "15b3:1019" => 100.0,
        "15b3:101b" => 200.0,
        "15b3:1021" => 400.0,
        "15b3:1023" => 800.0,
        _ => return None,
    })
}

/// One port as the check sees it.
struct Port<'a> {
    nic: &'a Nic,
    port: u32,
    state: Option<u8>,
    rate: Option<f64>,
    /// `state` and `rate` as the files read, for one that did not parse.
    state_text: Option<&'a str>,
    rate_text: Option<&'a str>,
    roce: bool,
    roce_v2: bool,
}

fn ports<'a>(nics: &[&'a Nic]) -> Vec<Port<'a>> {
    nics.iter()
        .flat_map(|n| {
            n.rdma.iter().flat_map(move |r| {
                r.ports.iter().map(move |p| Port {
                    nic: n,
                    port: p.port,
                    state: p.state_code,
                    rate: p.rate_gbps,
                    state_text: p.state.as_deref(),
                    rate_text: p.rate.as_deref(),
                    roce: p.link_layer == LinkLayer::Ethernet,
                    roce_v2: !p.roce_v2_gid_indexes.is_empty(),
                })
            })
        })
        .collect()
}

pub(super) fn ib_ports(f: &Facts) -> Option<Finding> {
    let nics = gpu_nics(f, Reach::Traffic);
    let efa = |n: &Nic| crate::nccl::guard::is_efa(n);
    let nics: Vec<&Nic> = nics.into_iter().filter(|n| !efa(n)).collect();
    if nics.is_empty() {
        return Some(Finding::skip("no InfiniBand or RoCE NIC carries GPU traffic here"));
    }
    let ports = ports(&nics);
    if ports.iter().all(|p| p.state.is_none() && p.state_text.is_none()) {
        return Some(Finding::skip("port states unknown (the node is described by a file)"));
    }
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    for p in &ports {
        state(f, p, &mut fails);
    }
    rates(&ports, &mut fails, &mut warns);
    warns.extend(unreadable(&ports));
    for p in ports.iter().filter(|p| p.roce && !p.roce_v2) {
        fails.push(format!(
            "{} port {} is RoCE with no RoCE v2 GID (gid_attrs/types): NCCL before 2.21 needs one, and RoCE v1 does not route",
            p.nic.name, p.port
        ));
    }
    warns.extend(flapping(f, &ports));
    let (status, found, fix) = match (fails.is_empty(), warns.is_empty()) {
        (false, _) => (
            Status::Fail,
            [fails, warns].concat(),
            "check the cable, the switch port and the HCA firmware (ibstat, mlxlink -d <dev> -p <port>); a RoCE port needs its IP configured for a v2 GID",
        ),
        (true, false) => (
            Status::Warn,
            warns,
            "watch the port (ibstat; perfquery); replace the cable or transceiver if the counters keep growing",
        ),
        (true, true) => {
            return Some(Finding::pass(format!("{} port(s) ACTIVE, LinkUp, at full rate", ports.len())))
        }
    };
    Some(Finding::new(status, found.join("; ")).fix(fix))
}

/// `ACTIVE` (4) and `LinkUp` (5) on every port.
fn state(f: &Facts, p: &Port, fails: &mut Vec<String>) {
    if p.state.is_some_and(|s| s != 4) {
        fails.push(format!(
            "{} port {} is not ACTIVE (state {})",
            p.nic.name,
            p.port,
            p.state.unwrap_or(0)
        ));
        return;
    }
    let phys = f.fs.read_trimmed(&format!(
        "/sys/class/infiniband/{}/ports/{}/phys_state",
        p.nic.name, p.port
    ));
    if let Some(ph) = phys.filter(|ph| !ph.starts_with("5")) {
        fails.push(format!(
            "{} port {} physical state is {ph}, not 5: LinkUp",
            p.nic.name, p.port
        ));
    }
}

/// Each port at the rate of the fastest port of its HCA model here (fail), and of the
/// model's top rate (warn: a lower-speed part or cable may be meant).
fn rates(ports: &[Port], fails: &mut Vec<String>, warns: &mut Vec<String>) {
    let model = |p: &Port| p.nic.pci.as_ref().and_then(|x| x.pci_id.clone()).unwrap_or_default();
    let mut fastest: BTreeMap<String, f64> = BTreeMap::new();
    for p in ports.iter().filter(|p| p.state == Some(4)) {
        if let Some(r) = p.rate {
            let e = fastest.entry(model(p)).or_insert(0.0);
            *e = e.max(r);
        }
    }
    for p in ports.iter().filter(|p| p.state == Some(4)) {
        let Some(r) = p.rate else { continue };
        let top = fastest.get(&model(p)).copied().unwrap_or(r);
        if r < top {
            fails.push(format!(
                "{} port {} runs at {r} Gb/s where the same HCA model reaches {top} Gb/s here: downtrained",
                p.nic.name, p.port
            ));
        } else if let Some(max) = model_rate_gbps(&model(p)).filter(|m| r < *m) {
            warns.push(format!(
                "{} port {} runs at {r} Gb/s, below the {max} Gb/s its HCA model ({}) reaches: downtrained, or a slower cable or part",
                p.nic.name,
                p.port,
                model(p)
            ));
        }
    }
}

/// A state or rate the kernel did not write (`4: ACTIVE`, `400 Gb/sec (4X NDR)`): the port is
/// not passed over — its health, and whether the ports of its model are downtrained (the
/// fastest may be the one not read), is unknown, and said.
fn unreadable(ports: &[Port]) -> Vec<String> {
    let shown = |t: &str| t.chars().take(64).flat_map(char::escape_debug).collect::<String>();
    let mut out = Vec::new();
    for p in ports {
        match (p.state, p.state_text) {
            (None, Some(t)) => out.push(format!(
                "{} port {} state `{}` is not what the kernel writes (`4: ACTIVE`): its health is unknown",
                p.nic.name,
                p.port,
                shown(t)
            )),
            (Some(4), _) if p.rate.is_none() => {
                if let Some(t) = p.rate_text {
                    out.push(format!(
                        "{} port {} rate `{}` is not what the kernel writes (`400 Gb/sec (4X NDR)`): its speed, and whether the ports of its model are downtrained, is unknown",
                        p.nic.name,
                        p.port,
                        shown(t)
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Counters that grew since the last run, and the new values kept for the next.
fn flapping(f: &Facts, ports: &[Port]) -> Vec<String> {
    let read = |p: &Port, c: &str| -> Option<u64> {
        f.fs.read_trimmed(&format!(
            "/sys/class/infiniband/{}/ports/{}/counters/{c}",
            p.nic.name, p.port
        ))?
        .parse()
        .ok()
    };
    let mut now: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    for p in ports {
        if let (Some(d), Some(s)) = (read(p, "link_downed"), read(p, "symbol_error")) {
            now.insert(format!("{}:{}", p.nic.name, p.port), [d, s]);
        }
    }
    if now.is_empty() {
        return Vec::new();
    }
    let Ok(tree) = crate::apply::tree::Tree::open(f.fs.root()) else {
        return Vec::new();
    };
    let before: BTreeMap<String, [u64; 2]> = tree
        .read(COUNTERS, 1 << 20)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let grown = now
        .iter()
        .filter_map(|(port, [d, s])| {
            let [d0, s0] = before.get(port)?;
            (d > d0 || s > s0).then(|| {
                format!("{port}: link_downed {d0} → {d}, symbol_error {s0} → {s} since the last doctor run (flapping)")
            })
        })
        .collect();
    if let Ok(json) = serde_json::to_vec_pretty(&now) {
        // Bookkeeping for the next run; a node where it cannot be kept just loses the trend.
        let _ = tree.write(COUNTERS, &json, 0o644);
    }
    grown
}
