//! doctor's node checks — GPUDirect RDMA, RDMA ports, NVLinks, the NVSwitch and IMEX fabric,
//! settings that turn a fast path off, process limits, ACS, the IOMMU — on fake trees shaped
//! like the kernel's, systemd's, PAM's and NVIDIA's real files, with NVML's answers recorded in
//! the driver's own shapes (`--nvml-fixture`).

use crate::common::fakesys::FakeMachine;
use crate::common::machines;
use crate::common::tt;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The checks issue-by-issue added to doctor (what each test here is about).
const NODE_CHECKS: [&str; 8] = [
    "gdr",
    "ib-ports",
    "nvlink-links",
    "fabric",
    "nccl-disablers",
    "limits",
    "acs",
    "iommu",
];

/// A fake node, its NVML answers, and where both live.
struct Node {
    _dir: tempfile::TempDir,
    root: PathBuf,
    nvml_path: PathBuf,
    m: FakeMachine,
    nvml: Value,
}

impl Node {
    fn new(build: fn(&Path) -> FakeMachine, nvml: Value) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let m = build(&root);
        let nvml_path = dir.path().join("nvml.json");
        Node {
            root,
            nvml_path,
            m,
            nvml,
            _dir: dir,
        }
    }

    fn hgx() -> Node {
        Node::new(machines::hgx_node, machines::hgx_nvml())
    }

    fn tray() -> Node {
        Node::new(machines::gb200_tray, machines::gb200_nvml())
    }

    /// `doctor --output json` on the tree with its NVML answers: exit code and document.
    fn doctor(&self, extra: &[&str]) -> (Option<i32>, Value) {
        std::fs::write(&self.nvml_path, self.nvml.to_string()).unwrap();
        let o = tt(["doctor", "--fsroot"])
            .json()
            .arg(&self.root)
            .arg("--nvml-fixture")
            .arg(&self.nvml_path)
            .args(extra)
            .run();
        let doc = crate::common::json(&o);
        crate::common::assert_schema("doctor", &doc);
        (o.status.code(), doc)
    }

    /// The human table, for reading.
    fn table(&self) -> String {
        std::fs::write(&self.nvml_path, self.nvml.to_string()).unwrap();
        let o = tt(["doctor", "--fsroot"])
            .arg(&self.root)
            .arg("--nvml-fixture")
            .arg(&self.nvml_path)
            .run();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn write(&self, path: &str, text: &str) {
        self.m.write(path, text);
    }

    fn remove(&self, path: &str) {
        std::fs::remove_file(self.root.join(path.trim_start_matches('/'))).unwrap();
    }

    fn gpu(&mut self, i: usize) -> &mut Value {
        &mut self.nvml["gpus"][i]
    }
}

/// A check's (status, detail) in a doctor document.
fn row(doc: &Value, id: &str) -> (String, String) {
    let c = doc["nodes"][0]["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("no checks: {doc:#}"))
        .iter()
        .find(|c| c["check"] == id)
        .unwrap_or_else(|| panic!("no {id} row: {doc:#}"));
    (
        c["status"].as_str().unwrap().to_string(),
        c["detail"].as_str().unwrap().to_string(),
    )
}

fn statuses(doc: &Value) -> Vec<(String, String)> {
    NODE_CHECKS.iter().map(|id| (id.to_string(), row(doc, id).0)).collect()
}

fn all(status: &str) -> Vec<(String, String)> {
    NODE_CHECKS
        .iter()
        .map(|id| (id.to_string(), status.to_string()))
        .collect()
}

/// What breaks each check on the HGX node, as it breaks on real machines, and what it looks
/// like when it has.
fn break_everything(n: &mut Node) {
    // gdr: nvidia_peermem not loaded after an OS upgrade, the proprietary kernel module (no
    // DMA-BUF).
    n.remove("/sys/module/nvidia_peermem/version");
    // ib-ports: a port down, a port downtrained to HDR, a RoCE port with only RoCE v1 GIDs,
    // a port whose link went down and up since the last run.
    let port = |nic: u32, f: &str| format!("/sys/class/infiniband/mlx5_{nic}/ports/1/{f}");
    n.write(&port(2, "state"), "1: DOWN\n");
    n.write(&port(2, "phys_state"), "3: Disabled\n");
    n.write(&port(3, "rate"), "200 Gb/sec (4X HDR)\n");
    for g in 0..4 {
        n.write(&port(6, &format!("gid_attrs/types/{g}")), "IB/RoCE v1\n");
    }
    n.write(&port(0, "counters/link_downed"), "3\n");
    // nvlink-links: one link of GPU5 down, GPU2's links trained at half speed.
    n.gpu(5)["nvlinks"][7]["active"] = false.into();
    n.gpu(2)["nvlink_speed_mbps"] = 13281.into();
    // fabric: Fabric Manager died after maintenance; GPU1 never finished registering.
    n.remove("/proc/4100/comm");
    n.gpu(1)["fabric"]["state"] = 2.into();
    // nccl-disablers: a drop-in someone left, a forced algorithm in the environment.
    n.write(
        "/etc/nccl/conf.d/50-site.conf",
        "# debugging, 2026-03\nNCCL_P2P_DISABLE=1\n",
    );
    n.write(
        "/etc/environment",
        "PATH=\"/usr/local/sbin:/usr/bin\"\nNCCL_ALGO=Ring\n",
    );
    // limits: a limits.d file that caps locked memory at 64 KiB.
    n.write(
        "/etc/security/limits.d/99-rdma.conf",
        "* soft memlock 65536\n* hard memlock unlimited\n",
    );
    // acs: a BIOS update turned ACS redirect on one downstream port on.
    n.m.acs_control(machines::DGX_SWITCHES[0].downstream[0], 0x001d);
    // iommu: iommu=pt dropped from the command line, so the groups translate.
    n.write(
        "/proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic root=UUID=3f1c ro quiet splash intel_iommu=on\n",
    );
    for (g, bdf) in machines::DGX_SWITCHES.iter().flat_map(|s| s.endpoints).enumerate() {
        n.m.iommu_group(bdf, 40 + g as u32, "DMA-FQ");
    }
}

/// Each fault's fix, as an operator applies it.
fn fix_everything(n: &mut Node) {
    n.write("/sys/module/nvidia_peermem/version", "580.159.04\n");
    let port = |nic: u32, f: &str| format!("/sys/class/infiniband/mlx5_{nic}/ports/1/{f}");
    n.write(&port(2, "state"), "4: ACTIVE\n");
    n.write(&port(2, "phys_state"), "5: LinkUp\n");
    n.write(&port(3, "rate"), "400 Gb/sec (4X NDR)\n");
    for (g, (ty, _)) in machines::ROCE_GIDS.iter().enumerate() {
        n.write(&port(6, &format!("gid_attrs/types/{g}")), &format!("{ty}\n"));
    }
    *n.gpu(5) = machines::hgx_nvml()["gpus"][5].clone();
    *n.gpu(2) = machines::hgx_nvml()["gpus"][2].clone();
    *n.gpu(1) = machines::hgx_nvml()["gpus"][1].clone();
    n.write("/proc/4100/comm", "nv-fabricmanage\n");
    n.remove("/etc/nccl/conf.d/50-site.conf");
    n.write("/etc/environment", "PATH=\"/usr/local/sbin:/usr/bin\"\n");
    n.write(
        "/etc/security/limits.d/99-rdma.conf",
        "* soft memlock unlimited\n* hard memlock unlimited\n",
    );
    n.m.acs_control(machines::DGX_SWITCHES[0].downstream[0], 0x0011);
    n.write(
        "/proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.8.0-51-generic root=UUID=3f1c ro quiet splash iommu=pt\n",
    );
    for (g, bdf) in machines::DGX_SWITCHES.iter().flat_map(|s| s.endpoints).enumerate() {
        n.m.iommu_group(bdf, 40 + g as u32, "identity");
    }
}

/// What doctor must say of `break_everything`'s node: per check, its status and phrases of
/// its detail.
fn broken_findings() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "gdr",
            "fail",
            vec![
                "GPUDirect RDMA off for 8 RDMA NIC(s) (mlx5_0, mlx5_1, mlx5_2, and 5 more)",
                "/sys/module/nvidia_peermem/version absent",
                "proprietary kernel module",
            ],
        ),
        (
            "ib-ports",
            "fail",
            vec![
                "mlx5_2 port 1 is not ACTIVE (state 1)",
                "mlx5_3 port 1 runs at 200 Gb/s where the same HCA model reaches 400 Gb/s here",
                "mlx5_6 port 1 is RoCE with no RoCE v2 GID",
                "mlx5_0:1: link_downed 0 → 3",
            ],
        ),
        (
            "nvlink-links",
            "fail",
            vec![
                "GPU5: NVLink(s) 7 inactive",
                "GPU5: 17 of its part's 18 NVLinks active",
                "GPU2: NVLinks at 13281 MB/s, below the 26562",
            ],
        ),
        (
            "fabric",
            "fail",
            vec!["no nv-fabricmanager process", "GPU1: fabric registration in progress"],
        ),
        (
            "nccl-disablers",
            "fail",
            vec![
                "/etc/nccl/conf.d/50-site.conf:2 NCCL_P2P_DISABLE=1",
                "/etc/environment:2 NCCL_ALGO=Ring: forces one choice",
            ],
        ),
        (
            "limits",
            "warn",
            vec!["/etc/security/limits.d/99-rdma.conf (* soft memlock) = 65536"],
        ),
        (
            "acs",
            "fail",
            vec![
                "ACS redirect on 1 of 20 PCIe switch port(s)",
                "0000:19:00.0 (ReqRedir+ CmpltRedir+, control 0x001d)",
            ],
        ),
        (
            "iommu",
            "warn",
            vec![
                "the IOMMU translates DMA for 16 GPU(s) and NIC(s)",
                "0000:1a:00.0 (DMA-FQ), 0000:1b:00.0 (DMA-FQ), 0000:3d:00.0 (DMA-FQ), and 13 more",
            ],
        ),
    ]
}

#[test]
fn every_node_check_fails_on_a_broken_node_and_passes_once_fixed() {
    let mut n = Node::hgx();
    let (_, healthy) = n.doctor(&[]);
    assert_eq!(statuses(&healthy), all("pass"), "{healthy:#}");
    println!("healthy:\n{}", n.table());

    break_everything(&mut n);
    let (code, broken) = n.doctor(&[]);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    println!("broken:\n{}", n.table());
    let want = broken_findings();
    for (id, status, needles) in want {
        let (s, detail) = row(&broken, id);
        assert_eq!(s, status, "{id}: {detail}");
        for needle in needles {
            assert!(detail.contains(needle), "{id}: `{needle}` not in: {detail}");
        }
    }

    fix_everything(&mut n);
    let (_, fixed) = n.doctor(&[]);
    assert_eq!(statuses(&fixed), all("pass"), "{fixed:#}");
    println!("fixed:\n{}", n.table());
}

#[test]
fn gdr_through_each_of_nccls_paths() {
    let n = Node::hgx();
    // nvidia_peermem with an NCCL that does not look for it (≤ 2.22.3), proprietary module.
    let (_, doc) = n.doctor(&["--nccl-version", "2.21.5"]);
    let (s, d) = row(&doc, "gdr");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("NCCL 2.21.5 does not look for it") && d.contains("GPUDirect RDMA off"),
        "{d}"
    );
    // The legacy peer-memory module: found by every NCCL.
    n.write("/sys/kernel/mm/memory_peers/nv_mem/version", "1.0\n");
    let (_, doc) = n.doctor(&["--nccl-version", "2.21.5"]);
    assert_eq!(row(&doc, "gdr").0, "pass");
    n.remove("/sys/kernel/mm/memory_peers/nv_mem/version");
    // No module at all, the open kernel module on 6.8: DMA-BUF.
    n.remove("/sys/module/nvidia_peermem/version");
    n.write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Tue Oct 28 10:12:41 UTC 2025\n",
    );
    let (_, doc) = n.doctor(&["--nccl-version", "2.28.9"]);
    let (s, d) = row(&doc, "gdr");
    assert_eq!(s, "pass", "{d}");
    assert!(d.contains("DMA-BUF") && d.contains("kernel 6.8.0-51-generic"), "{d}");
    // ... unless NCCL predates DMA-BUF, the kernel does, or a file turns it off.
    let (_, doc) = n.doctor(&["--nccl-version", "2.18.3"]);
    assert!(row(&doc, "gdr").1.contains("NCCL 2.18.3 predates DMA-BUF"));
    n.write("/etc/nccl.conf", "NCCL_DEBUG=WARN\nNCCL_DMABUF_ENABLE=0\n");
    let (_, doc) = n.doctor(&[]);
    let (s, d) = row(&doc, "gdr");
    assert_eq!(s, "fail");
    assert!(d.contains("/etc/nccl.conf:2 sets NCCL_DMABUF_ENABLE=0"), "{d}");
    n.remove("/etc/nccl.conf");
    n.write("/proc/sys/kernel/osrelease", "5.4.0-216-generic\n");
    let (_, doc) = n.doctor(&[]);
    assert!(row(&doc, "gdr")
        .1
        .contains("kernel 5.4.0-216-generic is older than 5.12"));
}

#[test]
fn rdma_ports_flapping_and_below_the_models_rate() {
    let n = Node::hgx();
    // The first run keeps the counters; symbol errors grow before the second.
    assert_eq!(row(&n.doctor(&[]).1, "ib-ports").0, "pass");
    let kept = n.root.join("var/lib/topo-tune/ib-counters.json");
    let counters: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(counters["mlx5_4:1"], serde_json::json!([0, 0]));
    n.write("/sys/class/infiniband/mlx5_4/ports/1/counters/symbol_error", "17\n");
    let (s, d) = row(&n.doctor(&[]).1, "ib-ports");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("mlx5_4:1: link_downed 0 → 0, symbol_error 0 → 17 since the last doctor run (flapping)"),
        "{d}"
    );
    // Still: the counters stopped growing.
    assert_eq!(row(&n.doctor(&[]).1, "ib-ports").0, "pass");
    // Every ConnectX-7 at HDR: the same everywhere, but below what the model reaches.
    for nic in 0..8 {
        n.write(
            &format!("/sys/class/infiniband/mlx5_{nic}/ports/1/rate"),
            "200 Gb/sec (4X HDR)\n",
        );
    }
    let (s, d) = row(&n.doctor(&[]).1, "ib-ports");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("below the 400 Gb/s its HCA model (15b3:1021) reaches"),
        "{d}"
    );
    // A physical state other than LinkUp on an ACTIVE port (a port in Polling after a reset).
    n.write("/sys/class/infiniband/mlx5_1/ports/1/phys_state", "2: Polling\n");
    let (s, d) = row(&n.doctor(&[]).1, "ib-ports");
    assert_eq!(s, "fail", "{d}");
    assert!(
        d.contains("mlx5_1 port 1 physical state is 2: Polling, not 5: LinkUp"),
        "{d}"
    );
}

#[test]
fn nvlink_links_need_the_driver_and_judge_speed_apart() {
    let mut n = Node::hgx();
    n.gpu(6)["nvlink_speed_mbps"] = 20000.into();
    let (s, d) = row(&n.doctor(&[]).1, "nvlink-links");
    assert_eq!(s, "warn", "slow but all up: {d}");
    assert!(d.contains("GPU6: NVLinks at 20000 MB/s"), "{d}");
    // Fewer links than the part has, none reported down (a link NVML no longer lists).
    n.gpu(6)["nvlink_speed_mbps"] = 26562.into();
    n.gpu(0)["nvlinks"].as_array_mut().unwrap().truncate(16);
    let (s, d) = row(&n.doctor(&[]).1, "nvlink-links");
    assert_eq!(s, "fail");
    assert!(d.contains("GPU0: 16 of its part's 18 NVLinks active"), "{d}");
    // Without NVML (a tree and no answers) link states are unknown: skip, said so.
    let o = tt(["doctor", "--fsroot"]).json().arg(&n.root).run();
    let doc = crate::common::json(&o);
    let (s, d) = row(&doc, "nvlink-links");
    assert_eq!(s, "skip");
    assert!(d.contains("need the driver"), "{d}");
}

#[test]
fn the_nvl72_trays_imex_domain_and_fabric_health() {
    let mut n = Node::tray();
    let (_, doc) = n.doctor(&[]);
    for id in ["nvlink-links", "fabric", "nccl-disablers", "limits"] {
        assert_eq!(row(&doc, id).0, "pass", "{id}: {}", row(&doc, id).1);
    }
    assert_eq!(row(&doc, "fabric").1, "IMEX and the GPUs' fabric ready");
    // IMEX down after maintenance: no daemon, its node list gone, the channel not remade
    // after the reboot; and the settings that turn multi-node NVLink off.
    n.remove("/proc/4200/comm");
    n.remove("/etc/nvidia-imex/nodes_config.cfg");
    n.remove("/dev/nvidia-caps-imex-channels/channel0");
    n.write("/etc/nccl.conf", "NCCL_CUMEM_ENABLE=0\nNCCL_MNNVL_ENABLE=0\n");
    let (_, doc) = n.doctor(&[]);
    let (s, d) = row(&doc, "fabric");
    assert_eq!(s, "fail");
    for needle in [
        "no nvidia-imex process",
        "nodes_config.cfg missing or empty",
        "no /dev/nvidia-caps-imex-channels/channel*",
    ] {
        assert!(d.contains(needle), "`{needle}` in {d}");
    }
    let (s, d) = row(&doc, "nccl-disablers");
    assert_eq!(s, "fail");
    assert!(
        d.contains("/etc/nccl.conf:1 NCCL_CUMEM_ENABLE=0") && d.contains("/etc/nccl.conf:2 NCCL_MNNVL_ENABLE=0"),
        "{d}"
    );
    // The same settings on the HGX node (no multi-node NVLink there) are not faults.
    let hgx = Node::hgx();
    hgx.write("/etc/nccl.conf", "NCCL_CUMEM_ENABLE=0\nNCCL_MNNVL_ENABLE=0\n");
    assert_eq!(row(&hgx.doctor(&[]).1, "nccl-disablers").0, "pass");

    // Fabric health, field by field (NVML_GPU_FABRIC_HEALTH_MASK_*): IMEX back first.
    n.write("/proc/4200/comm", "nvidia-imex\n");
    n.write("/etc/nvidia-imex/nodes_config.cfg", "10.0.8.1\n10.0.8.2\n");
    n.write("/dev/nvidia-caps-imex-channels/channel0", "");
    n.remove("/etc/nccl.conf");
    // Bandwidth degraded (bits 0-1 = 1): a warning.
    n.gpu(2)["fabric"]["health_mask"] = 0x1a9.into();
    let (s, d) = row(&n.doctor(&[]).1, "fabric");
    assert_eq!(s, "warn", "{d}");
    assert!(d.contains("GPU2: NVLink bandwidth degraded (health mask 0x1a9)"), "{d}");
    // Route unhealthy (bits 4-5 = 1): a failure.
    n.gpu(2)["fabric"]["health_mask"] = 0x19a.into();
    let (s, d) = row(&n.doctor(&[]).1, "fabric");
    assert_eq!(s, "fail", "{d}");
    assert!(d.contains("route unhealthy"), "{d}");
    // Incorrect configuration (bits 8-11 = 5: insufficient NVLinks): a failure.
    n.gpu(2)["fabric"]["health_mask"] = 0x5aa.into();
    let (s, d) = row(&n.doctor(&[]).1, "fabric");
    assert_eq!(s, "fail");
    assert!(d.contains("incorrect configuration: insufficient_nvlinks"), "{d}");
    // A GPU outside any domain (cluster UUID zero) on a tray.
    n.gpu(2)["fabric"]["health_mask"] = 0x1aa.into();
    n.gpu(3)["fabric"]["cluster_uuid"] = "00000000000000000000000000000000".into();
    let (s, d) = row(&n.doctor(&[]).1, "fabric");
    assert_eq!(s, "fail");
    assert!(d.contains("GPU3: in no NVLink domain"), "{d}");
    // A node list of one tray.
    n.gpu(3)["fabric"]["cluster_uuid"] = "dc6e40c4d72243579ba65291dd461278".into();
    n.write("/etc/nvidia-imex/nodes_config.cfg", "# this tray\n10.0.8.1\n");
    let (_, d) = row(&n.doctor(&[]).1, "fabric");
    assert!(d.contains("lists 1 node"), "{d}");
}

#[test]
fn limits_from_every_source_a_job_inherits() {
    let n = Node::hgx();
    // slurmd's unit caps what every job gets, whatever PAM says.
    n.write(
        "/lib/systemd/system/slurmd.service",
        "[Service]\nType=simple\nLimitMEMLOCK=infinity\nLimitSTACK=infinity\n",
    );
    n.write(
        "/etc/systemd/system/slurmd.service.d/override.conf",
        "[Service]\nLimitMEMLOCK=8M\n",
    );
    let (_, doc) = n.doctor(&["--nccl-version", "2.27.7"]);
    let (s, d) = row(&doc, "limits");
    assert_eq!(s, "warn");
    assert!(
        d.contains("/etc/systemd/system/slurmd.service.d/override.conf (LimitMEMLOCK) = 8M"),
        "{d}"
    );
    assert!(d.contains("/lib/systemd/system/slurmd.service (LimitSTACK) sets the stack limit unlimited and NCCL 2.27.7 predates 2.28"), "{d}");
    // NCCL 2.28 resets an unsafe stack limit itself.
    n.remove("/etc/systemd/system/slurmd.service.d/override.conf");
    let (_, doc) = n.doctor(&["--nccl-version", "2.28.9"]);
    assert_eq!(row(&doc, "limits").0, "pass", "{}", row(&doc, "limits").1);
    // No source at all: the systemd default applies.
    n.remove("/lib/systemd/system/slurmd.service");
    n.remove("/etc/security/limits.d/99-rdma.conf");
    n.write("/etc/systemd/system.conf", "[Manager]\n#DefaultLimitMEMLOCK=\n");
    let (s, d) = row(&n.doctor(&[]).1, "limits");
    assert_eq!(s, "warn");
    assert!(d.contains("no source raises the locked-memory limit"), "{d}");
}

#[test]
fn acs_and_iommu_are_the_hypervisors_on_a_vm_and_need_root_on_metal() {
    // The captured H200 VM: a guest (hypervisor flag), no RDMA NIC, one GPU without NVLink.
    let mut vm = Node::new(
        machines::h200_vm,
        serde_json::from_str(&machines::h200_vm_nvml()).unwrap(),
    );
    let (code, doc) = vm.doctor(&[]);
    assert_eq!(code, Some(0), "{doc:#}");
    let (s, d) = row(&doc, "acs");
    assert_eq!(s, "skip");
    assert!(d.contains("a virtual machine") && d.contains("hypervisor's"), "{d}");
    assert!(row(&doc, "iommu").1.contains("a virtual machine"));
    assert_eq!(row(&doc, "gdr").0, "skip");
    assert!(row(&doc, "gdr").1.contains("no RDMA NIC within PXB"));
    assert_eq!(row(&doc, "ib-ports").0, "skip");
    assert_eq!(row(&doc, "nvlink-links").0, "skip", "{}", row(&doc, "nvlink-links").1);
    // The VM's fabric as nvidia-smi -q showed it (N/A): NVML's not-supported answer.
    vm.gpu(0)["fabric"] =
        serde_json::json!({"ret": 3, "version": 3, "cluster_uuid": "", "status": 0, "clique_id": 0, "state": 0});
    assert_eq!(row(&vm.doctor(&[]).1, "fabric").0, "skip");

    // Bare metal read without root: sysfs gives 64 bytes of configuration space.
    let hgx = Node::hgx();
    for s in &machines::DGX_SWITCHES {
        for port in std::iter::once(s.upstream).chain(s.downstream) {
            let config = hgx
                .root
                .join(format!("{}/config", hgx.m.dev_path(port).trim_start_matches('/')));
            let head = std::fs::read(&config).unwrap()[..64].to_vec();
            std::fs::write(config, head).unwrap();
        }
    }
    let (s, d) = row(&hgx.doctor(&[]).1, "acs");
    assert_eq!(s, "skip");
    assert!(d.contains("64 of 4096 bytes") && d.contains("needs root"), "{d}");
    // No IOMMU at all.
    std::fs::remove_dir_all(hgx.root.join("sys/class/iommu")).unwrap();
    let (s, d) = row(&hgx.doctor(&[]).1, "iommu");
    assert_eq!(
        (s.as_str(), d.as_str()),
        ("pass", "no IOMMU active (/sys/class/iommu is empty)")
    );
}

/// What a file can be instead of what a check expects.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Garbage,
    Empty,
    Huge,
    Fifo,
    LinkOut,
}

/// Plant `bad` at `path`; a link leads to `outside`, a file beyond the tree.
fn plant(root: &Path, path: &str, bad: Bad, outside: &Path) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    match bad {
        Bad::Garbage => std::fs::write(&p, b"\x00\xff\xfe garbage = = NCCL_\n\x01 - - -\n=\n").unwrap(),
        Bad::Empty => std::fs::write(&p, b"").unwrap(),
        Bad::Huge => std::fs::write(&p, vec![b'x'; 17 << 20]).unwrap(),
        Bad::Fifo => rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap(),
        Bad::LinkOut => std::os::unix::fs::symlink(outside, &p).unwrap(),
    }
}

/// Every file a node check reads, planted with each kind of bad content: every check still
/// answers (a finding, never a crash or an error exit), and what could not be read is said.
#[test]
fn bad_contents_are_findings_not_crashes() {
    let files = [
        "/sys/module/nvidia_peermem/version",
        "/proc/driver/nvidia/version",
        "/etc/nccl.conf",
        "/etc/nccl/conf.d/90-site.conf",
        "/etc/environment",
        "/etc/security/limits.conf",
        "/etc/security/limits.d/99-rdma.conf",
        "/etc/systemd/system.conf",
        "/var/lib/topo-tune/ib-counters.json",
        // Not /proc/cmdline: hwloc reads it too (topology-linux.c:5361), so a FIFO or a link
        // out there refuses the whole tree (tests/probe_fsroot.rs).
        "/proc/4100/comm",
        "/sys/kernel/iommu_groups/40/type",
        "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed",
    ];
    for bad in [Bad::Garbage, Bad::Empty, Bad::Huge, Bad::Fifo, Bad::LinkOut] {
        let n = Node::hgx();
        let outside = n._dir.path().join("outside.txt");
        std::fs::write(&outside, "NCCL_P2P_DISABLE=1\n* soft memlock 64\n").unwrap();
        for f in files {
            plant(&n.root, f, bad, &outside);
        }
        let (code, doc) = n.doctor(&[]);
        assert!(
            matches!(code, Some(0) | Some(5)),
            "{bad:?}: doctor answers with its findings: {code:?} {doc:#}"
        );
        for id in NODE_CHECKS {
            let (s, d) = row(&doc, id);
            assert!(!d.is_empty(), "{bad:?}: {id} {s} says why");
        }
        let (s, d) = row(&doc, "nccl-disablers");
        match bad {
            Bad::Fifo => {
                assert_eq!(s, "warn", "{d}");
                assert!(
                    d.contains("cannot read /etc/nccl.conf: not a regular file: refused"),
                    "{d}"
                );
            }
            Bad::Huge => assert!(
                d.contains("cannot read /etc/nccl.conf: larger than 16 MiB: refused"),
                "{d}"
            ),
            // A link out of the tree resolves inside it (to nothing); garbage and empty set nothing.
            _ => assert_eq!(s, "pass", "{bad:?}: {d}"),
        }
        if matches!(bad, Bad::Fifo | Bad::Huge) {
            let (s, d) = row(&doc, "limits");
            assert_eq!(s, "warn");
            assert!(d.contains("cannot read /etc/security/limits.conf"), "{d}");
        }
        // What a link out of the tree points at is neither read (the settings in it count
        // for nothing above) nor written (the link is left, the counters not kept).
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "NCCL_P2P_DISABLE=1\n* soft memlock 64\n"
        );
        let kept = n.root.join("var/lib/topo-tune/ib-counters.json");
        let meta = std::fs::symlink_metadata(&kept).unwrap();
        match bad {
            Bad::LinkOut => assert!(meta.file_type().is_symlink()),
            Bad::Garbage | Bad::Empty => {
                let counters: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
                assert_eq!(
                    counters["mlx5_1:1"],
                    serde_json::json!([0, 0]),
                    "{bad:?}: this run's counters replace what was there"
                );
            }
            Bad::Huge | Bad::Fifo => {}
        }
    }
}

/// The configuration space of a switch port: a damaged capability chain and an oversized file
/// are findings on that port; the others are still judged.
#[test]
fn a_damaged_switch_port_config_is_a_finding() {
    let n = Node::hgx();
    let port = machines::DGX_SWITCHES[1].downstream[2];
    let config = n
        .root
        .join(format!("{}/config", n.m.dev_path(port).trim_start_matches('/')));
    let mut c = std::fs::read(&config).unwrap();
    c[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
    std::fs::write(&config, &c).unwrap();
    let (s, d) = row(&n.doctor(&[]).1, "acs");
    assert_eq!(s, "warn", "the other 19 ports are known: {d}");
    assert!(d.contains(&format!("{port}: extended capability chain loops")), "{d}");
    c.resize(8192, 0);
    std::fs::write(&config, &c).unwrap();
    let (_, d) = row(&n.doctor(&[]).1, "acs");
    assert!(d.contains("larger than 4096 bytes: refused"), "{d}");
}

/// A node described only on paper (simulated) has no files to check: doctor says so and
/// does not count it as failing.
#[test]
fn paper_nodes_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: paper-1\n    simulate: aws-p5en\n").unwrap();
    let o = tt(["doctor"]).json().config(&cfg).run();
    let doc = crate::common::json(&o);
    assert_eq!(o.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["nodes"][0]["status"], "skipped");
    assert!(doc["nodes"][0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no /proc or /sys to check"));
}

/// `nccl-tuner`: the plugin NCCL is told to load, read as NCCL would find it — a missing
/// file, a file that is no shared object, one without a symbol this NCCL looks for, a rules
/// file the plugin refuses — and passed with its symbol and rule count when it holds up.
#[test]
fn a_tuner_plugin_nccl_cannot_use_is_a_failure() {
    let n = Node::hgx();
    let conf = |lines: &str| n.m.write("/etc/nccl/conf.d/60-tuner.conf", lines);
    // An ELF shared object's header and the dynamic names a v4/v5 plugin exports.
    let mut so = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0".to_vec();
    so.extend_from_slice(b"\0ncclTunerPlugin_v4\0ncclTunerPlugin_v5\0");
    n.m.write_bytes("/usr/local/lib/libnccl_tuner_topo_tune.so", &so);
    n.m.write("/etc/nccl/nccl-tuner.csv", "allreduce,0,65536,ring,simple,-1,-1,-1\n");
    let plugin = "NCCL_TUNER_PLUGIN=/usr/local/lib/libnccl_tuner_topo_tune.so\n";
    let cases = [
        ("", "skip", "no NCCL_TUNER_PLUGIN"),
        ("NCCL_TUNER_PLUGIN=/opt/missing.so\n", "fail", "cannot be read"),
        ("NCCL_TUNER_PLUGIN=/etc/nccl/nccl-tuner.csv\n", "fail", "not an ELF shared object"),
        (plugin, "warn", "no NCCL_TUNER_CONFIG_FILE"),
        ("NCCL_TUNER_CONFIG_FILE=/etc/nccl/nccl-tuner.csv\nNCCL_TUNER_PLUGIN=/usr/local/lib/libnccl_tuner_topo_tune.so\n", "pass", "(ncclTunerPlugin_v5) with 1 rule(s)"),
    ];
    for (lines, status, needle) in cases {
        conf(lines);
        let (s, d) = row(&n.doctor(&[]).1, "nccl-tuner");
        assert_eq!(s, status, "{lines:?}: {d}");
        assert!(d.contains(needle), "{lines:?}: {d}");
    }
    n.m.write("/etc/nccl/nccl-tuner.csv", "allreduce,0,65536,warp,simple,-1,-1,-1\n");
    let (s, d) = row(&n.doctor(&[]).1, "nccl-tuner");
    assert_eq!(s, "fail", "{d}");
    assert!(d.contains("line 1: unknown algorithm"), "{d}");
    // One line the plugin drops among good ones: it applies the rest, not the file as written.
    n.m.write(
        "/etc/nccl/nccl-tuner.csv",
        "allreduce,0,65536,ring,simple,-1,-1,-1\nallreduce,65537,99,ring,simple,-1,-1,-1\n",
    );
    let (s, d) = row(&n.doctor(&[]).1, "nccl-tuner");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("refuses 1 line(s) and applies the other 1 rule(s): line 2:"),
        "{d}"
    );
    // Rules measured on another NCCL than the node's: tune again.
    n.m.write(
        "/etc/nccl/nccl-tuner.csv",
        "# nccl-tuner.csv: written by topo-tune tune on rack-1 (2 host(s)), measured on NCCL 2.27.5; do not edit: run tune again\nallreduce,0,65536,ring,simple,-1,-1,-1\n",
    );
    let (s, d) = row(&n.doctor(&["--nccl-version", "2.28.9"]).1, "nccl-tuner");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("measured on NCCL 2.27.5, this node runs NCCL 2.28.9: tune again"),
        "{d}"
    );
    let (s, d) = row(&n.doctor(&["--nccl-version", "2.27.5"]).1, "nccl-tuner");
    assert_eq!(s, "pass", "the NCCL it was measured on: {d}");
    n.m.write("/etc/nccl/nccl-tuner.csv", "allreduce,0,65536,warp,simple,-1,-1,-1\n");
    // An NCCL older than the plugin's newest symbol it knows: NCCL 2.24 looks for v4 first.
    let (_, d) = row(&n.doctor(&["--nccl-version", "2.24.3"]).1, "nccl-tuner");
    assert!(d.contains("warp") || d.contains("unknown algorithm"), "{d}");
}

/// `/etc/nccl.conf` read as NCCL's `setEnvFile` reads it (src/misc/param.cc): each line of
/// the issue, alone in the file, judged by what NCCL does with it.
#[test]
fn nccl_conf_lines_are_judged_as_nccl_reads_them() {
    let n = Node::hgx();
    // Disablers that looked harmless to a shell reading: NCCL acts on each.
    for line in [
        "NCCL_P2P_DISABLE=1 # temporary",
        "NCCL_SHM_DISABLE=01",
        "NCCL_CHUNK_SIZE=0x100000",
        "NCCL_P2P_DISABLE=1\u{1b}",
        "NCCL_P2P_DISABLE=1\0",
        "NCCL_P2P_DISABLE=1\r",
    ] {
        n.write("/etc/nccl.conf", &format!("{line}\n"));
        let (s, d) = row(&n.doctor(&[]).1, "nccl-disablers");
        assert_eq!(s, "fail", "{line:?}: {d}");
        assert!(d.starts_with("/etc/nccl.conf:1 NCCL_"), "{line:?}: {d}");
    }
    // Lines NCCL ignores or reads as off: a warning that says so, never a FAIL that drains
    // the node through the Slurm health check.
    for (line, says) in [
        ("export NCCL_P2P_DISABLE=1", "NCCL reads no NCCL_P2P_DISABLE here"),
        ("NCCL_P2P_DISABLE = 1", "NCCL reads no NCCL_P2P_DISABLE here"),
        ("NCCL_P2P_DISABLE=\"1\"", "NCCL reads this as NCCL_P2P_DISABLE=0"),
    ] {
        n.write("/etc/nccl.conf", &format!("{line}\n"));
        let (s, d) = row(&n.doctor(&[]).1, "nccl-disablers");
        assert_eq!(s, "warn", "{line:?}: {d}");
        assert!(d.contains(says) && d.contains("/etc/nccl.conf:1 `"), "{line:?}: {d}");
    }
    // /etc/environment keeps shell rules: `export` and quotes are how a shell sets it.
    n.write("/etc/nccl.conf", "");
    n.write("/etc/environment", "export NCCL_P2P_DISABLE=\"1\"\n");
    let (s, d) = row(&n.doctor(&[]).1, "nccl-disablers");
    assert_eq!(s, "fail", "{d}");
    assert!(d.starts_with("/etc/environment:1 NCCL_P2P_DISABLE=1:"), "{d}");
}

/// A port state or rate the kernel did not write is said, not dropped: the port unread was
/// the fastest of its model, so another port's downtrain is no longer proven either.
#[test]
fn an_unreadable_port_state_or_rate_is_a_finding_not_a_dropped_port() {
    let n = Node::hgx();
    let port = |nic: u32, f: &str| format!("/sys/class/infiniband/mlx5_{nic}/ports/1/{f}");
    assert_eq!(row(&n.doctor(&[]).1, "ib-ports").0, "pass");
    n.write(&port(2, "state"), "garbage\n");
    let (s, d) = row(&n.doctor(&[]).1, "ib-ports");
    assert_eq!(s, "warn", "{d}");
    assert!(
        d.contains("mlx5_2 port 1 state `garbage` is not what the kernel writes"),
        "{d}"
    );
    n.write(&port(2, "state"), "4: ACTIVE\n");
    n.write(&port(0, "rate"), "fast\n");
    n.write(&port(3, "rate"), "-400 Gb/sec (4X NDR)\n");
    let (s, d) = row(&n.doctor(&[]).1, "ib-ports");
    assert_eq!(s, "warn", "{d}");
    for nic in [0, 3] {
        assert!(
            d.contains(&format!("mlx5_{nic} port 1 rate `")) && d.contains("is unknown"),
            "mlx5_{nic}: {d}"
        );
    }
    assert!(!d.contains("runs at -400"), "a negative rate is not a rate: {d}");
}

/// NVML's health answer for every GPU of `n`, with `f` applied to GPU `i`'s.
fn health(n: &mut Node, i: usize, f: impl Fn(&mut Value)) {
    for g in 0..8 {
        let mut h = serde_json::json!({
            "ecc_uncorrected": 0, "retired_pages_dbe": null, "retirement_pending": null,
            "remapped_uncorrectable": 0, "remap_pending": false, "remap_failed": false,
            "clock_event_reasons": 1
        });
        if g == i {
            f(&mut h);
        }
        n.gpu(g)["health"] = h;
    }
}

#[test]
fn gpu_health_from_nvml_and_the_kernel_log() {
    let mut n = Node::hgx();
    // No NVML health in the answer, no kernel log in the tree: said so, not guessed.
    let (_, doc) = n.doctor(&[]);
    assert_eq!(row(&doc, "gpu-memory").0, "skip");
    assert_eq!(row(&doc, "gpu-clocks").0, "skip");
    let (st, d) = row(&doc, "gpu-xid");
    assert!(st == "skip" && d.contains("kernel log cannot be read"), "{st} {d}");

    n.write("/dev/kmsg", "6,100,2000,-;nvidia-nvlink: registered\n");
    health(&mut n, 9, |_| {});
    let (_, doc) = n.doctor(&[]);
    assert_eq!(
        row(&doc, "gpu-xid"),
        (
            "pass".into(),
            "no Xid error in the kernel log since boot (1 line(s) read)".into()
        )
    );
    assert_eq!(row(&doc, "gpu-memory").0, "pass");
    assert_eq!(row(&doc, "gpu-clocks").0, "pass", "GPU idle (0x1) is not a slowdown");

    // A pending row remap and uncorrectable errors on GPU 3; the hardware slowing GPU 5.
    health(&mut n, 3, |h| {
        h["remap_pending"] = true.into();
        h["ecc_uncorrected"] = 2.into();
    });
    let (code, doc) = n.doctor(&[]);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    let (st, d) = row(&doc, "gpu-memory");
    assert_eq!(st, "fail");
    assert!(
        d.contains("GPU 3: a memory repair waits for a GPU reset") && d.contains("GPU 3: 2 uncorrectable ECC"),
        "{d}"
    );
    health(&mut n, 5, |h| h["clock_event_reasons"] = 0x48.into());
    let (st, d) = row(&n.doctor(&[]).1, "gpu-clocks");
    assert_eq!(
        (st.as_str(), d.as_str()),
        ("fail", "GPU 5: HW slowdown, HW thermal slowdown")
    );
    health(&mut n, 5, |h| h["clock_event_reasons"] = 0x24.into());
    let (st, d) = row(&n.doctor(&[]).1, "gpu-clocks");
    assert_eq!(
        (st.as_str(), d.as_str()),
        ("warn", "GPU 5: SW thermal slowdown, SW power cap")
    );

    // The driver's Xid lines: an application's fault warns, the GPU's own fails.
    let bus = &machines::dgx_gpu_bdfs()[0][..10];
    n.write(
        "/dev/kmsg",
        &format!("4,200,3000,-;NVRM: Xid (PCI:{bus}): 13, Graphics SM Warp Exception\n"),
    );
    let (st, d) = row(&n.doctor(&[]).1, "gpu-xid");
    assert!(st == "warn" && d.starts_with("Xid 13 ×1 on GPU 0"), "{st} {d}");
    n.write(
        "/dev/kmsg",
        &format!("4,200,3000,-;NVRM: Xid (PCI:{bus}): 13, x\n3,201,3001,-;NVRM: Xid (PCI:{bus}): 79, pid=7, GPU has fallen off the bus.\n"),
    );
    let (code, doc) = n.doctor(&[]);
    let (st, d) = row(&doc, "gpu-xid");
    assert_eq!(
        (code, st.as_str()),
        (Some(topo_tune::exit::CHECKS_FAILED.code()), "fail"),
        "{d}"
    );
    assert!(d.contains("Xid 79 ×1 on GPU 0"), "{d}");
}

/// A saved kernel log larger than the old 16 MiB read: a fatal Xid near its start still fails
/// (before: the whole log was refused and the row was a skip); an /proc/interrupts that cannot
/// be read is a row that says so (before: `mlx5-irq-load` vanished from the table); and Xids
/// on many distinct buses are counted, each bus once (before: a list scanned per Xid).
#[test]
fn a_large_kernel_log_keeps_its_fatal_xid_and_an_unread_load_is_a_row() {
    let mut n = Node::hgx();
    let bus = &machines::dgx_gpu_bdfs()[0][..10];
    let mut log = format!("3,1,1,-;NVRM: Xid (PCI:{bus}): 79, pid=7, GPU has fallen off the bus.\n");
    let filler = "6,2,2,-;usb 1-1: new high-speed USB device number 2 using xhci_hcd, a line of the kernel's chatter\n";
    while log.len() < (17 << 20) {
        log.push_str(filler);
    }
    for i in 0..20_000u32 {
        log.push_str(&format!(
            "4,3,3,-;NVRM: Xid (PCI:0000:{:02x}:{:02x}): 13, x\n",
            i / 256,
            i % 256
        ));
    }
    n.write("/dev/kmsg", &log);
    health(&mut n, 0, |_| {});
    let (code, doc) = n.doctor(&[]);
    let (st, d) = row(&doc, "gpu-xid");
    assert_eq!(
        (code, st.as_str()),
        (Some(topo_tune::exit::CHECKS_FAILED.code()), "fail"),
        "{d}"
    );
    assert!(
        d.contains("Xid 13 ×20000 on ") && d.contains("Xid 79 ×1 on GPU 0"),
        "{d}"
    );
    // The interrupts' load: a row, not a gap.
    n.remove("/proc/interrupts");
    let (_, doc) = n.doctor(&[]);
    let (st, d) = row(&doc, "mlx5-irq-load");
    assert_eq!(st, "warn", "{d}");
    assert!(d.starts_with("/proc/interrupts cannot be read"), "{d}");
}
