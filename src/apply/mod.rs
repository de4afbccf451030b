//! Putting bytes on disk safely: the one write path (`tree`), the NCCL files and their
//! manifest (`writer`), and a canary's staged candidate with what `status` reads (`stage`).

pub mod stage;
pub mod tree;
pub mod writer;
