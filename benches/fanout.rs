//! Fan-out: 64 nodes whose probe takes 0.5 s each (simulated nodes with a fixed delay, so the
//! figure measures topo-tune's parallelism, not a network). Target: < 2 s with the default
//! forks, and >= 16x faster than `--forks 1`.
//!
//! cargo bench --bench fanout

use criterion::{criterion_group, criterion_main, Criterion};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use topo_tune::config::{Inventory, DEFAULT_FORKS};
use topo_tune::transport::{collect, ssh::LocalBinary, CollectOptions};

fn inventory() -> Inventory {
    Inventory::parse(
        Path::new("bench.yaml"),
        "nodes:\n  - host: \"gpu[001-064]\"\n    simulate: aws-p4d\n",
    )
    .expect("bench inventory")
}

fn options(forks: usize) -> CollectOptions {
    CollectOptions {
        forks,
        connect_timeout: Duration::from_secs(10),
        command_timeout: Duration::from_secs(120),
        max_fail: None,
        remote_binary: Arc::new(LocalBinary {
            path: "unused".into(),
            bytes: Vec::new(),
            sha256: "0".repeat(64),
        }),
        simulated_latency: Duration::from_millis(500),
    }
}

fn fanout(c: &mut Criterion) {
    let inv = inventory();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("collect 64 nodes x 0.5 s");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for forks in [DEFAULT_FORKS, 1] {
        group.bench_function(format!("forks {forks}"), |b| {
            b.iter(|| {
                let out = runtime.block_on(collect(&inv, &options(forks), Arc::new(|_| {})));
                assert!(out.iter().all(|o| o.result.is_ok()));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
