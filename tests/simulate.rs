//! Simulated nodes: snapshots from bundled profiles and NCCL topology files of real SKUs.

use topo_tune::api::from_source;
use topo_tune::api::path_matrix;
use topo_tune::api::snapshot::SourceKind;
use topo_tune::api::PathClass;

fn path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn azure_ndv5_nccl_topology() {
    // SOURCES: 8 GPUs, 8 InfiniBand NICs, 2 NUMA nodes, 8 PCIe switches with 1 GPU + 1 NIC.
    let s = from_source(&path("profiles/nccl/azure-ndv5-topo.xml"), "ndv5-01").unwrap();
    assert_eq!(s.hostname, "ndv5-01");
    assert_eq!(s.source.kind, SourceKind::NcclTopo);
    assert_eq!(
        (s.gpus.len(), s.nics.len(), s.numa_nodes.len(), s.pci.switches.len()),
        (8, 8, 2, 8)
    );
    let m = path_matrix(&s);
    let idx = |l: &str| m.devices.iter().position(|d| d.label == l).unwrap();
    assert_eq!(
        m.classes[idx("GPU0")][idx("NIC0")],
        PathClass::Pix,
        "GPU and NIC behind one switch"
    );
    assert_eq!(
        m.classes[idx("GPU0")][idx("GPU1")],
        PathClass::Node,
        "other switch, same CPU"
    );
    assert_eq!(
        m.classes[idx("GPU0")][idx("GPU7")],
        PathClass::Sys,
        "other CPU, although both switches are `ffff:ff:..`"
    );
    assert_eq!(s.numa_nodes[0].cpus.len(), 48);
}

#[test]
fn aws_p4d_nccl_topology_folds_switches() {
    // SOURCES: 4 PCIe switches, each with 2 GPUs and 1 NIC; 2 NUMA nodes.
    let s = from_source(&path("profiles/nccl/aws-p4d-24xl-topo.xml"), "p4d").unwrap();
    assert_eq!(
        (s.gpus.len(), s.nics.len(), s.numa_nodes.len(), s.pci.switches.len()),
        (8, 4, 2, 4)
    );
    let m = path_matrix(&s);
    assert_eq!(m.classes[0][1], PathClass::Pix);
    assert_eq!(m.classes[0][8], PathClass::Pix, "GPU0 and NIC0 share switch 0");
}

#[test]
fn aws_p5_nccl_topology_with_nics_and_gpu_sm() {
    // SOURCES: 8 GPUs (sm 90), 32 EFA NICs, 1 NUMA node, 8 switches of 1 GPU + 4 NICs.
    let s = from_source(&path("tests/data/nccl/aws-p5.48xl-topo.xml"), "p5").unwrap();
    assert_eq!((s.gpus.len(), s.nics.len(), s.numa_nodes.len()), (8, 32, 1));
    assert_eq!(s.gpus[0].compute_capability.as_deref(), Some("9.0"));
    assert_eq!(s.nics[0].name, "rdmap79s0");
    assert_eq!(s.nics[0].pci.as_ref().unwrap().pcie.current_width, Some(8));
}

#[test]
fn sparse_and_small_nccl_files_still_load() {
    // g5.48xl lists bus ids only: no classes, so no GPU or NIC can be claimed.
    let g5 = from_source(&path("tests/data/nccl/aws-g5.48xl-topo.xml"), "g5").unwrap();
    assert_eq!(g5.numa_nodes.len(), 2);
    assert!(g5.gpus.is_empty());
    assert!(g5.notes.iter().any(|n| n.code == "no-gpu"));
    let ndv2 = from_source(&path("tests/data/nccl/azure-ndv2-topo.xml"), "ndv2").unwrap();
    assert_eq!((ndv2.gpus.len(), ndv2.nics.len()), (8, 1));
}

#[test]
fn profiles_by_name_and_bad_sources() {
    let s = from_source("aws-p6-b200", "b200-01").unwrap();
    assert_eq!((s.hostname.as_str(), s.gpus.len()), ("b200-01", 8));
    assert!(from_source("no-such-profile", "x")
        .unwrap_err()
        .message
        .contains("no-such-profile"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    std::fs::write(
        &bad,
        "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"zz\"/></cpu></system>",
    )
    .unwrap();
    assert!(from_source(bad.to_str().unwrap(), "x")
        .unwrap_err()
        .message
        .contains("not a PCI bus id"));
    std::fs::write(&bad, "<system version=\"1\"><cpu").unwrap();
    assert!(from_source(bad.to_str().unwrap(), "x").is_err());
}
