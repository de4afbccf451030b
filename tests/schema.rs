//! Every command's `--output json` is the one envelope and validates against its schema in
//! docs/schema/, for every mode of the command (and for errors).

use crate::common::machines::{self, Mlx5Naming};
use crate::common::{assert_schema, Run};
use serde_json::Value;
use std::path::Path;

fn run(args: &[&str]) -> (Option<i32>, Value) {
    let o = Run::new().json().args(args).run();
    let doc = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), doc)
}

fn example() -> String {
    format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn probe_and_plan_validate() {
    let xml = format!("{}/profiles/aws-p5en.xml", env!("CARGO_MANIFEST_DIR"));
    let (_, doc) = run(&["probe", "--from-hwloc-xml", &xml]);
    assert_schema("probe", &doc);
    let (_, doc) = run(&["probe", "--from-hwloc-xml", &xml, "--matrix"]);
    assert!(doc["matrix"]["classes"].is_array());
    assert_schema("probe", &doc);
    let tree = tempfile::tempdir().unwrap();
    machines::irq_box(tree.path(), Mlx5Naming::Modern);
    let (_, doc) = run(&["probe", "--fsroot", s(tree.path())]);
    assert_schema("probe", &doc);
    // An NCCL topology file: what it does not say is null (cores, a GPU's pci id).
    let nccl = format!(
        "{}/tests/data/nccl-shapes/gpu-without-vendor.xml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (code, doc) = run(&["probe", "--from-nccl-topo", &nccl]);
    assert_eq!(code, Some(0), "{doc}");
    assert!(
        doc["cpu"]["cores"].is_null() && doc["gpus"][0]["placement"]["pci_id"].is_null(),
        "{doc}"
    );
    assert_schema("probe", &doc);

    let out = tempfile::tempdir().unwrap();
    let (code, doc) = run(&["plan", "--cluster-config", &example(), "--output-dir", s(out.path())]);
    assert_eq!(code, Some(0));
    assert_schema("plan", &doc);
    // plan.json is the plan alone: the envelope's payload, without the envelope.
    let file: Value = serde_json::from_str(&std::fs::read_to_string(out.path().join("plan.json")).unwrap()).unwrap();
    for k in ["node_order", "nccl", "node_classes", "predicted"] {
        assert_eq!(file[k], doc[k], "{k}");
    }
}

#[test]
fn every_mode_of_init_and_rollback_validates() {
    let out = tempfile::tempdir().unwrap();
    let cfg = example();
    let dir = s(out.path());
    for args in [
        vec!["init", "--cluster-config", &cfg, "--list"],
        vec!["init", "--cluster-config", &cfg, "--collect-only", "--output-dir", dir],
        vec!["init", "--cluster-config", &cfg, "--output-dir", dir],
        vec![
            "init",
            "--cluster-config",
            &cfg,
            "--output-dir",
            dir,
            "--check",
            "--diff",
        ],
        vec!["rollback", "--cluster-config", &cfg, "--output-dir", dir],
        // Without --output-dir, simulated nodes are skipped with the reason.
        vec!["init", "--cluster-config", &cfg],
        vec!["rollback", "--cluster-config", &cfg],
    ] {
        let (_, doc) = run(&args);
        assert_schema(args[0], &doc);
    }
    let (code, doc) = run(&["rollback", "--cluster-config", &cfg]);
    assert_eq!(code, Some(topo_tune::exit::ALL_FAILED.code()));
    assert_eq!(doc["nodes"][0]["status"], "skipped");
    assert_eq!(doc["nodes"][0]["error"]["kind"], "simulated");
}

#[test]
fn irq_pin_and_doctor_validate_here_and_across_a_cluster() {
    let tree = tempfile::tempdir().unwrap();
    machines::irq_box(tree.path(), Mlx5Naming::Modern);
    let root = s(tree.path());
    for args in [
        vec!["irq-pin", "--fsroot", root, "--dry-run", "--reserve-cpus", "0-3"],
        vec!["irq-pin", "--fsroot", root, "--reserve-cpus", "0-3"],
        vec!["doctor", "--fsroot", root],
        vec!["irq-pin", "--cluster-config", &example(), "--dry-run"],
        vec!["doctor", "--cluster-config", &example()],
    ] {
        let (_, doc) = run(&args);
        assert_schema(args[0], &doc);
    }
}

#[test]
fn errors_and_usage_errors_print_the_error_envelope() {
    let (code, doc) = run(&["probe", "--fsroot", "/nonexistent/tree"]);
    assert_eq!(code, Some(topo_tune::exit::NO_INPUT.code()));
    assert_schema("error", &doc);
    assert_eq!(doc["error"]["kind"], "probe");
    let (code, doc) = run(&["probe", "--no-such-flag"]);
    assert_eq!(code, Some(topo_tune::exit::USAGE.code()));
    assert_schema("error", &doc);
    assert_eq!(doc["error"]["kind"], "usage");
    assert_eq!(doc["exit_code"], 2);
    let (code, doc) = run(&["plan", "--cluster-config", &example(), "--forks", "0"]);
    assert_eq!(code, Some(topo_tune::exit::USAGE.code()));
    assert_schema("error", &doc);
    let (code, doc) = run(&["apply", "--cluster-config", &example()]);
    assert_eq!(
        code,
        Some(topo_tune::exit::USAGE.code()),
        "no --canary, --all or --resume"
    );
    assert_schema("error", &doc);
    let state = tempfile::tempdir().unwrap();
    let state = state.path().display().to_string();
    let resume = [
        "apply",
        "--cluster-config",
        &example(),
        "--resume",
        "20261130T000000Z-1",
        "--state-dir",
        &state,
    ];
    let (code, doc) = run(&resume);
    assert_eq!(code, Some(topo_tune::exit::NO_INPUT.code()), "no such rollout");
    assert_schema("error", &doc);
    assert_eq!(doc["error"]["kind"], "state");
}

#[test]
#[should_panic(expected = "violates its schema")]
fn a_schema_refuses_a_node_failure_that_is_only_a_string() {
    let (_, mut doc) = run(&["rollback", "--cluster-config", &example()]);
    doc["nodes"][0]["error"] = "simulated".into();
    assert_schema("rollback", &doc);
}

#[test]
#[should_panic(expected = "violates its schema")]
fn a_schema_refuses_a_field_it_does_not_document() {
    let (_, mut doc) = run(&["doctor", "--cluster-config", &example()]);
    doc["surprise"] = true.into();
    assert_schema("doctor", &doc);
}
