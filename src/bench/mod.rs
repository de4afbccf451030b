//! NCCL's own benchmark, read and judged: nccl-tests output parsed into figures (`parse`)
//! and the canary's decision rule over interleaved rounds (`stats`). Pure: no files, no
//! processes, no clock — the runner that executes nccl-tests lives in `runner`.

pub(crate) mod locate;
pub(crate) mod parse;
pub(crate) mod stats;
pub(crate) mod sweep;
