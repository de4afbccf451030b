//! The configuration files doctor reads, read without trusting them: a file that exists but
//! cannot be read is named, not passed over; and every `NCCL_*` line of the files NCCL or a
//! job's environment reads, with its file and line.

use crate::model::files::{DROPIN_DIR, ENV_FILE, NCCL_CONF};
use crate::probe::fsroot::FsRoot;

/// A configuration file's text: `None` when absent; one that exists but cannot be read (a
/// FIFO, a directory, over 16 MiB, a link out of the tree) is named in `unreadable` with why,
/// so that the check says what it could not see instead of passing on it.
pub(super) fn read_config(fs: &FsRoot, path: &str, unreadable: &mut Vec<String>) -> Option<String> {
    match fs.read_required(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            unreadable.push(format!("{path}: {e}"));
            None
        }
    }
}

/// One `NAME=VALUE` line of a file that sets NCCL's variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub(super) file: String,
    pub(super) line: usize,
    pub(super) name: String,
    pub(super) value: String,
}

/// Most lines read per file (a config file is a few dozen).
const MAX_LINES: usize = 10_000;

/// Every `NCCL_*` line of the files NCCL or a job's environment reads, in file order, and
/// the files that exist but could not be read.
pub(super) fn nccl_settings(fs: &FsRoot) -> (Vec<Found>, Vec<String>) {
    let mut files = vec![NCCL_CONF.to_string()];
    files.extend(
        fs.list(DROPIN_DIR)
            .into_iter()
            .filter(|n| n.ends_with(".conf") && !n.starts_with('.'))
            .map(|n| format!("{DROPIN_DIR}/{n}")),
    );
    files.push(ENV_FILE.to_string());
    files.push("/etc/environment".to_string());
    let mut unreadable = Vec::new();
    let found = files
        .iter()
        .flat_map(|f| settings_of(f, &read_config(fs, f, &mut unreadable).unwrap_or_default()))
        .collect();
    (found, unreadable)
}

/// The `NCCL_*` settings of one file's text (`# comments`, `export NAME=…`, quoted values).
pub(super) fn settings_of(file: &str, text: &str) -> Vec<Found> {
    text.lines()
        .take(MAX_LINES)
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.trim();
            let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
            if l.starts_with('#') {
                return None;
            }
            let (name, value) = l.split_once('=')?;
            let name = name.trim();
            if !name.starts_with("NCCL_") || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            let value = value.trim().trim_matches('"').trim_matches('\'').to_string();
            Some(Found {
                file: file.to_string(),
                line: i + 1,
                name: name.to_string(),
                value,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_as_files_write_them() {
        let text = "# a comment\nNCCL_IB_HCA==mlx5_0\nexport NCCL_P2P_DISABLE=1\nNCCL_ALGO=\"Ring\"\nPATH=/usr/bin\n  NCCL_PROTO = 'LL'\nnot a line\n";
        let s = settings_of("/etc/environment", text);
        let shown: Vec<(usize, &str, &str)> = s.iter().map(|f| (f.line, f.name.as_str(), f.value.as_str())).collect();
        assert_eq!(
            shown,
            [
                (2, "NCCL_IB_HCA", "=mlx5_0"),
                (3, "NCCL_P2P_DISABLE", "1"),
                (4, "NCCL_ALGO", "Ring"),
                (6, "NCCL_PROTO", "LL")
            ]
        );
    }
}
