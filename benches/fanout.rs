//! Fan-out, measured on the whole command a user runs: `topo-tune init --collect-only` on 64
//! simulated nodes whose probe takes 0.5 s each (a fixed delay, so the figure measures
//! topo-tune's parallelism, not a network). Target: < 2 s with the default forks, and >= 16x
//! faster than `--forks 1`.
//!
//! cargo bench --bench fanout

use criterion::{criterion_group, criterion_main, Criterion};
use std::process::Command;
use std::time::Duration;

fn fanout(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(&cfg, "nodes:\n  - host: \"gpu[001-064]\"\n    simulate: aws-p4d\n").expect("writing cluster.yaml");
    let out = dir.path().join("out");
    let mut group = c.benchmark_group("init --collect-only, 64 nodes x 0.5 s");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for forks in ["64", "1"] {
        group.bench_function(format!("forks {forks}"), |b| {
            b.iter(|| {
                let status = Command::new(env!("CARGO_BIN_EXE_topo-tune"))
                    .args([
                        "--output",
                        "json",
                        "init",
                        "--collect-only",
                        "--simulate-latency-ms",
                        "500",
                    ])
                    .args(["--forks", forks, "--cluster-config"])
                    .arg(&cfg)
                    .arg("--output-dir")
                    .arg(&out)
                    .stdout(std::process::Stdio::null())
                    .status()
                    .expect("running topo-tune");
                assert!(status.success());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
