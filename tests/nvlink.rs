//! NVLink from every source, and NVLink domains that span nodes: hwloc's NVLinkBandwidth
//! matrix, NCCL's placeholder for a hidden NVSwitch and its fused NICs, `<c2c>`, meshes stated
//! in cluster.yaml, GB200 trays, NVML fabric info (each shape the driver answers), domains in
//! the plan (order, crossings, prediction, Slurm blocks, Kubernetes labels), the NVLink guard,
//! and the refusals that say what an input is (hwloc 3.0, RCCL, AMD).

use crate::common::machines;
use crate::common::{assert_schema, json, probe_json, tt};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn data(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
        .display()
        .to_string()
}

fn example(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
        .display()
        .to_string()
}

fn matrix(args: &[&str]) -> String {
    let o = tt(["probe", "--matrix"]).args(args).run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.0.stdout).unwrap()
}

/// The cells of one matrix row (`GPU0 X NV6 …`).
fn row<'a>(m: &'a str, label: &str) -> Vec<&'a str> {
    m.lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in\n{m}"))
        .split_whitespace()
        .collect()
}

/// A cluster.yaml in `dir` (the simulated sources named relative to the repository).
fn cluster(dir: &Path, yaml: &str) -> PathBuf {
    let p = dir.join("cluster.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn plan(cfg: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let o = tt(["plan"]).json().config(cfg).args(extra).run();
    (o.status.code(), json(&o))
}

fn setting<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p["nccl"]["classes"][0]["settings"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

#[test]
fn hwlocs_nvlink_matrix_is_read_as_links() {
    // Before: every GPU pair SYS and "NVLink unknown" (hwloc's matrix was not read).
    for file in [
        "nvlink/hwloc-4xh100-mesh.xml",
        "hwloc/llnl-ipa20-dell-xe8640-4xh100.xml",
    ] {
        let m = matrix(&["--from-hwloc-xml", &data(file)]);
        assert_eq!(&row(&m, "GPU0")[1..5], ["X", "NV6", "NV6", "NV6"], "{file}\n{m}");
        assert_eq!(&row(&m, "GPU3")[1..5], ["NV6", "NV6", "NV6", "X"], "{file}");
        assert!(m.contains("NV# read from hwloc's NVLinkBandwidth matrix"), "{m}");
        assert!(!m.contains("NVLink UNKNOWN"));
        let s = probe_json(&["--from-hwloc-xml", &data(file)]);
        let g = &s.gpus[0];
        assert_eq!(g.nvlinks.as_ref().map(Vec::len), Some(18), "6 links to each of 3 peers");
        assert_eq!(
            g.nvlinks.as_ref().unwrap()[0].bandwidth_gbps,
            Some(20.6),
            "NCCL's SM90 figure"
        );
        assert!(s.notes.iter().any(|n| n.code == "nvlink-from-hwloc"));
        assert!(!s.notes.iter().any(|n| n.code == "nvlink-unknown"));
    }
}

#[test]
fn the_xe8640_plans_its_ring_over_nvlink_and_names_its_active_hca() {
    let dir = tempfile::tempdir().unwrap();
    let xe = data("hwloc/llnl-ipa20-dell-xe8640-4xh100.xml");
    let cfg = cluster(
        dir.path(),
        &format!("nodes:\n  - host: \"xe-[1-2]\"\n    simulate: {xe}\n"),
    );
    let (code, p) = plan(&cfg, &[]);
    assert_eq!(code, Some(0));
    assert_schema("plan", &p);
    let c = &p["node_classes"][0];
    // Before: 10.0 GB/s (PCIe across sockets), with a note to state `nvlink: nvswitch`.
    let ring = c["ring"]["bottleneck_gbps"].as_f64().unwrap();
    assert!((ring - 123.6).abs() < 0.05, "6 NVLink 4 links at 20.6 GB/s: {ring}");
    assert_eq!(c["nvlink"]["origins"], serde_json::json!(["hwloc-distances"]));
    assert_eq!(c["nvlink"]["links"][0], serde_json::json!([0, 6, 6, 6]));
    assert!(!p["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["code"] == "nvlink-unknown"));
    // The InfiniBand class: only mlx5_0's port is active (the others are down in the file).
    let hca = setting(&p, "NCCL_IB_HCA").expect("NCCL_IB_HCA is written");
    assert_eq!(hca["value"], "=mlx5_0");
    let why = hca["reason"].as_str().unwrap();
    assert!(
        why.contains("mlx5_0 (PIX to GPU0)") && why.contains("3 other RDMA device(s) left out"),
        "{why}"
    );
}

#[test]
fn a_four_gpu_mesh_can_be_stated_in_cluster_yaml() {
    let dir = tempfile::tempdir().unwrap();
    // An NCCL file without <nvlink>: its NVLink is unknown until cluster.yaml states it.
    let ndv5 = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/nccl/azure-ndv5-topo.xml");
    let base = format!(
        "nodes:\n  - host: n1\n    simulate: {}\n    gpu: h100-sxm5\n",
        ndv5.display()
    );
    let ring = |yaml: &str| -> (f64, Value) {
        let cfg = cluster(dir.path(), yaml);
        let (code, p) = plan(&cfg, &[]);
        assert_eq!(code, Some(0), "{p}");
        (p["node_classes"][0]["ring"]["bottleneck_gbps"].as_f64().unwrap(), p)
    };
    let (pcie, _) = ring(&base);
    assert!(pcie < 20.0, "{pcie}");
    let (mesh, p) = ring(&format!(
        "{base}    nvlink: mesh\n    nvlink_mesh: {{links_per_pair: 6}}\n"
    ));
    assert!((mesh - 123.6).abs() < 0.05, "{mesh}");
    assert_eq!(
        p["node_classes"][0]["nvlink"]["origins"],
        serde_json::json!(["cluster.yaml"])
    );
    assert!(p["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["code"] == "stated-mesh"));
    let (by_gbps, _) = ring(&format!(
        "{base}    nvlink: mesh\n    nvlink_mesh: {{gbps_per_pair: 123.6}}\n"
    ));
    assert!((by_gbps - 123.6).abs() < 0.05, "{by_gbps}");
    // A hybrid cube mesh of 8: pairs with 1 or 2 links, some with none.
    let rows = [
        "[0,1,1,2,2,0,0,0]",
        "[1,0,2,1,0,2,0,0]",
        "[1,2,0,2,0,0,1,0]",
        "[2,1,2,0,0,0,0,1]",
        "[2,0,0,0,0,1,1,2]",
        "[0,2,0,0,1,0,2,1]",
        "[0,0,1,0,1,2,0,2]",
        "[0,0,0,1,2,1,2,0]",
    ];
    let (_, p) = ring(&format!(
        "{base}    nvlink: mesh\n    nvlink_mesh: {{links: [{}]}}\n",
        rows.join(",")
    ));
    assert_eq!(
        p["node_classes"][0]["nvlink"]["links"][0],
        serde_json::json!([0, 1, 1, 2, 2, 0, 0, 0])
    );
}

#[test]
fn a_wrong_mesh_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (mesh, line, words) in [
        ("    nvlink: mesh\n", ":3:", "needs `nvlink_mesh:`"),
        (
            "    nvlink_mesh: {links_per_pair: 6}\n",
            ":3:",
            "goes with `nvlink: mesh`",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {links: [[0,1],[2,0]]}\n",
            ":4:",
            "a link joins both GPUs",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {links: [[1,1],[1,0]]}\n",
            ":4:",
            "no NVLink to itself",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {links_per_pair: 0}\n",
            ":4:",
            "1 to 64",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {gbps_per_pair: 1e-300}\n",
            ":4:",
            "1 to 10000 GB/s",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {gbps_per_pair: -40}\n",
            ":4:",
            "1 to 10000 GB/s",
        ),
        (
            "    nvlink: mesh\n    nvlink_mesh: {links_per_pair: 6, gbps_per_pair: 10}\n",
            ":4:",
            "exactly one",
        ),
        ("    nvlink_domain: \"a b\"\n", ":3:", "nvlink_domain"),
    ] {
        let cfg = cluster(dir.path(), &format!("nodes:\n  - host: n1\n{mesh}"));
        let o = tt(["plan"]).config(&cfg).run();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(65), "{mesh}: {err}");
        assert!(err.contains(&format!("cluster.yaml{line}")), "{mesh}: {err}");
        assert!(err.contains(words), "{mesh}: {err}");
    }
}

#[test]
fn a_hidden_nvswitch_and_fused_nics_are_read_not_refused() {
    let file = data("nvlink/b200-vm-hidden-nvswitch.nccl.xml");
    // Before: "`fffffff:ffff:ff` is not a PCI bus id", the whole file refused.
    let m = matrix(&["--from-nccl-topo", &file]);
    assert_eq!(&row(&m, "GPU0")[1..3], ["X", "NV18"], "{m}");
    assert!(m.contains("NIC0") && m.contains("NIC1"), "both fused devices: {m}");
    let s = probe_json(&["--from-nccl-topo", &file]);
    let names: Vec<&str> = s.nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1"]);
    let rate = s.nics[0].rdma.as_ref().unwrap().ports[0].rate_gbps;
    assert_eq!(rate, Some(400.0), "the fused 800 Gb/s shared between the two");
    assert!(s.notes.iter().any(|n| n.code == "fused-nic"));
    assert!(s.notes.iter().any(|n| n.code == "nvswitch-hidden"));
    let links = s.gpus[1].nvlinks.as_ref().unwrap();
    assert_eq!(links.len(), 18);
    assert!(
        links.iter().all(|l| l.remote_bdf.is_none()),
        "a hidden switch has no bus id"
    );
    // Every rule and the guard see the real devices.
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), &format!("nodes:\n  - host: vm1\n    simulate: {file}\n"));
    let (code, p) = plan(&cfg, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(setting(&p, "NCCL_IB_HCA").unwrap()["value"], "=mlx5_0,mlx5_1");
    let ports: Vec<&str> = p["nccl"]["classes"][0]["gpu_ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["device"].as_str().unwrap())
        .collect();
    assert_eq!(ports, ["mlx5_0", "mlx5_1"]);
    // B200 on a hidden NVSwitch: 18 NVLink 5 links at NCCL's 40.1 GB/s.
    let ring = p["node_classes"][0]["ring"]["bottleneck_gbps"].as_f64().unwrap();
    assert!((ring - 721.8).abs() < 0.05, "{ring}");
}

#[test]
fn a_fused_device_also_listed_on_its_own_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(data("nvlink/b200-vm-hidden-nvswitch.nccl.xml")).unwrap();
    let both = text.replace(
        "      <pci busid=\"0000:1d:00.1\"",
        "      <pci busid=\"0000:1d:00.0\" class=\"0x020700\" vendor=\"0x15b3\" device=\"0x1021\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n        <nic>\n          <net name=\"mlx5_0\" dev=\"2\" speed=\"400000\" port=\"1\"/>\n          <net name=\"mlx5_1\" dev=\"3\" speed=\"400000\" port=\"2\"/>\n        </nic>\n      </pci>\n      <pci busid=\"0000:1d:00.1\"",
    );
    let f = dir.path().join("both.xml");
    std::fs::write(&f, both).unwrap();
    let s = probe_json(&["--from-nccl-topo", f.to_str().unwrap()]);
    let names: Vec<&str> = s.nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1"], "no device twice");
    assert_eq!(
        s.nics[1].rdma.as_ref().unwrap().ports[0].port,
        2,
        "the device's own listing wins"
    );
    // A fused name with an empty part is refused, with what it should be.
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, text.replace("mlx5_0+mlx5_1", "mlx5_0+")).unwrap();
    let o = tt(["probe", "--from-nccl-topo"]).arg(&bad).run();
    assert_eq!(o.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&o.stderr).contains("joined by `+`"));
}

#[test]
fn a_gb200_tray_is_planned_over_nvlink_and_its_domain_is_said_unknown() {
    let tray = example("nvl72/gb200-tray.nccl-topo.xml");
    let s = probe_json(&["--from-nccl-topo", &tray]);
    assert_eq!(s.gpus.len(), 4);
    assert!(s.gpus.iter().all(|g| g.name == "NVIDIA GB200"));
    let c2c = s.gpus[0].c2c.as_ref().expect("<c2c> is read");
    assert_eq!((c2c.links, c2c.gbps_per_link), (10, Some(45.0)));
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(
        dir.path(),
        &format!("nodes:\n  - host: \"gb-[1-2]\"\n    simulate: {tray}\n"),
    );
    let (code, p) = plan(&cfg, &[]);
    assert_eq!(code, Some(0));
    // Before: "PCIe paths only, bottleneck 10 GB/s".
    let ring = p["node_classes"][0]["ring"]["bottleneck_gbps"].as_f64().unwrap();
    assert!((ring - 721.8).abs() < 0.05, "{ring}");
    let notes = p["notes"].as_array().unwrap();
    let unknown = notes
        .iter()
        .find(|n| n["code"] == "nvlink-domain-unknown")
        .expect("the domain is said unknown");
    assert!(unknown["message"].as_str().unwrap().contains("`nvlink_domain:`"));
    assert!(p.get("nvlink_domains").is_none(), "no domain is made up");
}

/// The 36-tray example: each rack one domain, hostnames interleaved.
fn nvl72() -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    let o = tt(["plan"])
        .json()
        .config(example("nvl72/cluster.yaml"))
        .out(dir.path())
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, json(&o))
}

#[test]
fn domains_stay_contiguous_in_the_order_and_are_worth_their_nvlink() {
    let (_dir, p) = nvl72();
    assert_schema("plan", &p);
    let order: Vec<&str> = p["node_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let domain_of = |h: &str| {
        let n: u32 = h.trim_start_matches("gb-").parse().unwrap();
        n % 2
    };
    let changes = (0..order.len())
        .filter(|&i| domain_of(order[i]) != domain_of(order[(i + 1) % order.len()]))
        .count();
    assert_eq!(changes, 2, "each domain contiguous: {order:?}");
    assert_eq!(p["crossings"]["solved"]["domain"], 2);
    assert_eq!(
        p["crossings"]["default"]["domain"], 36,
        "hostname order leaves a domain at every step"
    );
    assert_eq!(p["crossings"]["lower_bound"]["domain"], 2);
    let domains = p["nvlink_domains"].as_array().unwrap();
    assert_eq!(domains.len(), 2);
    assert_eq!(domains[0]["hosts"].as_array().unwrap().len(), 18);
    assert_eq!(domains[0]["gpus"], 72);
    assert_eq!(domains[0]["source"], "cluster.yaml");
    let with = p["predicted"]["solved"]["busbw_gbps"].as_f64().unwrap();
    let without = p["predicted"]["without_domains"]["busbw_gbps"].as_f64().unwrap();
    assert!(
        with > 2.5 * without,
        "NVLink inside the racks: {with} vs {without} over the NICs"
    );
    assert!(p["predicted"]["solved"]["bottleneck"]
        .as_str()
        .unwrap()
        .starts_with("intra-node ring"));
    // NCCL searches rings inside a domain itself: no ring file for its nodes.
    assert!(p["node_classes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["graph_xml"].is_null()));
}

#[test]
fn slurm_gets_one_block_per_domain_and_kubernetes_the_labels() {
    let (dir, _) = nvl72();
    let conf = std::fs::read_to_string(dir.path().join("topology.conf")).unwrap();
    let blocks: Vec<&str> = conf.lines().filter(|l| l.starts_with("BlockName=")).collect();
    assert_eq!(
        blocks,
        [
            "BlockName=block001 Nodes=gb-[01,03,05,07,09,11,13,15,17,19,21,23,25,27,29,31,33,35]",
            "BlockName=block002 Nodes=gb-[02,04,06,08,10,12,14,16,18,20,22,24,26,28,30,32,34,36]"
        ]
    );
    assert!(conf.contains("# block001=nvl72-rack-1\n"), "{conf}");
    assert!(conf.lines().any(|l| l == "BlockSizes=18,36"), "{conf}");
    let tree = std::fs::read_to_string(dir.path().join("topology-tree.conf")).unwrap();
    assert!(tree.contains("SwitchName=rack-1 Nodes="), "{tree}");
    let yaml = std::fs::read_to_string(dir.path().join("topology.yaml")).unwrap();
    let doc: Vec<serde_json::Value> = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(doc.len(), 2, "a block topology and the tree: {yaml}");
    assert_eq!(doc[0]["topology"], "topo-tune-nvlink");
    assert_eq!(doc[0]["cluster_default"], true);
    assert_eq!(doc[0]["block"]["block_sizes"], serde_json::json!([18, 36]));
    assert_eq!(doc[0]["block"]["blocks"].as_array().unwrap().len(), 2);
    assert_eq!(doc[1]["cluster_default"], false);
    assert!(doc[1]["tree"]["switches"].as_array().is_some());
    // Kubernetes: the clique label and Topograph's, one Node object per tray.
    let labels = std::fs::read_to_string(dir.path().join("k8s-node-labels.yaml")).unwrap();
    let nodes: Vec<&str> = labels.split("\n---\n").skip(1).collect();
    assert_eq!(nodes.len(), 36);
    let first: serde_json::Value = serde_saphyr::from_str(nodes[0]).unwrap();
    assert_eq!(first["kind"], "Node");
    let l = &first["metadata"]["labels"];
    assert_eq!(l["nvidia.com/gpu.clique"], l["network.topology.nvidia.com/accelerator"]);
    assert!(l["nvidia.com/gpu.clique"].as_str().unwrap().starts_with("nvl72-rack-"));
    assert_eq!(l["network.topology.nvidia.com/spine"], "spine-1");
    for (k, v) in l.as_object().unwrap() {
        let v = v.as_str().unwrap();
        assert!(
            v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{k}={v}"
        );
    }
    let sh = std::fs::read_to_string(dir.path().join("k8s-label-nodes.sh")).unwrap();
    assert_eq!(
        sh.lines()
            .filter(|l| l.starts_with("kubectl label node --overwrite gb-"))
            .count(),
        36
    );
}

/// The H200 VM's NVML answers with one fabric shape for its GPU.
fn fabric_probe(fabric: Value) -> topo_tune::api::NodeSnapshot {
    let dir = tempfile::tempdir().unwrap();
    machines::h200_vm(dir.path().join("root").as_path());
    let mut nvml: Value = serde_json::from_str(&machines::h200_vm_nvml()).unwrap();
    nvml["gpus"][0]["fabric"] = fabric;
    // 18 NVLinks to a switch the VM cannot see, as a multi-node tray's GPU has them.
    nvml["gpus"][0]["nvlinks"] = (0..18)
        .map(|l| serde_json::json!({"link": l, "active": true, "version": 4, "remote_bus_id": "00000000:FF:00.0"}))
        .collect::<Vec<_>>()
        .into();
    let fixture = dir.path().join("nvml.json");
    std::fs::write(&fixture, nvml.to_string()).unwrap();
    let root = dir.path().join("root");
    probe_json(&[
        "--fsroot",
        root.to_str().unwrap(),
        "--nvml-fixture",
        fixture.to_str().unwrap(),
    ])
}

const UUID_HEX: &str = "dc6e40c4d72243579ba65291dd461278";
const UUID: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278";

fn answer(ret: u32, state: u8, status: u32, uuid: &str, mask: u32, summary: u8) -> Value {
    serde_json::json!({
        "ret": ret, "version": 3, "cluster_uuid": uuid, "status": status,
        "clique_id": 2, "state": state, "health_mask": mask, "health_summary": summary
    })
}

#[test]
fn each_shape_of_nvml_fabric_info_is_decoded_as_nvml_defines_it() {
    // Completed, success, healthy (0xaa is every flag FALSE): a domain.
    let s = fabric_probe(answer(0, 3, 0, UUID_HEX, 0xaa, 1));
    assert_eq!(s.nvlink_domain.as_deref(), Some(format!("{UUID}.2").as_str()));
    let f = s.gpus[0].fabric.as_ref().unwrap();
    let h = f.health.as_ref().unwrap();
    assert_eq!((h.degraded_bandwidth, h.route_unhealthy), (Some(false), Some(false)));
    assert!(!s.notes.iter().any(|n| n.code.starts_with("nvlink-")), "{:?}", s.notes);
    // Not supported (an H100/H200 HGX, a VM): no domain, no complaint.
    let s = fabric_probe(answer(3, 0, 0, &"0".repeat(32), 0, 0));
    assert_eq!(
        s.gpus[0].fabric.as_ref().unwrap().state,
        topo_tune::api::FabricState::NotSupported
    );
    assert_eq!(s.nvlink_domain, None);
    assert!(!s.notes.iter().any(|n| n.code == "nvlink-domain-not-joined"));
    // In progress (Fabric Manager not done): not a member yet, said.
    let s = fabric_probe(answer(0, 2, 0, UUID_HEX, 0, 0));
    assert_eq!(s.nvlink_domain, None);
    let n = s.notes.iter().find(|n| n.code == "nvlink-domain-not-joined").unwrap();
    assert!(n.message.contains("inprogress"), "{}", n.message);
    // Completed with an error status.
    let s = fabric_probe(answer(0, 3, 27, UUID_HEX, 0xaa, 1));
    assert_eq!(s.nvlink_domain, None);
    assert!(s
        .notes
        .iter()
        .any(|n| n.code == "nvlink-domain-not-joined" && n.message.contains("not_ready")));
    // Completed, success, but a zero UUID (H100 does this): no domain, as NCCL and torchcomms.
    let s = fabric_probe(answer(0, 3, 0, &"0".repeat(32), 0xaa, 1));
    assert_eq!(s.nvlink_domain, None);
    assert!(s.notes.iter().any(|n| n.message.contains("all-zero cluster UUID")));
    // Degraded bandwidth; route unhealthy with an unhealthy summary: members, with warnings.
    let s = fabric_probe(answer(0, 3, 0, UUID_HEX, 0xa9, 3));
    assert!(s.nvlink_domain.is_some());
    let w = s.notes.iter().find(|n| n.code == "nvlink-fabric-unhealthy").unwrap();
    assert!(
        w.message.contains("NVLink bandwidth degraded") && w.message.contains("limited capacity"),
        "{}",
        w.message
    );
    let s = fabric_probe(answer(0, 3, 0, UUID_HEX, 0x9a, 2));
    let w = s.notes.iter().find(|n| n.code == "nvlink-fabric-unhealthy").unwrap();
    assert!(
        w.message.contains("route unhealthy") && w.message.contains("unhealthy"),
        "{}",
        w.message
    );
    // A driver with only the v1 call: no health, still a domain.
    let mut v1 = answer(0, 3, 0, UUID_HEX, 0, 0);
    v1["version"] = 1.into();
    v1["health_mask"] = Value::Null;
    v1["health_summary"] = Value::Null;
    let s = fabric_probe(v1);
    assert!(s.nvlink_domain.is_some());
    assert!(s.gpus[0].fabric.as_ref().unwrap().health.is_none());
}

#[test]
fn a_domain_stated_against_the_nodes_own_is_an_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let snap = fabric_probe(answer(0, 3, 0, UUID_HEX, 0xaa, 1));
    let probes = dir.path().join("probes");
    std::fs::create_dir(&probes).unwrap();
    let mut s = snap.clone();
    s.hostname = "vm1".into();
    std::fs::write(probes.join("vm1.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let cfg = cluster(dir.path(), "nodes:\n  - host: vm1\n    nvlink_domain: nvl72-rack-9\n");
    let o = tt(["plan"]).config(&cfg).arg("--from-probes").arg(&probes).run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(65), "{err}");
    assert!(
        err.contains("cluster.yaml:2:") && err.contains("nvl72-rack-9") && err.contains(UUID),
        "{err}"
    );
    // The node's own domain, unstated: a one-node domain in the plan, from NVML.
    let cfg = cluster(dir.path(), "nodes:\n  - host: vm1\n");
    let (code, p) = plan(&cfg, &["--from-probes", probes.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert_eq!(p["nvlink_domains"][0]["source"], "nvml");
    assert_eq!(p["nvlink_domains"][0]["name"], format!("{UUID}.2"));
}

#[test]
fn settings_that_turn_nvlink_off_are_refused_where_it_exists() {
    let dir = tempfile::tempdir().unwrap();
    let tray = example("nvl72/gb200-tray.nccl-topo.xml");
    for (var, on_domain_only) in [("NCCL_CUMEM_ENABLE", true), ("NCCL_MNNVL_ENABLE", true)] {
        let yaml = |domain: bool| {
            format!(
                "nccl_version: \"2.28.9\"\nnccl: {{{var}: \"0\"}}\nnodes:\n  - host: gb-1\n    simulate: {tray}\n{}",
                if domain { "    nvlink_domain: nvl72-a\n" } else { "" }
            )
        };
        let (code, p) = plan(&cluster(dir.path(), &yaml(true)), &[]);
        assert_eq!(code, Some(0));
        let refused = &p["nccl"]["refused"][0]["reason"];
        let why = refused
            .as_str()
            .unwrap_or_else(|| panic!("{var} is refused on a domain member: {p}"));
        assert!(
            why.contains(&format!("{var}=0")) && why.contains("NVLink domain nvl72-a"),
            "{why}"
        );
        let (_, p) = plan(&cluster(dir.path(), &yaml(false)), &[]);
        assert_eq!(
            p["nccl"]["refused"].as_array().unwrap().is_empty(),
            on_domain_only,
            "{var} outside a domain: {p}"
        );
    }
    // The debugging variables that also turn NVLink off are refused node-wide at load.
    let cfg = cluster(
        dir.path(),
        &format!("nccl: {{NCCL_P2P_DISABLE: \"1\"}}\nnodes:\n  - host: gb-1\n    simulate: {tray}\n"),
    );
    let o = tt(["plan"]).config(&cfg).run();
    assert_eq!(o.status.code(), Some(65));
}

#[test]
fn an_operators_nvlink_killer_is_kept_and_warned_of() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A paper tray's files go under out/<host>/etc/…: plant the operator's drop-in there.
    let confd = out.join("gb-01/etc/nccl/conf.d");
    std::fs::create_dir_all(&confd).unwrap();
    std::fs::write(confd.join("10-site.conf"), "NCCL_CUMEM_ENABLE=0\n").unwrap();
    let tray = example("nvl72/gb200-tray.nccl-topo.xml");
    let cfg = cluster(
        dir.path(),
        &format!("nccl_version: \"2.28.9\"\nnodes:\n  - host: \"gb-[01-02]\"\n    simulate: {tray}\n    nvlink_domain: nvl72-a\n"),
    );
    let o = tt(["init"]).json().config(&cfg).out(&out).run();
    let doc = json(&o);
    assert_eq!(o.status.code(), Some(0), "{doc}");
    assert_schema("init", &doc);
    let node = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == "gb-01")
        .unwrap();
    let w = node["warnings"][0].as_str().expect("a warning on gb-01");
    assert!(
        w.contains("10-site.conf") && w.contains("NCCL_CUMEM_ENABLE=0") && w.contains("NVLink domain nvl72-a"),
        "{w}"
    );
    let other = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == "gb-02")
        .unwrap();
    assert!(other.get("warnings").is_none());
    // Kept: the operator's setting is in the assembled file.
    let conf = std::fs::read_to_string(out.join("gb-01/etc/nccl.conf")).unwrap();
    assert!(conf.contains("NCCL_CUMEM_ENABLE=0"));
}

#[test]
fn inputs_topo_tune_cannot_read_say_what_they_are() {
    // Before: "hwloc_topology_load failed with errno Some(Errno { code: 22, … })".
    let o = tt(["probe", "--from-hwloc-xml", &data("nvlink/hwloc3-4xh100.xml")]).run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(65), "{err}");
    assert!(
        err.contains("an hwloc 3.0 export") && err.contains("lstopo --of v2xml"),
        "{err}"
    );
    assert!(!err.contains("errno"), "{err}");
    // Before: "<system> must carry version=1 (NCCL refuses any other)".
    let o = tt(["probe", "--from-nccl-topo", &data("nvlink/rccl-v2.xml")]).run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(65));
    assert!(err.contains("an RCCL topology file") && err.contains("AMD"), "{err}");
    // Before: "no NVIDIA GPU found" and nothing about the AMD GPUs.
    let s = probe_json(&["--from-hwloc-xml", &data("nvlink/hwloc-2xmi300x.xml")]);
    let n = s.notes.iter().find(|n| n.code == "no-gpu").unwrap();
    assert!(n.message.contains("2 AMD GPU(s)"), "{}", n.message);
}

#[test]
fn every_real_topology_reads_as_before_or_better() {
    // The shared real files: GPU and NIC counts as before; a pair's NVLink never worse.
    for (file, gpus, nics) in [
        ("hwloc/llnl-ipa20-dell-xe8640-4xh100.xml", 4, 6),
        ("nccl/aws-p4de-24xl-topo.xml", 8, 4),
        ("nccl/aws-p5.48xl-topo.xml", 8, 32),
        ("nccl/azure-ndv2-topo.xml", 8, 1),
    ] {
        let flag = if file.starts_with("hwloc") {
            "--from-hwloc-xml"
        } else {
            "--from-nccl-topo"
        };
        let s = probe_json(&[flag, &data(file)]);
        assert_eq!((s.gpus.len(), s.nics.len()), (gpus, nics), "{file}");
    }
}

#[test]
fn an_asymmetric_nvlink_matrix_is_refused() {
    // hwloc's NVML backend writes both cells of a pair from one link count: one cell edited
    // (GPU0 -> GPU1 doubled) would have turned the ring toward it.
    let text = std::fs::read_to_string(data("nvlink/hwloc-4xh100-mesh.xml")).unwrap();
    let edited = text.replacen("1000000 150000 150000", "1000000 300000 150000", 1);
    assert_ne!(edited, text);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("edited.xml");
    std::fs::write(&file, edited).unwrap();
    let o = tt(["probe", "--from-hwloc-xml", file.to_str().unwrap()]).run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(65), "{err}");
    assert!(
        err.contains("NVLinkBandwidth:") && err.contains("300000 MB/s but") && err.contains("150000"),
        "{err}"
    );
    // The file as hwloc wrote it reads.
    assert_eq!(
        tt(["probe", "--from-hwloc-xml", &data("nvlink/hwloc-4xh100-mesh.xml")])
            .run()
            .status
            .code(),
        Some(0)
    );
}
