//! What the links inside one node are worth with NCCL's figures: the GPU link matrix the ring
//! solver reads, PCIe link bandwidth, a node's network bandwidth, and the NVSwitch fabric
//! assumed on SXM boards whose NVLink is unknown. Pure.

use crate::model::fabric::{MeshSpec, NodeHints, NvlinkHint};
use crate::model::gpu_parts::{self, Board, GpuPart};
use crate::model::plan::NvlinkOrigin;
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::NvlinkSource;
use crate::model::snapshot::{NicKind, NodeSnapshot};
use crate::model::topo_h::{self, DEFAULT_NET_GBPS, INTER_CPU_GBPS};
use crate::model::{PathClass, PcieLink};

/// A node with no RDMA NIC falls back to sockets over its Ethernet; 10 GbE when its speed is
/// unknown. A topo-tune assumption, not an NCCL figure.
pub(crate) const SOCKET_FALLBACK_GBPS: f64 = 1.25;
/// hwloc's raw figure for a Gen5 x16 link (GB/s), to scale hwloc-only links to NCCL's.
const HWLOC_GEN5_X16_GBPS: f64 = 63.02;

/// NCCL's figure for a PCIe link, by generation and width (hwloc-only input: its raw figure
/// scaled to NCCL's).
pub(crate) fn pcie_gbps(link: &PcieLink) -> f64 {
    match (link.current_gen, link.current_width) {
        (Some(g), Some(w)) => topo_h::pcie_x16_gbps(g) * f64::from(w) / 16.0,
        _ => link.bandwidth_gbps.map_or(topo_h::pcie_x16_gbps(3), |b| {
            b * topo_h::pcie_x16_gbps(5) / HWLOC_GEN5_X16_GBPS
        }),
    }
}

/// How a node's GPU-to-GPU links are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NvlinkBasis {
    /// The node reported NVLink itself (the driver, hwloc's NVLinkBandwidth matrix, or
    /// `<nvlink>` in its NCCL file): used as is.
    Reported { source: Option<NvlinkSource> },
    /// An all-to-all NVSwitch fabric: `links` per GPU at `gbps` each, and why it is believed.
    Nvswitch { links: u32, gbps: f64, why: String },
    /// Direct links stated in cluster.yaml: links per pair (GPUs in index order) at `gbps` each.
    Mesh {
        pairs: Vec<Vec<u32>>,
        gbps: f64,
        why: String,
    },
    /// Unknown: PCIe paths only, and why.
    Unknown { why: String },
}

impl NvlinkBasis {
    /// A stable code for the plan's notes.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            NvlinkBasis::Reported { .. } => "nvlink-reported",
            NvlinkBasis::Nvswitch { why, .. } if why.starts_with("stated") => "stated-nvswitch",
            NvlinkBasis::Nvswitch { .. } => "assumed-nvswitch",
            NvlinkBasis::Mesh { .. } => "stated-mesh",
            NvlinkBasis::Unknown { .. } => "nvlink-unknown",
        }
    }

    /// Where the plan's NVLink figures come from: the node's own source, the part table
    /// (assumed), cluster.yaml (stated), or nothing (PCIe only).
    pub(crate) fn origin(&self) -> NvlinkOrigin {
        match self {
            NvlinkBasis::Reported { source: Some(s) } => match s {
                NvlinkSource::Nvml => NvlinkOrigin::Nvml,
                NvlinkSource::HwlocDistances => NvlinkOrigin::HwlocDistances,
                NvlinkSource::NcclFile => NvlinkOrigin::NcclFile,
            },
            NvlinkBasis::Reported { source: None } => NvlinkOrigin::Nvml,
            NvlinkBasis::Nvswitch { why, .. } if why.starts_with("stated") => NvlinkOrigin::ClusterYaml,
            NvlinkBasis::Nvswitch { .. } => NvlinkOrigin::PartTable,
            NvlinkBasis::Mesh { .. } => NvlinkOrigin::ClusterYaml,
            NvlinkBasis::Unknown { .. } => NvlinkOrigin::None,
        }
    }
}

/// NVLinks per GPU of an NVSwitch board by SM, where the part is unknown but its generation is.
fn nvswitch_links_by_sm(sm: u32) -> Option<u32> {
    match sm / 10 {
        7 => Some(6),
        8 if sm == 80 => Some(12),
        9 | 10 => Some(18),
        _ => None,
    }
}

/// The GPUs' compute capability × 10, when the snapshot knows it (`9.0` → 90).
fn sm_of(snap: &NodeSnapshot) -> Option<u32> {
    let cc = snap.gpus.first()?.compute_capability.as_deref()?;
    let (major, minor) = cc.split_once('.')?;
    Some(major.parse::<u32>().ok()? * 10 + minor.parse::<u32>().ok()?)
}

/// The node's GPU part: from its PCI ids (all GPUs alike), else as cluster.yaml names it.
pub(crate) fn part_of(snap: &NodeSnapshot, hints: &NodeHints) -> Option<&'static GpuPart> {
    let ids: Vec<Option<&str>> = snap.gpus.iter().map(|g| g.placement.pci_id.as_deref()).collect();
    match ids.first() {
        Some(Some(first)) if ids.iter().all(|i| *i == Some(*first)) => gpu_parts::by_pci_id(first),
        _ => hints.gpu.as_deref().and_then(gpu_parts::by_key),
    }
}

/// NCCL's one-direction GB/s per NVLink for the node's GPUs (the part's SM, else the
/// snapshot's compute capability).
fn per_link_gbps(snap: &NodeSnapshot, part: Option<&GpuPart>) -> Option<f64> {
    let sm = part.map(|p| p.sm).or_else(|| sm_of(snap))?;
    topo_h::nvlink_gbps((sm / 10) as i32, (sm % 10) as i32)
}

/// Decide how the node's GPUs are joined: the node's own report, else an NVSwitch fabric the
/// part's board implies or cluster.yaml states, else a mesh cluster.yaml states, else PCIe
/// only — with the reason.
pub(crate) fn nvlink_basis(snap: &NodeSnapshot, hints: &NodeHints) -> NvlinkBasis {
    if snap.gpus.is_empty() || snap.gpus.iter().any(|g| g.nvlinks.is_some()) {
        return NvlinkBasis::Reported {
            source: snap.gpus.iter().find_map(|g| g.nvlink_source),
        };
    }
    let part = part_of(snap, hints);
    let sm = part.map(|p| p.sm).or_else(|| sm_of(snap));
    let gbps = per_link_gbps(snap, part);
    let links = part
        .map(|p| p.nvlinks)
        .filter(|&l| l > 0)
        .or_else(|| sm.and_then(nvswitch_links_by_sm));
    let named = part.map_or_else(|| "GPU part unknown".to_string(), |p| p.name.to_string());
    let fabric = |why: String| match (links, gbps) {
        (Some(links), Some(gbps)) => NvlinkBasis::Nvswitch { links, gbps, why },
        _ => NvlinkBasis::Unknown {
            why: format!(
                "{why}, but the GPU generation is unknown (no PCI id or SM): add `gpu: <part>` (docs/cluster-yaml.md)"
            ),
        },
    };
    match hints.nvlink {
        NvlinkHint::None => NvlinkBasis::Unknown {
            why: "stated in cluster.yaml: `nvlink: none`".into(),
        },
        NvlinkHint::Nvswitch => fabric(format!("stated in cluster.yaml: `nvlink: nvswitch` ({named})")),
        NvlinkHint::Mesh => mesh_basis(snap, hints.nvlink_mesh.as_ref(), gbps, &named),
        NvlinkHint::Auto => auto_basis(snap, part, fabric),
    }
}

/// `nvlink: mesh`: the pairs cluster.yaml states, at the part's per-link figure (a stated
/// per-pair bandwidth is one link of that much where the part is unknown).
fn mesh_basis(snap: &NodeSnapshot, spec: Option<&MeshSpec>, per_link: Option<f64>, named: &str) -> NvlinkBasis {
    let n = snap.gpus.len();
    let unknown = |why: String| NvlinkBasis::Unknown { why };
    let uniform = |links: u32| -> Vec<Vec<u32>> {
        (0..n)
            .map(|i| (0..n).map(|j| if i == j { 0 } else { links }).collect())
            .collect()
    };
    let (pairs, gbps, what) = match spec {
        None => return unknown("`nvlink: mesh` without `nvlink_mesh:`: PCIe paths only".into()),
        Some(MeshSpec::LinksPerPair(k)) => match per_link {
            Some(g) => (uniform(*k), g, format!("{k} NVLinks between every GPU pair")),
            None => {
                return unknown(format!(
                    "`nvlink_mesh: {{links_per_pair: {k}}}` but the GPU generation is unknown (no PCI id or SM): add `gpu: <part>`, or state `gbps_per_pair`"
                ))
            }
        },
        Some(MeshSpec::MbpsPerPair(mbps)) => {
            let pair = f64::from(*mbps) / 1000.0;
            match per_link {
                Some(g) => {
                    let k = ((pair / g).round() as u32).max(1);
                    (uniform(k), pair / f64::from(k), format!("{pair} GB/s between every GPU pair ({k} links)"))
                }
                None => (uniform(1), pair, format!("{pair} GB/s between every GPU pair")),
            }
        }
        Some(MeshSpec::Links(m)) if m.len() != n => {
            return unknown(format!(
                "`nvlink_mesh.links` is {}×{} but the node has {n} GPUs: PCIe paths only",
                m.len(),
                m.len()
            ))
        }
        Some(MeshSpec::Links(m)) => match per_link {
            Some(g) => (m.clone(), g, "links per GPU pair as `nvlink_mesh.links` lists them".to_string()),
            None => {
                return unknown(
                    "`nvlink_mesh.links` but the GPU generation is unknown (no PCI id or SM): add `gpu: <part>`".into(),
                )
            }
        },
    };
    NvlinkBasis::Mesh {
        pairs,
        gbps,
        why: format!("stated in cluster.yaml: `nvlink: mesh`, {what} ({named})"),
    }
}

/// `nvlink: auto`: what the part's board and the NVSwitch functions on PCI say.
fn auto_basis(
    snap: &NodeSnapshot,
    part: Option<&'static GpuPart>,
    fabric: impl Fn(String) -> NvlinkBasis,
) -> NvlinkBasis {
    let unknown = |why: String| NvlinkBasis::Unknown { why };
    let Some(p) = part else {
        return unknown("NVLink unknown (described by files, or no driver) and the GPU part is not known: PCIe paths only; state `nvlink: nvswitch` in cluster.yaml if the node has NVSwitches".into());
    };
    let switches = snap.pci.nvswitches.len();
    match p.board {
        Board::NvswitchOnPci if switches > 0 => fabric(format!(
            "assumed: {} NVSwitch function(s) on PCI and {} GPUs (an HGX NVSwitch board)",
            switches, p.name
        )),
        Board::NvswitchHidden => fabric(format!(
            "assumed: {} GPUs sit on HGX B100/B200/B300 boards, whose NVSwitches never appear on PCIe",
            p.name
        )),
        Board::NvlinkSwitchTray => fabric(format!(
            "assumed: {} GPUs reach each other (and the other trays of their NVL72 rack) through the rack's NVLink Switch trays",
            p.name
        )),
        Board::NvswitchOnPci => unknown(format!(
            "{} GPUs, whose 8-GPU boards carry NVSwitches, but none is on PCI (a VM, or a 4-GPU board): PCIe paths only; state `nvlink: nvswitch`, or `nvlink: mesh` for a 4-GPU board, in cluster.yaml",
            p.name
        )),
        Board::DirectMesh => unknown(format!(
            "{} GPUs use a hybrid cube mesh only the driver can report: PCIe paths only; state it with `nvlink: mesh` and `nvlink_mesh.links`",
            p.name
        )),
        Board::Superchip => unknown(format!(
            "{} superchips reach other GPUs over NVLink only in NVL32 systems, which the driver reports: PCIe paths only",
            p.name
        )),
        Board::Pcie => unknown(format!(
            "{} cards reach each other over NVLink only through bridges the driver reports: PCIe paths only",
            p.name
        )),
    }
}

/// A node's GPU links as the planner uses them: the matrix the ring solver reads and NCCL's
/// per-link GB/s (what the NVLink pairs of the matrix are made of). Held per node of a fleet,
/// so nothing more.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GpuLinks {
    pub(crate) matrix: LinkMatrix,
    pub(crate) gbps_per_link: f64,
}

impl GpuLinks {
    /// Whether GPUs `i` and `j` are joined by NVLink.
    pub(crate) fn is_nvlink(&self, i: usize, j: usize) -> bool {
        i != j && self.matrix.cost[i][j] == crate::model::topo_h::NcclPath::Nvl.rank()
    }

    /// The NVLinks between each pair (0: PCIe), from the matrix: a pair's GB/s over the
    /// per-link figure.
    pub(crate) fn nvlinks(&self) -> Vec<Vec<u32>> {
        let n = self.matrix.len();
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if self.is_nvlink(i, j) && self.gbps_per_link > 0.0 {
                            (self.matrix.bw[i][j] / self.gbps_per_link).round() as u32
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// Bandwidth and hop cost between every pair of GPUs of a node (GPUs in index order), from
/// the node's path classes computed once (`graph::paths::path_classes`) and its NVLink basis.
pub(crate) fn gpu_link_matrix_with(
    snap: &NodeSnapshot,
    mut classes: Vec<Vec<PathClass>>,
    basis: &NvlinkBasis,
) -> GpuLinks {
    let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    let n = gpus.len();
    let stated_gbps = match basis {
        NvlinkBasis::Nvswitch { links, gbps, .. } => {
            set_pairs(&mut classes, n, |_, _| *links);
            Some(*gbps)
        }
        NvlinkBasis::Mesh { pairs, gbps, .. } => {
            set_pairs(&mut classes, n, |i, j| pairs[i][j]);
            Some(*gbps)
        }
        _ => None,
    };
    let mut bw = vec![vec![0.0; n]; n];
    let mut cost = vec![vec![0; n]; n];
    let mut gbps_per_link: f64 = 0.0;
    for i in 0..n {
        let per_link = gpus[i]
            .nvlinks
            .as_ref()
            .and_then(|l| l.iter().find_map(|x| x.bandwidth_gbps))
            .or(stated_gbps)
            .or(topo_h::nvlink_gbps(8, 0))
            .unwrap_or_default();
        for j in 0..n {
            if i == j {
                continue;
            }
            let pcie = pcie_gbps(&gpus[i].placement.pcie).min(pcie_gbps(&gpus[j].placement.pcie));
            let class = classes[i][j];
            bw[i][j] = match class {
                PathClass::NvLink(k) => {
                    gbps_per_link = gbps_per_link.max(per_link);
                    per_link * f64::from(k)
                }
                PathClass::Sys => pcie.min(INTER_CPU_GBPS),
                PathClass::SelfPath => 0.0,
                _ => pcie,
            };
            cost[i][j] = class.nccl_path().rank();
        }
    }
    GpuLinks {
        matrix: LinkMatrix { bw, cost },
        gbps_per_link,
    }
}

/// GPU pairs (`i ≠ j` among the first `n` rows) set to `NV#` with the links `links(i, j)`
/// gives, where it gives any.
fn set_pairs(classes: &mut [Vec<PathClass>], n: usize, links: impl Fn(usize, usize) -> u32) {
    for (i, row) in classes.iter_mut().enumerate().take(n) {
        for (j, c) in row.iter_mut().enumerate().take(n) {
            let k = links(i, j);
            if i != j && k > 0 {
                *c = PathClass::NvLink(k);
            }
        }
    }
}

/// GB/s a node's GPUs put on NVLink together: per GPU, the bandwidth to its best-joined peer
/// (on an NVSwitch fabric, the GPU's whole NVLink), summed; on a one-GPU node, its own links
/// (reported, or the fabric the basis states).
pub(crate) fn nvlink_out_gbps(snap: &NodeSnapshot, l: &GpuLinks, basis: &NvlinkBasis) -> f64 {
    let n = l.matrix.len();
    if n >= 2 {
        return (0..n)
            .map(|i| {
                (0..n)
                    .filter(|&j| l.is_nvlink(i, j))
                    .map(|j| l.matrix.bw[i][j])
                    .fold(0.0, f64::max)
            })
            .sum();
    }
    if let NvlinkBasis::Nvswitch { links, gbps, .. } = basis {
        return f64::from(*links) * gbps * n as f64;
    }
    snap.gpus
        .iter()
        .filter_map(|g| {
            let links = g.nvlinks.as_ref()?;
            Some(
                links
                    .iter()
                    .filter(|x| x.active)
                    .filter_map(|x| x.bandwidth_gbps)
                    .sum::<f64>(),
            )
        })
        .sum()
}

/// GB/s a host can put on the network, and what it rests on when not on the node's own
/// figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetRate {
    pub(crate) gbps: f64,
    /// Why the figure is not the node's own report: some NIC's rate assumed or stated.
    pub(crate) assumed: Option<String>,
}

/// GB/s a host can put on the network: each RDMA NIC's port rate as the node reports it, else
/// cluster.yaml's `nic_gbps` (`stated`, Gb/s), else NCCL's default for a NIC that reports none
/// (`assumed`, said so); without RDMA NICs, its sockets.
pub(crate) fn host_net(snap: &NodeSnapshot, stated: Option<u32>) -> NetRate {
    let mut defaulted = 0;
    let mut stated_used = 0;
    let rdma: f64 = snap
        .nics
        .iter()
        .filter(|n| n.kind == NicKind::Rdma)
        .map(|n| {
            let reported = n
                .rdma
                .as_ref()
                .and_then(|r| r.ports.iter().filter_map(|p| p.rate_gbps).reduce(f64::max));
            match (reported, stated) {
                (Some(gb), _) => gb / 8.0,
                (None, Some(gb)) => {
                    stated_used += 1;
                    f64::from(gb) / 8.0
                }
                (None, None) => {
                    defaulted += 1;
                    DEFAULT_NET_GBPS
                }
            }
        })
        .sum();
    let assumed = match (defaulted, stated_used) {
        (0, 0) => None,
        (0, n) => Some(format!(
            "{n} NIC(s) at cluster.yaml's nic_gbps {} Gb/s (the node reports no rate)",
            stated.unwrap_or_default()
        )),
        (n, _) => Some(format!(
            "assumed: {n} NIC(s) report no rate, each taken at NCCL's default {DEFAULT_NET_GBPS} GB/s (100 Gb/s); state `nic_gbps:` in cluster.yaml"
        )),
    };
    if rdma > 0.0 {
        return NetRate { gbps: rdma, assumed };
    }
    NetRate {
        gbps: socket_gbps(snap),
        assumed: None,
    }
}

/// GB/s a host can put on the network: [`host_net`] without a stated rate.
pub fn host_net_gbps(snap: &NodeSnapshot) -> f64 {
    host_net(snap, None).gbps
}

fn socket_gbps(snap: &NodeSnapshot) -> f64 {
    snap.nics
        .iter()
        .flat_map(|n| n.netdevs.iter())
        .filter_map(|d| d.speed_mbps)
        .max()
        .map_or(SOCKET_FALLBACK_GBPS, |m| m as f64 / 8000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::paths::path_classes;
    use crate::model::testing::p5en;

    fn with_part(mut s: NodeSnapshot, pci_id: &str) -> NodeSnapshot {
        for g in &mut s.gpus {
            g.placement.pci_id = Some(pci_id.into());
        }
        s
    }

    fn hints(nvlink: NvlinkHint, mesh: Option<MeshSpec>) -> NodeHints {
        NodeHints {
            nvlink,
            nvlink_mesh: mesh,
            ..NodeHints::default()
        }
    }

    #[test]
    fn a_stated_mesh_is_its_pairs_at_the_parts_per_link_figure() {
        let s = p5en();
        let b = nvlink_basis(&s, &hints(NvlinkHint::Mesh, Some(MeshSpec::LinksPerPair(6))));
        let NvlinkBasis::Mesh { pairs, gbps, .. } = &b else {
            panic!("{b:?}")
        };
        assert_eq!((pairs[0][1], pairs[0][0], *gbps), (6, 0, 20.6));
        assert_eq!(b.origin(), NvlinkOrigin::ClusterYaml);
        let links = gpu_link_matrix_with(&s, path_classes(&s), &b);
        assert!((links.matrix.bw[0][1] - 123.6).abs() < 1e-9);
        assert_eq!(links.nvlinks()[2][3], 6);
        // A pair bandwidth: links from the part's figure, the total kept.
        let b = nvlink_basis(&s, &hints(NvlinkHint::Mesh, Some(MeshSpec::MbpsPerPair(100_000))));
        let NvlinkBasis::Mesh { pairs, gbps, .. } = &b else {
            panic!("{b:?}")
        };
        assert!(
            (f64::from(pairs[0][1]) * gbps - 100.0).abs() < 1e-9,
            "{pairs:?} × {gbps}"
        );
        // A matrix of the wrong size is not guessed at.
        let b = nvlink_basis(
            &s,
            &hints(NvlinkHint::Mesh, Some(MeshSpec::Links(vec![vec![0, 1], vec![1, 0]]))),
        );
        assert!(
            matches!(&b, NvlinkBasis::Unknown { why } if why.contains("2×2")),
            "{b:?}"
        );
    }

    #[test]
    fn each_board_is_judged_as_its_part_says() {
        let gb200 = with_part(p5en(), "10de:2941");
        let b = nvlink_basis(&gb200, &NodeHints::default());
        assert!(
            matches!(&b, NvlinkBasis::Nvswitch { links: 18, gbps, why } if *gbps == 40.1 && why.contains("NVLink Switch trays")),
            "{b:?}"
        );
        assert_eq!(b.origin(), NvlinkOrigin::PartTable);
        let gh200 = with_part(p5en(), "10de:2348");
        assert!(matches!(
            nvlink_basis(&gh200, &NodeHints::default()),
            NvlinkBasis::Unknown { .. }
        ));
        let l40s = with_part(p5en(), "10de:26b9");
        assert!(
            matches!(nvlink_basis(&l40s, &NodeHints::default()), NvlinkBasis::Unknown { why } if why.contains("bridges"))
        );
        // Stated beats assumed; the node's own report beats both.
        let b = nvlink_basis(&p5en(), &hints(NvlinkHint::None, None));
        assert_eq!(b.origin(), NvlinkOrigin::None);
        let mut reported = p5en();
        reported.gpus[0].nvlinks = Some(vec![]);
        reported.gpus[0].nvlink_source = Some(NvlinkSource::NcclFile);
        let b = nvlink_basis(&reported, &hints(NvlinkHint::Nvswitch, None));
        assert_eq!(b.origin(), NvlinkOrigin::NcclFile);
    }

    #[test]
    fn a_members_nvlink_is_its_gpus_best_joined_peers_summed() {
        let gb200 = with_part(p5en(), "10de:2941");
        let b = nvlink_basis(&gb200, &NodeHints::default());
        let links = gpu_link_matrix_with(&gb200, path_classes(&gb200), &b);
        let out = nvlink_out_gbps(&gb200, &links, &b);
        assert!((out - 8.0 * 18.0 * 40.1).abs() < 1e-6, "{out}");
        let pcie = nvlink_basis(&p5en(), &hints(NvlinkHint::None, None));
        let links = gpu_link_matrix_with(&p5en(), path_classes(&p5en()), &pcie);
        assert_eq!(nvlink_out_gbps(&p5en(), &links, &pcie), 0.0);
    }
}
