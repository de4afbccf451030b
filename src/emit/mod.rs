//! Plans into bytes: launcher files and NCCL's graph XML. Pure functions, golden-tested.

pub mod graph_xml;
pub mod launch;
pub mod topo_xml;
