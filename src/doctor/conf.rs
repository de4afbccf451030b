//! The configuration files doctor reads, read without trusting them: a file that exists but
//! cannot be read is named, not passed over; and every `NCCL_*` line of the files NCCL or a
//! job's environment reads, with its file and line, read by the rules of whoever reads the
//! file (NCCL's own for `/etc/nccl.conf`), and the lines that read otherwise than they look.

use crate::model::files::{DROPIN_DIR, ENV_FILE, NCCL_CONF};
use crate::nccl::conf as nccl_conf;
use crate::nccl::reads::{self, Reading};
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

/// Who reads a file, and so by whose rules its lines mean what they mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// NCCL's `setEnvFile` ([`crate::nccl::conf::read_lines`]): `/etc/nccl.conf`, and the
    /// drop-ins topo-tune assembles into it line for line.
    Nccl,
    /// `docker run --env-file` (docker/cli `opts/parse.go`, `parseKeyValueFile`) and
    /// Kubernetes' `--from-env-file`: leading whitespace and `#` lines skipped, split at the
    /// first `=`, a name with whitespace refuses the whole file, the value verbatim (quotes,
    /// trailing spaces and all).
    EnvFile,
    /// `/etc/environment` and files like it: shell-like (`export`, quotes, trimming).
    Shell,
}

impl Dialect {
    fn of(file: &str) -> Dialect {
        match file {
            NCCL_CONF => Dialect::Nccl,
            ENV_FILE => Dialect::EnvFile,
            _ if file.starts_with(DROPIN_DIR) => Dialect::Nccl,
            _ => Dialect::Shell,
        }
    }

    fn reader(self) -> &'static str {
        match self {
            Dialect::Nccl => "NCCL",
            Dialect::EnvFile => "docker --env-file",
            Dialect::Shell => "the shell",
        }
    }
}

/// One variable a file gives NCCL: its name and value exactly as the file's reader passes
/// them on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(super) file: String,
    pub(super) line: usize,
    pub(super) name: String,
    pub(super) value: String,
}

impl Found {
    /// What NCCL acts on ([`crate::nccl::reads`]).
    pub(crate) fn reading(&self) -> Reading {
        reads::reading(&self.name, &self.value)
    }
}

/// A line that looks like an `NCCL_*` setting but that its reader takes otherwise: another
/// name, another value, or nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misread {
    pub(super) file: String,
    pub(super) line: usize,
    /// The line as written, control bytes escaped.
    pub(super) text: String,
    /// What its reader does with it.
    pub(super) reads_as: String,
}

/// What NCCL's config and environment files give NCCL, read once for every check.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfFiles {
    /// Every `NCCL_*` variable, in file order.
    pub(super) found: Vec<Found>,
    pub(super) misread: Vec<Misread>,
    /// Files that exist but could not be read, with why.
    pub(super) unreadable: Vec<String>,
}

impl ConfFiles {
    /// The first setting of `name` (NCCL's `setenv(…, 0)`: the first one wins).
    pub(super) fn first(&self, name: &str) -> Option<&Found> {
        self.found.iter().find(|s| s.name == name)
    }
}

/// Most lines read per file (a config file is a few dozen).
const MAX_LINES: usize = 10_000;

/// Every `NCCL_*` line of the files NCCL or a job's environment reads, in file order, and
/// the files that exist but could not be read.
pub(super) fn nccl_settings(fs: &FsRoot) -> ConfFiles {
    let mut files = vec![NCCL_CONF.to_string()];
    files.extend(
        fs.list(DROPIN_DIR)
            .into_iter()
            .filter(|n| n.ends_with(".conf") && !n.starts_with('.'))
            .map(|n| format!("{DROPIN_DIR}/{n}")),
    );
    files.push(ENV_FILE.to_string());
    files.push("/etc/environment".to_string());
    let mut out = ConfFiles::default();
    for f in &files {
        let text = read_config(fs, f, &mut out.unreadable).unwrap_or_default();
        let (found, misread) = settings_of(f, &text);
        out.found.extend(found);
        out.misread.extend(misread);
    }
    out
}

/// The `NCCL_*` settings of one file's text as its reader takes them, and the lines that
/// read otherwise than they look.
pub(crate) fn settings_of(file: &str, text: &str) -> (Vec<Found>, Vec<Misread>) {
    let dialect = Dialect::of(file);
    let mut found: Vec<Found> = Vec::new();
    let mut misread = Vec::new();
    let mut first_line: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, raw) in text.split_inclusive('\n').take(MAX_LINES).enumerate() {
        let line = i + 1;
        let mut refused = false;
        let read = match dialect {
            Dialect::Nccl => nccl_conf::read_lines(raw)
                .into_iter()
                .map(|l| (l.name, l.value))
                .collect(),
            Dialect::EnvFile => match env_file_line(raw) {
                Ok(pair) => pair.into_iter().collect(),
                Err(why) => {
                    refused = true;
                    misread.push(misread_at(file, line, raw, why.to_string()));
                    Vec::new()
                }
            },
            Dialect::Shell => shell_line(raw).into_iter().collect(),
        };
        let mut read: Vec<(String, String)> = read.into_iter().filter(|(n, _)| is_nccl_name(n)).collect();
        if dialect == Dialect::Nccl {
            // The first line of each name, by name: a file of 10,000 lines stays linear.
            read.retain(|(n, _)| match first_line.get(n) {
                Some(first) => {
                    let why = format!("NCCL keeps line {first}'s value: the first line that sets a name wins");
                    misread.push(misread_at(file, line, raw, why));
                    refused = true;
                    false
                }
                None => {
                    first_line.insert(n.clone(), line);
                    true
                }
            });
        }
        if dialect != Dialect::Shell && !refused {
            if let Some(why) = looks_otherwise(raw, &read, dialect) {
                misread.push(misread_at(file, line, raw, why));
            }
        }
        found.extend(read.into_iter().map(|(name, value)| Found {
            file: file.to_string(),
            line,
            name,
            value,
        }));
    }
    (found, misread)
}

fn misread_at(file: &str, line: usize, raw: &str, reads_as: String) -> Misread {
    let text = raw.strip_suffix('\n').unwrap_or(raw);
    let text: String = text.chars().take(200).flat_map(char::escape_debug).collect();
    Misread {
        file: file.to_string(),
        line,
        text,
        reads_as,
    }
}

fn is_nccl_name(name: &str) -> bool {
    name.starts_with("NCCL_") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What a person reading the line takes it to set, when its reader takes it otherwise.
fn looks_otherwise(raw: &str, read: &[(String, String)], dialect: Dialect) -> Option<String> {
    let (name, value) = shell_line(raw)?;
    let reader = dialect.reader();
    let Some((_, got)) = read.iter().find(|(n, _)| *n == name) else {
        return Some(format!("{reader} reads no {name} here (the name is everything before the first `=`, exactly as written): the line sets nothing NCCL reads"));
    };
    let (meant, taken) = (reads::reading(&name, &value), reads::reading(&name, got));
    (meant != taken).then(|| {
        format!(
            "NCCL reads this as {name}={taken} (from the value `{}` exactly as written), not {meant}",
            got.escape_debug()
        )
    })
}

/// A line for which docker refuses the whole `--env-file`.
#[derive(Debug, thiserror::Error)]
#[error("docker --env-file refuses the whole file: the name `{0}` contains whitespace")]
struct DockerRefuses(String);

/// `docker --env-file`: `Ok(None)` for a line that sets nothing, `Err` where docker refuses
/// the whole file.
fn env_file_line(raw: &str) -> Result<Option<(String, String)>, DockerRefuses> {
    let line = raw.strip_suffix('\n').unwrap_or(raw);
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let Some((name, value)) = line.split_once('=') else {
        return Ok(None);
    };
    if name.contains(char::is_whitespace) {
        return Err(DockerRefuses(name.escape_debug().to_string()));
    }
    Ok(Some((name.to_string(), value.to_string())))
}

/// A shell-like line: `# comments`, `export NAME=…`, quoted values, spaces trimmed.
fn shell_line(raw: &str) -> Option<(String, String)> {
    let l = raw.trim();
    let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
    if l.starts_with('#') {
        return None;
    }
    let (name, value) = l.split_once('=')?;
    let name = name.trim();
    if !is_nccl_name(name) {
        return None;
    }
    let value = value.trim().trim_matches('"').trim_matches('\'');
    Some((name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(found: &[Found]) -> Vec<(usize, &str, &str)> {
        found
            .iter()
            .map(|f| (f.line, f.name.as_str(), f.value.as_str()))
            .collect()
    }

    #[test]
    fn the_environment_file_is_read_with_shell_rules() {
        let text = "# a comment\nNCCL_IB_HCA==mlx5_0\nexport NCCL_P2P_DISABLE=1\nNCCL_ALGO=\"Ring\"\nPATH=/usr/bin\n  NCCL_PROTO = 'LL'\nnot a line\n";
        let (found, misread) = settings_of("/etc/environment", text);
        assert_eq!(
            shown(&found),
            [
                (2, "NCCL_IB_HCA", "=mlx5_0"),
                (3, "NCCL_P2P_DISABLE", "1"),
                (4, "NCCL_ALGO", "Ring"),
                (6, "NCCL_PROTO", "LL")
            ]
        );
        assert!(misread.is_empty());
    }

    #[test]
    fn nccl_conf_is_read_as_nccl_reads_it() {
        let text = "export NCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE = 1\nNCCL_IB_DISABLE=\"1\"\nNCCL_CHUNK_SIZE=0x100000\nNCCL_NET_GDR_LEVEL=0 # off\nNCCL_CUMEM_ENABLE=0\nNCCL_CUMEM_ENABLE=1\n";
        let (found, misread) = settings_of(NCCL_CONF, text);
        assert_eq!(
            shown(&found),
            [
                (3, "NCCL_IB_DISABLE", "\"1\""),
                (4, "NCCL_CHUNK_SIZE", "0x100000"),
                (5, "NCCL_NET_GDR_LEVEL", "0 # off"),
                (6, "NCCL_CUMEM_ENABLE", "0")
            ]
        );
        let lines: Vec<(usize, &str)> = misread.iter().map(|m| (m.line, m.reads_as.as_str())).collect();
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(
            lines[0].1.starts_with("NCCL reads no NCCL_P2P_DISABLE here"),
            "{lines:?}"
        );
        assert_eq!(lines[1].0, 2);
        assert_eq!(
            lines[2],
            (
                3,
                "NCCL reads this as NCCL_IB_DISABLE=0 (from the value `\\\"1\\\"` exactly as written), not 1"
            )
        );
        // `0 # off` is a level NCCL reads by its first digit (LOC), as it looks: no warning.
        assert_eq!(
            lines[3],
            (7, "NCCL keeps line 6's value: the first line that sets a name wins")
        );
    }

    #[test]
    fn the_env_file_is_read_as_docker_reads_it() {
        let text = "  NCCL_ALGO=Ring\nNCCL_PROTO=\"LL\"\n# NCCL_X=1\nNCCL_BAD KEY=1\n";
        let (found, misread) = settings_of(ENV_FILE, text);
        assert_eq!(shown(&found), [(1, "NCCL_ALGO", "Ring"), (2, "NCCL_PROTO", "\"LL\"")]);
        assert_eq!(misread.len(), 2, "{misread:#?}");
        assert!(
            misread[0].reads_as.contains("NCCL_PROTO=\\\"LL\\\""),
            "{}",
            misread[0].reads_as
        );
        assert!(misread[1]
            .reads_as
            .starts_with("docker --env-file refuses the whole file"));
    }
}
