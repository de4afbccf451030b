//! Plan: the decision, as reviewable data (`plan.json`) that `init --plan` applies exactly.
//! Every item carries its reason. Bump [`PLAN_SCHEMA_VERSION`] on any change an older reader
//! would misunderstand.

use super::nccl::{NcclVersion, Setting};
use super::ring::Ring;
use super::snapshot::Note;
use serde::{Deserialize, Serialize};

/// Version 2: NCCL settings per node group (`nccl`), graph XML in the plan, `tool_version`.
/// Version 3: each node class's NVLink and where it was known (`node_classes[].nvlink`),
/// multi-node NVLink domains (`nvlink_domains`), domain crossings, and the prediction without
/// the domains (`predicted.without_domains`).
pub(crate) const PLAN_SCHEMA_VERSION: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub schema_version: u32,
    /// topo-tune version that made the plan.
    pub tool_version: String,
    /// All-reduce size the predictions are for, in bytes.
    pub message_bytes: u64,
    /// Hosts in ring order: the order to hand the launcher.
    pub node_order: Vec<String>,
    /// The order launchers use by default (hostnames sorted), for comparison.
    pub default_order: Vec<String>,
    pub predicted: Predicted,
    pub crossings: CrossingReport,
    pub node_classes: Vec<NodeClass>,
    /// What NCCL is told on each node: the settings, with reasons, per group of nodes that
    /// get identical files.
    pub nccl: NcclPlan,
    /// Hosts left out of the ring, with the reason.
    pub excluded: Vec<Excluded>,
    /// Multi-node NVLink domains (NVL72 racks): NCCL joins each domain's GPUs into one NVLink
    /// system; the ring order only matters between domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlink_domains: Vec<NvlinkDomain>,
    pub notes: Vec<Note>,
}

/// One multi-node NVLink domain of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvlinkDomain {
    /// `<clusterUuid>.<cliqueId>` as the GPUs report it, or the name cluster.yaml gives.
    pub name: String,
    /// Members, in ring order.
    pub hosts: Vec<String>,
    pub gpus: usize,
    /// `nvml` (the GPUs' fabric info) or `cluster.yaml` (`nvlink_domain:`).
    pub source: String,
    /// Fabric health problems the members' GPUs report (empty: healthy, or not reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<String>,
}

/// Where a node class's NVLink figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NvlinkOrigin {
    /// The driver, link by link.
    Nvml,
    /// hwloc's NVLinkBandwidth matrix.
    HwlocDistances,
    /// An NCCL topology file's `<nvlink>` elements.
    NcclFile,
    /// Assumed from the GPU part's board (said in the plan's notes).
    PartTable,
    /// Stated in cluster.yaml (`nvlink: nvswitch`, `nvlink: mesh`).
    #[serde(rename = "cluster.yaml")]
    ClusterYaml,
    /// Not known: PCIe paths only.
    None,
}

/// A node class's NVLink: links between each GPU pair (index order; 0 where the path is
/// PCIe), NCCL's GB/s per link, and where that was known (each origin among the class's
/// hosts, in host order: identical figures can come from different sources).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassNvlink {
    pub origins: Vec<NvlinkOrigin>,
    pub gbps_per_link: f64,
    pub links: Vec<Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    pub solved: Prediction,
    pub default: Prediction,
    /// solved busbw / default busbw.
    pub gain: f64,
    /// The solved order's prediction were every byte between two nodes to cross their NICs:
    /// what the NVLink domains are worth (only when the plan has domains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_domains: Option<Prediction>,
}

/// Predicted ring all-reduce figures for one node order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub time_us: f64,
    pub busbw_gbps: f64,
    pub algbw_gbps: f64,
    /// The ring's slowest link, GB/s, and what it is.
    pub bottleneck_gbps: f64,
    pub bottleneck: String,
    pub latency_us: f64,
    /// The bottleneck's figure is not the node's own report: what it rests on (an assumed
    /// default NIC rate, or cluster.yaml's `nic_gbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossingReport {
    pub solved: Crossings,
    pub default: Crossings,
    pub lower_bound: Crossings,
}

/// Ring edges that change group, per fabric level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crossings {
    pub spine: usize,
    pub leaf: usize,
    pub rack: usize,
    /// Ring edges that leave or enter a multi-node NVLink domain.
    #[serde(default)]
    pub domain: usize,
}

/// Hosts with the same GPU link matrix share one intra-node ring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeClass {
    pub name: String,
    pub hosts: Vec<String>,
    pub gpus: usize,
    pub ring: Ring,
    /// The ring NCCL tries first: GPUs in index (PCI) order.
    pub index_order_bottleneck_gbps: f64,
    pub index_order_cost: u32,
    /// NCCL's path type of the ring's worst hop (`NVL`, `PIX`, …).
    pub type_intra: String,
    /// Why this ring, in words.
    pub reason: String,
    /// Per-job NCCL_GRAPH_FILE content, only where the ring beats index order.
    pub graph_xml: Option<String>,
    /// Where `plan --output-dir` wrote `graph_xml`.
    pub graph_file: Option<String>,
    /// The class's NVLink and its origin (none without GPUs pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<ClassNvlink>,
}

/// The NCCL side of the plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NcclPlan {
    pub classes: Vec<NcclClass>,
    /// Hosts whose settings were refused (an invalid override, a value NCCL would misread).
    pub refused: Vec<Excluded>,
}

/// Nodes that get byte-identical NCCL files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclClass {
    pub name: String,
    pub hosts: Vec<String>,
    /// The NCCL version the files are written for (the node's own, else cluster.yaml's).
    pub nccl_version: Option<NcclVersion>,
    pub settings: Vec<Setting>,
    /// Rules that set nothing, each with why.
    pub left_out: Vec<String>,
    /// NCCL topology XML that `NCCL_TOPO_FILE` points at, when a rule asked for one.
    pub topology_xml: Option<String>,
    /// The ports NCCL would use for GPU traffic by itself: what the settings may never take
    /// away (`nccl::guard`), kept so an edited plan is checked again before it is applied.
    pub gpu_ports: Vec<GpuPort>,
}

/// How NCCL reaches a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortTransport {
    /// InfiniBand or RoCE verbs (`NCCL_IB_HCA` selects among them).
    Verbs,
    /// AWS EFA through the aws-ofi-nccl plugin.
    Efa,
    /// TCP sockets on an Ethernet interface (`NCCL_SOCKET_IFNAME`).
    Socket,
}

/// One port NCCL would use for GPU traffic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuPort {
    /// RDMA device (`mlx5_0`) or interface (`eth0`).
    pub device: String,
    /// `null`: the device's ports are unknown (a file that lists the function only).
    pub port: Option<u32>,
    pub transport: PortTransport,
    /// Why it counts, e.g. `PIX to the nearest GPU`.
    pub nearest: String,
}

impl GpuPort {
    pub fn new(device: &str, port: Option<u32>, transport: PortTransport, nearest: super::PathClass) -> Self {
        GpuPort {
            device: device.to_string(),
            port,
            transport,
            nearest: format!("active, {nearest} to the nearest GPU"),
        }
    }

    pub fn socket(ifname: &str) -> Self {
        GpuPort {
            device: ifname.to_string(),
            port: None,
            transport: PortTransport::Socket,
            nearest: "up, and the node has no RDMA port: NCCL's sockets carry the data".into(),
        }
    }

    /// `mlx5_1 port 2`, or the device alone.
    pub fn label(&self) -> String {
        match self.port {
            Some(p) => format!("{} port {p}", self.device),
            None => self.device.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub host: String,
    pub reason: String,
}

impl Plan {
    /// Each host's NCCL group.
    pub fn nccl_by_host(&self) -> std::collections::HashMap<&str, &NcclClass> {
        self.nccl
            .classes
            .iter()
            .flat_map(|c| c.hosts.iter().map(move |h| (h.as_str(), c)))
            .collect()
    }
}
