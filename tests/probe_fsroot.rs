//! `topo-tune probe --fsroot` on fake machines built in the kernel's formats, read by real hwloc.

use crate::common::{machines, probe_json, tt};
use topo_tune::api::path_matrix;
use topo_tune::api::snapshot::*;
use topo_tune::api::PathClass;

fn dgx() -> (tempfile::TempDir, NodeSnapshot) {
    let dir = tempfile::tempdir().unwrap();
    machines::dgx_like(dir.path());
    let snap = probe_json(&["--fsroot", dir.path().to_str().unwrap()]);
    (dir, snap)
}

#[test]
fn two_socket_eight_gpu_machine_is_counted_right() {
    let (_dir, s) = dgx();
    assert_eq!(s.hostname, "gpu-node-01");
    assert_eq!(s.source.kind, SourceKind::Fsroot);
    assert_eq!(s.machine.kernel.as_deref(), Some("6.8.0-fake"));
    assert_eq!((s.cpu.packages, s.cpu.cores, s.cpu.pus), (Some(2), Some(32), Some(64)));
    assert_eq!(s.numa_nodes.len(), 2);
    assert_eq!(s.numa_nodes[0].cpus.to_string(), "0-15,32-47");
    assert_eq!(s.numa_nodes[1].cpus.to_string(), "16-31,48-63");
    assert_eq!(s.gpus.len(), 8);
    assert_eq!(s.nics.iter().filter(|n| n.kind == NicKind::Rdma).count(), 8);
    assert_eq!(
        s.nics.iter().filter(|n| n.kind == NicKind::Ethernet).count(),
        1,
        "eno1; lo is virtual"
    );
    // Four switches, each counted once although each is five bridges (1 up + 4 down).
    assert_eq!(s.pci.switches.len(), 4);
    assert!(s
        .pci
        .switches
        .iter()
        .all(|sw| sw.downstream_ports.len() == 4 && sw.pci_id.as_deref() == Some("1000:c010")));
    assert!(s.pci.switches_visible);
    assert_eq!(s.pci.host_bridges.len(), 5, "root buses 00, 17, 3a, 85, ae");
    assert_eq!(
        s.pci.bridges.iter().filter(|b| b.role == BridgeRole::RootPort).count(),
        4
    );
}

#[test]
fn gpu_facts_locality_and_degraded_link() {
    let (_dir, s) = dgx();
    let gpu0 = &s.gpus[0];
    assert_eq!(gpu0.placement.bdf.to_string(), "0000:1a:00.0");
    assert_eq!(gpu0.placement.pci_id.as_deref(), Some("10de:2335"));
    assert_eq!(gpu0.placement.numa_node, Some(0));
    assert_eq!(gpu0.placement.cpu_affinity.to_string(), "0-15,32-47");
    assert_eq!(gpu0.source, GpuSource::Pci);
    assert_eq!(
        gpu0.nvlinks, None,
        "no NVML for a machine described by files: NVLink unknown"
    );
    assert_eq!(s.gpus[4].placement.numa_node, Some(1));
    let gpu3 = &s.gpus[3];
    assert_eq!(gpu3.placement.pcie.current_width, Some(8));
    assert_eq!(gpu3.placement.pcie.max_width, Some(16));
    assert_eq!(
        gpu3.placement.pcie.degradation(),
        Some(topo_tune::api::Degradation::Width)
    );
    let degraded: Vec<&Note> = s.notes.iter().filter(|n| n.code == "pcie-degraded").collect();
    assert_eq!(degraded.len(), 1, "{degraded:?}");
    assert_eq!(degraded[0].level, NoteLevel::Warn);
    assert!(degraded[0].message.contains("GPU3") && degraded[0].message.contains("Gen5 x8 (max Gen5 x16)"));
    assert!(s.notes.iter().any(|n| n.code == "nvlink-unknown"));
}

#[test]
fn rdma_ports_roce_gids_netdevs_and_irqs() {
    let (_dir, s) = dgx();
    let names: Vec<&str> = s.nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        &names[..8],
        ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]
    );
    let ib = &s.nics[0];
    let port = &ib.rdma.as_ref().unwrap().ports[0];
    assert_eq!(
        (port.port, port.state.as_deref(), port.state_code),
        (1, Some("ACTIVE"), Some(4))
    );
    assert_eq!(port.link_layer, LinkLayer::InfiniBand);
    assert_eq!(port.rate_gbps, Some(400.0));
    assert!(port.roce_v2_gid_indexes.is_empty());
    assert_eq!(ib.netdevs[0].name, "ibp28s0");
    assert_eq!(ib.netdevs[0].speed_mbps, None, "speed -1 means unknown");
    assert_eq!(ib.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(ib.pci.as_ref().unwrap().bdf.to_string(), "0000:1c:00.0");

    let roce = &s.nics[6];
    let rport = &roce.rdma.as_ref().unwrap().ports[0];
    assert_eq!(rport.link_layer, LinkLayer::Ethernet);
    assert_eq!(rport.roce_v2_gid_indexes, vec![1, 3], "GID 3 (IPv4-mapped) is RoCE v2");
    assert_eq!(rport.netdev.as_deref(), Some("ibp179s0"));
    assert_eq!(roce.netdevs[0].speed_mbps, Some(400000));

    // IRQs: msi_irqs joined with /proc/interrupts names, counts and /proc/irq affinity.
    assert_eq!(ib.irqs.len(), 9);
    assert_eq!(ib.irqs[0].class, IrqClass::Control);
    assert_eq!(ib.irqs[0].name.as_deref(), Some("mlx5_async0@pci:0000:1c:00.0"));
    let comp = &ib.irqs[1];
    assert_eq!(comp.class, IrqClass::Completion);
    assert_eq!(comp.name.as_deref(), Some("mlx5_comp0@pci:0000:1c:00.0"));
    assert_eq!(comp.count, Some(100_000));
    assert_eq!(comp.affinity.as_ref().map(|a| a.to_string()).as_deref(), Some("0"));
    assert_eq!(s.nics[8].name, "eno1");
    assert!(s.nics[8].rdma.is_none());
}

#[test]
fn path_matrix_classes_follow_the_tree() {
    let (_dir, s) = dgx();
    let m = path_matrix(&s);
    let labels: Vec<&str> = m.devices.iter().map(|d| d.label.as_str()).collect();
    assert_eq!(
        labels.len(),
        16,
        "8 GPUs + 8 RDMA NICs (plain Ethernet is not in the matrix)"
    );
    let idx = |l: &str| labels.iter().position(|x| *x == l).unwrap();
    let c = |a: &str, b: &str| m.classes[idx(a)][idx(b)];
    assert_eq!(c("GPU0", "GPU0"), PathClass::SelfPath);
    assert_eq!(c("GPU0", "GPU1"), PathClass::Pix, "same switch");
    assert_eq!(c("GPU0", "NIC0"), PathClass::Pix);
    assert_eq!(c("GPU0", "GPU2"), PathClass::Node, "other root complex, same socket");
    assert_eq!(c("GPU0", "GPU4"), PathClass::Sys, "other socket");
    assert_eq!(c("NIC7", "GPU6"), PathClass::Pix);
    for i in 0..labels.len() {
        for j in 0..labels.len() {
            assert_eq!(m.classes[i][j], m.classes[j][i], "matrix must be symmetric");
        }
    }
    assert_eq!(
        m.devices[idx("GPU3")].degraded_link.as_deref(),
        Some("Gen5 x8 (max Gen5 x16)")
    );
    assert_eq!(m.devices[idx("GPU4")].numa_affinity, "1");
}

#[test]
fn matrix_output_has_nvidia_smi_legend_and_flags_the_x8_gpu() {
    let dir = tempfile::tempdir().unwrap();
    machines::dgx_like(dir.path());
    let out = tt(["probe", "--matrix", "--fsroot"]).arg(dir.path()).run();
    assert!(out.status.success());
    let text = String::from_utf8(out.0.stdout).unwrap();
    assert!(text.contains(topo_tune::api::LEGEND));
    assert!(text.contains("NIC Legend:\n\n  NIC0: mlx5_0\n"));
    let gpu3 = text.lines().find(|l| l.starts_with("GPU3 ")).unwrap();
    assert!(gpu3.contains("DEGRADED Gen5 x8 (max Gen5 x16)"), "{gpu3}");
    assert!(
        gpu3.split_whitespace().nth(1) == Some("NODE"),
        "GPU3→GPU0 is NODE: {gpu3}"
    );
}

#[test]
fn vm_with_unknown_numa_stays_unknown() {
    let dir = tempfile::tempdir().unwrap();
    machines::h200_vm(dir.path());
    let s = probe_json(&["--fsroot", dir.path().to_str().unwrap()]);
    assert_eq!(s.gpus.len(), 1);
    let g = &s.gpus[0].placement;
    assert_eq!(g.bdf.to_string(), "0000:00:06.0");
    assert_eq!(g.numa_node, None, "numa_node -1 is unknown, never 0");
    assert_eq!(
        g.numa_affinity,
        vec![0],
        "derived from CPU affinity, as nvidia-smi does"
    );
    assert_eq!(g.cpu_affinity.to_string(), "0-15");
    assert_eq!((g.pcie.current_gen, g.pcie.current_width), (Some(5), Some(16)));
    assert!(s
        .notes
        .iter()
        .any(|n| n.code == "numa-unknown" && n.message.contains("GPU0")));
    assert!(s.notes.iter().any(|n| n.code == "switches-not-visible"));
    assert!(!s.pci.switches_visible);
    assert!(s.pci.switches.is_empty());
    // No RDMA NIC; eth0 is virtio, found through its virtio child device.
    assert_eq!(s.nics.len(), 1);
    assert_eq!(s.nics[0].name, "eth0");
    assert_eq!(s.nics[0].pci.as_ref().unwrap().bdf.to_string(), "0000:00:03.0");
    assert_eq!(s.nics[0].irqs.len(), 3, "msi_irqs 34-36 of the capture");
    assert_eq!(s.nics[0].irqs[0].name.as_deref(), Some("virtio2-config"));
}

#[test]
fn vm_with_recorded_nvml_answers_matches_nvidia_smi() {
    let dir = tempfile::tempdir().unwrap();
    machines::h200_vm(dir.path().join("root").as_path());
    let fixture = dir.path().join("nvml.json");
    std::fs::write(&fixture, machines::h200_vm_nvml()).unwrap();
    let root = dir.path().join("root");
    let s = probe_json(&[
        "--fsroot",
        root.to_str().unwrap(),
        "--nvml-fixture",
        fixture.to_str().unwrap(),
    ]);
    let smi = include_str!("data/h200-vm/smi-q-x.txt");
    let g = &s.gpus[0];
    assert_eq!(g.source, GpuSource::Nvml);
    assert!(smi.contains(&format!("<product_name>{}</product_name>", g.name)));
    assert!(smi.contains(&format!("<uuid>{}</uuid>", g.uuid.as_deref().unwrap())));
    assert!(smi.contains(&format!(
        "<current_link_gen>{}</current_link_gen>",
        g.placement.pcie.current_gen.unwrap()
    )));
    assert!(smi.contains(&format!(
        "<current_link_width>{}x</current_link_width>",
        g.placement.pcie.current_width.unwrap()
    )));
    assert_eq!(g.nvlinks, Some(vec![]), "NVML answered: no NVLink at all");
    // The matrix row is nvidia-smi's: `GPU0  X  0-15  0`.
    let out = tt(["probe", "--matrix", "--fsroot"])
        .arg(&root)
        .arg("--nvml-fixture")
        .arg(&fixture)
        .run();
    let text = String::from_utf8(out.0.stdout).unwrap();
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("GPU0"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row, ["GPU0", "X", "0-15", "0", "ok"]);
    let captured = include_str!("data/h200-vm/topo-m.txt");
    let smi_row: Vec<&str> = captured
        .lines()
        .find(|l| l.starts_with("GPU0"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], &smi_row[..4]);
}

#[test]
fn machine_without_gpu_is_a_note_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    machines::cpu_only(dir.path());
    let s = probe_json(&["--fsroot", dir.path().to_str().unwrap()]);
    assert!(s.gpus.is_empty());
    assert!(s.notes.iter().any(|n| n.code == "no-gpu"));
    assert_eq!(s.nics.len(), 1);
}

#[test]
fn truncated_proc_interrupts_is_reported_and_the_rest_still_probed() {
    let dir = tempfile::tempdir().unwrap();
    machines::dgx_like(dir.path());
    let path = dir.path().join("proc/interrupts");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    let s = probe_json(&["--fsroot", dir.path().to_str().unwrap()]);
    let note = s
        .notes
        .iter()
        .find(|n| n.code == "interrupts-unreadable")
        .expect("a note about /proc/interrupts");
    assert_eq!(note.level, NoteLevel::Warn);
    assert!(note.message.contains("truncated"), "{}", note.message);
    assert_eq!(s.gpus.len(), 8);
    // Names still come from /sys/kernel/irq/N/actions; counts are unknown.
    let irqs = &s.nics[0].irqs;
    assert!(irqs.iter().all(|i| i.count.is_none()));
    assert_eq!(irqs[1].name.as_deref(), Some("mlx5_comp0@pci:0000:1c:00.0"));
    assert_eq!(irqs[1].class, IrqClass::Completion);
    assert_eq!(irqs[0].class, IrqClass::Control);
}

#[test]
fn snapshot_json_round_trips() {
    let (_dir, s) = dgx();
    let again = NodeSnapshot::from_json(&serde_json::to_string_pretty(&s).unwrap()).unwrap();
    assert_eq!(again, s);
    let value: serde_json::Value = serde_json::from_str(&serde_json::to_string_pretty(&s).unwrap()).unwrap();
    for key in ["schema_version", "gpus", "nics", "numa_nodes"] {
        assert!(value.get(key).is_some(), "top-level `{key}`");
    }
}

/// NVML answers for the 8 GPUs of `dgx_like`, with NVLink as `links(gpu)` describes it:
/// `(link count, remote bus id)` groups per GPU.
fn dgx_nvml(links: impl Fn(usize) -> Vec<(u32, String)>) -> String {
    let bdfs: Vec<&str> = machines::DGX_SWITCHES
        .iter()
        .flat_map(|s| [s.endpoints[0], s.endpoints[1]])
        .collect();
    let gpus: Vec<serde_json::Value> = bdfs
        .iter()
        .enumerate()
        .map(|(i, bdf)| {
            let mut n = 0;
            let mut nvlinks = vec![];
            for (count, remote) in links(i) {
                for _ in 0..count {
                    nvlinks.push(serde_json::json!({"link": n, "active": true, "version": 4, "remote_bus_id": remote}));
                    n += 1;
                }
            }
            serde_json::json!({
                "index": i, "name": "NVIDIA H200", "uuid": format!("GPU-{i}"), "bus_id": format!("0000{bdf}"),
                "numa_node": null, "pcie_current_gen": 5, "pcie_current_width": if i == 3 { 8 } else { 16 },
                "pcie_max_gen": 5, "pcie_max_width": 16,
                "cpu_affinity": if i < 4 { "0-15,32-47" } else { "16-31,48-63" },
                "compute_capability": [9, 0], "nvlinks": nvlinks
            })
        })
        .collect();
    serde_json::json!({"driver_version": "580.159.04", "gpus": gpus}).to_string()
}

fn probe_with_nvml(nvml: String) -> NodeSnapshot {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    machines::dgx_like(&root);
    let fixture = dir.path().join("nvml.json");
    std::fs::write(&fixture, nvml).unwrap();
    probe_json(&[
        "--fsroot",
        root.to_str().unwrap(),
        "--nvml-fixture",
        fixture.to_str().unwrap(),
    ])
}

#[test]
fn nvswitch_fabric_reads_nv18_between_every_gpu_pair() {
    // HGX H100/H200: 18 links per GPU, all to NVSwitches (remote ids that are not GPUs).
    let s = probe_with_nvml(dgx_nvml(|_| vec![(18, "00000000:FF:00.0".into())]));
    let g0 = &s.gpus[0];
    assert_eq!(g0.source, GpuSource::Nvml);
    let links = g0.nvlinks.as_ref().unwrap();
    assert_eq!(links.len(), 18);
    assert!(links
        .iter()
        .all(|l| l.remote == NvLinkPeer::Switch && l.bandwidth_gbps == Some(20.6)));
    let m = path_matrix(&s);
    for i in 0..8 {
        for j in 0..8 {
            let want = if i == j {
                PathClass::SelfPath
            } else {
                PathClass::NvLink(18)
            };
            assert_eq!(m.classes[i][j], want, "GPU{i}->GPU{j}");
        }
    }
    // GPU↔NIC stays PCIe.
    assert_eq!(m.classes[0][8], PathClass::Pix);
}

#[test]
fn nvlink_bridge_pairs_and_pcie_elsewhere() {
    // NCv4-like: GPUs paired by NVLink bridges (0-1, 2-3, ...), 4 links each way; no switch.
    let bdfs: Vec<&str> = machines::DGX_SWITCHES
        .iter()
        .flat_map(|s| [s.endpoints[0], s.endpoints[1]])
        .collect();
    let s = probe_with_nvml(dgx_nvml(|i| vec![(4, bdfs[i ^ 1].to_string())]));
    assert!(s.gpus[0]
        .nvlinks
        .as_ref()
        .unwrap()
        .iter()
        .all(|l| l.remote == NvLinkPeer::Gpu));
    let m = path_matrix(&s);
    assert_eq!(m.classes[0][1], PathClass::NvLink(4));
    assert_eq!(m.classes[2][3], PathClass::NvLink(4));
    assert_eq!(m.classes[0][2], PathClass::Node, "no NVLink between pairs: PCIe path");
    assert_eq!(m.classes[0][5], PathClass::Sys);
    // NVML's width for GPU3 (x8) is what the snapshot and the matrix report.
    assert_eq!(s.gpus[3].placement.pcie.current_width, Some(8));
    assert_eq!(m.devices[3].degraded_link.as_deref(), Some("Gen5 x8 (max Gen5 x16)"));
}

/// A small fake machine with one file replaced by `plant` (given the file's path).
fn planted(path: &str, plant: impl FnOnce(&std::path::Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    machines::cpu_only(dir.path());
    let target = dir.path().join(path);
    let _ = std::fs::remove_file(&target);
    plant(&target);
    dir
}

fn mkfifo(p: &std::path::Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// Every command that reads a `--fsroot` tree refuses the planted file by name, at once —
/// hwloc's own reader (plain `openat` under `HWLOC_FSROOT`) once waited on a FIFO for good.
fn refused_by_every_reader(dir: &std::path::Path, named: &str, why: &str) {
    let root = dir.to_str().unwrap();
    for words in [
        vec!["probe", "--fsroot", root],
        vec!["doctor", "--fsroot", root],
        vec!["irq-pin", "--dry-run", "--fsroot", root],
    ] {
        let ran = tt(&words).json().timeout(60).run();
        assert_eq!(ran.code(), Some(65), "{words:?}: {}", ran.stderr_text());
        let message = ran.doc()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(named) && message.contains(why), "{words:?}: {message}");
    }
}

#[test]
fn a_fifo_in_the_tree_is_refused_not_waited_on() {
    for path in ["proc/cpuinfo", "proc/cmdline", "sys/devices/system/cpu/online"] {
        let dir = planted(path, mkfifo);
        refused_by_every_reader(dir.path(), path, "FIFO");
    }
}

#[test]
fn a_fifo_where_hwloc_reads_a_nic_or_a_switch_port_is_refused() {
    // An InfiniBand port's state (topology-linux.c:6102) and a PCI device's config space.
    for file in [
        "sys/class/infiniband/mlx5_0/ports/1/state",
        "sys/bus/pci/devices/0000:17:00.0/config",
    ] {
        let dir = tempfile::tempdir().unwrap();
        machines::irq_box(dir.path(), machines::Mlx5Naming::Modern);
        let real = std::fs::canonicalize(dir.path().join(file)).unwrap();
        std::fs::remove_file(&real).unwrap();
        mkfifo(&real);
        let shown = real.strip_prefix(std::fs::canonicalize(dir.path()).unwrap()).unwrap();
        refused_by_every_reader(dir.path(), shown.to_str().unwrap(), "FIFO");
    }
}

#[test]
fn a_link_out_of_the_tree_is_refused() {
    // Absolute: hwloc's openat from the tree's root follows it to the host's /dev/zero.
    let dir = planted("proc/cpuinfo", |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    refused_by_every_reader(dir.path(), "proc/cpuinfo", "leads out of the tree");
    // Relative, climbing past the root.
    let dir = planted("sys/devices/system/cpu/online", |p| {
        std::os::unix::fs::symlink("../../../../../../../../../../dev/zero", p).unwrap()
    });
    refused_by_every_reader(dir.path(), "sys/devices/system/cpu/online", "leads out of the tree");
}

#[test]
fn an_oversized_file_in_the_tree_is_refused() {
    let dir = planted("sys/devices/system/cpu/online", |p| {
        std::fs::write(p, "0-7,".repeat(5 << 20)).unwrap()
    });
    refused_by_every_reader(dir.path(), "sys/devices/system/cpu/online", "larger than 16 MiB");
}

/// hwloc's reader of a tree runs in a child: a crash, a hang or a runaway allocation inside
/// it (made to happen here by the fault hook, as crafted content could make hwloc's C code
/// do) refuses the tree, and topo-tune answers.
#[test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs --features fault-injection")]
fn a_reader_that_crashes_hangs_or_runs_away_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("misbehaves");
    machines::cpu_only(&root);
    for (hook, said) in [
        ("TOPO_TUNE_FAULT_CRASH_ON", "died (signal 6)"),
        ("TOPO_TUNE_FAULT_HANG_ON", "ran past 2 s: stopped"),
        ("TOPO_TUNE_FAULT_HOG_ON", "within its limit of 2 GiB of memory"),
    ] {
        let started = std::time::Instant::now();
        let ran = tt(["probe", "--fsroot", root.to_str().unwrap()])
            .json()
            .env(hook, "misbehaves")
            .env("TOPO_TUNE_FAULT_CHILD_TIMEOUT_MS", "2000")
            .timeout(60)
            .run();
        assert_eq!(ran.code(), Some(65), "{hook}: {}", ran.stderr_text());
        let message = ran.doc()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(said), "{hook}: {message}");
        assert!(started.elapsed().as_secs() < 30, "{hook}: {:?}", started.elapsed());
    }
}
