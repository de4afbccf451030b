//! cluster.yaml: the schema's promises, each error naming file:line:col.

use crate::common::{tt, Run};
use std::path::Path;
use topo_tune::api::{ConfigError, Inventory, TransportKind};

fn parse(text: &str) -> Result<Inventory, ConfigError> {
    Inventory::parse(Path::new("/etc/topo-tune/cluster.yaml"), text)
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn minimal_form_from_the_issue_keeps_working() {
    // A topology file that exists (a missing one is refused at its line: issue 34).
    let topo = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/aws-p5en.xml");
    let inv = parse(&format!(
        "ssh:\n  config_file: /path/to/ssh_config\nnodes:\n  - host: 127.0.0.1\n    port: 2201\n    user: root\n    labels: {{rack: rack-1}}\n  - host: \"gpu[001-004]\"\n    labels: {{rack: rack-2}}\n    simulate: {topo}\n",
    ))
    .unwrap();
    assert_eq!(inv.ssh.config_file.as_deref(), Some(Path::new("/path/to/ssh_config")));
    assert_eq!(inv.nodes.len(), 5);
    let n0 = &inv.nodes[0];
    assert_eq!(
        (n0.host.as_str(), n0.port, n0.user.as_deref(), n0.transport),
        ("127.0.0.1", Some(2201), Some("root"), TransportKind::Ssh)
    );
    assert_eq!(n0.labels["rack"], "rack-1");
    let hosts: Vec<&str> = inv.nodes[1..].iter().map(|n| n.host.as_str()).collect();
    assert_eq!(hosts, ["gpu001", "gpu002", "gpu003", "gpu004"]);
    assert!(inv.nodes[1..]
        .iter()
        .all(|n| n.transport == TransportKind::Simulated && n.simulate.as_deref() == Some(topo)));
    assert_eq!(inv.ssh.forks, 64);
    assert_eq!(n0.declared_at, "/etc/topo-tune/cluster.yaml:4:11");
}

#[test]
fn unknown_and_duplicate_keys_name_file_line_col() {
    let e = err("nodes:\n  - host: a\n    hots: b\n");
    assert!(
        e.starts_with("/etc/topo-tune/cluster.yaml:3:5: unknown field `hots`"),
        "{e}"
    );
    let e = err("nodes:\n  - host: a\n    port: 22\n    port: 23\n");
    assert!(
        e.starts_with("/etc/topo-tune/cluster.yaml:4:5: duplicate mapping key"),
        "{e}"
    );
    let e = err("sssh: {}\nnodes:\n  - host: a\n");
    assert!(
        e.starts_with("/etc/topo-tune/cluster.yaml:1:1: unknown field `sssh`"),
        "{e}"
    );
    let e = err("nodes:\n  - host: a\n    port: 70000\n");
    assert!(e.starts_with("/etc/topo-tune/cluster.yaml:3:11"), "{e}");
}

#[test]
fn duplicate_hosts_even_through_ranges() {
    let e = err("nodes:\n  - host: \"gpu[01-04]\"\n  - host: gpu03\n");
    assert_eq!(
        e,
        "/etc/topo-tune/cluster.yaml:3:11: host `gpu03` is listed twice (first at /etc/topo-tune/cluster.yaml:2:11)"
    );
}

#[test]
fn labels_that_point_nowhere() {
    let fabric = "fabric:\n  leaves:\n    leaf-1: {spine: s1}\n  racks:\n    rack-1: {leaf: leaf-1}\n";
    assert!(parse(&format!("{fabric}nodes:\n  - host: a\n    labels: {{rack: rack-1}}\n")).is_ok());
    let e = err(&format!("{fabric}nodes:\n  - host: a\n    labels: {{rack: rack-9}}\n"));
    assert!(
        e.starts_with("/etc/topo-tune/cluster.yaml:8:20: label rack: rack-9 points nowhere"),
        "{e}"
    );
    let e = err("fabric:\n  racks:\n    rack-1: {leaf: leaf-7}\nnodes:\n  - host: a\n");
    assert!(
        e.contains(":3:20: rack `rack-1` hangs off leaf `leaf-7`, which fabric.leaves does not declare"),
        "{e}"
    );
}

#[test]
fn shell_injection_in_names_is_refused() {
    for host in ["a;rm -rf /", "$(reboot)", "`id`", "-oProxyCommand=touch /tmp/x", "a b"] {
        let yaml = format!("nodes:\n  - host: {}\n", serde_json::to_string(host).unwrap());
        let e = err(&yaml);
        assert!(e.starts_with("/etc/topo-tune/cluster.yaml:2:11: "), "{host}: {e}");
    }
    let e = err("nodes:\n  - host: a\n    labels: {rack: \"$(id)\"}\n");
    assert!(e.contains(":3:20:") && e.contains("not a valid label"), "{e}");
    let e = err("nodes:\n  - host: a\n    user: \"root;id\"\n");
    assert!(e.contains(":3:11:") && e.contains("not a valid user"), "{e}");
    let e = err("ssh:\n  remote_dir: \"../../etc\"\nnodes:\n  - host: a\n");
    assert!(e.contains(":2:15:") && e.contains("no `..`"), "{e}");
}

#[test]
fn other_mistakes() {
    assert!(err("nodes: []\n").contains("no nodes"));
    assert!(err("nodes:\n  - host: \"gpu[1-\"\n").contains("unbalanced brackets"));
    assert!(err("reserved_cpus: \"0-x\"\nnodes:\n  - host: a\n").contains(":1:16: `0-x` is not a CPU list"));
    assert!(err("nodes:\n  - host: a\n    transport: simulated\n").contains("needs `simulate:"));
}

#[test]
fn cli_reports_config_errors_with_exit_65_and_missing_file_66() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: a\n    lables: {}\n").unwrap();
    let out = tt(["init", "--collect-only"])
        .out(dir.path().join("out"))
        .config(&cfg)
        .run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::DATA_ERROR.code()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:3:5: unknown field `lables`", cfg.display())),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists(), "bad input changes nothing");
    let out = tt([
        "init",
        "--collect-only",
        "--cluster-config",
        "/nonexistent/cluster.yaml",
    ])
    .run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::NO_INPUT.code()));
}

#[test]
fn dry_run_contacts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    // Port 1 on loopback: a real attempt would fail; a dry run must not try.
    std::fs::write(&cfg, "nodes:\n  - host: 127.0.0.1\n    port: 1\n    labels: {rack: r1}\n  - host: \"sim[1-2]\"\n    simulate: aws-p4d\n").unwrap();
    let out = tt(["init", "--list"]).json().config(&cfg).run();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["list"], true);
    assert_eq!(doc["changed"], false);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(doc["nodes"][0]["transport"], "ssh");
    assert_eq!(doc["nodes"][1]["transport"], "simulated");
}

#[test]
fn paper_nodes_need_an_output_dir_to_be_written() {
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = tt(["init", "--cluster-config", &cfg]).json().run();
    assert_eq!(out.status.code(), Some(topo_tune::exit::ALL_FAILED.code()));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["error"]["message"].as_str().unwrap().contains("use --output-dir")));
    assert_eq!(doc["changed"], false);
}

#[test]
fn bundled_example_collects_and_second_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let run = || {
        let out = tt(["init", "--collect-only", "--cluster-config", &cfg])
            .json()
            .out(dir.path())
            .run();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = run();
    assert_eq!(first["changed"], true);
    assert_eq!(first["summary"]["ok"], 10);
    let snap = topo_tune::api::NodeSnapshot::from_json(
        &std::fs::read_to_string(dir.path().join("p5en-03/snapshot.json")).unwrap(),
    )
    .unwrap();
    assert_eq!((snap.hostname.as_str(), snap.gpus.len()), ("p5en-03", 8));
    let mtime = std::fs::metadata(dir.path().join("summary.json"))
        .unwrap()
        .modified()
        .unwrap();
    let second = run();
    assert_eq!(second["changed"], false);
    assert!(second["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["changed"] == false));
    assert_eq!(
        std::fs::metadata(dir.path().join("summary.json"))
            .unwrap()
            .modified()
            .unwrap(),
        mtime
    );
}

#[test]
fn local_transport_probes_this_machine_without_ssh() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: localhost\n    transport: local\n").unwrap();
    let out = tt(["init", "--collect-only"])
        .json()
        .config(&cfg)
        .out(dir.path().join("out"))
        .run();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["nodes"][0]["transport"], "local");
    let snap = topo_tune::api::NodeSnapshot::from_json(
        &std::fs::read_to_string(dir.path().join("out/localhost/snapshot.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(snap.source.kind, topo_tune::api::snapshot::SourceKind::Live);
    let cpus = std::thread::available_parallelism().unwrap().get() as u32;
    assert!(
        snap.cpu.pus.is_some_and(|p| p >= cpus),
        "hwloc sees this machine's {cpus} CPUs: {:?}",
        snap.cpu.pus
    );
}

#[test]
fn ssh_max_startups_is_bounded_and_defaults_to_16() {
    use topo_tune::api::Inventory;
    let parse = |y: &str| Inventory::parse(std::path::Path::new("c.yaml"), y);
    let inv = parse("nodes:\n  - host: a\n").unwrap();
    assert_eq!(inv.ssh.max_startups, 16);
    assert_eq!(
        parse("ssh:\n  max_startups: 4\nnodes:\n  - host: a\n")
            .unwrap()
            .ssh
            .max_startups,
        4
    );
    let e = parse("ssh:\n  max_startups: 0\nnodes:\n  - host: a\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ssh.max_startups"), "{e}");
}

/// README's sample output is what the example prints today: every line of the sample block
/// appears, as is, in the output of the commands scripts/example.sh runs.
#[test]
fn the_readme_sample_is_what_the_example_prints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme.find("Sample (`./scripts/example.sh`").expect("the sample");
    let block = &readme[start..];
    let body = block.split("```").nth(1).expect("a fenced block");
    let out = tempfile::tempdir().unwrap();
    let cfg = root.join("examples/cluster.yaml");
    let mut printed = String::new();
    for args in [
        vec![
            "init",
            "--cluster-config",
            cfg.to_str().unwrap(),
            "--output-dir",
            out.path().to_str().unwrap(),
        ],
        vec!["plan", "--cluster-config", cfg.to_str().unwrap()],
        vec![
            "probe",
            "--from-hwloc-xml",
            root.join("profiles/aws-p5en.xml").to_str().unwrap(),
            "--matrix",
        ],
    ] {
        let o = Run::new().args(&args).run();
        assert!(o.status.success(), "{args:?}");
        printed.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    let lines: std::collections::HashSet<&str> = printed.lines().collect();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            lines.contains(line),
            "README shows a line the example does not print:\n{line}"
        );
    }
}

/// Every command of README's "Using it" block runs as written (from the repository root, its
/// `out` redirected to a temporary directory) and succeeds or reports only what it should.
#[test]
fn every_readme_using_it_line_runs_as_written() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = &readme[readme.find("## Using it").unwrap()..];
    let block = section.split("```sh").nth(1).unwrap().split("```").next().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut ran = 0;
    for line in block.lines().filter(|l| l.starts_with("topo-tune ")) {
        // The comment and a shell redirection are the shell's, not topo-tune's.
        let command = line.split("  #").next().unwrap().split(" > ").next().unwrap().trim();
        let command = command.replace(" out", &format!(" {}", out.display()));
        // A word in single quotes is one word without them, as the shell reads it (`'rack-2,!x'`:
        // quoted, or an interactive bash expands the `!`).
        let args: Vec<&str> = command
            .split_whitespace()
            .skip(1)
            .map(|w| w.strip_prefix('\'').and_then(|w| w.strip_suffix('\'')).unwrap_or(w))
            .collect();
        // The tuner plugin `tune` and `init --tuning` find beside a release binary.
        let o = Run::new()
            .current_dir(root)
            .env("TOPO_TUNE_TUNER_PLUGIN", crate::common::tuner_plugin())
            .args(&args)
            .run();
        // 0, or 3 for --check with changes pending.
        let code = o.status.code();
        assert!(
            matches!(code, Some(0) | Some(3)),
            "{line}\n exit {code:?}\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 14, "only {ran} commands found");
}
