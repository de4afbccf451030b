//! NCCL's own figures, in one place: link bandwidths from `src/graph/topo.h` and the
//! Ring/Simple latencies from `src/graph/tuning.cc` (`ncclTunerConstantsDefaults`), as read
//! from NVIDIA/nccl v2.30.7 (commit 5067397); the H200 machine ran 2.28.9 with the same values.
//! Sources and the surrounding model are cited in docs/references.md.

/// One-direction GB/s NCCL assumes for one NVLink of a GPU generation, by SM major/minor
/// (`SM60_NVLINK_BW` … `SM100_NVLINK_BW`).
pub(crate) fn nvlink_gbps(sm_major: i32, sm_minor: i32) -> Option<f64> {
    Some(match (sm_major, sm_minor) {
        (6, _) => 18.0,
        (7, _) | (8, 0) => 20.0,
        (8, _) => 12.0,
        (9, _) => 20.6,
        (10, _) | (12, _) => 40.1,
        _ => return None,
    })
}

/// GB/s of a x16 PCIe link by generation (`width × per-lane rate / 80`: Gen3 12, Gen4 24,
/// Gen5 48); other widths scale linearly.
pub(crate) fn pcie_x16_gbps(gen: u8) -> f64 {
    match gen {
        1 => 3.0,
        2 => 6.0,
        3 => 12.0,
        4 => 24.0,
        5 => 48.0,
        _ => 96.0,
    }
}

/// Inter-socket bandwidth for Skylake-class and later Intel (`SKL_QPI_BW`).
pub(crate) const INTER_CPU_GBPS: f64 = 10.0;
/// Network bandwidth when a NIC reports none (`NET_BW`, 100 Gb/s).
pub(crate) const DEFAULT_NET_GBPS: f64 = 12.0;

/// Ring/Simple base latency, µs (`baseLatencies`).
pub(crate) const BASE_LAT_US: f64 = 8.4;
/// Ring/Simple hardware latency per hop, µs (`hwLat`): NVLink, PCIe, network.
pub(crate) const LAT_NVLINK_US: f64 = 3.4;
pub(crate) const LAT_PCI_US: f64 = 5.7;
pub(crate) const LAT_NET_US: f64 = 14.0;
/// Multi-node Ring/Simple latency factor on SM ≥ 80.
pub(crate) const MULTI_NODE_LAT_FACTOR: f64 = 1.4;

/// NCCL's path types (`src/include/graph.h`), in its order: lower is closer. The numbers are
/// NCCL's and serve as hop costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum NcclPath {
    Loc = 0,
    Nvl = 1,
    Nvb = 2,
    C2c = 3,
    Pix = 4,
    Pxb = 5,
    P2c = 6,
    Pxn = 7,
    Phb = 8,
    Sys = 9,
    Net = 10,
    Dis = 11,
}

impl NcclPath {
    /// NCCL's name, as its graph and topology files write it (`typeintra="NVL"`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            NcclPath::Loc => "LOC",
            NcclPath::Nvl => "NVL",
            NcclPath::Nvb => "NVB",
            NcclPath::C2c => "C2C",
            NcclPath::Pix => "PIX",
            NcclPath::Pxb => "PXB",
            NcclPath::P2c => "P2C",
            NcclPath::Pxn => "PXN",
            NcclPath::Phb => "PHB",
            NcclPath::Sys => "SYS",
            NcclPath::Net => "NET",
            NcclPath::Dis => "DIS",
        }
    }

    /// The hop cost used by the ring solver: NCCL's number for the type.
    pub(crate) fn rank(self) -> u32 {
        self as u32
    }

    /// The type of a hop cost (inverse of [`NcclPath::rank`]); costs above SYS read as DIS.
    pub(crate) fn from_rank(rank: u32) -> NcclPath {
        const ALL: [NcclPath; 12] = [
            NcclPath::Loc,
            NcclPath::Nvl,
            NcclPath::Nvb,
            NcclPath::C2c,
            NcclPath::Pix,
            NcclPath::Pxb,
            NcclPath::P2c,
            NcclPath::Pxn,
            NcclPath::Phb,
            NcclPath::Sys,
            NcclPath::Net,
            NcclPath::Dis,
        ];
        ALL.get(rank as usize).copied().unwrap_or(NcclPath::Dis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_ranks_round_trip_in_nccl_order() {
        for r in 0..12 {
            assert_eq!(NcclPath::from_rank(r).rank(), r);
        }
        assert!(NcclPath::Nvl < NcclPath::Pix && NcclPath::Phb < NcclPath::Sys);
        assert_eq!(NcclPath::from_rank(99), NcclPath::Dis);
    }
}
