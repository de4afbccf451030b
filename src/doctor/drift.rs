//! `nccl-config`: drift — is `/etc/nccl.conf` still what topo-tune last wrote (its manifest
//! holds the digest)?

use super::facts::Facts;
use super::finding::{Finding, Status};
use crate::digest::sha256_hex;
use crate::model::files::{MANIFEST, NCCL_CONF};

/// Drift: is `/etc/nccl.conf` still what topo-tune last wrote?
pub(super) fn nccl_config(f: &Facts) -> Option<Finding> {
    let Some(manifest) = f.fs.read(MANIFEST) else {
        return Some(Finding::new(Status::Skip, "topo-tune has not written NCCL files here").fix("topo-tune init"));
    };
    let owned: Option<String> = serde_json::from_str::<crate::apply::writer::Manifest>(&manifest)
        .ok()
        .and_then(|m| m.owned.get(NCCL_CONF).cloned());
    let now = f.fs.read(NCCL_CONF).map(|c| sha256_hex(c.as_bytes()));
    Some(if owned.is_some() && owned == now {
        Finding::pass("/etc/nccl.conf is what topo-tune last wrote")
    } else {
        Finding::warn(
            "/etc/nccl.conf changed since topo-tune wrote it (or was removed)",
            "topo-tune init --check --diff",
        )
    })
}
