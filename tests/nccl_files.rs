//! `init` end to end: NCCL rules with reasons, the files they become, and the safe writer.

use crate::common::sshd::{Node, SshCluster};
use crate::common::{machines, topo_tune, tt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use topo_tune::api::derive;
use topo_tune::api::NcclVersion;
use topo_tune::api::NodeSnapshot;
use topo_tune::api::{plan, NcclPolicy, PlanInput, PlanNode};

fn probe(root: &Path, extra: &[&str]) -> Vec<u8> {
    let out = tt(["probe", "--fsroot"]).json().arg(root).args(extra).run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.0.stdout
}

fn snapshot_of(build: fn(&Path) -> crate::common::fakesys::FakeMachine) -> NodeSnapshot {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    NodeSnapshot::from_json(&String::from_utf8(probe(dir.path(), &[])).unwrap()).unwrap()
}

fn value(d: &topo_tune::api::Derived, name: &str) -> Option<String> {
    d.settings.iter().find(|s| s.name == name).map(|s| s.value.clone())
}

#[test]
fn rules_on_the_eight_gpu_machine() {
    let s = snapshot_of(machines::dgx_like);
    let old = derive(&s, Some(8), Some(NcclVersion(2, 20, 5)), &BTreeMap::new()).unwrap();
    assert_eq!(
        value(&old, "NCCL_IB_HCA").as_deref(),
        Some("=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7")
    );
    assert_eq!(value(&old, "NCCL_SOCKET_IFNAME").as_deref(), Some("=eno1"));
    assert_eq!(
        value(&old, "NCCL_IB_GID_INDEX").as_deref(),
        Some("3"),
        "RoCE v2, IPv4-mapped"
    );
    assert_eq!(value(&old, "NCCL_CROSS_NIC").as_deref(), Some("0"));
    assert_eq!(
        value(&old, "NCCL_TOPO_FILE"),
        None,
        "NUMA known, switches visible: NCCL detects right"
    );
    assert!(old.settings.iter().all(|st| !st.reason.is_empty()));
    assert!(old
        .settings
        .iter()
        .find(|st| st.name == "NCCL_IB_HCA")
        .unwrap()
        .reason
        .contains("mlx5_0 (PIX to GPU0)"));
    // NCCL >= 2.21 picks the RoCE v2 GID itself; no debug-class variable is ever produced.
    let new = derive(&s, None, Some(NcclVersion(2, 28, 9)), &BTreeMap::new()).unwrap();
    assert_eq!(value(&new, "NCCL_IB_GID_INDEX"), None);
    assert!(new
        .left_out
        .iter()
        .any(|n| n.contains("NCCL ≥ 2.21 selects the RoCE v2 GID itself")));
    for st in &new.settings {
        assert_eq!(
            topo_tune::api::table::lookup(&st.name).unwrap().class,
            topo_tune::api::table::Class::System,
            "{}",
            st.name
        );
    }
    // Overrides win, and are validated.
    let ov = BTreeMap::from([
        ("NCCL_IB_TC".to_string(), "106".to_string()),
        ("NCCL_SOCKET_IFNAME".to_string(), "=bond0".to_string()),
    ]);
    let d = derive(&s, None, Some(NcclVersion(2, 28, 9)), &ov).unwrap();
    assert_eq!(value(&d, "NCCL_IB_TC").as_deref(), Some("106"));
    assert_eq!(value(&d, "NCCL_SOCKET_IFNAME").as_deref(), Some("=bond0"));
    let bad = BTreeMap::from([("NCCL_ALGO".to_string(), "Ring".to_string())]);
    assert!(derive(&s, None, None, &bad)
        .unwrap_err()
        .reason
        .contains("debugging variable"));
}

#[test]
fn vm_with_unknown_numa_gets_a_topology_file() {
    let s = snapshot_of(machines::h200_vm);
    let d = derive(&s, None, Some(NcclVersion(2, 28, 9)), &BTreeMap::new()).unwrap();
    assert_eq!(
        value(&d, "NCCL_TOPO_FILE").as_deref(),
        Some("/etc/nccl/topo-tune/topology.xml")
    );
    assert_eq!(value(&d, "NCCL_SOCKET_IFNAME").as_deref(), Some("=eth0"));
    assert!(d.wants_topology_file);
    // The plan carries the file's bytes for the node's NCCL class.
    let nodes = [PlanNode {
        host: "vm".into(),
        labels: BTreeMap::new(),
        snapshot: &s,
        hints: Default::default(),
    }];
    let p = plan(&PlanInput {
        nodes: &nodes,
        fabric: None,
        message_bytes: 1 << 30,
        nccl: &NcclPolicy {
            cluster_version: Some(NcclVersion(2, 28, 9)),
            overrides: BTreeMap::new(),
        },
    });
    assert_eq!(p.nccl.classes.len(), 1);
    assert_eq!(p.nccl.classes[0].hosts, ["vm"]);
    assert_eq!(
        p.nccl.classes[0].topology_xml.as_deref(),
        Some(include_str!("data/golden/h200-vm-topology.xml"))
    );
    assert_eq!(p.nccl.classes[0].settings, d.settings);
}

/// A two-node cluster (the 8-GPU machine and the VM) from probe files, written to `out`.
struct Cluster {
    dir: tempfile::TempDir,
    cfg: PathBuf,
    probes: PathBuf,
    out: PathBuf,
}

fn cluster(extra_yaml: &str) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    for (name, build) in [
        (
            "gpu1",
            machines::dgx_like as fn(&Path) -> crate::common::fakesys::FakeMachine,
        ),
        ("vm1", machines::h200_vm),
    ] {
        let root = dir.path().join(format!("tree-{name}"));
        build(&root);
        std::fs::write(probes.join(format!("{name}.json")), probe(&root, &[])).unwrap();
    }
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!("nccl_version: \"2.28.9\"\n{extra_yaml}nodes:\n  - host: gpu1\n  - host: vm1\n"),
    )
    .unwrap();
    let out = dir.path().join("out");
    Cluster { dir, cfg, probes, out }
}

fn init(c: &Cluster, extra: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value, String) {
    let mut cmd = topo_tune();
    cmd.args(["--output", "json", "init", "--cluster-config"])
        .arg(&c.cfg)
        .arg("--from-probes")
        .arg(&c.probes)
        .arg("--output-dir")
        .arg(&c.out)
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), doc, String::from_utf8_lossy(&o.stderr).into_owned())
}

fn read(c: &Cluster, host: &str, path: &str) -> Option<String> {
    std::fs::read_to_string(c.out.join(host).join(path.trim_start_matches('/'))).ok()
}

#[test]
fn full_set_of_files_then_a_second_run_touches_nothing() {
    let c = cluster("");
    let (code, doc, err) = init(&c, &[], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["changed"], true);
    let conf = read(&c, "gpu1", "/etc/nccl.conf").unwrap();
    assert!(
        conf.starts_with("# managed by topo-tune"),
        "NCCL 2.28 skips comment lines"
    );
    assert!(conf.contains("NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7\n"));
    assert_eq!(
        read(&c, "gpu1", "/etc/nccl/conf.d/50-topo-tune.conf")
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count(),
        2
    );
    assert!(read(&c, "gpu1", "/etc/nccl/topo-tune/nccl.env")
        .unwrap()
        .contains("NCCL_SOCKET_IFNAME==eno1\n"));
    assert_eq!(
        read(&c, "vm1", "/etc/nccl/topo-tune/topology.xml").as_deref(),
        Some(include_str!("data/golden/h200-vm-topology.xml"))
    );
    assert!(read(&c, "vm1", "/etc/nccl.conf")
        .unwrap()
        .contains("NCCL_TOPO_FILE=/etc/nccl/topo-tune/topology.xml\n"));
    let hca = doc["nodes"][0]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "NCCL_IB_HCA")
        .unwrap();
    assert!(hca["reason"].as_str().unwrap().contains("PIX to GPU0"));

    let files: Vec<PathBuf> = [
        "gpu1/etc/nccl.conf",
        "gpu1/etc/nccl/conf.d/50-topo-tune.conf",
        "vm1/etc/nccl/topo-tune/manifest.json",
    ]
    .iter()
    .map(|p| c.out.join(p))
    .collect();
    let mtimes: Vec<_> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let (code, doc, _) = init(&c, &[], &[]);
    assert_eq!(code, Some(0));
    assert_eq!(doc["changed"], false);
    assert!(doc["nodes"].as_array().unwrap().iter().all(|n| n["changed"] == false));
    let after: Vec<_> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    assert_eq!(mtimes, after, "an identical run touches no file");
}

#[test]
fn a_foreign_nccl_conf_is_kept_and_rollback_restores_it() {
    let c = cluster("");
    let conf = c.out.join("gpu1/etc/nccl.conf");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n").unwrap();
    // --check: nothing written, exit 3, diffs shown.
    let (code, doc, _) = init(&c, &["--check", "--diff"], &[]);
    assert_eq!(code, Some(topo_tune::exit::CHANGES_PENDING.code()));
    assert_eq!(doc["pending"], true);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n"
    );
    assert!(!c.out.join("gpu1/etc/nccl/conf.d").exists());
    let diff = doc["nodes"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/nccl.conf")
        .unwrap()["diff"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        diff.contains("-NCCL_IB_HCA=mlx5\n") && diff.contains("+NCCL_IB_HCA==mlx5_0,"),
        "{diff}"
    );

    let (code, _, err) = init(&c, &[], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        read(&c, "gpu1", "/etc/nccl/conf.d/00-preserved-nccl.conf").as_deref(),
        Some("NCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n")
    );
    let merged = read(&c, "gpu1", "/etc/nccl.conf").unwrap();
    assert!(merged.contains("NCCL_DEBUG=WARN\n"), "kept: {merged}");
    assert!(
        merged.contains("NCCL_IB_HCA==mlx5_0,") && !merged.contains("NCCL_IB_HCA=mlx5\n"),
        "topo-tune's drop-in wins: {merged}"
    );

    let o = tt(["rollback"]).json().config(&c.cfg).out(&c.out).run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\n",
        "the operator's file is back"
    );
    assert!(!c.out.join("gpu1/etc/nccl/conf.d/50-topo-tune.conf").exists());
    assert!(!c.out.join("gpu1/etc/nccl/conf.d/00-preserved-nccl.conf").exists());
    // Nothing left to undo: said plainly, per node (docs/init.md: a second rollback changes
    // nothing and says so).
    let o = tt(["rollback"]).json().config(&c.cfg).out(&c.out).run();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing newer to undo"));
}

#[test]
fn a_broken_foreign_file_stops_that_node_and_changes_nothing() {
    let c = cluster("");
    let conf = c.out.join("gpu1/etc/nccl.conf");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME = eth0\n").unwrap();
    let (code, doc, _) = init(&c, &[], &[]);
    assert_eq!(code, Some(topo_tune::exit::PARTIAL_FAILURE.code()));
    let err = doc["nodes"][0]["error"]["message"].as_str().unwrap();
    assert!(
        err.contains("/etc/nccl.conf:2") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME = eth0\n"
    );
    assert!(!c.out.join("gpu1/etc/nccl/conf.d").exists());
    assert_eq!(doc["nodes"][1]["status"], "ok", "the other node is written");
}

#[test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs --features fault-injection")]
fn killed_between_temp_write_and_rename_leaves_the_old_file() {
    let c = cluster("");
    let (code, _, _) = init(&c, &[], &[]);
    assert_eq!(code, Some(0));
    let before = read(&c, "gpu1", "/etc/nccl.conf").unwrap();
    // Change the settings, then die right before the first rename.
    std::fs::write(
        &c.cfg,
        "nccl_version: \"2.28.9\"\nnccl:\n  NCCL_IB_TIMEOUT: \"22\"\nnodes:\n  - host: gpu1\n  - host: vm1\n",
    )
    .unwrap();
    // One node at a time: gpu1 is written first, so it is the one the fault stops (with two
    // at once, vm1 could die first and gpu1 never start).
    let (code, _, _) = init(&c, &["--forks", "1"], &[("TOPO_TUNE_FAULT_BEFORE_RENAME", "1")]);
    assert_ne!(code, Some(0), "the writer was killed");
    assert_eq!(read(&c, "gpu1", "/etc/nccl.conf").unwrap(), before, "old file intact");
    let node_root = c.out.join("gpu1");
    let temps = || {
        let mut n = 0;
        let mut stack = vec![node_root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else if e.file_name().to_string_lossy().ends_with(".tmp") {
                    n += 1;
                }
            }
        }
        n
    };
    assert_eq!(temps(), 1, "one half-done temp file, and every target intact");
    let (code, _, err) = init(&c, &[], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(read(&c, "gpu1", "/etc/nccl.conf")
        .unwrap()
        .contains("NCCL_IB_TIMEOUT=22\n"));
    assert_eq!(temps(), 0, "the next run clears stale temp files");
}

#[test]
fn an_unwritable_target_fails_that_node_cleanly() {
    let c = cluster("");
    // /etc of gpu1 is a regular file: nothing can be created below it (root ignores modes).
    std::fs::create_dir_all(c.out.join("gpu1")).unwrap();
    std::fs::write(c.out.join("gpu1/etc"), "not a directory").unwrap();
    let (code, doc, _) = init(&c, &[], &[]);
    assert_eq!(code, Some(topo_tune::exit::PARTIAL_FAILURE.code()));
    assert_eq!(doc["nodes"][0]["status"], "failed");
    assert!(
        doc["nodes"][0]["error"]["message"].as_str().unwrap().contains("/etc"),
        "{}",
        doc["nodes"][0]["error"]
    );
    assert_eq!(doc["nodes"][1]["status"], "ok");
    let _ = &c.dir;
}

#[test]
fn init_writes_on_a_node_over_real_ssh_and_rolls_back() {
    let trees = tempfile::tempdir().unwrap();
    machines::dgx_like(&trees.path().join("dgx"));
    let cluster = SshCluster::start(&[Node::Fsroot(trees.path().join("dgx"))]);
    let cfg = cluster.cluster_yaml("");
    let written = trees.path().join("dgx/written");
    let o = tt(["init"]).json().config(&cfg).run();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let conf = std::fs::read_to_string(written.join("etc/nccl.conf")).unwrap();
    assert!(conf.contains("NCCL_IB_HCA==mlx5_0,"), "{conf}");
    let o = tt(["init", "--check"]).json().config(&cfg).run();
    assert_eq!(o.status.code(), Some(0), "nothing pending after the write");
    let o = tt(["rollback"]).json().config(&cfg).run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(
        !written.join("etc/nccl.conf").exists(),
        "created by topo-tune, so removed by rollback"
    );
}

/// The `topo-tune node KIND` commands a node was asked to run, by kind.
fn node_calls(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("/topo-tune node ").nth(1))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_repeat_init_that_changes_nothing_makes_one_round_trip_per_node() {
    let trees = tempfile::tempdir().unwrap();
    machines::dgx_like(&trees.path().join("dgx"));
    let cluster = SshCluster::start(&[Node::LoggedFsroot(trees.path().join("dgx"))]);
    let cfg = cluster.cluster_yaml("");
    let log = || cluster.commands_log(1).unwrap_or_default();
    let init = |extra: &[&str]| {
        let o = tt(["init"]).json().args(extra).config(&cfg).run();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        (o.status.code(), doc, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, doc, err) = init(&[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["changed"], true);
    // (The first run deploys the binary in between: the survey is sent again after it.)
    let first = node_calls(&log());
    assert_eq!(first.first().map(String::as_str), Some("survey"), "{}", log());
    assert_eq!(first.last().map(String::as_str), Some("write"), "{}", log());

    // Nothing changed on the node: its probe says so, and nothing else is sent.
    let (code, doc, err) = init(&[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["changed"], false, "{doc}");
    let files = doc["nodes"][0]["files"].as_array().unwrap();
    assert!(files.len() >= 3, "{doc}");
    assert!(files.iter().all(|f| f["action"] == "unchanged"), "{doc}");
    assert_eq!(node_calls(&log())[first.len()..], ["survey"], "{}", log());
    let (code, doc, _) = init(&["--check"]);
    assert_eq!((code, &doc["changed"]), (Some(0), &Value::Bool(false)), "{doc}");
    let seen = node_calls(&log()).len();
    assert_eq!(
        node_calls(&log())[seen - 1..],
        ["survey"],
        "--check: one round trip too"
    );

    // Someone edits the node's files: the probe no longer vouches for them; the write puts
    // topo-tune's back.
    let dropin = trees.path().join("dgx/written/etc/nccl/conf.d/50-topo-tune.conf");
    let ours = std::fs::read_to_string(&dropin).unwrap();
    std::fs::write(&dropin, "NCCL_IB_HCA=mlx5_9\n").unwrap();
    let (code, doc, err) = init(&[]);
    assert_eq!(code, Some(0), "{doc}\n{err}");
    assert_eq!(doc["changed"], true, "{doc}");
    assert_eq!(node_calls(&log())[seen..], ["survey", "write"], "{}", log());
    assert_eq!(std::fs::read_to_string(&dropin).unwrap(), ours);
}

/// Every file under `root` (relative path → content), the manifest, backups and lock aside
/// (they name the run).
fn tree(root: &Path) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                if !rel.contains("manifest.json") && !rel.contains("/backups/") && !rel.ends_with("/lock") {
                    out.insert(rel, std::fs::read_to_string(&p).unwrap());
                }
            }
        }
    }
    out
}

/// `topo-tune --output json init --plan PLAN --output-dir OUT` on the cluster.
/// The nodes' own facts (the guard's) come from the same probes the plan was made from.
fn init_from_plan(c: &Cluster, plan: &Path, out: &Path) -> (Option<i32>, Value, String) {
    let o = tt(["init"])
        .json()
        .config(&c.cfg)
        .arg("--plan")
        .arg(plan)
        .arg("--from-probes")
        .arg(&c.probes)
        .out(out)
        .run();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), doc, String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn init_applies_a_reviewed_plan_exactly() {
    let c = cluster("");
    let plan_dir = c.dir.path().join("plan");
    let o = tt(["plan"])
        .json()
        .config(&c.cfg)
        .arg("--from-probes")
        .arg(&c.probes)
        .out(&plan_dir)
        .run();
    assert_eq!(o.status.code(), Some(0));
    let plan_json = plan_dir.join("plan.json");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_json).unwrap()).unwrap();
    assert_eq!(plan["schema_version"], 3);
    let hosts: Vec<&str> = plan["nccl"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()))
        .collect();
    assert_eq!(hosts, ["gpu1", "vm1"], "every node's NCCL settings are in the plan");

    // Applied from the plan (nothing planned again; the nodes' facts re-read for the checks)
    // and derived afresh: the same files.
    let from_plan = c.dir.path().join("from-plan");
    let (code, _, err) = init_from_plan(&c, &plan_json, &from_plan);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, _) = init(&c, &[], &[]);
    assert_eq!(code, Some(0));
    let (a, b) = (tree(&from_plan), tree(&c.out));
    assert!(a.keys().any(|k| k.ends_with("etc/nccl.conf")));
    assert_eq!(a, b, "init --plan writes exactly what init derives");

    // An edited plan takes effect as written: the reviewed change set is what lands.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&plan_json).unwrap()).unwrap();
    doc["nccl"]["classes"][0]["settings"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "NCCL_IB_TIMEOUT", "value": "22", "reason": "reviewed by hand"}));
    std::fs::write(&plan_json, doc.to_string()).unwrap();
    let (code, _, _) = init_from_plan(&c, &plan_json, &from_plan);
    assert_eq!(code, Some(0));
    let host = doc["nccl"]["classes"][0]["hosts"][0].as_str().unwrap().to_string();
    let conf = std::fs::read_to_string(from_plan.join(&host).join("etc/nccl.conf")).unwrap();
    assert!(conf.contains("NCCL_IB_TIMEOUT=22\n"), "{conf}");

    // A plan made for another cluster, or by another schema, is refused before anything runs.
    let before = tree(&from_plan);
    doc["nccl"]["classes"][0]["hosts"][0] = "stranger".into();
    std::fs::write(&plan_json, doc.to_string()).unwrap();
    let (code, err, _) = init_from_plan(&c, &plan_json, &from_plan);
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()));
    assert_eq!(err["error"]["kind"], "plan_file");
    assert!(err["msg"].as_str().unwrap().contains("`stranger`"), "{err}");
    doc["nccl"]["classes"][0]["hosts"][0] = host.as_str().into();
    doc["schema_version"] = 1.into();
    std::fs::write(&plan_json, doc.to_string()).unwrap();
    let (code, _, stderr) = init_from_plan(&c, &plan_json, &from_plan);
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(stderr.contains("schema_version 1"), "{stderr}");
    assert_eq!(tree(&from_plan), before, "nothing was written");
}

/// `--dry-run` means one thing everywhere: change nothing, report what would change, exit 3
/// when something would — for `init` exactly what `--check` does.
#[test]
fn init_dry_run_is_check() {
    let c = cluster("");
    let (code_check, check, _) = init(&c, &["--check"], &[]);
    let (code_dry, dry, _) = init(&c, &["--dry-run"], &[]);
    assert_eq!(code_check, Some(topo_tune::exit::CHANGES_PENDING.code()));
    assert_eq!(code_dry, code_check);
    assert_eq!(dry["check"], true);
    assert_eq!(dry["pending"], check["pending"]);
    assert_eq!(dry["nodes"], check["nodes"]);
    assert!(!c.out.join("gpu1/etc/nccl.conf").exists(), "nothing written");
}

/// A plan this version wrote is one it applies: the bundled example (whose NDv5 NICs are
/// known only by PCI address) planned, then `init --plan … --check`.
#[test]
fn the_example_plan_applies_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let plan_dir = dir.path().join("plan");
    let o = tt(["plan", "--cluster-config", &cfg]).out(&plan_dir).run();
    assert_eq!(o.status.code(), Some(0));
    let o = tt(["init", "--check", "--cluster-config", &cfg, "--plan"])
        .json()
        .arg(plan_dir.join("plan.json"))
        .out(dir.path().join("nodes"))
        .run();
    assert_eq!(
        o.status.code(),
        Some(topo_tune::exit::CHANGES_PENDING.code()),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
