//! The fabric as cluster.yaml declares it (racks on leaves, leaves on spines, rails) and one
//! node's place in it. Plain data: the graph built from it lives in `graph::cluster`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fabric {
    /// Rack → the leaf switch it hangs off (when declared).
    pub racks: BTreeMap<String, Option<String>>,
    pub leaves: BTreeMap<String, Leaf>,
    /// Rails per node (rail-optimised fabrics: NIC i of every node on switch plane i).
    pub rails: Option<u32>,
    /// HCA → its rail, as the wires showed it (`topo-tune fabric`): every compute host's port
    /// of that name lands on that rail's leaf. Empty where only `rails` is stated.
    #[serde(default)]
    pub rail_hcas: BTreeMap<String, u32>,
    /// HCA → its plane, where the fabric is several planes no link joins (one capture each).
    #[serde(default)]
    pub hca_planes: BTreeMap<String, u32>,
    /// Hosts whose ports break the rail pattern (a port on another rail's leaf), with why:
    /// no rail-dependent setting is made for them.
    #[serde(default)]
    pub off_rail: BTreeMap<String, String>,
    /// The file that states this fabric (cluster.yaml, or the fabric.yaml `plan --fabric`
    /// read): the reasons of settings made from it name it.
    #[serde(default)]
    pub stated_in: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Leaf {
    pub spine: Option<String>,
    /// Uplink capacity of the leaf towards its spine, Gb/s (one direction).
    pub uplink_gbps: Option<f64>,
}

/// A node's place in the fabric: `[spine, leaf, rack]`, each possibly unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Placement {
    pub spine: Option<String>,
    pub leaf: Option<String>,
    pub rack: Option<String>,
}

impl Placement {
    /// Where a node sits: its `rack` label, its leaf (label, else fabric.racks), the leaf's
    /// spine (label, else fabric.leaves).
    pub(crate) fn of(labels: &BTreeMap<String, String>, fabric: Option<&Fabric>) -> Placement {
        let rack = labels.get("rack").cloned();
        let leaf = labels
            .get("leaf")
            .cloned()
            .or_else(|| fabric.and_then(|f| rack.as_ref().and_then(|r| f.racks.get(r).cloned().flatten())));
        let spine = labels.get("spine").cloned().or_else(|| {
            fabric.and_then(|f| {
                leaf.as_ref()
                    .and_then(|l| f.leaves.get(l).and_then(|x| x.spine.clone()))
            })
        });
        Placement { spine, leaf, rack }
    }
}

/// What cluster.yaml states about a node's NVLink where the node itself cannot say (a machine
/// described by files, or no driver).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvlinkHint {
    /// Judge from the GPU part and the NVSwitch functions on PCI (default).
    #[default]
    Auto,
    /// No NVLink: PCIe paths only.
    None,
    /// An all-to-all NVSwitch fabric at the part's full link count.
    Nvswitch,
    /// Direct links between GPU pairs (A100/H100 4-GPU HGX boards, V100 SXM2): as
    /// `nvlink_mesh` says.
    Mesh,
}

/// A stated NVLink mesh: how many links join each GPU pair, or what a pair carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeshSpec {
    /// Every pair of GPUs joined by this many NVLinks (4×H100 SXM5: 6).
    LinksPerPair(u32),
    /// Every pair carries this much, one direction, in MB/s (cluster.yaml states GB/s).
    MbpsPerPair(u32),
    /// Links per pair, GPU by GPU in index order (a V100 SXM2 hybrid cube mesh).
    Links(Vec<Vec<u32>>),
}

/// Facts cluster.yaml states about a node, for what its snapshot cannot tell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeHints {
    pub nvlink: NvlinkHint,
    /// A GPU part from `model::gpu_parts` (`h100-sxm5`), where the snapshot has no PCI id.
    pub gpu: Option<String>,
    /// NICs (`mlx5_4`) or ports (`mlx5_4:1`) that carry no GPU traffic (storage, front-end):
    /// settings may leave them out.
    pub non_gpu_nics: Vec<String>,
    /// `nvlink_mesh:` with `nvlink: mesh`.
    #[serde(default)]
    pub nvlink_mesh: Option<MeshSpec>,
    /// `nvlink_domain:`: the multi-node NVLink domain the node belongs to, where its driver
    /// cannot say (files, paper nodes); `declared_at` of the statement beside it.
    #[serde(default)]
    pub nvlink_domain: Option<String>,
    /// `nic_gbps:`: whole Gb/s per RDMA NIC where the node reports no port rate (files, paper nodes).
    #[serde(default)]
    pub nic_gbps: Option<u32>,
}
