//! Plain data shared by every stage: CPU lists, PCI identities, the NodeSnapshot. No I/O here.

pub mod cpulist;
pub mod pci;
pub mod snapshot;

pub use cpulist::CpuList;
pub use pci::{Bdf, PcieLink};
pub use snapshot::*;
pub mod pcitree;
pub mod plan;
