//! `irq-pin` and `doctor` on fake /sys + /proc trees in the kernel's formats, pinned for real
//! under --fsroot.

use crate::common::machines::{self, Mlx5Naming};
use crate::common::{topo_tune, tt, Run};
use serde_json::Value;
use std::path::Path;

fn json(args: &[&str], root: &Path) -> (Option<i32>, Value, String) {
    let o = tt(["--output"]).arg("json").args(args).arg("--fsroot").arg(root).run();
    (
        o.status.code(),
        serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn check<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["nodes"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap()
}

fn affinity(root: &Path, irq: u32) -> String {
    std::fs::read_to_string(root.join(format!("proc/irq/{irq}/smp_affinity_list")))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn all_on_cpu0_doctor_fails_irq_pin_fixes_doctor_passes() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let (code, doc, err) = json(&["doctor"], dir.path());
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()), "{err}");
    assert_eq!(check(&doc, "mlx5-irq-placement")["status"], "fail");
    assert!(check(&doc, "mlx5-irq-placement")["detail"]
        .as_str()
        .unwrap()
        .starts_with("64 of 64 mlx5 completion interrupts target CPU 0"));
    assert_eq!(check(&doc, "mlx5-irq-load")["status"], "fail");
    assert!(check(&doc, "mlx5-irq-load")["detail"]
        .as_str()
        .unwrap()
        .contains("100% of mlx5 completion interrupts since boot ran on CPU 0"));
    assert_eq!(check(&doc, "irqbalance")["status"], "warn");

    // Dry run: the plan, nothing written; moves pending exit 3, as `init --check` does.
    let (code, plan, _) = json(&["irq-pin", "--dry-run", "--reserve-cpus", "0-3"], dir.path());
    assert_eq!(code, Some(topo_tune::exit::CHANGES_PENDING.code()));
    assert_eq!(plan["changed"], false);
    assert_eq!(affinity(dir.path(), 201), "0");

    let (code, plan, err) = json(&["irq-pin", "--reserve-cpus", "0-3", "--irqbalance", "ban"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(plan["changed"], true);
    let pins = plan["nodes"][0]["plan"]["pins"].as_array().unwrap();
    let comp: Vec<&Value> = pins.iter().filter(|p| p["class"] == "completion").collect();
    assert_eq!(comp.len(), 64);
    // mlx5_0 is on socket 0 (CPUs 0-15 + siblings 32-47); reserved 0-3 and siblings 32-35 stay free.
    let first = &comp[0];
    assert_eq!(
        (first["irq"].as_u64(), first["target"].as_str()),
        (Some(201), Some("4"))
    );
    assert_eq!(affinity(dir.path(), 201), "4");
    for p in &comp {
        let cpu: u32 = p["target"].as_str().unwrap().parse().unwrap();
        let nic: u32 = p["nic"].as_str().unwrap().trim_start_matches("mlx5_").parse().unwrap();
        let socket0 = nic < 2;
        assert!(
            if socket0 {
                (4..16).contains(&cpu)
            } else {
                (16..32).contains(&cpu)
            },
            "{p}: a physical core of the NIC's socket, not reserved, first thread only"
        );
    }
    // One IRQ per physical core, round-robin over the node: 12 free cores on socket 0 for 32 vectors.
    let on = |cpu: &str| comp.iter().filter(|p| p["target"] == cpu).count();
    assert_eq!((on("4"), on("15")), (3, 2));
    // Managed vector: reported, not a failure. Control vectors: left alone.
    let managed = pins.iter().find(|p| p["irq"] == 205).unwrap();
    assert_eq!(managed["action"], "unsupported");
    assert_eq!(affinity(dir.path(), 205), "0");
    assert!(pins
        .iter()
        .filter(|p| p["class"] == "control")
        .all(|p| p["action"] == "leave"));
    assert_eq!(std::fs::read_to_string(dir.path().join("etc/default/irqbalance")).unwrap(), "#IRQBALANCE_ONESHOT=\n#IRQBALANCE_ARGS=\n# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.\nIRQBALANCE_ARGS=\"--banmod=mlx5\"\n");

    // Second run: nothing to do.
    let (_, again, _) = json(&["irq-pin", "--reserve-cpus", "0-3", "--irqbalance", "ban"], dir.path());
    assert_eq!(again["changed"], false, "{}", again["msg"]);

    let (code, doc, _) = json(&["doctor", "--reserve-cpus", "0-3"], dir.path());
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(check(&doc, "mlx5-irq-placement")["status"], "pass");
    assert_eq!(
        check(&doc, "mlx5-irq-load")["status"],
        "warn",
        "counters since boot still remember CPU 0"
    );
    assert_eq!(check(&doc, "irq-pins")["status"], "pass");
    assert_eq!(check(&doc, "irqbalance")["status"], "pass");

    // doctor checks the pins irq-pin recorded, whatever --reserve-cpus it is given.
    let (code, doc, _) = json(&["doctor"], dir.path());
    assert_eq!(code, Some(0));
    assert!(check(&doc, "irq-pins")["detail"]
        .as_str()
        .unwrap()
        .contains("all 63 interrupts irq-pin pinned are still in place"));
    // Something (irqbalance, a script) moves one back: the pins are undone.
    std::fs::write(dir.path().join("proc/irq/201/smp_affinity_list"), "0\n").unwrap();
    let (code, doc, _) = json(&["doctor"], dir.path());
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    assert_eq!(check(&doc, "irq-pins")["status"], "fail");
    assert!(check(&doc, "irq-pins")["detail"]
        .as_str()
        .unwrap()
        .starts_with("1 of 63 pinned interrupts moved since irq-pin (e.g. IRQ 201)"));
}

#[test]
fn old_kernel_names_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Old);
    let (code, plan, err) = json(&["irq-pin", "--dry-run"], dir.path());
    assert_eq!(code, Some(topo_tune::exit::CHANGES_PENDING.code()), "{err}");
    let pins = plan["nodes"][0]["plan"]["pins"].as_array().unwrap();
    assert_eq!(
        pins.iter().filter(|p| p["class"] == "control").count(),
        12,
        "pages/cmd/async EQs of 4 NICs"
    );
    assert_eq!(pins.iter().filter(|p| p["class"] == "completion").count(), 64);
    assert!(pins
        .iter()
        .any(|p| p["name"] == "mlx5_cmd_eq@pci:0000:17:00.0" && p["class"] == "control"));
}

#[test]
fn reserving_a_whole_numa_node_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let o = tt(["irq-pin", "--dry-run", "--reserve-cpus", "0-15", "--fsroot"])
        .arg(dir.path())
        .run();
    assert_eq!(o.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("mlx5_0: every CPU local to it (0-15,32-47) is reserved for training"),
        "{err}"
    );
    assert_eq!(affinity(dir.path(), 201), "0", "nothing changed");
}

#[test]
fn install_renders_a_unit_systemd_accepts() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let (code, _, err) = json(&["irq-pin", "--install", "--reserve-cpus", "0-3"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    let unit = dir.path().join("etc/systemd/system/topo-tune-irq-pin.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains(" irq-pin --reserve-cpus 0-3\n"), "{text}");
    assert!(dir.path().join("etc/udev/rules.d/99-topo-tune-irq-pin.rules").exists());
    let o = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze (package systemd)");
    assert!(
        o.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn doctor_on_the_vm_and_the_eight_gpu_machine() {
    let vm = tempfile::tempdir().unwrap();
    machines::h200_vm(vm.path());
    let (code, doc, err) = json(&["doctor"], vm.path());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(check(&doc, "numa-known")["status"], "warn");
    assert_eq!(check(&doc, "mlx5-irq-placement")["status"], "skip");
    assert_eq!(check(&doc, "gpu-nic-numa")["status"], "skip");
    let dgx = tempfile::tempdir().unwrap();
    machines::dgx_like(dgx.path());
    let (code, doc, _) = json(&["doctor"], dgx.path());
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    assert_eq!(check(&doc, "pcie-link")["status"], "fail", "GPU3 at x8");
    assert!(check(&doc, "pcie-link")["detail"].as_str().unwrap().contains("GPU3"));
    assert_eq!(check(&doc, "gpu-nic-numa")["status"], "pass");
}

#[test]
fn across_the_cluster_over_ssh() {
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    let tree = trees.path().join("irq");
    machines::irq_box(&tree, Mlx5Naming::Modern);
    let cluster = SshCluster::start(&[Node::Fsroot(tree.clone())]);
    let cfg = cluster.cluster_yaml("");
    // The cluster file also lists a node that exists only on paper.
    let text = std::fs::read_to_string(&cfg).unwrap() + "  - host: paper\n    simulate: aws-p4d\n";
    std::fs::write(&cfg, format!("reserved_cpus: \"0-3\"\n{text}")).unwrap();
    let run = |args: &[&str]| {
        let o = Run::new().json().args(args).config(&cfg).run();
        (
            o.status.code(),
            serde_json::from_slice::<Value>(&o.stdout)
                .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr))),
        )
    };
    let (code, doc) = run(&["doctor"]);
    crate::common::assert_schema("doctor", &doc);
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    assert_eq!(
        check(&doc, "mlx5-irq-placement")["status"],
        "fail",
        "node1 answered over ssh"
    );
    assert!(doc["nodes"][1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no /proc"));
    let (code, doc) = run(&["irq-pin"]);
    crate::common::assert_schema("irq-pin", &doc);
    assert_eq!(
        code,
        Some(topo_tune::exit::OK.code()),
        "the paper node has nothing to pin: skipped, not a failure"
    );
    assert_eq!(doc["nodes"][1]["status"], "skipped", "{doc:#}");
    assert_eq!(doc["nodes"][1]["error"]["kind"], "simulated");
    assert_eq!(doc["nodes"][0]["changed"], true, "{doc:#}");
    assert_eq!(affinity(&tree, 201), "4", "reserved 0-3 came from cluster.yaml");
    let (_, doc) = run(&["doctor"]);
    assert_eq!(check(&doc, "mlx5-irq-placement")["status"], "pass");
}

/// A health check tells "this node is bad" (5) from "a node did not answer" (4, or 8 when none
/// did): an unreachable node is never reported as a failing check, nor hidden behind one.
#[test]
fn doctor_tells_an_unreachable_node_from_a_failing_check() {
    use crate::common::sshd::{Node, SshCluster};
    let trees = tempfile::tempdir().unwrap();
    let tree = trees.path().join("irq");
    machines::irq_box(&tree, Mlx5Naming::Modern);
    let doctor = |cluster: &SshCluster| {
        let cfg = cluster.cluster_yaml("  connect_timeout: 5\n");
        let o = tt(["doctor"]).json().config(&cfg).run();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        crate::common::assert_schema("doctor", &doc);
        (o.status.code(), doc)
    };
    let one_bad = SshCluster::start(&[Node::Fsroot(tree.clone())]);
    assert_eq!(doctor(&one_bad).0, Some(topo_tune::exit::CHECKS_FAILED.code()));
    let mixed = SshCluster::start(&[Node::Fsroot(tree.clone()), Node::ClosedPort]);
    let (code, doc) = doctor(&mixed);
    assert_eq!(code, Some(topo_tune::exit::PARTIAL_FAILURE.code()), "{doc:#}");
    assert_eq!(doc["nodes"][1]["error"]["kind"], "connect_refused");
    assert_eq!(
        check(&doc, "mlx5-irq-placement")["status"],
        "fail",
        "the reached node's findings are still reported"
    );
    let none = SshCluster::start(&[Node::ClosedPort, Node::ClosedPort]);
    let (code, doc) = doctor(&none);
    assert_eq!(code, Some(topo_tune::exit::ALL_FAILED.code()), "{doc:#}");
    assert_eq!(doc["failed"], true);
}

/// What Ansible's `environment:` and shells write: a set TOPO_TUNE_CLUSTER_CONFIG never widens
/// a local irq-pin or doctor (only `--cluster` or `--cluster-config` does), and boolean
/// variables take 1/0, yes/no, True/False.
#[test]
fn the_environment_never_widens_a_local_command_and_booleans_read_as_written() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let run = |args: &[&str], env: &[(&str, &str)], fsroot: bool| {
        let mut cmd = topo_tune();
        cmd.args(["--output", "json"]).args(args);
        if fsroot {
            cmd.arg("--fsroot").arg(dir.path());
        }
        cmd.env_remove("TOPO_TUNE_DRY_RUN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        (
            o.status.code(),
            serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null),
        )
    };
    let with_cfg = [("TOPO_TUNE_CLUSTER_CONFIG", cfg.as_str())];
    for cmd in ["irq-pin", "doctor"] {
        let args: &[&str] = if cmd == "irq-pin" {
            &["irq-pin", "--dry-run"]
        } else {
            &["doctor"]
        };
        let (_, doc) = run(args, &with_cfg, true);
        assert_eq!(
            doc["nodes"].as_array().unwrap().len(),
            1,
            "{cmd}: local, one node: {doc:#}"
        );
        assert_ne!(doc["nodes"][0]["host"], "ndv5-01");
        // Asked for: the cluster the variable names (paper nodes only: skipped, exit 0).
        let mut wide = args.to_vec();
        wide.push("--cluster");
        let (code, doc) = run(&wide, &with_cfg, false);
        assert_eq!(code, Some(0), "{cmd} --cluster: {doc:#}");
        assert!(doc["nodes"].as_array().unwrap().len() > 1, "{cmd} --cluster: {doc:#}");
        assert!(doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "skipped"));
        let (code, doc) = run(&wide, &[], false);
        assert_eq!(
            code,
            Some(topo_tune::exit::USAGE.code()),
            "--cluster without the variable: {doc:#}"
        );
        assert!(doc["msg"].as_str().unwrap().contains("TOPO_TUNE_CLUSTER_CONFIG"));
    }
    for (value, dry) in [
        ("1", true),
        ("yes", true),
        ("True", true),
        ("true", true),
        ("on", true),
        ("0", false),
        ("no", false),
        ("False", false),
        ("", false),
    ] {
        let tree = tempfile::tempdir().unwrap();
        machines::irq_box(tree.path(), Mlx5Naming::Modern);
        let o = tt(["irq-pin", "--reserve-cpus", "0-3", "--fsroot"])
            .json()
            .arg(tree.path())
            .env("TOPO_TUNE_DRY_RUN", value)
            .run();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["dry_run"], dry, "TOPO_TUNE_DRY_RUN={value:?}: {doc:#}");
        assert_eq!(affinity(tree.path(), 201) == "0", dry, "TOPO_TUNE_DRY_RUN={value:?}");
    }
    let (code, _) = run(&["irq-pin"], &[("TOPO_TUNE_DRY_RUN", "maybe")], true);
    assert_eq!(
        code,
        Some(topo_tune::exit::USAGE.code()),
        "not a boolean: an error, not a guess"
    );
}

/// `doctor --textfile DIR`: node-exporter's textfile format, one gauge per check, replaced
/// atomically (no temporary `.prom` file left for the collector to half-read).
#[test]
fn doctor_writes_prometheus_textfile_metrics() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let metrics = tempfile::tempdir().unwrap();
    let run = || {
        let o = tt(["doctor", "--fsroot"])
            .json()
            .arg(dir.path())
            .arg("--textfile")
            .arg(metrics.path())
            .run();
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        crate::common::assert_schema("doctor", &doc);
        (o.status.code(), doc)
    };
    let (code, doc) = run();
    assert_eq!(code, Some(topo_tune::exit::CHECKS_FAILED.code()));
    let file = metrics.path().join("topo_tune_doctor.prom");
    assert_eq!(doc["textfile"], file.display().to_string());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("topo_tune_doctor_check_status{node=\"irq-node\",check=\"mlx5-irq-placement\"} 2\n"),
        "{text}"
    );
    assert!(text.contains("topo_tune_doctor_node_checked{node=\"irq-node\"} 1\n"));
    // The exposition format, line by line: HELP/TYPE comments, then `name{labels} value`.
    let mut typed = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(kind, "gauge");
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(typed.contains(name), "{name} sampled before its TYPE: {line}");
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
    }
    let entries: Vec<String> = std::fs::read_dir(metrics.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["topo_tune_doctor.prom"], "no temporary file left");
    // After pinning, the placement check passes and the file says so.
    let (code, _, err) = json(&["irq-pin", "--reserve-cpus", "0-3"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    run();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("check=\"mlx5-irq-placement\"} 0\n"), "{text}");
}

/// examples/fake-node.tar.gz is this generator's output (a 4-NIC, 64-CPU node with
/// every mlx5 interrupt on CPU 0), shipped so a newcomer can run irq-pin and doctor on it
/// (README); the test fails when the two drift apart. Regenerate with
/// `TOPO_TUNE_REGENERATE=1 cargo test --all-features --test main irq::the_example_fake_node`.
#[test]
fn the_example_fake_node_is_the_generators_output() {
    let fresh = tempfile::tempdir().unwrap();
    let node = fresh.path().join("fake-node");
    machines::irq_box(&node, Mlx5Naming::Modern);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fake-node.tar.gz");
    if std::env::var_os("TOPO_TUNE_REGENERATE").is_some() {
        let status = std::process::Command::new("tar")
            .args([
                "--sort=name",
                "--mtime=@0",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "-czf",
            ])
            .arg(&shipped)
            .arg("-C")
            .arg(fresh.path())
            .arg("fake-node")
            .env("GZIP", "-n")
            .status()
            .unwrap();
        assert!(status.success());
    }
    let unpacked = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&shipped)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(status.success(), "examples/fake-node.tar.gz unpacks");
    let diff = std::process::Command::new("diff")
        .args(["-r", "--no-dereference"])
        .arg(&node)
        .arg(unpacked.path().join("fake-node"))
        .output()
        .unwrap();
    assert!(
        diff.status.success(),
        "examples/fake-node.tar.gz differs from the generator:\n{}",
        String::from_utf8_lossy(&diff.stdout)
    );
}

/// `--reserve-cpus` naming CPUs the machine lacks is an error (a list meant for another
/// machine type reserves nothing it names), for irq-pin; doctor reports it as a failing check.
#[test]
fn reserving_cpus_the_machine_lacks_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let (code, doc, _) = json(&["irq-pin", "--dry-run", "--reserve-cpus", "0-99"], dir.path());
    assert_eq!(code, Some(topo_tune::exit::USAGE.code()), "{doc:#}");
    let msg = doc["msg"].as_str().unwrap();
    assert!(msg.contains("64-99") && msg.contains("online: 0-63"), "{msg}");
    assert_eq!(affinity(dir.path(), 201), "0", "nothing moved");
    let (_, doc, _) = json(&["doctor", "--reserve-cpus", "0-99"], dir.path());
    assert_eq!(check(&doc, "irq-pins")["status"], "fail");
    // The other checks still answer.
    assert_eq!(check(&doc, "nccl-disablers")["status"], "pass", "{doc:#}");
}

/// Every interrupt's affinity file, byte for byte.
fn affinities(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(root.join("proc/irq"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let f = e.path().join("smp_affinity_list");
            f.exists()
                .then(|| (e.file_name().to_string_lossy().into_owned(), std::fs::read(f).unwrap()))
        })
        .collect()
}

#[test]
fn restore_puts_back_what_the_first_pin_changed_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machines::irq_box(root, Mlx5Naming::Modern);
    // An affinity as a kernel prints it for a wide default mask, not topo-tune's own spelling.
    std::fs::write(root.join("proc/irq/202/smp_affinity_list"), "0-63\n").unwrap();
    let irqs = affinities(root);
    let ib_config = std::fs::read(root.join("etc/default/irqbalance")).unwrap();
    let pin = ["irq-pin", "--reserve-cpus", "0-3", "--irqbalance", "ban", "--install"];

    let (code, out, err) = json(&pin, root);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out["msg"]
            .as_str()
            .unwrap()
            .starts_with("63 moved, 0 left to move, 0 already placed"),
        "the summary counts what the run left, not what it planned: {}",
        out["msg"]
    );
    let record = root.join("etc/topo-tune/irq-pin.before.json");
    let first = std::fs::read(&record).expect("the old affinities are recorded");
    let rec: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(rec["irqs"]["202"]["affinity_list"], "0-63\n");
    assert_eq!(rec["irqbalance"]["text"], String::from_utf8_lossy(&ib_config).as_ref());

    // A second pin moves nothing and keeps the original record (not topo-tune's own pins).
    let (_, again, _) = json(&pin, root);
    assert_eq!(again["changed"], false, "{}", again["msg"]);
    assert!(again["msg"]
        .as_str()
        .unwrap()
        .starts_with("0 moved, 0 left to move, 63 already placed"));
    assert_eq!(std::fs::read(&record).unwrap(), first);

    // Dry run: what would go back, nothing changed, exit 3.
    let (code, dry, _) = json(&["irq-pin", "--restore", "--dry-run"], root);
    assert_eq!(code, Some(topo_tune::exit::CHANGES_PENDING.code()), "{dry:#}");
    assert!(
        dry["msg"]
            .as_str()
            .unwrap()
            .starts_with("dry run: restore: 63 to put back"),
        "{}",
        dry["msg"]
    );
    assert_ne!(affinities(root), irqs);

    let (code, back, err) = json(&["irq-pin", "--restore"], root);
    assert_eq!(code, Some(0), "{err}{back:#}");
    assert_eq!(back["changed"], true);
    assert_eq!(affinities(root), irqs, "every affinity byte for byte as before");
    assert_eq!(std::fs::read(root.join("etc/default/irqbalance")).unwrap(), ib_config);
    assert!(
        !root.join("etc/topo-tune/irq-pin.json").exists(),
        "doctor no longer holds them to pins"
    );
    assert!(
        !root.join("etc/systemd/system/topo-tune-irq-pin.service").exists(),
        "nothing pins at boot"
    );
    assert!(!root.join("etc/udev/rules.d/99-topo-tune-irq-pin.rules").exists());
    let (code, doc, _) = json(&["doctor", "--reserve-cpus", "0-3"], root);
    assert_ne!(check(&doc, "irq-pins")["status"], "fail", "{code:?} {doc:#}");

    // Again: a no-op.
    let (code, twice, _) = json(&["irq-pin", "--restore"], root);
    assert_eq!((code, &twice["changed"]), (Some(0), &Value::Bool(false)), "{twice:#}");
    assert!(twice["msg"]
        .as_str()
        .unwrap()
        .starts_with("restore: 0 put back, 63 already as recorded"));

    // A record that is not topo-tune's is refused, and nothing moves.
    let (_, _, _) = json(&pin, root);
    let moved = affinities(root);
    let mut forged = rec.clone();
    forged["irqs"]["202"]["affinity_list"] = Value::from("0-3\nrm -rf /\n");
    std::fs::write(&record, serde_json::to_vec(&forged).unwrap()).unwrap();
    let (code, _, err) = json(&["irq-pin", "--restore"], root);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("is not a CPU list") && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(affinities(root), moved);
}

#[test]
fn restore_with_nothing_recorded_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    machines::irq_box(dir.path(), Mlx5Naming::Modern);
    let irqs = affinities(dir.path());
    let (code, out, err) = json(&["irq-pin", "--restore"], dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out["msg"].as_str().unwrap().starts_with("nothing to restore"),
        "{out:#}"
    );
    assert_eq!(affinities(dir.path()), irqs);
}

/// `--restore` writes only to the interrupt it recorded: by its action name and its NIC's
/// `msi_irqs`, so a number a driver reload gave to an NVMe queue, or a record entry for IRQ 1
/// (never a NIC's), is left and said. Before: `--restore` wrote the old mlx5 affinity to the
/// NVMe queue and moved IRQ 1 (exit 0); a world-writable record was obeyed (next test).
#[test]
fn restore_puts_back_only_the_interrupt_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machines::irq_box(root, Mlx5Naming::Modern);
    std::fs::create_dir_all(root.join("proc/irq/1")).unwrap();
    std::fs::write(root.join("proc/irq/1/smp_affinity_list"), "0-63\n").unwrap();
    let (code, _, err) = json(&["irq-pin", "--reserve-cpus", "0-3"], root);
    assert_eq!(code, Some(0), "{err}");
    let record = root.join("etc/topo-tune/irq-pin.before.json");
    let mut rec: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(rec["irqs"]["202"]["pci"], "0000:17:00.0", "the identity is recorded");
    // A driver reload: IRQ 202 is an NVMe queue now, off the NIC's msi_irqs.
    let interrupts = root.join("proc/interrupts");
    let text = std::fs::read_to_string(&interrupts).unwrap();
    let old_name = rec["irqs"]["202"]["name"].as_str().unwrap().to_string();
    let renamed: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("202:") {
                l.replace(&old_name, "nvme0q3")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert_ne!(renamed, text);
    std::fs::write(&interrupts, renamed).unwrap();
    std::fs::remove_file(root.join("sys/devices/pci0000:17/0000:17:00.0/msi_irqs/202")).unwrap();
    let nvme = std::fs::read(root.join("proc/irq/202/smp_affinity_list")).unwrap();
    // And an entry made by hand for IRQ 1, named as the NIC's.
    rec["irqs"]["1"] = serde_json::json!({"nic": "mlx5_0", "name": "i8042", "pci": "0000:17:00.0", "class": "completion", "affinity_list": "0-3\n"});
    std::fs::write(&record, serde_json::to_vec_pretty(&rec).unwrap()).unwrap();
    let (code, back, err) = json(&["irq-pin", "--restore"], root);
    assert_eq!(code, Some(0), "{err}{back:#}");
    assert_eq!(
        std::fs::read(root.join("proc/irq/202/smp_affinity_list")).unwrap(),
        nvme,
        "the NVMe queue untouched"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("proc/irq/1/smp_affinity_list")).unwrap(),
        "0-63\n"
    );
    let pins = back["nodes"][0]["plan"]["pins"]
        .as_array()
        .unwrap_or_else(|| panic!("{back:#}"));
    let reason = |irq: u64| {
        pins.iter().find(|p| p["irq"] == irq).unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(reason(202), "left: now nvme0q3");
    assert!(reason(1).starts_with("left: now "), "{}", reason(1));
    assert!(
        back["msg"].as_str().unwrap().starts_with(
            "restore: 62 put back, 0 already as recorded, 2 left (another interrupt has the number now), 0 gone"
        ),
        "{}",
        back["msg"]
    );
}

/// A record not to obey: writable by others, not root's, an IRQ listed twice (JSON's
/// last-one-wins would obey whichever came second). Refused, nothing moves.
#[test]
fn a_restore_record_only_root_could_have_written_is_obeyed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machines::irq_box(root, Mlx5Naming::Modern);
    let (code, _, err) = json(&["irq-pin", "--reserve-cpus", "0-3"], root);
    assert_eq!(code, Some(0), "{err}");
    let record = root.join("etc/topo-tune/irq-pin.before.json");
    let moved = affinities(root);
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, _, err) = json(&["irq-pin", "--restore"], root);
    assert_ne!(code, Some(0));
    assert!(err.contains("writable by group or others (mode 0666)"), "{err}");
    std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&record, Some(1000), None).unwrap();
    let (code, _, err) = json(&["irq-pin", "--restore"], root);
    assert_ne!(code, Some(0));
    assert!(err.contains("owned by uid 1000, not by root"), "{err}");
    std::os::unix::fs::chown(&record, Some(0), None).unwrap();
    let text = std::fs::read_to_string(&record).unwrap();
    let twice = text.replacen(
        "\"irqs\": {",
        "\"irqs\": {\n    \"203\": {\"nic\": \"mlx5_0\", \"class\": \"completion\", \"affinity_list\": \"0\\n\"},",
        1,
    );
    assert_ne!(twice, text);
    std::fs::write(&record, twice).unwrap();
    let (code, _, err) = json(&["irq-pin", "--restore"], root);
    assert_ne!(code, Some(0));
    assert!(err.contains("IRQ 203 is listed twice"), "{err}");
    assert_eq!(affinities(root), moved, "nothing moved");
}

/// A record an older topo-tune wrote has action names but no PCI function: `--restore` leaves
/// its interrupts (no identity to hold them to), and the next `irq-pin` completes it where the
/// same name still has the number, after which `--restore` puts them back.
#[test]
fn an_older_record_is_completed_by_the_next_pin_where_the_name_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    machines::irq_box(root, Mlx5Naming::Modern);
    let irqs = affinities(root);
    let pin = ["irq-pin", "--reserve-cpus", "0-3"];
    assert_eq!(json(&pin, root).0, Some(0));
    let record = root.join("etc/topo-tune/irq-pin.before.json");
    let mut rec: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    for (_, irq) in rec["irqs"].as_object_mut().unwrap() {
        irq.as_object_mut().unwrap().remove("pci");
    }
    std::fs::write(&record, serde_json::to_vec_pretty(&rec).unwrap()).unwrap();
    let (_, dry, _) = json(&["irq-pin", "--restore", "--dry-run"], root);
    assert!(
        dry["msg"]
            .as_str()
            .unwrap()
            .starts_with("dry run: restore: 0 to put back, 0 already as recorded, 63 left"),
        "{}",
        dry["msg"]
    );
    assert_eq!(json(&pin, root).0, Some(0), "nothing to move: the record is completed");
    let completed: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(completed["irqs"]["202"]["pci"], "0000:17:00.0");
    let (code, back, err) = json(&["irq-pin", "--restore"], root);
    assert_eq!(code, Some(0), "{err}{back:#}");
    assert_eq!(affinities(root), irqs);
}
