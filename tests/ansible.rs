//! The shipped Ansible role and playbooks, run for real: ansible-core from PyPI in a venv
//! (kept under target/ between runs), `ansible-playbook` against localhost (connection local,
//! `become` through `su` as root), on the bundled simulated cluster, a fake `/sys` tree and a
//! cluster whose nodes do not answer. Asserted from Ansible's own PLAY RECAP.

use crate::common::machines;
use crate::common::machines::Mlx5Naming;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The ansible-core the test installs (and docs/ansible.md names).
const ANSIBLE_CORE: &str = "ansible-core==2.19.14";

/// A venv with ansible-core, made once and kept (target/tmp/ansible-venv); the tests share it.
fn ansible_playbook() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(make_venv).clone()
}

fn make_venv() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ansible-venv");
    let playbook = venv.join("bin/ansible-playbook");
    if playbook.exists() {
        return playbook;
    }
    let run = |cmd: &mut Command, what: &str| {
        let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            o.status.success(),
            "{what} failed (PyPI must be reachable for this test):\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let _ = std::fs::remove_dir_all(&venv);
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    );
    run(
        Command::new(venv.join("bin/pip")).args(["install", "-q", "--disable-pip-version-check", ANSIBLE_CORE]),
        "pip install ansible-core",
    );
    playbook
}

/// `ok=… changed=… unreachable=… failed=…` of the recap's localhost line.
#[derive(Debug, PartialEq)]
struct Recap {
    changed: u32,
    failed: u32,
}

struct Play {
    dir: tempfile::TempDir,
    playbook: PathBuf,
    binary: PathBuf,
}

impl Play {
    fn new() -> Play {
        let playbook = ansible_playbook();
        let dir = tempfile::tempdir().unwrap();
        let python = playbook.with_file_name("python");
        std::fs::write(
            dir.path().join("inventory.ini"),
            format!(
                "[controller]\nlocalhost ansible_connection=local ansible_python_interpreter={p}\n\n\
                 [gpu_nodes]\nlocalhost ansible_connection=local ansible_python_interpreter={p}\n",
                p = python.display()
            ),
        )
        .unwrap();
        let binary = dir.path().join("bin/topo-tune");
        Play { dir, playbook, binary }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `ansible-playbook examples/ansible/BOOK` with these extra vars (JSON) and flags.
    fn run(&self, book: &str, vars: serde_json::Value, flags: &[&str]) -> (Recap, String) {
        let mut vars = vars;
        vars["topo_tune_source_binary"] = crate::common::run::binary_path().display().to_string().into();
        vars["topo_tune_binary"] = self.binary.display().to_string().into();
        vars["ansible_become_method"] = "su".into();
        let o = Command::new(&self.playbook)
            .arg("-i")
            .arg(self.path("inventory.ini"))
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("examples/ansible")
                    .join(book),
            )
            .arg("-e")
            .arg(vars.to_string())
            .args(flags)
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_LOCAL_TEMP", self.path("ansible-tmp"))
            .env("ANSIBLE_REMOTE_TEMP", self.path("ansible-tmp"))
            .env_remove("TOPO_TUNE_CLUSTER_CONFIG")
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with("localhost") && l.contains("changed="))
            .unwrap_or_else(|| panic!("no PLAY RECAP:\n{text}"));
        let field = |name: &str| -> u32 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
        };
        let recap = Recap {
            changed: field("changed"),
            failed: field("failed"),
        };
        assert_eq!(
            o.status.success(),
            recap.failed == 0,
            "exit status and recap agree:\n{text}"
        );
        (recap, text)
    }
}

fn files_under(dir: &Path) -> usize {
    if !dir.exists() {
        return 0;
    }
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 })
        .sum()
}

#[test]
fn the_role_runs_init_irq_pin_and_doctor_idempotently_with_check_and_diff() {
    let play = Play::new();
    let cluster = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = play.path("nccl-files");
    let init = serde_json::json!({
        "topo_tune_command": "init",
        "topo_tune_cluster_config": cluster,
        "topo_tune_output_dir": out.display().to_string(),
    });

    // Check mode on a fresh host: "changed" as what would change; nothing installed or written.
    let (recap, text) = play.run("site.yml", init.clone(), &["--check"]);
    assert_eq!(recap.failed, 0, "{text}");
    assert!(recap.changed >= 1, "check mode reports what would change:\n{text}");
    assert_eq!(files_under(&out), 0, "check mode wrote nothing:\n{text}");
    assert!(!play.binary.exists(), "check mode installed nothing");

    // First run: makes the directory, installs and writes; second: nothing to do.
    let (recap, text) = play.run("site.yml", init.clone(), &[]);
    assert_eq!(recap, Recap { changed: 3, failed: 0 }, "{text}");
    let written = files_under(&out);
    assert!(written > 0);
    let (recap, text) = play.run("site.yml", init.clone(), &[]);
    assert_eq!(
        recap,
        Recap { changed: 0, failed: 0 },
        "the second run changes nothing:\n{text}"
    );
    let (recap, text) = play.run("site.yml", init.clone(), &["--check"]);
    assert_eq!(recap, Recap { changed: 0, failed: 0 }, "{text}");
    // Check + diff where files are still to be written: topo-tune's diffs, shown natively.
    let fresh = play.path("fresh-files");
    let mut elsewhere = init;
    elsewhere["topo_tune_output_dir"] = fresh.display().to_string().into();
    let (recap, text) = play.run("site.yml", elsewhere, &["--check", "--diff"]);
    assert_eq!(recap, Recap { changed: 1, failed: 0 }, "{text}");
    assert!(text.contains("+++ b/etc/nccl.conf"), "the native diff:\n{text}");
    assert!(
        text.contains("ndv5-01:/etc/nccl.conf"),
        "headed by node and file:\n{text}"
    );
    assert_eq!(files_under(&fresh), 0, "check mode wrote nothing:\n{text}");

    // irq-pin on a fake tree: check mode is --dry-run; then pinned once, then nothing to do.
    let tree = play.path("irq-tree");
    machines::irq_box(&tree, Mlx5Naming::Modern);
    let affinity = || std::fs::read_to_string(tree.join("proc/irq/201/smp_affinity_list")).unwrap();
    let irq = serde_json::json!({
        "topo_tune_command": "irq-pin",
        "topo_tune_fsroot": tree.display().to_string(),
        "topo_tune_reserve_cpus": "0-3",
    });
    let doctor = |fail_on_checks: bool| {
        serde_json::json!({
            "topo_tune_command": "doctor",
            "topo_tune_fsroot": tree.display().to_string(),
            "topo_tune_reserve_cpus": "0-3",
            "topo_tune_fail_on_checks": fail_on_checks,
        })
    };
    // Every mlx5 interrupt on CPU 0: doctor's failing checks fail the task, unless allowed.
    let (recap, text) = play.run("site.yml", doctor(true), &[]);
    assert_eq!(recap, Recap { changed: 0, failed: 1 }, "{text}");
    assert!(text.contains("doctor found failing checks"), "{text}");
    let (recap, text) = play.run("site.yml", doctor(false), &[]);
    assert_eq!(recap, Recap { changed: 0, failed: 0 }, "{text}");

    let (recap, text) = play.run("site.yml", irq.clone(), &["--check"]);
    assert_eq!(recap, Recap { changed: 1, failed: 0 }, "moves pending:\n{text}");
    assert_eq!(affinity().trim(), "0", "check mode moved nothing");
    let (recap, text) = play.run("site.yml", irq.clone(), &[]);
    assert_eq!(recap, Recap { changed: 1, failed: 0 }, "{text}");
    assert_eq!(affinity().trim(), "4");
    let (recap, text) = play.run("site.yml", irq, &[]);
    assert_eq!(recap, Recap { changed: 0, failed: 0 }, "{text}");

    // doctor is read-only: never changed; once the interrupts are pinned, it passes.
    let (recap, text) = play.run("site.yml", doctor(true), &[]);
    assert_eq!(recap, Recap { changed: 0, failed: 0 }, "{text}");
    assert!(text.contains("0 failing check(s)"), "{text}");
}

#[test]
fn a_cluster_whose_nodes_do_not_answer_fails_the_play() {
    let play = Play::new();
    let cfg = play.path("dead.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ssh:\n  connect_timeout: 3\n  known_hosts: {kh}\nnodes:\n  - host: 127.0.0.1\n    port: 1\n  - host: localhost\n    port: 1\n",
            kh = play.path("known_hosts").display()
        ),
    )
    .unwrap();
    let (recap, text) = play.run(
        "site.yml",
        serde_json::json!({"topo_tune_command": "init", "topo_tune_cluster_config": cfg.display().to_string()}),
        &[],
    );
    assert_eq!(recap.failed, 1, "{text}");
    assert!(text.contains("no node succeeded"), "{text}");
    // Partial failures fail too by default, and can be allowed.
    std::fs::write(
        &cfg,
        "ssh:\n  connect_timeout: 3\nnodes:\n  - host: 127.0.0.1\n    port: 1\n  - host: paper\n    simulate: aws-p4d\n",
    )
    .unwrap();
    let out = play.path("out").display().to_string();
    let vars = |allow: bool| {
        serde_json::json!({"topo_tune_command": "init", "topo_tune_cluster_config": cfg.display().to_string(),
            "topo_tune_output_dir": out, "topo_tune_fail_on_partial": !allow})
    };
    let (recap, text) = play.run("site.yml", vars(false), &[]);
    assert_eq!(recap.failed, 1, "{text}");
    assert!(text.contains("some nodes failed"), "{text}");
    let (recap, text) = play.run("site.yml", vars(true), &[]);
    assert_eq!(recap.failed, 0, "{text}");
}

#[test]
fn collect_probes_gathers_snapshots_through_ansible() {
    let play = Play::new();
    let tree = play.path("node-tree");
    machines::dgx_like(&tree);
    let cfg = play.path("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: localhost\n").unwrap();
    let vars = serde_json::json!({
        "topo_tune_nodes": "gpu_nodes",
        "topo_tune_cluster_config": cfg.display().to_string(),
        "topo_tune_probe_args": ["--fsroot", tree.display().to_string()],
        "topo_tune_probes_dir": play.path("probes").display().to_string(),
        "topo_tune_snapshots_dir": play.path("snapshots").display().to_string(),
    });
    let (recap, text) = play.run("collect-probes.yml", vars.clone(), &[]);
    assert_eq!(recap.failed, 0, "{text}");
    assert!(play.path("snapshots/localhost/snapshot.json").exists(), "{text}");
    let (recap, text) = play.run("collect-probes.yml", vars, &[]);
    assert_eq!(
        recap,
        Recap { changed: 0, failed: 0 },
        "a second run changes nothing:\n{text}"
    );
}
