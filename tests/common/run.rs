//! One way the tests run the real binary: `tt(["plan"]).json().config(&cfg).out(&dir).run()`
//! — the words of the command, then what most invocations add (`--output json`,
//! `--cluster-config`, `--output-dir`), then the run, whose result still reads as the
//! process's `Output` (`status`, `stdout`, `stderr`) and parses its JSON envelope.

use assert_cmd::Command;
use std::ffi::{OsStr, OsString};
use std::process::Output;

/// Where the binary under test is (for a test that runs it through another program: ssh,
/// a shell, Ansible, Slurm's health check). `TOPO_TUNE_TEST_BINARY` runs the tests against
/// another build — an older release, to show that a test fails there.
pub(crate) fn binary_path() -> std::path::PathBuf {
    match std::env::var_os("TOPO_TUNE_TEST_BINARY") {
        Some(other) => other.into(),
        None => assert_cmd::cargo::cargo_bin("topo-tune"),
    }
}

/// The binary under test, with none of the operator's `TOPO_TUNE_*` settings leaking in.
pub(crate) fn binary() -> Command {
    let mut c = Command::new(binary_path());
    c.env_remove("TOPO_TUNE_OUTPUT")
        .env_remove("TOPO_TUNE_FSROOT")
        .env_remove("TOPO_TUNE_FROM_HWLOC_XML")
        .env_remove("TOPO_TUNE_NVML_FIXTURE");
    c
}

/// `topo-tune WORDS…`, to add to and run.
pub(crate) fn tt<I, S>(words: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut run = Run::new();
    run.words.extend(words.into_iter().map(|w| w.as_ref().to_os_string()));
    run
}

/// An invocation being put together: its words in order, and whether `--output json` goes
/// in front of them.
pub(crate) struct Run {
    cmd: Command,
    words: Vec<OsString>,
    json: bool,
}

impl Run {
    /// `topo-tune` with no words yet.
    pub(crate) fn new() -> Run {
        Run {
            cmd: binary(),
            words: Vec::new(),
            json: false,
        }
    }

    /// `--output json`, given first (a global flag; first, so that it never lands between
    /// another flag and its value).
    pub(crate) fn json(mut self) -> Run {
        self.json = true;
        self
    }

    /// `--cluster-config FILE`.
    pub(crate) fn config(mut self, file: impl AsRef<OsStr>) -> Run {
        self.words.push("--cluster-config".into());
        self.words.push(file.as_ref().to_os_string());
        self
    }

    /// `--output-dir DIR`.
    pub(crate) fn out(mut self, dir: impl AsRef<OsStr>) -> Run {
        self.words.push("--output-dir".into());
        self.words.push(dir.as_ref().to_os_string());
        self
    }

    pub(crate) fn arg(mut self, a: impl AsRef<OsStr>) -> Run {
        self.words.push(a.as_ref().to_os_string());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.words.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Run {
        self.cmd.env(key, value);
        self
    }

    pub(crate) fn env_remove(mut self, key: impl AsRef<OsStr>) -> Run {
        self.cmd.env_remove(key);
        self
    }

    pub(crate) fn current_dir(mut self, dir: impl AsRef<std::path::Path>) -> Run {
        self.cmd.current_dir(dir);
        self
    }

    /// Kill it after `secs` (a test of something that used to hang fails instead of
    /// stalling the suite).
    pub(crate) fn timeout(mut self, secs: u64) -> Run {
        self.cmd.timeout(std::time::Duration::from_secs(secs));
        self
    }

    pub(crate) fn write_stdin(mut self, input: impl Into<Vec<u8>>) -> Run {
        self.cmd.write_stdin(input);
        self
    }

    /// Run it to the end.
    pub(crate) fn run(mut self) -> Ran {
        if self.json {
            self.cmd.args(["--output", "json"]);
        }
        self.cmd.args(&self.words);
        Ran(self.cmd.output().unwrap())
    }
}

/// A finished run: the process's `Output`, and its exit code and JSON at hand.
pub(crate) struct Ran(pub(crate) Output);

impl std::ops::Deref for Ran {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.0
    }
}

impl Ran {
    /// The exit code (`None` when a signal ended it).
    pub(crate) fn code(&self) -> Option<i32> {
        self.0.status.code()
    }

    /// The `--output json` envelope; panics with stdout and stderr when it is not one.
    pub(crate) fn doc(&self) -> serde_json::Value {
        super::json(&self.0)
    }

    pub(crate) fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
}
