//! Measured, staged rollout (`apply --canary`): the rollout's record on the controller
//! (`state`), the engine that stages, measures, decides, promotes or rolls back wave by wave
//! (`rollout`), and what a record read back must hold to be obeyed (`vet`). The waves come
//! from `config::select`, the benchmark runs through `runner`.

pub(crate) mod rollout;
pub(crate) mod state;
pub(crate) mod vet;
