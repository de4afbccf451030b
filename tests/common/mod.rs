//! Shared test helpers: fake machines and running the real binary.

#![allow(dead_code)]

pub(crate) mod fakesys;
pub(crate) mod machines;
pub(crate) mod run;
pub(crate) mod sshd;

pub(crate) use run::{tt, Run};

use assert_cmd::Command;
use topo_tune::api::NodeSnapshot;

/// The binary as an `assert_cmd` command, for the few tests that need more than `tt` offers
/// (stdin, `.assert()`).
pub(crate) fn topo_tune() -> Command {
    run::binary()
}

/// A command's `--output json` document; panics with its stdout and stderr when it is not one.
pub(crate) fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Run `topo-tune probe --output json ARGS` and parse the snapshot it prints.
pub(crate) fn probe_json(args: &[&str]) -> NodeSnapshot {
    let out = topo_tune()
        .args(["probe", "--output", "json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    NodeSnapshot::from_json(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// Validate a command's JSON output against its schema in docs/schema/ (`probe`, `init`,
/// `plan`, `rollback`, `irq-pin`, `doctor`, `error`); panics with every violation.
pub(crate) fn assert_schema(name: &str, doc: &serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    let load = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
    };
    let mut registry = jsonschema::Registry::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        let schema = load(&file);
        let id = schema["$id"].as_str().unwrap().to_string();
        registry = registry.add(id, schema).unwrap();
    }
    let registry = registry.prepare().unwrap();
    let schema = load(&format!("{name}.schema.json"));
    let validator = jsonschema::options()
        .with_registry(&registry)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{name}.schema.json: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} output violates its schema:\n{}\n{doc:#}",
        errors.join("\n")
    );
}

/// topo-tune's tuner plugin as NCCL loads it, built once per test process from the plugin's
/// source with `rustc --crate-type cdylib` (`cargo test` builds the plugin crate as an rlib
/// only; it has no dependencies, so rustc alone builds what `cargo build` ships).
pub(crate) fn tuner_plugin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("topo-tune-test-plugin-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let so = dir.join("libnccl_tuner_topo_tune.so");
            let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/src/lib.rs");
            let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
            let out = std::process::Command::new(rustc)
                .args([
                    "--edition",
                    "2021",
                    "--crate-type",
                    "cdylib",
                    "--crate-name",
                    "nccl_tuner_topo_tune",
                    "-o",
                ])
                .arg(&so)
                .arg(src)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            so
        })
        .clone()
}
