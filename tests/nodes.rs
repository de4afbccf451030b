//! `--nodes` on every command that touches nodes, over real loopback sshd nodes, and output
//! folded over identical nodes (with `--per-node` for the old view).

use crate::common::machines::{self, Mlx5Naming};
use crate::common::sshd::{Node, SshCluster};
use crate::common::{json, tt};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Three ssh nodes (each its own fake tree with mlx5 NICs): node1 and node2 in rack-1,
/// node3 in rack-2.
struct Three {
    trees: Vec<tempfile::TempDir>,
    cluster: SshCluster,
    cfg: PathBuf,
}

fn three() -> Three {
    let trees: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for t in &trees {
        machines::irq_box(t.path(), Mlx5Naming::Modern);
    }
    let cluster = SshCluster::start(
        &trees
            .iter()
            .map(|t| Node::Fsroot(t.path().to_path_buf()))
            .collect::<Vec<_>>(),
    );
    let mut y = format!(
        "ssh:\n  config_file: {}\n  remote_dir: {}\nnodes:\n",
        cluster.ssh_config.display(),
        cluster.dir.path().join("remote-cache").display()
    );
    for (i, n) in cluster.names.iter().enumerate() {
        let rack = if i < 2 { "rack-1" } else { "rack-2" };
        y.push_str(&format!("  - host: {n}\n    labels: {{rack: {rack}}}\n"));
    }
    let cfg = cluster.dir.path().join("cluster.yaml");
    std::fs::write(&cfg, y).unwrap();
    Three { trees, cluster, cfg }
}

impl Three {
    fn written(&self, i: usize) -> PathBuf {
        self.trees[i].path().join("written/etc/nccl/conf.d/50-topo-tune.conf")
    }

    fn affinity(&self, i: usize, irq: u32) -> String {
        std::fs::read_to_string(self.trees[i].path().join(format!("proc/irq/{irq}/smp_affinity_list")))
            .unwrap()
            .trim()
            .to_string()
    }
}

fn hosts(doc: &Value) -> Vec<&str> {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["host"].as_str().unwrap())
        .collect()
}

fn run(cfg: &Path, words: &[&str]) -> (Option<i32>, Value, String) {
    let o = tt(words).json().config(cfg).run();
    (
        o.status.code(),
        json(&o),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_command_that_touches_nodes_takes_nodes() {
    let t = three();
    let _ = &t.cluster;
    // init on rack-1 but node2: only node1 is reached and written.
    let (code, doc, err) = run(&t.cfg, &["init", "--nodes", "rack-1,!node2"]);
    assert_eq!(code, Some(0), "{err}{doc:#}");
    assert_eq!(hosts(&doc), ["node1"]);
    assert!(t.written(0).exists());
    assert!(
        !t.written(1).exists() && !t.written(2).exists(),
        "nodes left out are not touched"
    );

    let (code, doc, _) = run(&t.cfg, &["status", "--nodes", "node[1-2]"]);
    assert_eq!(hosts(&doc), ["node1", "node2"]);
    assert_eq!(code, Some(0), "node1 as written, node2 never written: {doc:#}");

    // A rollback on a node that was never written changes nothing; on node1 it undoes init.
    let (code, doc, _) = run(&t.cfg, &["rollback", "--nodes", "rack-2"]);
    assert_eq!(hosts(&doc), ["node3"]);
    assert_eq!(
        doc["nodes"][0]["error"]["kind"], "nothing_to_roll_back",
        "{code:?} {doc:#}"
    );
    assert!(t.written(0).exists());
    let (code, doc, _) = run(&t.cfg, &["rollback", "--nodes", "node1"]);
    assert_eq!((code, doc["changed"].as_bool()), (Some(0), Some(true)), "{doc:#}");
    assert!(!t.written(0).exists());
    // A deliberate rollback is not drift: status agrees with itself afterwards.
    let (code, doc, _) = run(&t.cfg, &["status", "--nodes", "node1"]);
    assert_eq!(code, Some(0), "{doc:#}");

    // doctor and irq-pin over ssh, on what the selection leaves.
    let (_, doc, err) = run(&t.cfg, &["doctor", "--nodes", "all,!node1"]);
    assert_eq!(hosts(&doc), ["node2", "node3"], "{err}");
    let (code, doc, err) = run(&t.cfg, &["irq-pin", "--nodes", "rack=rack-2", "--reserve-cpus", "0-3"]);
    assert_eq!((code, hosts(&doc)), (Some(0), vec!["node3"]), "{err}{doc:#}");
    assert_eq!(t.affinity(2, 201), "4");
    assert_eq!((t.affinity(0, 201), t.affinity(1, 201)), ("0".into(), "0".into()));
}

#[test]
fn a_selection_that_names_no_node_is_a_usage_error_and_contacts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "nodes:\n  - host: \"gpu[1-4]\"\n    simulate: aws-p4d\n    labels: {rack: r1}\n",
    )
    .unwrap();
    for words in [
        &["init", "--output-dir", "x", "--nodes", "gpu9"][..],
        &["status", "--nodes", "r2"],
        &["rollback", "--nodes", "!r1"],
        &["doctor", "--nodes", "gpu[1-5]"],
        &["irq-pin", "--nodes", "pool=a"],
    ] {
        let (code, doc, _) = run(&cfg, words);
        assert_eq!(code, Some(2), "{words:?}: {doc:#}");
        assert!(
            doc["error"]["message"].as_str().unwrap().contains("--nodes"),
            "{words:?}: {doc:#}"
        );
    }
    assert!(!dir.path().join("x").exists());
    // On this machine there are no nodes to select.
    let o = tt(["doctor", "--nodes", "gpu1"]).json().run();
    assert_eq!(o.status.code(), Some(2));
    assert!(json(&o)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--cluster-config"));
}

fn example() -> String {
    format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"))
}

fn tree_files(root: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains("topo-tune/manifest") && !p.to_string_lossy().contains("backups") {
                out.insert(p.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn a_selected_node_gets_the_files_the_whole_cluster_run_gives_it() {
    let (all, some) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = tt(["init"]).config(example()).out(all.path()).run();
    assert_eq!(o.status.code(), Some(0));
    let o = tt(["init", "--nodes", "rack-2,!p5en-08"])
        .config(example())
        .out(some.path())
        .run();
    assert_eq!(o.status.code(), Some(0));
    let mut written: Vec<String> = std::fs::read_dir(some.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["ndv5-01", "ndv5-02", "p5en-02", "p5en-04", "p5en-06"]);
    for host in &written {
        assert_eq!(
            tree_files(&some.path().join(host)),
            tree_files(&all.path().join(host)),
            "{host}: the same files as planned with every node"
        );
    }
}

#[test]
fn identical_nodes_fold_under_a_host_range_and_per_node_unfolds() {
    let out = tempfile::tempdir().unwrap();
    let human = |extra: &[&str]| {
        let o = tt(["init", "--check"])
            .config(example())
            .out(out.path())
            .args(extra)
            .run();
        String::from_utf8(o.stdout.clone()).unwrap()
    };
    let folded = human(&[]);
    let file_rows = |t: &str| t.lines().filter(|l| l.contains(" ok ")).count();
    assert_eq!(file_rows(&folded), 3, "three files, the same on ten nodes: {folded}");
    assert!(
        folded.contains(" ndv5-[01-02],p5en-[01-08]  ok      /etc/nccl.conf "),
        "{folded}"
    );
    let per_node = human(&["--per-node"]);
    assert_eq!(file_rows(&per_node), 30, "{per_node}");
    assert!(per_node.contains(" p5en-03  ok      /etc/nccl.conf "), "{per_node}");
    // JSON is the same either way: one row per node.
    let j = tt(["init", "--check"]).json().config(example()).out(out.path()).run();
    assert_eq!(json(&j)["nodes"].as_array().unwrap().len(), 10);

    // A node that differs stands apart: one node's file changed by hand.
    let o = tt(["init"]).config(example()).out(out.path()).run();
    assert_eq!(o.status.code(), Some(0));
    std::fs::write(
        out.path().join("p5en-05/etc/nccl/topo-tune/nccl.env"),
        "NCCL_DEBUG=INFO\n",
    )
    .unwrap();
    // Its own state directory: other tests' rollouts of the example are not this one's.
    let o = tt(["status"])
        .config(example())
        .out(out.path())
        .arg("--state-dir")
        .arg(out.path().join("state"))
        .run();
    let text = String::from_utf8(o.stdout.clone()).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("match") || l.contains("modified"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with(" p5en-05 ") && r.contains("nccl.env")),
        "{text}"
    );
    assert!(
        rows.iter().any(|r| r.starts_with(" ndv5-[01-02],p5en-[01-04,06-08] ")),
        "{text}"
    );
}

#[test]
fn doctor_holds_each_node_to_its_class_over_ssh() {
    let t = three();
    for (i, tree) in t.trees.iter().enumerate() {
        for k in 0..4 {
            let ib = tree.path().join(format!("sys/class/infiniband/mlx5_{k}"));
            std::fs::write(ib.join("board_id"), "MT_0000000838\n").unwrap();
            let fw = if i == 1 && k == 2 {
                "28.40.1000\n"
            } else {
                "28.39.1002\n"
            };
            std::fs::write(ib.join("fw_ver"), fw).unwrap();
        }
    }
    std::fs::write(t.trees[2].path().join("proc/sys/kernel/osrelease"), "6.5.0-old\n").unwrap();
    let (_, doc, err) = run(&t.cfg, &["doctor"]);
    let consistency = |host: &str| -> (String, String) {
        let node = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["host"] == host)
            .unwrap();
        let c = node["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "cluster-consistency");
        let c = c.unwrap_or_else(|| panic!("{host}: no cluster-consistency row: {err}{node:#}"));
        (
            c["status"].as_str().unwrap().into(),
            c["detail"].as_str().unwrap().into(),
        )
    };
    let (st, d) = consistency("node1");
    assert_eq!(st, "pass", "{d}");
    assert!(d.contains("odd one(s) out: node2, node3"), "{d}");
    let (st, d) = consistency("node2");
    assert_eq!(
        (st.as_str(), d.as_str()),
        (
            "warn",
            "NIC firmware (MT_0000000838) 28.39.1002 + 28.40.1000 where 2 of 3 nodes of its class run 28.39.1002"
        )
    );
    let (st, d) = consistency("node3");
    assert_eq!(st, "warn");
    assert!(
        d.starts_with("kernel 6.5.0-old where 2 of 3 nodes of its class run 6.8.0-fake"),
        "{d}"
    );
    crate::common::assert_schema("doctor", &doc);
}

/// An empty selector (an unset `$RACK`), or one of exclusions only, is a usage error that
/// touches nothing, on every command and from `TOPO_TUNE_NODES` too. Before: `init --nodes ''`
/// wrote all 10 example nodes, `apply --canary ''` promoted every node in one wave (exit 0),
/// `tune --canary ''` measured them all.
#[test]
fn an_empty_selector_selects_nothing_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let state = dir.path().join("state");
    let o_dir = out.to_str().unwrap();
    for words in [
        &["init", "--output-dir", o_dir, "--nodes", ""][..],
        &["init", "--output-dir", o_dir, "--nodes", " , "],
        &["init", "--output-dir", o_dir, "--nodes", "!rack-1"],
        &["apply", "--output-dir", o_dir, "--canary", ""],
        &["apply", "--output-dir", o_dir, "--canary", ","],
        &["tune", "--node-files", o_dir, "--output-dir", o_dir, "--canary", ""],
        &["status", "--output-dir", o_dir, "--nodes", ""],
        &["rollback", "--output-dir", o_dir, "--nodes", ""],
        &["doctor", "--nodes", ""],
        &["irq-pin", "--nodes", "", "--dry-run"],
        &["diagnose", "--nodes", ""],
    ] {
        let o = tt(words.iter().copied())
            .json()
            .config(example())
            .env("TOPO_TUNE_STATE_DIR", &state)
            .run();
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(2), "{words:?}: {doc:#}");
        let msg = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("selects no node") || msg.contains("only exclusions"),
            "{words:?}: {msg}"
        );
    }
    // The environment's selector, empty: the same.
    let o = tt(["init", "--output-dir", o_dir])
        .json()
        .config(example())
        .env("TOPO_TUNE_NODES", "")
        .run();
    assert_eq!(o.status.code(), Some(2), "{}", json(&o));
    assert!(json(&o)["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("TOPO_TUNE_NODES \"\""));
    assert!(!out.exists(), "nothing written");
    assert!(!state.exists(), "no rollout recorded");
    // `all,!x` says it: every other node.
    let o = tt(["init", "--output-dir", o_dir, "--nodes", "all,!rack-1"])
        .json()
        .config(example())
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    let o = tt(["init", "--output-dir", o_dir, "--list"])
        .json()
        .config(example())
        .env("TOPO_TUNE_NODES", "rack-2")
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    let listed: Vec<String> = json(&o)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed,
        ["p5en-02", "p5en-04", "p5en-06", "p5en-08", "ndv5-01", "ndv5-02"]
    );
    // Where the command works on this machine, the environment's selector is not a cluster.
    let o = tt([
        "diagnose",
        "--trace",
        &format!(
            "{}/tests/data/traces/sampled_rank-0.json.gz",
            env!("CARGO_MANIFEST_DIR")
        ),
    ])
    .json()
    .env("TOPO_TUNE_NODES", "rack-2")
    .run();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    let o = tt(["doctor"]).json().env("TOPO_TUNE_NODES", "rack-2").run();
    assert_ne!(o.status.code(), Some(2), "a local doctor: {}", json(&o));
}

/// One `init` is one run with one id, however many seconds its writes span, and `rollback
/// --run ID` says where it undid the run and where not (exit 4). Before: 640 paper nodes with
/// `--forks 2` got an id per wall-clock second, and `rollback --run` of one of them undid a
/// part of the run and exited 0.
#[test]
fn one_init_is_one_run_and_rollback_says_where_it_did_not_undo_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "nodes:\n  - host: \"gpu[001-640]\"\n    labels: {rack: r1}\n    simulate: aws-p5en\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let init = || json(&tt(["init", "--forks", "2"]).json().config(&cfg).out(&out).run());
    let first = init();
    let ids: std::collections::BTreeSet<&str> = first["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["run_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids.into_iter().next().unwrap().to_string();
    // gpu007's file edited by hand: the next init puts it back, a newer run there only.
    let edited = out.join("gpu007/etc/nccl/conf.d/50-topo-tune.conf");
    let mut text = std::fs::read_to_string(&edited).unwrap();
    text.push_str("# a hand edit\n");
    std::fs::write(&edited, text).unwrap();
    let second = init();
    assert_eq!(second["summary"]["changed"], 1, "{}", second["msg"]);
    let o = tt(["rollback", "--run", &id]).json().config(&cfg).out(&out).run();
    let doc = json(&o);
    assert_eq!(o.status.code(), Some(4), "{}", doc["msg"]);
    assert_eq!(doc["run"]["restored"].as_array().unwrap().len(), 639);
    assert_eq!(doc["run"]["left"], serde_json::json!(["gpu007"]));
    let msg = doc["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "run {id}: restored on 639 node(s); not undone on 1 that hold it under a newer run (gpu007)"
        )),
        "{msg}"
    );
    crate::common::assert_schema("rollback", &doc);
}

/// `irq-pin` over a cluster folds like `doctor`: an interrupt row the same on every node is one
/// row under their host range (`--per-node`: one per node), and 640 paper nodes the summary
/// counts as skipped are one line saying so. Before: one row per node and interrupt, and 640
/// "FAILED" lines beside a summary of 640 skipped.
#[test]
fn irq_pin_over_a_cluster_folds_and_its_rows_agree_with_its_summary() {
    let t = three();
    let _ = &t.cluster;
    let text = |extra: &[&str]| {
        let o = tt(["irq-pin", "--reserve-cpus", "0-3", "--dry-run"])
            .args(extra)
            .config(&t.cfg)
            .run();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let folded = text(&[]);
    let per_node = text(&["--per-node"]);
    let rows = |s: &str, host: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with(&format!("{host} ")))
            .count()
    };
    assert_eq!(t.cluster.names, ["node1", "node2", "node3"]);
    let each = rows(&per_node, "node1");
    assert!(each >= 60, "{per_node}");
    assert_eq!(rows(&per_node, "node3"), each);
    assert_eq!(
        rows(&folded, "node[1-3]"),
        each,
        "each interrupt once for the three nodes:\n{folded}"
    );
    assert_eq!(rows(&folded, "node2"), 0, "{folded}");

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: \"gpu[001-640]\"\n    simulate: aws-p5en\n").unwrap();
    let o = tt(["irq-pin", "--reserve-cpus", "0-3", "--dry-run"]).config(&cfg).run();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        out,
        "gpu[001-640]: skipped simulated: a simulated node has no interrupts to pin\nirq-pin: 640 node(s), 0 changed, 0 failed, 640 skipped, 0 interrupt(s) not moved\n"
    );
}
