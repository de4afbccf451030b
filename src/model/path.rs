//! Path classes between two devices of a node, as `nvidia-smi topo -m` names them, ordered
//! from closest to farthest, with the NCCL path type each one is.

use super::topo_h::NcclPath;
use serde::{Serialize, Serializer};
use std::fmt;

/// `X` self; `NV#` a bonded set of # NVLinks; `PIX` at most one PCIe bridge (a switch counts
/// once); `PXB` several bridges without the host bridge; `PHB` through a host bridge; `NODE`
/// between host bridges of one NUMA node; `SYS` across the SMP interconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathClass {
    SelfPath,
    NvLink(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl PathClass {
    /// NCCL's path type for this class: NODE is a path through the CPU for NCCL (PHB).
    pub(crate) fn nccl_path(self) -> NcclPath {
        match self {
            PathClass::SelfPath => NcclPath::Loc,
            PathClass::NvLink(_) => NcclPath::Nvl,
            PathClass::Pix => NcclPath::Pix,
            PathClass::Pxb => NcclPath::Pxb,
            PathClass::Phb | PathClass::Node => NcclPath::Phb,
            PathClass::Sys => NcclPath::Sys,
        }
    }
}

impl fmt::Display for PathClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathClass::SelfPath => f.write_str("X"),
            PathClass::NvLink(n) => write!(f, "NV{n}"),
            PathClass::Pix => f.write_str("PIX"),
            PathClass::Pxb => f.write_str("PXB"),
            PathClass::Phb => f.write_str("PHB"),
            PathClass::Node => f.write_str("NODE"),
            PathClass::Sys => f.write_str("SYS"),
        }
    }
}

impl Serialize for PathClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}
