//! sysfs readers: PCI link/NUMA facts, RDMA devices and ports, netdevs, MSI IRQs.
//! Formats: drivers/pci/pci-sysfs.c and drivers/infiniband/core/sysfs.c, summarised in
//! research/irq.md §2.4 and research/nccl.md §4.2.

use super::fsroot::FsRoot;
use crate::model::pci::{gen_from_speed, Bdf};
use crate::model::{CpuList, LinkLayer, Netdev, PcieLink, RdmaPort};

/// What sysfs says about one PCI function.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PciFacts {
    /// `numa_node`: `None` for `-1` (firmware gave no proximity) or when absent.
    pub(crate) numa_node: Option<u32>,
    /// Raw `numa_node` text was `-1`.
    pub(crate) numa_unknown: bool,
    pub(crate) local_cpus: Option<CpuList>,
    pub(crate) link: PcieLink,
    pub(crate) driver: Option<String>,
    pub(crate) msi_irqs: Vec<u32>,
}

pub(crate) fn pci_facts(fs: &FsRoot, bdf: Bdf) -> PciFacts {
    let base = format!("/sys/bus/pci/devices/{bdf}");
    let numa_raw = fs.read_trimmed(&format!("{base}/numa_node"));
    let numa_node = numa_raw
        .as_deref()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .and_then(|n| u32::try_from(n).ok());
    let width = |name: &str| {
        fs.read_trimmed(&format!("{base}/{name}"))
            .and_then(|s| s.parse::<u8>().ok())
            .filter(|w| *w > 0)
    };
    let speed = |name: &str| {
        fs.read_trimmed(&format!("{base}/{name}"))
            .and_then(|s| gen_from_speed(&s))
    };
    let link = PcieLink::from_gen_width(
        speed("current_link_speed"),
        width("current_link_width"),
        speed("max_link_speed"),
        width("max_link_width"),
    );
    let mut msi_irqs: Vec<u32> = fs
        .list(&format!("{base}/msi_irqs"))
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    msi_irqs.sort_unstable();
    PciFacts {
        numa_node,
        numa_unknown: numa_raw.as_deref() == Some("-1"),
        local_cpus: fs
            .read(&format!("{base}/local_cpulist"))
            .and_then(|s| CpuList::parse(&s).ok())
            .filter(|c| !c.is_empty()),
        link,
        driver: fs.link_name(&format!("{base}/driver")),
        msi_irqs,
    }
}

/// The PCI function a class device (`/sys/class/net/eth0`, `/sys/class/infiniband/mlx5_0`)
/// belongs to: the deepest `DDDD:BB:DD.F` component of its resolved sysfs path. `None` for
/// virtual devices (`/sys/devices/virtual/...`).
pub(crate) fn owning_pci_function(fs: &FsRoot, class_path: &str) -> Option<Bdf> {
    let real = fs.resolve(class_path)?;
    real.split('/').rev().find_map(|part| {
        // Only full 4-digit-domain names: `pci0000:00` (a root bus) does not parse as a BDF.
        (part.len() == 12).then(|| part.parse::<Bdf>().ok()).flatten()
    })
}

/// An RDMA device as `/sys/class/infiniband/<dev>` shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RdmaFacts {
    pub(crate) device: String,
    pub(crate) bdf: Option<Bdf>,
    pub(crate) ports: Vec<RdmaPort>,
}

pub(crate) fn rdma_devices(fs: &FsRoot) -> Vec<RdmaFacts> {
    fs.list("/sys/class/infiniband")
        .into_iter()
        .map(|dev| {
            let base = format!("/sys/class/infiniband/{dev}");
            let bdf = owning_pci_function(fs, &format!("{base}/device"));
            let mut ports: Vec<RdmaPort> = fs
                .list(&format!("{base}/ports"))
                .iter()
                .filter_map(|p| p.parse::<u32>().ok())
                .map(|port| rdma_port(fs, &format!("{base}/ports/{port}"), port))
                .collect();
            ports.sort_by_key(|p| p.port);
            RdmaFacts {
                device: dev,
                bdf,
                ports,
            }
        })
        .collect()
}

fn rdma_port(fs: &FsRoot, base: &str, port: u32) -> RdmaPort {
    // `state` reads `4: ACTIVE`.
    let state_raw = fs.read_trimmed(&format!("{base}/state"));
    let (state_code, state) = match state_raw.as_deref().and_then(|s| s.split_once(':')) {
        Some((code, text)) => match code.trim().parse() {
            Ok(c) => (Some(c), Some(text.trim().to_string())),
            // Kept as read, so that doctor can say what it could not read.
            Err(_) => (None, state_raw.clone()),
        },
        None => (None, state_raw.clone()),
    };
    // `rate` reads `400 Gb/sec (4X NDR)`.
    let rate = fs.read_trimmed(&format!("{base}/rate"));
    let rate_gbps = rate
        .as_deref()
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        // The kernel writes a rate in whole or decimal Gb/s: anything else is not read.
        .filter(|g| g.is_finite() && (0.0..=10_000.0).contains(g));
    let link_layer = match fs.read_trimmed(&format!("{base}/link_layer")).as_deref() {
        Some("InfiniBand") => LinkLayer::InfiniBand,
        Some("Ethernet") => LinkLayer::Ethernet,
        _ => LinkLayer::Unknown,
    };
    // GID types: one file per index; reading an unpopulated index fails (EINVAL), skip those.
    let mut roce_v2_gid_indexes: Vec<u32> = fs
        .list(&format!("{base}/gid_attrs/types"))
        .iter()
        .filter_map(|idx| idx.parse::<u32>().ok())
        .filter(|idx| {
            fs.read_trimmed(&format!("{base}/gid_attrs/types/{idx}"))
                .is_some_and(|t| t.eq_ignore_ascii_case("RoCE v2"))
        })
        .collect();
    roce_v2_gid_indexes.sort_unstable();
    // The netdev behind the port (RoCE/IPoIB): first populated `gid_attrs/ndevs/N`.
    let mut ndev_idx: Vec<u32> = fs
        .list(&format!("{base}/gid_attrs/ndevs"))
        .iter()
        .filter_map(|i| i.parse().ok())
        .collect();
    ndev_idx.sort_unstable();
    let netdev = ndev_idx
        .iter()
        .find_map(|i| fs.read_trimmed(&format!("{base}/gid_attrs/ndevs/{i}")));
    RdmaPort {
        port,
        state,
        state_code,
        rate,
        rate_gbps,
        link_layer,
        roce_v2_gid_indexes,
        netdev,
    }
}

/// A netdev with a PCI function behind it; virtual ones (`lo`, bridges, ifb) are skipped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetdevFacts {
    pub(crate) netdev: Netdev,
    pub(crate) bdf: Bdf,
}

pub(crate) fn pci_netdevs(fs: &FsRoot) -> Vec<NetdevFacts> {
    fs.list("/sys/class/net")
        .into_iter()
        .filter_map(|name| {
            let base = format!("/sys/class/net/{name}");
            let bdf = owning_pci_function(fs, &format!("{base}/device"))?;
            // `speed` is -1 or unreadable (EINVAL) when the link is down or the driver is silent.
            let speed_mbps = fs
                .read_trimmed(&format!("{base}/speed"))
                .and_then(|s| s.parse::<i64>().ok())
                .filter(|s| *s > 0)
                .and_then(|s| u64::try_from(s).ok());
            Some(NetdevFacts {
                netdev: Netdev {
                    operstate: fs.read_trimmed(&format!("{base}/operstate")),
                    speed_mbps,
                    mtu: fs.read_trimmed(&format!("{base}/mtu")).and_then(|s| s.parse().ok()),
                    name,
                },
                bdf,
            })
        })
        .collect()
}

/// What `/proc/irq/N/` and `/sys/kernel/irq/N/` say about one interrupt.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct IrqFacts {
    pub(crate) affinity: Option<CpuList>,
    pub(crate) effective: Option<CpuList>,
    /// `affinity_hint` (a hex mask; all zeros means no hint).
    pub(crate) hint: Option<CpuList>,
    /// `/sys/kernel/irq/N/actions` (comma-separated action names), a fallback for names.
    pub(crate) actions: Option<String>,
}

pub(crate) fn irq_facts(fs: &FsRoot, irq: u32) -> IrqFacts {
    let read = |f: &str| {
        fs.read(&format!("/proc/irq/{irq}/{f}"))
            .and_then(|s| CpuList::parse(&s).ok())
    };
    IrqFacts {
        affinity: read("smp_affinity_list"),
        effective: read("effective_affinity_list"),
        hint: fs
            .read(&format!("/proc/irq/{irq}/affinity_hint"))
            .and_then(|s| CpuList::parse_mask(&s).ok())
            .filter(|h| !h.is_empty()),
        actions: fs.read_trimmed(&format!("/sys/kernel/irq/{irq}/actions")),
    }
}
