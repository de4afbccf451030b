//! Shared test helpers: fake machines and running the real binary.

#![allow(dead_code)]

pub mod fakesys;
pub mod machines;
pub mod sshd;

use assert_cmd::Command;
use topo_tune::model::NodeSnapshot;

pub fn topo_tune() -> Command {
    let mut c = Command::cargo_bin("topo-tune").unwrap();
    c.env_remove("TOPO_TUNE_OUTPUT")
        .env_remove("TOPO_TUNE_FSROOT")
        .env_remove("TOPO_TUNE_FROM_HWLOC_XML")
        .env_remove("TOPO_TUNE_NVML_FIXTURE");
    c
}

/// Run `topo-tune probe --output json ARGS` and parse the snapshot it prints.
pub fn probe_json(args: &[&str]) -> NodeSnapshot {
    let out = topo_tune()
        .args(["probe", "--output", "json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    NodeSnapshot::from_json(&String::from_utf8(out.stdout).unwrap()).unwrap()
}
