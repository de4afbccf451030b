//! NodeSnapshot: the versioned, facts-only picture of one node that every later stage consumes.
//!
//! Rules: values are what the machine said; unknown stays `null` (a VM's `numa_node = -1` is
//! `numa_node: null`, never 0); anything derived says so in its name (`numa_affinity`) or in a
//! note. The JSON form is documented in `docs/snapshot.md`; bump [`SCHEMA_VERSION`] on any
//! change that an older reader would misunderstand.

use super::cpulist::CpuList;
use super::pci::{Bdf, PcieLink};
use serde::{Deserialize, Serialize};

/// Version of the JSON layout below. Version 2: PCI ids and CPU counts a source does not give
/// are `null` (version 1 made up `0000:0000` and `0`). Version 3: where a GPU's NVLinks were
/// read (`nvlink_source`), NVLink-C2C to the CPU (`c2c`), the GPU's multi-node NVLink fabric
/// (`fabric`) and the node's NVLink domain (`nvlink_domain`). Versions 1 and 2 still read
/// (the new fields are then unknown).
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest layout this build still reads.
pub const OLDEST_READABLE: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    pub schema_version: u32,
    pub hostname: String,
    pub source: SnapshotSource,
    /// topo-tune version that made the snapshot.
    pub tool_version: String,
    pub machine: MachineInfo,
    pub cpu: CpuSummary,
    pub numa_nodes: Vec<NumaNode>,
    pub pci: PciTopology,
    pub gpus: Vec<Gpu>,
    pub nics: Vec<Nic>,
    /// NCCL the system loader finds (`ncclGetVersion` of `libnccl.so.2`); `null` when none.
    #[serde(default)]
    pub nccl_version: Option<super::nccl::NcclVersion>,
    /// The multi-node NVLink domain of this node's GPUs, `<clusterUuid>.<cliqueId>` (GPU Feature
    /// Discovery's `nvidia.com/gpu.clique`): set only when every GPU reports that same domain
    /// with a completed, successful fabric state; `null` otherwise (a note says why when the
    /// driver was asked).
    #[serde(default)]
    pub nvlink_domain: Option<String>,
    /// What the probe could not see, had to derive, or found wrong; each with a stable code.
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotSource {
    pub kind: SourceKind,
    /// The fsroot directory or hwloc XML file, when not the live `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// The running machine (`/sys`, `/proc`, hwloc, NVML).
    Live,
    /// A directory tree shaped like `/sys` and `/proc` (`--fsroot`).
    Fsroot,
    /// An hwloc XML export (`lstopo file.xml`).
    HwlocXml,
    /// An NCCL topology file (`NCCL_TOPO_FILE` dialect), for simulated nodes.
    NcclTopo,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// DMI product name, e.g. `p5en.48xlarge`.
    pub product: Option<String>,
    pub architecture: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    /// NVIDIA driver version from NVML, when the driver answered.
    pub nvidia_driver: Option<String>,
    /// The CUDA version the driver supports (`nvmlSystemGetCudaDriverVersion_v2`, `12.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// `null` where the source does not say (an NCCL topology file lists NUMA nodes, not sockets).
    pub packages: Option<u32>,
    pub cores: Option<u32>,
    /// Hardware threads (hwloc PUs).
    pub pus: Option<u32>,
    pub cpus: CpuList,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuList,
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PciTopology {
    pub host_bridges: Vec<HostBridge>,
    pub bridges: Vec<PciBridge>,
    pub switches: Vec<PciSwitch>,
    /// False when some GPU or RDMA NIC sits straight under a host bridge: the hypervisor (or the
    /// platform) hides any PCIe switch between them, so PIX/PXB cannot be told apart from PHB.
    pub switches_visible: bool,
    /// NVSwitch functions on PCI (NVIDIA, class 0x0680): present on HGX boards even when
    /// NVLink itself is unknown (no driver).
    #[serde(default)]
    pub nvswitches: Vec<Bdf>,
}

/// A PCI root complex as hwloc sees it, named like sysfs names the root bus:
/// `pci0000:00` (domain and first bus of its range).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostBridge {
    pub id: String,
    pub domain: u32,
    pub first_bus: u8,
    pub last_bus: u8,
    /// NUMA node the bridge is attached to, when the firmware says so.
    pub numa_node: Option<u32>,
    /// CPUs local to the bridge (hwloc's locality).
    pub cpus: CpuList,
}

/// Where a PCI function hangs: straight under a host bridge, or under a PCI-to-PCI bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub enum PciParent {
    HostBridge(String),
    Bridge(Bdf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeRole {
    /// Directly under a host bridge.
    RootPort,
    /// The upstream port of a PCIe switch (its children are the switch's downstream ports).
    SwitchUpstream,
    SwitchDownstream,
    /// Any other PCI-to-PCI bridge (e.g. a bridge with only endpoints below it).
    Bridge,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciBridge {
    pub bdf: Bdf,
    pub parent: PciParent,
    pub role: BridgeRole,
    pub vendor_id: String,
    pub device_id: String,
    pub secondary_bus: u8,
    pub subordinate_bus: u8,
    pub link: PcieLink,
}

/// One PCIe switch, counted once: its upstream port plus its downstream ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciSwitch {
    pub upstream: Bdf,
    pub downstream_ports: Vec<Bdf>,
    pub host_bridge: String,
    /// `vendor:device` of the upstream port, e.g. `1000:c010` (Broadcom PEX).
    pub pci_id: Option<String>,
}

/// Locality of a PCI endpoint: where it hangs and which CPUs / NUMA nodes are near it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PciPlacement {
    pub bdf: Bdf,
    /// `vendor:device`, e.g. `10de:2335`; `null` when the source does not give it.
    pub pci_id: Option<String>,
    /// 24-bit class as sysfs prints it, e.g. `0x030200`.
    pub class: String,
    pub parent: PciParent,
    pub host_bridge: String,
    /// NUMA node reported by the firmware (sysfs `numa_node`, or hwloc locality for XML);
    /// `null` when it reports none (`-1`, typical of VMs).
    pub numa_node: Option<u32>,
    /// NUMA nodes whose CPUs are local to the device: derived from `cpu_affinity` the way
    /// `nvidia-smi topo -m` derives its "NUMA Affinity" column.
    pub numa_affinity: Vec<u32>,
    /// CPUs local to the device (sysfs `local_cpulist`, NVML affinity, or hwloc locality).
    pub cpu_affinity: CpuList,
    pub pcie: PcieLink,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// NVML index when NVML answered, else the position in PCI bus order (what NVML and
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID` use).
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    #[serde(flatten)]
    pub placement: PciPlacement,
    /// `major.minor`, e.g. `9.0`, when NVML answered.
    pub compute_capability: Option<String>,
    /// NVLink links; `null` means unknown (no NVML), an empty list means none.
    pub nvlinks: Option<Vec<NvLink>>,
    /// Where `nvlinks` was read: the driver, hwloc's `NVLinkBandwidth` matrix, or an NCCL
    /// topology file; `null` when unknown.
    #[serde(default)]
    pub nvlink_source: Option<NvlinkSource>,
    /// The speed NVML reports for the GPU's active NVLinks, MB/s per link
    /// (`NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON`); `null` when not reported.
    #[serde(default)]
    pub nvlink_speed_mbps: Option<u32>,
    /// NVLink-C2C to the CPU (Grace: GH200, GB200, GB300); `null` when none is known.
    #[serde(default)]
    pub c2c: Option<C2cLink>,
    /// The GPU's multi-node NVLink fabric, as NVML reports it; `null` when not asked (a file)
    /// or the driver does not report it.
    #[serde(default)]
    pub fabric: Option<super::nvfabric::GpuFabric>,
    /// What NVML says of the GPU's health without traffic (memory errors, clock slowdowns);
    /// absent when NVML was not asked (a file) or answered none of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<GpuHealth>,
    /// Where the GPU facts came from: `nvml` or `pci`.
    pub source: GpuSource,
}

/// A GPU's health as NVML reports it; each field `null` where the GPU or driver does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuHealth {
    /// Uncorrectable ECC errors since the driver loaded (`nvmlDeviceGetTotalEccErrors`,
    /// UNCORRECTED, VOLATILE).
    #[serde(default)]
    pub ecc_uncorrected: Option<u64>,
    /// Pages retired for a double-bit error (`nvmlDeviceGetRetiredPages_v2`; before Ampere).
    #[serde(default)]
    pub retired_pages_dbe: Option<u32>,
    /// A page retirement waits for a reset (`nvmlDeviceGetRetiredPagesPendingStatus`).
    #[serde(default)]
    pub retirement_pending: Option<bool>,
    /// Rows remapped for uncorrectable errors (`nvmlDeviceGetRemappedRows` uncRows; Ampere on).
    #[serde(default)]
    pub remapped_uncorrectable: Option<u32>,
    /// A row remap waits for a GPU reset (isPending).
    #[serde(default)]
    pub remap_pending: Option<bool>,
    /// A row remap failed: the memory is out of spare rows (failureOccurred).
    #[serde(default)]
    pub remap_failed: Option<bool>,
    /// `nvmlDeviceGetCurrentClocksEventReasons`: why the clocks are below their maximum now,
    /// NVML's bit mask (`nvmlClocksEventReason*`).
    #[serde(default)]
    pub clock_event_reasons: Option<u64>,
}

/// Where a GPU's NVLinks were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NvlinkSource {
    /// The driver (NVML), link by link.
    Nvml,
    /// hwloc's `NVLinkBandwidth` distances (an hwloc export made with its NVML backend).
    HwlocDistances,
    /// `<nvlink>` elements of an NCCL topology file.
    NcclFile,
}

impl NvlinkSource {
    pub fn name(self) -> &'static str {
        match self {
            NvlinkSource::Nvml => "nvml",
            NvlinkSource::HwlocDistances => "hwloc-distances",
            NvlinkSource::NcclFile => "nccl-file",
        }
    }
}

/// NVLink-C2C between a GPU and its CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct C2cLink {
    pub links: u32,
    /// One direction, per link (NCCL's `<c2c bw>` is MB/s per link); `null` when not given.
    pub gbps_per_link: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    Nvml,
    Pci,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub active: bool,
    pub version: Option<u32>,
    pub remote_bdf: Option<Bdf>,
    pub remote: NvLinkPeer,
    /// One-direction GB/s NCCL assumes for one link of this GPU generation.
    pub bandwidth_gbps: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvLinkPeer {
    /// Another GPU of this node (its bus id is `remote_bdf`).
    Gpu,
    /// An NVSwitch, or any remote end that is not a GPU of this node.
    Switch,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// RDMA device name (`mlx5_0`) when there is one, else the netdev name (`eth0`).
    pub name: String,
    pub kind: NicKind,
    /// PCI placement; `null` for NICs with no PCI function (soft-RoCE, virtual).
    pub pci: Option<PciPlacement>,
    pub rdma: Option<RdmaDevice>,
    pub netdevs: Vec<Netdev>,
    pub driver: Option<String>,
    /// MSI/MSI-X interrupts of the PCI function.
    pub irqs: Vec<Irq>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NicKind {
    /// Has an RDMA device (`/sys/class/infiniband/*`): InfiniBand, RoCE or EFA.
    Rdma,
    /// Plain Ethernet netdev only.
    Ethernet,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaDevice {
    pub device: String,
    pub ports: Vec<RdmaPort>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaPort {
    pub port: u32,
    /// `ACTIVE`, `DOWN`, ... (text of `ports/N/state`, without the number).
    pub state: Option<String>,
    /// Numeric state (4 = ACTIVE).
    pub state_code: Option<u8>,
    /// `ports/N/rate` as written, e.g. `400 Gb/sec (4X NDR)`.
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    pub link_layer: LinkLayer,
    /// GID indexes whose type is `RoCE v2` (what NCCL_IB_GID_INDEX wants on RoCE).
    pub roce_v2_gid_indexes: Vec<u32>,
    pub netdev: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Netdev {
    pub name: String,
    pub operstate: Option<String>,
    /// Mb/s; `null` when the link is down or the driver does not say (virtio).
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Irq {
    pub irq: u32,
    /// Action name from `/proc/interrupts`, e.g. `mlx5_comp3@pci:0000:81:00.0`.
    pub name: Option<String>,
    pub class: IrqClass,
    /// `/proc/irq/N/smp_affinity_list`.
    pub affinity: Option<CpuList>,
    /// `/proc/irq/N/effective_affinity_list` (advisory: lags until the IRQ fires).
    pub effective_affinity: Option<CpuList>,
    /// `/proc/irq/N/affinity_hint`: the driver's suggestion (`null` when it gives none).
    #[serde(default)]
    pub affinity_hint: Option<CpuList>,
    /// Total count over all CPUs in `/proc/interrupts`.
    pub count: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IrqClass {
    /// mlx5 completion vector (`mlx5_compN@pci:...`): carries data-path interrupts.
    Completion,
    /// mlx5 control vector (`async`, `pages`, `cmd`, `ctrl`, `combined`).
    Control,
    /// Named, but not an mlx5 vector.
    Other,
    /// No name found in `/proc/interrupts`.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub level: NoteLevel,
    /// Stable, machine-readable code, e.g. `switches-not-visible`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteLevel {
    Info,
    Warn,
}

impl Note {
    pub fn info(code: &str, message: impl Into<String>) -> Self {
        Note {
            level: NoteLevel::Info,
            code: code.to_string(),
            message: message.into(),
        }
    }
    pub fn warn(code: &str, message: impl Into<String>) -> Self {
        Note {
            level: NoteLevel::Warn,
            code: code.to_string(),
            message: message.into(),
        }
    }
}

impl NodeSnapshot {
    /// The same machine, whatever the moment: interrupt counts and effective affinities
    /// (which move with every interrupt) cleared. Two probes of an unchanged node are equal so.
    pub fn without_volatile(&self) -> NodeSnapshot {
        let mut s = self.clone();
        for irq in s.nics.iter_mut().flat_map(|n| n.irqs.iter_mut()) {
            irq.count = None;
            irq.effective_affinity = None;
        }
        s
    }

    pub fn gpu_by_bdf(&self, bdf: Bdf) -> Option<&Gpu> {
        self.gpus.iter().find(|g| g.placement.bdf == bdf)
    }

    /// NICs shown in the path matrix: those with an RDMA device, as `nvidia-smi topo -m` does.
    pub fn matrix_nics(&self) -> impl Iterator<Item = &Nic> {
        self.nics.iter().filter(|n| n.rdma.is_some())
    }
}

/// NUMA nodes whose CPUs overlap `cpus` (how nvidia-smi fills "NUMA Affinity").
pub fn numa_affinity(nodes: &[NumaNode], cpus: &CpuList) -> Vec<u32> {
    nodes.iter().filter(|n| n.cpus.intersects(cpus)).map(|n| n.id).collect()
}
