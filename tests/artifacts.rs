//! Root-safe II: topo-tune's own artifacts — the reviewed `plan.json`, the rollout record, the
//! benchmark's output, a node's answers about them — are inputs too, checked as strictly as
//! cluster.yaml and bounded. One test (or more) per class of docs/security.md's "Artifacts",
//! each reproducing the case first. The fleet is `canary.rs`'s: four local nodes under
//! `--output-dir`, nccl-tests' place taken by its documented double.

use crate::canary::{data, files, fleet, fleet_with, wave, Fleet};
use crate::common::{json, topo_tune, tt};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

const HOSTS: [&str; 4] = ["gpu1", "gpu2", "gpu3", "gpu4"];

/// Replace the fleet's benchmark command (one YAML double-quoted line).
fn with_command(f: &Fleet, command: &str) {
    let cfg = std::fs::read_to_string(&f.cfg).unwrap();
    let quoted = command.replace('\\', "\\\\").replace('"', "\\\"");
    let cfg: String = cfg
        .lines()
        .map(|l| {
            if l.starts_with("  command:") {
                format!("  command: \"{quoted}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&f.cfg, cfg).unwrap();
}

/// The double with the fleet's counter and log, `env` before it, `args` after it.
fn double(f: &Fleet, env: &str, json: &str) -> String {
    format!(
        "FAKE_NCCL_STATE={} FAKE_NCCL_LOG={} FAKE_NCCL_RANKS={{ranks}} {env} {} -b 8 -e 256M -f 4 -g 1 -I 1 -J {json}",
        f.dir.path().join("counter").display(),
        f.dir.path().join("bench.log").display(),
        data("fake_all_reduce_perf").display(),
    )
}

fn message(doc: &Value) -> String {
    doc.to_string()
}

/// Run `cmd`, killing it after `secs`: a hang is a failure of the test, not of the suite.
fn within(mut cmd: std::process::Command, secs: u64) -> Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "still running after {secs} s: {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `topo-tune --output json SUB --cluster-config … --output-dir …` (no state directory).
fn plain(f: &Fleet, sub: &str) -> assert_cmd::Command {
    let mut c = topo_tune();
    c.args(["--output", "json", sub, "--cluster-config"])
        .arg(&f.cfg)
        .arg("--output-dir")
        .arg(&f.out);
    c
}

fn bin() -> std::process::Command {
    let mut c = std::process::Command::new(crate::common::run::binary_path());
    c.env_remove("TOPO_TUNE_OUTPUT");
    c
}

// ---- 1. An edited plan ----------------------------------------------------------------------

/// `plan --output-dir` on the fleet, then the plan as `edit` leaves it.
fn edited_plan(f: &Fleet, edit: impl Fn(&mut Value)) -> PathBuf {
    let dir = f.dir.path().join("plan");
    let o = tt(["plan"])
        .json()
        .config(&f.cfg)
        .arg("--from-probes")
        .arg(&f.probes)
        .out(&dir)
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let mut p: Value = serde_json::from_slice(&std::fs::read(dir.join("plan.json")).unwrap()).unwrap();
    edit(&mut p);
    let path = f.dir.path().join("edited-plan.json");
    std::fs::write(&path, p.to_string()).unwrap();
    path
}

fn set_everywhere(p: &mut Value, name: &str, value: &str, strip_ports: bool) {
    for class in p["nccl"]["classes"].as_array_mut().unwrap() {
        if strip_ports {
            class["gpu_ports"] = Value::Array(Vec::new());
        }
        let settings = class["settings"].as_array_mut().unwrap();
        settings.retain(|s| s["name"] != name);
        settings.push(serde_json::json!({"name": name, "value": value, "reason": "edited"}));
    }
}

#[test]
fn an_edited_plan_is_held_to_the_nodes_own_facts_and_to_cluster_yamls_rules() {
    let f = fleet("");
    let cases: &[(&str, &str, bool, &str)] = &[
        // The plan's own ports deleted: the guard must see the node's.
        ("NCCL_IB_HCA", "=mlx5_0", true, "never-slower guard"),
        ("NCCL_IB_HCA", "=lo", true, "never-slower guard"),
        ("NCCL_IB_DISABLE", "1", false, "debugging variable"),
        ("NCCL_P2P_DISABLE", "1", false, "debugging variable"),
        ("NCCL_SHM_DISABLE", "1", false, "debugging variable"),
        ("NCCL_MAX_NCHANNELS", "1", false, "debugging variable"),
        ("NCCL_NET_GDR_LEVEL", "LOC", false, "debugging variable"),
        ("NCCL_ALGO", "Ring", false, "debugging variable"),
        ("NCCL_PROTO", "Simple", false, "debugging variable"),
        ("NCCL_DEBUG", "INFO", false, "floods"),
        ("NCCL_NET_PLUGIN", "/any.so", false, "cluster.yaml"),
        ("NCCL_TOPO_FILE", "/etc/shadow", false, "cluster.yaml"),
    ];
    for (name, value, strip, says) in cases {
        let plan = edited_plan(&f, |p| set_everywhere(p, name, value, *strip));
        let o = plain(&f, "init")
            .arg("--plan")
            .arg(&plan)
            .arg("--from-probes")
            .arg(&f.probes)
            .output()
            .unwrap();
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(8), "init --plan with {name}={value}: {doc:#}");
        assert!(message(&doc).contains(says), "{name}={value}: {doc:#}");
        for h in HOSTS {
            assert!(
                !f.out.join(h).join("etc/nccl.conf").exists(),
                "{name}={value}: {h} written"
            );
        }
        let o = f
            .cmd("apply")
            .args(["--canary", "rack-1", "--plan"])
            .arg(&plan)
            .arg("--from-probes")
            .arg(&f.probes)
            .output()
            .unwrap();
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(2), "apply --plan with {name}={value}: {doc:#}");
        assert!(message(&doc).contains(says), "{name}={value}: {doc:#}");
        assert!(
            !f.out.join("gpu1/etc/nccl/topo-tune/candidate").exists(),
            "{name}={value}: staged"
        );
    }
    // The plan as made still applies, with the nodes' facts re-read.
    let plan = edited_plan(&f, |_| {});
    let o = plain(&f, "init")
        .arg("--plan")
        .arg(&plan)
        .arg("--from-probes")
        .arg(&f.probes)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
}

// ---- 2. Rollout records -----------------------------------------------------------------------

/// A canary-only rollout on rack-1 that promoted (a gain): its id and record.
fn finished(f: &Fleet) -> (String, PathBuf) {
    let (code, doc) = f.apply(&["--canary", "rack-1", "--canary-only"]);
    assert_eq!(code, Some(0), "{doc:#}");
    let id = doc["rollout"]["id"].as_str().unwrap().to_string();
    let rec = f.state.join("rollouts").join(format!("{id}.json"));
    (id, rec)
}

/// `apply --canary rack-1` killed (-9) once two rounds of its canary are measured: its id
/// and record, as a real interruption leaves them (running, wave 1 measuring, staged).
fn interrupted(f: &Fleet) -> (String, PathBuf) {
    let mut child = f.spawn_apply(&[]);
    let found = two_rounds_in(&f.state.join("rollouts"));
    child.kill().unwrap();
    child.wait().unwrap();
    found.expect("the rollout never reached round 3")
}

/// The record under `rollouts` once it holds two rounds (within a minute): its id and path.
fn two_rounds_in(rollouts: &Path) -> Option<(String, PathBuf)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for e in std::fs::read_dir(rollouts).into_iter().flatten().flatten() {
            if !e.file_name().to_string_lossy().ends_with(".json") {
                continue;
            }
            let doc: Value =
                serde_json::from_slice(&std::fs::read(e.path()).unwrap_or_default()).unwrap_or(Value::Null);
            if doc["waves"][0]["rounds"].as_array().is_some_and(|r| r.len() >= 2) {
                return Some((doc["id"].as_str()?.to_string(), e.path()));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The record with `edit` made to it (mode 0600, as topo-tune writes it).
fn tamper(rec: &Path, edit: impl Fn(&mut Value)) {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(rec, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    std::fs::set_permissions(rec, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn resume(f: &Fleet, id: &str, extra: &[&str]) -> Output {
    f.cmd("apply").args(["--resume", id]).args(extra).output().unwrap()
}

type Edit<'a> = Box<dyn Fn(&mut Value) + 'a>;

/// What a careless or hostile hand does to a record: each edit, and what the refusal names.
/// `touch`: a command that leaves a mark if it ever runs; `finished`: a finished rollout's
/// record to forge figures from.
fn tamperings<'a>(touch: &'a str, finished: &'a Value) -> Vec<(&'static str, Edit<'a>, &'static str)> {
    let mut all = option_tamperings(touch);
    all.extend(wave_tamperings(finished));
    all
}

/// Edits of a record's options: its benchmark command, output directory, rounds.
fn option_tamperings(touch: &str) -> Vec<(&'static str, Edit<'_>, &'static str)> {
    fn cmd_of(d: &mut Value, c: &str) {
        d["options"]["benchmark"]["command"] = c.into();
    }
    vec![
        (
            "a second command after a newline",
            Box::new(move |d| cmd_of(d, &format!("true -J {{json}}\n{touch}"))),
            "one non-empty line",
        ),
        ("no {json}", Box::new(move |d| cmd_of(d, touch)), "{json}"),
        (
            "a well-formed command that is not cluster.yaml's",
            Box::new(move |d| cmd_of(d, &format!("{touch}; true -J {{json}}"))),
            "options.benchmark.command is",
        ),
        (
            "a longer timeout than cluster.yaml's",
            Box::new(move |d| d["options"]["benchmark"]["timeout_s"] = 86400.into()),
            "options.benchmark.timeout_s is 86400",
        ),
        (
            "an unknown placeholder",
            Box::new(move |d| cmd_of(d, &format!("{touch} {{evil}} -J {{json}}"))),
            "unknown placeholder",
        ),
        (
            "output_dir /",
            Box::new(move |d| d["options"]["output_dir"] = "/".into()),
            "output_dir",
        ),
        (
            "output_dir with ..",
            Box::new(move |d| d["options"]["output_dir"] = "/tmp/../etc".into()),
            "output_dir",
        ),
        (
            "a relative output_dir",
            Box::new(move |d| d["options"]["output_dir"] = "out".into()),
            "output_dir",
        ),
        (
            "one round",
            Box::new(move |d| d["options"]["rounds"] = 1.into()),
            "rounds",
        ),
        (
            "4294967295 rounds",
            Box::new(move |d| d["options"]["rounds"] = 4294967295u64.into()),
            "rounds",
        ),
    ]
}

/// Edits of a record's waves and bundles: verdicts, hosts, a debugging variable.
fn wave_tamperings(finished_record: &Value) -> Vec<(&'static str, Edit<'_>, &'static str)> {
    vec![
        (
            "promoting without a verdict",
            Box::new(move |d| d["waves"][0]["phase"] = "promoting".into()),
            "verdict",
        ),
        (
            "a verdict its rounds do not give",
            Box::new(move |d| {
                // A finished wave's six rounds and verdict, the candidate's figures halved.
                let real = &finished_record;
                d["waves"][0]["phase"] = "promoting".into();
                d["waves"][0]["rounds"] = real["waves"][0]["rounds"].clone();
                d["waves"][0]["verdict"] = real["waves"][0]["verdict"].clone();
                for round in d["waves"][0]["rounds"].as_array_mut().unwrap() {
                    for row in round["candidate"]["figures"]["rows"].as_array_mut().unwrap() {
                        for k in ["algbw", "busbw"] {
                            row[k] = (row[k].as_f64().unwrap() / 2.0).into();
                        }
                    }
                }
            }),
            "verdict",
        ),
        (
            "a bundle with a debugging variable",
            Box::new(move |d| {
                let b = &mut d["bundles"][0]["dropin"];
                *b = format!("{}NCCL_P2P_DISABLE=1\n", b.as_str().unwrap()).into();
            }),
            "NCCL_P2P_DISABLE",
        ),
        (
            "a bundle that carries a plugin to install",
            Box::new(move |d| {
                d["bundles"][0]["tuner"] = serde_json::json!({
                    "csv": "allreduce,0,1,ring,ll,-1,-1,-1\n",
                    "plugin": {"sha256": "00", "hex": "7f454c46"}
                });
            }),
            "tuning",
        ),
        (
            "no waves",
            Box::new(move |d| d["waves"] = Value::Array(Vec::new())),
            "waves",
        ),
        (
            "a wave host outside the inventory",
            Box::new(move |d| d["waves"][0]["hosts"][0] = "gpu99".into()),
            "gpu99",
        ),
        (
            "a host in two waves",
            Box::new(move |d| {
                let mut second = d["waves"][0].clone();
                second["phase"] = "pending".into();
                second["run_id"] = format!("{}-2", d["id"].as_str().unwrap()).into();
                d["waves"].as_array_mut().unwrap().push(second);
            }),
            "two waves",
        ),
    ]
}

#[test]
fn a_tampered_rollout_record_is_refused_before_anything_runs() {
    // A finished canary's rounds and verdict, to forge from.
    let done = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01");
    let (_, done_rec) = finished(&done);
    let finished_record: Value = serde_json::from_slice(&std::fs::read(&done_rec).unwrap()).unwrap();
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01 FAKE_NCCL_SLEEP=0.2");
    let (id, rec) = interrupted(&f);
    let pristine = std::fs::read(&rec).unwrap();
    let marker = f.dir.path().join("marker");
    for (what, edit, says) in tamperings(&format!("touch {}", marker.display()), &finished_record) {
        std::fs::write(&rec, &pristine).unwrap();
        tamper(&rec, edit);
        let before: Vec<_> = HOSTS.iter().map(|h| files(&f.out.join(h))).collect();
        let o = resume(&f, &id, &[]);
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(65), "{what}: {doc:#}");
        assert!(message(&doc).contains(says), "{what}: {doc:#}");
        assert!(!marker.exists(), "{what}: the record's command ran");
        let after: Vec<_> = HOSTS.iter().map(|h| files(&f.out.join(h))).collect();
        assert_eq!(before, after, "{what}: a node's files changed");
    }
    // Flags `--resume` would ignore are refused, not dropped.
    std::fs::write(&rec, &pristine).unwrap();
    let other = f.dir.path().join("elsewhere");
    for (output_dir, flags, says) in [
        (&other, vec![], "--output-dir"),
        (&f.out, vec!["--rounds", "8"], "--rounds"),
        (&f.out, vec!["--threshold", "5"], "--threshold"),
        (&f.out, vec!["--require-gain"], "--require-gain"),
    ] {
        let o = tt(["apply", "--resume", &id])
            .json()
            .config(&f.cfg)
            .arg("--state-dir")
            .arg(&f.state)
            .out(output_dir)
            .args(&flags)
            .run();
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {doc}");
        assert!(
            doc["error"]["message"].as_str().unwrap().starts_with(says),
            "{flags:?}: {doc}"
        );
    }
    assert!(!other.exists());
    // The record's output directory is written to only when today's command line names it
    // (a record saying `output_dir: /etc` is not obeyed by a bare `--resume`).
    let o = tt(["apply", "--resume", &id])
        .json()
        .config(&f.cfg)
        .arg("--state-dir")
        .arg(&f.state)
        .run();
    let doc = json(&o);
    assert_eq!(o.status.code(), Some(2), "{doc}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("give `--output-dir"),
        "{doc}"
    );
    // The record as the kill left it resumes and finishes.
    let o = resume(&f, &id, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
}

#[test]
fn a_record_others_could_write_is_not_trusted() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01 FAKE_NCCL_SLEEP=0.1");
    let (id, rec) = interrupted(&f);
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = resume(&f, &id, &[]);
    assert_eq!(o.status.code(), Some(65), "{}", json(&o));
    assert!(message(&json(&o)).contains("writable"), "{}", json(&o));
    std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&f.state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = resume(&f, &id, &[]);
    assert_eq!(o.status.code(), Some(65), "{}", json(&o));
    assert!(message(&json(&o)).contains("writable"), "{}", json(&o));
    std::fs::set_permissions(&f.state, std::fs::Permissions::from_mode(0o700)).unwrap();
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&rec, Some(65534), None).unwrap();
        let o = resume(&f, &id, &[]);
        assert_eq!(o.status.code(), Some(65), "{}", json(&o));
        assert!(message(&json(&o)).contains("owned by"), "{}", json(&o));
        std::os::unix::fs::chown(&rec, Some(0), None).unwrap();
    }
    // As it should be: the resume measures the missing rounds and finishes.
    let o = resume(&f, &id, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
}

// ---- 3. Runs that did not span the wave -------------------------------------------------------

#[test]
fn a_run_with_the_wrong_number_of_ranks_is_a_failed_run() {
    // The wave is 2 nodes × 8 GPUs: a run reporting 1 rank measured something else.
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_RANKS=1");
    let (code, doc) = f.apply(&["--canary", "rack-1"]);
    assert_eq!(code, Some(7), "{doc:#}");
    let outcome = wave(&doc, 0)["outcome"].as_str().unwrap();
    assert!(outcome.contains("1 rank(s)") && outcome.contains("16"), "{outcome}");
    assert_eq!(wave(&doc, 0)["phase"], "rolled_back");
    assert!(!f.out.join("gpu1/etc/nccl.conf").exists());
}

// ---- 4. A FIFO, a directory at the -J path ----------------------------------------------------

#[test]
fn a_fifo_or_a_directory_at_the_json_path_is_a_failed_run_not_a_hang() {
    for (make, says) in [("mkfifo", "FIFO"), ("mkdir", "directory")] {
        let f = fleet_with("", 20);
        with_command(&f, &format!("{}; {make} {{json}}", double(&f, "", "{json}.real")));
        let mut cmd = bin();
        cmd.args(["--output", "json", "apply", "--canary", "rack-1", "--cluster-config"])
            .arg(&f.cfg)
            .arg("--from-probes")
            .arg(&f.probes)
            .arg("--output-dir")
            .arg(&f.out)
            .arg("--state-dir")
            .arg(&f.state);
        let o = within(cmd, 60);
        let doc = json(&o);
        assert_eq!(o.status.code(), Some(7), "{make}: {doc:#}");
        let outcome = wave(&doc, 0)["outcome"].as_str().unwrap().to_string();
        assert!(
            outcome.contains("-J file") && outcome.contains(says),
            "{make}: {outcome}"
        );
        assert!(!outcome.contains("starting the benchmark"), "{make}: {outcome}");
    }
}

// ---- 5. Files written that the tool could not read back ---------------------------------------

#[test]
fn what_a_later_read_would_refuse_is_never_written() {
    let f = fleet("");
    // A plan whose topology file is larger than what rollback, status and init read back.
    // A real NCCL topology file (the H200 VM's) padded past 1 MiB with a comment.
    let real =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden/h200-vm-topology.xml"))
            .unwrap();
    let padded = real.replacen("<system", &format!("<!-- {} -->\n<system", "x".repeat(2 << 20)), 1);
    let plan = edited_plan(&f, |p| {
        for class in p["nccl"]["classes"].as_array_mut().unwrap() {
            class["topology_xml"] = padded.clone().into();
        }
        set_everywhere(p, "NCCL_TOPO_FILE", "/etc/nccl/topo-tune/topology.xml", false);
    });
    let o = plain(&f, "init")
        .arg("--plan")
        .arg(&plan)
        .arg("--from-probes")
        .arg(&f.probes)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(65), "the plan is refused whole: {}", json(&o));
    assert!(message(&json(&o)).contains("1 MiB"), "{}", json(&o));
    assert!(!f.out.join("gpu1/etc").exists());
    // A node asked to write a 2 MiB drop-in refuses; the node's earlier files stay
    // restorable.
    let root = f.out.join("gpu1");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/nccl.conf"), "NCCL_IB_TC=106\n").unwrap();
    let o = plain(&f, "init").arg("--from-probes").arg(&f.probes).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    let request = serde_json::json!({
        "bundle": {"dropin": format!("# x\n{}", "NCCL_IB_TC=106\n".repeat(160_000)), "topology_xml": null, "nccl_version": "2.28.9"},
        "check": false,
        "diff": false,
    });
    let mut node = bin();
    node.args(["node", "write", "--root"]).arg(&root);
    let mut child = node
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        report["error"]["message"].as_str().unwrap().contains("1 MiB"),
        "{report}"
    );
    let o = plain(&f, "rollback").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/nccl.conf")).unwrap(),
        "NCCL_IB_TC=106\n"
    );
}

// ---- 6. Commands that would corrupt a measurement ---------------------------------------------

/// `apply --canary rack-1` in the background, once every canary node is staged.
fn staged_apply(f: &Fleet) -> std::process::Child {
    let child = f.spawn_apply(&[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !["gpu1", "gpu2"]
        .iter()
        .all(|h| f.out.join(h).join("etc/nccl/topo-tune/candidate/stage.json").exists())
    {
        assert!(Instant::now() < deadline, "never staged");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn init_and_rollback_wait_for_a_staged_rollout_and_apply_checks_the_live_files() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_SLEEP=0.4");
    let child = staged_apply(&f);
    let live = files(&f.out.join("gpu1"));
    let o = plain(&f, "init").arg("--from-probes").arg(&f.probes).output().unwrap();
    let doc = json(&o);
    assert_eq!(
        o.status.code(),
        Some(4),
        "the canary's nodes refuse, the others write: {doc:#}"
    );
    assert!(message(&doc).contains("staged"), "{doc:#}");
    let o = plain(&f, "rollback").output().unwrap();
    assert!(message(&json(&o)).contains("staged"), "{}", json(&o));
    let after = files(&f.out.join("gpu1"));
    let names = |m: &std::collections::BTreeMap<String, (Vec<u8>, std::time::SystemTime)>| {
        m.iter()
            .filter(|(k, _)| !k.contains("candidate"))
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&live), names(&after), "gpu1's live files were rewritten");
    // An edit by hand between rounds: the rollout stops, naming it, rather than judge mixed
    // figures.
    std::fs::write(f.out.join("gpu2/etc/nccl.conf"), "NCCL_IB_TC=106\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(7));
    let rec = std::fs::read_dir(f.state.join("rollouts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc: Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    let outcome = doc["waves"][0]["outcome"].as_str().unwrap();
    assert!(outcome.contains("gpu2") && outcome.contains("changed"), "{outcome}");
}

#[test]
fn status_tells_a_promoted_wave_that_was_rolled_back_since() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01");
    finished(&f);
    let (code, st) = f.status();
    assert_eq!(code, Some(0), "{st:#}");
    let o = plain(&f, "rollback").output().unwrap();
    assert_eq!(o.status.code(), Some(4), "gpu3/gpu4 have nothing: {}", json(&o));
    // topo-tune's own rollback is recorded on the node: status tells it, and it is not drift
    // (issue 34: it used to exit 6 "drift or pending work").
    let (code, st) = f.status();
    assert_eq!(code, Some(0), "{st:#}");
    let gpu1 = &st["nodes"][0];
    assert!(message(gpu1).contains("rolled back here since"), "{gpu1:#}");
}

// ---- 7. Benchmarks that outlive topo-tune -----------------------------------------------------

fn processes_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(needle) && !stat.contains(") Z") {
            out.push(pid);
        }
    }
    out
}

fn gone(needle: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if processes_with(needle).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_benchmarks_children_end_with_it_and_with_topo_tune() {
    // kill -9 of apply mid-run: the benchmark and its background child end with it.
    let f = fleet("");
    let tag = format!("{}.25", 1000 + std::process::id() % 1000);
    with_command(
        &f,
        &format!("sleep {tag} & {}", double(&f, "FAKE_NCCL_SLEEP=30", "{json}")),
    );
    let mut child = f.spawn_apply(&[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_with(&format!("sleep {tag}")).is_empty() {
        assert!(Instant::now() < deadline, "the benchmark never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(gone(&format!("sleep {tag}"), 5), "the benchmark's child outlived apply");
    assert!(gone("fake_all_reduce_perf", 5), "the benchmark outlived apply");
    // A normal end: what the benchmark left in the background is ended too.
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08");
    let tag = format!("{}.75", 1000 + std::process::id() % 1000);
    with_command(&f, &format!("(sleep {tag} &); {}", double(&f, "", "{json}")));
    let (code, doc) = f.apply(&["--canary", "rack-1", "--canary-only"]);
    assert_eq!(code, Some(0), "{doc:#}");
    assert!(
        gone(&format!("sleep {tag}"), 5),
        "a background child outlived its benchmark"
    );
}

// ---- 8. Unbounded output ----------------------------------------------------------------------

#[test]
fn a_gigabyte_of_benchmark_output_costs_no_gigabyte_of_memory() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08");
    let once = f.dir.path().join("once");
    with_command(
        &f,
        &format!(
            "test -e {o} || (touch {o}; yes 0123456789abcdef0123456789abcdef | head -c 1073741824); {}",
            double(&f, "", "{json}"),
            o = once.display()
        ),
    );
    // Peak memory of the apply process tree, measured by a parent that waits for it.
    let script = "import resource, subprocess, sys\n\
                  p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n\
                  print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n";
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(crate::common::run::binary_path())
        .args([
            "--output",
            "json",
            "apply",
            "--canary",
            "rack-1",
            "--canary-only",
            "--cluster-config",
        ])
        .arg(&f.cfg)
        .arg("--from-probes")
        .arg(&f.probes)
        .arg("--output-dir")
        .arg(&f.out)
        .arg("--state-dir")
        .arg(&f.state)
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&o.stdout).to_string();
    let mut parts = line.split_whitespace();
    let code: i32 = parts.next().unwrap().parse().unwrap();
    let max_rss_kib: u64 = parts.next().unwrap().parse().unwrap();
    assert_eq!(code, 0, "{line}");
    eprintln!(
        "apply with 1 GiB of benchmark output: peak RSS {} MiB",
        max_rss_kib / 1024
    );
    assert!(
        max_rss_kib < 200 * 1024,
        "apply peaked at {} MiB for 1 GiB of output",
        max_rss_kib / 1024
    );
}

// ---- 10. Slurm names ---------------------------------------------------------------------------

#[test]
fn fabric_names_follow_the_label_grammar_and_levels_do_not_share_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = [
        (
            "racks:\n    rack-1: {leaf: rack-1}\n  leaves:\n    rack-1: {}\n",
            "rack-1",
        ),
        ("leaves:\n    \"r\\nSwitchName=evil Nodes=x\": {}\n", "label"),
        ("leaves:\n    leaf-1: {spine: \"s\\nSwitchName=evil\"}\n", "label"),
        ("leaves:\n    leaf-1: {spine: \"s#x\"}\n", "label"),
        ("leaves:\n    \"l$(reboot)\": {}\n", "label"),
        ("leaves:\n    \"l\\u2028x\": {}\n", "label"),
        ("leaves:\n    \"\": {}\n", "label"),
        ("leaves:\n    leaf-1: {spine: leaf-1}\n", "leaf-1"),
    ];
    for (fabric, says) in bad {
        let cfg = dir.path().join("c.yaml");
        std::fs::write(
            &cfg,
            format!("fabric:\n  {fabric}nodes:\n  - host: n1\n    simulate: aws-p4d\n"),
        )
        .unwrap();
        let o = tt(["plan"]).json().config(&cfg).out(dir.path().join("plan")).run();
        assert_eq!(
            o.status.code(),
            Some(65),
            "{fabric}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let msg = json(&o)["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("c.yaml:") && msg.contains(says), "{fabric}: {msg}");
        assert!(!dir.path().join("plan/topology.conf").exists(), "{fabric}");
    }
}

// ---- 11. Smaller gaps ---------------------------------------------------------------------------

#[test]
fn status_names_unreadable_records_and_unfinished_rollouts() {
    let f = fleet("FAKE_NCCL_RULES=NCCL_IB_HCA=1.08 FAKE_NCCL_NOISE=0.01");
    let (_, rec) = finished(&f);
    // Running, its next wave not started: nothing staged anywhere, but not finished.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    doc["status"] = "running".into();
    std::fs::write(&rec, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let (code, st) = f.status();
    assert_eq!(code, Some(6), "an unfinished rollout is pending work: {st:#}");
    std::fs::write(f.state.join("rollouts/20261130T000000Z-9.json"), b"{not json").unwrap();
    let (code, st) = f.status();
    assert_eq!(code, Some(65), "{st:#}");
    assert!(message(&st).contains("20261130T000000Z-9"), "{st:#}");
}

#[test]
fn a_restored_file_keeps_its_mode() {
    let site = crate::root_safe::Site::new();
    let conf = site.node().join("etc/nccl.conf");
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(site.init(22, &[]).status.code(), Some(0));
    assert_eq!(site.rollback().status.code(), Some(0));
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "restored as {mode:o}");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), crate::root_safe::ORIGINAL);
}

#[test]
fn a_manifest_that_lies_about_a_backup_or_its_version_is_refused() {
    let site = crate::root_safe::Site::new();
    assert_eq!(site.init(22, &[]).status.code(), Some(0));
    let manifest = site.node().join("etc/nccl/topo-tune/manifest.json");
    let good = std::fs::read_to_string(&manifest).unwrap();
    // The last run pending, claiming /etc/nccl.conf did not exist before it: undoing it
    // would delete the operator's file, whose backup is right there.
    let mut doc: Value = serde_json::from_str(&good).unwrap();
    let run = doc["runs"].as_array_mut().unwrap().last_mut().unwrap();
    run["pending"] = true.into();
    for f in run["files"].as_array_mut().unwrap() {
        f["backup"] = Value::Null;
    }
    std::fs::write(&manifest, doc.to_string()).unwrap();
    for o in [site.init(23, &[]), site.rollback()] {
        assert_eq!(o.status.code(), Some(8), "{}", json(&o));
        assert!(message(&json(&o)).contains("backup"), "{}", json(&o));
        assert!(
            site.node().join("etc/nccl.conf").exists(),
            "the operator's file was deleted"
        );
    }
    let mut doc: Value = serde_json::from_str(&good).unwrap();
    doc["version"] = 99.into();
    std::fs::write(&manifest, doc.to_string()).unwrap();
    let o = site.init(23, &[]);
    assert_eq!(o.status.code(), Some(8), "{}", json(&o));
    assert!(message(&json(&o)).contains("version 99"), "{}", json(&o));
}

#[test]
fn a_second_identical_init_touches_nothing_lock_included() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.yaml");
    let init = || tt(["init"]).json().config(&example).out(&out).run();
    assert_eq!(init().status.code(), Some(0));
    let before = files(&out);
    assert!(
        before.keys().any(|k| k.ends_with("topo-tune/lock")),
        "{:?}",
        before.keys()
    );
    std::thread::sleep(Duration::from_millis(1100));
    let o = init();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["changed"], false);
    assert_eq!(files(&out), before, "contents and mtimes");
}

#[test]
fn temp_files_a_kill_left_are_cleared_by_the_next_run() {
    let site = crate::root_safe::Site::new();
    assert_eq!(site.init(22, &[]).status.code(), Some(0));
    // Killed at the rename of the manifest (the 5th rename of a run: backup, manifest,
    // files…): its temp file stays behind.
    let o = site.init(23, &[("TOPO_TUNE_FAULT_AT_RENAME", "2")]);
    assert_ne!(o.status.code(), Some(0));
    let temps = |root: &Path| {
        walk(root)
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".tmp"))
            .collect::<Vec<_>>()
    };
    assert!(!temps(&site.node()).is_empty(), "the kill left no temp file");
    // The next run (which undoes the interrupted one) leaves none.
    assert_eq!(site.init(22, &[]).status.code(), Some(0));
    assert!(site.init(22, &[]).status.code() == Some(0));
    assert_eq!(temps(&site.node()), Vec::<PathBuf>::new());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn duplicate_device_names_and_bidi_controls_from_a_node_are_refused() {
    let snap = |alter: &dyn Fn(&mut Value)| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/snapshots/aws-p4d.json");
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        alter(&mut doc);
        doc.to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nccl_version: \"2.28.9\"\nnodes:\n  - host: n1\n  - host: n2\n").unwrap();
    std::fs::write(probes.join("n2.json"), snap(&|d| d["hostname"] = "n2".into())).unwrap();
    type Alter<'a> = &'a dyn Fn(&mut Value);
    let nvlink = |gbps: f64| {
        move |d: &mut Value| {
            d["gpus"][0]["nvlinks"] = serde_json::json!([{"link": 0, "active": true, "version": 3, "remote_bdf": null, "remote": "unknown", "bandwidth_gbps": gbps}]);
        }
    };
    let (negative, huge) = (nvlink(-40.0), nvlink(1e308));
    let slow_port = |d: &mut Value| {
        let nic = d["nics"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|n| !n["rdma"].is_null())
            .unwrap();
        nic["rdma"]["ports"][0]["rate_gbps"] = (-400.0).into();
    };
    let cases: [(&str, Alter, &str); 6] = [
        (
            "an NVLink of -40 GB/s",
            &negative,
            "gpus[0].nvlinks[0].bandwidth_gbps: -40 GB/s",
        ),
        ("an NVLink of 1e308 GB/s", &huge, "gpus[0].nvlinks[0].bandwidth_gbps"),
        (
            "a NIC port at -400 Gb/s",
            &slow_port,
            "rdma.ports[0].rate_gbps: -400 GB/s",
        ),
        (
            "two NICs of one name",
            &|d| {
                let first = d["nics"][0]["name"].clone();
                d["nics"][1]["name"] = first;
            },
            "nics[1].name",
        ),
        (
            "a right-to-left override in a GPU model",
            &|d| d["gpus"][0]["name"] = "NVIDIA A100\u{202e}lanigiro".into(),
            "gpus[0].name",
        ),
        (
            "another node's snapshot, filed under n1",
            &|d| d["hostname"] = "n2".into(),
            "another node of the inventory",
        ),
    ];
    for (what, alter, field) in cases {
        std::fs::write(probes.join("n1.json"), snap(alter)).unwrap();
        let o = tt(["init"])
            .config(&cfg)
            .arg("--from-probes")
            .arg(&probes)
            .out(dir.path().join("out"))
            .run();
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(4), "{what}: n1 refused, n2 written: {out}");
        assert!(out.contains(field) && out.contains("bad_answer"), "{what}: {out}");
        assert!(!out.contains('\u{202e}'), "{what}: printed raw: {out}");
        assert!(!dir.path().join("out/n1/etc").exists(), "{what}");
    }
}

// ---- 12. Messages ---------------------------------------------------------------------------------

#[test]
fn messages_name_what_is_really_wrong() {
    // diagnose --nodes names its own flag.
    let f = fleet("");
    let o = plain(&f, "diagnose")
        .args(["--nodes", "rack-9"])
        .arg("--from-probes")
        .arg(&f.probes)
        .output()
        .unwrap();
    let m = message(&json(&o));
    assert!(m.contains("--nodes rack-9") && !m.contains("--canary"), "{m}");
    // A record that is not UTF-8 is not called "not a regular file", and is a data error.
    std::fs::create_dir_all(f.state.join("rollouts")).unwrap();
    std::fs::set_permissions(&f.state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let id = "20261130T000000Z-7";
    std::fs::write(f.state.join(format!("rollouts/{id}.json")), b"\xff\xfe{}").unwrap();
    let o = resume(&f, id, &[]);
    assert_eq!(o.status.code(), Some(65), "{}", json(&o));
    let m = message(&json(&o));
    assert!(m.contains("UTF-8") && !m.contains("not a regular file"), "{m}");
    // An NCCL topology FIFO is named as such.
    let fifo = f.dir.path().join("topo.xml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = tt(["probe", "--from-nccl-topo"]).json().arg(&fifo).run();
    let m = message(&json(&o));
    assert!(m.contains("FIFO") && !m.contains("hwloc could not read"), "{m}");
    // A second rollback says there is nothing newer to undo (exit 0), as docs/init.md says.
    let site = crate::root_safe::Site::new();
    assert_eq!(site.init(22, &[]).status.code(), Some(0));
    assert_eq!(site.rollback().status.code(), Some(0));
    let o = site.rollback();
    assert_eq!(o.status.code(), Some(0), "{}", json(&o));
    assert!(message(&json(&o)).contains("nothing newer to undo"), "{}", json(&o));
}

#[test]
fn a_bad_snapshot_file_is_a_bad_answer() {
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    std::fs::write(probes.join("n1.json"), "{\"schema_version\": 2}").unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: n1\n").unwrap();
    let o = tt(["init"])
        .json()
        .config(&cfg)
        .arg("--from-probes")
        .arg(&probes)
        .out(dir.path().join("out"))
        .run();
    let doc = json(&o);
    assert_eq!(doc["nodes"][0]["error"]["kind"], "bad_answer", "{doc:#}");
}

/// The cluster.yaml path reaches every emitted file's header; a newline in the file's name
/// must not start a line of its own (a command in `k8s-label-nodes.sh`, a switch in
/// `topology.conf`).
#[test]
fn a_newline_in_the_cluster_yaml_path_stays_in_its_comment() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c\ntouch owned\nSwitchName=evil\n.yaml");
    let yaml = "nccl_version: \"2.28.9\"\nfabric:\n  leaves:\n    leaf-1: {spine: spine-1}\n  racks:\n    rack-1: {leaf: leaf-1}\nnodes:\n  - host: n[1-2]\n    labels: {rack: rack-1}\n    simulate: aws-p5en\n";
    std::fs::write(&cfg, yaml).unwrap();
    let out = dir.path().join("out");
    let o = tt(["plan"]).config(&cfg).out(&out).run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let mut seen = 0;
    for file in [
        "topology.conf",
        "topology.yaml",
        "k8s-label-nodes.sh",
        "k8s-node-labels.yaml",
    ] {
        let Ok(text) = std::fs::read_to_string(out.join(file)) else {
            continue;
        };
        seen += 1;
        assert!(
            text.contains("c\\ntouch owned\\nSwitchName=evil\\n.yaml"),
            "{file}: {text}"
        );
        for line in text.lines() {
            assert!(
                !line.starts_with("touch ") && !line.starts_with("SwitchName=evil"),
                "{file}: {line}"
            );
        }
    }
    assert!(seen >= 2, "the example writes Slurm's files at least");
}
