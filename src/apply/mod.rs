//! Putting bytes on disk safely. (Rollout waves and the canary come in later versions.)

pub mod tree;
pub mod writer;
