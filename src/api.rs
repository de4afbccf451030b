//! What the integration tests and the benchmarks use of the library, and nothing else: the
//! snapshot and what is derived from it (paths, links, NCCL rules, the guard), the planner, the
//! inventory, nccl-tests' parsers. Everything else is `pub(crate)`, so the compiler finds what
//! nothing uses.

pub use crate::bench::parse::{parse_json, parse_text, BenchError};
pub use crate::config::{ConfigError, Inventory, TransportKind};
pub use crate::graph::links::host_net_gbps;
pub use crate::graph::paths::{path_matrix, LEGEND};
pub use crate::model::fabric::{Fabric, Leaf};
pub use crate::model::nccl::{NcclVersion, Setting};
pub use crate::model::nvfabric::{FabricHealth, FabricState, GpuFabric};
pub use crate::model::path::PathClass;
pub use crate::model::pci::Degradation;
pub use crate::model::ring::LinkMatrix;
pub use crate::model::snapshot::NodeSnapshot;
pub use crate::nccl::rules::{derive, Derived};
pub use crate::solve::plan::{plan, NcclPolicy, PlanInput, PlanNode};
pub use crate::solve::ring::solve;
pub use crate::transport::simulated::from_source;

/// The snapshot's types (`model::snapshot`).
pub mod snapshot {
    pub use crate::model::snapshot::*;
}

/// The never-slower guard (`nccl::guard`).
pub mod guard {
    pub use crate::nccl::guard::{check, check_nvlink, gpu_ports, NvlinkGuard};
}

/// NCCL's variable table (`nccl::table`).
pub mod table {
    pub use crate::nccl::table::{lookup, Class};
}
