//! The human tables, as an operator sees them (insta snapshots in tests/snapshots/; temp
//! paths and timings filtered). A change to a table shows up as a reviewed snapshot diff.

use crate::common::machines::{self, Mlx5Naming};
use crate::common::tt;

fn human(args: &[&str]) -> String {
    let o = tt(args).run();
    String::from_utf8(o.0.stdout).unwrap()
}

fn example() -> String {
    format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"))
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]");
    s.add_filter(env!("CARGO_MANIFEST_DIR"), "[REPO]");
    s.add_filter(r"in \d+\.\d s", "in [T] s");
    s
}

#[test]
fn plan_table() {
    settings().bind(|| insta::assert_snapshot!(human(&["plan", "--cluster-config", &example()])));
}

#[test]
fn init_table() {
    let out = tempfile::tempdir().unwrap();
    let text = human(&[
        "init",
        "--cluster-config",
        &example(),
        "--output-dir",
        out.path().to_str().unwrap(),
    ]);
    settings().bind(|| insta::assert_snapshot!(text));
}

#[test]
fn doctor_table() {
    let tree = tempfile::tempdir().unwrap();
    machines::irq_box(tree.path(), Mlx5Naming::Modern);
    let text = human(&["doctor", "--fsroot", tree.path().to_str().unwrap()]);
    settings().bind(|| insta::assert_snapshot!(text));
}

#[test]
fn irq_pin_table() {
    let tree = tempfile::tempdir().unwrap();
    machines::irq_box(tree.path(), Mlx5Naming::Old);
    let text = human(&[
        "irq-pin",
        "--dry-run",
        "--reserve-cpus",
        "0-3",
        "--fsroot",
        tree.path().to_str().unwrap(),
    ]);
    settings().bind(|| insta::assert_snapshot!(text));
}
