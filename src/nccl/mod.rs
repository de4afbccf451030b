//! NCCL's configuration surface: the knowledge table and validation, the rules that derive
//! settings from snapshots, and the config-file dialect. Pure.

pub(crate) mod conf;
pub(crate) mod guard;
pub(crate) mod reads;
pub(crate) mod review;
pub(crate) mod rules;
pub(crate) mod table;
