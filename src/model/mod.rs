//! Plain data shared by every stage: CPU lists, PCI identities, the NodeSnapshot, the fabric,
//! rings, the Plan, NCCL versions and settings, path classes and NCCL's constants. A leaf:
//! it imports no other module of the crate, and does no I/O.

pub(crate) mod cpulist;
pub(crate) mod fabric;
pub(crate) mod files;
pub(crate) mod gpu_parts;
pub(crate) mod nccl;
pub(crate) mod nvfabric;
pub(crate) mod outcome;
pub(crate) mod path;
pub(crate) mod pci;
pub(crate) mod plan;
pub(crate) mod ring;
pub(crate) mod size;
pub(crate) mod snapshot;
pub(crate) mod snapshot_check;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod topo_h;

pub(crate) use cpulist::CpuList;
pub(crate) use nccl::{NcclVersion, Setting};
pub(crate) use outcome::{BadAnswer, Deploy, Failure, FailureKind, NodeOutcome, Refusal};
pub(crate) use path::PathClass;
pub(crate) use pci::{Bdf, PcieLink};
pub(crate) use snapshot::*;

/// Characters that change how text around them is shown without being seen themselves:
/// bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069: "Trojan Source"),
/// zero-width characters, Unicode's line and paragraph separators, the byte-order mark. A
/// name or message holding one can look like another on a terminal.
pub(crate) fn is_deceptive(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Sort key for names with numbers: `gpu10` after `gpu9`, `mlx5_10` after `mlx5_9`.
pub(crate) fn natural_key(s: &str) -> Vec<(String, u64)> {
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
