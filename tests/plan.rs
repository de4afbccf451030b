//! `topo-tune plan`: node order, crossings, predictions, launcher files, per-job graph files.

use crate::common::{machines, tt};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// One probe snapshot of a real machine, written once per host into `probes/`.
fn probes_from_profile(dir: &Path, profile: &str, hosts: &[String]) {
    let xml = format!("{}/profiles/{profile}.xml", env!("CARGO_MANIFEST_DIR"));
    let out = tt(["probe", "--from-hwloc-xml", &xml]).json().run();
    assert!(out.status.success());
    std::fs::create_dir_all(dir).unwrap();
    for h in hosts {
        std::fs::write(dir.join(format!("{h}.json")), &out.stdout).unwrap();
    }
}

fn plan_json(cfg: &Path, probes: &Path, extra: &[&str]) -> (i32, Value) {
    let out = tt(["plan"])
        .json()
        .config(cfg)
        .arg("--from-probes")
        .arg(probes)
        .args(extra)
        .run();
    let doc =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), doc)
}

/// 256 p5en nodes in 4 racks (one leaf each, 3200 Gb/s uplinks), hostnames interleaving racks.
fn interleaved_cluster(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let hosts: Vec<String> = (1..=256).map(|i| format!("gpu{i:03}")).collect();
    let probes = dir.join("probes");
    probes_from_profile(&probes, "aws-p5en", &hosts);
    let mut y = String::from("fabric:\n  leaves:\n");
    for r in 0..4 {
        writeln!(y, "    leaf-{r}: {{spine: spine-0, uplink_gbps: 3200}}").unwrap();
    }
    y.push_str("  racks:\n");
    for r in 0..4 {
        writeln!(y, "    rack-{r}: {{leaf: leaf-{r}}}").unwrap();
    }
    y.push_str("nodes:\n");
    for (i, h) in hosts.iter().enumerate() {
        writeln!(y, "  - host: {h}\n    labels: {{rack: rack-{}}}", i % 4).unwrap();
    }
    let cfg = dir.join("cluster.yaml");
    std::fs::write(&cfg, y).unwrap();
    (cfg, probes)
}

#[test]
fn four_racks_256_nodes_interleaved_hostnames() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, probes) = interleaved_cluster(dir.path());
    let out = dir.path().join("plan");
    let (code, doc) = plan_json(&cfg, &probes, &["--output-dir", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    let order: Vec<&str> = doc["node_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 256);
    // Racks are contiguous: gpu001, gpu005, gpu009, … first.
    assert_eq!(&order[..3], ["gpu001", "gpu005", "gpu009"]);
    assert_eq!(doc["crossings"]["solved"]["rack"], 4);
    assert_eq!(doc["crossings"]["lower_bound"]["rack"], 4);
    assert_eq!(doc["crossings"]["default"]["rack"], 256);
    let solved = doc["predicted"]["solved"]["busbw_gbps"].as_f64().unwrap();
    let default = doc["predicted"]["default"]["busbw_gbps"].as_f64().unwrap();
    assert!(solved > default * 5.0, "solved {solved} vs default {default}");
    // Hostname order pushes all 64 ring edges of a rack through its leaf's uplink; the solved
    // order one. (The solved figure is then latency-bound: a flat 2048-rank ring.)
    assert!(doc["predicted"]["default"]["bottleneck"]
        .as_str()
        .unwrap()
        .contains("uplink of leaf-"));
    assert!(doc["predicted"]["default"]["bottleneck"]
        .as_str()
        .unwrap()
        .contains("shared by 64 ring edge(s)"));
    assert!(!doc["predicted"]["solved"]["bottleneck"]
        .as_str()
        .unwrap()
        .contains("uplink"));
    eprintln!(
        "256 nodes, 4 racks: solved {solved:.1} GB/s, default {default:.1} GB/s, gain {:.1}x",
        doc["predicted"]["gain"].as_f64().unwrap()
    );
    // Launcher files, in that order.
    let hostfile = std::fs::read_to_string(out.join("hostfile")).unwrap();
    assert_eq!(hostfile.lines().next(), Some("gpu001 slots=8"));
    assert_eq!(hostfile.lines().count(), 256);
    let slurm = std::fs::read_to_string(out.join("slurm-hostfile")).unwrap();
    assert_eq!(slurm.lines().count(), 2048);
    assert!(slurm.lines().take(8).all(|l| l == "gpu001") && slurm.lines().nth(8) == Some("gpu005"));
    let ranks = std::fs::read_to_string(out.join("torchrun-node-ranks.txt")).unwrap();
    assert_eq!(ranks.lines().nth(1), Some("gpu005 1"));
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan["node_order"], doc["node_order"]);
    // NVSwitch boards: index order is optimal, so no graph file.
    assert!(doc["node_classes"][0]["graph_file"].is_null());
    assert!(doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["code"] == "assumed-nvswitch"));
    // A second identical run changes nothing.
    let (_, again) = plan_json(&cfg, &probes, &["--output-dir", out.to_str().unwrap()]);
    assert_eq!(again["changed"], false);
}

#[test]
fn graph_file_only_where_the_solved_ring_beats_index_order() {
    // 8 GPUs whose NVLink bridges pair GPU i with GPU i+4: index order cannot use them.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    machines::dgx_like(&root);
    let bdfs: Vec<&str> = machines::DGX_SWITCHES
        .iter()
        .flat_map(|s| [s.endpoints[0], s.endpoints[1]])
        .collect();
    let gpus: Vec<Value> = (0..8)
        .map(|i| {
            let links: Vec<Value> = (0..4).map(|l| serde_json::json!({"link": l, "active": true, "version": 4, "remote_bus_id": format!("0000{}", bdfs[(i + 4) % 8])})).collect();
            serde_json::json!({"index": i, "name": "NVIDIA H200", "uuid": null, "bus_id": format!("0000{}", bdfs[i]), "numa_node": null,
                "pcie_current_gen": 5, "pcie_current_width": 16, "pcie_max_gen": 5, "pcie_max_width": 16,
                "cpu_affinity": null, "compute_capability": [9, 0], "nvlinks": links})
        })
        .collect();
    let fixture = dir.path().join("nvml.json");
    std::fs::write(
        &fixture,
        serde_json::json!({"driver_version": "580", "gpus": gpus}).to_string(),
    )
    .unwrap();
    let snap = tt(["probe", "--fsroot"])
        .json()
        .arg(&root)
        .arg("--nvml-fixture")
        .arg(&fixture)
        .run();
    assert!(snap.status.success());
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    std::fs::write(probes.join("n1.json"), &snap.stdout).unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: n1\n").unwrap();
    let out = dir.path().join("plan");
    let (code, doc) = plan_json(&cfg, &probes, &["--output-dir", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    let class = &doc["node_classes"][0];
    let ring: Vec<u64> = class["ring"]["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    // (a + 4) % 8 == b is symmetric for 8 GPUs: one test per ring edge.
    let nvlink_hops = (0..8).filter(|&k| (ring[k] + 4) % 8 == ring[(k + 1) % 8]).count();
    assert_eq!(nvlink_hops, 4, "ring {ring:?} uses all four NVLink bridges");
    // It crosses sockets over NVLink only: PCIe hops stay within a socket (48 GB/s), while
    // index order must cross the SMP interconnect (GPU3 -> GPU4, 10 GB/s).
    assert_eq!(class["ring"]["bottleneck_gbps"], 48.0);
    assert_eq!(class["index_order_bottleneck_gbps"], 10.0);
    let xml_path = class["graph_file"].as_str().expect("a graph file for this class");
    let xml = std::fs::read_to_string(xml_path).unwrap();
    assert!(
        xml.starts_with("<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\""),
        "{xml}"
    );
    assert!(
        !xml.contains('\t') && !xml.contains("<?xml"),
        "NCCL's parser rejects tabs and declarations"
    );
    let doc_xml = roxmltree::Document::parse(&xml).unwrap();
    let channel: Vec<String> = doc_xml
        .descendants()
        .find(|n| n.has_tag_name("channel"))
        .unwrap()
        .children()
        .filter(|n| n.has_tag_name("gpu"))
        .map(|n| n.attribute("dev").unwrap().to_string())
        .collect();
    let want: Vec<String> = ring.iter().map(|g| format!("{g:#x}")).collect();
    assert_eq!(channel, want);
}

#[test]
fn degenerate_clusters_plan_or_say_why() {
    let dir = tempfile::tempdir().unwrap();
    // One VM with one GPU and no RDMA NIC; one CPU-only node; one GPU node the fabric misses.
    for (name, build) in [
        (
            "vm1",
            machines::h200_vm as fn(&Path) -> crate::common::fakesys::FakeMachine,
        ),
        ("cpu1", machines::cpu_only),
        ("vm2", machines::h200_vm),
    ] {
        let root = dir.path().join(name);
        build(&root);
        let snap = tt(["probe", "--fsroot"]).json().arg(&root).run();
        std::fs::create_dir_all(dir.path().join("probes")).unwrap();
        std::fs::write(dir.path().join(format!("probes/{name}.json")), &snap.stdout).unwrap();
    }
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "fabric:\n  racks:\n    r1: {}\nnodes:\n  - host: vm1\n    labels: {rack: r1}\n  - host: cpu1\n    labels: {rack: r1}\n  - host: vm2\n").unwrap();
    let (code, doc) = plan_json(&cfg, &dir.path().join("probes"), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["node_order"],
        serde_json::json!(["vm1", "vm2"]),
        "unplaced vm2 last; cpu1 holds no rank"
    );
    assert_eq!(doc["excluded"][0]["host"], "cpu1");
    let codes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"unplaced-nodes") && codes.contains(&"no-rdma-nic"),
        "{codes:?}"
    );
    assert!(doc["predicted"]["solved"]["bottleneck"]
        .as_str()
        .unwrap()
        .starts_with("network of"));

    // A single one-GPU node: nothing to reduce, said plainly.
    std::fs::write(&cfg, "nodes:\n  - host: vm1\n").unwrap();
    let (code, doc) = plan_json(&cfg, &dir.path().join("probes"), &[]);
    assert_eq!(code, 0);
    assert_eq!(doc["predicted"]["solved"]["busbw_gbps"], 0.0);
    assert!(doc["predicted"]["solved"]["bottleneck"]
        .as_str()
        .unwrap()
        .contains("fewer than 2 ranks"));

    // Missing probes: the plan covers the rest, names the missing, exits 4.
    std::fs::write(&cfg, "nodes:\n  - host: vm1\n  - host: ghost\n").unwrap();
    let (code, doc) = plan_json(&cfg, &dir.path().join("probes"), &[]);
    assert_eq!(code, topo_tune::exit::PARTIAL_FAILURE.code());
    assert_eq!(doc["excluded"][0]["host"], "ghost");

    let out = tt(["plan", "--message-size", "1X"]).config(&cfg).run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::USAGE.code()));
}

/// Every real topology the project carries, one simulated node each, as docs/plan.md shows them.
const REAL_MACHINES: &[&str] = &[
    "profiles/aws-p4d.xml",
    "profiles/aws-p5en.xml",
    "profiles/aws-p6-b200.xml",
    "profiles/nccl/aws-p4d-24xl-topo.xml",
    "tests/data/nccl/aws-p4de-24xl-topo.xml",
    "tests/data/nccl/aws-p5.48xl-topo.xml",
    "tests/data/nccl/aws-g5.48xl-topo.xml",
    "tests/data/nccl/azure-ndv2-topo.xml",
    "profiles/nccl/azure-ndv4-topo.xml",
    "profiles/nccl/azure-ndv5-topo.xml",
    "tests/data/hwloc/llnl-ipa20-dell-xe8640-4xh100.xml",
];

/// One row of the table: what `plan` says about one machine.
fn real_machine_row(file: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::write(&cfg, format!("nodes:\n  - host: node\n    simulate: {path}\n")).unwrap();
    let out = tt(["plan"]).json().config(&cfg).run();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["code"].as_str())
        .filter(|c| ["assumed-nvswitch", "nvlink-unknown"].contains(c))
        .collect();
    match doc["node_classes"].as_array().unwrap().first() {
        None => format!(
            "| `{file}` | 0 | — | — | — | — | excluded: {} |\n",
            doc["excluded"][0]["reason"].as_str().unwrap()
        ),
        Some(c) => {
            let ring: Vec<String> = c["ring"]["order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.to_string())
                .collect();
            let origins: Vec<&str> = c["nvlink"]["origins"]
                .as_array()
                .map(|o| o.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            format!(
                "| `{file}` | {} | {} | {:.1} | {} | {} | {} |\n",
                c["gpus"],
                ring.join(" "),
                c["ring"]["bottleneck_gbps"].as_f64().unwrap(),
                c["type_intra"].as_str().unwrap(),
                origins.join(", "),
                codes.join(", ")
            )
        }
    }
}

#[test]
fn the_real_machines_table_of_plan_md() {
    let mut table =
        String::from("| file | GPUs | ring | bottleneck GB/s | worst hop | NVLink from | assumption |\n|---|---|---|---|---|---|---|\n");
    for f in REAL_MACHINES {
        table.push_str(&real_machine_row(f));
    }
    let doc = std::fs::read_to_string(format!("{}/docs/plan.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let shown = doc
        .split("<!-- real-machines:begin -->\n")
        .nth(1)
        .and_then(|b| b.split("<!-- real-machines:end -->").next())
        .expect("docs/plan.md marks its table of real machines");
    assert_eq!(
        shown, table,
        "docs/plan.md's table of real machines differs from what plan says now"
    );
}

/// Two NDv5 nodes from an NCCL topology file that gives no NIC rate, with `extra` under each.
fn ndv5_pair(dir: &Path, extra: &str) -> std::path::PathBuf {
    let cfg = dir.join("c.yaml");
    let topo = format!("{}/profiles/nccl/azure-ndv5-topo.xml", env!("CARGO_MANIFEST_DIR"));
    std::fs::write(
        &cfg,
        format!("nodes:\n  - host: \"ndv5-[01-02]\"\n    simulate: {topo}\n    gpu: h100-sxm5\n    nvlink: nvswitch\n{extra}"),
    )
    .unwrap();
    cfg
}

#[test]
fn a_prediction_on_nccls_default_nic_rate_says_assumed_and_a_stated_rate_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ndv5_pair(dir.path(), "");
    let o = tt(["plan"]).json().config(&cfg).run();
    assert_eq!(o.status.code(), Some(0));
    let doc = crate::common::json(&o);
    let solved = &doc["predicted"]["solved"];
    assert_eq!(solved["bottleneck"], "network of ndv5-01");
    assert_eq!(solved["bottleneck_gbps"], 96.0, "8 NICs × 12 GB/s, NCCL's default");
    assert!(
        solved["assumed"]
            .as_str()
            .unwrap()
            .starts_with("assumed: 8 NIC(s) report no rate"),
        "{solved:#}"
    );
    let notes = doc["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n["code"] == "nic-rate-assumed" && n["level"] == "warn"),
        "{notes:#?}"
    );
    let human = tt(["plan"]).config(&cfg).run();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("network of ndv5-01 (96.0 GB/s, assumed)"), "{text}");

    // Stated at NDR's 400 Gb/s, the network (400 GB/s) is no longer the bottleneck.
    let cfg = ndv5_pair(dir.path(), "    nic_gbps: 400\n");
    let doc = crate::common::json(&tt(["plan"]).json().config(&cfg).run());
    let solved = &doc["predicted"]["solved"];
    assert_eq!(solved["bottleneck"], "intra-node ring on ndv5-01", "{solved:#}");
    assert!(solved.get("assumed").is_none(), "{solved:#}");
    // Where a stated rate is the bottleneck, the row says it is stated.
    let cfg = ndv5_pair(dir.path(), "    nic_gbps: 200\n");
    let doc = crate::common::json(&tt(["plan"]).json().config(&cfg).run());
    let solved = &doc["predicted"]["solved"];
    assert_eq!(solved["bottleneck_gbps"], 200.0, "8 × 200 Gb/s: {solved:#}");
    assert!(
        solved["assumed"].as_str().unwrap().contains("nic_gbps 200"),
        "{solved:#}"
    );
    let text = String::from_utf8_lossy(&tt(["plan"]).config(&cfg).run().stdout).into_owned();
    assert!(text.contains("network of ndv5-01 (200.0 GB/s, stated)"), "{text}");

    let cfg = ndv5_pair(dir.path(), "    nic_gbps: 0\n");
    let o = tt(["plan"]).json().config(&cfg).run();
    assert_eq!(o.status.code(), Some(65));
    let msg = crate::common::json(&o)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("c.yaml:6") && msg.contains("nic_gbps 0"), "{msg}");
}
