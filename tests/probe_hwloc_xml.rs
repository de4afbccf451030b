//! `topo-tune probe --from-hwloc-xml` on real AWS topologies, checked against hwloc's own
//! `lstopo --input FILE --whole-io` (the oracle: a different program reading the same file).

use crate::common::{probe_json, tt};
use std::collections::HashMap;
use std::process::Command;
use topo_tune::api::path_matrix;
use topo_tune::api::snapshot::NodeSnapshot;
use topo_tune::api::PathClass;

const FILES: [&str; 3] = ["aws-p4d.xml", "aws-p5en.xml", "aws-p6-b200.xml"];

fn data(file: &str) -> String {
    format!("{}/profiles/{file}", env!("CARGO_MANIFEST_DIR"))
}

/// One object of lstopo's console tree.
#[derive(Debug, Clone)]
struct Obj {
    kind: String,
    parent: Option<usize>,
    busid: Option<String>,
    text: String,
}

/// Parse `lstopo-no-graphics --input F --whole-io --of console -v`: two spaces per level.
fn lstopo_tree(file: &str) -> Vec<Obj> {
    let out = Command::new("lstopo-no-graphics")
        .args(["--input", &data(file), "--whole-io", "--of", "console", "-v"])
        .output()
        .expect("lstopo-no-graphics not found: install hwloc (Debian: apt-get install hwloc-nox)");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut objs: Vec<Obj> = Vec::new();
    let mut stack: Vec<(usize, usize)> = Vec::new(); // (indent, index)
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        // The tree ends where the depth summary begins.
        if body.starts_with("depth ") || body.starts_with("Special depth") || body.is_empty() {
            break;
        }
        let kind = body.split([' ', '(']).next().unwrap().to_string();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let busid = body
            .split("busid=")
            .nth(1)
            .map(|r| r.split([' ', ')']).next().unwrap().to_string());
        objs.push(Obj {
            kind,
            parent: stack.last().map(|(_, i)| *i),
            busid,
            text: body.to_string(),
        });
        stack.push((indent, objs.len() - 1));
    }
    objs
}

fn children<'a>(objs: &'a [Obj], i: usize) -> impl Iterator<Item = usize> + 'a {
    objs.iter()
        .enumerate()
        .filter(move |(_, o)| o.parent == Some(i))
        .map(|(j, _)| j)
}

/// A switch, as seen in lstopo's tree: a PCIBridge whose children include PCIBridges, unless
/// it is a root port (straight under a HostBridge, with a single child bridge).
fn is_switch_upstream(objs: &[Obj], i: usize) -> bool {
    let o = &objs[i];
    if o.kind != "PCIBridge" {
        return false;
    }
    let bridge_children = children(objs, i).filter(|&c| objs[c].kind == "PCIBridge").count();
    let under_host = o.parent.is_some_and(|p| objs[p].kind == "HostBridge");
    let parent_is_upstream = o
        .parent
        .is_some_and(|p| objs[p].kind == "PCIBridge" && is_switch_upstream(objs, p));
    bridge_children > 0 && !parent_is_upstream && !(under_host && bridge_children < 2)
}

fn ancestors(objs: &[Obj], mut i: usize) -> Vec<usize> {
    let mut out = vec![];
    while let Some(p) = objs[i].parent {
        out.push(p);
        i = p;
    }
    out
}

/// The class nvidia-smi would print, read off lstopo's tree by the lowest common ancestor.
fn oracle_class(objs: &[Obj], a: usize, b: usize) -> &'static str {
    let aa = ancestors(objs, a);
    let bb = ancestors(objs, b);
    let lca = *aa.iter().find(|x| bb.contains(x)).unwrap();
    match objs[lca].kind.as_str() {
        "PCIBridge" if is_switch_upstream(objs, lca) => "PIX",
        "PCIBridge" => "PXB",
        "HostBridge" => "PHB",
        "Package" | "Group0" | "NUMANode" => "NODE",
        _ => "SYS",
    }
}

fn snapshot(file: &str) -> NodeSnapshot {
    probe_json(&["--from-hwloc-xml", &data(file)])
}

#[test]
fn counts_match_lstopo() {
    for file in FILES {
        let objs = lstopo_tree(file);
        let gpus = objs
            .iter()
            .filter(|o| {
                o.kind == "PCI"
                    && o.text.contains("id=10de:")
                    && (o.text.contains("class=0302") || o.text.contains("class=0300"))
            })
            .count();
        let rdma = objs.iter().filter(|o| o.kind == "OpenFabrics").count();
        let numa = objs.iter().filter(|o| o.kind == "NUMANode").count();
        let switches = (0..objs.len()).filter(|&i| is_switch_upstream(&objs, i)).count();
        let s = snapshot(file);
        assert_eq!(s.gpus.len(), gpus, "{file}: GPUs");
        assert_eq!(s.matrix_nics().count(), rdma, "{file}: RDMA NICs");
        assert_eq!(s.numa_nodes.len(), numa, "{file}: NUMA nodes");
        assert_eq!(s.pci.switches.len(), switches, "{file}: PCIe switches");
        eprintln!("{file}: {gpus} GPUs, {rdma} RDMA NICs, {numa} NUMA nodes, {switches} switches");
    }
}

#[test]
fn expected_machines() {
    // Facts stated in tests/data/SOURCES.md, independent of both programs.
    let p4d = snapshot("aws-p4d.xml");
    assert_eq!(
        (p4d.gpus.len(), p4d.matrix_nics().count(), p4d.numa_nodes.len()),
        (8, 4, 2)
    );
    assert!(p4d
        .gpus
        .iter()
        .all(|g| g.placement.pci_id.as_deref() == Some("10de:20b0")));
    assert_eq!(p4d.machine.product.as_deref(), Some("p4d.24xlarge"));
    let p5en = snapshot("aws-p5en.xml");
    assert_eq!((p5en.gpus.len(), p5en.matrix_nics().count()), (8, 16));
    assert!(p5en.gpus.iter().all(|g| g.name.contains("H200")));
    let b200 = snapshot("aws-p6-b200.xml");
    assert_eq!(
        (b200.gpus.len(), b200.matrix_nics().count()),
        (8, 10),
        "8 EFA + 2 ConnectX-7"
    );
    assert_eq!(
        b200.nics
            .iter()
            .filter(|n| n.pci.as_ref().is_some_and(|p| p.pci_id.as_deref() == Some("15b3:1021")))
            .count(),
        2
    );
}

#[test]
fn hidden_switches_are_said_not_invented() {
    let p4d = snapshot("aws-p4d.xml");
    assert!(p4d.pci.switches.is_empty());
    assert!(!p4d.pci.switches_visible);
    let note = p4d
        .notes
        .iter()
        .find(|n| n.code == "switches-not-visible")
        .expect("note");
    assert!(note.message.contains("switches not visible"));
    for file in ["aws-p5en.xml", "aws-p6-b200.xml"] {
        let s = snapshot(file);
        assert!(s.pci.switches_visible, "{file}");
        assert!(!s.pci.switches.is_empty(), "{file}");
    }
}

#[test]
fn matrix_classes_follow_the_lstopo_tree() {
    for file in FILES {
        let objs = lstopo_tree(file);
        let by_bus: HashMap<String, usize> = objs
            .iter()
            .enumerate()
            .filter_map(|(i, o)| Some((o.busid.clone()?, i)))
            .collect();
        let s = snapshot(file);
        let m = path_matrix(&s);
        let mut checked = 0;
        for (i, a) in m.devices.iter().enumerate() {
            for (j, b) in m.devices.iter().enumerate() {
                if i == j {
                    assert_eq!(m.classes[i][j], PathClass::SelfPath);
                    continue;
                }
                let (oa, ob) = (by_bus[&a.bdf.unwrap().to_string()], by_bus[&b.bdf.unwrap().to_string()]);
                assert_eq!(
                    m.classes[i][j].to_string(),
                    oracle_class(&objs, oa, ob),
                    "{file}: {} to {}",
                    a.label,
                    b.label
                );
                checked += 1;
            }
        }
        assert!(checked > 100, "{file}: {checked} pairs");
    }
}

#[test]
fn malformed_xml_is_a_data_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    let full = std::fs::read_to_string(data("aws-p4d.xml")).unwrap();
    std::fs::write(&bad, &full[..full.len() / 3]).unwrap();
    let out = tt(["probe", "--from-hwloc-xml"]).arg(&bad).run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    let err = String::from_utf8(out.0.stderr).unwrap();
    assert!(err.contains("bad.xml") && err.contains("hint:"), "{err}");

    let not_xml = dir.path().join("notes.txt");
    std::fs::write(&not_xml, "hello").unwrap();
    let out = tt(["probe", "--from-hwloc-xml"]).json().arg(&not_xml).run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["failed"], true);
    assert_eq!(doc["changed"], false);
    assert!(doc["msg"].as_str().unwrap().contains("not an hwloc XML export"));

    let out = tt(["probe", "--from-hwloc-xml", "/nonexistent/x.xml"]).run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::NO_INPUT.code()));
}
