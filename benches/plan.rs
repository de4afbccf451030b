//! Planner speed (single thread): exact 8-GPU ring (< 10 ms), exact 16-GPU ring (< 1 s), and a
//! whole plan for 4,096 nodes x 8 GPUs (< 1 s).
//!
//! cargo bench --bench plan

use criterion::{criterion_group, criterion_main, Criterion};
use std::collections::BTreeMap;
use topo_tune::api::from_source;
use topo_tune::api::{plan, NcclPolicy, PlanInput, PlanNode};
use topo_tune::api::{solve, LinkMatrix};
use topo_tune::api::{Fabric, Leaf};

/// A mixed node: NVLink pairs (i, i+n/2), PCIe within a socket, SYS across (deterministic).
fn mixed(n: usize) -> LinkMatrix {
    let mut bw = vec![vec![0.0; n]; n];
    let mut cost = vec![vec![0; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let (b, c) = if (i + n / 2) % n == j {
                (82.4, 1)
            } else if (i < n / 2) == (j < n / 2) {
                if i / 2 == j / 2 {
                    (48.0, 4)
                } else {
                    (24.0, 5)
                }
            } else {
                (10.0, 9)
            };
            bw[i][j] = b;
            cost[i][j] = c;
        }
    }
    LinkMatrix { bw, cost }
}

fn rings(c: &mut Criterion) {
    let m8 = mixed(8);
    c.bench_function("exact ring, 8 GPUs", |b| b.iter(|| solve(std::hint::black_box(&m8))));
    let m16 = mixed(16);
    let mut g = c.benchmark_group("exact ring, 16 GPUs");
    g.sample_size(10);
    g.bench_function("solve", |b| b.iter(|| solve(std::hint::black_box(&m16))));
    g.finish();
}

fn cluster(c: &mut Criterion) {
    let snap = from_source("aws-p5en", "template").expect("bundled profile");
    let racks = 64;
    let hosts: Vec<String> = (0..4096).map(|i| format!("gpu{i:04}")).collect();
    let snaps: Vec<_> = hosts
        .iter()
        .map(|h| {
            let mut s = snap.clone();
            s.hostname = h.clone();
            s
        })
        .collect();
    let nodes: Vec<PlanNode> = hosts
        .iter()
        .zip(&snaps)
        .enumerate()
        .map(|(i, (h, s))| PlanNode {
            host: h.clone(),
            labels: BTreeMap::from([("rack".to_string(), format!("rack-{}", i % racks))]),
            snapshot: s,
            hints: Default::default(),
        })
        .collect();
    let fabric = Fabric {
        racks: (0..racks)
            .map(|r| (format!("rack-{r}"), Some(format!("leaf-{r}"))))
            .collect(),
        leaves: (0..racks)
            .map(|r| {
                (
                    format!("leaf-{r}"),
                    Leaf {
                        spine: Some(format!("spine-{}", r / 16)),
                        uplink_gbps: Some(3200.0),
                    },
                )
            })
            .collect(),
        rails: Some(8),
        ..Default::default()
    };
    let mut g = c.benchmark_group("plan 4096 nodes x 8 GPUs");
    g.sample_size(10);
    let policy = NcclPolicy::default();
    g.bench_function("plan", |b| {
        b.iter(|| {
            plan(&PlanInput {
                nodes: std::hint::black_box(&nodes),
                fabric: Some(&fabric),
                message_bytes: 1 << 30,
                nccl: &policy,
            })
        })
    });
    g.finish();
}

criterion_group!(benches, rings, cluster);
criterion_main!(benches);
