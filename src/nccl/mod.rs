//! NCCL's configuration surface: the knowledge table and validation, the rules that derive
//! settings from snapshots, and the config-file dialect. Pure.

pub mod conf;
pub mod guard;
pub mod review;
pub mod rules;
pub mod table;
