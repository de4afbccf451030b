//! NCCL-facing plain data: versions (`2.28.9`, compared numerically) and one setting with its
//! reason. The knowledge of what values are valid lives in `nccl::table`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion(pub u32, pub u32, pub u32);

impl NcclVersion {
    /// `2.28.9`, `v2.27.7-1`, `2.26`: NCCL's release names. Anything else is refused.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        // `2.28.9`, `2.26`, `v2.27.7-1` (a release tag): numbers of at most 5 digits, an
        // optional `-N` package suffix, and nothing else — `2.28.9\nX` is not 2.28.0.
        let text = text.trim_start_matches('v');
        let (version, suffix) = text.split_once('-').unwrap_or((text, ""));
        let number = |p: &str| {
            (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<u32>().ok())
                .flatten()
        };
        if !suffix.is_empty() && number(suffix).is_none() {
            return None;
        }
        let parts: Vec<&str> = version.split('.').collect();
        match parts.as_slice() {
            [major, minor] => Some(NcclVersion(number(major)?, number(minor)?, 0)),
            [major, minor, patch] => Some(NcclVersion(number(major)?, number(minor)?, number(patch)?)),
            _ => None,
        }
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl std::str::FromStr for NcclVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NcclVersion::parse(s).ok_or_else(|| format!("`{s}` is not an NCCL version (e.g. 2.28.9)"))
    }
}

impl Serialize for NcclVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for NcclVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One NCCL variable with why it is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Setting {
    pub name: String,
    pub value: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn forms() {
        assert_eq!(NcclVersion::parse("2.28.9"), Some(NcclVersion(2, 28, 9)));
        assert_eq!(NcclVersion::parse("v2.27.7-1"), Some(NcclVersion(2, 27, 7)));
        assert_eq!(NcclVersion::parse("2.26"), Some(NcclVersion(2, 26, 0)));
        assert!(NcclVersion(2, 26, 0) > NcclVersion(2, 25, 99));
        assert_eq!(NcclVersion::parse("two"), None);
        for bad in [
            "2.28.9\nX",
            "2.28.9 ",
            " 2.28.9",
            "2.28.9.1",
            "2..9",
            "2.28.x",
            "99999999.1",
            "2.28.9-rc1",
        ] {
            assert_eq!(NcclVersion::parse(bad), None, "{bad:?}");
        }
    }
}
