//! `topo-tune tune` against the nccl-tests double, whose cost model answers `NCCL_ALGO`,
//! `NCCL_PROTO`, channel counts and variables per message size (`FAKE_NCCL_TUNE`): a cluster
//! where NCCL's own choice is beaten at some sizes (a rule for those sizes only), one where
//! nothing beats it (no rule), a noisy one (no rule), one where a candidate computes wrong
//! values (disqualified, named), and a budget that leaves candidates untried.

use crate::canary::data;
use crate::common::{assert_schema, tt};
use serde_json::Value;
use std::path::{Path, PathBuf};

struct Cluster {
    dir: tempfile::TempDir,
    cfg: PathBuf,
}

/// Four paper nodes in two racks (p5en profiles: 8 GPUs, EFA), the double as the benchmark.
fn cluster(knobs: &str) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    let state = dir.path().join("counter");
    std::fs::write(
        &cfg,
        format!(
            "nccl_version: \"2.30.7\"\n\
             benchmark:\n  command: \"FAKE_NCCL_STATE={state} FAKE_NCCL_RANKS={{ranks}} {knobs} python3 {double} -b 8 -e 256M -f 4 -g 1 -I 1 -J {{json}}\"\n  timeout: 60\n\
             nodes:\n  - host: \"p5en-[01-02]\"\n    labels: {{rack: rack-1}}\n    simulate: aws-p5en\n\
             \x20 - host: \"p5en-[03-04]\"\n    labels: {{rack: rack-2}}\n    simulate: aws-p5en\n",
            state = state.display(),
            double = data("fake_all_reduce_perf").display(),
        ),
    )
    .unwrap();
    Cluster { dir, cfg }
}

impl Cluster {
    fn tune(&self, extra: &[&str]) -> (Option<i32>, Value) {
        let out = self.dir.path().join("out");
        let o = tt(["tune", "--canary", "rack-1"])
            .json()
            .config(&self.cfg)
            .out(&out)
            .args(extra)
            .run();
        let doc = o.doc();
        (o.code(), doc)
    }

    fn csv(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("out/nccl-tuner.csv")).unwrap()
    }

    fn rules(&self) -> Vec<String> {
        self.csv()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect()
    }
}

fn tuning_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("out/tuning.json")).unwrap()).unwrap()
}

#[test]
fn a_choice_that_wins_at_some_sizes_becomes_a_rule_for_those_sizes_only() {
    // Ring/LL128 is 30 % faster from 8 B to 64 KiB; every other forced pair is slower.
    let c = cluster("FAKE_NCCL_TUNE=ring/ll128@8-65536*0.7 FAKE_NCCL_NOISE=0.005 FAKE_NCCL_SEED=3");
    let (code, doc) = c.tune(&["--collectives", "all_reduce"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_schema("tune", &doc);
    // Measured sizes are 8·4^k: the last one inside 8 B..64 KiB is 32 KiB. The rule held at
    // one node and at both: any shape.
    assert_eq!(c.rules(), vec!["allreduce,8,32768,ring,ll128,-1,-1,-1"], "{}", c.csv());
    let t = tuning_json(c.dir.path());
    assert_eq!(t, doc["tuning"], "tuning.json is the tuning printed");
    let rule = &t["rules"][0];
    assert!(rule["gain"]["low"].as_f64().unwrap() > 0.3, "{rule}");
    assert!(rule["why"].as_str().unwrap().contains("every shape measured"), "{rule}");
    assert_eq!(
        t["shapes"],
        serde_json::json!([{"nodes": 1, "ranks": 8}, {"nodes": 2, "ranks": 16}])
    );
    // Every candidate's figures are in the JSON, the channel counts of the winner too.
    let trials = doc["trials"].as_array().unwrap();
    assert!(trials
        .iter()
        .any(|t| t["candidate"] == "ring/ll128×8" && t["phase"] == "channels"));
    assert!(trials
        .iter()
        .any(|t| t["candidate"] == "ring/ll128" && t["phase"] == "confirm"));
    assert!(
        t["globals"].as_array().unwrap().is_empty(),
        "EFA: no RDMA globals, and none won"
    );
}

#[test]
fn nothing_beats_nccls_own_choice_and_noise_is_no_rule() {
    for knobs in ["", "FAKE_NCCL_NOISE=0.05 FAKE_NCCL_SEED=11"] {
        let c = cluster(knobs);
        let (code, doc) = c.tune(&["--collectives", "reduce_scatter"]);
        assert_eq!(code, Some(0), "{knobs}: {doc:#}");
        assert!(c.rules().is_empty(), "{knobs}: {}", c.csv());
        assert!(doc["tuning"]["globals"].as_array().unwrap().is_empty(), "{knobs}");
        let kept = doc["tuning"]["kept"].as_array().unwrap();
        assert_eq!(kept.len(), 2, "one collective at two shapes: {kept:?}");
        // 8 B to 256 MiB by 4: 13 sizes, every one NCCL's.
        assert!(
            kept.iter().all(|k| k["sizes"].as_array().unwrap().len() == 13),
            "{kept:?}"
        );
    }
}

#[test]
fn a_candidate_with_wrong_results_is_disqualified_and_named() {
    // Ring/LL128 would win, but its runs count wrong values: never a rule.
    let c = cluster("FAKE_NCCL_TUNE=ring/ll128@8-65536*0.7 FAKE_NCCL_FAIL=NCCL_PROTO=LL128:wrong");
    let out = c.dir.path().join("out");
    let o = tt(["tune", "--canary", "rack-1", "--collectives", "all_reduce"])
        .config(&c.cfg)
        .out(&out)
        .run();
    assert_eq!(o.code(), Some(0), "{}", o.stderr_text());
    assert!(c.rules().is_empty(), "{}", c.csv());
    let text = o.stdout_text();
    assert!(
        text.contains("DISQUALIFIED (wrong results): all_reduce ring/ll128"),
        "{text}"
    );
    let t = tuning_json(c.dir.path());
    let d = t["disqualified"].as_array().unwrap();
    assert!(
        d.iter()
            .all(|d| d["kind"] == "wrong_values" && d["candidate"].as_str().unwrap().ends_with("/ll128")),
        "{d:?}"
    );
    assert_eq!(d.len(), 4, "ring and tree LL128, at both shapes: {d:?}");
}

#[test]
fn a_global_that_wins_is_kept_with_its_evidence_and_the_budget_is_said() {
    let c = cluster("FAKE_NCCL_TUNE=NCCL_BUFFSIZE=8388608@1048576-268435456*0.9");
    let (code, doc) = c.tune(&["--collectives", "all_gather"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let g = &doc["tuning"]["globals"];
    assert_eq!(g.as_array().unwrap().len(), 1, "{g}");
    assert_eq!(
        (g[0]["name"].as_str(), g[0]["value"].as_str()),
        (Some("NCCL_BUFFSIZE"), Some("8388608"))
    );
    assert!(
        g[0]["why"].as_str().unwrap().starts_with("measured on rack-1: +11."),
        "{g}"
    );
    // A budget too small for the search: what was not measured is said, nothing is kept.
    let (code, doc) = c.tune(&["--collectives", "all_gather", "--budget", "1"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert!(!doc["tuning"]["not_tried"].as_array().unwrap().is_empty(), "{doc:#}");
    assert!(doc["tuning"]["rules"].as_array().unwrap().is_empty());
}

#[test]
fn bad_flags_are_usage_errors() {
    let c = cluster("");
    let o = tt(["tune", "--canary", "rack-1", "--collectives", "broadcastish"])
        .config(&c.cfg)
        .out(c.dir.path())
        .run();
    assert_eq!(o.code(), Some(2));
    assert!(o.stderr_text().contains("not a collective"), "{}", o.stderr_text());
    let o = tt(["tune", "--canary", "rack-9"])
        .config(&c.cfg)
        .out(c.dir.path())
        .run();
    assert_eq!(o.code(), Some(2), "{}", o.stderr_text());
}
