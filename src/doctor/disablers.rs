//! `nccl-disablers`: settings that turn a fast path off, wherever NCCL or a job reads them —
//! `/etc/nccl.conf`, `/etc/nccl/conf.d/*.conf`, topo-tune's env file, `/etc/environment` —
//! named by file and line. What each does is NCCL's (src/init.cc, src/graph/paths.cc,
//! src/mnnvl.cc, and its environment-variable guide).

use super::facts::Facts;
use super::finding::{Finding, Status};

/// What the node has that a setting can take away.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Paths {
    /// More than one GPU: P2P (NVLink or PCIe) and shared memory carry intra-node traffic.
    pub(super) intra: bool,
    /// RDMA NICs: InfiniBand/RoCE and GPUDirect RDMA.
    pub(super) rdma: bool,
    /// A multi-node NVLink domain (or a tray of one): cuMem and MNNVL.
    pub(super) domain: bool,
}

/// What a setting does here: fail (a fast path off), warn (forced for every size), or
/// nothing.
pub(super) fn judge(name: &str, value: &str, p: Paths) -> Option<(Status, String)> {
    let v = value.trim();
    let fail = |why: &str| Some((Status::Fail, why.to_string()));
    match name {
        "NCCL_P2P_DISABLE" if v == "1" && (p.intra || p.domain) => fail("turns CUDA P2P off: no NVLink or PCIe P2P between the node's GPUs (and no multi-node NVLink)"),
        "NCCL_SHM_DISABLE" if v == "1" && p.intra => fail("turns the shared-memory transport off: where P2P cannot go, traffic falls to the network"),
        "NCCL_IB_DISABLE" if v == "1" && p.rdma => fail("turns InfiniBand/RoCE off: NCCL falls back to TCP sockets"),
        "NCCL_P2P_LEVEL" if matches!(v, "LOC" | "0") && (p.intra || p.domain) => fail("P2P only inside a GPU: NVLink unused, and multi-node NVLink off"),
        "NCCL_NET_GDR_LEVEL" if matches!(v, "LOC" | "0") && p.rdma => fail("turns GPUDirect RDMA off: every transfer staged through host memory"),
        "NCCL_CUMEM_ENABLE" if v == "0" && p.domain => fail("turns cuMem off, which multi-node NVLink needs (very slow all-reduce on GB200: vllm-project/vllm#16992)"),
        "NCCL_MNNVL_ENABLE" if v == "0" && p.domain => fail("turns multi-node NVLink off"),
        "NCCL_CHUNK_SIZE" | "NCCL_P2P_NET_CHUNKSIZE" if v.parse::<u64>().is_ok_and(|b| b >= 1 << 20) => {
            fail("1 MiB or more: wrong all-reduce results have been seen (NVIDIA/nccl#2408)")
        }
        "NCCL_ALGO" | "NCCL_PROTO" => Some((
            Status::Warn,
            "forces one choice for every message size, node-wide: NCCL's tuner picks per size (set it per job, or use a tuner plugin)".to_string(),
        )),
        _ => None,
    }
}

pub(super) fn nccl_disablers(f: &Facts) -> Option<Finding> {
    let part = crate::graph::links::part_of(f.snap, &Default::default());
    let paths = Paths {
        intra: f.snap.gpus.len() > 1,
        rdma: f.snap.nics.iter().any(|n| n.kind == crate::model::NicKind::Rdma),
        domain: f.snap.nvlink_domain.is_some()
            || part.is_some_and(|p| p.board == crate::model::gpu_parts::Board::NvlinkSwitchTray),
    };
    let (settings, unreadable) = &f.settings;
    let mut found: Vec<(Status, String)> = settings
        .iter()
        .filter_map(|s| {
            let (status, why) = judge(&s.name, &s.value, paths)?;
            Some((status, format!("{}:{} {}={}: {why}", s.file, s.line, s.name, s.value)))
        })
        .collect();
    found.extend(
        unreadable
            .iter()
            .map(|u| (Status::Warn, format!("cannot read {u}: what it sets is unknown"))),
    );
    let worst = found.iter().map(|(s, _)| *s).max();
    Some(match worst {
        None => Finding::pass("no setting in NCCL's config or environment files turns a fast path off"),
        Some(status) => Finding::new(status, found.iter().map(|(_, d)| d.as_str()).collect::<Vec<_>>().join("; ")).fix("remove the line (a job that needs it sets it in its own environment); `topo-tune init` keeps an operator's drop-ins and says so"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_disabler_counts_only_where_its_path_exists() {
        let all = Paths {
            intra: true,
            rdma: true,
            domain: true,
        };
        let none = Paths::default();
        for (name, value) in [
            ("NCCL_P2P_DISABLE", "1"),
            ("NCCL_SHM_DISABLE", "1"),
            ("NCCL_IB_DISABLE", "1"),
            ("NCCL_P2P_LEVEL", "LOC"),
            ("NCCL_NET_GDR_LEVEL", "0"),
            ("NCCL_CUMEM_ENABLE", "0"),
            ("NCCL_MNNVL_ENABLE", "0"),
            ("NCCL_CHUNK_SIZE", "1048576"),
        ] {
            assert_eq!(
                judge(name, value, all).map(|j| j.0),
                Some(Status::Fail),
                "{name}={value}"
            );
            let without = judge(name, value, none).map(|j| j.0);
            let always = name.contains("CHUNK");
            assert_eq!(without.is_some(), always, "{name}={value} on a node without its path");
        }
        assert_eq!(judge("NCCL_P2P_DISABLE", "0", all), None);
        assert_eq!(judge("NCCL_P2P_LEVEL", "NVL", all), None);
        assert_eq!(judge("NCCL_CHUNK_SIZE", "524288", all), None);
        assert_eq!(judge("NCCL_ALGO", "Ring", none).map(|j| j.0), Some(Status::Warn));
    }
}
