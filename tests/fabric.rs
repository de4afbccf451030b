//! `topo-tune fabric` on real captures (tests/data/fabric/, sources in tests/data/SOURCES.md):
//! what it derives, held against an independent reading (`check_fabric.py`), and the faults it
//! must find, made by editing copies of them.

use crate::common::{json, tt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fabric")
        .join(name)
}

const NDR: &str = "ndr-superpod-plane.ibnetdiscover";
const FDR: &str = "fdr10-sx6036.ibnetdiscover";

fn fabric(args: &[&str]) -> (Option<i32>, Value) {
    let o = tt(["fabric"]).json().args(args).run();
    let doc = json(&o);
    (o.status.code(), doc)
}

fn capture(path: &Path) -> (Option<i32>, Value) {
    fabric(&["--from-ibnetdiscover", path.to_str().unwrap()])
}

fn codes(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

fn findings<'a>(doc: &'a Value, code: &str) -> Vec<&'a str> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| f["what"].as_str().unwrap())
        .collect()
}

fn level_count(doc: &Value, level: u64) -> usize {
    doc["switches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["level"] == level)
        .count()
}

/// The NDR plane with a management leaf beside its compute units, as every real site has one:
/// `MGMT-LEAF-01` carries a login, a Slurm and a cache host (one port each) and two uplinks,
/// to spines 08 and 09 (each spine's block lists the link too).
fn beside_management(t: String) -> String {
    let leaf = "S-00000000000a0001";
    let spines = [("S-2c5eab0300c261c0", 4), ("S-2c5eab0300c26200", 5)];
    let mut out = String::new();
    for line in t.lines() {
        match spines
            .iter()
            .find(|(id, _)| line.starts_with(&format!("Switch\t65 \"{id}\"")))
        {
            Some((_, port)) => {
                out += &line.replacen("Switch\t65", "Switch\t66", 1);
                out += &format!("\n[66]\t\"{leaf}\"[{port}]\t\t# \"MF0;MGMT-LEAF-01:MQM9700/U1\" lid 900 4xNDR\n");
            }
            None => {
                out += line;
                out.push('\n');
            }
        }
    }
    out + &format!(
        "\nSwitch\t41 \"{leaf}\"\t\t# \"MF0;MGMT-LEAF-01:MQM9700/U1\" enhanced port 0 lid 900 lmc 0\n\
         [1]\t\"H-00000000000b0001\"[1](b0001) \t\t# \"login01 mlx5_0\" lid 901 4xNDR\n\
         [2]\t\"H-00000000000b0002\"[1](b0002) \t\t# \"slurm01 mlx5_0\" lid 902 4xNDR\n\
         [3]\t\"H-00000000000b0003\"[1](b0003) \t\t# \"cache01 mlx5_0\" lid 903 4xNDR\n\
         [4]\t\"S-2c5eab0300c261c0\"[66]\t\t# \"MF0;B10-P1-IBSPINE-08:MQM9701/U1\" lid 154 4xNDR\n\
         [5]\t\"S-2c5eab0300c26200\"[66]\t\t# \"MF0;B10-P1-IBSPINE-09:MQM9701/U1\" lid 31 4xNDR\n"
    )
}

/// A copy of a capture with `edit` applied, in `dir`.
fn edited(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let text = std::fs::read_to_string(data(name)).unwrap();
    let out = dir.join(name);
    let changed = edit(text.clone());
    assert_ne!(changed, text, "the edit changed nothing");
    std::fs::write(&out, changed).unwrap();
    out
}

#[test]
fn the_ndr_superpod_plane_is_read_and_held_against_an_independent_reading() {
    let (code, doc) = capture(&data(NDR));
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(
        code,
        Some(topo_tune::exit::CHECKS_FAILED.code()),
        "the real swap fails: {}",
        doc["msg"]
    );
    assert_eq!(doc["switches"].as_array().unwrap().len(), 40);
    assert_eq!((level_count(&doc, 1), level_count(&doc, 2)), (31, 9));
    assert_eq!(doc["rails"], 4);
    assert_eq!(doc["aggregation_nodes"], 40, "one SHARP node per switch");
    // The independent reading: counts from the switch blocks, rails and units from leaf names.
    let o = std::process::Command::new("python3")
        .arg(data("check_fabric.py"))
        .arg(data(NDR))
        .output()
        .unwrap();
    let check: Value = serde_json::from_slice(&o.stdout).unwrap();
    let named: usize = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["ports"].as_array().unwrap().len())
        .sum();
    let unnamed = doc["unnamed_ports"].as_array().unwrap().len();
    assert_eq!(named + unnamed, check["host_ports"].as_u64().unwrap() as usize);
    assert_eq!(unnamed, check["unnamed_ports"].as_u64().unwrap() as usize);
    assert_eq!(check["switches"], 40);
    let by_name = check["leaves_by_name"].as_object().unwrap();
    assert_eq!(by_name.len(), 31);
    let groups: Vec<&Value> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| !g["hosts"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(groups.len(), 8);
    for g in &groups {
        let leaves: Vec<&str> = g["leaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        // One scalable unit per group, and its leaves in the rails' order, from the cabling.
        let units: std::collections::BTreeSet<u64> =
            leaves.iter().map(|l| by_name[*l]["su"].as_u64().unwrap()).collect();
        assert_eq!(units.len(), 1, "{leaves:?}");
        let rails: Vec<u64> = leaves.iter().map(|l| by_name[*l]["rail"].as_u64().unwrap()).collect();
        let mut sorted = rails.clone();
        sorted.sort_unstable();
        assert_eq!(rails, sorted, "{} rail order {leaves:?}", g["name"]);
    }
    // The unit without IBLEAF-03-01 is short a leaf; one DGX's HCA-5 and HCA-6 are swapped.
    let short = findings(&doc, "missing-leaf");
    assert!(
        short.len() == 1 && short[0].starts_with("su-1 has 3 rail leaf"),
        "{short:?}"
    );
    let swapped = findings(&doc, "wrong-rail");
    assert_eq!(swapped.len(), 2, "{swapped:?}");
    assert!(
        swapped.iter().all(|w| w.starts_with("b08-p1-dgx-08-c01 HCA-")),
        "{swapped:?}"
    );
    assert!(codes(&doc).contains(&"unnamed-ports".to_string()));
}

#[test]
fn the_fdr10_fabric_has_two_spines_one_of_which_carries_hosts() {
    let (code, doc) = capture(&data(FDR));
    assert_eq!(code, Some(0), "{doc:#}");
    let level = |name: &str| {
        doc["switches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["level"]
            .clone()
    };
    for leaf in ["ib1", "ib2", "ib3", "ib4", "ib5", "ib6"] {
        assert_eq!(level(leaf), 1, "{leaf}");
    }
    assert_eq!(
        (level("ib7"), level("ib8")),
        (Value::from(2), Value::from(2)),
        "ib7 carries 3 hosts but is a spine"
    );
    assert_eq!(doc["hosts"].as_array().unwrap().len(), 144);
    assert!(doc["rails"].is_null(), "one cabled port per host: not rail-optimised");
    assert_eq!(
        findings(&doc, "fewer-uplinks"),
        ["ib1 (level 1) has 7 uplink(s) where its peers have 8"]
    );
}

#[test]
fn faults_made_in_copies_are_found() {
    let dir = tempfile::tempdir().unwrap();
    // Two ports of one DGX swapped between rail leaves.
    let swapped = edited(dir.path(), NDR, |t| {
        t.replace("\"a07-p1-dgx-03-c05 HCA-1\"", "\"@@\"")
            .replace("\"a07-p1-dgx-03-c05 HCA-2\"", "\"a07-p1-dgx-03-c05 HCA-1\"")
            .replace("\"@@\"", "\"a07-p1-dgx-03-c05 HCA-2\"")
    });
    let (_, doc) = capture(&swapped);
    let w: Vec<&str> = findings(&doc, "wrong-rail")
        .into_iter()
        .filter(|w| w.starts_with("a07-p1-dgx-03-c05"))
        .collect();
    assert_eq!(w.len(), 2, "{:?}", findings(&doc, "wrong-rail"));
    // A downtrained host link and a narrow one; a port with no LID; two ports for one name.
    let slow = edited(dir.path(), FDR, |t| {
        t.replacen(
            "\"stage114 mlx4_0\" lid 105 4xQDR",
            "\"stage114 mlx4_0\" lid 105 4xDDR",
            1,
        )
        .replacen(
            "\"stage112 mlx4_0\" lid 113 4xQDR",
            "\"stage112 mlx4_0\" lid 113 1xQDR",
            1,
        )
        .replacen(
            "\"stage116 mlx4_0\" lid 127 4xQDR",
            "\"stage116 mlx4_0\" lid 65535 4xQDR",
            1,
        )
        .replacen("\"stage110 mlx4_0\"", "\"stage118 mlx4_0\"", 1)
    });
    let (code, doc) = capture(&slow);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    let s = findings(&doc, "slow-link");
    assert!(
        s.iter()
            .any(|w| w.contains("4xDDR (20 Gb/s) where the fabric's host links run 4xQDR (40 Gb/s)")),
        "{s:?}"
    );
    assert!(s.iter().any(|w| w.contains("1xQDR (10 Gb/s)")), "{s:?}");
    assert!(findings(&doc, "no-lid")[0].starts_with("stage116 mlx4_0"));
    assert!(findings(&doc, "duplicate-host-port")[0].starts_with("stage118 mlx4_0 is claimed by two ports"));
    // A leaf's links to one spine taken away.
    let cut = edited(dir.path(), FDR, |t| {
        let mut current = String::new();
        let mut kept = Vec::new();
        for l in t.lines() {
            if l.starts_with("Switch") || l.starts_with("Ca") {
                current = l.to_string();
            }
            let ib2_to_ib8 =
                current.contains("\"MF0;ib2:SX6036/U1\"") && l.starts_with('[') && l.contains("\"MF0;ib8:SX6036/U1\"");
            if !ib2_to_ib8 {
                kept.push(l);
            }
        }
        kept.join("\n") + "\n"
    });
    let (_, doc) = capture(&cut);
    assert!(
        findings(&doc, "fewer-uplinks")
            .iter()
            .any(|w| w.starts_with("ib2 (level 1) has 4 uplink(s)")),
        "{:?}",
        findings(&doc, "fewer-uplinks")
    );
}

#[test]
fn a_mangled_capture_is_refused_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cr = edited(dir.path(), FDR, |t| t.replacen("lid 105 4xQDR\n", "lid 105 4xQDR\r", 1));
    let o = tt(["fabric", "--from-ibnetdiscover"]).json().arg(&cr).run();
    assert_eq!(o.status.code(), Some(65));
    let msg = json(&o)["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("line 11") && msg.contains("carriage return"), "{msg}");
    let cut = edited(dir.path(), FDR, |t| {
        t.replacen("[2]\t\"H-24be05ffff982d50\"[1]", "[2]\t\"H-24be05ffff98", 1)
    });
    let o = tt(["fabric", "--from-ibnetdiscover"]).json().arg(&cut).run();
    assert_eq!(o.status.code(), Some(65));
    assert!(json(&o)["error"]["message"].as_str().unwrap().contains("line 12"));
    // Tabs turned into spaces (a terminal's copy) are still the same fabric.
    let spaces = edited(dir.path(), FDR, |t| t.replace('\t', "  "));
    let (_, a) = capture(&spaces);
    let (_, b) = capture(&data(FDR));
    assert_eq!(a["switches"], b["switches"]);
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let o = tt(["fabric", "--from-ibnetdiscover"]).json().arg(&empty).run();
    assert_eq!(o.status.code(), Some(65), "never 0 switches with exit 0");
}

#[test]
fn an_aws_instance_topology_is_three_levels_of_network_nodes() {
    let (code, doc) = fabric(&[
        "--from-aws-topology",
        data("aws-p3dn-16-instance-topology.json").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{doc:#}");
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(
        (level_count(&doc, 1), level_count(&doc, 2), level_count(&doc, 3)),
        (4, 2, 1)
    );
    let mut sizes: Vec<usize> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["hosts"].as_array().unwrap().len())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [2, 4, 5, 5]);
    assert_eq!(doc["hosts"].as_array().unwrap().len(), 16);
}

#[test]
fn the_written_section_plans_and_cluster_yaml_is_held_against_the_wires() {
    let dir = tempfile::tempdir().unwrap();
    let (_, doc) = fabric(&[
        "--from-ibnetdiscover",
        data(FDR).to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
    ]);
    let written = dir.path().join("fabric.yaml");
    assert_eq!(doc["written"], written.display().to_string());
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains("  racks:\n    \"rack-ib1\": {leaf: \"ib1\"}\n"), "{text}");
    // Pasted into a cluster.yaml of paper nodes: it plans.
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        text.replace("}\n  - host", "}\n    simulate: aws-p4d\n  - host")
            .replace(
                "labels: {rack: \"rack-ib7\"}",
                "labels: {rack: \"rack-ib7\"}\n    simulate: aws-p4d",
            ),
    )
    .unwrap();
    let plan = tt(["plan"]).json().config(&cfg).run();
    let p = json(&plan);
    assert_eq!(plan.status.code(), Some(0), "{p:#}");
    assert_eq!(p["node_order"].as_array().unwrap().len(), 144);
    assert!(p["crossings"]["solved"]["rack"].as_u64().unwrap() <= p["crossings"]["default"]["rack"].as_u64().unwrap());
    // A cluster.yaml that racks two leaves' hosts together and lists a host the wires lack.
    let typed = dir.path().join("typed.yaml");
    std::fs::write(&typed, "nodes:\n  - host: \"stage[100-101,16]\"\n    labels: {rack: r1}\n    simulate: aws-p4d\n  - host: ghost1\n    simulate: aws-p4d\n").unwrap();
    let (_, doc) = fabric(&[
        "--from-ibnetdiscover",
        data(FDR).to_str().unwrap(),
        "--cluster-config",
        typed.to_str().unwrap(),
    ]);
    assert_eq!(doc["diff"]["not_seen"], serde_json::json!(["ghost1"]));
    let regrouped: Vec<&str> = doc["diff"]["regrouped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        regrouped.iter().any(|r| r.starts_with("rack r1: its hosts are on")),
        "{regrouped:?} {:?}",
        BTreeMap::<u8, u8>::new()
    );
}

#[test]
fn plan_and_init_take_the_discovered_fabric_with_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _) = fabric(&[
        "--from-ibnetdiscover",
        data(FDR).to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
    ]);
    let found = dir.path().join("fabric.yaml");
    let text = std::fs::read_to_string(&found).unwrap();
    // The same hosts typed with no fabric, all in one rack, as paper nodes.
    let patterns: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- host: \"")?.strip_suffix('"'))
        .collect();
    let mut typed = String::from("nodes:\n");
    for p in &patterns {
        typed.push_str(&format!(
            "  - host: \"{p}\"\n    labels: {{rack: r1}}\n    simulate: aws-p4d\n"
        ));
    }
    let cfg = dir.path().join("typed.yaml");
    std::fs::write(&cfg, typed).unwrap();
    // Pasted: the discovered section with the same paper sources.
    let pasted = dir.path().join("pasted.yaml");
    let with_sources: String = text
        .lines()
        .flat_map(|l| {
            std::iter::once(l).chain(
                l.trim_start()
                    .starts_with("labels: {rack:")
                    .then_some("    simulate: aws-p4d"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&pasted, with_sources + "\n").unwrap();
    let plan = |cfg: &Path, extra: &[&str]| json(&tt(["plan"]).json().config(cfg).args(extra).run());
    let on_wires = plan(&cfg, &["--fabric", found.to_str().unwrap()]);
    let by_paste = plan(&pasted, &[]);
    let typed_only = plan(&cfg, &[]);
    assert_eq!(
        on_wires["node_order"], by_paste["node_order"],
        "--fabric plans what the pasted section plans"
    );
    assert_eq!(on_wires["crossings"], by_paste["crossings"]);
    assert_ne!(
        on_wires["crossings"], typed_only["crossings"],
        "the typed single rack is not the wires' six leaves"
    );
    // The emitters take it as a typed fabric: Slurm's tree and Kubernetes' leaf labels.
    let files = dir.path().join("plan");
    let o = tt(["plan", "--fabric", found.to_str().unwrap()])
        .config(&cfg)
        .out(&files)
        .run();
    assert_eq!(o.status.code(), Some(0));
    let topology = std::fs::read_to_string(files.join("topology.conf")).unwrap();
    assert!(
        topology.contains("SwitchName=ib1 Switches=rack-ib1") || topology.contains("SwitchName=ib1"),
        "{topology}"
    );
    let labels = std::fs::read_to_string(files.join("k8s-node-labels.yaml")).unwrap();
    assert!(labels.contains("ib1") && labels.contains("spines-1"), "{labels}");
    // init takes it too: the files it writes are the plan's.
    let out = dir.path().join("out");
    let o = tt(["init", "--check", "--fabric", found.to_str().unwrap()])
        .json()
        .config(&cfg)
        .out(&out)
        .run();
    assert_eq!(o.status.code(), Some(3), "{}", json(&o));
}

#[test]
fn a_guid_map_names_ports_and_placement_groups_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (_, before) = capture(&data(NDR));
    let unnamed = before["unnamed_ports"].as_array().unwrap();
    let guid = |i: usize| unnamed[i]["id"].as_str().unwrap().trim_start_matches("H-").to_string();
    let map = dir.path().join("guids");
    std::fs::write(
        &map,
        format!(
            "# opensm's node-name map\n0x{} \"mapped-a\"\nH-{} mapped-b\n",
            guid(0),
            guid(1)
        ),
    )
    .unwrap();
    let (_, after) = fabric(&[
        "--from-ibnetdiscover",
        data(NDR).to_str().unwrap(),
        "--guid-map",
        map.to_str().unwrap(),
    ]);
    assert_eq!(after["unnamed_ports"].as_array().unwrap().len(), unnamed.len() - 2);
    let names: Vec<&str> = after["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mapped-a") && names.contains(&"mapped-b"));
    std::fs::write(&map, "not-a-guid host\n").unwrap();
    let o = tt(["fabric", "--from-ibnetdiscover"])
        .json()
        .arg(data(NDR))
        .arg("--guid-map")
        .arg(&map)
        .run();
    assert_eq!(o.status.code(), Some(65));
    assert!(json(&o)["error"]["message"].as_str().unwrap().contains("line 1"));
    // Two instances moved to another placement group are named.
    let aws = edited(dir.path(), "aws-p3dn-16-instance-topology.json", |t| {
        t.replacen(
            "\"InstanceType\": \"p3dn.24xlarge\",",
            "\"InstanceType\": \"p3dn.24xlarge\", \"GroupName\": \"pg-b\",",
            2,
        )
    });
    let (_, doc) = fabric(&["--from-aws-topology", aws.to_str().unwrap()]);
    assert_eq!(
        doc["placement_groups"]["pg-b"],
        serde_json::json!(["i-0ad3df7a6c3e2c0cd", "i-09da5708a8a8e82da"])
    );
    assert_eq!(doc["placement_groups"]["-"].as_array().unwrap().len(), 14);
}

#[test]
fn an_aws_answer_that_lists_an_instance_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let twice = edited(dir.path(), "aws-p3dn-16-instance-topology.json", |t| {
        t.replacen("i-09da5708a8a8e82da", "i-0ad3df7a6c3e2c0cd", 1)
    });
    let o = tt(["fabric", "--from-aws-topology"]).json().arg(&twice).run();
    assert_eq!(o.status.code(), Some(65));
    assert!(
        json(&o)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is Instances[0] again"),
        "{}",
        json(&o)
    );
    let looped = edited(dir.path(), "aws-p3dn-16-instance-topology.json", |t| {
        t.replacen("\"nn-d80ea1bcf0db73f68\"", "\"nn-10cc26ca933c5f39d\"", 1)
    });
    let o = tt(["fabric", "--from-aws-topology"]).json().arg(&looped).run();
    assert_eq!(o.status.code(), Some(65));
    assert!(json(&o)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("a network node twice"));
}

/// Management leaves beside the compute units do not make the fabric non-rail: the compute
/// groups' 4 rails stand, the management group says why it has none, fabric.yaml keeps
/// `rails: 4`, and the missing-leaf check stays on (before: `rails: null`, no `rails:`
/// written, the unit short of IBLEAF-03-01 unsaid).
#[test]
fn management_hosts_beside_the_compute_units_keep_the_rails() {
    let dir = tempfile::tempdir().unwrap();
    let site = edited(dir.path(), NDR, beside_management);
    let (_, doc) = fabric(&[
        "--from-ibnetdiscover",
        site.to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
    ]);
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(doc["rails"], 4, "{}", doc["msg"]);
    assert_eq!((level_count(&doc, 1), level_count(&doc, 2)), (32, 9));
    let mgmt = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "MGMT-LEAF-01")
        .unwrap();
    assert!(mgmt["rails"].is_null());
    assert_eq!(mgmt["single_port_hosts"], true);
    let why = mgmt["not_rail_optimised"].as_str().unwrap();
    assert!(why.contains("3 host(s) have one port each"), "{why}");
    let short = findings(&doc, "missing-leaf");
    assert!(
        short.len() == 1 && short[0].starts_with("su-1 has 3 rail leaf"),
        "{short:?}"
    );
    assert_eq!(findings(&doc, "wrong-rail").len(), 2);
    let yaml = std::fs::read_to_string(dir.path().join("fabric.yaml")).unwrap();
    assert!(yaml.contains("\n  rails: 4\n"), "{yaml}");
}

/// A leaf whose hosts are all gone hangs below the spines like a leaf: level 1 and a finding,
/// not a third level above them (before: 3 levels, ib6 on top, its uplinks not counted).
#[test]
fn a_leaf_without_hosts_stays_a_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let empty = edited(dir.path(), FDR, |t| {
        let mut current = String::new();
        let mut kept = Vec::new();
        for l in t.lines() {
            if l.starts_with("Switch") || l.starts_with("Ca") {
                current = l.to_string();
            }
            let ib6_host = current.contains("\"MF0;ib6:SX6036/U1\"") && l.starts_with('[') && l.contains("\"H-");
            if !ib6_host {
                kept.push(l);
            }
        }
        kept.join("\n") + "\n"
    });
    let (_, doc) = capture(&empty);
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(
        (level_count(&doc, 1), level_count(&doc, 2), level_count(&doc, 3)),
        (6, 2, 0)
    );
    let ib6 = doc["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ib6")
        .unwrap();
    assert_eq!((ib6["level"].as_u64(), ib6["uplinks"].as_u64()), (Some(1), Some(8)));
    let w = findings(&doc, "leaf-without-hosts");
    assert!(w.len() == 1 && w[0].starts_with("ib6 carries no host port"), "{w:?}");
}

/// The fabric a capture gives, less what names its file.
fn derived(path: &Path) -> Value {
    let (_, mut doc) = capture(path);
    for k in ["msg", "source", "command", "elapsed_ms", "written", "changed"] {
        doc.as_object_mut().unwrap().remove(k);
    }
    doc
}

/// Other dialects of the same fabric read as the same fabric: `ibnetdiscover -g` (its
/// `Chassis N (guid …)` and `Non-Chassis Nodes` lines, `[ext N]` external ports),
/// ibdiagnet's `.ibnetdiscover` with Quantum-2 port labels (`[1](1/1/1)`, CA sides
/// `[1](B9D0F0/0/0/1)(guid)`), and a terminal log whose lines end in carriage returns only
/// (each refused before, naming a line).
#[test]
fn every_ibnetdiscover_dialect_reads_as_the_same_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let grouped = edited(dir.path(), FDR, |t| {
        let mut out = String::new();
        for (i, l) in t.lines().enumerate() {
            if l.starts_with("vendid=") && i < 12 {
                out += "\nChassis 1 (guid 0xf4521403001165a0)\n\n# Spine Nodes\n\nNon-Chassis Nodes\n";
            }
            // Every switch-to-switch port gets its external port number, both ends.
            if l.starts_with('[') && l.contains("\"S-") {
                let (port, rest) = l.split_once(']').unwrap();
                let (peer, tail) = rest.split_once("]\t").unwrap();
                out += &format!("{port}][ext 7]{peer}][ext 9]\t{tail}\n");
            } else {
                out += l;
                out.push('\n');
            }
        }
        out
    });
    let (code, doc) = capture(&grouped);
    assert_ne!(code, Some(65), "{}", doc["msg"]);
    let _ = std::fs::rename(&grouped, dir.path().join("grouped.ibnetdiscover"));
    assert_eq!(derived(&dir.path().join("grouped.ibnetdiscover")), derived(&data(FDR)));

    let labelled = edited(dir.path(), NDR, |t| {
        t.lines()
            .map(|l| {
                if !l.starts_with('[') {
                    return l.to_string();
                }
                let (port, rest) = l.split_once(']').unwrap();
                let n: u32 = port[1..].parse().unwrap();
                let label = format!("({}/{}/1)", n.div_ceil(2), 2 - n % 2);
                match rest.split_once("](") {
                    // A host peer: `"H-…"[1](guid)` gets the CA's label before its GUID.
                    Some((peer, guid)) if rest.contains("\"H-") => {
                        format!("{port}]{label}{peer}](B9D0F0/0/0/1)({guid}")
                    }
                    _ => format!("{port}]{label}{rest}"),
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    });
    assert_eq!(derived(&labelled), derived(&data(NDR)));

    let cr_only = edited(dir.path(), FDR, |t| t.replace('\n', "\r"));
    assert_eq!(derived(&cr_only), derived(&data(FDR)));
    // One lone CR among LF lines is still refused: mangled, not a dialect.
    let mixed = edited(dir.path(), FDR, |t| t.replacen("\n[2]", "\r[2]", 1));
    let (code, doc) = capture(&mixed);
    assert_eq!(code, Some(65), "{}", doc["msg"]);
}

/// A port described by something that is not one host name (a range, a list) is an unnamed
/// port with a finding that quotes it — before, `gpu[1-3]` and `gpu1,gpu2` became hosts in
/// fabric.yaml and `plan --fabric` wrote `Nodes=gpu[1-3],…` into topology.conf.
#[test]
fn a_description_that_is_not_one_host_name_names_no_host() {
    let dir = tempfile::tempdir().unwrap();
    let odd = edited(dir.path(), FDR, |t| {
        t.replacen("\"stage112 mlx4_0\"", "\"gpu[1-3] mlx5_9\"", 1)
            .replacen("\"stage114 mlx4_0\"", "\"gpu1,gpu2\"", 1)
    });
    let (_, doc) = fabric(&[
        "--from-ibnetdiscover",
        odd.to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
    ]);
    crate::common::assert_schema("fabric", &doc);
    let hosts: Vec<&str> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert!(!hosts.iter().any(|h| h.contains('[') || h.contains(',')), "{hosts:?}");
    let w = findings(&doc, "not-a-host-name");
    assert!(
        w.len() == 1 && w[0].contains("\"gpu[1-3] mlx5_9\"") && w[0].contains("\"gpu1,gpu2\""),
        "{w:?}"
    );
    assert_eq!(doc["unnamed_ports"].as_array().unwrap().len(), 2);
    let yaml = std::fs::read_to_string(dir.path().join("fabric.yaml")).unwrap();
    assert!(!yaml.contains("gpu"), "{yaml}");
}

/// Quiet nothing: a capture with switches and no named host is refused (it wrote an empty
/// fabric.yaml, exit 0), and two planes pasted into one file are a failing finding (read as
/// one fabric without a word before).
#[test]
fn no_host_and_two_planes_in_one_file_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let anonymous = edited(dir.path(), FDR, |t| {
        t.lines()
            .map(|l| match l.find("# \"") {
                Some(i) if l.starts_with('[') && l.contains("\"H-") => {
                    format!("{}# \"MT4099 ConnectX3 Mellanox Technologies\" lid 1 4xQDR", &l[..i])
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    });
    let out = dir.path().join("out");
    let (code, doc) = fabric(&[
        "--from-ibnetdiscover",
        anonymous.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(65), "{doc}");
    let msg = doc["error"]["message"]
        .as_str()
        .or(doc["msg"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains("no port that names a host"), "{doc}");
    assert!(!out.join("fabric.yaml").exists(), "nothing written");

    let text = std::fs::read_to_string(data(FDR)).unwrap();
    let other = text
        .replace("S-f4521403", "S-a4521403")
        .replace("H-24be05", "H-34be05")
        .replace("H-0002c9", "H-1002c9")
        .replace("H-f45214", "H-a45214")
        .replace("\"stage", "\"plane2-stage")
        .replace("MF0;ib", "MF0;p2ib");
    let both = dir.path().join("both.ibnetdiscover");
    std::fs::write(&both, format!("{text}\n{other}")).unwrap();
    let (code, doc) = capture(&both);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()), "{}", doc["msg"]);
    let w = findings(&doc, "disconnected");
    assert!(
        w.len() == 1 && w[0].starts_with("the capture holds 2 fabrics no link joins"),
        "{w:?}"
    );
    // One plane alone: no such finding.
    assert!(findings(&capture(&data(FDR)).1, "disconnected").is_empty());
}

/// Cabling that cannot be is said, not read silently: a switch cabled to itself and a port
/// listed twice fail, a host port on a spine is a warning, and an unnamed port without a LID
/// is `no-lid` too (only named ones were before).
#[test]
fn cabling_that_cannot_be_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let odd = edited(dir.path(), FDR, |t| {
        let mut out = Vec::new();
        let mut current = String::new();
        let (mut doubled, mut looped) = (false, false);
        for l in t.lines() {
            if l.starts_with("Switch") {
                current = l.to_string();
            }
            let in_ib1 = current.contains("\"MF0;ib1:SX6036/U1\"");
            let in_ib2 = current.contains("\"MF0;ib2:SX6036/U1\"");
            if in_ib1 && l.starts_with("[1]") && !doubled {
                out.push(l.to_string());
                doubled = true;
            }
            if in_ib2 && l.starts_with('[') && l.contains("\"MF0;ib7:SX6036/U1\"") && !looped {
                // ib2's own id in place of ib7's.
                out.push(l.replace("S-f4521403007eaa70", "S-f4521403001155a0"));
                looped = true;
                continue;
            }
            out.push(l.to_string());
        }
        out.join("\n") + "\n"
    });
    let (code, doc) = capture(&odd);
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()), "{}", doc["msg"]);
    let w = findings(&doc, "impossible-cabling");
    assert!(w.iter().any(|f| f.starts_with("ib1 port 1 is listed twice")), "{w:?}");
    assert!(w.iter().any(|f| f.contains("is cabled to ib2 itself")), "{w:?}");
    let spine = findings(&doc, "host-on-spine");
    assert!(
        spine.iter().any(|f| f.starts_with("tank1 mlx4_0 is cabled to ib7")),
        "{spine:?}"
    );

    let no_lid = edited(dir.path(), NDR, |t| {
        t.replacen(
            "\"MT4129 ConnectX7   Mellanox Technologies\" lid 229 4xNDR",
            "\"MT4129 ConnectX7   Mellanox Technologies\" lid 0 4xNDR",
            1,
        )
    });
    let (_, doc) = capture(&no_lid);
    let w = findings(&doc, "no-lid");
    assert!(
        w.iter()
            .any(|f| f.contains("(unnamed, on A09-P1-IBLEAF-01-01 port 2) has no LID")),
        "{w:?}"
    );
}

/// The p3dn answer's instance ids, in order.
fn p3dn_ids() -> Vec<String> {
    let answer = data("aws-p3dn-16-instance-topology.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(answer).unwrap()).unwrap();
    doc["Instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["InstanceId"].as_str().unwrap().to_string())
        .collect()
}

/// An AWS answer's hosts are instance ids: `--host-map` and cluster.yaml's `instance_id`
/// labels turn them into the cluster's host names, so `plan --fabric` places the nodes
/// (before, fabric.yaml held `i-…` hosts no cluster.yaml node is, and every node was unplaced).
#[test]
fn aws_instances_are_mapped_to_host_names_and_plan_uses_the_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let answer = data("aws-p3dn-16-instance-topology.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&answer).unwrap()).unwrap();
    let ids: Vec<String> = doc["Instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["InstanceId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 16);
    // 15 through --host-map, the 16th through its node's label.
    let map = dir.path().join("hosts.map");
    let lines: String = ids[..15]
        .iter()
        .enumerate()
        .map(|(k, id)| format!("{id} p3dn-{:02}   # rack row {}\n", k + 1, k / 4))
        .collect();
    std::fs::write(&map, lines).unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodes:\n  - host: \"p3dn-[01-15]\"\n    simulate: aws-p4d\n  - host: p3dn-16\n    labels: {{instance_id: {}}}\n    simulate: aws-p4d\n",
            ids[15]
        ),
    )
    .unwrap();
    let (code, partial) = fabric(&[
        "--from-aws-topology",
        answer.to_str().unwrap(),
        "--host-map",
        map.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{partial}");
    let w = findings(&partial, "unmapped-instances");
    assert!(
        w.len() == 1 && w[0].starts_with("1 instance(s) have no host name"),
        "{w:?}"
    );
    let (code, doc) = fabric(&[
        "--from-aws-topology",
        answer.to_str().unwrap(),
        "--host-map",
        map.to_str().unwrap(),
        "--cluster-config",
        cfg.to_str().unwrap(),
        "--output-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{doc}");
    assert!(findings(&doc, "unmapped-instances").is_empty());
    let hosts: Vec<&str> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert!(
        hosts.iter().all(|h| h.starts_with("p3dn-")) && hosts.len() == 16,
        "{hosts:?}"
    );
    let plan = json(
        &tt(["plan"])
            .json()
            .config(&cfg)
            .args(["--fabric", dir.path().join("fabric.yaml").to_str().unwrap()])
            .run(),
    );
    assert_eq!(plan["node_order"].as_array().map(Vec::len), Some(16), "{plan:#}");
}

/// One instance, one host: a label on a range of hosts, or a map giving one host to two
/// instances, is refused (exit 65).
#[test]
fn aws_maps_that_give_one_instance_two_hosts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let answer = data("aws-p3dn-16-instance-topology.json");
    let ids = p3dn_ids();
    let map = dir.path().join("hosts.map");
    // One label on a range of hosts gives one instance to each: refused.
    let ranged = dir.path().join("ranged.yaml");
    std::fs::write(
        &ranged,
        format!(
            "nodes:\n  - host: \"p3dn-[01-02]\"\n    labels: {{instance_id: {}}}\n    simulate: aws-p4d\n",
            ids[0]
        ),
    )
    .unwrap();
    let (code, doc) = fabric(&[
        "--from-aws-topology",
        answer.to_str().unwrap(),
        "--cluster-config",
        ranged.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(65), "{doc}");
    // A map that gives one host to two instances is refused with its line.
    std::fs::write(&map, format!("{} a\n{} a\n", ids[0], ids[1])).unwrap();
    let (code, doc) = fabric(&[
        "--from-aws-topology",
        answer.to_str().unwrap(),
        "--host-map",
        map.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(65), "{doc}");
}

/// One plane of a two-plane rail-optimised fabric as ibnetdiscover writes it: two units of three
/// hosts, eight rail leaves per unit (rails `8p..8p+7`, HCAs `mlx5_{8p+r}`), two spines.
/// `cable(host, hca)` gives the rail leaf a port lands on (`None`: not cabled).
fn plane_capture(plane: u32, cable: impl Fn(u32, u32) -> Option<u32>) -> String {
    let sw = |kind: &str, a: u32, b: u32| format!("S-{plane:02x}{:02x}{a:02x}{b:02x}00000000", kind.len());
    let leaf = |r: u32, su: u32| (sw("leaf", r, su), format!("P{plane}-LEAF-{r}-{su}"));
    let spine = |k: u32| (sw("spine", k, 0), format!("P{plane}-SPINE-{k}"));
    let mut out = String::from("#\n# Topology file: made for a test\n#\n");
    for k in 0..2 {
        let (id, name) = spine(k);
        out += &format!(
            "\nSwitch\t64 \"{id}\"\t\t# \"MF0;{name}:MQM9700/U1\" enhanced port 0 lid {} lmc 0\n",
            10 + k
        );
        for su in 1..=2 {
            for r in 0..8 {
                let (lid, lname) = leaf(r, su);
                out += &format!(
                    "[{}]\t\"{lid}\"[{}]\t\t# \"MF0;{lname}:MQM9700/U1\" lid {} 4xNDR\n",
                    su * 8 + r + 1,
                    33 + k,
                    100 + su * 8 + r
                );
            }
        }
    }
    for su in 1..=2 {
        for r in 0..8 {
            let (id, name) = leaf(r, su);
            out += &format!(
                "\nSwitch\t64 \"{id}\"\t\t# \"MF0;{name}:MQM9700/U1\" enhanced port 0 lid {} lmc 0\n",
                100 + su * 8 + r
            );
            for h in (su * 3 - 2)..=(su * 3) {
                for hca in 0..8 {
                    if cable(h, hca) != Some(r) {
                        continue;
                    }
                    let g = 8 * plane + hca;
                    out += &format!(
                        "[{}]\t\"H-00000000{h:04x}{g:04x}\"[1](00000000{h:04x}{g:04x}) \t\t# \"gpu-{h:02} mlx5_{g}\" lid {} 4xNDR\n",
                        hca * 3 + (h - 1) % 3 + 1,
                        1000 + h * 16 + g
                    );
                }
            }
            for k in 0..2 {
                let (sid, sname) = spine(k);
                out += &format!(
                    "[{}]\t\"{sid}\"[{}]\t\t# \"MF0;{sname}:MQM9700/U1\" lid {} 4xNDR\n",
                    33 + k,
                    su * 8 + r + 1,
                    10 + k
                );
            }
        }
    }
    out
}

/// A ConnectX node (p5en's board: 8 H200, 16 RDMA NICs, two per GPU, named mlx5_0..15 in
/// PCI order) as `probe` writes it, under `host`.
fn connectx_probe(dir: &Path, host: &str) {
    let mut s: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/snapshots/aws-p5en.json"))
            .unwrap(),
    )
    .unwrap();
    s["hostname"] = host.into();
    let nics = s["nics"].as_array_mut().unwrap();
    for (i, nic) in nics.iter_mut().filter(|n| n["kind"] == "rdma").enumerate() {
        let name = format!("mlx5_{i}");
        nic["name"] = name.clone().into();
        nic["driver"] = "mlx5_core".into();
        nic["pci"]["pci_id"] = "15b3:1021".into();
        nic["rdma"]["device"] = name.into();
        for p in nic["rdma"]["ports"].as_array_mut().unwrap() {
            p["link_layer"] = "InfiniBand".into();
        }
    }
    std::fs::write(dir.join(format!("{host}.json")), s.to_string()).unwrap();
}

/// Two planes, one capture each (two flags or a directory): one fabric of 16 rails whose HCAs
/// carry their plane; a host missing a plane's port is said; the same plane twice is refused.
/// Before: a second `--from-ibnetdiscover` was a usage error, and one file of both planes
/// only a `disconnected` finding.
#[test]
fn two_planes_are_read_as_one_fabric_and_each_hosts_ports_checked_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let planes = dir.path().join("planes");
    std::fs::create_dir(&planes).unwrap();
    let (a, b) = (planes.join("plane-0.txt"), planes.join("plane-1.txt"));
    std::fs::write(&a, plane_capture(0, |_, hca| Some(hca))).unwrap();
    // gpu-03 has no port mlx5_9 in plane 1.
    std::fs::write(&b, plane_capture(1, |h, hca| (h != 3 || hca != 1).then_some(hca))).unwrap();
    let (code, doc) = fabric(&[
        "--from-ibnetdiscover",
        a.to_str().unwrap(),
        "--from-ibnetdiscover",
        b.to_str().unwrap(),
    ]);
    crate::common::assert_schema("fabric", &doc);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()), "{}", doc["msg"]);
    assert_eq!(doc["rails"], 16, "{}", doc["msg"]);
    assert_eq!(doc["planes"].as_array().unwrap().len(), 2);
    assert_eq!(doc["planes"][1]["host_ports"], 47);
    assert_eq!(doc["hca_planes"]["mlx5_7"], 0);
    assert_eq!(doc["hca_planes"]["mlx5_8"], 1);
    assert_eq!(doc["rail_hcas"]["mlx5_15"], 15);
    let short = findings(&doc, "plane-ports");
    assert!(
        short.len() == 1 && short[0].starts_with("gpu-03 has 7 port(s) in plane 1"),
        "{short:?}"
    );
    assert!(
        findings(&doc, "disconnected").is_empty(),
        "planes given apart are not a cut fabric"
    );
    // The directory reads the same.
    let (_, by_dir) = fabric(&["--from-ibnetdiscover", planes.to_str().unwrap()]);
    assert_eq!(by_dir["rail_hcas"], doc["rail_hcas"]);
    assert_eq!(by_dir["findings"], doc["findings"]);
    // The same plane twice is no fabric of two planes.
    let o = tt(["fabric"])
        .json()
        .args([
            "--from-ibnetdiscover",
            a.to_str().unwrap(),
            "--from-ibnetdiscover",
            a.to_str().unwrap(),
        ])
        .run();
    assert_eq!(o.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the same plane twice")
            || json(&o).to_string().contains("the same plane twice"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The rails the wires show reach NCCL through the plan: NCCL_CROSS_NIC=0 and each NIC's
/// rail and plane in NCCL_IB_HCA (NCCL 2.30.7) for hosts whose GPUs' NICs sit on the rails of
/// their index, each reason naming fabric.yaml; a host with a port on another rail's leaf gets
/// neither, and the plan says why. Before: `rails` alone set NCCL_CROSS_NIC=0 on every node,
/// the miscabled one too.
/// The two planes with gpu-05's mlx5_2 and mlx5_3 cables swapped, read and written to
/// `dir/found/fabric.yaml`: its rails, and gpu-05 off them.
fn miscabled_planes(dir: &Path) -> PathBuf {
    let (a, b) = (dir.join("plane-0.txt"), dir.join("plane-1.txt"));
    // gpu-05's mlx5_2 and mlx5_3 cables swapped.
    let swap = |h: u32, hca: u32| match (h, hca) {
        (5, 2) => Some(3),
        (5, 3) => Some(2),
        _ => Some(hca),
    };
    std::fs::write(&a, plane_capture(0, swap)).unwrap();
    std::fs::write(&b, plane_capture(1, |_, hca| Some(hca))).unwrap();
    let out = dir.join("found");
    let (_, doc) = fabric(&[
        "--from-ibnetdiscover",
        a.to_str().unwrap(),
        "--from-ibnetdiscover",
        b.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(findings(&doc, "wrong-rail").len(), 2, "{}", doc["findings"]);
    let why = doc["off_rail"]["gpu-05"].as_str().unwrap();
    assert!(why.starts_with("mlx5_2 is cabled to P0-LEAF-3-2"), "{why}");
    let found = out.join("fabric.yaml");
    let yaml = std::fs::read_to_string(&found).unwrap();
    assert!(yaml.contains("  rail_hcas: {\"mlx5_0\": 0, \"mlx5_1\": 1,"), "{yaml}");
    assert!(
        yaml.contains("  off_rail:\n    \"gpu-05\": \"mlx5_2 is cabled"),
        "{yaml}"
    );

    found
}

#[test]
fn the_discovered_rails_reach_nccls_settings_and_a_miscabled_host_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let found = miscabled_planes(dir.path());
    let probes = dir.path().join("probes");
    std::fs::create_dir(&probes).unwrap();
    let mut cfg = String::from("nccl_version: \"2.30.7\"\nnodes:\n");
    for h in 1..=6 {
        connectx_probe(&probes, &format!("gpu-{h:02}"));
        cfg += &format!("  - host: gpu-{h:02}\n");
    }
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, cfg).unwrap();
    let o = tt([
        "plan",
        "--fabric",
        found.to_str().unwrap(),
        "--from-probes",
        probes.to_str().unwrap(),
    ])
    .json()
    .config(&cluster)
    .run();
    let plan = json(&o);
    assert_eq!(o.status.code(), Some(0), "{plan}");
    let classes = plan["nccl"]["classes"].as_array().unwrap();
    let class_of = |host: &str| {
        classes
            .iter()
            .find(|c| c["hosts"].as_array().unwrap().iter().any(|h| h == host))
            .unwrap()
    };
    let get = |c: &Value, name: &str| {
        c["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
    };
    let on_rails = class_of("gpu-01");
    assert_eq!(
        on_rails["hosts"].as_array().unwrap().len(),
        5,
        "every host but gpu-05 shares them"
    );
    let cross = get(on_rails, "NCCL_CROSS_NIC").unwrap();
    assert_eq!(cross["value"], "0");
    let reason = cross["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("{}: the fabric is rail-optimised (16 rails)", found.display())),
        "{reason}"
    );
    let hca = get(on_rails, "NCCL_IB_HCA").unwrap();
    let value = hca["value"].as_str().unwrap();
    assert!(
        value.starts_with("=mlx5_0::0:0,mlx5_1::1:0,") && value.ends_with(",mlx5_15::15:1"),
        "{value}"
    );
    let off = class_of("gpu-05");
    assert!(get(off, "NCCL_CROSS_NIC").is_none(), "{off}");
    assert!(!get(off, "NCCL_IB_HCA").unwrap()["value"]
        .as_str()
        .unwrap()
        .contains("::"));
    let said = off["left_out"].to_string();
    assert!(
        said.contains("this host's ports break the rail pattern (mlx5_2 is cabled to P0-LEAF-3-2"),
        "{said}"
    );
    let notes = plan["notes"].to_string();
    assert!(
        notes.contains("with 16 rails: 5 of 6 node(s) planned on them"),
        "{notes}"
    );
    assert!(notes.contains("gpu-05: mlx5_2 is cabled to P0-LEAF-3-2"), "{notes}");
}

/// A clean fabric's table is a few rows: switches alike (host ports, uplinks, links per peer)
/// fold into one row per level under their names. Before: a row per switch (a 700-switch
/// fabric printed 741 lines).
#[test]
fn a_clean_fabric_prints_a_row_per_kind_of_switch() {
    let dir = tempfile::tempdir().unwrap();
    let plane = dir.path().join("plane.txt");
    std::fs::write(&plane, plane_capture(0, |_, hca| Some(hca))).unwrap();
    let o = tt(["fabric", "--from-ibnetdiscover", plane.to_str().unwrap()]).run();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let leaves: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("P0-LEAF-"))
        .collect();
    assert_eq!(leaves.len(), 1, "one row for the 16 leaves:\n{text}");
    assert!(
        leaves[0].contains("(16 switches)  3           2        P0-SPINE-0×1, P0-SPINE-1×1"),
        "{text}"
    );
    let spines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("P0-SPINE-"))
        .collect();
    assert_eq!(spines.len(), 1, "{text}");
    assert!(spines[0].contains("P0-SPINE-[0-1] (2 switches)"), "{text}");
    assert!(text.contains(" su-[1-2] (2 groups)  8 each"), "{text}");
    assert!(text.lines().count() < 16, "{text}");
}
