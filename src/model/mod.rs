//! Plain data shared by every stage: CPU lists, PCI identities, the NodeSnapshot. No I/O here.

pub mod cpulist;
pub mod pci;
pub mod snapshot;

pub use cpulist::CpuList;
pub use pci::{Bdf, PcieLink};
pub use snapshot::*;
pub mod pcitree;
pub mod plan;

/// Sort key for names with numbers: `gpu10` after `gpu9`, `mlx5_10` after `mlx5_9`.
pub fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    out.push((
        text,
        if digits.is_empty() {
            0
        } else {
            digits.parse().unwrap_or(u64::MAX)
        },
    ));
    out
}
