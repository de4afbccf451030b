//! `init --collect-only` over real ssh: loopback sshd nodes (see tests/common/sshd.rs for how
//! each one presents a different machine), strict host-key checking, the real binary deployed.

use crate::common::machines;
use crate::common::sshd::{Node, SshCluster};
use crate::common::tt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn profile(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/profiles/{name}.xml", env!("CARGO_MANIFEST_DIR")))
}

fn init_json(cfg: &Path, out: &Path, extra: &[&str]) -> (i32, Value) {
    let o = tt(["init", "--collect-only"])
        .json()
        .config(cfg)
        .out(out)
        .args(extra)
        .run();
    (o.status.code().unwrap_or(-1), crate::common::json(&o))
}

fn node<'a>(doc: &'a Value, host: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["host"] == host)
        .unwrap()
}

fn snapshot(out: &Path, host: &str) -> topo_tune::api::NodeSnapshot {
    topo_tune::api::NodeSnapshot::from_json(&std::fs::read_to_string(out.join(host).join("snapshot.json")).unwrap())
        .unwrap()
}

/// Our ssh processes still alive for this cluster (they carry its ssh_config path).
fn ssh_processes_of(cluster: &SshCluster) -> usize {
    let needle = cluster.ssh_config.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("ssh ") && c.contains(&needle))
        .count()
}

/// Each node of `eight_nodes_in_one_run_then_the_binary_is_reused` answered with its own
/// machine.
fn each_node_answered_with_its_own_machine(out: &std::path::Path) {
    let expect = [
        ("node1", "gpu-node-01", 8, 9),
        ("node2", "h200-vm", 1, 1),
        ("node3", "cpu-node", 0, 1),
        ("node4", "aws-p4d", 8, 8),
        ("node5", "aws-p5en", 8, 32),
        ("node6", "aws-p6-b200", 8, 18),
        ("node7", "gpu-node-07", 8, 9),
        ("node8", "h200-vm-2", 1, 1),
    ];
    for (host, hostname, gpus, nics) in expect {
        let s = snapshot(out, host);
        assert_eq!(
            (s.hostname.as_str(), s.gpus.len(), s.nics.len()),
            (hostname, gpus, nics),
            "{host}"
        );
    }
    assert_eq!(snapshot(out, "node5").machine.product.as_deref(), Some("p5en.48xlarge"));
    assert_eq!(
        snapshot(out, "node1").nics[6].rdma.as_ref().unwrap().ports[0].roce_v2_gid_indexes,
        vec![1, 3]
    );
}

#[test]
fn eight_nodes_in_one_run_then_the_binary_is_reused() {
    let trees = tempfile::tempdir().unwrap();
    let t = |n: &str| trees.path().join(n);
    machines::dgx_like(&t("dgx1"));
    machines::h200_vm(&t("vm1"));
    machines::cpu_only(&t("cpu1"));
    machines::dgx_like(&t("dgx2")).write("/proc/sys/kernel/hostname", "gpu-node-07\n");
    machines::h200_vm(&t("vm2")).write("/proc/sys/kernel/hostname", "h200-vm-2\n");
    let cluster = SshCluster::start(&[
        Node::Fsroot(t("dgx1")),
        Node::Fsroot(t("vm1")),
        Node::Fsroot(t("cpu1")),
        Node::HwlocXml(profile("aws-p4d")),
        Node::HwlocXml(profile("aws-p5en")),
        Node::HwlocXml(profile("aws-p6-b200")),
        Node::Fsroot(t("dgx2")),
        Node::Fsroot(t("vm2")),
    ]);
    let cfg = cluster.cluster_yaml("");
    let out = tempfile::tempdir().unwrap();
    let (code, doc) = init_json(&cfg, out.path(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["summary"]["ok"], 8);
    assert_eq!(doc["changed"], true);
    // The loopback nodes share one disk: the first to look uploads, the others may find the
    // (checksum-verified) binary already there.
    for n in doc["nodes"].as_array().unwrap() {
        assert_eq!(n["status"], "ok");
        assert_eq!(n["transport"], "ssh");
        assert!(n["deploy"] == "uploaded" || n["deploy"] == "reused", "{n}");
    }
    assert!(doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["deploy"] == "uploaded"));
    each_node_answered_with_its_own_machine(out.path());

    let (code, again) = init_json(&cfg, out.path(), &[]);
    assert_eq!(code, 0);
    assert!(
        again["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["deploy"] == "reused"),
        "{again:#}"
    );
    assert_eq!(again["changed"], false, "identical snapshots: nothing rewritten");
    assert_eq!(
        ssh_processes_of(&cluster),
        0,
        "control masters are closed after the run"
    );
    // A binary that is not whole at its content-addressed path is not run: it is uploaded
    // again (verified on the node before it is put in place).
    let cached: Vec<std::path::PathBuf> = std::fs::read_dir(cluster.dir.path().join("remote-cache"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("topo-tune"))
        .collect();
    assert_eq!(
        cached.len(),
        1,
        "one content-addressed copy on the shared loopback disk"
    );
    let bytes = std::fs::read(&cached[0]).unwrap();
    std::fs::write(&cached[0], &bytes[..bytes.len() / 2]).unwrap();
    let (code, third) = init_json(&cfg, out.path(), &["--forks", "1"]);
    assert_eq!(code, 0, "{third:#}");
    assert_eq!(third["nodes"][0]["deploy"], "uploaded", "{third:#}");
    assert_eq!(std::fs::read(&cached[0]).unwrap(), bytes, "whole again");
}

#[test]
fn each_failure_is_reported_per_node_while_the_others_finish() {
    let trees = tempfile::tempdir().unwrap();
    machines::dgx_like(&trees.path().join("dgx"));
    let cluster = SshCluster::start(&[
        Node::Fsroot(trees.path().join("dgx")),
        Node::ClosedPort,
        Node::ChangedHostKey,
        Node::UnknownHostKey,
        Node::WrongClientKey,
        Node::HangingProbe,
        Node::GarbageAnswer,
        Node::HugeAnswer,
        Node::HwlocXml(profile("aws-p5en")),
    ]);
    let cfg = cluster.cluster_yaml("  connect_timeout: 5\n  command_timeout: 6\n");
    let out = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let (code, doc) = init_json(&cfg, out.path(), &[]);
    let took = start.elapsed();
    assert_eq!(code, topo_tune::exit::PARTIAL_FAILURE.code(), "{doc:#}");
    crate::common::assert_schema("init", &doc);
    assert_eq!(doc["failed"], true);
    assert_eq!(
        (doc["summary"]["ok"].as_u64(), doc["summary"]["failed"].as_u64()),
        (Some(2), Some(7))
    );
    let kind = |h: &str| node(&doc, h)["error"]["kind"].as_str().unwrap_or("none").to_string();
    let msg = |h: &str| node(&doc, h)["error"]["message"].as_str().unwrap_or("").to_string();
    assert_eq!(node(&doc, "node1")["status"], "ok");
    assert_eq!(node(&doc, "node9")["status"], "ok");
    assert_eq!(kind("node2"), "connect_refused");
    assert_eq!(node(&doc, "node2")["attempts"], 2, "a refused connect is retried once");
    assert_eq!(kind("node3"), "host_key_changed");
    assert!(msg("node3").contains("nothing was sent"));
    assert_eq!(kind("node4"), "host_key_unknown");
    assert_eq!(kind("node5"), "auth_rejected");
    assert_eq!(node(&doc, "node5")["attempts"], 1, "credentials are not retried");
    assert_eq!(kind("node6"), "command_timeout");
    assert_eq!(kind("node7"), "bad_answer");
    assert!(msg("node7").contains("Welcome to gpu-node"), "{}", msg("node7"));
    assert_eq!(kind("node8"), "answer_too_large");
    // Refused keys: the node never ran a command.
    for n in [3, 4, 5] {
        assert_eq!(
            cluster.commands_log(n),
            None,
            "node{n} must not have received any command"
        );
    }
    assert!(
        took < Duration::from_secs(30),
        "the hang is bounded by the command timeout: {took:?}"
    );
    // Failed nodes leave no snapshot; the summary names them.
    assert!(!out.path().join("node6").exists());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["nodes"][2]["error"]["kind"], "host_key_changed");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ssh_processes_of(&cluster), 0, "no control master left behind");
}

#[test]
fn max_fail_budget_skips_the_rest() {
    let cluster = SshCluster::start(&[Node::ClosedPort, Node::ClosedPort, Node::ClosedPort, Node::ClosedPort]);
    let cfg = cluster.cluster_yaml("");
    let out = tempfile::tempdir().unwrap();
    let (code, doc) = init_json(&cfg, out.path(), &["--forks", "1", "--max-fail", "1"]);
    assert_eq!(code, topo_tune::exit::ALL_FAILED.code());
    let statuses: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "failed", "skipped", "skipped"]);
    assert_eq!(node(&doc, "node3")["error"]["kind"], "skipped");
}

#[test]
fn a_killed_run_leaves_no_ssh_master_behind() {
    let cluster = SshCluster::start(&[Node::HangingProbe]);
    // The node-side limit is command_timeout + 10 s; the master then idles out in 2 s.
    let cfg = cluster.cluster_yaml("  control_persist: 2\n  command_timeout: 3\n");
    let out = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(crate::common::run::binary_path())
        .args(["init", "--collect-only", "--cluster-config"])
        .arg(&cfg)
        .arg("--output-dir")
        .arg(out.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the probe is hanging on the node, then kill topo-tune outright.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster
        .commands_log(1)
        .is_some_and(|l| l.contains("topo-tune node probe"))
    {
        assert!(Instant::now() < deadline, "the probe never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ssh_processes_of(&cluster) >= 1, "a control master is running");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ssh_processes_of(&cluster) > 0 {
        assert!(
            Instant::now() < deadline,
            "the ssh control master outlived topo-tune by 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_node_without_libhwloc_gets_a_precise_diagnosis() {
    // A stand-in for the probe binary that fails exactly as the dynamic loader does on a
    // node without libhwloc (ld.so's own message and exit code 127).
    let trees = tempfile::tempdir().unwrap();
    machines::cpu_only(&trees.path().join("cpu"));
    let fake = trees.path().join("topo-tune-needs-hwloc");
    std::fs::write(&fake, "#!/bin/sh\necho \"$0: error while loading shared libraries: libhwloc.so.15: cannot open shared object file: No such file or directory\" >&2\nexit 127\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = SshCluster::start(&[Node::Fsroot(trees.path().join("cpu"))]);
    let cfg = cluster.cluster_yaml("");
    let out = tempfile::tempdir().unwrap();
    let (code, doc) = init_json(&cfg, out.path(), &["--remote-binary", fake.to_str().unwrap()]);
    assert_eq!(code, topo_tune::exit::ALL_FAILED.code());
    let n = node(&doc, "node1");
    assert_eq!(n["error"]["kind"], "missing_library", "{n}");
    let msg = n["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("lacks libhwloc 2.x") && msg.contains("libhwloc15") && msg.contains("hwloc-libs"),
        "{msg}"
    );
}

/// `init --collect-only` twice on a node that did not change reports `changed: false`, though
/// every interrupt counter moved in between; a real change (a NIC's IRQ moved) is a change.
#[test]
fn collecting_an_unchanged_node_twice_changes_nothing() {
    use crate::common::machines::{self, Mlx5Naming};
    let trees = tempfile::tempdir().unwrap();
    let tree = trees.path().join("irq");
    machines::irq_box(&tree, Mlx5Naming::Modern);
    let cluster = SshCluster::start(&[Node::Fsroot(tree.clone())]);
    let cfg = cluster.cluster_yaml("");
    let out = tempfile::tempdir().unwrap();
    let (code, doc) = init_json(&cfg, out.path(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["changed"], true);
    let file = out.path().join("node1/snapshot.json");
    let first = std::fs::read_to_string(&file).unwrap();
    // Interrupts fire between the runs: every count in /proc/interrupts grows.
    let interrupts = tree.join("proc/interrupts");
    let busier: String = std::fs::read_to_string(&interrupts)
        .unwrap()
        .lines()
        .map(|l| {
            l.split(' ')
                .map(|w| {
                    w.parse::<u64>()
                        .map_or_else(|_| w.to_string(), |n| (n + 1000).to_string())
                })
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect();
    std::fs::write(&interrupts, busier).unwrap();
    // (The counts are in the snapshot, and they did move.)
    let count = |snap: &Value| snap["nics"][0]["irqs"][0]["count"].as_u64();
    let probe = crate::common::topo_tune()
        .args(["--output", "json", "probe", "--fsroot"])
        .arg(&tree)
        .output()
        .unwrap();
    let now: Value = serde_json::from_slice(&probe.stdout).unwrap();
    let before: Value = serde_json::from_str(&first).unwrap();
    assert!(
        count(&before).is_some() && count(&now).is_some() && count(&now) != count(&before),
        "{:?} {:?}",
        count(&before),
        count(&now)
    );
    let (code, doc) = init_json(&cfg, out.path(), &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["changed"], false, "{doc:#}");
    assert_eq!(node(&doc, "node1")["changed"], false);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        first,
        "the file is left as it is"
    );
    // A real change: an interrupt's affinity.
    std::fs::write(tree.join("proc/irq/201/smp_affinity_list"), "5\n").unwrap();
    let (_, doc) = init_json(&cfg, out.path(), &[]);
    assert_eq!(doc["changed"], true, "{doc:#}");
}
