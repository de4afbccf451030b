//! The decisions: intra-node ring order, inter-node node order, and the cost model that
//! predicts what they are worth. Pure: no filesystem, network or clock.

pub mod cost;
pub mod order;
pub mod plan;
pub mod ring;
