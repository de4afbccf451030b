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

/// [`natural_key`]'s order without building the keys: a name's runs of text and numbers
/// compared pair by pair (sorting 100,000 switch names allocated a million strings).
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (Segments(a, false), Segments(b, false));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(p), Some(q)) => match p.cmp(&q) {
                std::cmp::Ordering::Equal => {}
                other => return other,
            },
        }
    }
}

/// [`natural_key`]'s segments, one at a time: a run of text and the number after it (0 at the
/// end of a name that ends in text; `u64::MAX` for a number too large). An empty name is one
/// empty segment, as in `natural_key`.
struct Segments<'a>(&'a str, bool);

impl<'a> Iterator for Segments<'a> {
    type Item = (&'a str, u64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            let first = !self.1;
            self.1 = true;
            return first.then_some(("", 0));
        }
        self.1 = true;
        let s = self.0;
        let text_end = s.find(|c: char| c.is_ascii_digit()).unwrap_or(s.len());
        let rest = &s[text_end..];
        let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number = match &rest[..digits_end] {
            "" => 0,
            d => d.parse().unwrap_or(u64::MAX),
        };
        self.0 = &rest[digits_end..];
        Some((&s[..text_end], number))
    }
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

#[cfg(test)]
mod natural_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The allocation-free order is the keys' order, for any names.
        #[test]
        fn natural_cmp_orders_as_natural_key(a in "[a-c0-9_]{0,8}|\\PC{0,6}", b in "[a-c0-9_]{0,8}|[0-9]{18,22}") {
            prop_assert_eq!(natural_cmp(&a, &b), natural_key(&a).cmp(&natural_key(&b)));
        }
    }

    #[test]
    fn names_with_numbers_sort_by_value() {
        let mut v = vec!["gpu10", "gpu9", "", "0", "mlx5_10", "mlx5_9", "a1b", "a1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["", "0", "a1", "a1b", "gpu9", "gpu10", "mlx5_9", "mlx5_10"]);
    }
}
