//! `init --from-probes DIR`: snapshots gathered by srun or Ansible instead of ssh.

use crate::common::tt;
use serde_json::Value;

#[test]
fn snapshots_from_files_missing_and_broken_ones_reported() {
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(probes.join("gpu003")).unwrap();
    let xml = format!("{}/profiles/aws-p5en.xml", env!("CARGO_MANIFEST_DIR"));
    // What `srun ... topo-tune probe --output json > probes/$(hostname).json` leaves behind.
    let snap = tt(["probe", "--from-hwloc-xml", &xml]).json().run();
    assert!(snap.status.success());
    std::fs::write(probes.join("gpu001.json"), &snap.stdout).unwrap();
    std::fs::write(probes.join("gpu003/snapshot.json"), &snap.stdout).unwrap(); // an earlier --output-dir
    std::fs::write(probes.join("gpu004.json"), "Last login: Mon\n{").unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: \"gpu[001-004]\"\n").unwrap();
    let out = tt(["init", "--collect-only"])
        .json()
        .config(&cfg)
        .arg("--from-probes")
        .arg(&probes)
        .out(dir.path().join("out"))
        .run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::PARTIAL_FAILURE.code()));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let status: Vec<(&str, &str)> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["status"].as_str().unwrap(),
                n["error"]["kind"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        status,
        [
            ("ok", "-"),
            ("failed", "probe_file_missing"),
            ("ok", "-"),
            ("failed", "bad_answer")
        ]
    );
    assert!(doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["transport"] == "files"));
    let written = std::fs::read_to_string(dir.path().join("out/gpu001/snapshot.json")).unwrap();
    assert_eq!(topo_tune::api::NodeSnapshot::from_json(&written).unwrap().gpus.len(), 8);
}
