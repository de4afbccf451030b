//! Putting bytes on disk safely: the one write path (`tree`), the NCCL files and their
//! manifest (`writer`), and a canary's staged candidate (`stage`, its record `staged`) with
//! what `status` reads.

pub mod stage;
pub mod staged;
pub mod tree;
pub mod writer;
