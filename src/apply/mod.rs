//! Putting bytes on disk safely: the one write path (`tree`), the NCCL files and their
//! manifest (`writer`), and a canary's staged candidate (`stage`, its record `staged`) with
//! what `status` reads, and `tune`'s per-candidate run files (`tune_stage`).

pub(crate) mod live_tuning;
pub(crate) mod plugin;
pub(crate) mod stage;
pub(crate) mod staged;
pub(crate) mod tree;
pub(crate) mod tune_stage;
pub(crate) mod writer;
