//! Before a benchmark-driven command touches anything (`apply`, `tune`, `diagnose`): the
//! program its benchmark command starts must be there. Without it a rollout staged every
//! canary file, then stopped with "mpirun: not found" and the exit code of a measurement that
//! said no.

use crate::config::benchmark::RunsOn;
use crate::config::Inventory;
use crate::exit::{self, Class};
use std::path::{Path, PathBuf};

/// The benchmark's program is not on the machine that runs it.
#[derive(Debug, thiserror::Error)]
#[error("benchmark.command starts `{program}`, which {where_}{default}: install it, or set benchmark.command in {config} (docs/apply.md); nothing was staged, run or changed")]
pub(crate) struct MissingProgram {
    program: String,
    where_: String,
    default: &'static str,
    config: String,
}

impl crate::exit::Classify for MissingProgram {
    fn classify(&self) -> Class {
        Class::new(exit::UNAVAILABLE, "benchmark")
    }
}

impl From<MissingProgram> for crate::error::Error {
    fn from(e: MissingProgram) -> Self {
        crate::error::Error::Flow(Box::new(e))
    }
}

/// Checks the controller's PATH (`runs_on: controller`); a command run on the first node is
/// that node's to find, and a program named through a placeholder or quoting is not guessed.
pub(crate) fn benchmark_runnable(inv: &Inventory) -> Result<(), MissingProgram> {
    let b = &inv.benchmark;
    if b.runs_on != RunsOn::Controller {
        return Ok(());
    }
    let Some(program) = crate::config::benchmark::program(&b.command) else {
        return Ok(());
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    if found(program, &path) {
        return Ok(());
    }
    Err(MissingProgram {
        program: program.to_string(),
        where_: if program.contains('/') {
            "does not exist or is not executable".into()
        } else {
            "is not on this machine's PATH".into()
        },
        default: if b.command == crate::config::benchmark::DEFAULT_COMMAND {
            " (cluster.yaml has no benchmark.command: this is the default, nccl-tests' all_reduce_perf under mpirun)"
        } else {
            ""
        },
        config: inv.path.display().to_string(),
    })
}

/// topo-tune's tuner plugin is not where `tune` looks for it.
#[derive(Debug, thiserror::Error)]
#[error("the tuner plugin {path}: {why}: build it (`cargo build --release --workspace` puts libnccl_tuner_topo_tune.so beside topo-tune; the release tarball carries it) or give --tuner-plugin FILE; nothing was staged or run")]
pub(crate) struct MissingPlugin {
    path: String,
    why: String,
}

impl crate::exit::Classify for MissingPlugin {
    fn classify(&self) -> Class {
        Class::new(exit::UNAVAILABLE, "tune")
    }
}

impl From<MissingPlugin> for crate::error::Error {
    fn from(e: MissingPlugin) -> Self {
        crate::error::Error::Flow(Box::new(e))
    }
}

/// `tune --output-dir`, checked before the first run so that hours of measuring do not end
/// in "cannot write": the directory made or opened, the files `tune` writes there regular
/// files (never a link or a directory, which the writer would refuse at the end) and the
/// directory writable (a file made and removed).
pub(crate) fn tuning_dir_writable(dir: &Path) -> Result<(), crate::apply::tree::TreeError> {
    let tree = crate::apply::tree::Tree::open(dir)?;
    for name in ["tuning.json", "nccl-tuner.csv"] {
        // Looked at, not read: a link is refused by `owner_mode` itself.
        if let Some((_, mode)) = tree.owner_mode(name)? {
            if mode & 0o170_000 != 0o100_000 {
                return Err(crate::apply::tree::TreeError::NotRegular { path: tree.show(name) });
            }
        }
    }
    let check = ".topo-tune-write-check";
    tree.write(check, b"", 0o600)?;
    tree.remove(check)?;
    Ok(())
}

/// The plugin's bytes: a regular file of at most 64 MiB that is an ELF shared object.
pub(crate) fn tuner_plugin(path: &Path) -> Result<Vec<u8>, MissingPlugin> {
    let no = |why: String| MissingPlugin {
        path: path.display().to_string(),
        why,
    };
    let bytes = crate::input::read_bytes(path, 64 << 20, "tuner plugin").map_err(|e| no(e.to_string()))?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(no("not an ELF shared object".into()));
    }
    Ok(bytes)
}

fn found(program: &str, path: &std::ffi::OsStr) -> bool {
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::split_paths(path).any(|d: PathBuf| executable(&d.join(program)))
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_on_path_or_by_its_path() {
        let path = std::ffi::OsString::from("/nonexistent:/bin:/usr/bin");
        assert!(found("sh", &path));
        assert!(found("/bin/sh", &path));
        assert!(!found("mpirun-that-is-not-here", &path));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("tool");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let shown = plain.to_str().unwrap();
        assert!(!found(shown, &path), "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(found(shown, &path));
    }
}
