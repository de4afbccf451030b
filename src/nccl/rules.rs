//! Rules: from a node's snapshot (and the fabric) to NCCL settings, each with the fact that
//! caused it. One function per rule in [`RULES`]; a rule either sets variables or says why it
//! set nothing. Debug-class variables are never produced here (NCCL's docs: "should not be
//! used in production"); cluster.yaml overrides win and are validated like everything else.
//! Pure.

use super::guard::{gpu_ports_with, is_efa};
use super::table::{check_node_wide, validate, Rejection};
use crate::graph::paths::path_classes;
use crate::model::files::TOPOLOGY;
use crate::model::plan::{GpuPort, PortTransport};
use crate::model::snapshot::{LinkLayer, Nic, NicKind, NodeSnapshot, PciParent};
use crate::model::{natural_key, Bdf, NcclVersion, PathClass, Setting};
use std::collections::BTreeMap;

/// What the rules decided for one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub settings: Vec<Setting>,
    /// A rule set NCCL_TOPO_FILE: the node needs its topology XML at [`TOPOLOGY`].
    pub wants_topology_file: bool,
    /// Rules that set nothing, each with why (advisories, skipped rules).
    pub left_out: Vec<String>,
}

/// What the fabric says of one node's rails.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeRails<'a> {
    /// Rails per node, as cluster.yaml states them or `topo-tune fabric` found them.
    pub(crate) count: Option<u32>,
    /// HCA → rail and HCA → plane as the wires showed them (empty where rails are only stated).
    pub(crate) hcas: Option<&'a BTreeMap<String, u32>>,
    pub(crate) planes: Option<&'a BTreeMap<String, u32>>,
    /// Why this node's ports break the rail pattern.
    pub(crate) off_rail: Option<&'a str>,
    /// The file that states the fabric.
    pub(crate) stated_in: Option<&'a str>,
}

impl<'a> NodeRails<'a> {
    /// Only a count, stated (the library's `derive`, the fuzz target).
    pub(crate) fn stated(count: Option<u32>) -> Self {
        NodeRails {
            count,
            ..NodeRails::default()
        }
    }

    /// `host`'s rails on `fabric`.
    pub(crate) fn of(fabric: Option<&'a crate::model::fabric::Fabric>, host: &str) -> Self {
        let Some(f) = fabric else { return NodeRails::default() };
        NodeRails {
            count: f.rails,
            hcas: (!f.rail_hcas.is_empty()).then_some(&f.rail_hcas),
            planes: (!f.hca_planes.is_empty()).then_some(&f.hca_planes),
            off_rail: f.off_rail.get(host).map(String::as_str),
            stated_in: f.stated_in.as_deref(),
        }
    }

    fn file(&self) -> &str {
        self.stated_in.unwrap_or("cluster.yaml")
    }
}

/// A GPU (`GPU0`), its NIC and the NIC's rail.
type NicOnRail = (String, String, u32);

/// Why a node's GPUs do not line up with the fabric's rails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OffTheRails {
    #[error("{nic} (nearest {gpu}) is on no rail of the fabric")]
    NoRail { nic: String, gpu: String },
    #[error("{nic}, the NIC of {gpu}, is on rail {rail} where the GPUs' order puts rail {k}")]
    OutOfOrder {
        nic: String,
        gpu: String,
        rail: u32,
        k: usize,
    },
    #[error("its GPUs use {nics} NIC(s) for the fabric's {rails} rails")]
    Count { nics: usize, rails: u32 },
}

/// Everything a rule may look at.
pub(crate) struct Facts<'a> {
    pub(crate) snap: &'a NodeSnapshot,
    pub(crate) rails: NodeRails<'a>,
    pub(crate) version: Option<NcclVersion>,
    /// Every RDMA NIC (the path matrix's NIC columns), with its nearest GPU and class.
    rdma: Vec<RdmaNic<'a>>,
    /// The ports NCCL would use for GPU traffic left to itself (the guard's view).
    ports: Vec<GpuPort>,
    /// Each GPU's NIC on its rail, or why the GPUs do not line up with the rails; `None`
    /// without a rail map (made once: NCCL_IB_HCA's and NCCL_CROSS_NIC's rules both ask).
    on_rails: Option<Result<Vec<NicOnRail>, OffTheRails>>,
}

struct RdmaNic<'a> {
    nic: &'a Nic,
    nearest: Option<(PathClass, String)>,
}

impl<'a> Facts<'a> {
    /// `classes`: the node's path classes (`graph::paths::path_classes`).
    pub(crate) fn new(
        snap: &'a NodeSnapshot,
        classes: &[Vec<PathClass>],
        rails: NodeRails<'a>,
        version: Option<NcclVersion>,
    ) -> Self {
        let mut gpu_index: Vec<u32> = snap.gpus.iter().map(|g| g.index).collect();
        gpu_index.sort_unstable();
        let gpus = gpu_index.len();
        let rdma = snap
            .matrix_nics()
            .enumerate()
            .map(|(i, nic)| RdmaNic {
                nic,
                nearest: (0..gpus)
                    .map(|g| (classes[g][gpus + i], format!("GPU{}", gpu_index[g])))
                    .min_by_key(|(c, _)| *c),
            })
            .collect();
        let mut facts = Facts {
            snap,
            rails,
            version,
            rdma,
            ports: gpu_ports_with(snap, classes),
            on_rails: None,
        };
        facts.on_rails = facts.rails_by_gpu();
        facts
    }

    /// RDMA devices NCCL drives through verbs (not EFA, which goes through aws-ofi-nccl).
    fn verbs(&self) -> impl Iterator<Item = &RdmaNic<'a>> {
        self.rdma.iter().filter(|r| !is_efa(r.nic))
    }

    /// The ports NCCL would use for GPU traffic left to itself ([`gpu_ports_with`]).
    pub(crate) fn gpu_ports(&self) -> &[GpuPort] {
        &self.ports
    }

    /// A GPU-local RDMA device NCCL reaches other than through verbs (EFA), if any.
    fn gpu_local_non_verbs(&self) -> Option<&str> {
        self.rdma
            .iter()
            .filter(|r| is_efa(r.nic))
            .find(|r| r.nearest.as_ref().is_some_and(|(c, _)| *c <= PathClass::Pxb))
            .map(|r| r.nic.name.as_str())
    }

    /// Each GPU's NIC and its rail, in GPU order, where the k-th NIC (by its nearest GPU) is on
    /// rail k and there is one per rail: the fabric's rails line up with the GPUs' indices.
    /// Otherwise why not. `None` where the fabric names no HCA → rail (rails only stated).
    fn rails_by_gpu(&self) -> Option<Result<Vec<NicOnRail>, OffTheRails>> {
        let (hcas, count) = (self.rails.hcas?, self.rails.count?);
        let mut by_gpu: Vec<(u32, String, String)> = self
            .verbs()
            .filter(|r| is_active(r.nic))
            .filter(|r| {
                self.ports
                    .iter()
                    .any(|p| p.transport == PortTransport::Verbs && p.device == r.nic.name)
            })
            .filter_map(|r| {
                let (_, gpu) = r.nearest.as_ref()?;
                let index = gpu.trim_start_matches("GPU").parse::<u32>().ok()?;
                Some((index, gpu.clone(), r.nic.name.clone()))
            })
            .collect();
        by_gpu.sort_by_cached_key(|(i, _, n)| (*i, natural_key(n)));
        let mut out = Vec::with_capacity(by_gpu.len());
        for (k, (_, gpu, nic)) in by_gpu.into_iter().enumerate() {
            let Some(rail) = hcas.get(&nic).copied() else {
                return Some(Err(OffTheRails::NoRail { nic, gpu }));
            };
            if rail != k as u32 {
                return Some(Err(OffTheRails::OutOfOrder { nic, gpu, rail, k }));
            }
            out.push((gpu, nic, rail));
        }
        if out.len() != count as usize {
            return Some(Err(OffTheRails::Count {
                nics: out.len(),
                rails: count,
            }));
        }
        Some(Ok(out))
    }

    /// Verbs devices known by a bus id only (an NCCL topology file without `<net name>`).
    fn unnamed_verbs(&self) -> usize {
        self.verbs().filter(|r| r.nic.name.parse::<Bdf>().is_ok()).count()
    }
}

/// One rule's decision.
#[derive(Default)]
pub(crate) struct Outcome {
    pub(crate) settings: Vec<Setting>,
    pub(crate) left_out: Vec<String>,
    pub(crate) wants_topology_file: bool,
}

impl Outcome {
    fn set(name: &str, value: String, reason: String) -> Outcome {
        Outcome {
            settings: vec![Setting {
                name: name.into(),
                value,
                reason,
            }],
            ..Outcome::default()
        }
    }

    fn note(why: String) -> Outcome {
        Outcome {
            left_out: vec![why],
            ..Outcome::default()
        }
    }
}

/// One rule: what it sets (or why it sets nothing) for a node.
pub(crate) type Rule = fn(&Facts) -> Outcome;

/// Every rule, in the order they run.
pub(crate) const RULES: &[(&str, Rule)] = &[
    ("ib-hca", ib_hca),
    ("efa", efa),
    ("socket-ifname", socket_ifname),
    ("ib-gid-index", ib_gid_index),
    ("cross-nic", cross_nic),
    ("topo-file", topo_file),
    ("gdr-distance", gdr_distance),
];

fn is_active(n: &Nic) -> bool {
    n.rdma
        .as_ref()
        .is_some_and(|r| r.ports.is_empty() || r.ports.iter().any(|p| p.state_code.is_none_or(|c| c == 4)))
}

/// NCCL_IB_HCA: exact names of the active verbs devices near the GPUs.
fn ib_hca(f: &Facts) -> Outcome {
    let verbs: Vec<&RdmaNic> = f.verbs().collect();
    // A NIC known only by its bus id has no device name NCCL could match: naming it would
    // select nothing.
    let unnamed = f.unnamed_verbs();
    if unnamed > 0 {
        return Outcome::note(format!(
            "{unnamed} RDMA NIC(s) are known only by bus id: NCCL_IB_HCA left to NCCL's detection"
        ));
    }
    let active: Vec<&RdmaNic> = verbs.iter().copied().filter(|r| is_active(r.nic)).collect();
    if active.is_empty() {
        return Outcome::default();
    }
    let near = active
        .iter()
        .any(|r| r.nearest.as_ref().is_some_and(|(c, _)| *c <= PathClass::Pxb));
    if !near {
        if let Some(other) = f.gpu_local_non_verbs() {
            return Outcome::note(format!(
                "no verbs device is within PXB of a GPU and {other} is: NCCL_IB_HCA left unset so NCCL is not steered onto the far NICs ({})",
                active.iter().map(|r| r.nic.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    // Exactly the devices the never-slower guard protects: each GPU's NICs within PXB, or
    // its nearest ones where none is that close.
    let chosen: Vec<&RdmaNic> = active
        .iter()
        .copied()
        .filter(|r| {
            f.ports
                .iter()
                .any(|p| p.transport == PortTransport::Verbs && p.device == r.nic.name)
        })
        .collect();
    if chosen.is_empty() {
        return Outcome::default();
    }
    let mut names: Vec<&str> = chosen.iter().map(|r| r.nic.name.as_str()).collect();
    names.sort_by_key(|n| natural_key(n));
    let why: Vec<String> = chosen
        .iter()
        .map(|r| match &r.nearest {
            Some((c, g)) => format!("{} ({c} to {g})", r.nic.name),
            None => r.nic.name.clone(),
        })
        .collect();
    let skipped = verbs.len() - chosen.len();
    let reason = format!(
        "active RDMA devices {}: {}{}; `=` makes the names exact (without it mlx5_1 also matches mlx5_10..19)",
        if near {
            "within PXB of a GPU (or a GPU's nearest, where it has none that close)"
        } else {
            "nearest the GPUs (none is within PXB of one)"
        },
        why.join(", "),
        if skipped > 0 {
            format!("; {skipped} other RDMA device(s) left out (down, or farther from every GPU than its nearest)")
        } else {
            String::new()
        }
    );
    match rail_fields(f) {
        Some((fields, said)) => Outcome::set(
            "NCCL_IB_HCA",
            format!(
                "={}",
                names
                    .iter()
                    .map(|n| format!("{n}{}", fields.get(*n).map_or("", String::as_str)))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("{reason}; {said}"),
        ),
        None => Outcome::set("NCCL_IB_HCA", format!("={}", names.join(",")), reason),
    }
}

/// Each NIC's `::rail[:plane]` fields, where NCCL reads them (2.30.7) and the node's GPUs line
/// up with the fabric's rails, and what they say.
fn rail_fields(f: &Facts) -> Option<(BTreeMap<String, String>, String)> {
    if f.version.is_none_or(|v| v < NcclVersion(2, 30, 7)) || f.rails.off_rail.is_some() {
        return None;
    }
    let by_gpu = f.on_rails.as_ref()?.as_ref().ok()?;
    let fields = by_gpu
        .iter()
        .map(|(_, nic, rail)| {
            let plane = f
                .rails
                .planes
                .and_then(|p| p.get(nic))
                .map_or(String::new(), |p| format!(":{p}"));
            (nic.clone(), format!("::{rail}{plane}"))
        })
        .collect();
    Some((
        fields,
        format!(
            "each NIC's rail{} as {} found it (`name::rail`, read from NCCL 2.30.7: with NCCL_CROSS_NIC=0 a ring enters and leaves a node on one rail, src/graph/search.cc ncclTopoSearchCheckNet)",
            if f.rails.planes.is_some() { " and plane" } else { "" },
            f.rails.file()
        ),
    ))
}

fn efa(f: &Facts) -> Outcome {
    if f.rdma.iter().any(|r| is_efa(r.nic)) {
        Outcome::note(
            "EFA devices: NCCL reaches them through the aws-ofi-nccl plugin; NCCL_IB_HCA does not apply to them".into(),
        )
    } else {
        Outcome::default()
    }
}

/// NCCL_SOCKET_IFNAME: the out-of-band Ethernet interface that is up.
fn socket_ifname(f: &Facts) -> Outcome {
    let mut oob: Vec<&str> = f
        .snap
        .nics
        .iter()
        .filter(|n| n.kind == NicKind::Ethernet)
        .flat_map(|n| n.netdevs.iter())
        .filter(|d| d.operstate.as_deref() == Some("up"))
        .map(|d| d.name.as_str())
        .collect();
    oob.sort_by_key(|n| natural_key(n));
    let states_known = f
        .snap
        .nics
        .iter()
        .flat_map(|n| n.netdevs.iter())
        .any(|d| d.operstate.is_some());
    if !states_known {
        return Outcome::note(
            "interface states are unknown (the node is described by a file): NCCL_SOCKET_IFNAME left to NCCL's detection".into(),
        );
    }
    let has_rdma = f.snap.nics.iter().any(|n| n.kind == NicKind::Rdma);
    if !has_rdma && oob.len() > 1 {
        // Without RDMA, NCCL's socket transport carries GPU traffic over every interface it
        // finds: naming one would take the others away from it.
        return Outcome::note(format!(
            "no RDMA device: NCCL's socket transport uses the {} Ethernet interfaces that are up ({}), so NCCL_SOCKET_IFNAME is left unset rather than narrowed to one",
            oob.len(),
            oob.join(", ")
        ));
    }
    match oob.first() {
        Some(ifname) => Outcome::set(
            "NCCL_SOCKET_IFNAME",
            format!("={ifname}"),
            format!("{ifname} is the Ethernet interface that is up and not an RDMA port ({} such); `=` avoids prefix matches", oob.len()),
        ),
        None => Outcome::note(
            "no Ethernet interface is up apart from RDMA ports: NCCL_SOCKET_IFNAME left to NCCL's detection".into(),
        ),
    }
}

/// NCCL_IB_GID_INDEX: the RoCE v2 GID on RoCE ports, where NCCL does not pick it itself.
fn ib_gid_index(f: &Facts) -> Outcome {
    if f.unnamed_verbs() > 0 {
        return Outcome::default();
    }
    let roce: Vec<(&str, Vec<u32>)> = f
        .verbs()
        .filter_map(|r| r.nic.rdma.as_ref().map(|d| (r.nic.name.as_str(), d)))
        .flat_map(|(name, d)| {
            d.ports
                .iter()
                .filter(|p| p.link_layer == LinkLayer::Ethernet)
                .map(move |p| (name, p.roce_v2_gid_indexes.clone()))
        })
        .collect();
    if roce.is_empty() {
        return Outcome::default();
    }
    if f.version.is_some_and(|v| v >= NcclVersion(2, 21, 0)) {
        return Outcome::note(
            "RoCE ports: NCCL ≥ 2.21 selects the RoCE v2 GID itself (NCCL_IB_GID_INDEX=-1), so none is forced".into(),
        );
    }
    // mlx5 lists link-local GIDs first; the last RoCE v2 index is the IPv4-mapped one.
    let picks: Vec<Option<u32>> = roce.iter().map(|(_, v)| v.last().copied()).collect();
    match picks.first().copied().flatten() {
        Some(idx) if picks.iter().all(|p| *p == Some(idx)) => Outcome::set(
            "NCCL_IB_GID_INDEX",
            idx.to_string(),
            format!(
                "RoCE v2 GIDs on {}: {:?}; {idx} is the last (IPv4-mapped) one{}",
                roce[0].0,
                roce[0].1,
                if f.version.is_none() {
                    " (NCCL version unknown: set in case it is older than 2.21)"
                } else {
                    ""
                }
            ),
        ),
        _ => Outcome::note(format!(
            "RoCE ports disagree on their RoCE v2 GID index ({roce:?}): NCCL_IB_GID_INDEX not forced"
        )),
    }
}

/// NCCL_CROSS_NIC=0 on rail-optimised fabrics, which NCCL cannot see for itself ("NCCL does
/// not detect the network topology", NVIDIA/nccl#1933): where the wires showed the rails, only
/// on a node whose GPUs' NICs sit on the rails of their indices and whose ports keep to them.
fn cross_nic(f: &Facts) -> Outcome {
    let Some(r) = f.rails.count else {
        return Outcome::default();
    };
    let file = f.rails.file();
    if let Some(why) = f.rails.off_rail {
        return Outcome::note(format!(
            "the fabric ({file}) is rail-optimised, but this host's ports break the rail pattern ({why}): NCCL_CROSS_NIC and rail ids are left to NCCL here; move the cable and run `topo-tune fabric` again"
        ));
    }
    match &f.on_rails {
        None => {
            // Named by its file name: the same reason on every node, wherever the file is.
            let name = std::path::Path::new(file).file_name().map_or(file.into(), |n| n.to_string_lossy());
            Outcome::set(
                "NCCL_CROSS_NIC",
                "0".into(),
                format!("{name} states a rail-optimised fabric ({r} rails): keep each ring on one NIC/rail (NCCL does not detect the network: NVIDIA/nccl#1933)"),
            )
        }
        Some(Ok(by_gpu)) => {
            let shown: Vec<String> = by_gpu.iter().map(|(g, n, k)| format!("{n} rail {k} near {g}")).collect();
            Outcome::set(
                "NCCL_CROSS_NIC",
                "0".into(),
                format!(
                    "{file}: the fabric is rail-optimised ({r} rails) and each GPU's NIC sits on the rail of its index ({}): rings keep to one rail, which NCCL cannot see for itself (NVIDIA/nccl#1933)",
                    shown.join(", ")
                ),
            )
        }
        Some(Err(why)) => Outcome::note(format!(
            "the fabric ({file}) is rail-optimised ({r} rails), but this node's GPUs do not line up with its rails ({why}): NCCL_CROSS_NIC left at NCCL's default (2: the same NIC preferred, others allowed)"
        )),
    }
}

/// NCCL_TOPO_FILE where NCCL's own detection is known to be wrong: a VM's flat PCI tree with
/// numa_node = -1 on GPUs or NICs (NCCL files them under a synthetic `numaid="-1"` CPU).
fn topo_file(f: &Facts) -> Outcome {
    let flat_unknown = f
        .snap
        .gpus
        .iter()
        .map(|g| &g.placement)
        .chain(f.rdma.iter().filter_map(|r| r.nic.pci.as_ref()))
        .any(|p| p.numa_node.is_none() && p.numa_affinity.len() == 1 && matches!(p.parent, PciParent::HostBridge(_)));
    if !flat_unknown {
        return Outcome::default();
    }
    let mut o = Outcome::set(
        "NCCL_TOPO_FILE",
        TOPOLOGY.into(),
        "numa_node is -1 on GPUs/NICs straight under a host bridge (a VM): the file places them on the NUMA node their CPUs say".into(),
    );
    o.wants_topology_file = true;
    o
}

/// Advisory only: GPUDirect RDMA distance (NCCL_NET_GDR_LEVEL is a debugging variable).
fn gdr_distance(f: &Facts) -> Outcome {
    let left_out = f
        .rdma
        .iter()
        .filter_map(|r| {
            if r.nic.pci.is_none() {
                return Some(format!("{} has no PCI path in the source: its distance to the GPUs, and so whether GPUDirect RDMA is on by default for it, is unknown", r.nic.name));
            }
            let (c, g) = r.nearest.as_ref()?;
            (*c > PathClass::Pxb).then(|| format!("{} is {c} from the nearest GPU ({g}): GPUDirect RDMA is off by default beyond PXB; NCCL_NET_GDR_LEVEL is a debugging variable, left to the canary", r.nic.name))
        })
        .collect();
    Outcome {
        left_out,
        ..Outcome::default()
    }
}

/// Run every rule, then apply cluster.yaml's overrides (they win), and validate the result
/// for this node's NCCL.
pub fn derive(
    snap: &NodeSnapshot,
    rails: Option<u32>,
    version: Option<NcclVersion>,
    overrides: &BTreeMap<String, String>,
) -> Result<Derived, Rejection> {
    derive_from(
        &Facts::new(snap, &path_classes(snap), NodeRails::stated(rails), version),
        overrides,
    )
}

/// [`derive`] on facts already gathered.
pub(crate) fn derive_from(facts: &Facts, overrides: &BTreeMap<String, String>) -> Result<Derived, Rejection> {
    let version = facts.version;
    let mut d = Derived {
        settings: Vec::new(),
        wants_topology_file: false,
        left_out: Vec::new(),
    };
    for (_, rule) in RULES {
        let o = rule(facts);
        d.settings.extend(o.settings);
        d.left_out.extend(o.left_out);
        d.wants_topology_file |= o.wants_topology_file;
    }
    apply_overrides(&mut d.settings, overrides, version)?;
    for s in &d.settings {
        validate(&s.name, &s.value, version)?;
    }
    d.settings.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(d)
}

fn apply_overrides(
    settings: &mut Vec<Setting>,
    overrides: &BTreeMap<String, String>,
    version: Option<NcclVersion>,
) -> Result<(), Rejection> {
    for (name, value) in overrides {
        check_node_wide(name, value, version)?;
        settings.retain(|s| &s.name != name);
        settings.push(Setting {
            name: name.clone(),
            value: value.clone(),
            reason: "cluster.yaml `nccl:` override".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{as_connectx, p5en};

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn value<'a>(d: &'a Derived, name: &str) -> Option<&'a str> {
        d.settings.iter().find(|s| s.name == name).map(|s| s.value.as_str())
    }

    #[test]
    fn efa_devices_get_no_ib_hca_and_say_why() {
        let d = derive(&p5en(), None, None, &none()).unwrap();
        assert_eq!(value(&d, "NCCL_IB_HCA"), None);
        assert!(
            d.left_out.iter().any(|w| w.contains("aws-ofi-nccl")),
            "{:?}",
            d.left_out
        );
    }

    #[test]
    fn connectx_devices_are_named_exactly_in_natural_order() {
        let d = derive(&as_connectx(p5en()), None, None, &none()).unwrap();
        let hca = value(&d, "NCCL_IB_HCA").unwrap();
        let names: Vec<String> = (0..16).map(|i| format!("mlx5_{i}")).collect();
        assert_eq!(
            hca,
            format!("={}", names.join(",")),
            "mlx5_10 after mlx5_9, `=` for exact names"
        );
    }

    #[test]
    fn a_down_port_leaves_its_device_out_of_ib_hca() {
        let mut s = as_connectx(p5en());
        let nic = s.nics.iter_mut().find(|n| n.name == "mlx5_3").unwrap();
        for p in &mut nic.rdma.as_mut().unwrap().ports {
            p.state = Some("DOWN".into());
            p.state_code = Some(1);
        }
        let d = derive(&s, None, None, &none()).unwrap();
        let hca = value(&d, "NCCL_IB_HCA").unwrap();
        assert!(!hca.split([',', '=']).any(|n| n == "mlx5_3"), "{hca}");
        assert!(hca.contains("mlx5_2") && hca.contains("mlx5_4"), "{hca}");
    }

    #[test]
    fn roce_gid_index_is_forced_only_below_nccl_2_21() {
        let mut s = as_connectx(p5en());
        for nic in s.nics.iter_mut().filter(|n| n.rdma.is_some()) {
            for p in &mut nic.rdma.as_mut().unwrap().ports {
                p.link_layer = LinkLayer::Ethernet;
                p.roce_v2_gid_indexes = vec![1, 3];
            }
        }
        let old = derive(&s, None, Some(NcclVersion(2, 20, 5)), &none()).unwrap();
        assert_eq!(value(&old, "NCCL_IB_GID_INDEX"), Some("3"), "the last RoCE v2 GID");
        let new = derive(&s, None, Some(NcclVersion(2, 21, 0)), &none()).unwrap();
        assert_eq!(value(&new, "NCCL_IB_GID_INDEX"), None);
        assert!(new
            .left_out
            .iter()
            .any(|w| w.contains("selects the RoCE v2 GID itself")));
        // Ports that disagree: nothing is forced.
        s.nics
            .iter_mut()
            .find(|n| n.name == "mlx5_0")
            .unwrap()
            .rdma
            .as_mut()
            .unwrap()
            .ports[0]
            .roce_v2_gid_indexes = vec![2];
        let mixed = derive(&s, None, Some(NcclVersion(2, 20, 5)), &none()).unwrap();
        assert_eq!(value(&mixed, "NCCL_IB_GID_INDEX"), None);
    }

    /// A ConnectX p5en (16 NICs, two per GPU) on a fabric whose wires gave each NIC a rail:
    /// `rail_hcas` as `topo-tune fabric` writes it.
    fn wired(rails: &[(&str, u32)], off_rail: Option<&str>) -> crate::model::fabric::Fabric {
        crate::model::fabric::Fabric {
            rails: Some(16),
            rail_hcas: rails.iter().map(|(h, r)| (h.to_string(), *r)).collect(),
            off_rail: off_rail
                .map(|w| BTreeMap::from([("gpu-01".to_string(), w.to_string())]))
                .unwrap_or_default(),
            stated_in: Some("/site/fabric.yaml".into()),
            ..Default::default()
        }
    }

    fn on_fabric(f: &crate::model::fabric::Fabric, version: NcclVersion) -> Derived {
        let s = as_connectx(p5en());
        let facts = Facts::new(&s, &path_classes(&s), NodeRails::of(Some(f), "gpu-01"), Some(version));
        derive_from(&facts, &none()).unwrap()
    }

    #[test]
    fn the_wires_rails_reach_nccl_where_the_gpus_line_up_with_them() {
        let names: Vec<String> = (0..16).map(|i| format!("mlx5_{i}")).collect();
        let in_order: Vec<(&str, u32)> = names.iter().map(String::as_str).zip(0..).collect();
        let new = NcclVersion(2, 30, 7);
        let d = on_fabric(&wired(&in_order, None), new);
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), Some("0"));
        let why = &d.settings.iter().find(|s| s.name == "NCCL_CROSS_NIC").unwrap().reason;
        assert!(
            why.starts_with("/site/fabric.yaml: the fabric is rail-optimised (16 rails) and each GPU's NIC sits on the rail of its index (mlx5_0 rail 0 near GPU0, mlx5_1 rail 1 near GPU0, mlx5_2 rail 2 near GPU0, mlx5_3 rail 3 near GPU0, mlx5_4 rail 4 near GPU2"),
            "{why}"
        );
        let hca = value(&d, "NCCL_IB_HCA").unwrap();
        assert!(
            hca.starts_with("=mlx5_0::0,mlx5_1::1,mlx5_2::2,") && hca.ends_with("mlx5_15::15"),
            "{hca}"
        );
        // An NCCL that reads no rail fields gets the names alone, and CROSS_NIC still.
        let old = on_fabric(&wired(&in_order, None), NcclVersion(2, 30, 4));
        assert!(!value(&old, "NCCL_IB_HCA").unwrap().contains("::"));
        assert_eq!(value(&old, "NCCL_CROSS_NIC"), Some("0"));
        // GPU0's NICs on rails 3 and 2: the rails do not follow the GPUs' order.
        let mut swapped = in_order.clone();
        swapped[0].1 = 3;
        swapped[3].1 = 0;
        let d = on_fabric(&wired(&swapped, None), new);
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), None);
        assert!(!value(&d, "NCCL_IB_HCA").unwrap().contains("::"));
        assert!(
            d.left_out
                .iter()
                .any(|l| l.contains("mlx5_0, the NIC of GPU0, is on rail 3 where the GPUs' order puts rail 0")),
            "{:?}",
            d.left_out
        );
        // A host the wires show off its rails: nothing rail-dependent, and why.
        let d = on_fabric(
            &wired(
                &in_order,
                Some("mlx5_3 is cabled to L4 port 1, a leaf of mlx5_4's rail"),
            ),
            new,
        );
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), None);
        assert!(!value(&d, "NCCL_IB_HCA").unwrap().contains("::"));
        assert!(
            d.left_out
                .iter()
                .any(|l| l.contains("this host's ports break the rail pattern (mlx5_3 is cabled to L4 port 1")),
            "{:?}",
            d.left_out
        );
        // Eight rails for sixteen NICs: not the rails of these GPUs.
        let half: Vec<(&str, u32)> = in_order.iter().map(|(n, r)| (*n, r / 2)).collect();
        let mut f = wired(&half, None);
        f.rails = Some(8);
        let d = on_fabric(&f, new);
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), None);
        // Planes: the fourth field.
        let mut f = wired(&in_order, None);
        f.hca_planes = names
            .iter()
            .map(|n| (n.clone(), u32::from(n.ends_with(['1', '3', '5', '7', '9']))))
            .collect();
        let d = on_fabric(&f, new);
        let hca = value(&d, "NCCL_IB_HCA").unwrap();
        assert!(hca.starts_with("=mlx5_0::0:0,mlx5_1::1:1,"), "{hca}");
    }

    #[test]
    fn rails_keep_rings_on_one_nic() {
        let d = derive(&p5en(), Some(8), None, &none()).unwrap();
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), Some("0"));
        let d = derive(&p5en(), None, None, &none()).unwrap();
        assert_eq!(value(&d, "NCCL_CROSS_NIC"), None);
    }

    #[test]
    fn socket_ifname_needs_known_states_and_names_the_first_up_interface() {
        let mut s = as_connectx(p5en());
        let d = derive(&s, None, None, &none()).unwrap();
        assert_eq!(value(&d, "NCCL_SOCKET_IFNAME"), None, "states unknown in a file");
        for (i, dev) in s
            .nics
            .iter_mut()
            .filter(|n| n.kind == NicKind::Ethernet)
            .flat_map(|n| n.netdevs.iter_mut())
            .enumerate()
        {
            dev.operstate = Some(if i == 0 { "down" } else { "up" }.into());
        }
        let d = derive(&s, None, None, &none()).unwrap();
        assert_eq!(value(&d, "NCCL_SOCKET_IFNAME"), Some("=enp72s0"));
    }

    #[test]
    fn overrides_win_and_are_checked_like_the_rest() {
        let forced = BTreeMap::from([("NCCL_IB_HCA".to_string(), "=mlx5_0".to_string())]);
        let d = derive(&as_connectx(p5en()), None, None, &forced).unwrap();
        let s = d.settings.iter().find(|s| s.name == "NCCL_IB_HCA").unwrap();
        assert_eq!(
            (s.value.as_str(), s.reason.as_str()),
            ("=mlx5_0", "cluster.yaml `nccl:` override")
        );
        assert_eq!(d.settings.iter().filter(|s| s.name == "NCCL_IB_HCA").count(), 1);
        let debug = BTreeMap::from([("NCCL_P2P_DISABLE".to_string(), "1".to_string())]);
        assert!(
            derive(&p5en(), None, None, &debug).is_err(),
            "a debug variable is not set node-wide"
        );
        let unknown = BTreeMap::from([("NCCL_NO_SUCH_THING".to_string(), "1".to_string())]);
        assert!(derive(&p5en(), None, None, &unknown).is_err());
    }

    #[test]
    fn settings_come_out_sorted_by_name() {
        let d = derive(&as_connectx(p5en()), Some(16), None, &none()).unwrap();
        let names: Vec<&str> = d.settings.iter().map(|s| s.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(names.len() >= 2, "{names:?}");
    }
}
