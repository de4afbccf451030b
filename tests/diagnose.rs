//! `topo-tune diagnose` with the nccl-tests double: the sweep read for its fit, cliff and
//! crossover, and held against the planner's prediction for the swept nodes.

use crate::common::tt;
use serde_json::Value;
use std::path::Path;

/// examples/canary-demo.yaml's paper nodes with the double's knobs in front of its command.
pub(crate) fn cluster(dir: &Path, knobs: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let demo = std::fs::read_to_string(root.join("examples/canary-demo.yaml")).unwrap();
    let double = root.join("tests/data/nccl-tests/fake_all_reduce_perf");
    let text = demo
        .replace(
            "python3 tests/data/nccl-tests/fake_all_reduce_perf",
            &format!("{knobs} python3 {}", double.display()),
        )
        .replace("-b 8 -e 256M -f 4", "-b 8 -e 1G -f 2");
    let cfg = dir.join("cluster.yaml");
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn diagnose(cfg: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let o = tt(["diagnose"]).json().config(cfg).out(out).args(extra).run();
    let doc = crate::common::json(&o);
    if o.status.success() {
        crate::common::assert_schema("diagnose", &doc);
    }
    (o.status.code(), doc)
}

#[test]
fn a_healthy_sweep_is_fitted_and_held_against_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), "");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--nodes", "rack-1"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 4, "only rack-1");
    assert_eq!(doc["ranks"], 32);
    assert_eq!(doc["expected_ranks"], 32);
    assert_eq!(doc["sizes"].as_array().unwrap().len(), 28, "8 B .. 1 GiB");
    let fit = &doc["findings"]["fit"];
    assert!(
        (fit["alpha_us"].as_f64().unwrap() - 9.0).abs() < 0.01,
        "the double's 9 µs: {fit}"
    );
    assert!(
        (fit["algbw_gbps"].as_f64().unwrap() - 400.0).abs() < 0.5,
        "and 400 GB/s: {fit}"
    );
    assert!(doc["findings"]["cliff"].is_null(), "{doc:#}");
    assert_eq!(doc["below_ceiling"], false);
    assert!(doc["predicted"]["busbw_gbps"].as_f64().unwrap() > 0.0);
    // The demo's paper p5en nodes report no EFA rate: the ceiling rests on NCCL's default.
    let assumed = doc["predicted"]["assumed"].as_str().unwrap();
    assert!(assumed.starts_with("assumed: 16 NIC(s) report no rate"), "{doc:#}");
    assert!(doc["msg"].as_str().unwrap().contains(assumed), "{}", doc["msg"]);

    // Stated, the ceiling is the stated rate and says so.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("simulate: aws-p5en", "simulate: aws-p5en\n    nic_gbps: 200");
    std::fs::write(&cfg, text).unwrap();
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--nodes", "rack-1"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let basis = doc["predicted"]["assumed"].as_str().unwrap_or("");
    assert!(!basis.starts_with("assumed"), "{doc:#}");
}

#[test]
fn a_slow_fabric_and_a_cliff_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), "FAKE_NCCL_SCALE=0.1 FAKE_NCCL_CLIFF=64K:5");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    let cliff = &doc["findings"]["cliff"];
    assert_eq!(
        (cliff["from_size"].as_u64(), cliff["to_size"].as_u64()),
        (Some(32 << 10), Some(64 << 10)),
        "{doc:#}"
    );
    assert_eq!(doc["findings"]["flat_until"], 32 << 10);
    assert_eq!(doc["below_ceiling"], true, "{doc:#}");
    assert!(doc["msg"].as_str().unwrap().contains("below 80% of the ceiling"));
    // The human table says the same.
    let o = tt(["diagnose"]).config(&cfg).out(dir.path().join("out")).run();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("cliff: busbw falls") && text.contains("from 32 KiB"),
        "{text}"
    );
    assert!(text.contains("alpha-beta fit: latency"), "{text}");
}

#[test]
fn a_failed_benchmark_is_an_error_not_a_figure() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), "FAKE_NCCL_FAIL=NCCL_CROSS_NIC:wrong");
    // The failure mode needs the config to set the name: write the files first.
    let o = tt(["init"]).config(&cfg).out(dir.path().join("out")).run();
    assert!(o.status.success());
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--nodes", "rack-1"]);
    assert_eq!(code, Some(topo_tune::exit::UNAVAILABLE.code()), "{doc:#}");
    assert!(doc["msg"].as_str().unwrap().contains("wrong"), "{doc:#}");
}

#[test]
fn a_command_that_ignores_its_hosts_is_not_held_against_the_set() {
    // The command runs one rank whatever hosts it is given (no mpirun): its figures describe
    // one GPU, not rack-1's 32.
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), "FAKE_NCCL_RANKS=1 FAKE_NCCL_SCALE=0.1");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--nodes", "rack-1", "--localise"]);
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()), "{doc:#}");
    assert_eq!(
        (doc["ranks"].as_u64(), doc["expected_ranks"].as_u64()),
        (Some(1), Some(32))
    );
    assert_eq!(doc["below_ceiling"], false, "not compared: {doc:#}");
    assert!(doc["localisation"].is_null(), "nor localised: {doc:#}");
    let msg = doc["msg"].as_str().unwrap();
    assert!(msg.contains("ran 1 rank(s) where the 4 node(s) have 32"), "{msg}");
    assert!(msg.contains("mpirun -np {ranks} -H {hosts_slots}"), "{msg}");
    assert_eq!(
        doc["sizes"].as_array().unwrap().len(),
        28,
        "the figures are still shown"
    );
}

#[test]
fn one_node_has_nothing_to_compare_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = cluster(dir.path(), "");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--nodes", "p5en-01", "--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = &doc["localisation"];
    assert_eq!(
        l["skipped"].as_array().unwrap().len(),
        4,
        "each step says why not: {l:#}"
    );
    assert!(l["rounds"].as_array().unwrap().is_empty());
    let msg = doc["msg"].as_str().unwrap();
    assert!(msg.contains("nothing to compare"), "not \"no outlier\": {msg}");
    assert!(!msg.contains("no outlier"), "{msg}");
}

/// Sixteen paper nodes in four racks; the double told which node or rail is slow.
fn sixteen(dir: &Path, knobs: &str) -> std::path::PathBuf {
    let double = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nccl-tests/fake_all_reduce_perf");
    let cfg = dir.join("sixteen.yaml");
    let mut y = format!(
        "nccl_version: \"2.28.9\"\nbenchmark:\n  command: \"FAKE_NCCL_STATE={} FAKE_NCCL_HOSTS={{hosts}} FAKE_NCCL_RAIL={{rail}} FAKE_NCCL_RANKS={{ranks}} {knobs} python3 {} -b 8 -e 64M -f 4 -g 1 -I 1 -J {{json}}\"\n  timeout: 60\nnodes:\n",
        dir.join("counter").display(),
        double.display()
    );
    for rack in 0..4 {
        y.push_str(&format!(
            "  - host: \"gpu-[{:02}-{:02}]\"\n    labels: {{rack: r{rack}}}\n    simulate: aws-p5en\n",
            rack * 4 + 1,
            rack * 4 + 4
        ));
    }
    std::fs::write(&cfg, y).unwrap();
    cfg
}

fn localised(doc: &Value) -> &Value {
    &doc["localisation"]
}

/// The verdict rows as (kind, suspect).
fn verdicts(doc: &Value) -> Vec<(String, String)> {
    localised(doc)["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["suspect"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The ring order the planner gives the sixteen nodes (the order diagnose runs them in).
fn ring_order(cfg: &Path) -> Vec<String> {
    let o = tt(["plan"]).json().config(cfg).run();
    crate::common::json(&o)["node_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn one_slow_node_of_sixteen_is_named_within_log2_rounds_and_doctored() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLOW_NODE=gpu-11=0.1");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(doc["below_ceiling"], true, "the set is slow: {doc:#}");
    let l = localised(&doc);
    assert_eq!(l["suspect"]["name"], "gpu-11", "{l:#}");
    assert_eq!(verdicts(&doc), [("node".to_string(), "gpu-11".to_string())]);
    // Named within ⌈log2 16⌉ + 1 rounds, the sweep being round 1 and each node alone round 2.
    let round = l["verdicts"][0]["round"].as_u64().unwrap();
    assert!(round <= 5, "named in round {round}: {l:#}");
    // Alone, its GPUs are as fast as any node's: its network is what is slow.
    assert!(l["interiors"]["slow"].is_null(), "{l:#}");
    assert_eq!(l["interiors"]["figures"]["groups"].as_array().unwrap().len(), 16);
    assert!(l["verdicts"][0]["evidence"].as_str().unwrap().contains("runs with it"));
    // Paper nodes: doctor cannot look, and says so.
    assert!(l["verdicts"][0]["cause"]
        .as_str()
        .unwrap()
        .contains("doctor could not check gpu-11"));
    assert!(doc["msg"].as_str().unwrap().contains("the slow node: gpu-11"));
}

#[test]
fn a_slow_inside_is_told_from_a_slow_network() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLOW_INSIDE=gpu-09=0.3");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = localised(&doc);
    assert_eq!(l["interiors"]["slow"]["name"], "gpu-09", "{l:#}");
    // One row: its inside, with the bisection's figure as more evidence.
    assert_eq!(verdicts(&doc), [("node_inside".to_string(), "gpu-09".to_string())]);
    let v = &l["verdicts"][0];
    assert_eq!(v["round"], 2, "each node alone is the round after the sweep");
    assert!(
        v["evidence"].as_str().unwrap().contains("alone with its 8 GPUs"),
        "{v:#}"
    );
    assert!(v["fix"].as_str().unwrap().contains("nvlink"), "{v:#}");
}

#[test]
fn one_slow_nic_is_named_with_its_node_and_rail() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLOW_NIC=gpu-06:3=0.3");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = localised(&doc);
    assert_eq!(l["suspect"]["name"], "gpu-06", "the bisection names the node: {l:#}");
    assert_eq!(l["rails"]["slow"], 3, "{l:#}");
    assert_eq!(l["rails"]["nic"]["suspect"]["name"], "gpu-06", "{l:#}");
    // The node the bisection named is checked on rail 3 in one round, not searched for again:
    // sweep, each node alone, three bisection rounds, the rails, the check = round 7.
    assert_eq!(l["rails"]["nic"]["rounds"].as_array().unwrap().len(), 1, "{l:#}");
    assert_eq!(l["verdicts"][0]["round"], 7, "{l:#}");
    assert_eq!(
        verdicts(&doc),
        [("nic".to_string(), "gpu-06, NIC of rail 3".to_string())],
        "one row for the node and its NIC"
    );
    assert!(doc["msg"]
        .as_str()
        .unwrap()
        .contains("the slow NIC: gpu-06, NIC of rail 3"));
}

#[test]
fn one_slow_rail_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLOW_RAIL=5=0.4");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = localised(&doc);
    assert!(l["suspect"].is_null(), "no node is slower than another: {l:#}");
    assert_eq!(l["rails"]["slow"], 5, "{l:#}");
    assert!(
        l["rails"]["nic"]["suspect"].is_null(),
        "every node is slow on rail 5: {l:#}"
    );
    assert_eq!(verdicts(&doc), [("rail".to_string(), "rail 5".to_string())]);
}

#[test]
fn one_slow_link_between_ring_neighbours_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let order = ring_order(&sixteen(dir.path(), ""));
    let (a, b) = (&order[5], &order[6]);
    let cfg = sixteen(dir.path(), &format!("FAKE_NCCL_SLOW_LINK={a}+{b}=0.3"));
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = localised(&doc);
    // Pairs split them: the bisection names no node, the ring-neighbour runs the link.
    assert!(l["suspect"].is_null(), "{l:#}");
    let edges = &l["edges"];
    assert_eq!(edges["edges"].as_array().unwrap().len(), 16);
    assert_eq!(edges["low"], serde_json::json!([5]), "{edges:#}");
    assert_eq!(edges["blame"]["kind"], "link");
    assert_eq!(verdicts(&doc), [("link".to_string(), format!("{a}–{b}"))]);
    assert!(l["verdicts"][0]["evidence"]
        .as_str()
        .unwrap()
        .starts_with(&format!("sendrecv {a}–{b}")));
}

#[test]
fn no_slow_element_no_accusation_under_noise() {
    for rep in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let cfg = sixteen(dir.path(), &format!("FAKE_NCCL_NOISE=0.03 FAKE_NCCL_SEED={rep}"));
        let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--localise"]);
        assert_eq!(code, Some(0), "{doc:#}");
        let l = localised(&doc);
        assert!(verdicts(&doc).is_empty(), "repetition {rep}: {l:#}");
        assert!(l["suspect"].is_null() && l["rails"]["slow"].is_null());
        assert!(doc["msg"].as_str().unwrap().contains("no outlier"));
    }
}

#[test]
fn the_budget_bounds_every_run_together() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLOW_NODE=gpu-11=0.1 FAKE_NCCL_SLEEP=1");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--budget", "4"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let budget = &localised(&doc)["budget"];
    assert_eq!(budget["limit_s"], 4);
    // Localising sixteen nodes takes more than four rounds of a second each.
    assert!(budget["stopped_at"].is_string(), "{budget:#}");
    let spent = budget["spent_s"].as_f64().unwrap();
    assert!(spent < 4.0 + 2.0, "spent {spent} s of a 4 s budget");
    // A round cut short accuses no one.
    assert!(verdicts(&doc).iter().all(|(_, s)| s == "gpu-11"), "{doc:#}");
    assert!(doc["msg"].as_str().unwrap().contains("--budget 4 s spent"), "{doc:#}");
    // A sweep that cannot finish within the budget is an error, not a figure.
    let cfg = sixteen(dir.path(), "FAKE_NCCL_SLEEP=3");
    let (code, doc) = diagnose(&cfg, &dir.path().join("out"), &["--budget", "1"]);
    assert_eq!(code, Some(topo_tune::exit::UNAVAILABLE.code()), "{doc:#}");
    assert!(doc["msg"].as_str().unwrap().contains("--budget 1 s"), "{doc:#}");
}

/// The explain step on real (loopback ssh) nodes: the slow node is named and `doctor` on it
/// gives the likely cause and the fix. Every node has its mlx5 interrupts on CPU 0; only the
/// slow one also lost nvidia_peermem, and GPUDirect RDMA off is what its verdict names.
#[test]
fn the_suspect_is_doctored_over_ssh() {
    use crate::common::machines;
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (0..4)
        .map(|i| {
            let t = trees.path().join(format!("n{i}"));
            machines::hgx_node(&t);
            // The cluster names its nodes node1..node4: node3 is the slow one.
            if i == 2 {
                std::fs::remove_file(t.join("sys/module/nvidia_peermem/version")).unwrap();
            }
            Node::Fsroot(t)
        })
        .collect();
    let cluster = SshCluster::start(&nodes);
    let double = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nccl-tests/fake_all_reduce_perf");
    let cfg = cluster.cluster_yaml(&format!(
        "benchmark:\n  command: \"FAKE_NCCL_STATE={} FAKE_NCCL_HOSTS={{hosts}} FAKE_NCCL_RANKS={{ranks}} FAKE_NCCL_SLOW_NODE=node3=0.2 python3 {} -b 8 -e 16M -f 4 -g 1 -J {{json}}\"\n  timeout: 60\n",
        trees.path().join("counter").display(),
        double.display()
    ));
    // (cluster_yaml puts the extra text under `ssh:`; move the benchmark to the top level.)
    let text = std::fs::read_to_string(&cfg).unwrap();
    let (ssh, rest) = text.split_once("benchmark:").unwrap();
    let (bench, nodes) = rest.split_once("nodes:").unwrap();
    std::fs::write(&cfg, format!("benchmark:{bench}{ssh}nodes:{nodes}")).unwrap();
    // The benchmark runs on the controller; doctor reaches the suspect over ssh.
    let (code, doc) = diagnose(&cfg, &trees.path().join("out"), &["--localise"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let l = &doc["localisation"];
    assert_eq!(l["suspect"]["name"], "node3", "{l:#}");
    let verdict = &l["verdicts"][0];
    assert!(
        verdict["cause"]
            .as_str()
            .unwrap()
            .starts_with("GPUDirect RDMA off on node3 (gdr): GPUDirect RDMA off for 8 RDMA NIC(s)"),
        "{verdict:#}"
    );
    assert!(
        verdict["fix"].as_str().unwrap().contains("modprobe nvidia_peermem"),
        "{verdict:#}"
    );
    let found: Vec<&str> = l["doctor"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert!(
        found.contains(&"mlx5-irq-placement") && found.contains(&"gdr"),
        "{found:?}"
    );
    assert_eq!(l["doctor"][0]["host"], "node3");
    assert!(!l["doctor"][0]["checks"].as_array().unwrap().is_empty());
    assert!(
        l["skipped"].as_array().unwrap().iter().any(|s| s
            .as_str()
            .unwrap()
            .starts_with("per-rail runs: benchmark.command has no {rail} placeholder")),
        "each step not run says why: {l:#}"
    );
}
