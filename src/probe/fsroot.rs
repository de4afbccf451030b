//! Reading `/sys` and `/proc` under a root directory (`/` live, or a tree with `--fsroot`).
//! Every path is resolved inside the root (`openat2` with `RESOLVE_IN_ROOT`): sysfs's own
//! links work, but no link — relative or absolute — leads out of a tree. Reads take regular
//! files only (a FIFO planted in a tree is refused, not waited on) and stop at a limit.

use rustix::fd::OwnedFd;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io::{Error, ErrorKind, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The most any sysfs or procfs file may hold (`/proc/interrupts` of a 1,000-IRQ, 512-CPU
/// machine is about 6 MB); a larger one is refused with this figure, not cut short.
pub(crate) const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A root under which absolute kernel paths (`/sys/...`, `/proc/...`) are read.
#[derive(Debug, Clone)]
pub(crate) struct FsRoot {
    root: PathBuf,
    /// The root directory, opened once; `None` when it cannot be opened (every read fails).
    fd: Option<Arc<OwnedFd>>,
}

impl FsRoot {
    pub(crate) fn live() -> Self {
        Self::new("/")
    }

    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let fd = rustix::fs::open(
            &root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
        .map(Arc::new);
        FsRoot { root, fd }
    }

    /// The directory this root stands for.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this is the running machine (`/`, however it was spelled).
    pub(crate) fn is_live(&self) -> bool {
        std::fs::canonicalize(&self.root).is_ok_and(|p| p == Path::new("/"))
    }

    /// The real path of a kernel path such as `/sys/bus/pci/devices` (for messages, and for
    /// hwloc's own `HWLOC_FSROOT`).
    pub(crate) fn path(&self, kernel_path: &str) -> PathBuf {
        self.root.join(kernel_path.trim_start_matches('/'))
    }

    /// Open a kernel path inside the root.
    fn open(&self, kernel_path: &str, flags: OFlags, resolve: ResolveFlags) -> std::io::Result<OwnedFd> {
        let dir = self
            .fd
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("{}: cannot open", self.root.display())))?;
        let rel = kernel_path.trim_start_matches('/');
        let rel = if rel.is_empty() { "." } else { rel };
        let flags = flags | OFlags::CLOEXEC;
        match rustix::fs::openat2(
            dir.as_ref(),
            rel,
            flags,
            Mode::empty(),
            resolve | ResolveFlags::NO_MAGICLINKS,
        ) {
            // Kernels before 5.6: only the live root may be read the ordinary way.
            Err(Errno::NOSYS) if self.is_live() => {
                rustix::fs::open(Path::new("/").join(rel), flags, Mode::empty()).map_err(Error::from)
            }
            r => r.map_err(Error::from),
        }
    }

    /// Read a small text file; `None` when absent or unreadable (sysfs attributes may refuse
    /// reads, e.g. unpopulated GID types answer EINVAL).
    pub(crate) fn read(&self, kernel_path: &str) -> Option<String> {
        self.read_required(kernel_path).ok()
    }

    /// Read a file that must exist, with the error kept for the caller.
    pub(crate) fn read_required(&self, kernel_path: &str) -> std::io::Result<String> {
        let buf = self.read_bytes(kernel_path, MAX_FILE_BYTES)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Read a regular file's bytes (a binary sysfs attribute such as a PCI device's
    /// `config`); more than `limit` bytes is refused with the figure, not cut short.
    /// A regular file under the root opened for reading (no link out of it followed), for a
    /// caller that reads it a piece at a time.
    pub(crate) fn open_regular(&self, kernel_path: &str) -> std::io::Result<std::fs::File> {
        let fd = self.open(kernel_path, OFlags::RDONLY | OFlags::NONBLOCK, ResolveFlags::IN_ROOT)?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::new(ErrorKind::InvalidInput, "not a regular file: refused"));
        }
        Ok(std::fs::File::from(fd))
    }

    pub(crate) fn read_bytes(&self, kernel_path: &str, limit: u64) -> std::io::Result<Vec<u8>> {
        let fd = self.open(kernel_path, OFlags::RDONLY | OFlags::NONBLOCK, ResolveFlags::IN_ROOT)?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::new(ErrorKind::InvalidInput, "not a regular file: refused"));
        }
        let mut buf = Vec::new();
        std::fs::File::from(fd).take(limit + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > limit {
            return Err(Error::new(
                ErrorKind::InvalidData,
                match limit >> 20 {
                    0 => format!("larger than {limit} bytes: refused"),
                    mib => format!("larger than {mib} MiB: refused"),
                },
            ));
        }
        Ok(buf)
    }

    /// Read and trim; empty content counts as absent.
    pub(crate) fn read_trimmed(&self, kernel_path: &str) -> Option<String> {
        self.read(kernel_path)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Replace the content of a file that exists (a `/proc` or `/sys` attribute). No link is
    /// followed on the way, and nothing is created.
    pub(crate) fn write_existing(&self, kernel_path: &str, content: &str) -> std::io::Result<()> {
        let fd = self.open(
            kernel_path,
            OFlags::WRONLY | OFlags::TRUNC | OFlags::NONBLOCK,
            ResolveFlags::IN_ROOT | ResolveFlags::NO_SYMLINKS,
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::new(ErrorKind::InvalidInput, "not a regular file: refused"));
        }
        std::fs::File::from(fd).write_all(content.as_bytes())
    }

    /// The permission bits of a file (`None` when absent).
    pub(crate) fn mode(&self, kernel_path: &str) -> Option<u32> {
        let fd = self.open(kernel_path, OFlags::PATH, ResolveFlags::IN_ROOT).ok()?;
        rustix::fs::fstat(&fd).ok().map(|st| st.st_mode & 0o7777)
    }

    /// Entry names of a directory, sorted; empty when absent.
    pub(crate) fn list(&self, kernel_path: &str) -> Vec<String> {
        let Ok(fd) = self.open(kernel_path, OFlags::RDONLY | OFlags::DIRECTORY, ResolveFlags::IN_ROOT) else {
            return Vec::new();
        };
        let Ok(dir) = rustix::fs::Dir::new(fd) else {
            return Vec::new();
        };
        let mut names: Vec<String> = dir
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
            .filter(|n| n != "." && n != "..")
            .collect();
        names.sort();
        names
    }

    pub(crate) fn exists(&self, kernel_path: &str) -> bool {
        self.open(kernel_path, OFlags::PATH, ResolveFlags::IN_ROOT).is_ok()
    }

    /// Resolve a sysfs symlink chain to a kernel path (`/sys/devices/...`), staying inside the
    /// root: the links in sysfs are relative, so a test tree resolves inside itself; a link
    /// that leads out of a tree resolves to nothing.
    pub(crate) fn resolve(&self, kernel_path: &str) -> Option<String> {
        let real = std::fs::canonicalize(self.path(kernel_path)).ok()?;
        let root = std::fs::canonicalize(&self.root).ok()?;
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

    /// Basename of a symlink's target (e.g. the driver of a PCI device), the link read where
    /// it lies inside the root.
    pub(crate) fn link_name(&self, kernel_path: &str) -> Option<String> {
        let (parent, name) = kernel_path.rsplit_once('/')?;
        let dir = self
            .open(parent, OFlags::PATH | OFlags::DIRECTORY, ResolveFlags::IN_ROOT)
            .ok()?;
        let target = rustix::fs::readlinkat(&dir, name, Vec::new()).ok()?;
        let target = PathBuf::from(target.to_string_lossy().into_owned());
        target.file_name()?.to_str().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_never_lead_out_of_a_tree() {
        let tree = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside\n").unwrap();
        let irq = tree.path().join("proc/irq/5");
        std::fs::create_dir_all(&irq).unwrap();
        // An absolute link resolves inside the root, never to the host's file.
        symlink(outside.path().join("secret"), irq.join("smp_affinity_list")).unwrap();
        let fs = FsRoot::new(tree.path());
        assert!(fs.read("/proc/irq/5/smp_affinity_list").is_none());
        assert!(fs.write_existing("/proc/irq/5/smp_affinity_list", "1\n").is_err());
        // A relative link out of the tree is clamped to the root as well.
        std::fs::remove_file(irq.join("smp_affinity_list")).unwrap();
        symlink(
            "../../../../../../../../../../../../tmp",
            tree.path().join("proc/escape"),
        )
        .unwrap();
        assert!(fs.list("/proc/escape").is_empty() || !fs.list("/proc/escape").iter().any(|n| n == "secret"));
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "outside\n"
        );
    }

    #[test]
    fn a_fifo_in_a_tree_is_refused_not_waited_on() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("proc")).unwrap();
        let fifo = tree.path().join("proc/interrupts");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let fs = FsRoot::new(tree.path());
        let e = fs.read_required("/proc/interrupts").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(fs.write_existing("/proc/interrupts", "x").is_err());
    }
}
