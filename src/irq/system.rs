//! The host side effects of `irq-pin` besides `/proc` and `/etc` files: who we run as,
//! `systemctl`, and our own path. Behind a trait so tests see exactly what would be run.

use std::path::PathBuf;

pub(crate) trait System {
    /// Whether we run with effective uid 0.
    fn is_root(&self) -> bool;
    /// Run `systemctl ARGS`; `None` when this system does not run services (a described tree).
    fn systemctl(&self, args: &[&str]) -> Option<bool>;
    /// This binary's path, for the unit's `ExecStart=`.
    fn own_binary(&self) -> std::io::Result<PathBuf>;
}

/// The system a root stands for: a `--fsroot` tree is described (no services, no root
/// check) — unless it is `/` itself however spelled (`TOPO_TUNE_FSROOT=/`), which is the
/// live machine and is treated as one.
pub(crate) fn for_root(fsroot: Option<&std::path::Path>) -> &'static dyn System {
    if is_tree(fsroot) {
        &TreeSystem
    } else {
        &LiveSystem
    }
}

/// `systemctl try-restart irqbalance` (it restarts only a running one, never starts or stops
/// it), said as the note after an edit of its config says it.
pub(crate) fn restart_irqbalance(sys: &dyn System) -> &'static str {
    match sys.systemctl(&["try-restart", "irqbalance"]) {
        Some(true) => "restart done",
        Some(false) => "restart FAILED: run `systemctl try-restart irqbalance`",
        None => "not restarted (a --fsroot tree)",
    }
}

/// Whether `fsroot` names a described tree rather than this machine.
pub(crate) fn is_tree(fsroot: Option<&std::path::Path>) -> bool {
    fsroot.is_some_and(|root| !std::fs::canonicalize(root).is_ok_and(|p| p == std::path::Path::new("/")))
}

/// The machine we run on.
pub(crate) struct LiveSystem;

impl System for LiveSystem {
    fn is_root(&self) -> bool {
        // Effective uid from /proc/self/status (no unsafe).
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
            })
            .unwrap_or(false)
    }

    fn systemctl(&self, args: &[&str]) -> Option<bool> {
        Some(
            std::process::Command::new("systemctl")
                .args(args)
                .status()
                .is_ok_and(|s| s.success()),
        )
    }

    fn own_binary(&self) -> std::io::Result<PathBuf> {
        std::env::current_exe()
    }
}

/// A `--fsroot` tree: files are written under it, no service is touched, anyone may write.
pub(crate) struct TreeSystem;

impl System for TreeSystem {
    fn is_root(&self) -> bool {
        true
    }

    fn systemctl(&self, _args: &[&str]) -> Option<bool> {
        None
    }

    fn own_binary(&self) -> std::io::Result<PathBuf> {
        std::env::current_exe()
    }
}

/// Records what would be run; answers as configured.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct FakeSystem {
    pub(crate) root: bool,
    pub(crate) systemctl_ok: bool,
    pub(crate) calls: std::sync::Mutex<Vec<String>>,
}

#[cfg(test)]
impl System for FakeSystem {
    fn is_root(&self) -> bool {
        self.root
    }

    fn systemctl(&self, args: &[&str]) -> Option<bool> {
        if let Ok(mut c) = self.calls.lock() {
            c.push(format!("systemctl {}", args.join(" ")));
        }
        Some(self.systemctl_ok)
    }

    fn own_binary(&self) -> std::io::Result<PathBuf> {
        Ok(PathBuf::from("/usr/local/bin/topo-tune"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fsroot_slash_is_the_live_machine() {
        use std::path::Path;
        assert!(!super::is_tree(Some(Path::new("/"))));
        assert!(!super::is_tree(Some(Path::new("/./"))));
        assert!(!super::is_tree(Some(Path::new("/tmp/.."))));
        assert!(!super::is_tree(None));
        let dir = tempfile::tempdir().unwrap();
        assert!(super::is_tree(Some(dir.path())));
    }
}
