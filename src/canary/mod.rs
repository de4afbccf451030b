//! Measured, staged rollout (`apply --canary`): which nodes go in which wave (`select`), the
//! benchmark run on them (`runner`), the rollout's record on the controller (`state`), and the
//! engine that stages, measures, decides, promotes or rolls back wave by wave (`rollout`).

pub mod rollout;
pub mod runner;
pub mod select;
pub mod state;
