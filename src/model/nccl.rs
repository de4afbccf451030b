//! NCCL-facing plain data: versions (`2.28.9`, compared numerically) and one setting with its
//! reason. The knowledge of what values are valid lives in `nccl::table`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion(pub u32, pub u32, pub u32);

impl NcclVersion {
    /// `2.28.9`, `v2.27.7-1`, `2.26`: NCCL's release names. Anything else is refused.
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text
            .trim()
            .trim_start_matches('v')
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().ok());
        let major = it.next()??;
        let minor = it.next()??;
        let patch = it.next().flatten().unwrap_or(0);
        Some(NcclVersion(major, minor, patch))
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
    }
}
