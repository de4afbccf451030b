//! `nccl-disablers`: settings that turn a fast path off, wherever NCCL or a job reads them —
//! `/etc/nccl.conf`, `/etc/nccl/conf.d/*.conf`, topo-tune's env file, `/etc/environment` —
//! named by file and line. What each does is NCCL's (src/init.cc, src/graph/paths.cc,
//! src/mnnvl.cc, and its environment-variable guide).

use super::facts::Facts;
use super::finding::{Finding, Status};
use crate::nccl::reads::Reading;

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

/// What a setting does here, judged by what NCCL makes of its value ([`Reading`]: `01` is 1,
/// `"1"` is 0, `0x100000` is 1 MiB): fail (a fast path off), warn (forced for every size), or
/// nothing. The comparisons are NCCL's own (transport/shm.cc:66 `== 1`, net_ib/init.cc:291
/// non-zero, cudawrap.cc:49 and init.cc:1072 `0` is off).
pub(super) fn judge(name: &str, value: &Reading, p: Paths) -> Option<(Status, String)> {
    let fail = |why: &str| Some((Status::Fail, why.to_string()));
    let int = match value {
        Reading::Int(n) => Some(*n),
        _ => None,
    };
    let level = match value {
        Reading::Level(l) => *l,
        _ => None,
    };
    match name {
        "NCCL_P2P_DISABLE" if int == Some(1) && (p.intra || p.domain) => fail("turns CUDA P2P off: no NVLink or PCIe P2P between the node's GPUs (and no multi-node NVLink)"),
        "NCCL_SHM_DISABLE" if int == Some(1) && p.intra => fail("turns the shared-memory transport off: where P2P cannot go, traffic falls to the network"),
        "NCCL_IB_DISABLE" if int.is_some_and(|n| n != 0) && p.rdma => fail("turns InfiniBand/RoCE off: NCCL falls back to TCP sockets"),
        "NCCL_P2P_LEVEL" if level == Some("LOC") && (p.intra || p.domain) => fail("P2P only inside a GPU: NVLink unused, and multi-node NVLink off"),
        "NCCL_NET_GDR_LEVEL" if level == Some("LOC") && p.rdma => fail("turns GPUDirect RDMA off: every transfer staged through host memory"),
        "NCCL_CUMEM_ENABLE" if int == Some(0) && p.domain => fail("turns cuMem off, which multi-node NVLink needs (very slow all-reduce on GB200: vllm-project/vllm#16992)"),
        "NCCL_MNNVL_ENABLE" if int == Some(0) && p.domain => fail("turns multi-node NVLink off"),
        "NCCL_CHUNK_SIZE" | "NCCL_P2P_NET_CHUNKSIZE" if int.is_some_and(|b| b >= 1 << 20) => {
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
    let mut found: Vec<(Status, String)> = f
        .settings
        .found
        .iter()
        .filter_map(|s| {
            let (status, why) = judge(&s.name, &s.reading(), paths)?;
            Some((
                status,
                format!("{}:{} {}={}: {why}", s.file, s.line, s.name, s.value.escape_debug()),
            ))
        })
        .collect();
    found.extend(f.settings.misread.iter().map(|m| {
        (
            Status::Warn,
            format!("{}:{} `{}`: {}", m.file, m.line, m.text, m.reads_as),
        )
    }));
    found.extend(
        f.settings
            .unreadable
            .iter()
            .map(|u| (Status::Warn, format!("cannot read {u}: what it sets is unknown"))),
    );
    let worst = found.iter().map(|(s, _)| *s).max();
    Some(match worst {
        None => Finding::pass("no setting in NCCL's config or environment files turns a fast path off"),
        Some(status) => Finding::new(
            status,
            found.iter().map(|(_, d)| d.as_str()).collect::<Vec<_>>().join("; "),
        )
        .fix(fix(status, !f.settings.misread.is_empty())),
    })
}

fn fix(worst: Status, misread: bool) -> String {
    let remove = "remove the line (a job that needs it sets it in its own environment); `topo-tune init` keeps an operator's drop-ins and says so";
    let rewrite = "write each line as its reader takes it: NAME=VALUE from the first column, no spaces around `=`, no quotes, no `export`, a `#` comment only on a line of its own (docs/doctor.md)";
    match (worst, misread) {
        (Status::Fail, true) => format!("{remove}; {rewrite}"),
        (_, true) => rewrite.to_string(),
        _ => remove.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nccl::reads::reading;

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
                judge(name, &reading(name, value), all).map(|j| j.0),
                Some(Status::Fail),
                "{name}={value}"
            );
            let without = judge(name, &reading(name, value), none).map(|j| j.0);
            let always = name.contains("CHUNK");
            assert_eq!(without.is_some(), always, "{name}={value} on a node without its path");
        }
        let judged = |name: &str, value: &str, p: Paths| judge(name, &reading(name, value), p).map(|j| j.0);
        assert_eq!(judged("NCCL_P2P_DISABLE", "0", all), None);
        assert_eq!(judged("NCCL_P2P_LEVEL", "NVL", all), None);
        assert_eq!(judged("NCCL_CHUNK_SIZE", "524288", all), None);
        assert_eq!(judged("NCCL_ALGO", "Ring", none), Some(Status::Warn));
        // As NCCL reads them: a comment after the value, octal, hex, a control byte after it.
        for (name, value) in [
            ("NCCL_P2P_DISABLE", "1 # temporary"),
            ("NCCL_SHM_DISABLE", "01"),
            ("NCCL_CHUNK_SIZE", "0x100000"),
            ("NCCL_IB_DISABLE", "1\u{1b}"),
            ("NCCL_IB_DISABLE", "2"),
        ] {
            assert_eq!(judged(name, value, all), Some(Status::Fail), "{name}={value:?}");
        }
        // What NCCL reads as off: quotes make it 0; a level with a space is no level.
        assert_eq!(judged("NCCL_P2P_DISABLE", "\"1\"", all), None);
        assert_eq!(judged("NCCL_P2P_LEVEL", "LOC ", all), None);
    }
}
