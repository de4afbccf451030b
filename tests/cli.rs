//! The command line as scripts see it: exit codes, JSON errors.

use crate::common::topo_tune;
use topo_tune::exit;

#[test]
fn apply_and_status_answer_in_the_envelope_with_their_codes() {
    for cmd in ["apply", "status"] {
        let mut c = topo_tune();
        c.args(["--output", "json", cmd, "--cluster-config", "/nonexistent/x.yaml"]);
        if cmd == "apply" {
            c.arg("--all");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(exit::NO_INPUT), "{cmd}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (
                doc["command"].as_str(),
                doc["failed"].as_bool(),
                doc["changed"].as_bool()
            ),
            (Some(cmd), Some(true), Some(false))
        );
        crate::common::assert_schema("error", &doc);
    }
    // apply needs a scope: a canary, --all, or a rollout to resume.
    let out = topo_tune()
        .args(["--output", "json", "apply", "--cluster-config", "x.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::USAGE));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["error"]["message"].as_str().unwrap().contains("--canary"), "{doc}");
}

#[test]
fn missing_or_bogus_fsroot() {
    let out = topo_tune()
        .args(["probe", "--fsroot", "/nonexistent/tree"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::NO_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fsroot /nonexistent/tree: no such directory"));

    let empty = tempfile::tempdir().unwrap();
    let out = topo_tune()
        .args(["probe", "--fsroot"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::DATA_ERROR));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("not a sysfs/procfs tree (sys/devices/system/cpu is missing)"),
        "{err}"
    );

    // The environment variable works the same way (for Ansible `environment:`).
    let out = topo_tune()
        .arg("probe")
        .env("TOPO_TUNE_FSROOT", "/nonexistent/tree")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::NO_INPUT));
}

#[test]
fn usage_errors_exit_2() {
    let out = topo_tune()
        .args(["probe", "--fsroot", "/a", "--from-hwloc-xml", "/b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::USAGE));
    let out = topo_tune().args(["probe", "--output", "yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(exit::USAGE));
    let out = topo_tune().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(exit::USAGE));
    let out = topo_tune().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(exit::OK));
    assert!(String::from_utf8_lossy(&out.stdout).contains("probe"));
}

#[test]
fn broken_nvml_fixture_is_a_data_error() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("nvml.json");
    std::fs::write(&fixture, "{ not json").unwrap();
    let xml = format!("{}/profiles/aws-p4d.xml", env!("CARGO_MANIFEST_DIR"));
    let out = topo_tune()
        .args(["probe", "--from-hwloc-xml", &xml, "--nvml-fixture"])
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(exit::DATA_ERROR));
}

#[test]
fn exit_codes_are_documented() {
    let doc = std::fs::read_to_string(format!("{}/docs/exit-codes.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    for (code, meaning) in exit::ALL {
        assert!(
            doc.contains(&format!("| {code} |")),
            "docs/exit-codes.md lacks code {code} ({meaning})"
        );
    }
}

#[test]
fn closed_stdout_pipe_is_not_an_error() {
    use std::process::{Command, Stdio};
    let xml = format!("{}/profiles/aws-p5en.xml", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("topo-tune"))
        .args(["probe", "--output", "json", "--from-hwloc-xml", &xml])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
