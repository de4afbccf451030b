//! NCCL versions (`2.28.9`), compared numerically.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion(pub u32, pub u32, pub u32);

impl NcclVersion {
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

impl Serialize for NcclVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for NcclVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NcclVersion::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not an NCCL version (e.g. 2.28.9)")))
    }
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
