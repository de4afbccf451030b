//! Reaching nodes: the per-node transports (ssh, local, simulated) and the bounded fan-out
//! that probes many nodes in parallel and reports each node's outcome with its reason.

pub mod simulated;
pub mod ssh;

use crate::config::{Inventory, NodeSpec, TransportKind};
use crate::model::NodeSnapshot;
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a node produced no snapshot. Stable snake_case names (they appear in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing listens on the ssh port.
    ConnectRefused,
    /// No answer within the connect timeout.
    ConnectTimeout,
    /// The name does not resolve.
    UnknownHost,
    /// The host key is not in known_hosts (strict checking: never accepted blindly).
    HostKeyUnknown,
    /// The host key differs from known_hosts: refused before anything was sent.
    HostKeyChanged,
    /// The server refused our credentials.
    AuthRejected,
    /// Other ssh connection failure.
    SshFailed,
    /// A remote command ran past the command timeout.
    CommandTimeout,
    /// The node lacks a library the probe needs (libhwloc, libudev, glibc).
    MissingLibrary,
    /// The probe binary cannot run there (architecture).
    WrongPlatform,
    /// The remote probe exited non-zero.
    ProbeFailed,
    /// The answer is not a topo-tune snapshot.
    BadAnswer,
    /// The answer is larger than the limit.
    AnswerTooLarge,
    /// Copying the probe binary failed or did not verify.
    DeployFailed,
    /// The simulated node's source could not be read.
    SimulationFailed,
    /// A snapshot from `--from-probes` is missing or malformed.
    ProbeFileMissing,
    /// Not tried: the `--max-fail` budget was spent.
    Skipped,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// What happened to the probe binary on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Deploy {
    /// Copied this run (checksum verified).
    Uploaded,
    /// Already there with the right checksum.
    Reused,
    /// No binary needed (local, simulated, from files).
    NotNeeded,
}

#[derive(Debug, Clone)]
pub struct NodeOutcome {
    pub host: String,
    pub transport: TransportKind,
    pub duration: Duration,
    pub result: Result<(NodeSnapshot, Deploy), Failure>,
    /// Connection attempts made (a refused or timed-out connect is retried once).
    pub attempts: u32,
}

/// How to run a collection.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    pub forks: usize,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Stop starting new nodes once more than this many have failed.
    pub max_fail: Option<usize>,
    /// The binary copied to ssh nodes.
    pub remote_binary: Arc<ssh::LocalBinary>,
    /// Extra delay for simulated nodes (benchmarks of the fan-out itself).
    pub simulated_latency: Duration,
}

/// Progress callback: called once per finished node, from that node's task.
pub type Progress = Arc<dyn Fn(&NodeOutcome) + Send + Sync>;

/// Probe every node with at most `forks` in flight. Results come back in inventory order.
pub async fn collect(inv: &Inventory, opts: &CollectOptions, progress: Progress) -> Vec<NodeOutcome> {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(opts.forks.max(1)));
    let failures = Arc::new(AtomicUsize::new(0));
    let transports = Arc::new(Transports {
        ssh: SshTransport {
            settings: inv.ssh.clone(),
            opts: opts.clone(),
            control_dir: ssh::ControlDir::create(),
        },
        local: LocalTransport,
        simulated: SimulatedTransport {
            latency: opts.simulated_latency,
        },
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, node) in inv.nodes.iter().cloned().enumerate() {
        // Take the fork slot here, in inventory order: nodes start in the order listed, and
        // the --max-fail decision for node i sees every failure of the nodes before it that
        // have finished. The semaphore is never closed, so acquiring cannot fail.
        let permit = Arc::clone(&semaphore).acquire_owned().await.ok();
        let failures = Arc::clone(&failures);
        let transports = Arc::clone(&transports);
        let progress = Arc::clone(&progress);
        let skip = opts.max_fail.is_some_and(|m| failures.load(Ordering::SeqCst) > m);
        tasks.spawn(async move {
            let _permit = permit;
            let start = Instant::now();
            let outcome = if skip {
                let r = Err(Failure::new(
                    FailureKind::Skipped,
                    "not tried: the --max-fail budget is spent",
                ));
                NodeOutcome {
                    host: node.host.clone(),
                    transport: node.transport,
                    duration: start.elapsed(),
                    result: r,
                    attempts: 0,
                }
            } else {
                let (result, attempts) = transports.probe(&node).await;
                if result.is_err() {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
                NodeOutcome {
                    host: node.host.clone(),
                    transport: node.transport,
                    duration: start.elapsed(),
                    result,
                    attempts,
                }
            };
            progress(&outcome);
            (i, outcome)
        });
    }
    let mut out: Vec<Option<NodeOutcome>> = vec![None; inv.nodes.len()];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, outcome)) => out[i] = Some(outcome),
            Err(e) => {
                // A panicking node task is a bug; report it against no node rather than abort.
                eprintln!("error: internal failure in a node task: {e}");
            }
        }
    }
    out.into_iter()
        .zip(&inv.nodes)
        .map(|(o, n)| {
            o.unwrap_or_else(|| NodeOutcome {
                host: n.host.clone(),
                transport: n.transport,
                duration: Duration::ZERO,
                result: Err(Failure::new(
                    FailureKind::ProbeFailed,
                    "internal failure while probing this node",
                )),
                attempts: 0,
            })
        })
        .collect()
}

/// What a node answered: its snapshot and what happened to the probe binary, or why not;
/// plus the connection attempts made.
pub type Answer = (Result<(NodeSnapshot, Deploy), Failure>, u32);

/// One way of reaching a node and getting its snapshot. The fan-out holds one of each and
/// picks per node by `transport:` (static dispatch: async trait methods are not object-safe).
pub trait Transport {
    fn probe(&self, node: &NodeSpec) -> impl std::future::Future<Output = Answer> + Send;
}

/// Over the operator's ssh; see [`ssh`].
pub struct SshTransport {
    pub settings: crate::config::SshSettings,
    pub opts: CollectOptions,
    pub control_dir: Option<ssh::ControlDir>,
}

impl Transport for SshTransport {
    async fn probe(&self, node: &NodeSpec) -> Answer {
        match &self.control_dir {
            Some(dir) => ssh::probe_node(node, &self.settings, &self.opts, dir).await,
            None => (
                Err(Failure::new(
                    FailureKind::SshFailed,
                    "could not create a private directory for ssh control sockets",
                )),
                0,
            ),
        }
    }
}

/// This machine, in-process.
pub struct LocalTransport;

impl Transport for LocalTransport {
    async fn probe(&self, _node: &NodeSpec) -> Answer {
        let request = crate::probe::ProbeRequest {
            target: crate::probe::Target::Machine { fsroot: None },
            nvml_fixture: None,
        };
        let r = tokio::task::spawn_blocking(move || crate::probe::probe(&request))
            .await
            .map_err(|e| Failure::new(FailureKind::ProbeFailed, e.to_string()))
            .and_then(|r| r.map_err(|e| Failure::new(FailureKind::ProbeFailed, e.to_string())));
        (r.map(|s| (s, Deploy::NotNeeded)), 0)
    }
}

/// No machine: the node's `simulate:` source, after an optional delay.
pub struct SimulatedTransport {
    pub latency: Duration,
}

impl Transport for SimulatedTransport {
    async fn probe(&self, node: &NodeSpec) -> Answer {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let node = node.clone();
        let r = tokio::task::spawn_blocking(move || simulated::snapshot(&node))
            .await
            .unwrap_or_else(|e| Err(Failure::new(FailureKind::SimulationFailed, e.to_string())));
        (r.map(|s| (s, Deploy::NotNeeded)), 0)
    }
}

/// The three transports of one run.
struct Transports {
    ssh: SshTransport,
    local: LocalTransport,
    simulated: SimulatedTransport,
}

impl Transports {
    async fn probe(&self, node: &NodeSpec) -> Answer {
        match node.transport {
            TransportKind::Ssh => self.ssh.probe(node).await,
            TransportKind::Local => self.local.probe(node).await,
            TransportKind::Simulated => self.simulated.probe(node).await,
        }
    }
}
