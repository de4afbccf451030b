//! `diagnose`'s final table: one row per culprit the localisation named — suspect, the figures
//! that accuse it, the likely cause (doctor's first failing check on it, else what is left
//! when doctor finds nothing), the fix. A node named twice (the bisection, its two ring
//! edges, its NIC's rail) is one row with all the evidence.

use super::localise::Found;
use crate::bench::locate::EdgeBlame;
use crate::doctor::Status;
use crate::report::diagnose::{DoctorOn, SuspectKind, Verdict};

/// The hosts doctor should look at: every node a step named, each once.
pub(super) fn suspect_hosts(f: &Found) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    let mut add = |h: &str| {
        if !hosts.iter().any(|x| x == h) {
            hosts.push(h.to_string());
        }
    };
    if let Some(s) = f.interiors.as_ref().and_then(|i| i.slow.as_ref()) {
        add(&s.name);
    }
    if let Some(s) = &f.located.suspect {
        add(&s.name);
    }
    match f.edges.as_ref().and_then(|e| e.blame.as_ref()) {
        Some(EdgeBlame::Node { host }) => add(host),
        Some(EdgeBlame::Link { a, b }) => {
            add(a);
            add(b);
        }
        None => {}
    }
    if let Some(s) = f
        .rails
        .as_ref()
        .and_then(|r| r.nic.as_ref())
        .and_then(|n| n.suspect.as_ref())
    {
        add(&s.name);
    }
    hosts
}

/// What doctor found on `host` that best explains a slow node, as cause and fix: a failing
/// check before a warning, and among them the most telling cause (`doctor::CAUSES`), e.g.
/// "GPUDirect RDMA off on gpu-11: …".
pub(in crate::flow) fn doctor_says(doctor: &[DoctorOn], host: &str) -> Option<(String, String)> {
    let c = most_telling(doctor, host)?;
    let (_, phrase) = crate::doctor::cause(&c.check);
    Some((
        format!("{phrase} on {host} ({}): {}", c.check, c.detail),
        c.fix.clone().unwrap_or_default(),
    ))
}

/// doctor's most telling check on `host`: a failure before a warning, then by cause rank.
pub(in crate::flow) fn most_telling<'a>(doctor: &'a [DoctorOn], host: &str) -> Option<&'a crate::doctor::Check> {
    doctor
        .iter()
        .find(|d| d.host == host)?
        .checks
        .iter()
        .min_by_key(|c| (c.status != Status::Fail, crate::doctor::cause(&c.check).0))
}

/// Why doctor could not check `host`, if it could not.
pub(in crate::flow) fn doctor_error<'a>(doctor: &'a [DoctorOn], host: &str) -> Option<&'a str> {
    doctor.iter().find(|d| d.host == host).and_then(|d| d.error.as_deref())
}

/// Why doctor gave no cause: it found nothing, or could not look.
pub(in crate::flow) fn doctor_silent(doctor: &[DoctorOn], host: &str, otherwise: &str) -> String {
    match doctor_error(doctor, host) {
        Some(why) => format!("doctor could not check {host} ({why}); {otherwise}"),
        None => format!("doctor finds nothing wrong on {host}: {otherwise}"),
    }
}

fn gbps(v: Option<f64>) -> String {
    v.map_or_else(|| "failed".into(), |b| format!("{b:.1} GB/s"))
}

pub(super) fn verdicts(f: &Found, doctor: &[DoctorOn], ceiling: &dyn Fn(&str) -> Option<f64>) -> Vec<Verdict> {
    let mut out: Vec<Verdict> = Vec::new();
    inside(f, doctor, ceiling, &mut out);
    network(f, doctor, &mut out);
    link(f, doctor, &mut out);
    rail(f, doctor, &mut out);
    out
}

fn inside(f: &Found, doctor: &[DoctorOn], ceiling: &dyn Fn(&str) -> Option<f64>, out: &mut Vec<Verdict>) {
    let Some(i) = &f.interiors else { return };
    let Some(s) = &i.slow else { return };
    let ceiling = ceiling(&s.name).map_or_else(String::new, |c| {
        format!("; its intra-node ring's slowest link: {c:.1} GB/s")
    });
    let (cause, fix) = doctor_says(doctor, &s.name).unwrap_or_else(|| {
        (
            doctor_silent(
                doctor,
                &s.name,
                "an NVLink down or a GPU's PCIe link trained below its width or speed",
            ),
            format!(
                "on {}: nvidia-smi nvlink --status; nvidia-smi topo -m; topo-tune probe --matrix",
                s.name
            ),
        )
    });
    let mut evidence = format!(
        "alone with its {} GPUs (no network): {:.1} GB/s busbw; median of the nodes alone: {:.1} GB/s{ceiling}",
        i.gpus, s.busbw, s.median
    );
    if let Some(n) = f.located.suspect.as_ref().filter(|n| n.name == s.name) {
        // A slow inside drags every ring it is in: the bisection's figure is the same fault.
        evidence.push_str(&format!(
            "; with other nodes: runs with it {:.1} GB/s, median {:.1} GB/s",
            n.busbw, n.median
        ));
    }
    out.push(Verdict {
        kind: SuspectKind::NodeInside,
        suspect: s.name.clone(),
        round: i.round,
        evidence,
        cause,
        fix,
    });
}

/// The node the bisection or its two ring edges named; refined to one NIC when the slow
/// rail's bisection names the same node.
fn network(f: &Found, doctor: &[DoctorOn], out: &mut Vec<Verdict>) {
    let mut evidence = Vec::new();
    let mut named: Option<(String, usize)> = None;
    if let Some(s) = &f.located.suspect {
        evidence.push(format!(
            "runs with it: {:.1} GB/s busbw; median of its round: {:.1} GB/s",
            s.busbw, s.median
        ));
        named = Some((s.name.clone(), f.located_round));
    }
    if let Some(e) = &f.edges {
        if let Some(EdgeBlame::Node { host }) = &e.blame {
            let mine: Vec<String> = e
                .low
                .iter()
                .map(|k| {
                    let x = &e.edges[*k];
                    format!("{}–{} {}", x.a, x.b, gbps(x.busbw))
                })
                .collect();
            evidence.push(format!(
                "sendrecv with both ring neighbours: {}; median of the ring's edges: {:.1} GB/s",
                mine.join(", "),
                e.median
            ));
            named.get_or_insert((host.clone(), e.round));
        }
    }
    let Some((host, round)) = named else { return };
    let inside = f.interiors.as_ref().and_then(|i| i.slow.as_ref());
    if nic_on(f).is_some_and(|(h, _)| h == host) || inside.is_some_and(|s| s.name == host) {
        // One row for the node: rail() with its NIC, inside() with its inside.
        return;
    }
    let (cause, fix) = doctor_says(doctor, &host).unwrap_or_else(|| {
        (
            doctor_silent(doctor, &host, "a cable, a switch port or the NIC's firmware"),
            format!("on {host}: ibstat or ethtool -S for link errors; topo-tune probe --matrix"),
        )
    });
    out.push(Verdict {
        kind: SuspectKind::Node,
        suspect: host,
        round,
        evidence: evidence.join("; "),
        cause,
        fix,
    });
}

fn link(f: &Found, doctor: &[DoctorOn], out: &mut Vec<Verdict>) {
    let Some(e) = &f.edges else { return };
    let Some(EdgeBlame::Link { a, b }) = &e.blame else {
        return;
    };
    let figure = e.low.first().map(|k| gbps(e.edges[*k].busbw)).unwrap_or_default();
    let (cause, fix) = doctor_says(doctor, a)
        .or_else(|| doctor_says(doctor, b))
        .unwrap_or_else(|| {
            (
                format!(
                    "what joins {a} and {b}: a cable, a switch port or the route between their switches (doctor finds nothing on either node)"
                ),
                format!("the switch ports of {a} and {b}: their error counters; ibstat or ethtool -S on both"),
            )
        });
    out.push(Verdict {
        kind: SuspectKind::Link,
        suspect: format!("{a}–{b}"),
        round: e.round,
        evidence: format!(
            "sendrecv {a}–{b}: {figure}; median of the ring's edges: {:.1} GB/s; both nodes' other edges are normal",
            e.median
        ),
        cause,
        fix,
    });
}

/// The NIC the slow rail's bisection named: (host, rail).
fn nic_on(f: &Found) -> Option<(&str, u32)> {
    let nic = f.rails.as_ref()?.nic.as_ref()?;
    nic.suspect.as_ref().map(|s| (s.name.as_str(), nic.rail))
}

fn rail(f: &Found, doctor: &[DoctorOn], out: &mut Vec<Verdict>) {
    let Some(r) = &f.rails else { return };
    let Some(i) = r.slow else { return };
    let rail_figure = format!(
        "rail {i}: {}; median of the rails: {:.1} GB/s",
        gbps(r.busbw.get(i as usize).copied().flatten()),
        r.median
    );
    let nic = r.nic.as_ref().and_then(|n| n.suspect.as_ref().map(|s| (n, s)));
    let Some((search, s)) = nic else {
        out.push(Verdict {
            kind: SuspectKind::Rail,
            suspect: format!("rail {i}"),
            round: r.round,
            evidence: rail_figure,
            cause: "one plane of the fabric (GPU/NIC index) is slow on every node: its switch or cabling".into(),
            fix: format!("check the rail-{i} leaf switch and its ports; `topo-tune doctor` on the nodes for NIC {i}"),
        });
        return;
    };
    let mut evidence = vec![
        rail_figure,
        format!(
            "on rail {i}, runs with {}: {:.1} GB/s; median of their round: {:.1} GB/s",
            s.name, s.busbw, s.median
        ),
    ];
    if let Some(n) = f.located.suspect.as_ref().filter(|n| n.name == s.name) {
        evidence.push(format!(
            "every GPU: runs with it {:.1} GB/s, median {:.1} GB/s",
            n.busbw, n.median
        ));
    }
    let (cause, fix) = doctor_says(doctor, &s.name).unwrap_or_else(|| {
        (
            doctor_silent(
                doctor,
                &s.name,
                &format!("the NIC of GPU {i}: its link speed or width, its cable or its firmware"),
            ),
            format!(
                "on {}: ibstat (or mlxlink) for the NIC nearest GPU {i}; reseat or swap its cable",
                s.name
            ),
        )
    });
    out.push(Verdict {
        kind: SuspectKind::Nic,
        suspect: format!("{}, NIC of rail {i}", s.name),
        round: search.round,
        evidence: evidence.join("; "),
        cause,
        fix,
    });
}
