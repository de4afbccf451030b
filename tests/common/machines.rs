//! Concrete machines for the probe tests, built with [`FakeMachine`].

#![allow(dead_code)]

use super::fakesys::{FakeMachine, Pci, Port};
use std::path::Path;

const NVIDIA: u16 = 0x10de;
const MELLANOX: u16 = 0x15b3;
const BROADCOM: u16 = 0x1000;
const INTEL: u16 = 0x8086;
const H200: u16 = 0x2335;
const CX7: u16 = 0x1021;
const PEX: u16 = 0xc010;

/// GID table of a RoCE port as mlx5 fills it: link-local v1/v2, then IPv4-mapped v1/v2.
pub(crate) const ROCE_GIDS: [(&str, &str); 4] = [
    ("IB/RoCE v1", "fe80:0000:0000:0000:ba3f:d2ff:fe00:0001"),
    ("RoCE v2", "fe80:0000:0000:0000:ba3f:d2ff:fe00:0001"),
    ("IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a00:0107"),
    ("RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:0107"),
];

/// One PCIe switch on its own root bus (as on Xeon SP, one root complex per switch):
/// root port → switch upstream → 4 downstream ports → GPU, GPU, NIC, NIC.
pub(crate) struct SwitchSlot {
    pub root_port: &'static str,
    pub upstream: &'static str,
    pub downstream: [&'static str; 4],
    pub endpoints: [&'static str; 4],
    pub first_bus: u8,
}

pub(crate) const DGX_SWITCHES: [SwitchSlot; 4] = [
    SwitchSlot {
        root_port: "0000:17:00.0",
        upstream: "0000:18:00.0",
        downstream: ["0000:19:00.0", "0000:19:01.0", "0000:19:02.0", "0000:19:03.0"],
        endpoints: ["0000:1a:00.0", "0000:1b:00.0", "0000:1c:00.0", "0000:1d:00.0"],
        first_bus: 0x18,
    },
    SwitchSlot {
        root_port: "0000:3a:00.0",
        upstream: "0000:3b:00.0",
        downstream: ["0000:3c:00.0", "0000:3c:01.0", "0000:3c:02.0", "0000:3c:03.0"],
        endpoints: ["0000:3d:00.0", "0000:3e:00.0", "0000:3f:00.0", "0000:40:00.0"],
        first_bus: 0x3b,
    },
    SwitchSlot {
        root_port: "0000:85:00.0",
        upstream: "0000:86:00.0",
        downstream: ["0000:87:00.0", "0000:87:01.0", "0000:87:02.0", "0000:87:03.0"],
        endpoints: ["0000:88:00.0", "0000:89:00.0", "0000:8a:00.0", "0000:8b:00.0"],
        first_bus: 0x86,
    },
    SwitchSlot {
        root_port: "0000:ae:00.0",
        upstream: "0000:af:00.0",
        downstream: ["0000:b0:00.0", "0000:b0:01.0", "0000:b0:02.0", "0000:b0:03.0"],
        endpoints: ["0000:b1:00.0", "0000:b2:00.0", "0000:b3:00.0", "0000:b4:00.0"],
        first_bus: 0xaf,
    },
];

/// A 2-socket, 64-CPU (2 × 16 cores × 2 threads), 8-GPU, 8-NIC server: 4 PCIe switches,
/// each with 2 H200s and 2 ConnectX-7s. GPU3 trained at x8. mlx5_6 and mlx5_7 are RoCE
/// (GID 1 and 3 are RoCE v2), the others InfiniBand NDR. mlx5 IRQs all sit on CPU 0.
pub(crate) fn dgx_like(root: &Path) -> FakeMachine {
    let mut m = FakeMachine::new(root, "gpu-node-01");
    m.cpus(2, 16, 2);
    // Management NIC on the first root bus.
    m.pci(
        Pci::new("0000:00:1f.6", None, 0x020000, INTEL, 0x15b9, 0)
            .driver("e1000e")
            .link("2.5 GT/s PCIe", 1, "2.5 GT/s PCIe", 1),
    );
    m.netdev("0000:00:1f.6", "eno1", 1000, "up");
    m.virtual_netdev("lo");
    let mut nic = 0;
    let mut irq = 100u32;
    for (s, slot) in DGX_SWITCHES.iter().enumerate() {
        let (rp, up, downs, ends, first) = (
            slot.root_port,
            slot.upstream,
            &slot.downstream,
            &slot.endpoints,
            &slot.first_bus,
        );
        let numa = if s < 2 { 0 } else { 1 };
        m.pci(Pci::new(rp, None, 0x060400, INTEL, 0x352a, numa).bridge(*first, first + 5));
        m.pci(Pci::new(up, Some(rp), 0x060400, BROADCOM, PEX, numa).bridge(first + 1, first + 5));
        for (i, down) in downs.iter().enumerate() {
            let bus = first + 2 + i as u8;
            m.pci(Pci::new(down, Some(up), 0x060400, BROADCOM, PEX, numa).bridge(bus, bus));
        }
        for (i, ep) in ends.iter().enumerate() {
            if i < 2 {
                let gpu = s * 2 + i;
                let mut d = Pci::new(ep, Some(downs[i]), 0x030200, NVIDIA, H200, numa).driver("nvidia");
                if gpu == 3 {
                    d = d.link("32.0 GT/s PCIe", 8, "32.0 GT/s PCIe", 16);
                }
                m.pci(d);
            } else {
                dgx_nic(&mut m, ep, downs[i], numa, nic, irq);
                irq += 9;
                nic += 1;
            }
        }
    }
    m.finish_interrupts();
    m
}

/// One ConnectX-7 of `dgx_like`: IB NDR, or RoCE from the seventh on; 1 control and 8
/// completion vectors from `irq`, all aimed at CPU 0.
fn dgx_nic(m: &mut FakeMachine, ep: &'static str, down: &'static str, numa: i32, nic: usize, irq: u32) {
    let name: &'static str = Box::leak(format!("mlx5_{nic}").into_boxed_str());
    let netdev: &'static str =
        Box::leak(format!("ibp{}s0", u8::from_str_radix(&ep[5..7], 16).unwrap()).into_boxed_str());
    m.pci(
        Pci::new(
            ep,
            Some(down),
            if nic >= 6 { 0x020000 } else { 0x020700 },
            MELLANOX,
            CX7,
            numa,
        )
        .driver("mlx5_core"),
    );
    m.netdev(ep, netdev, if nic >= 6 { 400000 } else { -1 }, "up");
    let port = if nic >= 6 {
        Port {
            state: "4: ACTIVE",
            rate: "400 Gb/sec (4X NDR)",
            link_layer: "Ethernet",
            gids: ROCE_GIDS.to_vec(),
            ndev: Some(netdev),
        }
    } else {
        Port {
            state: "4: ACTIVE",
            rate: "400 Gb/sec (4X NDR)",
            link_layer: "InfiniBand",
            gids: vec![("IB/RoCE v1", "fe80:0000:0000:0000:0000:0000:0000:0001")],
            ndev: None,
        }
    };
    m.rdma(ep, name, &[port]);
    // Kernel ≥ 6.4 naming: vector 0 is the control IRQ, then completion vectors.
    let mut vectors = vec![(irq, format!("mlx5_async0@pci:{ep}"), vec![7u64], "0-63".to_string())];
    for c in 0..8u32 {
        let mut per_cpu = vec![0u64; 64];
        per_cpu[0] = 100_000 + u64::from(c);
        vectors.push((irq + 1 + c, format!("mlx5_comp{c}@pci:{ep}"), per_cpu, "0".to_string()));
    }
    m.msix(ep, &vectors);
}

/// The real H200 VM of `tests/data/h200-vm` (Firecracker, 16 vCPUs, `numa_node = -1` on every
/// device, all functions on the root bus), rebuilt from its captured sysfs attributes and its
/// captured `/proc/interrupts`.
pub(crate) fn h200_vm(root: &Path) -> FakeMachine {
    let mut m = FakeMachine::new(root, "h200-vm");
    m.cpus(1, 16, 1).hypervisor();
    // The captured kernel and command line.
    m.write("/proc/sys/kernel/osrelease", "6.18.44-fc-v657-gpu\n");
    let cmdline = include_str!("../data/h200-vm/cmdline.txt");
    m.write("/proc/cmdline", cmdline.lines().nth(1).unwrap_or_default());
    let pci: serde_json::Value = serde_json::from_str(include_str!("../data/h200-vm/pci.json")).unwrap();
    for d in pci.as_array().unwrap() {
        let s = |k: &str| d[k].as_str().map(|v| v.to_string());
        let bdf: &'static str = Box::leak(s("bdf").unwrap().into_boxed_str());
        let hex = |k: &str| u32::from_str_radix(s(k).unwrap().trim_start_matches("0x"), 16).unwrap();
        let mut p = Pci::new(
            bdf,
            None,
            hex("class"),
            hex("vendor") as u16,
            hex("device") as u16,
            s("numa_node").unwrap().parse().unwrap(),
        );
        p = match (
            s("current_link_speed"),
            s("current_link_width"),
            s("max_link_speed"),
            s("max_link_width"),
        ) {
            (Some(cs), Some(cw), Some(ms), Some(mw)) => p.link(
                Box::leak(cs.into_boxed_str()),
                cw.parse().unwrap(),
                Box::leak(ms.into_boxed_str()),
                mw.parse().unwrap(),
            ),
            _ => p.no_link(),
        };
        if let Some(drv) = s("driver").filter(|d| d != "driver") {
            p = p.driver(Box::leak(drv.into_boxed_str()));
        }
        m.pci(p);
        if let Some(irqs) = d["msi_irqs"].as_array() {
            for irq in irqs {
                m.write(
                    &format!("{}/msi_irqs/{}", sys_path(bdf), irq.as_str().unwrap()),
                    "msix\n",
                );
            }
        }
    }
    // eth0 is virtio: its netdev hangs below the virtio device, under the PCI function.
    m.write(
        "/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/operstate",
        "up\n",
    );
    m.write("/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/mtu", "1500\n");
    symlink_in(
        root,
        "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
        "../../../virtio2",
    );
    symlink_in(
        root,
        "sys/class/net/eth0",
        "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
    );
    m.virtual_netdev("lo");
    std::fs::create_dir_all(root.join("sys/class/infiniband")).unwrap();
    let captured = include_str!("../data/h200-vm/interrupts.txt");
    let body: String = captured
        .lines()
        .filter(|l| !l.starts_with("$ ") && !l.starts_with("rc="))
        .map(|l| format!("{l}\n"))
        .collect();
    m.write("/proc/interrupts", &body);
    m
}

fn sys_path(bdf: &str) -> String {
    format!("/sys/devices/pci{}/{bdf}", &bdf[..7])
}

fn symlink_in(root: &Path, path: &str, target: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, p).unwrap();
}

/// A CPU-only server: one socket, one Ethernet NIC, no GPU.
pub(crate) fn cpu_only(root: &Path) -> FakeMachine {
    let mut m = FakeMachine::new(root, "cpu-node");
    m.cpus(1, 8, 2);
    m.pci(Pci::new("0000:00:1f.6", None, 0x020000, INTEL, 0x15b9, 0).driver("e1000e"));
    m.netdev("0000:00:1f.6", "eno1", 10000, "up");
    m.finish_interrupts();
    m
}

/// NVML's answers for the H200 VM, transcribed from `tests/data/h200-vm/nvml.txt`.
pub(crate) fn h200_vm_nvml() -> String {
    serde_json::json!({
        "driver_version": "580.159.04",
        "gpus": [{
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-8c8a8658-d495-2e0f-c468-6fb7127a3798",
            "bus_id": "00000000:00:06.0",
            "numa_node": null,
            "pcie_current_gen": 5, "pcie_current_width": 16, "pcie_max_gen": 5, "pcie_max_width": 16,
            "cpu_affinity": "0-15",
            "compute_capability": [9, 0],
            "nvlinks": []
        }]
    })
    .to_string()
}

/// How mlx5 names its vectors (research/irq.md §2.1).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mlx5Naming {
    /// ≥ 6.4: `mlx5_async0` first, then `mlx5_comp0..`.
    Modern,
    /// ≤ 5.x: `mlx5_pages_eq`, `mlx5_cmd_eq`, `mlx5_async_eq`, then `mlx5_comp0..`.
    Old,
}

/// The irq-pin test machine: 2 sockets × 16 cores × 2 threads (64 CPUs, masks beyond 32
/// bits), 4 mlx5 NICs (2 per socket) × 16 completion vectors, every vector on CPU 0 with
/// all of its interrupts counted there; IRQ 205 is kernel-managed (0444); irqbalance runs.
pub(crate) fn irq_box(root: &Path, naming: Mlx5Naming) -> FakeMachine {
    let mut m = FakeMachine::new(root, "irq-node");
    m.cpus(2, 16, 2);
    let mut irq = 200u32;
    for (k, (bdf, numa)) in [
        ("0000:17:00.0", 0),
        ("0000:18:00.0", 0),
        ("0000:85:00.0", 1),
        ("0000:86:00.0", 1),
    ]
    .into_iter()
    .enumerate()
    {
        m.pci(Pci::new(bdf, None, 0x020700, MELLANOX, CX7, numa).driver("mlx5_core"));
        let name: &'static str = Box::leak(format!("mlx5_{k}").into_boxed_str());
        m.rdma(
            bdf,
            name,
            &[Port {
                state: "4: ACTIVE",
                rate: "400 Gb/sec (4X NDR)",
                link_layer: "InfiniBand",
                gids: vec![],
                ndev: None,
            }],
        );
        let control: Vec<String> = match naming {
            Mlx5Naming::Modern => vec![format!("mlx5_async0@pci:{bdf}")],
            Mlx5Naming::Old => vec![
                format!("mlx5_pages_eq@pci:{bdf}"),
                format!("mlx5_cmd_eq@pci:{bdf}"),
                format!("mlx5_async_eq@pci:{bdf}"),
            ],
        };
        let mut vectors = Vec::new();
        for c in control {
            vectors.push((irq, c, vec![3u64], "0-63".to_string()));
            irq += 1;
        }
        for c in 0..16 {
            let mut per_cpu = vec![0u64; 64];
            per_cpu[0] = 5_000;
            vectors.push((irq, format!("mlx5_comp{c}@pci:{bdf}"), per_cpu, "0".to_string()));
            irq += 1;
        }
        m.msix(bdf, &vectors);
    }
    m.finish_interrupts();
    // A kernel-managed vector: 6.12+ makes its affinity files read-only.
    use std::os::unix::fs::PermissionsExt;
    let managed = root.join("proc/irq/205/smp_affinity_list");
    std::fs::set_permissions(&managed, std::fs::Permissions::from_mode(0o444)).unwrap();
    m.write("/proc/4242/comm", "irqbalance\n");
    m.write("/etc/default/irqbalance", "#IRQBALANCE_ONESHOT=\n#IRQBALANCE_ARGS=\n");
    m
}

/// The NVSwitches of an HGX H100/H200 board as PCI shows them (class 0x0680, NVIDIA 22a3),
/// each on its own root bus.
pub(crate) const HGX_NVSWITCHES: [&str; 4] = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"];

/// The GPU bus ids of `dgx_like`, in NVML's order.
pub(crate) fn dgx_gpu_bdfs() -> Vec<&'static str> {
    DGX_SWITCHES
        .iter()
        .flat_map(|s| [s.endpoints[0], s.endpoints[1]])
        .collect()
}

/// `dgx_like` as a healthy HGX H200 node in every respect doctor's node checks look at
/// beyond interrupts and PCIe links: NVSwitches on PCI and Fabric Manager running,
/// nvidia_peermem loaded, locked memory unlimited, `iommu=pt` with identity IOMMU groups,
/// ACS redirect off on every switch port (SrcValid and UpstreamFwd on, as a BIOS leaves them),
/// RDMA error counters at zero.
pub(crate) fn hgx_node(root: &Path) -> FakeMachine {
    let mut m = dgx_like(root);
    for bdf in HGX_NVSWITCHES {
        m.pci(
            Pci::new(bdf, None, 0x068000, NVIDIA, 0x22a3, 0)
                .driver("nvidia-nvswitch")
                .no_link(),
        );
    }
    m.write("/proc/sys/kernel/osrelease", "6.8.0-51-generic\n");
    m.write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct 28 10:12:41 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n",
    );
    m.write("/sys/module/nvidia_peermem/version", "580.159.04\n");
    m.write("/proc/4100/comm", "nv-fabricmanage\n");
    m.write(
        "/etc/systemd/system.conf",
        "[Manager]\n#DefaultLimitNOFILE=1024:524288\nDefaultLimitMEMLOCK=infinity\n",
    );
    m.write(
        "/etc/security/limits.d/99-rdma.conf",
        "* soft memlock unlimited\n* hard memlock unlimited\n",
    );
    m.write(
        "/proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic root=UUID=3f1c ro quiet splash iommu=pt\n",
    );
    m.write("/sys/class/iommu/dmar0/devices/.keep", "");
    for (g, bdf) in DGX_SWITCHES.iter().flat_map(|s| s.endpoints).enumerate() {
        m.iommu_group(bdf, 40 + g as u32, "identity");
    }
    for s in &DGX_SWITCHES {
        m.acs_control(s.upstream, 0);
        for d in s.downstream {
            m.acs_control(d, 0x0011);
        }
    }
    for nic in 0..8 {
        for c in ["link_downed", "symbol_error"] {
            m.write(&format!("/sys/class/infiniband/mlx5_{nic}/ports/1/counters/{c}"), "0\n");
        }
    }
    m
}

/// NVML's answers for `hgx_node`: 8 H200s, 18 NVLinks each to the NVSwitches, active at
/// 26562 MB/s, the fabric registered (an HGX board's own: cluster UUID zero).
pub(crate) fn hgx_nvml() -> serde_json::Value {
    let gpus: Vec<serde_json::Value> = dgx_gpu_bdfs()
        .iter()
        .enumerate()
        .map(|(i, bdf)| {
            let links: Vec<serde_json::Value> = (0..18)
                .map(|l| {
                    serde_json::json!({"link": l, "active": true, "version": 4,
                        "remote_bus_id": format!("0000{}", HGX_NVSWITCHES[l % 4])})
                })
                .collect();
            serde_json::json!({
                "index": i, "name": "NVIDIA H200", "uuid": format!("GPU-{i}"), "bus_id": format!("0000{bdf}"),
                "numa_node": null, "pcie_current_gen": 5, "pcie_current_width": if i == 3 { 8 } else { 16 },
                "pcie_max_gen": 5, "pcie_max_width": 16,
                "cpu_affinity": if i < 4 { "0-15,32-47" } else { "16-31,48-63" },
                "compute_capability": [9, 0], "nvlinks": links, "nvlink_speed_mbps": 26562,
                "fabric": {"ret": 0, "version": 3, "cluster_uuid": "00000000000000000000000000000000",
                    "status": 0, "clique_id": 0, "state": 3, "health_mask": 0xaa, "health_summary": 1}
            })
        })
        .collect();
    serde_json::json!({"driver_version": "580.159.04", "gpus": gpus})
}

const GB200: u16 = 0x2941;

/// The GPUs of `gb200_tray`, in NVML's order (each on its own PCI domain, as on a tray).
pub(crate) const GB200_GPUS: [&str; 4] = ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"];

/// One compute tray of a GB200 NVL72 rack: two Grace CPUs (72 cores each), four GB200 GPUs,
/// four ConnectX-7 (InfiniBand NDR), healthy: IMEX running with the rack's 18 trays in its
/// node list and channel 0 made, locked memory unlimited.
pub(crate) fn gb200_tray(root: &Path) -> FakeMachine {
    let mut m = FakeMachine::new(root, "gb-tray-01");
    m.cpus(2, 72, 1);
    for (i, bdf) in GB200_GPUS.iter().enumerate() {
        m.pci(Pci::new(bdf, None, 0x030200, NVIDIA, GB200, (i / 2) as i32).driver("nvidia"));
    }
    for (i, bdf) in ["0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0"]
        .iter()
        .enumerate()
    {
        m.pci(Pci::new(bdf, None, 0x020700, MELLANOX, CX7, (i / 2) as i32).driver("mlx5_core"));
        let name: &'static str = Box::leak(format!("mlx5_{i}").into_boxed_str());
        m.rdma(
            bdf,
            name,
            &[Port {
                state: "4: ACTIVE",
                rate: "400 Gb/sec (4X NDR)",
                link_layer: "InfiniBand",
                gids: vec![("IB/RoCE v1", "fe80:0000:0000:0000:0000:0000:0000:0001")],
                ndev: None,
            }],
        );
    }
    m.finish_interrupts();
    m.write("/proc/sys/kernel/osrelease", "6.8.0-1021-nvidia-64k\n");
    m.write("/sys/module/nvidia_peermem/version", "580.159.04\n");
    m.write("/proc/4200/comm", "nvidia-imex\n");
    let ips: String = (1..=18).map(|t| format!("10.0.8.{t}\n")).collect();
    m.write("/etc/nvidia-imex/nodes_config.cfg", &ips);
    m.write("/dev/nvidia-caps-imex-channels/channel0", "");
    m.write(
        "/etc/security/limits.d/99-rdma.conf",
        "* soft memlock unlimited\n* hard memlock unlimited\n",
    );
    m
}

/// NVML's answers for `gb200_tray`: 18 NVLinks per GPU to the rack's switch trays (which
/// the tray cannot see), 53125 MB/s, every GPU in one NVLink domain, healthy (`0x1aa`: the
/// four flags false, configuration correct).
pub(crate) fn gb200_nvml() -> serde_json::Value {
    let gpus: Vec<serde_json::Value> = GB200_GPUS
        .iter()
        .enumerate()
        .map(|(i, bdf)| {
            let links: Vec<serde_json::Value> = (0..18)
                .map(|l| serde_json::json!({"link": l, "active": true, "version": 5, "remote_bus_id": "00000000:FF:00.0"}))
                .collect();
            serde_json::json!({
                "index": i, "name": "NVIDIA GB200", "uuid": format!("GPU-gb-{i}"), "bus_id": format!("0000{bdf}"),
                "numa_node": null, "pcie_current_gen": 5, "pcie_current_width": 16, "pcie_max_gen": 5, "pcie_max_width": 16,
                "cpu_affinity": if i < 2 { "0-71" } else { "72-143" },
                "compute_capability": [10, 0], "nvlinks": links, "nvlink_speed_mbps": 53125,
                "fabric": {"ret": 0, "version": 3, "cluster_uuid": "dc6e40c4d72243579ba65291dd461278",
                    "status": 0, "clique_id": 1, "state": 3, "health_mask": 0x1aa, "health_summary": 1}
            })
        })
        .collect();
    serde_json::json!({"driver_version": "580.159.04", "gpus": gpus})
}
