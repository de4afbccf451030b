//! What a `--fsroot` tree may hold before hwloc reads it. hwloc's Linux backend opens the
//! tree's files itself (`hwloc_openat`: a plain `openat` from the root's descriptor,
//! topology-linux.c), outside [`super::fsroot::FsRoot`]'s guarded reads: it waits on a FIFO,
//! follows an absolute link to the host's own file, and reads `/dev/zero` forever. So the
//! parts of the tree hwloc reads are walked first, links not followed, and refused — naming
//! the path — when they hold anything but directories, regular files within the read limit,
//! and links that resolve inside the tree. (What else a node's tree holds, `etc/` for doctor,
//! is read through `FsRoot` only, where an unreadable file is that check's finding.)

use super::fsroot::MAX_FILE_BYTES;
use std::fs::{self, FileType};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// The most entries a tree may hold (a whole `/sys` copied from a large machine holds a
/// few hundred thousand; hwloc-gather-topology's capture a few thousand).
pub(crate) const MAX_ENTRIES: usize = 1_000_000;
/// The deepest a tree may nest (sysfs's deepest PCI paths are about 20 levels).
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a tree was refused: the entry (relative to the tree's root) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub(crate) struct TreeRefusal {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// What hwloc's Linux backend opens under its root (topology-linux.c, open-mpi/hwloc
/// 3b37b024a: `/proc/cpuinfo`, `/proc/meminfo`, `/proc/mounts`, `/proc/cmdline`,
/// `/proc/self/{cpuset,cgroup}`, `/proc/driver/nvidia/gpus`, `/sys/devices`, `/sys/bus`,
/// `/sys/class`, `/sys/fs/cgroup`, `/sys/kernel/mm`, `/sys/firmware/dmi`, `/dev/cpuset`,
/// `/run/udev/data`). What it never opens — `/proc/irq`, `/proc/interrupts`, a process's
/// `/proc/<pid>`, `/sys/module`, `/sys/kernel/iommu_groups` — topo-tune reads through
/// `FsRoot` alone, where one bad file is one check's finding. A cgroup mount point hwloc
/// finds in `/proc/mounts` may lead elsewhere: that is what the child's limits are for.
const HWLOC_READS: [&str; 14] = [
    "proc/cpuinfo",
    "proc/meminfo",
    "proc/mounts",
    "proc/cmdline",
    "proc/self",
    "proc/driver/nvidia/gpus",
    "sys/devices",
    "sys/bus",
    "sys/class",
    "sys/fs/cgroup",
    "sys/kernel/mm",
    "sys/firmware/dmi",
    "dev/cpuset",
    "run/udev/data",
];

/// Directories inside what hwloc reads that it never opens (of an InfiniBand port it reads
/// `state`, `lid`, `lid_mask_count` and `gids/N`, topology-linux.c:6102-6134): the port
/// counters doctor reads through `FsRoot`.
const HWLOC_SKIPS: [&str; 2] = ["counters", "hw_counters"];

/// Walk what hwloc reads under `root` (links not followed) and refuse the first entry hwloc
/// must not be given.
pub(crate) fn check(root: &Path) -> Result<(), TreeRefusal> {
    let real_root = fs::canonicalize(root).map_err(|e| refusal(Path::new("."), &format!("cannot resolve: {e}")))?;
    let mut walk = Walk {
        root: real_root,
        seen: 0,
    };
    for top in HWLOC_READS {
        let path = walk.root.join(top);
        if !walk.ancestors_stay_inside(Path::new(top))? {
            continue;
        }
        match fs::symlink_metadata(&path) {
            Ok(meta) => walk.entry(&path, meta.file_type(), meta.len(), 0)?,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(walk.refuse(&path, &format!("cannot stat: {e}"))),
        }
    }
    Ok(())
}

struct Walk {
    root: PathBuf,
    seen: usize,
}

impl Walk {
    /// The directories on the way to one of hwloc's paths (`proc` of `proc/cpuinfo`): a link
    /// among them must stay inside the tree too. False when one is absent.
    fn ancestors_stay_inside(&self, top: &Path) -> Result<bool, TreeRefusal> {
        let mut at = self.root.clone();
        let parts: Vec<_> = top.components().collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push(part);
            match fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => self.link(&at)?,
                Ok(_) => {}
                Err(_) => return Ok(false),
            }
        }
        Ok(true)
    }

    fn dir(&mut self, dir: &Path, depth: usize) -> Result<(), TreeRefusal> {
        if depth > MAX_DEPTH {
            return Err(self.refuse(dir, &format!("nests deeper than {MAX_DEPTH} levels: refused")));
        }
        let entries = fs::read_dir(dir).map_err(|e| self.refuse(dir, &format!("cannot list: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| self.refuse(dir, &format!("cannot list: {e}")))?;
            self.seen += 1;
            if self.seen > MAX_ENTRIES {
                return Err(self.refuse(dir, &format!("the tree holds more than {MAX_ENTRIES} entries: refused")));
            }
            let path = entry.path();
            let meta = fs::symlink_metadata(&path).map_err(|e| self.refuse(&path, &format!("cannot stat: {e}")))?;
            self.entry(&path, meta.file_type(), meta.len(), depth)?;
        }
        Ok(())
    }

    fn entry(&mut self, path: &Path, kind: FileType, len: u64, depth: usize) -> Result<(), TreeRefusal> {
        if kind.is_dir() {
            let skipped = path.file_name().is_some_and(|n| HWLOC_SKIPS.iter().any(|s| n == *s));
            return if skipped { Ok(()) } else { self.dir(path, depth + 1) };
        }
        if kind.is_symlink() {
            return self.link(path);
        }
        self.plain(path, kind, len, "")
    }

    /// A regular file within the read limit, or a directory a link leads to; `via` says
    /// when what is judged is a link's target.
    fn plain(&self, path: &Path, kind: FileType, len: u64, via: &str) -> Result<(), TreeRefusal> {
        if kind.is_dir() || (kind.is_file() && len <= MAX_FILE_BYTES) {
            return Ok(());
        }
        if kind.is_file() {
            let limit = MAX_FILE_BYTES >> 20;
            return Err(self.refuse(path, &format!("{via}{len} bytes, larger than {limit} MiB: refused")));
        }
        Err(self.refuse(path, &format!("{via}a {}, not a regular file: refused", special(kind))))
    }

    /// A link must resolve inside the tree as the kernel resolves it for hwloc (an absolute
    /// target from the host's `/`, `..` past the tree's root); one that resolves to nothing
    /// reads as absent to hwloc too.
    fn link(&self, path: &Path) -> Result<(), TreeRefusal> {
        match fs::canonicalize(path) {
            Ok(real) if real.starts_with(&self.root) => match fs::metadata(&real) {
                Ok(meta) => self.plain(
                    path,
                    meta.file_type(),
                    meta.len(),
                    &format!("a link to {}: ", shown(&real, &self.root)),
                ),
                Err(_) => Ok(()),
            },
            Ok(real) => {
                let target = fs::read_link(path).map_or_else(|_| "?".into(), |t| t.display().to_string());
                Err(self.refuse(
                    path,
                    &format!(
                        "a link to {target} leads out of the tree (to {}): refused",
                        real.display()
                    ),
                ))
            }
            Err(_) => Ok(()),
        }
    }

    fn refuse(&self, path: &Path, reason: &str) -> TreeRefusal {
        refusal(path.strip_prefix(&self.root).unwrap_or(path), reason)
    }
}

fn shown(real: &Path, root: &Path) -> String {
    real.strip_prefix(root)
        .map_or_else(|_| real.display().to_string(), |r| r.display().to_string())
}

fn refusal(rel: &Path, reason: &str) -> TreeRefusal {
    let shown = rel.display().to_string();
    TreeRefusal {
        path: if shown.is_empty() { ".".into() } else { shown },
        reason: reason.to_string(),
    }
}

fn special(kind: FileType) -> &'static str {
    if kind.is_fifo() {
        "FIFO"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sys/devices/pci0000:00/0000:00:01.0")).unwrap();
        fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
        fs::create_dir_all(dir.path().join("sys/class")).unwrap();
        fs::write(
            dir.path().join("sys/devices/pci0000:00/0000:00:01.0/class"),
            "0x030200\n",
        )
        .unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            dir.path().join("sys/bus/pci/devices/0000:00:01.0"),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_sysfs_shaped_tree_with_relative_links_passes() {
        let dir = tree();
        assert_eq!(check(dir.path()), Ok(()));
        // A dangling link reads as absent to hwloc too.
        symlink("../nowhere", dir.path().join("sys/devices/dangling")).unwrap();
        assert_eq!(check(dir.path()), Ok(()));
    }

    #[test]
    fn links_out_of_the_tree_are_refused_with_their_path() {
        for target in ["/etc/hostname", "../../../../../../../../../../../etc/hostname"] {
            let dir = tree();
            symlink(target, dir.path().join("sys/devices/pci0000:00/0000:00:01.0/vendor")).unwrap();
            let e = check(dir.path()).unwrap_err();
            assert_eq!(e.path, "sys/devices/pci0000:00/0000:00:01.0/vendor", "{target}");
            assert!(e.reason.contains("leads out of the tree"), "{e}");
        }
    }

    #[test]
    fn a_link_into_the_tree_through_its_own_root_passes() {
        let dir = tree();
        let back = format!(
            "../../{}/sys/devices",
            dir.path().file_name().unwrap().to_str().unwrap()
        );
        symlink(back, dir.path().join("sys/class/devs")).unwrap();
        assert_eq!(check(dir.path()), Ok(()));
    }

    #[test]
    fn special_files_and_large_files_are_refused() {
        let dir = tree();
        let fifo = dir.path().join("sys/class/fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(
            check(dir.path()).unwrap_err().to_string(),
            "sys/class/fifo: a FIFO, not a regular file: refused"
        );
        fs::remove_file(&fifo).unwrap();
        let big = fs::File::create(dir.path().join("sys/devices/big")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(check(dir.path())
            .unwrap_err()
            .to_string()
            .starts_with("sys/devices/big: 16777217 bytes, larger than 16 MiB"));
    }

    #[test]
    fn the_root_itself_may_be_a_link() {
        let dir = tree();
        let outer = tempfile::tempdir().unwrap();
        symlink(dir.path(), outer.path().join("node")).unwrap();
        assert_eq!(check(&outer.path().join("node")), Ok(()));
    }

    #[test]
    fn what_hwloc_does_not_read_is_left_to_the_guarded_reader() {
        let dir = tree();
        fs::create_dir_all(dir.path().join("etc")).unwrap();
        symlink("/etc/hostname", dir.path().join("etc/nccl.conf")).unwrap();
        assert_eq!(check(dir.path()), Ok(()));
        symlink("/proc", dir.path().join("proc")).unwrap();
        assert!(check(dir.path())
            .unwrap_err()
            .to_string()
            .starts_with("proc: a link to /proc leads out"));
    }

    #[test]
    fn what_hwloc_never_opens_is_not_walked_but_links_to_specials_are_refused() {
        let dir = tree();
        let mkfifo = |p: &Path| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap();
        };
        // IB port counters, /proc/irq, /sys/module: doctor's and irq-pin's, read through FsRoot.
        for p in [
            "sys/class/infiniband/mlx5_0/ports/1/counters/link_downed",
            "proc/irq/40/smp_affinity_list",
            "sys/module/nvidia_peermem/version",
        ] {
            mkfifo(&dir.path().join(p));
        }
        assert_eq!(check(dir.path()), Ok(()));
        // A link inside what hwloc reads, to a FIFO elsewhere in the tree: hwloc would wait on it.
        symlink(
            "../../../../proc/irq/40/smp_affinity_list",
            dir.path().join("sys/class/infiniband/mlx5_0/node_guid"),
        )
        .unwrap();
        let e = check(dir.path()).unwrap_err();
        assert_eq!(e.path, "sys/class/infiniband/mlx5_0/node_guid");
        assert_eq!(
            e.reason,
            "a link to proc/irq/40/smp_affinity_list: a FIFO, not a regular file: refused"
        );
        // /proc/cmdline is hwloc's (numa=fake=, topology-linux.c:5361).
        let dir = tree();
        mkfifo(&dir.path().join("proc/cmdline"));
        assert_eq!(check(dir.path()).unwrap_err().path, "proc/cmdline");
    }

    #[test]
    fn depth_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let deep: PathBuf = ["sys", "devices"]
            .into_iter()
            .chain((0..=MAX_DEPTH + 1).map(|_| "d"))
            .collect();
        fs::create_dir_all(dir.path().join(&deep)).unwrap();
        assert!(check(dir.path()).unwrap_err().reason.contains("deeper than 64"));
    }
}
