//! The decisions: intra-node ring order, inter-node node order, and the cost model that
//! predicts what they are worth. Pure: no filesystem, network or clock.

pub(crate) mod cost;
pub(crate) mod order;
pub(crate) mod plan;
pub(crate) mod ring;
