//! What a tuning was measured on, as a plan sees a node: its GPU count and links, its ring's
//! worst hop, its NVLink domain, and the ports NCCL uses — so a tuning goes only to nodes a
//! plan cannot tell apart from the ones it was measured on. Pure.

use crate::model::plan::{Plan, PortTransport};
use crate::model::Refusal;

/// One line naming a node's hardware as its plan classes it (`None`: the plan gives the node
/// no class, so nothing can be said of it).
pub(crate) fn key(plan: &Plan, host: &str) -> Option<String> {
    let has = |hosts: &[String]| hosts.iter().any(|h| h == host);
    let node = plan.node_classes.iter().find(|c| has(&c.hosts))?;
    let nccl = plan.nccl.classes.iter().find(|c| has(&c.hosts))?;
    let nvlink = node.nvlink.as_ref().map_or_else(
        || "no NVLink".to_string(),
        |n| {
            let links: u32 = n.links.iter().flatten().sum();
            format!("{links} NVLink link end(s) at {:.0} GB/s", n.gbps_per_link)
        },
    );
    let domain = plan
        .nvlink_domains
        .iter()
        .find(|d| has(&d.hosts))
        .map(|d| format!(", in an NVLink domain of {} GPU(s)", d.gpus))
        .unwrap_or_default();
    let mut transports: Vec<&str> = nccl.gpu_ports.iter().map(|p| transport(p.transport)).collect();
    transports.sort_unstable();
    transports.dedup();
    Some(format!(
        "{} GPU(s), {nvlink}, ring's worst hop {}{domain}; {} NIC port(s) for GPU traffic ({})",
        node.gpus,
        node.type_intra,
        nccl.gpu_ports.len(),
        if transports.is_empty() {
            "none".to_string()
        } else {
            transports.join(", ")
        }
    ))
}

fn transport(t: PortTransport) -> &'static str {
    match t {
        PortTransport::Verbs => "verbs",
        PortTransport::Efa => "efa",
        PortTransport::Socket => "socket",
    }
}

/// The one key every host of a set shares, or why there is none (a set of mixed hardware
/// measures an average of nodes no rule fits).
pub(crate) fn common(plan: &Plan, hosts: &[String]) -> Result<String, Refusal> {
    let mut keys: Vec<(String, &str)> = Vec::new();
    for h in hosts {
        let k = key(plan, h).ok_or_else(|| Refusal(format!("{h}: the plan gives it no class")))?;
        if !keys.iter().any(|(x, _)| *x == k) {
            keys.push((k, h));
        }
    }
    match keys.as_slice() {
        [(k, _)] => Ok(k.clone()),
        [] => Err(Refusal("no host".into())),
        [(a, ha), (b, hb), ..] => Err(Refusal(format!("{ha}: {a}; {hb}: {b}"))),
    }
}
