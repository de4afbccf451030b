//! Data-center NVIDIA GPU parts: what their PCI ids say about their form factor and NVLink,
//! and whether their boards carry NVSwitches. Used only where the driver does not report
//! NVLink itself (a machine described by files, or no driver). Sources, cited in
//! docs/references.md: the PCI ID database (pciutils/pciids) for ids and names; NVIDIA's
//! Fabric Manager user guide for which baseboards carry NVSwitches and whether those appear on
//! PCIe; NVIDIA's vGPU NVSwitch platform list; NVIDIA's product specifications for links per
//! GPU (total NVLink bandwidth ÷ 50 GB/s per link for NVLink 2–4, ÷ 100 for NVLink 5). Ids
//! as of pciutils/pciids@c1c12547 (2026-08-22).

/// How a part's boards join GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Board {
    /// SXM on an 8-GPU HGX baseboard with NVSwitches that appear on PCI (HGX-2, HGX A100,
    /// HGX H100/H200/H800/H20): assumed only when the NVSwitch functions are seen.
    NvswitchOnPci,
    /// SXM on an HGX B100/B200/B300 baseboard: NVSwitches always, never visible on PCIe (the
    /// host sees ConnectX-7 bridge devices instead).
    NvswitchHidden,
    /// SXM2 on HGX-1/DGX-1: a hybrid cube mesh of direct links, no NVSwitch.
    DirectMesh,
    /// A Grace-Blackwell compute tray of an NVL72 rack (GB200, GB300): every GPU's NVLinks go
    /// to the rack's NVLink Switch trays, outside the node; the GPUs of all the rack's trays
    /// can form one multi-node NVLink domain.
    NvlinkSwitchTray,
    /// A Grace Hopper superchip (GH200): NVLink-C2C to its Grace; NVLink to other GPUs only
    /// in NVL32 systems, which the driver reports.
    Superchip,
    /// A PCIe card: NVLink only through bridges, which the driver reports.
    Pcie,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GpuPart {
    /// The name cluster.yaml uses (`gpu: h100-sxm5`).
    pub(crate) key: &'static str,
    /// As the PCI ID database names it.
    pub(crate) name: &'static str,
    /// PCI device ids (vendor 10de).
    pub(crate) device_ids: &'static [&'static str],
    /// Compute capability × 10 (90 for sm_90).
    pub(crate) sm: u32,
    pub(crate) board: Board,
    /// NVLinks per GPU (0 for PCIe cards).
    pub(crate) nvlinks: u32,
}

pub(crate) const PARTS: &[GpuPart] = &[
    GpuPart {
        key: "v100-sxm2",
        name: "Tesla V100 SXM2",
        device_ids: &["1db1", "1db5", "1df5"],
        sm: 70,
        board: Board::DirectMesh,
        nvlinks: 6,
    },
    GpuPart {
        key: "v100-sxm3",
        name: "Tesla V100 SXM3 32GB",
        device_ids: &["1db8"],
        sm: 70,
        board: Board::NvswitchOnPci,
        nvlinks: 6,
    },
    GpuPart {
        key: "v100-pcie",
        name: "Tesla V100 PCIe",
        device_ids: &["1db4", "1db6", "1df6"],
        sm: 70,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "a100-sxm4",
        name: "A100 SXM4",
        device_ids: &["20b0", "20b2", "20b3"],
        sm: 80,
        board: Board::NvswitchOnPci,
        nvlinks: 12,
    },
    GpuPart {
        key: "a800-sxm4",
        name: "A800 SXM4",
        device_ids: &["20bd", "20f3"],
        sm: 80,
        board: Board::NvswitchOnPci,
        nvlinks: 8,
    },
    GpuPart {
        key: "a100-pcie",
        name: "A100 PCIe",
        device_ids: &["20b1", "20f1", "20b5"],
        sm: 80,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "h100-sxm5",
        name: "H100 SXM5",
        device_ids: &["2330", "2337", "2338", "2339"],
        sm: 90,
        board: Board::NvswitchOnPci,
        nvlinks: 18,
    },
    GpuPart {
        key: "h800-sxm5",
        name: "H800",
        device_ids: &["2324"],
        sm: 90,
        board: Board::NvswitchOnPci,
        nvlinks: 8,
    },
    GpuPart {
        key: "h200-sxm",
        name: "H200 SXM 141GB",
        device_ids: &["2335"],
        sm: 90,
        board: Board::NvswitchOnPci,
        nvlinks: 18,
    },
    GpuPart {
        key: "h20",
        name: "H20",
        device_ids: &["2329"],
        sm: 90,
        board: Board::NvswitchOnPci,
        nvlinks: 18,
    },
    GpuPart {
        key: "h100-pcie",
        name: "H100 PCIe",
        device_ids: &["2331"],
        sm: 90,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "h100-nvl",
        name: "H100 NVL (H100L 94GB)",
        device_ids: &["2321"],
        sm: 90,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "h200-nvl",
        name: "H200 NVL",
        device_ids: &["233b"],
        sm: 90,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "b100",
        name: "B100",
        device_ids: &["29bc"],
        sm: 100,
        board: Board::NvswitchHidden,
        nvlinks: 18,
    },
    GpuPart {
        key: "b200",
        name: "B200",
        device_ids: &["2901", "2909"],
        sm: 100,
        board: Board::NvswitchHidden,
        nvlinks: 18,
    },
    GpuPart {
        key: "b300",
        name: "B300 SXM6 AC",
        device_ids: &["3182"],
        sm: 103,
        board: Board::NvswitchHidden,
        nvlinks: 18,
    },
    GpuPart {
        key: "gh200",
        name: "GH200",
        device_ids: &["2342", "2348"],
        sm: 90,
        board: Board::Superchip,
        nvlinks: 18,
    },
    GpuPart {
        key: "gb200",
        name: "GB200",
        device_ids: &["2941"],
        sm: 100,
        board: Board::NvlinkSwitchTray,
        nvlinks: 18,
    },
    GpuPart {
        key: "gb300",
        name: "GB300",
        device_ids: &["31c2", "31c3", "31a1"],
        sm: 103,
        board: Board::NvlinkSwitchTray,
        nvlinks: 18,
    },
    GpuPart {
        key: "l40s",
        name: "L40S",
        device_ids: &["26b9"],
        sm: 89,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "l20",
        name: "L20",
        device_ids: &["26b7", "26ba"],
        sm: 89,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "l4",
        name: "L4",
        device_ids: &["27b8"],
        sm: 89,
        board: Board::Pcie,
        nvlinks: 0,
    },
    GpuPart {
        key: "rtx-pro-6000",
        name: "RTX PRO 6000 Blackwell",
        device_ids: &["2bb1", "2bb4", "2bb5"],
        sm: 120,
        board: Board::Pcie,
        nvlinks: 0,
    },
];

/// The part of a `vendor:device` PCI id.
pub(crate) fn by_pci_id(pci_id: &str) -> Option<&'static GpuPart> {
    let device = pci_id.strip_prefix("10de:")?;
    PARTS.iter().find(|p| p.device_ids.contains(&device))
}

/// The part cluster.yaml names (`gpu: h100-sxm5`).
pub(crate) fn by_key(key: &str) -> Option<&'static GpuPart> {
    PARTS.iter().find(|p| p.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_keys_are_unique() {
        let mut ids: Vec<&str> = PARTS.iter().flat_map(|p| p.device_ids.iter().copied()).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "a device id names one part");
        assert_eq!(by_pci_id("10de:2335").map(|p| p.key), Some("h200-sxm"));
        assert_eq!(by_pci_id("1002:74a1"), None, "not NVIDIA");
        assert_eq!(by_key("b200").map(|p| p.board), Some(Board::NvswitchHidden));
        assert_eq!(by_pci_id("10de:2941").map(|p| p.key), Some("gb200"));
        assert_eq!(by_pci_id("10de:2321").map(|p| p.key), Some("h100-nvl"));
        for p in PARTS {
            assert_eq!(p.nvlinks == 0, p.board == Board::Pcie, "{}", p.key);
        }
    }
}
