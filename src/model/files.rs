//! Where topo-tune's files live on a node (absolute kernel paths; `--output-dir`, `--fsroot`
//! and the node-side root put them under another directory). One place, so the writer, the
//! rules, `doctor` and `rollback` agree.

/// The one file NCCL reads (besides `$NCCL_CONF_FILE` and `~/.nccl.conf`).
pub(crate) const NCCL_CONF: &str = "/etc/nccl.conf";
/// topo-tune's drop-ins, assembled in lexical order into [`NCCL_CONF`].
pub(crate) const DROPIN_DIR: &str = "/etc/nccl/conf.d";
pub(crate) const DROPIN_NAME: &str = "50-topo-tune.conf";
pub(crate) const DROPIN: &str = "/etc/nccl/conf.d/50-topo-tune.conf";
/// A `/etc/nccl.conf` topo-tune did not write, kept as the earliest drop-in.
pub(crate) const PRESERVED_NAME: &str = "00-preserved-nccl.conf";
pub(crate) const PRESERVED: &str = "/etc/nccl/conf.d/00-preserved-nccl.conf";
/// topo-tune's own state and the files only it writes.
pub(crate) const STATE_DIR: &str = "/etc/nccl/topo-tune";
pub(crate) const TOPOLOGY: &str = "/etc/nccl/topo-tune/topology.xml";
pub(crate) const ENV_FILE: &str = "/etc/nccl/topo-tune/nccl.env";
pub(crate) const MANIFEST: &str = "/etc/nccl/topo-tune/manifest.json";
/// A canary's candidate files, staged beside the live ones while they are measured
/// (`apply`): NCCL reads them only through `NCCL_CONF_FILE`.
pub(crate) const STAGE_DIR: &str = "/etc/nccl/topo-tune/candidate";
pub(crate) const STAGE_CONF: &str = "/etc/nccl/topo-tune/candidate/nccl.conf";
pub(crate) const STAGE_TOPOLOGY: &str = "/etc/nccl/topo-tune/candidate/topology.xml";
/// A staged tuning's rules file (what the staged nccl.conf's `NCCL_TUNER_CONFIG_FILE` names).
pub(crate) const STAGE_TUNER_CSV: &str = "/etc/nccl/topo-tune/candidate/nccl-tuner.csv";
pub(crate) const STAGE_ENV: &str = "/etc/nccl/topo-tune/candidate/nccl.env";
/// The live settings as an env file, for the baseline of a launcher that takes env files.
pub(crate) const STAGE_BASELINE_ENV: &str = "/etc/nccl/topo-tune/candidate/baseline.env";
/// Which rollout staged the candidate, and each staged file's sha256.
pub(crate) const STAGE_RECORD: &str = "/etc/nccl/topo-tune/candidate/stage.json";
/// `tune`'s run files on a node: one directory per tune run, removed when it ends (or by the
/// next run), each candidate's config and rules file in a directory named by their digest.
pub(crate) const TUNE_DIR: &str = "/var/lib/topo-tune/tune";
/// topo-tune's tuner plugin, as a tune run stages it in its directory.
pub(crate) const TUNE_PLUGIN: &str = "libnccl_tuner_topo_tune.so";
/// A rolled-out tuning's rules file (`init --tuning`), what the drop-in's
/// `NCCL_TUNER_CONFIG_FILE` names.
pub(crate) const TUNER_CSV: &str = "/etc/nccl/nccl-tuner.csv";
/// Where a rolled-out tuner plugin lives: one directory per content (its sha256's first 16
/// hex digits), so a rollback's drop-in still names a plugin that is there and an upgrade never
/// replaces a library a running job has loaded — as topo-tune's own binary is deployed.
pub(crate) const PLUGIN_DIR: &str = "/var/lib/topo-tune/plugin";

/// The content-addressed path of a plugin whose sha256 is `sha256`.
pub(crate) fn plugin_path(sha256: &str) -> String {
    format!("{PLUGIN_DIR}/{}/{TUNE_PLUGIN}", sha256.get(..16).unwrap_or(sha256))
}

/// Backups of replaced files, per run, relative to [`STATE_DIR`].
pub(crate) const BACKUPS: &str = "backups";
/// What `irq-pin` pinned last (so `doctor` tells undone pins from never-made ones).
pub(crate) const IRQ_STATE: &str = "/etc/topo-tune/irq-pin.json";
/// Each interrupt's affinity (and irqbalance's config) before `irq-pin` first changed it:
/// what `irq-pin --restore` puts back.
pub(crate) const IRQ_BEFORE: &str = "/etc/topo-tune/irq-pin.before.json";
/// irqbalance's config, Debian/Ubuntu first, then RHEL.
pub(crate) const IRQBALANCE_CONFIGS: [&str; 2] = ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];
/// The boot-time re-pinning that `irq-pin --install` writes.
pub(crate) const IRQ_UNIT: &str = "/etc/systemd/system/topo-tune-irq-pin.service";
pub(crate) const IRQ_UNIT_NAME: &str = "topo-tune-irq-pin.service";
pub(crate) const IRQ_UDEV_RULE: &str = "/etc/udev/rules.d/99-topo-tune-irq-pin.rules";

/// The files topo-tune writes and may remove: the only paths a manifest may name.
pub(crate) const MANAGED: [&str; 6] = [NCCL_CONF, DROPIN, PRESERVED, TOPOLOGY, ENV_FILE, TUNER_CSV];

/// The most one of topo-tune's files on a node may hold (a drop-in, `/etc/nccl.conf`, the
/// topology file, a backup): what it reads back is what it may write.
pub(crate) const FILE_LIMIT: u64 = 1 << 20;

/// `20261129T110500Z-1234`, optionally with a `-N` suffix.
pub(crate) fn run_id_ok(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() >= 18
        && b.len() <= 40
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
        && id[17..]
            .split('-')
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

/// Why a host cannot name a directory under another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HostDirError(pub(crate) String);

impl From<HostDirError> for String {
    fn from(e: HostDirError) -> String {
        e.0
    }
}

/// `base/host`, the one way a per-host path is made: the host must be a single path
/// component (no `/`, not `.` or `..`, not empty), so the result stays under `base`.
pub(crate) fn host_dir(base: &std::path::Path, host: &str) -> Result<std::path::PathBuf, HostDirError> {
    if host.is_empty() || host == "." || host == ".." || host.contains('/') || host.contains('\0') {
        return Err(HostDirError(format!(
            "{host:?} cannot name a directory under {}",
            base.display()
        )));
    }
    Ok(base.join(host))
}
