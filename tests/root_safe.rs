//! topo-tune runs as root: attacked by a careless or hostile environment, it writes nothing
//! outside its own files, loses no operator file, and stops with a clear message. One test
//! (or more) per class of docs/security.md, each reproducing the case first.

use crate::common::{json, topo_tune, tt, Run};
use serde_json::Value;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The operator's own `/etc/nccl.conf`: a comment, a blank line, two settings.
pub(crate) const ORIGINAL: &str = "# site settings (ops team)\nNCCL_DEBUG=WARN\n\nNCCL_IB_TC=106\n";

/// A one-node paper cluster whose files go to `out/n1`; `timeout` varies what it writes.
pub(crate) struct Site {
    pub dir: tempfile::TempDir,
    pub out: PathBuf,
}

impl Site {
    pub(crate) fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let etc = out.join("n1/etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("nccl.conf"), ORIGINAL).unwrap();
        Site { dir, out }
    }

    pub(crate) fn config(&self, timeout: u32) -> PathBuf {
        let cfg = self.dir.path().join(format!("cluster-{timeout}.yaml"));
        std::fs::write(
            &cfg,
            format!("nccl_version: \"2.28.9\"\nnccl:\n  NCCL_IB_TIMEOUT: \"{timeout}\"\nnodes:\n  - host: n1\n    simulate: aws-p4d\n"),
        )
        .unwrap();
        cfg
    }

    pub(crate) fn node(&self) -> PathBuf {
        self.out.join("n1")
    }

    pub(crate) fn file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.node().join(path.trim_start_matches('/'))).ok()
    }

    pub(crate) fn init(&self, timeout: u32, env: &[(&str, &str)]) -> Output {
        let mut cmd = topo_tune();
        cmd.args(["--output", "json", "init", "--cluster-config"])
            .arg(self.config(timeout))
            .arg("--output-dir")
            .arg(&self.out);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    pub(crate) fn rollback(&self) -> Output {
        self.rollback_run(None)
    }

    /// `rollback`, or with `run`: `rollback --run RUN`.
    pub(crate) fn rollback_run(&self, run: Option<&str>) -> Output {
        let mut cmd = topo_tune();
        cmd.args(["--output", "json", "rollback", "--cluster-config"])
            .arg(self.config(0))
            .arg("--output-dir")
            .arg(&self.out);
        if let Some(r) = run {
            cmd.args(["--run", r]);
        }
        cmd.output().unwrap()
    }

    /// Roll back until nothing is left to roll back; the number of runs undone. A plain
    /// rollback undoes the last run once; each older one is then named, as its note says.
    pub(crate) fn rollback_all(&self) -> usize {
        let mut run: Option<String> = None;
        for n in 0..32 {
            let o = self.rollback_run(run.as_deref());
            let doc = json(&o);
            if doc["nodes"][0]["error"]["kind"] == "nothing_to_roll_back" {
                return n;
            }
            assert_eq!(o.status.code(), Some(0), "rollback: {doc}");
            let again = self.rollback();
            let again = json(&again);
            assert_eq!(
                again["changed"], false,
                "a second plain rollback undoes nothing: {again}"
            );
            match again["nodes"][0]["note"].as_str() {
                Some(note) if note.contains("--run ") => run = note.rsplit("--run ").next().map(str::to_string),
                _ => return n + 1,
            }
        }
        panic!("rollback never ran out of runs");
    }
}

fn error_of(o: &Output) -> String {
    let doc = json(o);
    doc["nodes"][0]["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| doc["msg"].as_str().unwrap_or_default().to_string())
}

/// Repetitions of the stress tests: `TOPO_TUNE_STRESS_REPS` (20 for the record), 2 in CI.
fn reps() -> usize {
    std::env::var("TOPO_TUNE_STRESS_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

// ---- 1. Writes that follow planted links ------------------------------------------------

#[test]
fn a_link_planted_as_a_managed_file_is_refused_and_its_target_untouched() {
    for managed in [
        "etc/nccl/conf.d/50-topo-tune.conf",
        "etc/nccl/topo-tune/nccl.env",
        "etc/nccl.conf",
    ] {
        let site = Site::new();
        let victim = site.dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let at = site.node().join(managed);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&at);
        symlink(&victim, &at).unwrap();
        let o = site.init(11, &[]);
        assert_ne!(o.status.code(), Some(0), "{managed}");
        let err = error_of(&o);
        assert!(err.contains("symbolic link: refused"), "{managed}: {err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        // Nothing of the victim was copied into topo-tune's state either.
        let state = site.node().join("etc/nccl/topo-tune");
        let copied = walk(&state)
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("precious")));
        assert!(!copied, "{managed}: the link's target reached topo-tune's backups");
    }
}

#[test]
fn a_directory_link_inside_the_tree_is_refused() {
    for dir in [
        "etc",
        "etc/nccl",
        "etc/nccl/conf.d",
        "etc/nccl/topo-tune",
        "etc/nccl/topo-tune/backups",
    ] {
        let site = Site::new();
        let elsewhere = site.dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let at = site.node().join(dir);
        if dir == "etc" {
            std::fs::remove_dir_all(&at).unwrap();
        } else if dir.ends_with("backups") {
            // A first run makes the state directory; then the backups dir is swapped.
            assert_eq!(site.init(11, &[]).status.code(), Some(0));
            let _ = std::fs::remove_dir_all(&at);
        }
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        symlink(&elsewhere, &at).unwrap();
        let o = site.init(12, &[]);
        assert_ne!(o.status.code(), Some(0), "{dir}");
        assert!(
            error_of(&o).contains("symbolic link: refused"),
            "{dir}: {}",
            error_of(&o)
        );
        assert!(
            walk(&elsewhere).is_empty(),
            "{dir}: files landed outside the tree: {:?}",
            walk(&elsewhere)
        );
    }
}

#[test]
fn plan_and_collect_outputs_never_write_through_links() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: n1\n    simulate: aws-p4d\n").unwrap();
    // plan --output-dir: plan.json is a planted link.
    let plan_dir = dir.path().join("plan");
    std::fs::create_dir_all(&plan_dir).unwrap();
    symlink(&victim, plan_dir.join("plan.json")).unwrap();
    let o = tt(["plan"]).config(&cfg).out(&plan_dir).run();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link: refused"));
    // init --collect-only: the host's directory is a planted link.
    let snaps = dir.path().join("snaps");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&snaps).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, snaps.join("n1")).unwrap();
    let o = tt(["init", "--collect-only"]).config(&cfg).out(&snaps).run();
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(walk(&elsewhere).is_empty());
}

/// Regular files under `dir` (links are not followed or listed).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// A change made to a JSON document (a manifest, a snapshot).
type Alter = fn(&mut Value);

// ---- 2. Rollback trusts the manifest ------------------------------------------------------

#[test]
fn a_tampered_manifest_is_refused_and_nothing_outside_is_touched() {
    let tampers: [(&str, Alter); 4] = [
        ("a run's path leaves the tree", |m| {
            m["runs"][0]["files"][0]["path"] = "/etc/../../../victim".into();
        }),
        ("a backup outside the backup directory", |m| {
            let files = m["runs"][0]["files"].as_array_mut().unwrap();
            let f = files.iter_mut().find(|f| f["backup"].is_string()).unwrap();
            f["backup"] = "backups/../../../../../victim".into();
        }),
        ("an owned path topo-tune does not manage", |m| {
            m["owned"]["/etc/shadow"] = "0".repeat(64).into();
        }),
        ("a run id that is a path", |m| {
            m["runs"][0]["id"] = "../../x".into();
        }),
    ];
    for (what, tamper) in tampers {
        let site = Site::new();
        assert_eq!(site.init(11, &[]).status.code(), Some(0));
        let victim = site.dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let manifest = site.node().join("etc/nccl/topo-tune/manifest.json");
        let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
        tamper(&mut m);
        std::fs::write(&manifest, m.to_string()).unwrap();
        let before = site.file("/etc/nccl.conf");
        let o = site.rollback();
        assert_ne!(o.status.code(), Some(0), "{what}");
        assert!(
            error_of(&o).contains("refused, nothing was changed"),
            "{what}: {}",
            error_of(&o)
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "{what}");
        assert_eq!(site.file("/etc/nccl.conf"), before, "{what}");
        // init refuses the same state rather than building on it.
        assert_ne!(site.init(12, &[]).status.code(), Some(0), "{what}");
    }
}

// ---- 3. Concurrent runs -----------------------------------------------------------------

#[test]
fn eight_runs_at_once_serialise_and_lose_nothing() {
    for rep in 0..reps() {
        let site = Site::new();
        // Write the configs first: the runs race only on the node's files.
        for t in 1..=8 {
            site.config(t);
        }
        let children: Vec<_> = (1..=8u32)
            .map(|t| {
                let mut cmd = std::process::Command::new(crate::common::run::binary_path());
                cmd.args(["--output", "json", "init", "--cluster-config"])
                    .arg(site.dir.path().join(format!("cluster-{t}.yaml")))
                    .arg("--output-dir")
                    .arg(&site.out)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert_eq!(
                o.status.code(),
                Some(0),
                "rep {rep}: {}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
        check_consistent(&site, rep);
        site.rollback_all();
        assert_eq!(
            site.file("/etc/nccl.conf").as_deref(),
            Some(ORIGINAL),
            "rep {rep}: the operator's file"
        );
    }
}

/// `/etc/nccl.conf` is what the drop-ins assemble, the preserved drop-in is exactly the
/// operator's file, and the manifest owns what is on disk.
fn check_consistent(site: &Site, rep: usize) {
    let conf = site.file("/etc/nccl.conf").unwrap();
    let dropin = site.file("/etc/nccl/conf.d/50-topo-tune.conf").unwrap();
    let timeout = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("NCCL_IB_TIMEOUT="))
            .map(str::to_string)
    };
    assert_eq!(
        timeout(&conf),
        timeout(&dropin),
        "rep {rep}: nccl.conf and the drop-in are from one run"
    );
    assert_eq!(
        site.file("/etc/nccl/conf.d/00-preserved-nccl.conf").as_deref(),
        Some(ORIGINAL),
        "rep {rep}: the operator's file is kept line for line, and nothing else"
    );
    let manifest: Value = serde_json::from_str(&site.file("/etc/nccl/topo-tune/manifest.json").unwrap()).unwrap();
    use sha2::Digest;
    let sha = format!("{:x}", sha2::Sha256::digest(conf.as_bytes()));
    assert_eq!(manifest["owned"]["/etc/nccl.conf"], sha, "rep {rep}");
    assert!(manifest["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["pending"].is_null()));
}

// ---- 4. Killed at any rename, first run or later -------------------------------------------

#[test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs --features fault-injection")]
fn killed_at_every_rename_rollback_restores_the_original() {
    for rep in 0..reps().min(20) {
        for later in [false, true] {
            let mut at = 1;
            loop {
                let site = Site::new();
                if later {
                    assert_eq!(site.init(11, &[]).status.code(), Some(0));
                }
                let n = at.to_string();
                let o = site.init(12, &[("TOPO_TUNE_FAULT_AT_RENAME", &n)]);
                if o.status.code() == Some(0) {
                    break; // past the last rename: the run completed
                }
                // Path 1: roll back everything.
                site.rollback_all();
                assert_eq!(
                    site.file("/etc/nccl.conf").as_deref(),
                    Some(ORIGINAL),
                    "rep {rep}, later={later}, killed before rename {at}: rollback"
                );
                // Path 2: the next run recovers and completes; rolling back restores too.
                let site = Site::new();
                if later {
                    assert_eq!(site.init(11, &[]).status.code(), Some(0));
                }
                assert_ne!(
                    site.init(12, &[("TOPO_TUNE_FAULT_AT_RENAME", &n)]).status.code(),
                    Some(0)
                );
                assert_eq!(site.init(12, &[]).status.code(), Some(0));
                check_consistent(&site, rep);
                site.rollback_all();
                assert_eq!(
                    site.file("/etc/nccl.conf").as_deref(),
                    Some(ORIGINAL),
                    "rep {rep}, later={later}, killed before rename {at}: rerun, then rollback"
                );
                at += 1;
                assert!(at < 64, "the run never completed");
            }
            assert!(at > 5, "a run has several renames (got {})", at - 1);
        }
    }
}

// ---- 10. Path traversal through a host name -------------------------------------------------

#[test]
fn a_host_that_names_a_directory_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for host in ["..", ".", "a/b", "a..b", "x."] {
        let cfg = dir.path().join("c.yaml");
        std::fs::write(&cfg, format!("nodes:\n  - host: \"{host}\"\n    simulate: aws-p4d\n")).unwrap();
        let o = tt(["init"]).config(&cfg).out(&out).run();
        assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()), "{host}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("c.yaml:2:"), "{host}: {err}");
        assert!(
            !out.exists() && !dir.path().join("etc").exists(),
            "{host}: something was written"
        );
    }
}

// ---- 5. Injection from node answers into files and terminals ------------------------------

/// A snapshot as a node would answer it, from the repository's p5en capture, altered.
fn crafted_snapshot(alter: impl Fn(&mut Value)) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/snapshots/aws-p5en.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    alter(&mut doc);
    doc.to_string()
}

/// `init --from-probes` on one node whose snapshot file is `snapshot`.
fn init_from_snapshot(snapshot: &str, human: bool) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes");
    std::fs::create_dir_all(&probes).unwrap();
    std::fs::write(probes.join("n1.json"), snapshot).unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nccl_version: \"2.28.9\"\nnodes:\n  - host: n1\n").unwrap();
    let mut cmd = topo_tune();
    if !human {
        cmd.args(["--output", "json"]);
    }
    let o = cmd
        .args(["init", "--cluster-config"])
        .arg(&cfg)
        .arg("--from-probes")
        .arg(&probes)
        .arg("--output-dir")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    (o, dir)
}

#[test]
fn a_crafted_snapshot_is_refused_before_it_reaches_a_file() {
    let cases: [(&str, Alter, &str); 5] = [
        (
            "an attribute smuggled into the topology XML",
            |d| d["machine"]["architecture"] = "x86_64\" evil=\"1".into(),
            "machine.architecture",
        ),
        (
            "a malformed XML value",
            |d| d["machine"]["architecture"] = "x86<64".into(),
            "machine.architecture",
        ),
        (
            "a NIC name that adds devices to NCCL_IB_HCA",
            |d| d["nics"][0]["name"] = "rdmap79s0,mlx5_9".into(),
            "nics[0].name",
        ),
        (
            "a NIC name that flips exact matching",
            |d| d["nics"][0]["rdma"]["device"] = "=mlx5_0".into(),
            "nics[0].rdma.device",
        ),
        (
            "a PCI class that closes its attribute",
            |d| d["gpus"][0]["class"] = "0x0302\"/><x".into(),
            "gpus[0].class",
        ),
    ];
    for (what, alter, field) in cases {
        let (o, dir) = init_from_snapshot(&crafted_snapshot(alter), false);
        assert_eq!(o.status.code(), Some(topo_tune::exit::ALL_FAILED.code()), "{what}");
        let err = error_of(&o);
        assert!(err.contains("refused") && err.contains(field), "{what}: {err}");
        assert!(!dir.path().join("out/n1/etc").exists(), "{what}: something was written");
    }
}

#[test]
fn control_characters_from_a_node_are_shown_not_obeyed() {
    // A GPU model with a terminal escape: refused at the boundary, and the message that says
    // so shows the escape as text.
    let (o, _dir) = init_from_snapshot(
        &crafted_snapshot(|d| d["gpus"][0]["name"] = "NVIDIA H200\u{1b}]0;owned\u{7}\r\u{1b}[2Kall nodes ok".into()),
        true,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    for text in [&out, &err] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'),
            "{text}"
        );
    }
    assert!(out.contains("gpus[0].name"), "{out}");
    // A path with an escape in it reaches the table through a failure message.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "nodes:\n  - host: n1\n    simulate: \"/nonexistent/\\e[2Jx.xml\"\n",
    )
    .unwrap();
    let o = tt(["init", "--collect-only"])
        .config(&cfg)
        .out(dir.path().join("out"))
        .run();
    // A path that does not exist is refused at its line (issue 34), the escape shown escaped.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains('\u{1b}') && err.contains("\\u{1b}[2Jx.xml"), "{err}");
}

// ---- 6 and 13. Panics, hangs, unbounded work ------------------------------------------------

fn quick(cmd: &mut assert_cmd::Command) -> Output {
    let start = std::time::Instant::now();
    let o = cmd.output().unwrap();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "{cmd:?} took {:?}",
        start.elapsed()
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{cmd:?}: {err}");
    o
}

#[test]
fn out_of_range_numbers_are_refused_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: n1\n    simulate: aws-p4d\n").unwrap();
    let o = quick(
        topo_tune()
            .env("TOPO_TUNE_FORKS", "4611686018427387904")
            .args(["plan", "--cluster-config"])
            .arg(&cfg),
    );
    assert_eq!(o.status.code(), Some(topo_tune::exit::USAGE.code()));
    for flag in ["--command-timeout", "--connect-timeout"] {
        let o = quick(
            topo_tune()
                .args(["plan", flag, "18446744073709551615", "--cluster-config"])
                .arg(&cfg),
        );
        assert_eq!(o.status.code(), Some(topo_tune::exit::USAGE.code()), "{flag}");
    }
    for (key, line) in [
        ("command_timeout", "ssh:\n  command_timeout: 18446744073709551615\n"),
        ("connect_timeout", "ssh:\n  connect_timeout: 100000\n"),
        ("control_persist", "ssh:\n  control_persist: 99999999\n"),
        ("forks", "ssh:\n  forks: 4611686018427387904\n"),
    ] {
        std::fs::write(&cfg, format!("{line}nodes:\n  - host: n1\n    simulate: aws-p4d\n")).unwrap();
        let o = quick(topo_tune().args(["plan", "--cluster-config"]).arg(&cfg));
        assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()), "{key}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(key), "{key}");
    }
}

#[test]
fn devices_fifos_and_huge_inputs_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.yaml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = quick(topo_tune().args(["plan", "--cluster-config"]).arg(&fifo));
    assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a FIFO: refused"));
    // simulate: /dev/zero
    let cfg = dir.path().join("c.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: n1\n    simulate: /dev/zero\n").unwrap();
    let o = quick(
        topo_tune()
            .args(["--output", "json", "init", "--collect-only", "--cluster-config"])
            .arg(&cfg)
            .arg("--output-dir")
            .arg(dir.path().join("o")),
    );
    assert!(error_of(&o).contains("a character device: refused"), "{}", error_of(&o));
    // An NCCL file with 100,000 GPUs (7.6 MB): refused by count, not planned.
    let mut big = String::from("<system version=\"1\"><cpu numaid=\"0\" affinity=\"ff\">\n");
    for i in 0..100_000u32 {
        big.push_str(&format!(
            "<pci busid=\"{:04x}:{:02x}:{:02x}.0\" class=\"0x030200\"><gpu dev=\"{i}\" sm=\"90\"/></pci>\n",
            i >> 16,
            (i >> 8) & 0xff,
            i & 0x1f
        ));
    }
    big.push_str("</cpu></system>\n");
    let f = dir.path().join("big.xml");
    std::fs::write(&f, &big).unwrap();
    let o = quick(topo_tune().args(["probe", "--from-nccl-topo"]).arg(&f));
    assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(String::from_utf8_lossy(&o.stderr).contains("100000 GPUs, more than the 256"));
    // 5,000 nested <pci>: refused, no stack overflow.
    let deep = format!(
        "<system version=\"1\"><cpu numaid=\"0\">{}{}</cpu></system>",
        "<pci busid=\"0000:01:00.0\" class=\"0x060400\">".repeat(5000),
        "</pci>".repeat(5000)
    );
    std::fs::write(&f, &deep).unwrap();
    let o = quick(topo_tune().args(["probe", "--from-nccl-topo"]).arg(&f));
    assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nested"));
    // A 10 MB foreign nccl.conf of duplicate lines: refused by size, nothing changed.
    let site = Site::new();
    std::fs::write(site.node().join("etc/nccl.conf"), "NCCL_DEBUG=WARN\n".repeat(700_000)).unwrap();
    let o = quick(
        topo_tune()
            .args(["--output", "json", "init", "--cluster-config"])
            .arg(site.config(1))
            .arg("--output-dir")
            .arg(&site.out),
    );
    assert!(error_of(&o).contains("larger than 1048576 bytes"), "{}", error_of(&o));
    assert!(!site.node().join("etc/nccl/conf.d").exists());
}

#[test]
fn an_infinite_or_truncated_or_dtd_laden_hwloc_export_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/aws-p4d.xml")).unwrap();
    let f = dir.path().join("x.xml");
    let cases = [
        ("truncated", good[..good.len() * 2 / 3].to_string(), "not well-formed"),
        (
            "internal DTD",
            good.replacen(
                "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">",
                "<!DOCTYPE topology [<!ENTITY a \"aaaaaaaaaa\">]>",
                1,
            ),
            "internal DTD",
        ),
        (
            "a set without its complete_ twin (hwloc crashed on it)",
            good.replacen(
                " complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\"",
                " allowed_nodeset=\"0x00000003\"",
                1,
            ),
            "no complete_nodeset",
        ),
        (
            "a GPU's bus id twice",
            {
                let gpu = "<object type=\"PCIDev\" gp_index=\"351\" pci_busid=\"0000:10:1c.0\"";
                let at = good.find(gpu).unwrap();
                // The GPU's PCIDev holds only self-closed OS devices: it ends at the next `</object>`.
                let end = good[at..].find("</object>").unwrap() + at + "</object>".len();
                let copy = good[at..end].replace("gp_index=\"351\"", "gp_index=\"9351\"");
                format!("{}{}{}", &good[..end], copy, &good[end..])
            },
            "appears twice",
        ),
        (
            "infinite cpuset",
            good.replace("cpuset=\"0x000000ff,0xffff0000,0x00ffffff\"", "cpuset=\"0xf...f\""),
            "infinite",
        ),
    ];
    for (what, text, expect) in cases {
        std::fs::write(&f, &text).unwrap();
        let o = quick(topo_tune().args(["probe", "--from-hwloc-xml"]).arg(&f));
        assert_eq!(
            o.status.code(),
            Some(topo_tune::exit::DATA_ERROR.code()),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(expect),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

// ---- 7. Silently accepted ---------------------------------------------------------------

#[test]
fn yaml_that_only_looks_right_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    for (what, text, at) in [
        ("port 0", "ssh:\n  port: 0\nnodes:\n  - host: n1\n", "c.yaml:2:"),
        ("port null", "ssh:\n  port: null\nnodes:\n  - host: n1\n", "c.yaml:2:"),
        ("a node's port null", "nodes:\n  - host: n1\n    port:\n", "c.yaml:3:"),
        ("a core tag", "nodes:\n  - host: !!str n1\n", "c.yaml:2:11"),
        (
            "a custom tag",
            "nodes:\n  - host: n1\n    labels: {rack: !rack r1}\n",
            "c.yaml:3:",
        ),
        ("CR-only line ends", "nodes:\r  - host: n1\r", "c.yaml:1:"),
        (
            "a version with a newline",
            "nccl_version: \"2.28.9\\nX\"\nnodes:\n  - host: n1\n",
            "c.yaml:1:",
        ),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let o = quick(topo_tune().args(["init", "--list", "--cluster-config"]).arg(&cfg));
        assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()), "{what}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(at), "{what}: {err}");
    }
    // Quoted `!` is text, not a tag.
    std::fs::write(dir.path().join("!odd-but-quoted.xml"), "<topology/>").unwrap();
    std::fs::write(&cfg, "nodes:\n  - host: n1\n    simulate: \"!odd-but-quoted.xml\"\n").unwrap();
    let o = quick(topo_tune().args(["init", "--list", "--cluster-config"]).arg(&cfg));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn twenty_ranges_cannot_add_up_to_millions_of_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let mut text = String::from("nodes:\n");
    for r in 0..20 {
        text.push_str(&format!("  - host: \"r{r}-n[00001-99999]\"\n    simulate: aws-p4d\n"));
    }
    std::fs::write(&cfg, text).unwrap();
    let o = quick(topo_tune().args(["init", "--list", "--cluster-config"]).arg(&cfg));
    assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    assert!(String::from_utf8_lossy(&o.stderr).contains("more than 100000 nodes in all"));
}

// ---- 13. Operator edits, closed stdout, FSROOT=/ ---------------------------------------------

#[test]
fn an_edited_nccl_conf_keeps_only_the_operators_lines() {
    let site = Site::new();
    assert_eq!(site.init(11, &[]).status.code(), Some(0));
    let mut conf = site.file("/etc/nccl.conf").unwrap();
    conf.push_str("NCCL_IB_SL=3\n");
    std::fs::write(site.node().join("etc/nccl.conf"), &conf).unwrap();
    assert_eq!(site.init(12, &[]).status.code(), Some(0));
    assert_eq!(
        site.file("/etc/nccl/conf.d/00-preserved-nccl.conf").as_deref(),
        Some(format!("{ORIGINAL}NCCL_IB_SL=3\n").as_str()),
        "the operator's added line joins their kept file; topo-tune's own lines do not"
    );
    let conf = site.file("/etc/nccl.conf").unwrap();
    assert!(
        conf.contains("NCCL_IB_SL=3\n") && conf.contains("NCCL_IB_TIMEOUT=12\n"),
        "{conf}"
    );
}

#[test]
fn an_unwritable_stdout_is_an_error() {
    // `> /dev/full`: every write fails (ENOSPC). A closed stdout, by contrast, is reopened on
    // /dev/null by the Rust runtime before main (docs/exit-codes.md).
    let xml = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/aws-p4d.xml");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} probe --from-hwloc-xml {} > /dev/full",
            crate::common::run::binary_path().display(),
            xml.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(topo_tune::exit::IO_ERROR.code()),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("writing output"));
}

// ---- 8. Interrupted collection ----------------------------------------------------------

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

fn ssh_control_dirs() -> std::collections::BTreeSet<PathBuf> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("topo-tune-ssh-"))
        .map(|e| e.path())
        .collect()
}

fn wait_until(what: &str, secs: u64, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} (waited {secs} s)");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs --features fault-injection")]
fn sigterm_during_collection_leaves_nothing_behind() {
    use crate::common::machines;
    use crate::common::sshd::{Node, SshCluster};
    for (signal, code) in [
        ("-TERM", topo_tune::exit::TERMINATED),
        ("-INT", topo_tune::exit::INTERRUPTED),
    ] {
        let trees = tempfile::tempdir().unwrap();
        machines::cpu_only(&trees.path().join("cpu"));
        let cluster = SshCluster::start(&[Node::SlowProbe(trees.path().join("cpu"))]);
        let cfg = cluster.cluster_yaml("");
        let remote = cluster.dir.path().join("remote-cache").display().to_string();
        let masters = cluster.ssh_config.display().to_string();
        let out = tempfile::tempdir().unwrap();
        let dirs_before = ssh_control_dirs();
        let child = std::process::Command::new(crate::common::run::binary_path())
            .args(["--output", "json", "init", "--collect-only", "--cluster-config"])
            .arg(&cfg)
            .arg("--output-dir")
            .arg(out.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the node side starts", 60, || {
            processes_with(&remote).iter().any(|c| c.contains(" node probe"))
        });
        // This run's control directory: the new one its ssh master names (other tests may be
        // making their own at the same time).
        let named: Vec<String> = processes_with(&masters)
            .iter()
            .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter(|t| t.starts_with("/tmp/topo-tune-ssh-"))
            .collect();
        let ours: Vec<PathBuf> = ssh_control_dirs()
            .difference(&dirs_before)
            .filter(|d| named.iter().any(|t| t.starts_with(&*d.to_string_lossy())))
            .cloned()
            .collect();
        assert!(
            !ours.is_empty(),
            "a private ssh directory exists while the run is on: {named:?}"
        );
        let pid = child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success());
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(code.code()),
            "{signal}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(json(&o)["error"]["kind"], "interrupted", "{signal}");
        assert!(
            ours.iter().all(|d| !d.exists()),
            "{signal}: the ssh control directory is removed"
        );
        wait_until(&format!("{signal}: the ssh master ends"), 10, || {
            processes_with(&masters).iter().all(|c| !c.starts_with("ssh "))
        });
        wait_until(&format!("{signal}: the node side ends"), 10, || {
            processes_with(&remote).is_empty()
        });
    }
}

// ---- 5 (over ssh). A crafted answer from a node ----------------------------------------------

#[test]
fn a_crafted_answer_over_ssh_is_refused_at_the_boundary() {
    use crate::common::machines;
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    machines::cpu_only(&trees.path().join("cpu"));
    // A stand-in for the node side that answers a well-formed report with a crafted snapshot.
    let snapshot = crafted_snapshot(|d| d["machine"]["architecture"] = "x86_64\" evil=\"1".into());
    let report = format!(
        "{{\"protocol\":1,\"tool_version\":\"{}\",\"ok\":{snapshot}}}",
        env!("CARGO_PKG_VERSION")
    );
    let answer = trees.path().join("answer.json");
    std::fs::write(&answer, report).unwrap();
    let fake = trees.path().join("topo-tune-crafted");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncat >/dev/null\ncat {}\nprintf '\\033]0;owned\\007' >&2\nexit 0\n",
            answer.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = SshCluster::start(&[Node::Fsroot(trees.path().join("cpu"))]);
    let cfg = cluster.cluster_yaml("");
    let out = tempfile::tempdir().unwrap();
    let o = tt(["init", "--collect-only"])
        .json()
        .config(&cfg)
        .out(out.path())
        .arg("--remote-binary")
        .arg(&fake)
        .run();
    assert_eq!(o.status.code(), Some(topo_tune::exit::ALL_FAILED.code()));
    let doc = json(&o);
    assert_eq!(doc["nodes"][0]["error"]["kind"], "bad_answer", "{doc}");
    assert!(error_of(&o).contains("machine.architecture"), "{}", error_of(&o));
    assert!(!out.path().join("node1/snapshot.json").exists());
}

// ---- 13. One crashing import takes down only its node ---------------------------------------

#[test]
#[cfg_attr(not(feature = "fault-injection"), ignore = "needs --features fault-injection")]
fn an_import_that_crashes_fails_only_its_node() {
    // An hwloc export on which the C library dies (here: made to, by the fault hook) fails
    // its node; the child process takes the crash and the other node is collected.
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/aws-p4d.xml")).unwrap();
    std::fs::write(dir.path().join("crashes.xml"), &good).unwrap();
    std::fs::write(dir.path().join("good.xml"), &good).unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "nodes:\n  - host: bad\n    simulate: crashes.xml\n  - host: good\n    simulate: good.xml\n",
    )
    .unwrap();
    let o = Run::new()
        .env("TOPO_TUNE_FAULT_CRASH_ON", "crashes.xml")
        .args(["--output", "json", "init", "--collect-only", "--cluster-config"])
        .arg(&cfg)
        .out(dir.path().join("out"))
        .run();
    let doc = json(&o);
    assert_eq!(doc["nodes"][1]["status"], "ok", "{doc}");
    assert_eq!(doc["nodes"][0]["status"], "failed", "{doc}");
    assert!(
        doc["nodes"][0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("died (signal 6)"),
        "{doc}"
    );
}

// ---- 9 and 12. irq-pin off its own rules; --fsroot trees; the irqbalance config ------------

fn irq_pin(root: &Path, args: &[&str]) -> Output {
    quick(
        topo_tune()
            .args(["--output", "json", "irq-pin"])
            .args(args)
            .arg("--fsroot")
            .arg(root),
    )
}

fn affinities(root: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = walk(&root.join("proc/irq"))
        .into_iter()
        .filter(|p| p.ends_with("smp_affinity_list"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn a_garbage_online_list_stops_irq_pin_before_anything_moves() {
    use crate::common::machines::{self, Mlx5Naming};
    for online in ["0-99999\n", "garbage\n", "0-3,,5\n"] {
        let dir = tempfile::tempdir().unwrap();
        machines::irq_box(dir.path(), Mlx5Naming::Modern);
        std::fs::write(dir.path().join("sys/devices/system/cpu/online"), online).unwrap();
        let before = affinities(dir.path());
        let o = irq_pin(dir.path(), &["--reserve-cpus", "0-31"]);
        assert_eq!(
            o.status.code(),
            Some(topo_tune::exit::DATA_ERROR.code()),
            "{online:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stderr).contains("cpu/online"), "{online:?}");
        assert_eq!(affinities(dir.path()), before, "{online:?}: nothing moved");
    }
}

#[test]
fn irq_pin_never_writes_through_a_planted_link_or_waits_on_a_fifo() {
    use crate::common::machines::{self, Mlx5Naming};
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    // Two completion vectors the plan moves: one's file is a link out, the other a FIFO.
    let plan = json(&irq_pin(dir.path(), &["--dry-run", "--reserve-cpus", "0-3"]));
    let moved: Vec<u64> = plan["nodes"][0]["plan"]["pins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["action"] == "set")
        .map(|p| p["irq"].as_u64().unwrap())
        .take(2)
        .collect();
    let (linked, fifo_irq) = (moved[0], moved[1]);
    let irq = dir.path().join(format!("proc/irq/{linked}/smp_affinity_list"));
    std::fs::remove_file(&irq).unwrap();
    symlink(&victim, &irq).unwrap();
    let fifo = dir.path().join(format!("proc/irq/{fifo_irq}/smp_affinity_list"));
    std::fs::remove_file(&fifo).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = irq_pin(dir.path(), &["--reserve-cpus", "0-3"]);
    let doc = json(&o);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let pins = doc["nodes"][0]["plan"]["pins"].as_array().unwrap();
    for irq in [linked, fifo_irq] {
        let p = pins.iter().find(|p| p["irq"] == irq).unwrap();
        assert_eq!(p["action"], "failed", "IRQ {irq}: {p}");
    }
    // /proc/interrupts as a FIFO: read as unreadable, never waited on.
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let interrupts = dir.path().join("proc/interrupts");
    std::fs::remove_file(&interrupts).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&interrupts)
        .status()
        .unwrap()
        .success());
    irq_pin(dir.path(), &["--dry-run", "--reserve-cpus", "0-3"]);
}

#[test]
fn the_unit_runs_a_binary_whose_path_has_spaces_and_percent() {
    use crate::common::machines::{self, Mlx5Naming};
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path().join("tree").as_path(), Mlx5Naming::Modern);
    let odd = dir.path().join("my tools 100%");
    std::fs::create_dir_all(&odd).unwrap();
    let bin = odd.join("topo-tune");
    std::fs::copy(crate::common::run::binary_path(), &bin).unwrap();
    let o = std::process::Command::new(&bin)
        .args(["irq-pin", "--install", "--reserve-cpus", "0-3", "--fsroot"])
        .arg(dir.path().join("tree"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let unit = dir.path().join("tree/etc/systemd/system/topo-tune-irq-pin.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(&format!(
            "ExecStart=\"{}/my tools 100%%/topo-tune\" irq-pin",
            dir.path().display()
        )),
        "{text}"
    );
    let v = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    assert!(
        v.status.success(),
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

#[test]
fn the_irqbalance_ban_edits_one_assignment_and_keeps_a_backup() {
    use crate::common::machines::{self, Mlx5Naming};
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    std::fs::create_dir_all(dir.path().join("proc/4242")).unwrap();
    std::fs::write(dir.path().join("proc/4242/comm"), "irqbalance\n").unwrap();
    std::fs::create_dir_all(dir.path().join("etc/default")).unwrap();
    let original = "# ops\r\nIRQBALANCE_ONESHOT=yes\r\nIRQBALANCE_ARGS='--hintpolicy=subset \\\n  --policyscript=/etc/x.sh'  # tuned\r\nTAIL=1";
    let config = dir.path().join("etc/default/irqbalance");
    std::fs::write(&config, original).unwrap();
    let o = irq_pin(dir.path(), &["--reserve-cpus", "0-3", "--irqbalance", "ban"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# ops\r\nIRQBALANCE_ONESHOT=yes\r\nIRQBALANCE_ARGS='--hintpolicy=subset \\\n  --policyscript=/etc/x.sh --banmod=mlx5'  # tuned\r\nTAIL=1"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("etc/default/irqbalance.topo-tune.bak")).unwrap(),
        original
    );
}

/// `rollback` twice undoes the last run once: the second says there is nothing newer to undo
/// and names the older run, which is undone only when asked for by id (`--run`).
#[test]
fn a_second_rollback_does_not_reach_back_into_older_runs() {
    let site = Site::new();
    assert_eq!(site.init(20, &[]).status.code(), Some(0));
    let after_first = site.file("/etc/nccl.conf").unwrap();
    let first_run = json(&site.init(22, &[]))["nodes"][0]["run_id"]
        .as_str()
        .map(str::to_string);
    assert!(first_run.is_some());
    let o = site.rollback();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(json(&o)["changed"], true);
    assert_eq!(
        site.file("/etc/nccl.conf").unwrap(),
        after_first,
        "the last run is undone"
    );

    let again = site.rollback();
    assert_eq!(again.status.code(), Some(0), "nothing to do is not a failure");
    let doc = json(&again);
    assert_eq!(doc["changed"], false);
    let note = doc["nodes"][0]["note"].as_str().unwrap().to_string();
    assert!(note.starts_with("nothing newer to undo"), "{note}");
    assert_eq!(
        site.file("/etc/nccl.conf").unwrap(),
        after_first,
        "the older run is kept"
    );

    let older = note.rsplit("--run ").next().unwrap();
    let wrong = json(&site.rollback_run(Some("20200101T000000Z-1")));
    assert_eq!(wrong["changed"], false);
    assert!(wrong["nodes"][0]["note"]
        .as_str()
        .unwrap()
        .contains("not here: run 20200101T000000Z-1 is not recorded here"));
    assert_eq!(wrong["run"]["not_there"], 1, "a run the node never ran: {wrong}");
    let named = site.rollback_run(Some(older));
    assert_eq!(json(&named)["changed"], true);
    assert_eq!(
        site.file("/etc/nccl.conf").unwrap(),
        ORIGINAL,
        "back to the operator's file"
    );
    // A new run clears it all: the next plain rollback undoes that run.
    assert_eq!(site.init(24, &[]).status.code(), Some(0));
    assert_eq!(json(&site.rollback())["changed"], true);
    assert_eq!(site.file("/etc/nccl.conf").unwrap(), ORIGINAL);
}

// ---- 5 (over ssh). A crafted doctor answer ---------------------------------------------------

/// A node's doctor answer is checked like every other answer: unknown checks, more checks
/// than doctor has (a series each in the textfile), one check twice (node_exporter drops a
/// file with a duplicate series), none at all (the node would pass), a 10 MB detail, and a
/// node answering as another node of the inventory.
#[test]
fn a_crafted_doctor_answer_is_refused_at_the_boundary() {
    use crate::common::machines;
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    machines::cpu_only(&trees.path().join("cpu"));
    let answer = trees.path().join("answer.json");
    let fake = trees.path().join("topo-tune-crafted");
    std::fs::write(&fake, format!("#!/bin/sh\ncat >/dev/null\ncat {}\n", answer.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = SshCluster::start(&[
        Node::Fsroot(trees.path().join("cpu")),
        Node::Fsroot(trees.path().join("cpu")),
    ]);
    let cfg = cluster.cluster_yaml("");
    let check =
        |id: &str, detail: &str| serde_json::json!({"check": id, "status": "pass", "detail": detail, "fix": ""});
    let many: Vec<Value> = (0..100_000).map(|i| check(&format!("c{i}"), "ok")).collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "an unknown check",
            serde_json::json!([check("limits", "ok"), check("rm -rf /", "ok")]),
            "checks[1].check: `rm -rf /` is no check of this doctor",
        ),
        ("100,000 checks", Value::Array(many), "100000 checks, more than"),
        (
            "one check twice",
            serde_json::json!([check("limits", "ok"), check("limits", "ok")]),
            "checks[1].check: `limits` answered twice",
        ),
        ("no checks", serde_json::json!([]), "no checks"),
        (
            "the controller's verdict answered by a node",
            serde_json::json!([check("limits", "ok"), check("cluster-consistency", "all agree")]),
            "checks[1].check: `cluster-consistency` is the controller's to judge",
        ),
        (
            "a 10 MB detail",
            serde_json::json!([check("limits", &"x".repeat(10 << 20))]),
            "checks[0].detail: 10485760 bytes",
        ),
    ];
    let run = |hostname: &str, checks: Value| {
        let report = serde_json::json!({"protocol": 1, "tool_version": env!("CARGO_PKG_VERSION"), "ok": {"hostname": hostname, "checks": checks}});
        std::fs::write(&answer, report.to_string()).unwrap();
        let o = tt(["doctor"])
            .json()
            .config(&cfg)
            .arg("--remote-binary")
            .arg(&fake)
            .run();
        (o.status.code(), json(&o))
    };
    for (what, checks, says) in cases {
        let (code, doc) = run("node1", checks);
        assert_eq!(code, Some(8), "{what}: no node could be checked: {doc:#}");
        for node in doc["nodes"].as_array().unwrap() {
            assert_eq!(node["error"]["kind"], "bad_answer", "{what}: {node}");
            let message = node["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(says) && message.len() < 4096,
                "{what}: {}",
                &message[..message.len().min(300)]
            );
        }
    }
    // Both nodes answer as node2: node1's answer is refused, node2's taken.
    let (code, doc) = run("node2", serde_json::json!([check("limits", "ok")]));
    assert_eq!(code, Some(4), "{doc:#}");
    let nodes = doc["nodes"].as_array().unwrap();
    let of = |host: &str| nodes.iter().find(|n| n["host"] == host).unwrap().clone();
    assert_eq!(of("node1")["error"]["kind"], "bad_answer", "{doc:#}");
    assert!(of("node1")["error"]["message"]
        .as_str()
        .unwrap()
        .contains("it comes from `node2`, another node of the inventory"));
    assert!(of("node2")["error"].is_null(), "{doc:#}");
}
