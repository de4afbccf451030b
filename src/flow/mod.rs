//! The application layer: the end-to-end flows the commands compose — gather the nodes'
//! facts, plan, admit and write, stage and roll out behind a measured canary, diagnose — each
//! taking resolved settings (`settings`) and a printer, and returning typed results for
//! `report` to render. No clap type reaches here (`cmd` resolves flags first).

pub mod collect;
pub mod diagnose;
pub mod doctor;
pub mod fleet;
pub mod gather;
pub mod irq;
pub mod plan;
pub mod reach;
pub mod rollout;
pub mod settings;
pub mod status;
pub mod write;

/// The message size the planner's prediction is made for when none is asked (1 GiB: a
/// large all-reduce, bandwidth-bound on every fabric).
pub const PREDICTION_BYTES: u64 = 1 << 30;
