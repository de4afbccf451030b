//! The application layer: the end-to-end flows the commands compose — gather the nodes'
//! facts, plan, admit and write, stage and roll out behind a measured canary, diagnose — each
//! taking resolved settings (`settings`) and a printer, and returning typed results for
//! `report` to render. No clap type reaches here (`cmd` resolves flags first).

pub(crate) mod collect;
pub(crate) mod diagnose;
pub(crate) mod doctor;
pub(crate) mod fabric;
pub(crate) mod fleet;
pub(crate) mod gather;
pub(crate) mod irq;
pub(crate) mod measure;
pub(crate) mod plan;
pub(crate) mod preflight;
pub(crate) mod reach;
pub(crate) mod rollout;
pub(crate) mod settings;
pub(crate) mod status;
pub(crate) mod trace;
pub(crate) mod trace_error;
pub(crate) mod tune;
pub(crate) mod tuned;
pub(crate) mod write;

/// The message size the planner's prediction is made for when none is asked (1 GiB: a
/// large all-reduce, bandwidth-bound on every fabric).
pub(crate) const PREDICTION_BYTES: u64 = 1 << 30;
