//! Runs the benchmark command of cluster.yaml once, for one variant: placeholders filled
//! (each value shell-quoted), `NCCL_CONF_FILE` set, output and the `-J` file collected, the
//! whole process group killed at the timeout. Runs where the template says: here (the
//! controller) or on the wave's first node (as the node call `bench`). Judging the output is
//! `bench::parse`'s job, on the controller.
//!
//! Nothing of a benchmark outlives its run: its process group is killed when its leader
//! exits (background children included), and a watcher inside the group holds a pipe from
//! topo-tune — when topo-tune dies, even by `kill -9`, the kernel closes the pipe and the
//! watcher kills the group. Its output is read through a pipe into a ring of the last
//! 16 MiB (no log file to fill a disk, no gigabyte read whole); its `-J` file through the
//! same regular-file, non-blocking, bounded reader as every other input.

use crate::apply::tune_stage::{staged_files, StagedRef};
use crate::bench::parse::{parse_json, parse_text, BenchError, BenchRun, OUTPUT_LIMIT};
use crate::model::files::{NCCL_CONF, STAGE_BASELINE_ENV, STAGE_CONF, STAGE_ENV};
use crate::model::BadAnswer;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Variant {
    /// The live files (`/etc/nccl.conf`).
    Baseline,
    /// The staged candidate (`/etc/nccl/topo-tune/candidate/nccl.conf`).
    Candidate,
}

impl Variant {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Candidate => "candidate",
        }
    }
}

/// One benchmark run to make.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BenchRequest {
    pub(crate) template: String,
    pub(crate) variant: Variant,
    pub(crate) hosts: Vec<String>,
    pub(crate) gpus_per_node: u32,
    pub(crate) timeout_s: u64,
    /// `diagnose`'s per-rail runs: the GPU/NIC index the `{rail}` placeholder names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rail: Option<u32>,
    /// Set as `TOPO_TUNE_BENCH_ID` in the benchmark's environment: what finds its processes
    /// again (a resumed rollout ends a run its killed predecessor left, [`end_marked`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) marker: String,
    /// `tune`'s candidate: the run files `tune` staged on every node of the run (its config
    /// file with the plugin and rules file, `apply::tune_stage`). They reach the ranks only
    /// through that config file (`{nccl_conf}`, `NCCL_CONF_FILE`), the same path on every
    /// node, never through topo-tune's own environment: a choice that reached some ranks and
    /// not others would hang the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) staged: Option<StagedRef>,
}

impl BenchRequest {
    /// What a node checks before it runs a request: a staged reference names a run directory.
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        match &self.staged {
            Some(r) if staged_files(Path::new("/"), r).is_none() => Err(BadAnswer(format!(
                "staged run files {:?}/{:?} name no run directory",
                r.run.escape_default().to_string(),
                r.id.escape_default().to_string()
            ))),
            _ => Ok(()),
        }
    }
}

/// What the run did: the raw material for [`judge`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BenchAnswer {
    /// The command as run (placeholders filled).
    pub(crate) command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) seconds: f64,
    /// stdout and stderr together (the last 16 MiB).
    pub(crate) output: String,
    /// The `-J` file, when the run wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) json: Option<String>,
    /// Why the `-J` path could not be read (a FIFO, a directory, too large…): a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) json_error: Option<String>,
}

/// The longest a run may report to have taken (a week): beyond it, a figure is made up.
const MAX_SECONDS: f64 = 7.0 * 86_400.0;

impl BenchAnswer {
    /// A node's answer: bounded text, a run time that is a duration.
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        let big = |s: &str| s.len() > OUTPUT_LIMIT;
        if big(&self.output) || self.json.as_deref().is_some_and(big) || self.command.len() > 1 << 16 {
            return Err(BadAnswer(format!(
                "a benchmark answer larger than {OUTPUT_LIMIT} bytes"
            )));
        }
        if !(self.seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&self.seconds)) {
            return Err(BadAnswer(format!(
                "seconds {} is not the duration of a run",
                self.seconds
            )));
        }
        if self
            .json_error
            .as_deref()
            .is_some_and(|e| e.len() > 4096 || e.chars().any(char::is_control))
        {
            return Err(BadAnswer("json_error is not plain text".into()));
        }
        Ok(())
    }
}

/// Set when SIGINT/SIGTERM ends a run on the nodes: a benchmark in flight under this token
/// is killed (its whole process group) instead of being waited for. One per fan-out, carried
/// in the resolved reach; cancelled once, it stays so.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    pub(crate) fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A token says nothing about what a node environment describes.
impl PartialEq for Cancel {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Single-quote a value for `sh`.
fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', r"'\''"))
}

fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The variant's config file and env file under `root`.
fn variant_files(variant: Variant, root: &Path) -> (PathBuf, PathBuf) {
    let (conf, env) = match variant {
        Variant::Baseline => (NCCL_CONF, STAGE_BASELINE_ENV),
        Variant::Candidate => (STAGE_CONF, STAGE_ENV),
    };
    (under(root, conf), under(root, env))
}

/// The files a run reads its NCCL settings from: the variant's, or — for `tune`'s candidate —
/// its staged config and env file.
fn settings_files(req: &BenchRequest, root: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    match &req.staged {
        None => Ok(variant_files(req.variant, root)),
        Some(r) => {
            let (conf, env) = staged_files(root, r)
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "staged run files name no run"))?;
            if !conf.is_file() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} was not staged on this node", conf.display()),
                ));
            }
            Ok((conf, env))
        }
    }
}

/// The template with every placeholder filled for this run; `files`: its config and env
/// file.
pub(crate) fn expand(req: &BenchRequest, files: (&Path, &Path), json: &Path, hostfile: &Path) -> String {
    let (conf, env) = files;
    let g = req.gpus_per_node;
    let value = |name: &str| -> String {
        match name {
            "hosts" => req.hosts.join(","),
            "hosts_slots" => req
                .hosts
                .iter()
                .map(|h| format!("{h}:{g}"))
                .collect::<Vec<_>>()
                .join(","),
            "hostfile" => hostfile.display().to_string(),
            "nodes" => req.hosts.len().to_string(),
            "ranks" => (req.hosts.len() as u64 * u64::from(g)).to_string(),
            "gpus_per_node" => g.to_string(),
            "nccl_conf" => conf.display().to_string(),
            "env_file" => env.display().to_string(),
            "json" => json.display().to_string(),
            "rail" => req.rail.unwrap_or(0).to_string(),
            // `tune` fills it before a run; every other run is an all-reduce.
            "collective" => "all_reduce".to_string(),
            _ => req.variant.name().to_string(),
        }
    };
    let mut out = String::new();
    let mut rest = req.template.as_str();
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(end) = after.find('}') else { break };
        out.push_str(&quote(&value(&after[..end])));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The shell around the command: a watcher in the benchmark's process group blocks on the
/// pipe topo-tune holds (passed as stdin, then moved to fd 3 and out of the command's way);
/// when that pipe closes — topo-tune exited or was killed — it kills the whole group.
fn guarded(command: &str) -> String {
    format!("exec 3<&0 </dev/null; (read -r x <&3; kill -KILL 0) >/dev/null 2>&1 & exec 3<&-; {command}")
}

/// Run the benchmark under `root` (the node's `/`, or its `--output-dir` tree), ended early
/// when `cancel` is.
pub(crate) fn run(req: &BenchRequest, root: &Path, cancel: &Cancel) -> std::io::Result<BenchAnswer> {
    let dir = tempfile::Builder::new().prefix("topo-tune-bench-").tempdir()?;
    let json = dir.path().join("nccl-tests.json");
    let hostfile = dir.path().join("hostfile");
    let lines: String = req
        .hosts
        .iter()
        .map(|h| format!("{h} slots={}\n", req.gpus_per_node))
        .collect();
    std::fs::write(&hostfile, lines)?;
    let (conf, env) = settings_files(req, root)?;
    let command = expand(req, (&conf, &env), &json, &hostfile);
    let (out_read, out_write) = std::io::pipe()?;
    let (guard_read, guard_write) = std::io::pipe()?;
    let started = Instant::now();
    let mut child = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(guarded(&command))
            .env("NCCL_CONF_FILE", &conf)
            .env("TOPO_TUNE_BENCH_VARIANT", req.variant.name())
            .env("TOPO_TUNE_BENCH_ID", &req.marker)
            .stdin(guard_read)
            .stdout(out_write.try_clone()?)
            .stderr(out_write)
            .process_group(0)
            .spawn()?
    };
    let output = Tail::start(out_read);
    let group = rustix::process::Pid::from_raw(child.id() as i32);
    let limit = Duration::from_secs(req.timeout_s);
    // Polled, not waited on (the timeout and the cancellation are checked between polls):
    // from 1 ms, doubling to 20 ms, so that a short run is not kept waiting 10 ms on average.
    let mut poll = Duration::from_millis(1);
    let (status, timed_out) = loop {
        if let Some(s) = child.try_wait()? {
            break (Some(s), false);
        }
        let stopped = cancel.is_cancelled();
        if stopped || started.elapsed() >= limit {
            if let Some(g) = group {
                let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
            break (None, !stopped);
        }
        std::thread::sleep(poll);
        poll = (poll * 2).min(Duration::from_millis(20));
    };
    // The leader is gone: what it left in the background goes with it (the watcher too).
    if let Some(g) = group {
        let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
    }
    drop(guard_write);
    let (json, json_error) = match crate::input::read_bytes(&json, OUTPUT_LIMIT as u64, "-J file") {
        Ok(bytes) => (Some(String::from_utf8_lossy(&bytes).into_owned()), None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(BenchAnswer {
        command,
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        seconds: started.elapsed().as_secs_f64(),
        output: output.finish(Duration::from_secs(2)),
        json,
        json_error,
    })
}

/// The last [`OUTPUT_LIMIT`] bytes of a pipe, read by a thread as they come.
struct Tail {
    buf: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Tail {
    fn start(mut pipe: std::io::PipeReader) -> Tail {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (tx, done) = std::sync::mpsc::channel();
        let shared = std::sync::Arc::clone(&buf);
        std::thread::spawn(move || {
            let mut chunk = vec![0u8; 1 << 16];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let Ok(mut b) = shared.lock() else { break };
                b.extend(&chunk[..n]);
                let excess = b.len().saturating_sub(OUTPUT_LIMIT);
                b.drain(..excess);
            }
            let _ = tx.send(());
        });
        Tail { buf, done }
    }

    /// What was read, once the pipe closed or `wait` passed (a process that left the group
    /// may hold the pipe open: it is not waited for).
    fn finish(self, wait: Duration) -> String {
        let _ = self.done.recv_timeout(wait);
        let bytes: Vec<u8> = self.buf.lock().map(|b| b.iter().copied().collect()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// End every benchmark still running with this marker prefix (its process groups), as a
/// killed rollout's resume does; how many processes were found. Only processes whose
/// environment carries `TOPO_TUNE_BENCH_ID` with that prefix are touched.
pub(crate) fn end_marked(prefix: &str) -> usize {
    if prefix.is_empty() {
        return 0;
    }
    let mut groups = std::collections::BTreeSet::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let marked = env.split(|b| *b == 0).any(|kv| {
            kv.strip_prefix(b"TOPO_TUNE_BENCH_ID=")
                .is_some_and(|v| v.starts_with(prefix.as_bytes()))
        });
        if marked {
            if let Some(p) = rustix::process::Pid::from_raw(pid) {
                if let Ok(g) = rustix::process::getpgid(Some(p)) {
                    groups.insert(g.as_raw_nonzero().get());
                }
            }
        }
    }
    for g in &groups {
        if let Some(g) = rustix::process::Pid::from_raw(*g) {
            let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
        }
    }
    groups.len()
}

/// The line that says why a run failed: the first one that is neither nccl-tests' `#`
/// commentary, a table row, nor a launcher's rule of dashes (nccl-tests prints its reason
/// before mpirun's epilogue), else the last non-empty line; 200 printable characters.
fn complaint(output: &str) -> String {
    let plain = |l: &&str| {
        let t = l.trim();
        !t.is_empty()
            && !t.starts_with('#')
            && !t.chars().all(|c| c == '-')
            && t.split_whitespace().next().is_none_or(|w| w.parse::<u64>().is_err())
    };
    let line = output
        .lines()
        .find(plain)
        .or_else(|| output.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("");
    line.trim().chars().filter(|c| !c.is_control()).take(200).collect()
}

/// Why a run gives no figures (it timed out, exited non-zero, printed wrong values, …): a
/// failed run is never a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FailedRun(pub(crate) String);

impl FailedRun {
    /// nccl-tests counted wrong results (`#wrong`, `nwrong`): the run computed garbage, which
    /// disqualifies what it ran with (`bench::parse::BenchError::Wrong` says "wrong values").
    pub(crate) fn wrong_values(&self) -> bool {
        self.0.contains(" wrong values at ")
    }
}

/// The figures of a run, or why it is a failed run: a timeout, a non-zero exit, wrong or
/// out-of-bounds values, an NCCL `WARN` — never a number.
pub(crate) fn judge(a: &BenchAnswer, timeout_s: u64) -> Result<BenchRun, FailedRun> {
    if a.timed_out {
        return Err(FailedRun(format!("timed out after {timeout_s} s (benchmark.timeout)")));
    }
    if let Some(e) = &a.json_error {
        return Err(FailedRun(format!("-J file: {e}")));
    }
    let last = || complaint(&a.output);
    match a.exit_code {
        Some(0) => {}
        Some(c) => return Err(FailedRun(format!("exited with {c}: {}", last()))),
        None => return Err(FailedRun(format!("killed by a signal: {}", last()))),
    }
    let text = match parse_text(&a.output) {
        Ok(run) => Some(run),
        Err(BenchError::NoRows) => None,
        Err(e) => return Err(FailedRun(format!("output {e}"))),
    };
    let json = a
        .json
        .as_deref()
        .map(parse_json)
        .transpose()
        .map_err(|e| FailedRun(format!("-J file: {e}")))?;
    match (json, text) {
        (Some(mut j), t) => {
            if let Some(t) = t {
                j.ranks = j.ranks.max(t.ranks);
                j.nccl_tests_version = t.nccl_tests_version;
            }
            Ok(j)
        }
        (None, Some(t)) => Ok(t),
        (None, None) => Err(FailedRun(format!(
            "no results: neither a table nor a -J file ({})",
            last()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_quoted() {
        let req = BenchRequest {
            template: "launch -np {ranks} -H {hosts_slots} --conf {nccl_conf} -J {json} {variant}".into(),
            variant: Variant::Candidate,
            hosts: vec!["gpu1".into(), "gpu'2".into()],
            gpus_per_node: 8,
            timeout_s: 5,
            rail: None,
            marker: String::new(),
            staged: None,
        };
        let (conf, env) = variant_files(req.variant, Path::new("/"));
        let cmd = expand(&req, (&conf, &env), Path::new("/tmp/x.json"), Path::new("/tmp/h"));
        assert_eq!(
            cmd,
            r"launch -np '16' -H 'gpu1:8,gpu'\''2:8' --conf '/etc/nccl/topo-tune/candidate/nccl.conf' -J '/tmp/x.json' 'candidate'"
        );
    }

    #[test]
    fn a_timeout_kills_the_group_and_is_a_failure() {
        let req = BenchRequest {
            template: "sleep 30 & sleep 30; echo {json}".into(),
            variant: Variant::Baseline,
            hosts: vec!["h".into()],
            gpus_per_node: 1,
            timeout_s: 1,
            rail: None,
            marker: String::new(),
            staged: None,
        };
        let started = Instant::now();
        let a = run(&req, Path::new("/"), &Cancel::default()).unwrap();
        assert!(a.timed_out && started.elapsed() < Duration::from_secs(10));
        assert!(judge(&a, 1).unwrap_err().0.contains("timed out"));
    }

    #[test]
    fn a_run_time_is_a_duration() {
        for bad in [-1e308, f64::NAN, f64::INFINITY, 1e9] {
            let a = BenchAnswer {
                seconds: bad,
                ..BenchAnswer::default()
            };
            assert!(a.check().is_err(), "{bad}");
        }
        assert!(BenchAnswer::default().check().is_ok());
    }

    #[test]
    fn a_marked_benchmark_a_killed_run_left_is_ended() {
        use std::os::unix::process::CommandExt;
        let marker = format!("test-{}-{}", std::process::id(), line!());
        let mut left = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 300 & sleep 300"])
            .env("TOPO_TUNE_BENCH_ID", format!("{marker}:round-1:baseline"))
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(end_marked("test-nobody-0"), 0, "unmarked processes are not touched");
        assert_eq!(end_marked(&marker), 1, "one process group");
        let status = left.wait().unwrap();
        assert!(!status.success(), "killed");
        assert_eq!(end_marked(""), 0);
    }

    #[test]
    fn the_last_16_mib_of_output_are_kept_and_the_rest_is_not_held() {
        let req = BenchRequest {
            template: "head -c 50000000 /dev/zero | tr '\\0' x; echo; echo the end # {json}".into(),
            variant: Variant::Baseline,
            hosts: vec!["h".into()],
            gpus_per_node: 1,
            timeout_s: 60,
            rail: None,
            marker: String::new(),
            staged: None,
        };
        let a = run(&req, Path::new("/"), &Cancel::default()).unwrap();
        assert_eq!(a.output.len(), OUTPUT_LIMIT);
        assert!(a.output.ends_with("x\nthe end\n"), "the tail is kept");
    }

    #[test]
    fn a_failing_exit_is_a_failure_with_its_last_line() {
        let req = BenchRequest {
            template: "echo 'boom: no GPU'; exit 3 # {json}".into(),
            variant: Variant::Baseline,
            hosts: vec!["h".into()],
            gpus_per_node: 1,
            timeout_s: 10,
            rail: None,
            marker: String::new(),
            staged: None,
        };
        let a = run(&req, Path::new("/"), &Cancel::default()).unwrap();
        assert_eq!(judge(&a, 10).unwrap_err().0, "exited with 3: boom: no GPU");
    }

    #[test]
    fn a_real_launch_failure_is_named_by_nccl_tests_reason_not_mpiruns_epilogue() {
        // mpirun -np 2 on the one-GPU H200: nccl-tests refuses, mpirun adds its epilogue.
        let output = include_str!("../tests/data/nccl-tests/mpirun-np2-split-div1-one-gpu.txt");
        let a = BenchAnswer {
            command: "mpirun -np 2 all_reduce_perf".into(),
            exit_code: Some(5),
            output: output.into(),
            ..BenchAnswer::default()
        };
        assert_eq!(
            judge(&a, 10).unwrap_err().0,
            "exited with 5: Invalid number of GPUs: 2 requested but only 1 were found."
        );
    }

    #[test]
    fn real_sendrecv_output_is_read_like_all_reduce() {
        // sendrecv_perf 2.19.6 on the H200 (one rank sends to itself): busbw = algbw.
        let a = BenchAnswer {
            command: "sendrecv_perf".into(),
            exit_code: Some(0),
            output: include_str!("../tests/data/nccl-tests/sendrecv_perf-b8-e256M-f4-g1-I1.txt").into(),
            json: Some(include_str!("../tests/data/nccl-tests/sendrecv_perf-b8-e256M-f4-g1-I1.json").into()),
            ..BenchAnswer::default()
        };
        let run = judge(&a, 10).unwrap();
        let text = crate::bench::parse::parse_text(&a.output).unwrap();
        assert_eq!(run.rows.len(), 13, "8 B .. 128 MiB, ×4");
        assert_eq!(run.rows.len(), text.rows.len());
        let last = run.rows.last().unwrap();
        assert_eq!(last.size, 128 << 20);
        assert!((last.busbw - 1599.6).abs() < 0.1, "{last:?}");
        assert!(
            (last.busbw - text.rows[12].busbw).abs() < 0.1,
            "the -J file and the table agree"
        );
        assert_eq!(run.nccl_tests_version.as_deref(), Some("2.19.6"));
    }
}
