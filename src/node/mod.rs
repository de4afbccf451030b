//! The node protocol. Every command that acts on a node is one typed call: a request in, a
//! [`NodeReport`] with the call's typed answer (or a typed failure) out. On a node it is
//! served by the hidden `topo-tune node KIND` (the request as JSON on stdin, the report on
//! stdout); for local nodes and `--output-dir` the same handler runs in this process; a
//! simulated node answers from paper. The controller side runs calls on many nodes through
//! the one fan-out in `transport::fanout`.

pub(crate) mod calls;
mod watch;

use crate::config::{Inventory, NodeSpec};
use crate::model::{Deploy, Failure, FailureKind, NodeOutcome};
use crate::transport::fanout::{fan_out, Attempt, FanOutOptions, Job, Progress};
use crate::transport::ssh::{self, ControlDir, PendingBinary, SshOptions};
use crate::transport::{transport_name, NodeEnv, Target};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Version of the request/report layout; a node answering another version is refused.
pub(crate) const PROTOCOL: u32 = 1;

/// One kind of node-side work.
pub(crate) trait Call: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    type Answer: Serialize + DeserializeOwned + Send + 'static;
    /// The name on the command line (`topo-tune node KIND`).
    const KIND: &'static str;
    /// Do it here, on the machine and files `env` describes.
    fn here(&self, env: &NodeEnv) -> Result<Self::Answer, Failure>;
    /// The trust boundary: an answer from a node (or from a file read on its behalf) is
    /// checked before anything uses it. By default every answer passes; answers whose
    /// fields reach files or command lines check them.
    fn check_answer(_answer: &Self::Answer) -> Result<(), crate::model::BadAnswer> {
        Ok(())
    }
    /// A simulated node's answer: by default, there is nothing on paper to act on.
    fn on_paper(&self, _node: &NodeSpec) -> Result<Self::Answer, Failure> {
        Err(Failure::new(
            FailureKind::Simulated,
            "a simulated node exists only on paper: nothing to act on (use --output-dir to see its files)",
        ))
    }
}

/// What a node answers: its answer or why there is none, with the protocol it speaks.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct NodeReport<T> {
    pub(crate) protocol: u32,
    pub(crate) tool_version: String,
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub(crate) ok: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Failure>,
}

fn none<T>() -> Option<T> {
    None
}

impl<T> NodeReport<T> {
    fn of(result: Result<T, Failure>) -> Self {
        let (ok, error) = match result {
            Ok(a) => (Some(a), None),
            Err(f) => (None, Some(f)),
        };
        NodeReport {
            protocol: PROTOCOL,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            ok,
            error,
        }
    }

    /// The answer, or the node's failure, or why the report itself is not acceptable.
    fn into_result(self) -> Result<T, Failure> {
        if self.protocol != PROTOCOL {
            return Err(Failure::new(
                FailureKind::BadAnswer,
                format!(
                    "the node runs topo-tune {} (protocol {}); this one speaks protocol {PROTOCOL}: use the same build on both",
                    self.tool_version, self.protocol
                ),
            ));
        }
        match (self.ok, self.error) {
            (Some(a), None) => Ok(a),
            (None, Some(f)) => Err(f.bounded()),
            _ => Err(Failure::new(
                FailureKind::BadAnswer,
                "the node's report has neither an answer nor an error",
            )),
        }
    }
}

/// Why `topo-tune node` could not even produce a report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("reading the request on stdin: {0}")]
    Stdin(std::io::Error),
    #[error("the request on stdin is larger than {} MiB", ssh::MAX_ANSWER_BYTES >> 20)]
    TooLarge,
    #[error(
        "`{0}` is not a node request (probe, survey, write, rollback, irq-pin, doctor, stage, unstage, state, bench)"
    )]
    UnknownKind(String),
    #[error("stdin is not a `{kind}` request: {source}")]
    BadRequest {
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error("cannot serialise the report: {0}")]
    Report(serde_json::Error),
}

impl crate::exit::Classify for ServeError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        match self {
            ServeError::Report(_) => Class::new(exit::FAILURE, "internal"),
            ServeError::Stdin(_) => Class::new(exit::IO_ERROR, "io"),
            ServeError::UnknownKind(_) | ServeError::BadRequest { .. } | ServeError::TooLarge => {
                Class::new(exit::USAGE, "usage")
            }
        }
    }
}

/// The node side of a command: the request read from stdin (bounded), served while a watch
/// on stdout ends the process should the controller go away.
pub(crate) fn serve_stdin(kind: &str, env: &NodeEnv) -> Result<String, ServeError> {
    use std::io::Read;
    let mut input = Vec::new();
    std::io::stdin()
        .take(ssh::MAX_ANSWER_BYTES + 1)
        .read_to_end(&mut input)
        .map_err(ServeError::Stdin)?;
    if input.len() as u64 > ssh::MAX_ANSWER_BYTES {
        return Err(ServeError::TooLarge);
    }
    let watcher = watch::Watcher::start();
    watch::delay_for_tests();
    if env.fsroot.is_some() {
        // hwloc reads a `--fsroot` tree only while the process is one thread.
        watcher.stop();
    }
    serve(kind, &input, env)
}

/// Serve one request on this node: parse it, run it, print the report. Only input that is
/// not a request at all fails the command; everything else is in the report.
pub(crate) fn serve(kind: &str, input: &[u8], env: &NodeEnv) -> Result<String, ServeError> {
    match kind {
        calls::Probe::KIND => serve_one::<calls::Probe>(input, env),
        calls::Survey::KIND => serve_one::<calls::Survey>(input, env),
        calls::Write::KIND => serve_one::<calls::Write>(input, env),
        calls::Rollback::KIND => serve_one::<calls::Rollback>(input, env),
        calls::IrqPin::KIND => serve_one::<calls::IrqPin>(input, env),
        calls::Doctor::KIND => serve_one::<calls::Doctor>(input, env),
        calls::Stage::KIND => serve_one::<calls::Stage>(input, env),
        calls::Unstage::KIND => serve_one::<calls::Unstage>(input, env),
        calls::State::KIND => serve_one::<calls::State>(input, env),
        calls::Bench::KIND => serve_one::<calls::Bench>(input, env),
        calls::TuneStage::KIND => serve_one::<calls::TuneStage>(input, env),
        calls::TuneUnstage::KIND => serve_one::<calls::TuneUnstage>(input, env),
        other => Err(ServeError::UnknownKind(other.to_string())),
    }
}

fn serve_one<C: Call>(input: &[u8], env: &NodeEnv) -> Result<String, ServeError> {
    let call: C = serde_json::from_slice(input).map_err(|source| ServeError::BadRequest { kind: C::KIND, source })?;
    let report = NodeReport::of(call.here(env));
    serde_json::to_string(&report)
        .map(|t| t + "\n")
        .map_err(ServeError::Report)
}

/// How a command reaches its nodes, resolved once from the flags and cluster.yaml.
#[derive(Clone)]
pub(crate) struct Reach {
    pub(crate) fan: FanOutOptions,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// The binary deployed to ssh nodes (default: this one).
    pub(crate) remote_binary: Option<PathBuf>,
    /// Extra delay per simulated node (benchmarks of the fan-out itself).
    pub(crate) simulated_latency: Duration,
    pub(crate) progress: Progress,
    /// Cancelled when SIGINT/SIGTERM ends the run: work in this process (a benchmark) ends.
    pub(crate) cancel: crate::runner::Cancel,
}

/// One node's call and where it runs.
pub(crate) struct NodeJob<C> {
    pub(crate) node: NodeSpec,
    pub(crate) target: Target,
    pub(crate) call: C,
}

/// Everything a node task needs, shared by all of them.
struct Shared {
    ssh: Option<(SshOptions, ControlDir)>,
    simulated_latency: Duration,
    cancel: crate::runner::Cancel,
}

/// Why a run on the nodes gave no answers.
#[derive(Debug)]
pub(crate) enum RunError {
    /// Nothing could start (no runtime, no ssh context).
    Failed(Failure),
    /// SIGINT or SIGTERM arrived: every node task was cancelled, its ssh master shut down
    /// (so remote commands end), and the control directory removed.
    Interrupted(i32),
}

/// Run each job's call where its target says, at most `reach.fan.forks` at once. SIGINT and
/// SIGTERM end the run cleanly instead of killing the process with work in flight.
pub(crate) fn run<C: Call>(
    inv: &Inventory,
    reach: &Reach,
    jobs: Vec<NodeJob<C>>,
) -> Result<Vec<NodeOutcome<C::Answer>>, RunError> {
    let shared = Arc::new(Shared {
        ssh: ssh_context(inv, reach, &jobs).map_err(RunError::Failed)?,
        simulated_latency: reach.simulated_latency,
        cancel: reach.cancel.clone(),
    });
    let jobs: Vec<Job<NodeJob<C>>> = jobs
        .into_iter()
        .map(|j| Job {
            host: j.node.host.clone(),
            transport: transport_name(&j.node),
            item: j,
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            RunError::Failed(Failure::new(
                FailureKind::Internal,
                format!("starting the async runtime: {e}"),
            ))
        })?;
    let progress = Arc::clone(&reach.progress);
    let task_shared = Arc::clone(&shared);
    let result = runtime.block_on(async move {
        let work = fan_out(jobs, reach.fan, progress, move |job| {
            let shared = Arc::clone(&task_shared);
            async move { run_one(job, &shared).await }
        });
        tokio::select! {
            outcomes = work => Ok(outcomes),
            signal = interrupted() => Err(signal),
        }
    });
    if result.is_err() {
        // A benchmark runs in its own process group: end it rather than wait for it.
        reach.cancel.cancel();
    }
    // Tasks still in flight are dropped with the runtime: each drops its ssh session, which
    // shuts that node's master down (ending its remote command) before the control
    // directory goes with `shared`.
    drop(runtime);
    drop(shared);
    result.map_err(RunError::Interrupted)
}

/// The first SIGINT or SIGTERM (the signal number); never, if handlers cannot be set.
async fn interrupted() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => 2,
            _ = term.recv() => 15,
        },
        _ => std::future::pending().await,
    }
}

/// The ssh options and a private control directory, only when some job goes over ssh.
fn ssh_context<C>(
    inv: &Inventory,
    reach: &Reach,
    jobs: &[NodeJob<C>],
) -> Result<Option<(SshOptions, ControlDir)>, Failure> {
    if !jobs.iter().any(|j| matches!(j.target, Target::Ssh)) {
        return Ok(None);
    }
    let path = match &reach.remote_binary {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| {
            Failure::new(
                FailureKind::DeployFailed,
                format!("finding topo-tune's own binary: {e}"),
            )
        })?,
    };
    // A path that is not a file fails the command at once; reading and hashing it overlaps
    // the first connections.
    if let Err(e) = std::fs::metadata(&path).and_then(|m| {
        m.is_file()
            .then_some(())
            .ok_or_else(|| std::io::Error::other("not a regular file"))
    }) {
        return Err(Failure::new(
            FailureKind::DeployFailed,
            format!("reading {}: {e}", path.display()),
        ));
    }
    let binary = PendingBinary::start(path);
    let dir = ControlDir::create().ok_or_else(|| {
        Failure::new(
            FailureKind::SshFailed,
            "could not create a private directory for ssh control sockets in /tmp",
        )
    })?;
    Ok(Some((
        SshOptions {
            settings: inv.ssh.clone(),
            connect_timeout: reach.connect_timeout,
            command_timeout: reach.command_timeout,
            remote_binary: binary,
            startups: Arc::new(tokio::sync::Semaphore::new(inv.ssh.max_startups.max(1))),
        },
        dir,
    )))
}

async fn run_one<C: Call>(job: NodeJob<C>, shared: &Shared) -> Attempt<C::Answer> {
    let host = job.node.host.clone();
    let started = std::time::Instant::now();
    tracing::debug!(host, call = C::KIND, "starting");
    let mut attempt = answer::<C>(job, shared).await;
    if let Ok(a) = &attempt.result {
        if let Err(why) = C::check_answer(a) {
            attempt.result = Err(Failure::new(
                FailureKind::BadAnswer,
                format!("the answer is refused: {why}"),
            ));
        }
    }
    let ms = started.elapsed().as_millis() as u64;
    match &attempt.result {
        Ok(_) => {
            tracing::info!(host, call = C::KIND, ms, attempts = attempt.attempts, deploy = ?attempt.deploy, "answered")
        }
        Err(f) => tracing::info!(host, call = C::KIND, ms, kind = f.kind.name(), "failed: {}", f.message),
    }
    attempt
}

async fn answer<C: Call>(job: NodeJob<C>, shared: &Shared) -> Attempt<C::Answer> {
    match job.target {
        Target::Here(env) => {
            let env = NodeEnv {
                cancel: shared.cancel.clone(),
                ..env
            };
            blocking(move || job.call.here(&env)).await
        }
        Target::Paper => {
            if !shared.simulated_latency.is_zero() {
                tokio::time::sleep(shared.simulated_latency).await;
            }
            blocking(move || job.call.on_paper(&job.node)).await
        }
        Target::Ssh => over_ssh(&job.node, &job.call, shared).await,
        Target::Refused(why) => Attempt::once(Err(Failure::new(FailureKind::InvalidInput, why))),
    }
}

/// Work in this process, off the async threads (it reads files and may take a while).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Failure> + Send + 'static) -> Attempt<T> {
    let result = tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(Failure::new(FailureKind::Internal, e.to_string())));
    Attempt {
        result,
        attempts: 0,
        deploy: Some(Deploy::NotNeeded),
    }
}

async fn over_ssh<C: Call>(node: &NodeSpec, call: &C, shared: &Shared) -> Attempt<C::Answer> {
    let Some((opts, dir)) = &shared.ssh else {
        return Attempt::once(Err(Failure::new(FailureKind::Internal, "no ssh context")));
    };
    let request = match serde_json::to_vec(call) {
        Ok(r) => r,
        Err(e) => return Attempt::once(Err(Failure::new(FailureKind::Internal, e.to_string()))),
    };
    let (result, attempts) = ssh::call(node, opts, dir, C::KIND, &request).await;
    let (result, deploy) = match result {
        Ok((out, deploy)) => (parse_report::<C::Answer>(&out), Some(deploy)),
        Err(f) => (Err(f), None),
    };
    Attempt {
        result,
        attempts,
        deploy,
    }
}

/// A node's stdout as a report of the expected answer.
fn parse_report<T: DeserializeOwned>(out: &[u8]) -> Result<T, Failure> {
    let report: NodeReport<T> = serde_json::from_slice(out).map_err(|e| {
        let text = String::from_utf8_lossy(out);
        let start: String = text.trim().chars().take(60).collect();
        Failure::new(
            FailureKind::BadAnswer,
            format!("the answer is not a topo-tune report ({e}); it starts with {start:?} (a login script printing to stdout?)"),
        )
    })?;
    report.into_result()
}

/// Where a call that writes files runs: under `DIR/<host>` with `--output-dir`, on this
/// machine for `transport: local`, on the node for ssh, nowhere for a simulated node.
pub(crate) fn write_target(node: &NodeSpec, output_dir: Option<&std::path::Path>) -> Target {
    use crate::config::TransportKind;
    match (output_dir, node.transport) {
        (Some(d), _) => match crate::model::files::host_dir(d, &node.host) {
            Ok(write_root) => Target::Here(NodeEnv {
                write_root,
                ..NodeEnv::live()
            }),
            Err(why) => Target::Refused(why.0),
        },
        (None, TransportKind::Local) => Target::Here(NodeEnv::live()),
        (None, TransportKind::Ssh) => Target::Ssh,
        (None, TransportKind::Simulated) => Target::Paper,
    }
}

/// Where a call that reads the machine runs.
pub(crate) fn machine_target(node: &NodeSpec) -> Target {
    write_target(node, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_failure_text_is_bounded() {
        let report: NodeReport<()> = NodeReport {
            protocol: PROTOCOL,
            tool_version: "x".into(),
            ok: None,
            error: Some(Failure::new(FailureKind::ProbeFailed, "é".repeat(1 << 20))),
        };
        let f = report.into_result().unwrap_err();
        assert!(
            f.message.len() <= crate::model::outcome::MAX_FAILURE_TEXT + 16,
            "{}",
            f.message.len()
        );
        assert!(f.message.ends_with("(cut)"));
        assert_eq!(f.kind, FailureKind::ProbeFailed);
    }
}
