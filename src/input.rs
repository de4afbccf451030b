//! Reading what the operator hands topo-tune (cluster.yaml, plan.json, topology files,
//! snapshots, fixtures): regular files only — a FIFO, a device or a directory is refused,
//! never read or waited on — and never more than a stated limit, named in the message.
//! Errors are `std::io::Error`s whose message says what was wrong; callers add the path.

use rustix::fs::{FileType, Mode, OFlags};
use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// cluster.yaml: room for the most nodes it may declare (`hostlist::MAX_HOSTS`, 100,000)
/// written one entry each with a label or two (a 65,536-node file so written is about 6 MB;
/// 4 MiB refused it), and still a bound.
pub(crate) const CONFIG_LIMIT: u64 = 32 << 20;
/// An hwloc export or NCCL topology file (a 1,000-device machine is a few MB).
pub(crate) const TOPOLOGY_LIMIT: u64 = 32 << 20;
/// A plan.json (4,096 nodes are a few MB).
pub(crate) const PLAN_LIMIT: u64 = 256 << 20;
/// Recorded NVML answers.
pub(crate) const FIXTURE_LIMIT: u64 = 4 << 20;

/// `1 MiB`, `64 KiB`, `512 bytes`.
pub(crate) fn show_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Open a regular file for reading; a FIFO, a device, a socket or a directory is refused
/// without being waited on. `what` names it in the message.
pub(crate) fn open_regular(path: &Path, what: &str) -> std::io::Result<std::fs::File> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())
        .map_err(Error::from)?;
    let st = rustix::fs::fstat(&fd).map_err(Error::from)?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::Fifo => Some("a FIFO"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        FileType::Socket => Some("a socket"),
        _ => Some("not a regular file"),
    };
    if let Some(kind) = kind {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{kind}: refused (a {what} must be a regular file)"),
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// Read a regular file of at most `limit` bytes as bytes. `what` names it in the message.
pub(crate) fn read_bytes(path: &Path, limit: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path, what)?;
    let mut buf = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "larger than {}, the most topo-tune reads of a {what}: refused",
                show_size(limit)
            ),
        ));
    }
    Ok(buf)
}

/// [`read_bytes`] as UTF-8 text.
pub(crate) fn read_text(path: &Path, limit: u64, what: &str) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, limit, what)?).map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(&f, "nodes: []\n").unwrap();
        assert_eq!(read_text(&f, 100, "cluster.yaml").unwrap(), "nodes: []\n");
        let e = read_text(&f, 4, "cluster.yaml").unwrap_err();
        assert!(e.to_string().contains("larger than 4 bytes"), "{e}");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_text(&fifo, 100, "cluster.yaml").unwrap_err();
        assert!(e.to_string().contains("a FIFO: refused"), "{e}");
        let e = read_text(Path::new("/dev/zero"), 100, "topology file").unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        assert!(read_text(dir.path(), 100, "x")
            .unwrap_err()
            .to_string()
            .contains("directory"));
        assert_eq!(
            read_text(&dir.path().join("none"), 1, "x").unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(show_size(32 << 20), "32 MiB");
    }
}
