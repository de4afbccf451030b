//! topo-tune's tuner plugin on its way to a node: its bytes as hex with their sha256, checked
//! on the node before a byte is written (a `tune` run's copy, a rolled-out tuning's).

use crate::model::BadAnswer;
use serde::{Deserialize, Serialize};

/// How large a plugin may be.
const MAX_PLUGIN: usize = 64 << 20;

/// The plugin's bytes as hex, with their sha256 (checked on the node before it is written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PluginCopy {
    pub(crate) sha256: String,
    pub(crate) hex: String,
}

impl PluginCopy {
    pub(crate) fn of(bytes: &[u8]) -> PluginCopy {
        PluginCopy {
            sha256: crate::digest::sha256_hex(bytes),
            hex: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// The bytes, if they are the shared object they claim to be.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, BadAnswer> {
        let no = |why: &str| Err(BadAnswer(why.to_string()));
        if self.hex.len() > 2 * MAX_PLUGIN || !self.hex.len().is_multiple_of(2) {
            return no("the plugin copy is not hex of at most 64 MiB");
        }
        let bytes: Option<Vec<u8>> = (0..self.hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(self.hex.get(i..i + 2)?, 16).ok())
            .collect();
        let Some(bytes) = bytes else {
            return no("the plugin copy is not hex");
        };
        if crate::digest::sha256_hex(&bytes) != self.sha256 {
            return no("the plugin copy does not verify against its sha256");
        }
        if !bytes.starts_with(b"\x7fELF") {
            return no("the plugin copy is not an ELF shared object");
        }
        Ok(bytes)
    }
}
