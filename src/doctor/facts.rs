//! What every doctor check looks at, gathered once per node (`Facts`), and the helpers
//! several checks share: which RDMA NICs serve the GPUs, short lists, config files read
//! without trusting them, whether the node is a virtual machine.

use super::conf;
use crate::model::snapshot::NodeSnapshot;
use crate::model::{CpuList, NcclVersion, Nic, PathClass};
use crate::probe::fsroot::FsRoot;

/// One CPU with more than this many times its fair share of mlx5 completion work is skew.
pub(super) const SKEW_FACTOR: f64 = 3.0;

/// What every check looks at.
pub(crate) struct Facts<'a> {
    pub(crate) fs: &'a FsRoot,
    pub(crate) snap: &'a NodeSnapshot,
    pub(crate) reserved: &'a CpuList,
    /// The node's NCCL: what its loader finds, else what the request states.
    pub(super) nccl: Option<NcclVersion>,
    /// Every mlx5 completion vector: its NIC and the interrupt.
    pub(super) completion: Vec<(&'a str, &'a crate::model::Irq)>,
    /// The path classes between GPUs and RDMA NICs (`graph::paths::path_classes`).
    pub(super) classes: Vec<Vec<PathClass>>,
    /// Every `NCCL_*` line of NCCL's config and environment files, and the files that exist
    /// but could not be read — read once for the checks that judge them (`gdr`,
    /// `nccl-disablers`).
    pub(super) settings: conf::ConfFiles,
    /// A virtual machine (the CPU's `hypervisor` flag), where ACS and the IOMMU are not the
    /// guest's.
    pub(super) vm: bool,
}

/// How far from a GPU an RDMA NIC may sit to count as the GPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// Within PXB: where NCCL uses GPUDirect RDMA by default (`NCCL_NET_GDR_LEVEL`).
    Gdr,
    /// Within PXB, or each GPU's nearest if farther: the NICs NCCL sends GPU traffic on,
    /// whatever state their ports are in.
    Traffic,
}

/// The RDMA NICs within `reach` of some GPU, in the node's order.
pub(super) fn gpu_nics<'a>(f: &Facts<'a>, reach: Reach) -> Vec<&'a Nic> {
    let gpus = f.snap.gpus.len();
    let nics: Vec<&Nic> = f.snap.matrix_nics().collect();
    let class = |g: usize, n: usize| f.classes.get(g).and_then(|row| row.get(gpus + n)).copied();
    let limit: Vec<Option<PathClass>> = (0..gpus)
        .map(|g| {
            let nearest = (0..nics.len()).filter_map(|n| class(g, n)).min()?;
            match reach {
                Reach::Gdr => Some(PathClass::Pxb),
                Reach::Traffic => Some(nearest.max(PathClass::Pxb)),
            }
        })
        .collect();
    (0..nics.len())
        .filter(|&n| (0..gpus).any(|g| matches!((class(g, n), limit[g]), (Some(c), Some(l)) if c <= l)))
        .map(|n| nics[n])
        .collect()
}

/// The first three of a list, and how many more.
pub(super) fn few(items: &[String]) -> String {
    match items.len() {
        0..=3 => items.join(", "),
        n => format!("{}, and {} more", items[..3].join(", "), n - 3),
    }
}

/// Whether the machine is a virtual machine (the `hypervisor` CPU flag the kernel sets for a
/// guest): what is the hypervisor's to set (ACS, the IOMMU) is then skipped, said so.
pub(super) fn is_vm(fs: &FsRoot) -> bool {
    fs.read("/proc/cpuinfo").is_some_and(|c| {
        c.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}
