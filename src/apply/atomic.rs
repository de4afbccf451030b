//! Atomic file replacement: temp file in the same directory, fsync, rename, fsync the
//! directory — and only when the content differs, so a second identical run changes nothing.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Write `content` to `path` unless it already holds exactly that. Returns whether the file
/// changed. The old file is intact until the rename; a crash leaves at most a `.tmp` file.
pub fn write_if_changed(path: &Path, content: &[u8], mode: u32) -> std::io::Result<bool> {
    if let Ok(existing) = fs::read(path) {
        if existing == content {
            return Ok(false);
        }
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.topo-tune.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        drop(f);
        fault_point();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| true)
}

/// Crash-safety tests (built with `--features fault-injection` only): die between the temp
/// write and the rename when `TOPO_TUNE_FAULT_BEFORE_RENAME` is set.
#[cfg(feature = "fault-injection")]
fn fault_point() {
    if std::env::var_os("TOPO_TUNE_FAULT_BEFORE_RENAME").is_some() {
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
fn fault_point() {}

/// Remove temp files a killed earlier run left in `dir` (only ours: `.NAME.topo-tune.PID.tmp`).
pub fn remove_stale_temps(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.contains(".topo-tune.") && name.ends_with(".tmp") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// Remove a file we own, fsyncing the directory; absent is fine.
pub fn remove(path: &Path) -> std::io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                fs::File::open(dir)?.sync_all()?;
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_identical_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/snapshot.json");
        assert!(write_if_changed(&p, b"one", 0o644).unwrap());
        let mtime = fs::metadata(&p).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!write_if_changed(&p, b"one", 0o644).unwrap());
        assert_eq!(fs::metadata(&p).unwrap().modified().unwrap(), mtime);
        assert!(write_if_changed(&p, b"two", 0o644).unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::read_dir(p.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
