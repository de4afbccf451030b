//! CPU and NUMA-node lists in the kernel's list syntax (`0-3,8,10-11`): parse, format, set maths.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;

/// Largest CPU or node id accepted from outside; Linux's NR_CPUS tops out at 8192.
pub(crate) const MAX_ID: u32 = 65_535;
/// Longest list text accepted (every other CPU of 8,192 is about 40 KB).
pub(crate) const MAX_TEXT: usize = 256 * 1024;

/// A set of CPU (or NUMA node) ids, always shown in the kernel's `%*pbl` list form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(BTreeSet<u32>);

/// Why a list or mask could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("`{0}` is not a CPU list (expected e.g. `0-3,8,10-11`)")]
    Syntax(String),
    #[error("CPU id {0} is larger than {MAX_ID}")]
    TooLarge(u64),
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("`{0}` is not a hex CPU mask (expected e.g. `ffff` or `f,ffffffff`)")]
    Mask(String),
    #[error("a CPU list of {0} bytes is longer than {MAX_TEXT}: refused")]
    TooLong(usize),
}

impl CpuList {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse the kernel list syntax. An empty (or all-blank) string is the empty set,
    /// as in `/sys/devices/system/cpu/isolated`.
    pub fn parse(text: &str) -> Result<Self, CpuListError> {
        let text = text.trim();
        if text.len() > MAX_TEXT {
            return Err(CpuListError::TooLong(text.len()));
        }
        if text.is_empty() {
            return Ok(Self(BTreeSet::new()));
        }
        // Ranges first, merged, then expanded once: `0-65535` repeated costs no more than once.
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for part in text.split(',') {
            let bad = || CpuListError::Syntax(text.to_string());
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_id(a).ok_or_else(bad)?, parse_id(b).ok_or_else(bad)?),
                None => {
                    let v = parse_id(part).ok_or_else(bad)?;
                    (v, v)
                }
            };
            if lo > u64::from(MAX_ID) || hi > u64::from(MAX_ID) {
                return Err(CpuListError::TooLarge(lo.max(hi)));
            }
            if lo > hi {
                return Err(CpuListError::Backwards(part.to_string()));
            }
            // Both fit in u32: checked against MAX_ID above.
            ranges.push((lo as u32, hi as u32));
        }
        ranges.sort_unstable();
        let mut set = BTreeSet::new();
        let mut next = 0u32;
        for (lo, hi) in ranges {
            let from = lo.max(next);
            if from <= hi {
                set.extend(from..=hi);
            }
            next = next.max(hi.saturating_add(1));
        }
        Ok(Self(set))
    }

    /// Parse the kernel's hex mask form (`%*pb`: `ffff`, `f,ffffffff`, most significant group first).
    pub fn parse_mask(text: &str) -> Result<Self, CpuListError> {
        let text = text.trim();
        if text.len() > MAX_TEXT {
            return Err(CpuListError::TooLong(text.len()));
        }
        let bad = || CpuListError::Mask(text.chars().take(64).collect());
        if text.is_empty() {
            return Err(bad());
        }
        let groups: Vec<&str> = text.split(',').collect();
        let mut set = BTreeSet::new();
        for (i, group) in groups.iter().rev().enumerate() {
            let group = group.strip_prefix("0x").unwrap_or(group);
            if group.is_empty() || group.len() > 8 {
                return Err(bad());
            }
            let word = u32::from_str_radix(group, 16).map_err(|_| bad())?;
            for bit in 0..32u32 {
                if word & (1 << bit) != 0 {
                    let id = i as u64 * 32 + u64::from(bit);
                    if id > u64::from(MAX_ID) {
                        return Err(CpuListError::TooLarge(id));
                    }
                    set.insert(id as u32);
                }
            }
        }
        Ok(Self(set))
    }

    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        Self(ids.into_iter().collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn intersects(&self, other: &CpuList) -> bool {
        self.0.iter().any(|c| other.0.contains(c))
    }

    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn union(&self, other: &CpuList) -> CpuList {
        CpuList(self.0.union(&other.0).copied().collect())
    }
}

fn parse_id(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl std::str::FromStr for CpuList {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuList::parse(s)
    }
}

impl fmt::Display for CpuList {
    /// Kernel list form; the empty set prints as an empty string, as the kernel does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for CpuList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CpuList::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_forms() {
        assert_eq!(CpuList::parse("0-3,8,10-11\n").unwrap().to_string(), "0-3,8,10-11");
        assert_eq!(CpuList::parse("0-47,96-143").unwrap().len(), 96);
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse("\n").unwrap().is_empty());
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "a",
            "1-",
            "-1",
            "3-1",
            "1,,2",
            "1 2",
            "0x3",
            "99999999999",
            "70000",
            "0-99999",
        ] {
            assert!(CpuList::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn a_huge_repeated_list_is_cheap_or_refused() {
        // 160 KB of `0-65535` (the node answer that expanded without bound): ranges are
        // merged before they are expanded, so this is one expansion, not 20,000.
        let repeated = vec!["0-65535"; 20_000].join(",");
        assert_eq!(CpuList::parse(&repeated).unwrap().len(), 65_536);
        let longer = vec!["0-65535"; 40_000].join(",");
        assert!(matches!(CpuList::parse(&longer), Err(CpuListError::TooLong(_))));
        assert!(matches!(
            CpuList::parse_mask(&"f,".repeat(200_000)),
            Err(CpuListError::TooLong(_))
        ));
    }

    #[test]
    fn parses_masks_wider_than_32_cpus() {
        assert_eq!(CpuList::parse_mask("ffff").unwrap().to_string(), "0-15");
        assert_eq!(CpuList::parse_mask("f,ffffffff").unwrap().to_string(), "0-35");
        assert_eq!(CpuList::parse_mask("00000001,00000000").unwrap().to_string(), "32");
        assert!(CpuList::parse_mask("xyz").is_err());
        assert!(CpuList::parse_mask("123456789").is_err());
    }

    proptest! {
        #[test]
        fn format_then_parse_is_identity(ids in proptest::collection::btree_set(0u32..2048, 0..200)) {
            let list = CpuList(ids);
            prop_assert_eq!(CpuList::parse(&list.to_string()).unwrap(), list);
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,40}") {
            let _ = CpuList::parse(&text);
            let _ = CpuList::parse_mask(&text);
        }
    }
}
