//! NCCL topology files of every shape a user may hand topo-tune, from hand-written minimal files
//! in tests/data/nccl-shapes/: what the snapshot says, what the rules write, what the plan
//! assumes about NVLink, and a golden (insta) per shape.

use crate::common::{probe_json, tt, Run};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use topo_tune::api::guard;
use topo_tune::api::snapshot::NicKind;
use topo_tune::api::NodeSnapshot;
use topo_tune::api::{derive, Derived};

fn shape(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nccl-shapes")
        .join(name)
}

fn read(name: &str) -> NodeSnapshot {
    probe_json(&["--from-nccl-topo", shape(name).to_str().unwrap()])
}

fn rules(s: &NodeSnapshot) -> Derived {
    derive(s, None, None, &BTreeMap::new()).unwrap()
}

fn value(d: &Derived, name: &str) -> Option<String> {
    d.settings.iter().find(|s| s.name == name).map(|s| s.value.clone())
}

fn has_note(s: &NodeSnapshot, code: &str) -> bool {
    s.notes.iter().any(|n| n.code == code)
}

/// The golden of a shape: what `probe` prints, then what the rules write and leave out.
fn golden(name: &str) -> String {
    let file = shape(name);
    let out = Run::new()
        .current_dir(file.parent().unwrap())
        .args(["probe", "--from-nccl-topo", name])
        .run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut text = String::from_utf8(out.0.stdout).unwrap();
    let d = rules(&read(name));
    text.push_str("\nNCCL settings\n");
    for s in &d.settings {
        text.push_str(&format!("  {}={}  ({})\n", s.name, s.value, s.reason));
    }
    for l in &d.left_out {
        text.push_str(&format!("  left out: {l}\n"));
    }
    text
}

fn assert_golden(name: &str) {
    let text = golden(name);
    insta::assert_snapshot!(name.trim_end_matches(".xml"), text);
}

#[test]
fn a_dual_port_hca_keeps_both_ports_and_both_are_named() {
    let s = read("dual-port-hca.xml");
    let ports: Vec<(&str, u32, Option<f64>)> = s
        .nics
        .iter()
        .flat_map(|n| {
            let ports = n.rdma.as_ref().map(|r| r.ports.as_slice()).unwrap_or_default();
            ports.iter().map(move |p| (n.name.as_str(), p.port, p.rate_gbps))
        })
        .collect();
    assert_eq!(ports, [("mlx5_0", 1, Some(200.0)), ("mlx5_1", 2, Some(200.0))]);
    let bdfs: Vec<String> = s.nics.iter().map(|n| n.pci.as_ref().unwrap().bdf.to_string()).collect();
    assert_eq!(bdfs, ["0000:12:00.0", "0000:12:00.0"], "one HCA, two ports");
    let d = rules(&s);
    assert_eq!(value(&d, "NCCL_IB_HCA").as_deref(), Some("=mlx5_0,mlx5_1"));
    assert_eq!(guard::gpu_ports(&s).len(), 2);
    assert!(guard::check(&d.settings, &guard::gpu_ports(&s), &[], false, None).is_ok());
    assert_golden("dual-port-hca.xml");
}

#[test]
fn net_speed_is_read_and_drives_the_network_figure() {
    let s = read("dual-port-hca.xml");
    // Two 200 Gb/s ports: 50 GB/s, not a 10 GbE guess.
    assert_eq!(topo_tune::api::host_net_gbps(&s), 50.0);
    let s = read("cpu-attached-nic.xml");
    assert_eq!(topo_tune::api::host_net_gbps(&s), 50.0);
}

#[test]
fn a_nic_straight_under_a_cpu_is_kept() {
    let s = read("cpu-attached-nic.xml");
    assert_eq!(s.nics.len(), 1);
    let nic = &s.nics[0];
    assert_eq!((nic.name.as_str(), nic.kind), ("mlx5_0", NicKind::Rdma));
    assert!(nic.pci.is_none(), "no PCI path is invented");
    assert!(has_note(&s, "nic-without-pci"));
    assert_eq!(s.gpus[0].name, "NVIDIA H200 SXM 141GB", "named from the part table");
    assert_golden("cpu-attached-nic.xml");
}

#[test]
fn facts_the_file_does_not_hold_are_unknown_not_made_up() {
    let s = read("gpu-without-vendor.xml");
    let g = &s.gpus[0];
    assert_eq!(g.placement.pci_id, None);
    assert_eq!(g.name, "NVIDIA GPU (sm_80; model not in the file)");
    assert!(
        g.nvlinks.as_ref().is_none_or(|l| l.is_empty()),
        "no NVLink to itself: {:?}",
        g.nvlinks
    );
    assert!(has_note(&s, "self-nvlink-ignored"));
    assert_eq!((s.cpu.packages, s.cpu.cores, s.cpu.pus), (None, None, Some(4)));
    assert_eq!(s.nics.len(), 1);
    assert_eq!(
        s.nics[0].kind,
        NicKind::Ethernet,
        "an Ethernet function with no <nic> is not RDMA"
    );
    let d = rules(&s);
    assert_eq!(value(&d, "NCCL_IB_HCA"), None);
    assert_golden("gpu-without-vendor.xml");
}

fn refused(name: &str) -> String {
    let out = tt(["probe", "--from-nccl-topo"]).arg(shape(name)).run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(out.stdout.is_empty());
    String::from_utf8(out.0.stderr).unwrap()
}

#[test]
fn an_rccl_file_is_refused_not_read_as_nvidia() {
    let err = refused("rccl-xgmi.xml");
    assert!(
        err.contains("RCCL") && err.contains("AMD") && err.contains("nothing was guessed"),
        "{err}"
    );
}

#[test]
fn a_graph_file_is_named_as_one() {
    let err = refused("graph-file.xml");
    assert!(
        err.contains("NCCL graph file") && err.contains("describes no hardware"),
        "{err}"
    );
    // The same through `simulate:` in cluster.yaml.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodes:\n  - host: g1\n    simulate: {}\n",
            shape("graph-file.xml").display()
        ),
    )
    .unwrap();
    let out = tt(["init", "--collect-only"])
        .json()
        .config(&cfg)
        .out(dir.path().join("out"))
        .run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = doc["nodes"][0]["error"]["message"].as_str().unwrap_or_default();
    assert!(error.contains("NCCL graph file"), "{doc}");
}

#[test]
fn an_hwloc_export_given_as_an_nccl_file_says_which_flag_to_use() {
    let err = refused("hgx2-v100-sxm3.hwloc.xml");
    assert!(err.contains("--from-hwloc-xml"), "{err}");
}

#[test]
fn far_connectx_nics_are_not_pinned_when_efa_is_the_gpu_fabric() {
    let s = read("efa-and-far-connectx.xml");
    let d = rules(&s);
    assert_eq!(value(&d, "NCCL_IB_HCA"), None, "{:?}", d.settings);
    assert!(
        d.left_out
            .iter()
            .any(|l| l.contains("not steered onto the far NICs (mlx5_0, mlx5_1)")),
        "{:?}",
        d.left_out
    );
    assert_golden("efa-and-far-connectx.xml");
}

#[test]
fn a_node_without_rdma_and_two_interfaces_up_keeps_both_for_nccl() {
    let mut doc: Value = serde_json::to_value(read("gpu-without-vendor.xml")).unwrap();
    let mut nics = Vec::new();
    for ifname in ["eth0", "eth1"] {
        let mut nic = doc["nics"][0].clone();
        nic["name"] = ifname.into();
        nic["netdevs"] = serde_json::json!([{"name": ifname, "operstate": "up", "speed_mbps": 100000, "mtu": 9000}]);
        nics.push(nic);
    }
    doc["nics"] = Value::Array(nics.clone());
    let s = NodeSnapshot::from_json(&doc.to_string()).unwrap();
    let d = rules(&s);
    assert_eq!(value(&d, "NCCL_SOCKET_IFNAME"), None);
    assert!(d.left_out.iter().any(|l| l.contains("eth0, eth1")), "{:?}", d.left_out);
    // One interface up: naming it takes nothing away.
    doc["nics"] = Value::Array(nics[..1].to_vec());
    let s = NodeSnapshot::from_json(&doc.to_string()).unwrap();
    assert_eq!(value(&rules(&s), "NCCL_SOCKET_IFNAME").as_deref(), Some("=eth0"));
}

/// A one-class cluster of `hosts` simulated from `file`, with `node_yaml` added to the node.
fn plan_json(file: &Path, node_yaml: &str, top_yaml: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!(
            "{top_yaml}nodes:\n  - host: \"n-[1-2]\"\n    simulate: {}\n{node_yaml}",
            file.display()
        ),
    )
    .unwrap();
    let out = tt(["plan"]).json().config(&cfg).run();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn intra(plan: &Value) -> (String, f64) {
    let c = &plan["node_classes"][0];
    (
        c["type_intra"].as_str().unwrap_or("-").to_string(),
        c["ring"]["bottleneck_gbps"].as_f64().unwrap(),
    )
}

fn note<'a>(plan: &'a Value, code: &str) -> Option<&'a str> {
    plan["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["code"] == code)
        .and_then(|n| n["message"].as_str())
}

#[test]
fn a_sixteen_gpu_nvswitch_server_is_planned_on_nvlink() {
    let p = plan_json(&shape("hgx2-v100-sxm3.hwloc.xml"), "", "");
    // V100: 6 NVLinks at NCCL's 20 GB/s each, through NVSwitches (not PCIe's 10 GB/s).
    assert_eq!(intra(&p), ("NVL".into(), 120.0));
    let why = note(&p, "assumed-nvswitch").unwrap();
    assert!(
        why.contains("12 NVSwitch function(s) on PCI") && why.contains("V100 SXM3"),
        "{why}"
    );
    // Stated otherwise in cluster.yaml: the statement wins.
    let p = plan_json(&shape("hgx2-v100-sxm3.hwloc.xml"), "    nvlink: none\n", "");
    assert_ne!(intra(&p).0, "NVL");
    assert!(note(&p, "stated-no-nvlink").is_some() && note(&p, "nvlink-unknown").is_none());
}

#[test]
fn an_h100_sxm_nccl_file_is_planned_on_nvlink_only_when_stated() {
    let p5 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nccl/aws-p5.48xl-topo.xml");
    let unstated = plan_json(&p5, "", "");
    assert_ne!(intra(&unstated).0, "NVL");
    let why = note(&unstated, "nvlink-unknown").unwrap();
    assert!(
        why.contains("nvlink: nvswitch"),
        "the warning says how to state it: {why}"
    );
    let stated = plan_json(&p5, "    nvlink: nvswitch\n", "");
    let (kind, gbps) = intra(&stated);
    assert_eq!(kind, "NVL");
    // sm_90: 18 links at NCCL's 20.6 GB/s.
    assert!((gbps - 18.0 * 20.6).abs() < 0.01, "{gbps}");
    assert!(note(&stated, "stated-nvswitch").is_some());
    // The part alone does not say (HGX H100 4-GPU boards have no NVSwitch).
    let part = plan_json(&p5, "    gpu: h100-sxm5\n", "");
    assert_ne!(intra(&part).0, "NVL");
    assert!(note(&part, "nvlink-unknown").unwrap().contains("H100 SXM5"));
}

#[test]
fn b200_hwloc_names_the_model_and_assumes_its_hidden_nvswitches() {
    let b200 = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/aws-p6-b200.xml");
    let s = probe_json(&["--from-hwloc-xml", b200.to_str().unwrap()]);
    assert!(s.gpus.iter().all(|g| g.name == "NVIDIA B200"), "{}", s.gpus[0].name);
    let p = plan_json(&b200, "", "");
    assert_eq!(intra(&p).0, "NVL");
    assert!(note(&p, "assumed-nvswitch").unwrap().contains("B200"));
}

#[test]
fn an_override_that_narrows_the_gpu_ports_is_refused_unless_stated() {
    let narrowing = "nccl:\n  NCCL_IB_HCA: \"=mlx5_0\"\n";
    let p = plan_json(&shape("dual-port-hca.xml"), "", narrowing);
    let refused = p["nccl"]["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 2, "{p}");
    let why = refused[0]["reason"].as_str().unwrap();
    assert!(
        why.contains("never-slower guard") && why.contains("mlx5_1 port 2"),
        "{why}"
    );
    assert!(why.contains("NCCL_IB_HCA==mlx5_0"), "{why}");
    // cluster.yaml says mlx5_1 carries no GPU traffic: allowed.
    let p = plan_json(&shape("dual-port-hca.xml"), "    non_gpu_nics: [mlx5_1]\n", narrowing);
    assert_eq!(p["nccl"]["refused"].as_array().unwrap().len(), 0, "{p}");
    let settings = &p["nccl"]["classes"][0]["settings"];
    assert!(
        settings.as_array().unwrap().iter().any(|s| s["value"] == "=mlx5_0"),
        "{settings}"
    );
}

#[test]
fn init_refuses_a_hand_edited_plan_that_narrows_the_gpu_ports() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodes:\n  - host: d1\n    simulate: {}\n",
            shape("dual-port-hca.xml").display()
        ),
    )
    .unwrap();
    let plan_dir = dir.path().join("plan");
    let made = tt(["plan"]).config(&cfg).out(&plan_dir).run();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let path = plan_dir.join("plan.json");
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let setting = &mut plan["nccl"]["classes"][0]["settings"][0];
    assert_eq!(setting["name"], "NCCL_IB_HCA");
    setting["value"] = "=mlx5_0".into();
    std::fs::write(&path, plan.to_string()).unwrap();
    let out_dir = dir.path().join("out");
    let out = tt(["init"])
        .json()
        .config(&cfg)
        .arg("--plan")
        .arg(&path)
        .out(&out_dir)
        .run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::ALL_FAILED.code()));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = doc["nodes"][0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("never-slower guard") && message.contains("mlx5_1 port 2"),
        "{message}"
    );
    assert!(!out_dir.join("d1").exists(), "nothing written");
}

#[test]
fn a_real_nccl_2_28_dump_reads_as_what_it_says() {
    // NCCL_TOPO_DUMP_FILE of the H200 VM (tests/data/SOURCES.md): the NIC hangs off the CPU.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-vm/nccl-topo.xml");
    let s = probe_json(&["--from-nccl-topo", file.to_str().unwrap()]);
    assert_eq!(s.gpus.len(), 1);
    assert_eq!(s.gpus[0].name, "NVIDIA H200 SXM 141GB");
    assert_eq!(s.gpus[0].placement.pci_id.as_deref(), Some("10de:2335"));
    assert_eq!(s.nics.len(), 1);
    let eth0 = &s.nics[0];
    assert_eq!(
        (eth0.name.as_str(), eth0.kind, eth0.pci.is_none()),
        ("eth0", NicKind::Ethernet, true)
    );
    assert_eq!(eth0.netdevs[0].speed_mbps, Some(10_000));
    assert_eq!(
        (s.cpu.packages, s.cpu.cores, s.cpu.pus),
        (None, None, None),
        "numaid -1, no affinity"
    );
    assert!(has_note(&s, "nic-without-pci"));
}
