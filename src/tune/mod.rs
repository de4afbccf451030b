//! `tune`'s pure core: what is searched (`space`), how the rounds are judged per message size
//! and confirmed (`judge`), turned into rules and kept globals (`rules`), and the result — `tuning.json` and the CSV NCCL's tuner
//! plugins read (`tuning`). Figures in, rules out; no I/O.

pub(crate) mod hardware;
pub(crate) mod judge;
pub(crate) mod onto;
pub(crate) mod rules;
pub(crate) mod space;
pub(crate) mod tuning;

use serde::{Deserialize, Serialize};

/// The collectives `tune` measures (nccl-tests' `*_perf` binaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

impl Collective {
    pub(crate) const ALL: [Collective; 4] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
    ];

    /// nccl-tests' binary stem: `all_reduce` for `all_reduce_perf`.
    pub(crate) fn perf(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "alltoall",
        }
    }

    /// The name in the tuner CSV; `None` for all-to-all, which NCCL runs as sends and
    /// receives and never asks a tuner about (`ncclFunc_t` has no all-to-all).
    pub(crate) fn csv(self) -> Option<&'static str> {
        match self {
            Collective::AllReduce => Some("allreduce"),
            Collective::AllGather => Some("allgather"),
            Collective::ReduceScatter => Some("reducescatter"),
            Collective::AllToAll => None,
        }
    }

    /// `--collectives` spelling: the nccl-tests stem or the CSV name.
    pub(crate) fn parse(text: &str) -> Option<Collective> {
        Collective::ALL
            .into_iter()
            .find(|c| c.perf() == text || c.csv() == Some(text) || c.perf().replace('_', "") == text)
    }
}

/// NCCL's algorithms, as the tuner CSV names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Algo {
    Tree,
    Ring,
    CollnetDirect,
    CollnetChain,
    Nvls,
    NvlsTree,
    Pat,
}

impl Algo {
    /// The CSV's spelling (plugins/tuner/example/plugin.c `parseAlgorithm`).
    pub(crate) fn csv(self) -> &'static str {
        match self {
            Algo::Tree => "tree",
            Algo::Ring => "ring",
            Algo::CollnetDirect => "collnet_direct",
            Algo::CollnetChain => "collnet_chain",
            Algo::Nvls => "nvls",
            Algo::NvlsTree => "nvls_tree",
            Algo::Pat => "pat",
        }
    }
}

/// NCCL's protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Proto {
    Ll,
    Ll128,
    Simple,
}

impl Proto {
    pub(crate) fn csv(self) -> &'static str {
        match self {
            Proto::Ll => "ll",
            Proto::Ll128 => "ll128",
            Proto::Simple => "simple",
        }
    }
}

/// A job shape a rule was measured at: NCCL's `nNodes` and `nRanks` in the tuner's `init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct Shape {
    pub(crate) nodes: u32,
    pub(crate) ranks: u32,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} node(s), {} rank(s)", self.nodes, self.ranks)
    }
}
