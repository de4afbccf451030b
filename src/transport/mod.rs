//! Reaching nodes: where a node's command runs (here, over ssh, or nowhere for a simulated
//! node), the one bounded fan-out every cluster-wide command uses, and the vocabulary of
//! per-node failures (`model::outcome`).

pub(crate) mod fanout;
pub(crate) mod simulated;
pub(crate) mod ssh;

use crate::config::NodeSpec;
use std::path::PathBuf;

/// Where one node's command runs.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// In this process, with the node's files under `env` (`/` for `transport: local`, or
    /// `DIR/<host>` for `--output-dir`).
    Here(NodeEnv),
    /// On the node, over the operator's ssh.
    Ssh,
    /// A simulated node: only its snapshot exists.
    Paper,
    /// Nowhere: the node's files could not be placed (the reason).
    Refused(String),
}

/// What a node-side command reads and writes: its files' root and the machine it describes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeEnv {
    /// Root of the files written (`/` on a real node).
    pub(crate) write_root: PathBuf,
    /// Read `/sys` and `/proc` under this directory instead of `/`.
    pub(crate) fsroot: Option<PathBuf>,
    /// Describe the machine from this hwloc export instead (tests, replays).
    pub(crate) hwloc_xml: Option<PathBuf>,
    /// Recorded NVML answers instead of the driver (tests of a `--fsroot` tree).
    pub(crate) nvml_fixture: Option<PathBuf>,
    /// Cancelled when a signal ends the run the call belongs to (a benchmark in flight ends).
    pub(crate) cancel: crate::runner::Cancel,
}

impl NodeEnv {
    /// This machine, its real files.
    pub(crate) fn live() -> NodeEnv {
        NodeEnv {
            write_root: PathBuf::from("/"),
            fsroot: None,
            hwloc_xml: None,
            nvml_fixture: None,
            cancel: crate::runner::Cancel::default(),
        }
    }
}

/// The transport's name as JSON and tables show it.
pub(crate) fn transport_name(node: &NodeSpec) -> &'static str {
    match node.transport {
        crate::config::TransportKind::Ssh => "ssh",
        crate::config::TransportKind::Local => "local",
        crate::config::TransportKind::Simulated => "simulated",
    }
}
