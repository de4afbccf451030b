//! `topo-tune tune` against the nccl-tests double, whose cost model answers the choice
//! topo-tune's tuner plugin makes from a run's rules file (first matching line, passed over
//! where NCCL will not run the pair), channel counts and variables per message size
//! (`FAKE_NCCL_TUNE`): a cluster
//! where NCCL's own choice is beaten at some sizes (a rule for those sizes only), one where
//! nothing beats it (no rule), a noisy one (no rule), one where a candidate computes wrong
//! values (disqualified, named), and a budget that leaves candidates untried.

use crate::canary::data;
use crate::common::{assert_schema, tt, tuner_plugin};
use serde_json::Value;
use std::path::{Path, PathBuf};

struct Cluster {
    dir: tempfile::TempDir,
    cfg: PathBuf,
}

/// Four paper nodes in two racks (p5en profiles: 8 GPUs, EFA), the double as the benchmark.
fn cluster(knobs: &str) -> Cluster {
    cluster_with(knobs, "")
}

/// The same, with `more` nodes after them (YAML list items).
fn cluster_with(knobs: &str, more: &str) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    let state = dir.path().join("counter");
    std::fs::write(
        &cfg,
        format!(
            "nccl_version: \"2.30.7\"\n\
             benchmark:\n  command: \"FAKE_NCCL_STATE={state} FAKE_NCCL_RANKS={{ranks}} FAKE_NCCL_HOSTS={{hosts}} {knobs} python3 {double} -b 8 -e 256M -f 4 -g 1 -I 1 -J {{json}}\"\n  timeout: 60\n\
             nodes:\n  - host: \"p5en-[01-02]\"\n    labels: {{rack: rack-1}}\n    simulate: aws-p5en\n\
             \x20 - host: \"p5en-[03-04]\"\n    labels: {{rack: rack-2}}\n    simulate: aws-p5en\n{more}",
            state = state.display(),
            double = data("fake_all_reduce_perf").display(),
        ),
    )
    .unwrap();
    Cluster { dir, cfg }
}

impl Cluster {
    /// `tune --canary rack-1` with the nodes' files (and each run's) under `nodes/`.
    fn cmd(&self) -> crate::common::Run {
        tt(["tune", "--canary", "rack-1"])
            .config(&self.cfg)
            .out(self.dir.path().join("out"))
            .arg("--node-files")
            .arg(self.dir.path().join("nodes"))
            .arg("--state-dir")
            .arg(self.dir.path().join("state"))
            .env("TOPO_TUNE_TUNER_PLUGIN", tuner_plugin())
    }

    fn tune(&self, extra: &[&str]) -> (Option<i32>, Value) {
        let o = self.cmd().json().args(extra).run();
        let doc = o.doc();
        (o.code(), doc)
    }

    /// What is left of the run files on the nodes (nothing, once tune has ended).
    fn staged(&self) -> Vec<PathBuf> {
        ["p5en-01", "p5en-02"]
            .iter()
            .map(|h| self.dir.path().join("nodes").join(h).join("var/lib/topo-tune/tune"))
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
            .collect()
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
    let c = cluster("FAKE_NCCL_TUNE=ring/ll128@8-65536*0.7 FAKE_NCCL_FAIL=TUNER=*/ll128:wrong");
    let o = c.cmd().args(["--collectives", "all_reduce"]).run();
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
    let o = c.cmd().args(["--collectives", "broadcastish"]).run();
    assert_eq!(o.code(), Some(2));
    assert!(o.stderr_text().contains("not a collective"), "{}", o.stderr_text());
    let o = tt(["tune", "--canary", "rack-9"])
        .config(&c.cfg)
        .out(c.dir.path())
        .run();
    assert_eq!(o.code(), Some(2), "{}", o.stderr_text());
    // Paper nodes without --node-files: nowhere to stage a run's files.
    let o = tt(["tune", "--canary", "rack-1"])
        .config(&c.cfg)
        .out(c.dir.path())
        .run();
    assert_eq!(o.code(), Some(2), "{}", o.stderr_text());
    assert!(o.stderr_text().contains("--node-files"), "{}", o.stderr_text());
    // An empty path is not the working directory.
    for flag in ["--node-files", "--tuner-plugin", "--state-dir"] {
        let o = tt(["tune", "--canary", "rack-1", flag, " "])
            .config(&c.cfg)
            .out(c.dir.path())
            .run();
        assert_eq!(o.code(), Some(2), "{flag}: {}", o.stderr_text());
        assert!(o.stderr_text().contains("an empty path"), "{flag}: {}", o.stderr_text());
    }
    // No plugin: nothing is measured (exit 69, EX_UNAVAILABLE).
    let o = c
        .cmd()
        .env("TOPO_TUNE_TUNER_PLUGIN", c.dir.path().join("none.so"))
        .run();
    assert_eq!(o.code(), Some(69), "{}", o.stderr_text());
    assert!(o.stderr_text().contains("tuner plugin"), "{}", o.stderr_text());
    assert!(!c.dir.path().join("nodes").exists(), "nothing staged");
    // An output directory the tuning cannot be written to is found before the first run
    // (it failed after every run, at the end): a directory where tuning.json goes.
    std::fs::create_dir_all(c.dir.path().join("out/tuning.json")).unwrap();
    let o = c.cmd().run();
    assert_eq!(o.code(), Some(65), "{}", o.stderr_text());
    assert!(
        o.stderr_text().contains("tuning.json: not a regular file"),
        "{}",
        o.stderr_text()
    );
    assert!(!c.dir.path().join("nodes").exists(), "nothing staged");
    assert!(!c.dir.path().join("counter").exists(), "nothing measured");
}

/// The default run on two nodes measures every collective at two shapes: each collective's
/// rules are made once (the second pass wrote them again, and the tuning was refused as
/// overlapping after every run, exit 69), and the run's files are gone at the end.
#[test]
fn two_collectives_at_two_shapes_give_one_rule_each() {
    let c = cluster("FAKE_NCCL_TUNE='all_reduce:ring/ll128@8-65536*0.7;all_gather:ring/ll@8-4096*0.7' FAKE_NCCL_NOISE=0.005 FAKE_NCCL_SEED=5");
    let (code, doc) = c.tune(&["--collectives", "all_reduce,all_gather"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let rules = c.rules();
    assert!(
        rules.contains(&"allreduce,8,32768,ring,ll128,-1,-1,-1".to_string()),
        "{rules:?}"
    );
    assert!(
        rules.contains(&"allgather,8,2048,ring,ll,-1,-1,-1".to_string()),
        "{rules:?}"
    );
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(c.staged().is_empty(), "run files left: {:?}", c.staged());
}

/// A pair NCCL keeps disabled is measured as what the plugin will get: NCCL's own choice
/// (the plugin passes a -1 pair over). Forced with NCCL_PROTO it would have "won" and been
/// written as a rule that does nothing.
#[test]
fn a_pair_nccl_will_not_run_is_measured_as_nccls_own_and_kept_out() {
    let c = cluster("FAKE_NCCL_TUNE=ring/ll128@8-65536*0.7 FAKE_NCCL_DISABLED=ring/ll128");
    let (code, doc) = c.tune(&["--collectives", "all_reduce"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert!(c.rules().is_empty(), "{}", c.csv());
    let trial = doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["candidate"] == "ring/ll128")
        .unwrap();
    let small = &trial["sizes"][0];
    assert_eq!(
        small["nccl_us"], small["candidate_us"],
        "NCCL's own, as measured: {small}"
    );
}

/// A benchmark command that does not run the shape asked (a fixed rank count) measures
/// another job: refused, not judged.
#[test]
fn a_run_of_another_rank_count_is_refused() {
    let c = cluster("");
    let cfg = std::fs::read_to_string(&c.cfg)
        .unwrap()
        .replace("FAKE_NCCL_RANKS={ranks}", "FAKE_NCCL_RANKS=8");
    std::fs::write(&c.cfg, cfg).unwrap();
    let o = c.cmd().args(["--collectives", "all_reduce"]).run();
    assert_ne!(o.code(), Some(0));
    assert!(
        o.stderr_text()
            .contains("ran 8 rank(s) for a job of 2 node(s), 16 rank(s)"),
        "{}",
        o.stderr_text()
    );
    assert!(
        c.staged().is_empty(),
        "run files left after a failure: {:?}",
        c.staged()
    );
}

/// A tuned rack beside a node of other hardware, the plan's own files written on every node
/// (what a rollback of the tuning comes back to).
struct Rolled {
    c: Cluster,
    out: PathBuf,
    files: PathBuf,
}

impl Rolled {
    fn new() -> Rolled {
        let c = cluster_with(
            "FAKE_NCCL_TUNE=ring/ll128@8-65536*0.7 FAKE_NCCL_NOISE=0.005 FAKE_NCCL_SEED=3",
            "  - host: p4d-01\n    labels: {rack: rack-3}\n    simulate: aws-p4d\n",
        );
        let (code, doc) = c.tune(&["--collectives", "all_reduce"]);
        assert_eq!(code, Some(0), "{doc:#}");
        let (out, files) = (c.dir.path().join("out"), c.dir.path().join("files"));
        let o = tt(["init"]).config(&c.cfg).out(&files).json().run();
        assert_eq!(o.code(), Some(0), "{:#}", o.doc());
        Rolled { c, out, files }
    }

    /// `init --tuning out` on `cfg`.
    fn init(&self, cfg: &Path, extra: &[&str]) -> (Option<i32>, Value) {
        let o = tt(["init", "--tuning"])
            .arg(&self.out)
            .config(cfg)
            .out(&self.files)
            .env("TOPO_TUNE_TUNER_PLUGIN", tuner_plugin())
            .json()
            .args(extra)
            .run();
        (o.code(), o.doc())
    }

    fn status(&self, cfg: &Path) -> (Option<i32>, Value) {
        let state = self.c.dir.path().join("state");
        let o = tt(["status"])
            .config(cfg)
            .out(&self.files)
            .arg("--state-dir")
            .arg(state)
            .json()
            .run();
        (o.code(), o.doc())
    }

    fn node(&self, host: &str, path: &str) -> PathBuf {
        self.files.join(host).join(path.trim_start_matches('/'))
    }

    fn read(&self, host: &str, path: &str) -> String {
        std::fs::read_to_string(self.node(host, path)).unwrap_or_else(|e| panic!("{host}:{path}: {e}"))
    }
}

/// The loop closed on paper: tune rack-1, roll the tuning out with `init --tuning` — the rules
/// file under /etc/nccl/, the plugin at its content-addressed path, both named in the drop-in
/// and the assembled nccl.conf, only on nodes of the measured hardware — a second init changes
/// nothing, and rollback takes the tuning away (the plugin stays: a rolled-back drop-in may
/// name it).
#[test]
fn a_tuning_rolls_out_with_init_to_the_measured_hardware_and_rolls_back() {
    let r = Rolled::new();
    let (code, doc) = r.init(&r.c.cfg, &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_schema("init", &doc);
    assert_eq!(doc["tuning"]["given"], 4, "{doc:#}");
    let csv = std::fs::read_to_string(r.out.join("nccl-tuner.csv")).unwrap();
    let conf = r.read("p5en-03", "/etc/nccl.conf");
    let plugin = conf
        .lines()
        .find_map(|l| l.strip_prefix("NCCL_TUNER_PLUGIN="))
        .unwrap_or_else(|| panic!("{conf}"));
    assert!(plugin.starts_with("/var/lib/topo-tune/plugin/"), "{plugin}");
    assert!(
        conf.contains("NCCL_TUNER_CONFIG_FILE=/etc/nccl/nccl-tuner.csv\n"),
        "{conf}"
    );
    for h in ["p5en-01", "p5en-04"] {
        assert_eq!(r.read(h, "/etc/nccl/nccl-tuner.csv"), csv);
        assert_eq!(
            std::fs::read(r.node(h, plugin)).unwrap(),
            std::fs::read(tuner_plugin()).unwrap(),
            "the plugin the drop-in names, byte for byte"
        );
    }
    // Other hardware: its plan's files, no tuning, and why.
    assert!(!r.node("p4d-01", "/etc/nccl/nccl-tuner.csv").exists());
    let p4d = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == "p4d-01")
        .unwrap();
    assert!(p4d["warnings"][0].as_str().unwrap().contains("other hardware"), "{p4d}");
    assert!(!r.read("p4d-01", "/etc/nccl.conf").contains("TUNER"));

    let (code, doc) = r.init(&r.c.cfg, &[]);
    assert_eq!((code, doc["changed"].as_bool()), (Some(0), Some(false)), "{doc:#}");

    let o = tt(["rollback"]).config(&r.c.cfg).out(&r.files).json().run();
    assert_eq!(o.code(), Some(0), "{:#}", o.doc());
    assert!(!r.node("p5en-01", "/etc/nccl/nccl-tuner.csv").exists());
    assert!(r.node("p5en-01", plugin).exists(), "the plugin stays");
    assert!(!r.read("p5en-01", "/etc/nccl.conf").contains("TUNER"));
}

/// status shows the live tuning per node and what it was measured on, says "tune again"
/// once the nodes run another NCCL (cluster.yaml's version stands in for a paper node's
/// loader), where init then gives the tuning to none; a rules file edited by hand beside
/// tuning.json is refused before any node is touched.
#[test]
fn status_shows_the_live_tuning_and_another_nccl_or_a_hand_edit_is_refused() {
    let r = Rolled::new();
    let (code, doc) = r.init(&r.c.cfg, &[]);
    assert_eq!(code, Some(0), "{doc:#}");
    let (code, doc) = r.status(&r.c.cfg);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_schema("status", &doc);
    let live = &doc["nodes"][0]["state"]["tuning"];
    assert_eq!(
        (live["rules"].as_u64(), live["plugin_present"].as_bool()),
        (Some(1), Some(true)),
        "{live}"
    );
    assert_eq!(live["measured_on"], "2.30.7");
    assert!(
        live["measured"].as_str().unwrap().contains("rack-1 (2 host(s))"),
        "{live}"
    );
    assert!(doc["nodes"][4]["state"].get("tuning").is_none(), "p4d-01 has none");

    let upgraded = r.c.dir.path().join("upgraded.yaml");
    std::fs::write(
        &upgraded,
        std::fs::read_to_string(&r.c.cfg).unwrap().replace("2.30.7", "2.30.8"),
    )
    .unwrap();
    let (_, doc) = r.status(&upgraded);
    assert_eq!(
        doc["nodes"][0]["tune_again"], "measured on 2.30.7, this node runs 2.30.8: tune again",
        "{doc:#}"
    );
    assert!(doc["msg"].as_str().unwrap().contains("tune again"), "{doc:#}");
    let (_, doc) = r.init(&upgraded, &["--check"]);
    let why = doc["nodes"][0]["warnings"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        why.ends_with("measured on NCCL 2.30.7, this node runs 2.30.8: tune again"),
        "{why}"
    );

    let csv = std::fs::read_to_string(r.out.join("nccl-tuner.csv")).unwrap();
    std::fs::write(r.out.join("nccl-tuner.csv"), csv.replace("ll128", "simple")).unwrap();
    let (code, doc) = r.init(&r.c.cfg, &[]);
    assert_eq!(code, Some(65), "{doc:#}");
    assert!(doc["error"]["message"].as_str().unwrap().contains("differs"), "{doc:#}");
    assert_eq!(r.read("p5en-01", "/etc/nccl/nccl-tuner.csv"), csv, "nothing changed");
}

/// `apply --tuning --canary rack-1`: before any wave the canary measures the tuning as
/// written against NCCL's own, rule by rule with tune's decision rule; a rule that does not
/// hold there is dropped and said, the waves roll out what held (the rules file on every
/// node of the hardware), and a tuning none of which holds is not promoted at all.
#[test]
fn the_canary_judges_a_tuning_rule_by_rule_before_any_wave() {
    let c = cluster("FAKE_NCCL_TUNE='all_reduce:ring/ll128@8-65536*0.7;all_gather:ring/ll@8-4096*0.7' FAKE_NCCL_NOISE=0.005 FAKE_NCCL_SEED=5");
    let (code, doc) = c.tune(&["--collectives", "all_reduce,all_gather"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(c.rules().len(), 2, "{}", c.csv());
    let files = c.dir.path().join("files");
    let o = tt(["init"]).config(&c.cfg).out(&files).json().run();
    assert_eq!(o.code(), Some(0), "{:#}", o.doc());
    let yaml = std::fs::read_to_string(&c.cfg).unwrap();
    let apply = |knobs: &str| {
        let cfg = c.dir.path().join("later.yaml");
        let now = yaml.replace(
            "FAKE_NCCL_TUNE='all_reduce:ring/ll128@8-65536*0.7;all_gather:ring/ll@8-4096*0.7'",
            knobs,
        );
        std::fs::write(&cfg, now).unwrap();
        let o = tt(["apply", "--canary", "rack-1", "--tuning"])
            .arg(c.dir.path().join("out"))
            .config(&cfg)
            .out(&files)
            .arg("--state-dir")
            .arg(c.dir.path().join("state"))
            .env("TOPO_TUNE_TUNER_PLUGIN", tuner_plugin())
            .json()
            .run();
        (o.code(), o.doc())
    };
    let csv = |h: &str| std::fs::read_to_string(files.join(h).join("etc/nccl/nccl-tuner.csv"));

    // Nothing beats NCCL's own on the canary any more: nothing staged, nothing promoted.
    let (code, doc) = apply("");
    assert_eq!(code, Some(7), "{doc:#}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("none of the tuning"),
        "{doc:#}"
    );
    assert!(csv("p5en-01").is_err() && csv("p5en-03").is_err());

    // All-gather's winner is gone: its rule is dropped, all-reduce's rolls out.
    let (code, doc) = apply("FAKE_NCCL_TUNE='all_reduce:ring/ll128@8-65536*0.7'");
    assert_eq!(code, Some(0), "{doc:#}");
    assert_schema("apply", &doc);
    let judged = doc["rollout"]["tuning"]["judged"].as_array().unwrap();
    let word = |name: &str| {
        judged
            .iter()
            .find(|j| j["rule"].as_str().unwrap().starts_with(name))
            .unwrap()["holds"]
            .clone()
    };
    assert_eq!(
        (word("all_reduce"), word("all_gather")),
        (Value::Bool(true), Value::Bool(false)),
        "{judged:?}"
    );
    for h in ["p5en-01", "p5en-04"] {
        let lines: Vec<String> = csv(h)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect();
        assert_eq!(lines, ["allreduce,8,32768,ring,ll128,-1,-1,-1"], "{h}");
    }
    assert!(
        !files.join("p5en-01/etc/nccl/topo-tune/candidate").exists(),
        "the stage is gone"
    );
}
