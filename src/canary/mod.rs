//! Measured, staged rollout (`apply --canary`): which nodes go in which wave (`select`), the
//! benchmark run on them (`runner`), the rollout's record on the controller (`state`), and the
//! engine that stages, measures, decides, promotes or rolls back wave by wave (`rollout`), and
//! what a record read back must hold to be obeyed (`vet`).

pub mod rollout;
pub mod runner;
pub mod select;
pub mod state;
pub mod vet;
