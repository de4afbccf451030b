//! Reading `/sys` and `/proc` under a root directory (`/` live, or a test tree with `--fsroot`).

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Files under sysfs/procfs are small; anything larger than this is not what we expect.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A root under which absolute kernel paths (`/sys/...`, `/proc/...`) are read.
#[derive(Debug, Clone)]
pub struct FsRoot {
    root: PathBuf,
}

impl FsRoot {
    pub fn live() -> Self {
        FsRoot {
            root: PathBuf::from("/"),
        }
    }

    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsRoot { root: root.into() }
    }

    /// The real path of a kernel path such as `/sys/bus/pci/devices`.
    pub fn path(&self, kernel_path: &str) -> PathBuf {
        self.root.join(kernel_path.trim_start_matches('/'))
    }

    /// Read a small text file; `None` when absent or unreadable (sysfs attributes may refuse
    /// reads, e.g. unpopulated GID types answer EINVAL).
    pub fn read(&self, kernel_path: &str) -> Option<String> {
        read_limited(&self.path(kernel_path)).ok()
    }

    /// Read a file that must exist, with the error kept for the caller.
    pub fn read_required(&self, kernel_path: &str) -> std::io::Result<String> {
        read_limited(&self.path(kernel_path))
    }

    /// Read and trim; empty content counts as absent.
    pub fn read_trimmed(&self, kernel_path: &str) -> Option<String> {
        self.read(kernel_path)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Entry names of a directory, sorted; empty when absent.
    pub fn list(&self, kernel_path: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path(kernel_path))
            .map(|it| {
                it.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn exists(&self, kernel_path: &str) -> bool {
        self.path(kernel_path).exists()
    }

    /// Resolve a sysfs symlink chain to a kernel path (`/sys/devices/...`), staying inside the
    /// root: the links in sysfs are relative, so a test tree resolves inside itself.
    pub fn resolve(&self, kernel_path: &str) -> Option<String> {
        let real = fs::canonicalize(self.path(kernel_path)).ok()?;
        let root = fs::canonicalize(&self.root).ok()?;
        let rel = real.strip_prefix(&root).ok()?;
        let mut out = String::new();
        for c in rel.components() {
            if let Component::Normal(part) = c {
                out.push('/');
                out.push_str(part.to_str()?);
            }
        }
        Some(out)
    }

    /// Basename of a symlink's target (e.g. the driver of a PCI device).
    pub fn link_name(&self, kernel_path: &str) -> Option<String> {
        let target = fs::read_link(self.path(kernel_path)).ok()?;
        target.file_name()?.to_str().map(str::to_string)
    }
}

fn read_limited(path: &Path) -> std::io::Result<String> {
    let file = fs::File::open(path)?;
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
