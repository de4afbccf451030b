//! Graph views computed from snapshots: the PCI tree's bridge roles, the path matrix, what a
//! node's links are worth, and the cluster graph the planner reads. Pure: no filesystem,
//! network or clock.

pub(crate) mod cluster;
pub(crate) mod links;
pub(crate) mod paths;
pub(crate) mod pcitree;
