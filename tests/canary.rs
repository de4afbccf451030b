//! `apply --canary` and `status` end to end: the real binary, local-transport nodes writing
//! under `--output-dir` (and real sshd nodes), and nccl-tests' place taken by a documented
//! double (`tests/data/nccl-tests/fake_all_reduce_perf`) whose figures depend on the NCCL
//! config file it is handed. The parsers are tested on the real H200 output too.

use crate::common::{machines, topo_tune, tt, Run};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use topo_tune::api::{parse_json, parse_text, BenchError};

pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nccl-tests")
        .join(name)
}

/// Four local nodes (two racks) described by one 8-GPU snapshot, and a benchmark template
/// that runs the double with `knobs` (its FAKE_NCCL_* variables).
pub(crate) struct Fleet {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) cfg: PathBuf,
    pub(crate) probes: PathBuf,
    pub(crate) out: PathBuf,
    pub(crate) state: PathBuf,
}

fn snapshot() -> &'static [u8] {
    static SNAP: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SNAP.get_or_init(|| {
        let tree = tempfile::tempdir().unwrap();
        machines::dgx_like(tree.path());
        let o = tt(["probe", "--fsroot"]).json().arg(tree.path()).run();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.0.stdout
    })
}

pub(crate) fn fleet(knobs: &str) -> Fleet {
    fleet_with(knobs, 60)
}

pub(crate) fn fleet_with(knobs: &str, timeout: u64) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    for h in ["gpu1", "gpu2", "gpu3", "gpu4"] {
        std::fs::write(probes.join(format!("{h}.json")), snapshot()).unwrap();
    }
    let counter = dir.path().join("counter");
    let log = dir.path().join("bench.log");
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nccl_version: \"2.28.9\"\n\
             benchmark:\n  command: \"FAKE_NCCL_STATE={counter} FAKE_NCCL_LOG={log} FAKE_NCCL_RANKS={{ranks}} {knobs} {double} -b 8 -e 256M -f 4 -g 1 -I 1 -J {{json}}\"\n  timeout: {timeout}\n\
             nodes:\n  - host: \"gpu[1-2]\"\n    transport: local\n    labels: {{rack: rack-1}}\n\
             \x20 - host: \"gpu[3-4]\"\n    transport: local\n    labels: {{rack: rack-2}}\n",
            counter = counter.display(),
            log = log.display(),
            double = data("fake_all_reduce_perf").display(),
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let state = dir.path().join("state");
    Fleet {
        dir,
        cfg,
        probes,
        out,
        state,
    }
}

impl Fleet {
    pub(crate) fn cmd(&self, sub: &str) -> assert_cmd::Command {
        let mut c = topo_tune();
        c.args(["--output", "json", sub, "--cluster-config"])
            .arg(&self.cfg)
            .arg("--output-dir")
            .arg(&self.out)
            .arg("--state-dir")
            .arg(&self.state);
        c
    }

    pub(crate) fn apply(&self, args: &[&str]) -> (Option<i32>, Value) {
        let o = self
            .cmd("apply")
            .arg("--from-probes")
            .arg(&self.probes)
            .args(args)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        assert!(
            doc != Value::Null,
            "apply printed no JSON: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), doc)
    }

    /// `apply --canary rack-1 EXTRA` started in the background (to be killed or signalled).
    pub(crate) fn spawn_apply(&self, extra: &[&str]) -> std::process::Child {
        std::process::Command::new(crate::common::run::binary_path())
            .args(["--output", "json", "apply", "--canary", "rack-1", "--cluster-config"])
            .arg(&self.cfg)
            .args(extra)
            .arg("--from-probes")
            .arg(&self.probes)
            .arg("--output-dir")
            .arg(&self.out)
            .arg("--state-dir")
            .arg(&self.state)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    pub(crate) fn status(&self) -> (Option<i32>, Value) {
        let o = self.cmd("status").output().unwrap();
        (
            o.status.code(),
            serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
        )
    }
}

/// Every file under `root` with its content and mtime.
pub(crate) fn files(root: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(
                    rel,
                    (std::fs::read(&p).unwrap(), e.metadata().unwrap().modified().unwrap()),
                );
            }
        }
    }
    out
}

/// What `init` writes for the same plan: the files a promoted node must hold.
fn init_files(f: &Fleet) -> PathBuf {
    let reference = f.dir.path().join("reference");
    let o = tt(["init"])
        .json()
        .config(&f.cfg)
        .arg("--from-probes")
        .arg(&f.probes)
        .out(&reference)
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    reference
}

const NCCL_FILES: [&str; 4] = [
    "etc/nccl.conf",
    "etc/nccl/conf.d/50-topo-tune.conf",
    "etc/nccl/topo-tune/nccl.env",
    "etc/nccl/topo-tune/topology.xml",
];

pub(crate) fn wave(doc: &Value, i: usize) -> &Value {
    &doc["rollout"]["waves"][i]
}

#[test]
fn a_faster_candidate_is_promoted_through_every_wave() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01");
    let (code, doc) = f.apply(&["--canary", "rack-1"]);
    assert_eq!(code, Some(0), "{doc:#}");
    crate::common::assert_schema("apply", &doc);
    assert_eq!(doc["rollout"]["status"], "completed");
    for (i, name) in [(0, "canary"), (1, "rack-2")] {
        assert_eq!(wave(&doc, i)["name"], name);
        assert_eq!(wave(&doc, i)["phase"], "promoted");
        assert_eq!(wave(&doc, i)["verdict"]["decision"], "gain");
        // docs/apply.md's worked example: +8.0% [+5.9% .. +10.2%].
        let large = &wave(&doc, i)["verdict"]["large"];
        for (k, want) in [("median", 0.080), ("low", 0.059), ("high", 0.102)] {
            let got = large[k].as_f64().unwrap();
            assert!((got - want).abs() < 0.001, "{k}: {got}");
        }
        assert_eq!(wave(&doc, i)["rounds"].as_array().unwrap().len(), 6);
    }
    // Each wave's benchmark ran with 2 nodes × 8 GPUs, and busbw (not algbw) was compared.
    assert_eq!(wave(&doc, 0)["rounds"][0]["baseline"]["figures"]["ranks"], 16);
    assert_eq!(wave(&doc, 0)["verdict"]["metric"], "busbw");
    let reference = init_files(&f);
    for h in ["gpu1", "gpu2", "gpu3", "gpu4"] {
        for file in NCCL_FILES {
            let got = std::fs::read(f.out.join(h).join(file)).ok();
            let want = std::fs::read(reference.join(h).join(file)).ok();
            assert_eq!(got, want, "{h}: {file} is what init writes");
        }
        assert!(
            !f.out.join(h).join("etc/nccl/topo-tune/candidate").exists(),
            "{h}: staged copy removed"
        );
    }
    let (code, st) = f.status();
    assert_eq!(code, Some(0), "{st:#}");
    crate::common::assert_schema("status", &st);
    for n in st["nodes"].as_array().unwrap() {
        assert_eq!(n["drift"], false);
        assert_eq!(n["rollout"]["phase"], "promoted");
        assert_eq!(n["rollout"]["decision"], "gain");
        assert!(n["state"]["last_run"]
            .as_str()
            .unwrap()
            .starts_with(doc["rollout"]["id"].as_str().unwrap()));
    }
    // An operator's edit shows as drift.
    std::fs::write(f.out.join("gpu3/etc/nccl.conf"), "NCCL_DEBUG=INFO\n").unwrap();
    let (code, st) = f.status();
    assert_eq!(code, Some(6), "{st:#}");
    let gpu3 = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == "gpu3")
        .unwrap();
    assert_eq!(gpu3["drift"], true);
    assert!(gpu3["state"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["live"] == "modified"));
}

#[test]
fn a_deliberate_rollback_after_a_promotion_is_not_drift() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01");
    let (code, doc) = f.apply(&["--canary", "rack-1"]);
    assert_eq!(code, Some(0), "{doc:#}");
    // A deliberate `rollback` of rack-1 is the operator's recorded decision, not drift: status
    // says so and exits 0 for those nodes.
    let o = topo_tune()
        .args(["--output", "json", "rollback", "--nodes", "rack-1", "--cluster-config"])
        .arg(&f.cfg)
        .arg("--output-dir")
        .arg(&f.out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let (code, st) = f.status();
    assert_eq!(code, Some(0), "{st:#}");
    crate::common::assert_schema("status", &st);
    let gpu1 = &st["nodes"][0];
    assert_eq!(gpu1["host"], "gpu1");
    assert!(
        gpu1["rollout"]["rolled_back"]
            .as_str()
            .unwrap()
            .contains("topo-tune rollback"),
        "{gpu1:#}"
    );
    assert!(gpu1["rollout"].get("on_node").is_none());
    // The same files taken away by hand, unrecorded, are drift.
    let manifest = f.out.join("gpu3/etc/nccl/topo-tune/manifest.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    m["runs"] = Value::Array(Vec::new());
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let (code, st) = f.status();
    assert_eq!(code, Some(6), "{st:#}");
    let gpu3 = st["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == "gpu3")
        .unwrap();
    assert!(
        gpu3["rollout"]["on_node"]
            .as_str()
            .unwrap()
            .contains("undone here since"),
        "{gpu3:#}"
    );
}

#[test]
fn a_slower_candidate_is_halted_on_the_canary_and_rolled_back_there() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=0.95 FAKE_NCCL_NOISE=0.01");
    // Every node already has an operator's nccl.conf.
    for h in ["gpu1", "gpu2", "gpu3", "gpu4"] {
        std::fs::create_dir_all(f.out.join(h).join("etc")).unwrap();
        std::fs::write(f.out.join(h).join("etc/nccl.conf"), "NCCL_DEBUG=WARN\n").unwrap();
    }
    let before: Vec<_> = ["gpu1", "gpu2", "gpu3", "gpu4"]
        .iter()
        .map(|h| files(&f.out.join(h)))
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let (code, doc) = f.apply(&["--canary", "gpu[1-2]"]);
    assert_eq!(code, Some(7), "{doc:#}");
    assert_eq!(doc["rollout"]["status"], "halted");
    assert_eq!(wave(&doc, 0)["phase"], "rolled_back");
    assert_eq!(wave(&doc, 0)["verdict"]["decision"], "regression");
    assert_eq!(wave(&doc, 1)["phase"], "pending", "the next wave never started");
    for (i, h) in ["gpu1", "gpu2", "gpu3", "gpu4"].iter().enumerate() {
        let mut after = files(&f.out.join(h));
        // The canary keeps only topo-tune's (empty) lock file: every other byte as before.
        if i < 2 {
            let lock = after.remove("etc/nccl/topo-tune/lock");
            assert_eq!(lock.map(|l| l.0.is_empty() || l.0.starts_with(b"pid ")), Some(true));
            let contents = |m: &BTreeMap<String, (Vec<u8>, SystemTime)>| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.0.clone()))
                    .collect::<BTreeMap<_, _>>()
            };
            assert_eq!(contents(&after), contents(&before[i]), "{h}: byte-identical");
        } else {
            assert_eq!(after, before[i], "{h}: not touched (contents and mtimes)");
        }
    }
    let (code, st) = f.status();
    assert_eq!(code, Some(0), "nothing staged, nothing drifted: {st:#}");
    let gpu1 = &st["nodes"][0];
    assert_eq!(gpu1["rollout"]["phase"], "rolled_back");
    assert_eq!(gpu1["rollout"]["decision"], "regression");
}

#[test]
fn one_percent_inside_noise_is_no_significant_change() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.01 FAKE_NCCL_NOISE=0.01");
    let (code, doc) = f.apply(&["--canary", "rack-1", "--canary-only", "--require-gain"]);
    assert_eq!(code, Some(7), "{doc:#}");
    assert_eq!(wave(&doc, 0)["verdict"]["decision"], "no_gain");
    assert!(wave(&doc, 0)["verdict"]["reason"]
        .as_str()
        .unwrap()
        .contains("no significant change"));
    assert!(!f.out.join("gpu1/etc/nccl.conf").exists(), "not promoted");
    let (code, doc) = f.apply(&["--canary", "rack-1", "--canary-only"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(wave(&doc, 0)["verdict"]["decision"], "no_significant_change");
    assert_eq!(doc["rollout"]["waves"].as_array().unwrap().len(), 1, "--canary-only");
    assert!(f.out.join("gpu1/etc/nccl.conf").exists(), "promoted: not a loss");
    assert!(!f.out.join("gpu3/etc").exists(), "the rest untouched");
}

#[test]
fn a_benchmark_that_fails_halts_and_rolls_back() {
    for (mode, says) in [
        ("crash", "exited with 3"),
        ("hang", "timed out after 2 s"),
        ("wrong", "wrong values"),
        ("warn", "NCCL WARN"),
        ("oob", "out-of-bounds"),
    ] {
        let f = fleet_with(&format!("FAKE_NCCL_FAIL=NCCL_IB_HCA:{mode}"), 2);
        let (code, doc) = f.apply(&["--canary", "rack-1"]);
        assert_eq!(code, Some(7), "{mode}: {doc:#}");
        let outcome = wave(&doc, 0)["outcome"].as_str().unwrap();
        assert!(
            outcome.contains("candidate benchmark failed") && outcome.contains(says),
            "{mode}: {outcome}"
        );
        assert_eq!(wave(&doc, 0)["phase"], "rolled_back");
        for h in ["gpu1", "gpu2"] {
            let etc = f.out.join(h).join("etc");
            assert!(
                !etc.join("nccl.conf").exists() && !etc.join("nccl/topo-tune/candidate").exists(),
                "{mode}: {h}"
            );
        }
        assert!(!f.out.join("gpu3").exists(), "{mode}: the next rack untouched");
    }
}

#[test]
fn killed_mid_wave_then_resumed_completes() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01 FAKE_NCCL_SLEEP=0.3");
    let mut child = f.spawn_apply(&[]);
    // Wait until the canary is staged and two rounds are measured, then kill -9.
    let rollouts = f.state.join("rollouts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let id = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the rollout never reached round 3"
        );
        let rec = std::fs::read_dir(&rollouts)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok());
        if let Some(rec) = rec {
            let doc: Value = serde_json::from_slice(&std::fs::read(rec.path()).unwrap()).unwrap_or(Value::Null);
            if doc["waves"][0]["rounds"].as_array().is_some_and(|r| r.len() >= 2) {
                break doc["id"].as_str().unwrap().to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // The record knows every staged node; status says so (exit 6).
    let record: Value = serde_json::from_slice(&std::fs::read(rollouts.join(format!("{id}.json"))).unwrap()).unwrap();
    assert_eq!(record["waves"][0]["phase"], "measuring");
    for h in ["gpu1", "gpu2", "gpu3", "gpu4"] {
        let staged = f.out.join(h).join("etc/nccl/topo-tune/candidate").exists();
        assert_eq!(staged, record["waves"][0]["staged"].get(h).is_some(), "{h}");
    }
    let (code, st) = f.status();
    assert_eq!(code, Some(6), "{st:#}");
    assert_eq!(st["nodes"][0]["state"]["staged"]["rollout"], id.as_str());
    // Resume: completes, measuring only the rounds that were missing.
    let o = f.cmd("apply").args(["--resume", &id]).output().unwrap();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["rollout"]["status"], "completed");
    assert_eq!(wave(&doc, 0)["rounds"].as_array().unwrap().len(), 6);
    for h in ["gpu1", "gpu2", "gpu3", "gpu4"] {
        assert!(
            !f.out.join(h).join("etc/nccl/topo-tune/candidate").exists(),
            "{h}: nothing left staged"
        );
        assert!(f.out.join(h).join("etc/nccl.conf").exists(), "{h}: promoted");
    }
    // Finished: a second resume changes nothing; a second rollout while one runs is refused
    // (the lock is taken by the rollout itself, so only a live one can hold it: checked in
    // `a_second_rollout_is_refused_while_one_runs`).
    let o = f.cmd("apply").args(["--resume", &id]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn sigterm_during_a_benchmark_ends_it_and_leaves_a_resumable_record() {
    let f = fleet("FAKE_NCCL_SLEEP=60");
    let mut child = f.spawn_apply(&[]);
    let log = f.dir.path().join("bench.log");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.ends_with('\n')) {
        assert!(std::time::Instant::now() < deadline, "no benchmark started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = std::time::Instant::now();
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 60 s benchmark was not waited for"
    );
    // The benchmark itself is gone (gone or a zombie: nothing running).
    let bench_pid = std::fs::read_to_string(&log)
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let state = std::fs::read_to_string(format!("/proc/{bench_pid}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z"),
        "benchmark still running: {state}"
    );
    let rec = std::fs::read_dir(f.state.join("rollouts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc: Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    assert_eq!(doc["waves"][0]["phase"], "measuring", "resumable where it stopped");
}

#[test]
fn a_second_rollout_is_refused_while_one_runs() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_SLEEP=1");
    let mut first = f.spawn_apply(&["--canary-only"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(f.state.join("rollouts")).map_or(true, |mut d| d.next().is_none()) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = f
        .cmd("apply")
        .arg("--from-probes")
        .arg(&f.probes)
        .args(["--all"])
        .output()
        .unwrap();
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(o.status.code(), Some(75), "{}", String::from_utf8_lossy(&o.stdout));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("another topo-tune run holds the lock"));
}

#[test]
fn usage_errors_name_what_is_wrong() {
    let f = fleet("");
    let o = f.cmd("apply").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "one of --canary, --all, --resume is required");
    let o = f
        .cmd("apply")
        .arg("--from-probes")
        .arg(&f.probes)
        .args(["--canary", "rack-9"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("racks: rack-1, rack-2"));
    let o = f
        .cmd("apply")
        .args(["--resume", "20261130T000000Z-1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(66), "{}", String::from_utf8_lossy(&o.stdout));
    let bad = std::fs::read_to_string(&f.cfg)
        .unwrap()
        .replace("-J {json}", "-J {jsn}");
    std::fs::write(&f.cfg, bad).unwrap();
    let o = f.cmd("apply").args(["--all"]).output().unwrap();
    assert_eq!(o.status.code(), Some(65));
    let msg = String::from_utf8_lossy(&o.stdout);
    assert!(
        msg.contains("cluster.yaml:3:") && msg.contains("unknown placeholder `{jsn}`"),
        "{msg}"
    );
}

#[test]
fn the_canary_runs_over_real_ssh_with_the_benchmark_on_the_first_node() {
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    for n in ["a", "b"] {
        machines::dgx_like(&trees.path().join(n));
    }
    let cluster = SshCluster::start(&[
        Node::Fsroot(trees.path().join("a")),
        Node::Fsroot(trees.path().join("b")),
    ]);
    let counter = trees.path().join("counter");
    let cfg = cluster.cluster_yaml(&format!(
        "nccl_version: \"2.28.9\"\nbenchmark:\n  runs_on: first-node\n  timeout: 60\n  command: \"NCCL_CONF_FILE={{nccl_conf}} FAKE_NCCL_STATE={} FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_RANKS={{ranks}} {} -b 8 -e 256M -f 4 -g 1 -I 1 -J {{json}}\"\n",
        counter.display(),
        data("fake_all_reduce_perf").display()
    ));
    let state = trees.path().join("state");
    let o = tt(["apply", "--canary", "node1"])
        .json()
        .config(&cfg)
        .arg("--state-dir")
        .arg(&state)
        .run();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{doc:#}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(wave(&doc, 0)["hosts"], serde_json::json!(["node1"]));
    assert_eq!(wave(&doc, 1)["hosts"], serde_json::json!(["node2"]));
    // The first node read its own staged file (under its write root) for the candidate.
    let cmd = wave(&doc, 0)["rounds"][0]["candidate"]["command"].as_str().unwrap();
    assert!(
        cmd.contains(&format!(
            "{}/written/etc/nccl/topo-tune/candidate/nccl.conf",
            trees.path().join("a").display()
        )),
        "{cmd}"
    );
    for n in ["a", "b"] {
        let conf = std::fs::read_to_string(trees.path().join(n).join("written/etc/nccl.conf")).unwrap();
        assert!(conf.contains("NCCL_IB_HCA==mlx5_0,"), "{conf}");
        assert!(!trees
            .path()
            .join(n)
            .join("written/etc/nccl/topo-tune/candidate")
            .exists());
    }
    let o = tt(["status"]).json().config(&cfg).arg("--state-dir").arg(&state).run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn the_parsers_read_the_real_h200_output() {
    let text = std::fs::read_to_string(data("all_reduce_perf-b8-e256M-f4-g1.txt")).unwrap();
    let run = parse_text(&text).unwrap();
    assert_eq!(run.nccl_tests_version.as_deref(), Some("2.19.6"));
    assert_eq!(run.ranks, 1);
    assert_eq!(run.rows.len(), 13);
    let last = run.rows.last().unwrap();
    assert_eq!(
        (last.size, last.time_us, last.algbw, last.busbw),
        (134217728, 66.58, 2015.9, 0.0)
    );
    assert_eq!(last.p99_us, None);
    let text = std::fs::read_to_string(data("all_reduce_perf-b8-e1M-f4-g1-n200-I1.txt")).unwrap();
    let run = parse_text(&text).unwrap();
    assert_eq!(run.rows[0].p99_us, Some(20.74), "out-of-place i_p99");
    assert_eq!(run.rows.len(), 9);
    let json = std::fs::read_to_string(data("mpirun-np1-all_reduce_perf-b8-e64K-f8-n100-I1.json")).unwrap();
    let run = parse_json(&json).unwrap();
    assert_eq!(run.ranks, 1);
    assert_eq!(run.rows[0].p99_us, Some(17.216001));
    assert_eq!(run.rows[0].time_us, 8.85578);
    // The text and the JSON of one run agree.
    let text = parse_text(&std::fs::read_to_string(data("mpirun-np1-all_reduce_perf-b8-e64K-f8-n100-I1.txt")).unwrap())
        .unwrap();
    for (t, j) in text.rows.iter().zip(&run.rows) {
        assert_eq!(t.size, j.size);
        assert!((t.time_us - j.time_us).abs() < 0.01 && (t.p99_us.unwrap() - j.p99_us.unwrap()).abs() < 0.01);
    }
    let json = std::fs::read_to_string(data("all_reduce_perf-b8-e64M-f4-g1.json")).unwrap();
    assert_eq!(parse_json(&json).unwrap().rows.len(), 12, "8 B to 32 MiB by 4");
}

/// The pre-2.13 table: an `error` column (max deviation, e.g. `5e-07` for float sums, not a
/// failure: the verdict is the out-of-bounds line) and rank lines without `Group`. Shape
/// as in NVIDIA/nccl-tests issues #107 and #118 (16 A100s, 2022); figures made up.
#[test]
fn the_parser_reads_the_old_error_column() {
    let old =
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n\
#\n# Using devices\n#   Rank  0 Pid  26528 on  dgx-work01 device  0 [0x07] NVIDIA A100-SXM4-40GB\n\
#   Rank  1 Pid  27302 on  dgx-work02 device  0 [0x07] NVIDIA A100-SXM4-40GB\n#\n\
#                                                       out-of-place                       in-place\n\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n\
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
           8             2     float     sum    42.47    0.00    0.00  1e-07    41.93    0.00    0.00  1e-07\n\
   134217728      33554432     float     sum   1655.2   81.09   81.09  5e-07   1650.1   81.34   81.34  5e-07\n\
# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 40.5\n";
    let run = parse_text(old).unwrap();
    assert_eq!(run.ranks, 2);
    assert_eq!(run.rows[1].busbw, 81.09);
    let failed = old.replace("values : 0 OK", "values : 248 FAILED");
    assert!(matches!(
        parse_text(&failed),
        Err(BenchError::OutOfBounds { count: 248, .. })
    ));
}

/// examples/canary-demo.yaml runs as the README says, from the repository root.
#[test]
fn the_canary_demo_runs_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let o = Run::new()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "--output",
            "json",
            "apply",
            "--cluster-config",
            "examples/canary-demo.yaml",
            "--canary",
            "rack-1",
        ])
        .out(dir.path().join("out"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .run();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{doc:#}");
    let conf = std::fs::read_to_string(dir.path().join("out/p5en-05/etc/nccl.conf")).unwrap();
    assert!(conf.contains("NCCL_CROSS_NIC="), "the fleet got the candidate: {conf}");
}

#[test]
fn a_benchmark_that_cannot_start_is_refused_before_anything_is_staged() {
    let f = fleet("");
    // cluster.yaml without `benchmark:`: the default command, mpirun, is not on this PATH.
    let text = std::fs::read_to_string(&f.cfg).unwrap();
    let start = text.find("benchmark:").unwrap();
    let end = text.find("nodes:").unwrap();
    std::fs::write(&f.cfg, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let o = f
        .cmd("apply")
        .arg("--from-probes")
        .arg(&f.probes)
        .args(["--canary", "rack-1"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(topo_tune::exit::UNAVAILABLE.code()), "{doc:#}");
    let msg = doc["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("`mpirun`") && msg.contains("has no benchmark.command") && msg.contains("nothing was staged"),
        "{msg}"
    );
    assert!(!f.out.exists(), "no node was touched");
    assert!(
        !f.state.join("rollouts").exists() || std::fs::read_dir(f.state.join("rollouts")).unwrap().next().is_none()
    );
}
