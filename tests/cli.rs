//! The command line as scripts see it: exit codes, JSON errors.

use crate::common::{topo_tune, tt};
use topo_tune::exit;

#[test]
fn apply_and_status_answer_in_the_envelope_with_their_codes() {
    for cmd in ["apply", "status"] {
        let mut c = topo_tune();
        c.args(["--output", "json", cmd, "--cluster-config", "/nonexistent/x.yaml"]);
        if cmd == "apply" {
            c.arg("--all");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(exit::NO_INPUT.code()), "{cmd}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (
                doc["command"].as_str(),
                doc["failed"].as_bool(),
                doc["changed"].as_bool()
            ),
            (Some(cmd), Some(true), Some(false))
        );
        crate::common::assert_schema("error", &doc);
    }
    // apply needs a scope: a canary, --all, or a rollout to resume.
    let out = tt(["apply", "--cluster-config", "x.yaml"]).json().run();
    assert_eq!(out.status.code(), Some(exit::USAGE.code()));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["error"]["message"].as_str().unwrap().contains("--canary"), "{doc}");
}

#[test]
fn missing_or_bogus_fsroot() {
    let out = tt(["probe", "--fsroot", "/nonexistent/tree"]).run();
    assert_eq!(out.status.code(), Some(exit::NO_INPUT.code()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fsroot /nonexistent/tree: no such directory"));

    let empty = tempfile::tempdir().unwrap();
    let out = tt(["probe", "--fsroot"]).arg(empty.path()).run();
    assert_eq!(out.status.code(), Some(exit::DATA_ERROR.code()));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("not a sysfs/procfs tree (sys/devices/system/cpu is missing)"),
        "{err}"
    );

    // The environment variable works the same way (for Ansible `environment:`).
    let out = tt(["probe"]).env("TOPO_TUNE_FSROOT", "/nonexistent/tree").run();
    assert_eq!(out.status.code(), Some(exit::NO_INPUT.code()));
}

#[test]
fn usage_errors_exit_2() {
    let out = tt(["probe", "--fsroot", "/a", "--from-hwloc-xml", "/b"]).run();
    assert_eq!(out.status.code(), Some(exit::USAGE.code()));
    let out = tt(["probe", "--output", "yaml"]).run();
    assert_eq!(out.status.code(), Some(exit::USAGE.code()));
    let out = tt(["frobnicate"]).run();
    assert_eq!(out.status.code(), Some(exit::USAGE.code()));
    let out = tt(["--help"]).run();
    assert_eq!(out.status.code(), Some(exit::OK.code()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("probe"));
}

#[test]
fn broken_nvml_fixture_is_a_data_error() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("nvml.json");
    std::fs::write(&fixture, "{ not json").unwrap();
    let xml = format!("{}/profiles/aws-p4d.xml", env!("CARGO_MANIFEST_DIR"));
    let out = tt(["probe", "--from-hwloc-xml", &xml, "--nvml-fixture"])
        .arg(&fixture)
        .run();
    assert_eq!(out.status.code(), Some(exit::DATA_ERROR.code()));
}

#[test]
fn exit_codes_are_documented() {
    let doc = std::fs::read_to_string(format!("{}/docs/exit-codes.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    for (code, meaning) in exit::ALL {
        assert!(
            doc.contains(&format!("| {code} |")),
            "docs/exit-codes.md lacks code {code} ({meaning})"
        );
    }
}

#[test]
fn closed_stdout_pipe_is_not_an_error() {
    use std::process::{Command, Stdio};
    let xml = format!("{}/profiles/aws-p5en.xml", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(crate::common::run::binary_path())
        .args(["probe", "--output", "json", "--from-hwloc-xml", &xml])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(exit::OK.code()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Logs go to stderr, never into the result on stdout; -v, -q and RUST_LOG choose how much.
#[test]
fn logging_goes_to_stderr_and_follows_v_q_and_rust_log() {
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let run = |flags: &[&str], rust_log: Option<&str>| {
        let mut cmd = topo_tune();
        cmd.args(flags)
            .args(["--output", "json", "rollback", "--cluster-config", &cfg])
            .env_remove("RUST_LOG");
        if let Some(l) = rust_log {
            cmd.env("RUST_LOG", l);
        }
        let o = cmd.output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is the JSON alone");
        assert_eq!(doc["command"], "rollback");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert_eq!(run(&[], None), "", "quiet by default");
    let v = run(&["-v"], None);
    assert!(v.contains("INFO") && v.contains("host=\"p5en-01\""), "{v}");
    assert!(!v.contains("DEBUG"), "{v}");
    let vv = run(&["-vv"], None);
    assert!(vv.contains("DEBUG") && vv.contains("starting"), "{vv}");
    assert_eq!(run(&["-q"], Some("")), "");
    let only_node = run(&[], Some("topo_tune::node=debug"));
    assert!(only_node.contains("DEBUG topo_tune::node"), "{only_node}");
}

#[test]
fn completions_and_the_man_page_are_generated_from_the_interface() {
    for shell in ["bash", "zsh", "fish"] {
        let o = tt(["completions", shell]).run();
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("irq-pin") && text.contains("--cluster-config"), "{shell}");
        if shell == "bash" {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("topo-tune.bash");
            std::fs::write(&f, text.as_bytes()).unwrap();
            let check = std::process::Command::new("bash").arg("-n").arg(&f).output().unwrap();
            assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
        }
    }
    let o = tt(["man"]).run();
    assert!(o.status.success());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("topo-tune.1");
    std::fs::write(&page, &o.stdout).unwrap();
    let man = std::process::Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output();
    match man {
        Ok(m) => {
            // Bold and underline come as overstrikes (`X\bX`): keep the last of each pair.
            let mut text = String::new();
            for c in String::from_utf8_lossy(&m.stdout).chars() {
                if c == '\u{8}' {
                    text.pop();
                } else {
                    text.push(c);
                }
            }
            assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
            for section in ["NAME", "SYNOPSIS", "TOPO-TUNE INIT", "TOPO-TUNE IRQ-PIN", "EXIT STATUS"] {
                assert!(text.contains(section), "man -l renders {section}:\n{text}");
            }
        }
        Err(e) => panic!("man is needed for this test (scripts/setup.sh installs man-db): {e}"),
    }
    let v = tt(["--version"]).run();
    let v = String::from_utf8_lossy(&v.stdout);
    assert!(v.starts_with("topo-tune 0.") && v.contains("(commit "), "{v}");
}

/// Tables pad their last column; no human output line ends in a space.
#[test]
fn human_tables_have_no_trailing_spaces() {
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    for args in [
        ["plan", "--cluster-config", &cfg],
        ["rollback", "--cluster-config", &cfg],
    ] {
        let o = tt(args).run();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.is_empty());
        for line in text.lines() {
            assert!(!line.ends_with(' '), "{args:?}: {line:?}");
        }
    }
}

/// scripts/setup.sh stops early, naming rustup, when the Rust on PATH is older than the one
/// the locked dependencies need (Debian's packaged rustc 1.63 passed the old check).
#[test]
fn setup_refuses_a_rust_older_than_the_lock_needs() {
    let dir = tempfile::tempdir().unwrap();
    for (tool, out) in [
        ("rustc", "rustc 1.63.0 (4b91a6ea7 2022-08-08)"),
        ("cargo", "cargo 1.63.0"),
    ] {
        let p = dir.path().join(tool);
        std::fs::write(&p, format!("#!/bin/sh\necho '{out}'\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let o = std::process::Command::new(format!("{}/scripts/setup.sh", env!("CARGO_MANIFEST_DIR")))
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("1.63.0") && err.contains("rustup") && err.contains("1.89"),
        "{err}"
    );
}
