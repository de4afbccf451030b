//! What `tune` tries, and what it never touches.
//!
//! - **Choices** per collective: the (algorithm, protocol) pairs NCCL can run for it on these
//!   nodes (NVLS on one node, NVLSTree across nodes), each measured for one whole sweep through topo-tune's tuner plugin and a one-line
//!   rules file (never `NCCL_ALGO`/`NCCL_PROTO`: the plugin is what applies the result) (Tree only for
//!   all-reduce; NVLS where an NVSwitch joins the GPUs; NVLSTree across nodes; PAT for
//!   all-gather and reduce-scatter with one GPU per node — src/enqueue.cc
//!   `updateCollCostTable`), then channel counts for the pairs that won somewhere.
//! - **Globals**, a short named list chosen from the nodes' facts: with RDMA,
//!   `NCCL_IB_QPS_PER_CONNECTION`, `NCCL_IB_SPLIT_DATA_ON_QPS`, `NCCL_NCHANNELS_PER_NET_PEER`;
//!   on RoCE, `NCCL_IB_GID_INDEX` at the ports' common RoCE v2 GID; everywhere
//!   `NCCL_NTHREADS` and `NCCL_BUFFSIZE`. NCCL files most of these under "Debugging": they
//!   are written only with the measured evidence beside them.
//! - **Never**: chunk sizes (`NEVER`): the largest published gains and the silently wrong
//!   results (NVIDIA/nccl#2408, #1496) come from the same knobs.

use super::{Algo, Collective, Proto};
use std::collections::BTreeMap;

/// What the nodes offer, for choosing candidates.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts {
    pub(crate) rdma: bool,
    /// The RoCE v2 GID index every RoCE port has, when they share one.
    pub(crate) roce_v2_gid: Option<u32>,
    /// An NVSwitch joins the node's GPUs (NVLS can run).
    pub(crate) nvswitch: bool,
    pub(crate) gpus_per_node: u32,
    pub(crate) nodes: u32,
}

/// Variables `tune` never sets, and why (a tuning read back that holds one is refused).
pub(crate) const NEVER: &[(&str, &str)] = &[
    (
        "NCCL_CHUNK_SIZE",
        "undocumented; 1 MiB gave silently wrong results and Xid 31 (NVIDIA/nccl#2408)",
    ),
    (
        "NCCL_P2P_NET_CHUNKSIZE",
        "mismatched values gave wrong send/receive results (NVIDIA/nccl#1496)",
    ),
    ("NCCL_P2P_NVL_CHUNKSIZE", "a chunk size: the same risk"),
    ("NCCL_P2P_PCI_CHUNKSIZE", "a chunk size: the same risk"),
    ("NCCL_NVLS_CHUNKSIZE", "a chunk size: the same risk"),
    ("NCCL_NVLSTREE_MAX_CHUNKSIZE", "a chunk size: the same risk"),
    (
        "NCCL_ALGO",
        "node-wide it forces one choice for every size: the tuner plugin chooses per size",
    ),
    (
        "NCCL_PROTO",
        "node-wide it forces one choice for every size: the tuner plugin chooses per size",
    ),
];

/// Channel counts tried for a pair that won somewhere.
pub(crate) const CHANNELS: [u32; 4] = [4, 8, 16, 32];

/// One thing to measure against NCCL's own choice.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Candidate {
    /// An algorithm and protocol chosen by the plugin for the whole sweep, with a channel
    /// count or NCCL's own.
    Choice {
        algo: Algo,
        proto: Proto,
        channels: Option<u32>,
    },
    /// One variable for every collective and size.
    Global { name: &'static str, value: String },
}

impl Candidate {
    /// How the candidate is named in tables and JSON: `ring/ll128`, `ring/simple×8`,
    /// `NCCL_BUFFSIZE=8388608`.
    pub(crate) fn label(&self) -> String {
        match self {
            Candidate::Choice { algo, proto, channels } => {
                let ch = channels.map(|c| format!("×{c}")).unwrap_or_default();
                format!("{}/{}{ch}", algo.csv(), proto.csv())
            }
            Candidate::Global { name, value } => format!("{name}={value}"),
        }
    }

    /// What a run of this candidate reads, for collective `c`: the NCCL variables its config
    /// file adds to the live one (a global's), and the rules file topo-tune's plugin applies
    /// (a choice's: one line for every size of `c` — NCCL still decides whether the pair can
    /// run and clamps the channel count, exactly as it will for the rule that is written).
    pub(crate) fn files(&self, c: Collective) -> (BTreeMap<String, String>, Option<String>) {
        let mut vars = BTreeMap::new();
        match self {
            Candidate::Choice { algo, proto, channels } => {
                let rules = c.csv().map(|name| {
                    format!(
                        "# topo-tune tune: {} for every size of {}\n{name},0,{EVERY_SIZE},{},{},{},-1,-1\n",
                        self.label(),
                        c.perf(),
                        algo.csv(),
                        proto.csv(),
                        channels.map_or("-1".to_string(), |n| n.to_string())
                    )
                });
                (vars, rules)
            }
            Candidate::Global { name, value } => {
                vars.insert((*name).into(), value.clone());
                (vars, None)
            }
        }
    }

    /// The pair a choice forces, with NCCL's own channel count: what a `pair × N` is held
    /// against.
    pub(crate) fn pair(&self) -> Option<Candidate> {
        match self {
            Candidate::Choice { algo, proto, .. } => Some(Candidate::Choice {
                algo: *algo,
                proto: *proto,
                channels: None,
            }),
            Candidate::Global { .. } => None,
        }
    }
}

/// The largest message a rule may name (1 TiB; `tuning::review`'s bound).
pub(crate) const EVERY_SIZE: u64 = 1 << 40;

/// The pairs NCCL can run for `c` on these nodes.
pub(crate) fn pairs(c: Collective, f: &Facts) -> Vec<(Algo, Proto)> {
    let all = [Proto::Ll, Proto::Ll128, Proto::Simple];
    let mut out: Vec<(Algo, Proto)> = Vec::new();
    match c {
        Collective::AllReduce => {
            for a in [Algo::Ring, Algo::Tree] {
                out.extend(all.iter().map(|p| (a, *p)));
            }
            // NVLS across nodes needs a multi-node NVLink domain (not modelled here): NCCL
            // runs NVLSTree there instead.
            if f.nvswitch && f.gpus_per_node > 1 {
                out.push(if f.nodes > 1 {
                    (Algo::NvlsTree, Proto::Simple)
                } else {
                    (Algo::Nvls, Proto::Simple)
                });
            }
        }
        Collective::AllGather | Collective::ReduceScatter => {
            out.extend(all.iter().map(|p| (Algo::Ring, *p)));
            if f.nvswitch && f.gpus_per_node > 1 && f.nodes == 1 {
                out.push((Algo::Nvls, Proto::Simple));
            }
            if f.gpus_per_node == 1 && f.nodes > 1 {
                out.push((Algo::Pat, Proto::Simple));
            }
        }
        // Sends and receives: no algorithm to choose, and no tuner call.
        Collective::AllToAll => {}
    }
    out
}

/// The first round of candidates for `c`: every pair with NCCL's channel count.
pub(crate) fn choices(c: Collective, f: &Facts) -> Vec<Candidate> {
    pairs(c, f)
        .into_iter()
        .map(|(algo, proto)| Candidate::Choice {
            algo,
            proto,
            channels: None,
        })
        .collect()
}

/// Channel counts for a pair that won.
pub(crate) fn channel_choices(algo: Algo, proto: Proto) -> Vec<Candidate> {
    CHANNELS
        .iter()
        .map(|c| Candidate::Choice {
            algo,
            proto,
            channels: Some(*c),
        })
        .collect()
}

/// The global variables worth a measurement on these nodes.
pub(crate) fn globals(f: &Facts) -> Vec<Candidate> {
    let g = |name: &'static str, value: String| Candidate::Global { name, value };
    let mut out = vec![
        g("NCCL_NTHREADS", "256".into()),
        g("NCCL_BUFFSIZE", (8u32 << 20).to_string()),
    ];
    if f.rdma {
        out.push(g("NCCL_IB_QPS_PER_CONNECTION", "4".into()));
        out.push(g("NCCL_IB_SPLIT_DATA_ON_QPS", "1".into()));
        out.push(g("NCCL_NCHANNELS_PER_NET_PEER", "4".into()));
    }
    if let Some(gid) = f.roce_v2_gid {
        out.push(g("NCCL_IB_GID_INDEX", gid.to_string()));
    }
    out
}

/// Whether `name` is one of the variables `tune` searches (what a tuning read back may set).
pub(crate) fn searched(name: &str) -> bool {
    [
        "NCCL_NTHREADS",
        "NCCL_BUFFSIZE",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_SPLIT_DATA_ON_QPS",
        "NCCL_NCHANNELS_PER_NET_PEER",
        "NCCL_IB_GID_INDEX",
    ]
    .contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_follow_what_nccl_can_run_here() {
        let hgx = Facts {
            rdma: true,
            roce_v2_gid: Some(3),
            nvswitch: true,
            gpus_per_node: 8,
            nodes: 4,
        };
        let ar = pairs(Collective::AllReduce, &hgx);
        assert_eq!(ar.len(), 7, "{ar:?}");
        assert!(ar.contains(&(Algo::NvlsTree, Proto::Simple)));
        assert!(
            !ar.contains(&(Algo::Nvls, Proto::Simple)),
            "no NVLS across nodes: {ar:?}"
        );
        let one_node = Facts {
            nodes: 1,
            ..hgx.clone()
        };
        let ar1 = pairs(Collective::AllReduce, &one_node);
        assert!(ar1.contains(&(Algo::Nvls, Proto::Simple)) && !ar1.contains(&(Algo::NvlsTree, Proto::Simple)));
        assert!(pairs(Collective::AllGather, &one_node).contains(&(Algo::Nvls, Proto::Simple)));
        let ag = pairs(Collective::AllGather, &hgx);
        assert!(!ag.iter().any(|(a, _)| *a == Algo::Tree || *a == Algo::Pat), "{ag:?}");
        let one_gpu = Facts {
            gpus_per_node: 1,
            nvswitch: false,
            ..hgx.clone()
        };
        assert!(pairs(Collective::ReduceScatter, &one_gpu).contains(&(Algo::Pat, Proto::Simple)));
        assert!(pairs(Collective::AllToAll, &hgx).is_empty());
        let names: Vec<String> = globals(&hgx).iter().map(Candidate::label).collect();
        assert!(names.contains(&"NCCL_IB_GID_INDEX=3".to_string()), "{names:?}");
        assert_eq!(globals(&Facts::default()).len(), 2, "no RDMA: threads and buffer only");
    }

    #[test]
    fn a_candidate_is_its_settings_and_never_a_chunk_size() {
        let c = Candidate::Choice {
            algo: Algo::NvlsTree,
            proto: Proto::Ll128,
            channels: Some(8),
        };
        assert_eq!(c.label(), "nvls_tree/ll128×8");
        let (vars, rules) = c.files(Collective::AllReduce);
        assert!(vars.is_empty(), "a choice sets no variable: {vars:?}");
        let rules = rules.unwrap();
        let read = nccl_tuner_topo_tune::rules::parse_strict(rules.as_bytes()).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].algorithm, read[0].protocol, read[0].channels), (5, 1, 8));
        assert_eq!(
            (read[0].min_bytes, read[0].max_bytes, read[0].n_nodes),
            (0, EVERY_SIZE, -1)
        );
        assert!(
            c.files(Collective::AllToAll).1.is_none(),
            "no tuner call for all-to-all"
        );
        let every = globals(&Facts {
            rdma: true,
            roce_v2_gid: Some(1),
            ..Facts::default()
        });
        for g in every {
            let (vars, rules) = g.files(Collective::AllReduce);
            assert!(rules.is_none());
            for name in vars.keys() {
                assert!(searched(name), "{name}");
                assert!(!NEVER.iter().any(|(n, _)| n == name), "{name} is never searched");
                let var = crate::nccl::table::lookup(name).unwrap_or_else(|| panic!("{name} not in the table"));
                assert!(
                    crate::nccl::table::validate(name, &vars[name], None).is_ok(),
                    "{}",
                    var.name
                );
            }
        }
    }
}
