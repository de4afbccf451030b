//! The one way topo-tune writes files: inside a tree it manages (`/` on a node, or an
//! `--output-dir`), every path resolved component by component from the tree's root with no
//! symlink followed and no `..`; new content written to a file created under a unique name
//! with `O_EXCL`, at its final mode, fsynced, then renamed over the target — and only when the
//! content differs. Reads refuse anything but a regular file and stop at a size limit. A lock
//! file serialises topo-tune runs on one tree.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: is a symbolic link: refused (topo-tune never reads or writes through a link inside the tree it manages)")]
    Symlink { path: String },
    #[error("{path}: not a regular file: refused")]
    NotRegular { path: String },
    #[error("{path}: not UTF-8 text (byte {at}): refused")]
    NotText { path: String, at: usize },
    #[error("{path}: larger than {limit} bytes: refused")]
    TooLarge { path: String, limit: u64 },
    #[error("{path}: not a path topo-tune manages ({why})")]
    BadPath { path: String, why: String },
    #[error("{path}: another topo-tune run holds the lock ({holder}); waited {waited_s} s")]
    Locked {
        path: String,
        holder: String,
        waited_s: u64,
    },
}

impl crate::exit::Classify for TreeError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        let code = match self {
            TreeError::Io { .. } => exit::IO_ERROR,
            TreeError::Locked { .. } => exit::TEMP_FAILURE,
            // A link, a non-file, non-text, too large, a bad path: the data is wrong.
            _ => exit::DATA_ERROR,
        };
        Class::new(code, "write")
    }
}

/// A directory tree topo-tune writes into.
#[derive(Debug)]
pub(crate) struct Tree {
    root: PathBuf,
    fd: OwnedFd,
}

/// Held while a run writes; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct Lock {
    _fd: OwnedFd,
}

fn io_err(path: &str, e: impl Into<std::io::Error>) -> TreeError {
    TreeError::Io {
        path: path.to_string(),
        source: e.into(),
    }
}

/// The components of a tree path (`/etc/nccl.conf`, `host1/snapshot.json`): each a plain
/// name, never empty, `.` or `..`, and never holding a NUL.
pub(crate) fn components(path: &str) -> Result<Vec<&str>, TreeError> {
    let bad = |why: &str| TreeError::BadPath {
        path: path.to_string(),
        why: why.to_string(),
    };
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad("an empty path component"));
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(bad("`.` or `..` in it"));
    }
    if path.contains('\0') {
        return Err(bad("a NUL byte in it"));
    }
    Ok(parts)
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

impl Tree {
    /// The tree rooted at `root`, created if absent. The root itself is the operator's choice
    /// (it may be a link); nothing below it may be.
    pub(crate) fn open(root: &Path) -> Result<Tree, TreeError> {
        let shown = root.display().to_string();
        std::fs::create_dir_all(root).map_err(|e| io_err(&shown, e))?;
        let fd = rustix::fs::open(
            root,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
            Mode::empty(),
        )
        .map_err(|e| io_err(&shown, e))?;
        Ok(Tree {
            root: root.to_path_buf(),
            fd,
        })
    }

    /// How a tree path is shown: under the root it lives in.
    pub(crate) fn show(&self, path: &str) -> String {
        if self.root == Path::new("/") {
            format!("/{}", path.trim_start_matches('/'))
        } else {
            self.root.join(path.trim_start_matches('/')).display().to_string()
        }
    }

    /// Open the directory made of `dirs` (components), creating missing ones when asked.
    /// `None`: absent and not created.
    fn dir(&self, dirs: &[&str], create: bool, shown: &str) -> Result<Option<OwnedFd>, TreeError> {
        let mut fd = rustix::io::dup(&self.fd).map_err(|e| io_err(shown, e))?;
        for name in dirs {
            let next = match rustix::fs::openat(&fd, *name, DIR_FLAGS, Mode::empty()) {
                Ok(f) => f,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, *name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(io_err(shown, e)),
                    }
                    rustix::fs::openat(&fd, *name, DIR_FLAGS, Mode::empty())
                        .map_err(|e| classify(&fd, name, e, shown))?
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(classify(&fd, name, e, shown)),
            };
            fd = next;
        }
        Ok(Some(fd))
    }

    fn split<'p>(&self, path: &'p str) -> Result<(Vec<&'p str>, &'p str), TreeError> {
        let mut parts = components(path)?;
        let name = parts.pop().unwrap_or_default();
        Ok((parts, name))
    }

    /// Read a regular file of at most `limit` bytes; `None` when it does not exist.
    pub(crate) fn read(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let Some(dir) = self.dir(&dirs, false, &shown)? else {
            return Ok(None);
        };
        read_at(&dir, name, limit, &shown)
    }

    /// [`Tree::read`] as UTF-8 text.
    pub(crate) fn read_text(&self, path: &str, limit: u64) -> Result<Option<String>, TreeError> {
        self.read(path, limit)?
            .map(|b| {
                String::from_utf8(b).map_err(|e| TreeError::NotText {
                    path: self.show(path),
                    at: e.utf8_error().valid_up_to(),
                })
            })
            .transpose()
    }

    /// Names in a directory (none when it does not exist), sorted.
    pub(crate) fn list(&self, path: &str) -> Result<Vec<String>, TreeError> {
        let shown = self.show(path);
        let parts = if path.trim_matches('/').is_empty() {
            Vec::new()
        } else {
            components(path)?
        };
        let Some(dir) = self.dir(&parts, false, &shown)? else {
            return Ok(Vec::new());
        };
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir).map_err(|e| io_err(&shown, e))? {
            let entry = entry.map_err(|e| io_err(&shown, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Write `content` at `path` (directories created) unless it already holds exactly that.
    /// Returns whether the file changed. The old file is intact until the rename.
    pub(crate) fn write(&self, path: &str, content: &[u8], mode: u32) -> Result<bool, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let dir = self
            .dir(&dirs, true, &shown)?
            .ok_or_else(|| io_err(&shown, Errno::NOENT))?;
        if read_at(&dir, name, content.len() as u64, &shown)
            .ok()
            .flatten()
            .as_deref()
            == Some(content)
        {
            return Ok(false);
        }
        // A link or a directory at the target is refused, not replaced.
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                return Err(TreeError::Symlink { path: shown });
            }
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
                return Err(TreeError::NotRegular { path: shown });
            }
            _ => {}
        }
        let (tmp, file) = create_temp(&dir, name, mode, &shown)?;
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::from(file);
            f.write_all(content)?;
            f.sync_all()?;
            drop(f);
            fault_point();
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?;
            rustix::fs::fsync(&dir)?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
            return Err(io_err(&shown, e));
        }
        Ok(true)
    }

    /// Remove a file topo-tune owns (the link itself if it is one); absent is fine.
    pub(crate) fn remove(&self, path: &str) -> Result<bool, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let Some(dir) = self.dir(&dirs, false, &shown)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => {
                rustix::fs::fsync(&dir).map_err(|e| io_err(&shown, e))?;
                Ok(true)
            }
            Err(Errno::NOENT) => Ok(false),
            Err(Errno::ISDIR) => Err(TreeError::NotRegular { path: shown }),
            Err(e) => Err(io_err(&shown, e)),
        }
    }

    /// Remove an empty directory topo-tune made; absent or not empty is left as it is.
    pub(crate) fn remove_empty_dir(&self, path: &str) -> Result<bool, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let Some(dir) = self.dir(&dirs, false, &shown)? else {
            return Ok(false);
        };
        match rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR) {
            Ok(()) => {
                rustix::fs::fsync(&dir).map_err(|e| io_err(&shown, e))?;
                Ok(true)
            }
            Err(Errno::NOENT | Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
            Err(Errno::NOTDIR) => Err(TreeError::NotRegular { path: shown }),
            Err(e) => Err(io_err(&shown, e)),
        }
    }

    /// Remove temp files a killed run left in a directory and the directories below it
    /// (only ours, and only of processes that are gone: a temp of a live writer is its
    /// write in flight; links are not descended).
    pub(crate) fn remove_stale_temps(&self, dir_path: &str) {
        let mut stack = vec![dir_path.trim_end_matches('/').to_string()];
        while let Some(dir) = stack.pop() {
            for name in self.list(&dir).unwrap_or_default() {
                let path = format!("{dir}/{name}");
                if let Some(pid) = temp_owner(&name) {
                    if !alive(pid) {
                        let _ = self.remove(&path);
                    }
                } else if self.list(&path).is_ok() && stack.len() < 4096 {
                    stack.push(path);
                }
            }
        }
    }

    /// Who owns a file or directory of the tree and its mode (`None`: it does not exist); a
    /// link is not followed (and is refused).
    pub(crate) fn owner_mode(&self, path: &str) -> Result<Option<(u32, u32)>, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let Some(dir) = self.dir(&dirs, false, &shown)? else {
            return Ok(None);
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                Err(TreeError::Symlink { path: shown })
            }
            Ok(st) => Ok(Some((st.st_uid, st.st_mode))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_err(&shown, e)),
        }
    }

    /// The permission bits of a file (`None`: it does not exist); a link is not followed.
    pub(crate) fn mode(&self, path: &str) -> Result<Option<u32>, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let Some(dir) = self.dir(&dirs, false, &shown)? else {
            return Ok(None);
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => Ok(Some(st.st_mode & 0o7777)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                Err(TreeError::Symlink { path: shown })
            }
            Ok(_) => Err(TreeError::NotRegular { path: shown }),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_err(&shown, e)),
        }
    }

    /// Set a regular file's permission bits (no link followed); whether they changed.
    pub(crate) fn set_mode(&self, path: &str, mode: u32) -> Result<bool, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let dir = self
            .dir(&dirs, false, &shown)?
            .ok_or_else(|| io_err(&shown, Errno::NOENT))?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(|e| classify(&dir, name, e, &shown))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| io_err(&shown, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(TreeError::NotRegular { path: shown });
        }
        if st.st_mode & 0o7777 == mode {
            return Ok(false);
        }
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| io_err(&shown, e))?;
        Ok(true)
    }

    /// Take the tree's lock at `path` (created if absent), waiting up to `wait` for another
    /// run to finish; the holder is named when it does not.
    pub(crate) fn lock(&self, path: &str, wait: Duration) -> Result<Lock, TreeError> {
        let shown = self.show(path);
        let (dirs, name) = self.split(path)?;
        let dir = self
            .dir(&dirs, true, &shown)?
            .ok_or_else(|| io_err(&shown, Errno::NOENT))?;
        let flags = OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o600))
            .map_err(|e| classify(&dir, name, e, &shown))?;
        let start = Instant::now();
        loop {
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(Errno::WOULDBLOCK) if start.elapsed() < wait => std::thread::sleep(Duration::from_millis(25)),
                Err(Errno::WOULDBLOCK) => {
                    return Err(TreeError::Locked {
                        path: shown,
                        holder: holder(&fd),
                        waited_s: wait.as_secs(),
                    });
                }
                Err(e) => return Err(io_err(&shown, e)),
            }
        }
        // Nothing is written into the lock file: a run that changes nothing leaves every file
        // of the tree as it found it (the holder is found in /proc/locks instead).
        Ok(Lock { _fd: fd })
    }
}

/// The pid in a temp file's name (`.NAME.topo-tune.PID.N.tmp`, made by [`create_temp`]).
fn temp_owner(name: &str) -> Option<u32> {
    if !(name.starts_with('.') && name.ends_with(".tmp")) {
        return None;
    }
    let (_, rest) = name.split_once(".topo-tune.")?;
    rest.split('.').next()?.parse().ok()
}

/// Whether a process of this pid exists on this machine (a temp of another machine's writer
/// cannot be in this tree: each node writes its own).
fn alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
}

/// Who holds the flock on `fd`: its pid and command line, from `/proc/locks` (Linux's view of
/// every lock, by device and inode).
fn holder(fd: &impl AsFd) -> String {
    let Ok(st) = rustix::fs::fstat(fd) else {
        return "holder unknown".into();
    };
    let dev = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(st.st_dev),
        rustix::fs::minor(st.st_dev),
        st.st_ino
    );
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let pid = locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF` (blocked waiters are `-> …`).
        (f.len() >= 6 && f[1] == "FLOCK" && f[5] == dev).then(|| f[4].to_string())
    });
    let Some(pid) = pid else {
        return "holder unknown".into();
    };
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd: String = String::from_utf8_lossy(&cmd)
        .replace('\0', " ")
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    if cmd.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid}: {cmd}")
    }
}

/// Why an `O_NOFOLLOW` open of `name` in `dir` failed: a link (ELOOP, or ENOTDIR where a
/// directory was asked for), something else where a directory belongs, or plain I/O.
fn classify(dir: &impl AsFd, name: &str, e: Errno, shown: &str) -> TreeError {
    let is_link = || {
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
    };
    match e {
        Errno::LOOP => TreeError::Symlink {
            path: shown.to_string(),
        },
        Errno::NOTDIR if is_link() => TreeError::Symlink {
            path: shown.to_string(),
        },
        Errno::NOTDIR => TreeError::NotRegular {
            path: format!("{shown} (a file where a directory belongs)"),
        },
        e => io_err(shown, e),
    }
}

/// Read `name` in `dir`: a regular file, not a link, at most `limit` bytes.
fn read_at(dir: &impl AsFd, name: &str, limit: u64, shown: &str) -> Result<Option<Vec<u8>>, TreeError> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => {
            return Err(TreeError::Symlink {
                path: shown.to_string(),
            })
        }
        Err(e) => return Err(io_err(shown, e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| io_err(shown, e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(TreeError::NotRegular {
            path: shown.to_string(),
        });
    }
    let mut buf = Vec::new();
    std::fs::File::from(fd)
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| io_err(shown, e))?;
    if buf.len() as u64 > limit {
        return Err(TreeError::TooLarge {
            path: shown.to_string(),
            limit,
        });
    }
    Ok(Some(buf))
}

/// A new file beside `name`, under a name nobody else holds (`O_EXCL`: a planted file or link
/// makes us pick another), already at `mode`.
fn create_temp(dir: &OwnedFd, name: &str, mode: u32, shown: &str) -> Result<(String, OwnedFd), TreeError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..64 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = format!(".{name}.topo-tune.{}.{n}{nanos:09}.tmp", std::process::id());
        match rustix::fs::openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(mode)) {
            Ok(fd) => {
                // The umask may have narrowed the mode at creation: set it exactly.
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| io_err(shown, e))?;
                return Ok((tmp, fd));
            }
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(io_err(shown, e)),
        }
    }
    Err(io_err(shown, Errno::EXIST))
}

/// Crash-safety tests (built with `--features fault-injection` only): abort just before the
/// Nth rename of this process when `TOPO_TUNE_FAULT_AT_RENAME=N` (1 = the first).
#[cfg(feature = "fault-injection")]
fn fault_point() {
    static RENAMES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RENAMES.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    let at = std::env::var("TOPO_TUNE_FAULT_AT_RENAME")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| std::env::var_os("TOPO_TUNE_FAULT_BEFORE_RENAME").map(|_| 1));
    if at == Some(n) {
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
fn fault_point() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn second_identical_write_changes_nothing_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tree::open(dir.path()).unwrap();
        assert!(t.write("a/b/snapshot.json", b"one", 0o644).unwrap());
        let p = dir.path().join("a/b/snapshot.json");
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.write("a/b/snapshot.json", b"one", 0o644).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime);
        assert!(t.write("a/b/snapshot.json", b"two", 0o600).unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(t.list("a/b").unwrap(), ["snapshot.json"]);
    }

    #[test]
    fn links_inside_the_tree_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let t = Tree::open(dir.path()).unwrap();
        // A link as the target file.
        symlink(&victim, dir.path().join("f")).unwrap();
        assert!(matches!(t.write("f", b"x", 0o644), Err(TreeError::Symlink { .. })));
        assert!(matches!(t.read("f", 100), Err(TreeError::Symlink { .. })));
        // A link as a directory on the way.
        symlink(outside.path(), dir.path().join("etc")).unwrap();
        assert!(matches!(
            t.write("etc/nccl.conf", b"x", 0o644),
            Err(TreeError::Symlink { .. })
        ));
        assert!(!outside.path().join("nccl.conf").exists());
        // Removing a planted link removes the link, never its target.
        assert!(t.remove("f").unwrap());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // `..` never leaves the tree.
        assert!(matches!(t.write("../x", b"x", 0o644), Err(TreeError::BadPath { .. })));
    }

    #[test]
    fn a_fifo_or_a_huge_file_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tree::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("big"), vec![b'a'; 2000]).unwrap();
        assert!(matches!(
            t.read("big", 1000),
            Err(TreeError::TooLarge { limit: 1000, .. })
        ));
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(matches!(t.read("fifo", 1000), Err(TreeError::NotRegular { .. })));
        assert!(matches!(
            t.write("fifo", b"x", 0o644),
            Err(TreeError::NotRegular { .. })
        ));
    }

    #[test]
    fn the_lock_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tree::open(dir.path()).unwrap();
        let held = t.lock("state/lock", Duration::from_secs(1)).unwrap();
        // flock locks belong to the open file: a second open in this process contends too.
        let err = t.lock("state/lock", Duration::from_millis(100)).unwrap_err();
        assert!(
            err.to_string().contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        assert!(t.lock("state/lock", Duration::from_millis(100)).is_ok());
    }
}
