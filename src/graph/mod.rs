//! Graph views computed from snapshots. Pure: no filesystem, network or clock.

pub mod cluster;
pub mod paths;
