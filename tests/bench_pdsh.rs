//! A benchmark, not a test (ignored by default): collection over real loopback sshd nodes —
//! the harness the tests use — against pdsh running the same probe over the same ssh_config
//! and fan-out. Interleaved pairs, medians, the ratio. docs/performance.md has the figures.
//!
//!   apt-get install pdsh
//!   TOPO_TUNE_BENCH_NODES=8,32,64 TOPO_TUNE_BENCH_PAIRS=5 \
//!     cargo test --release --all-features --test main bench_pdsh -- --ignored --nocapture

use crate::common::machines;
use crate::common::sshd::{Node, SshCluster};
use crate::common::tt;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env_list(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

/// One `init --collect-only` over the cluster; wall time and failed nodes.
fn topo_tune_run(cfg: &std::path::Path, out: &std::path::Path, forks: usize) -> (Duration, usize) {
    let t = Instant::now();
    let o = tt(["init", "--collect-only", "--forks", &forks.to_string()])
        .json()
        .config(cfg)
        .out(out)
        .run();
    let took = t.elapsed();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failed = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] != "ok")
        .count();
    (took, failed)
}

/// The cold equivalent with pdsh: `pdcp` the binary to every node, then the probe.
fn pdcp_pdsh_run(cluster: &SshCluster, local_binary: &str, forks: usize) -> (Duration, usize) {
    let dest = cluster.dir.path().join("pdcp-cache");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest).unwrap();
    let t = Instant::now();
    let o = std::process::Command::new("pdcp")
        .env("PDSH_RCMD_TYPE", "ssh")
        .env("PDSH_SSH_ARGS_APPEND", format!("-F {}", cluster.ssh_config.display()))
        .args(["-f", &forks.to_string(), "-w", &cluster.names.join(",")])
        .arg(local_binary)
        .arg(&dest)
        .output()
        .expect("pdcp (apt-get install pdsh)");
    assert!(o.status.success(), "pdcp: {}", String::from_utf8_lossy(&o.stderr));
    let (probe, failed) = pdsh_run(cluster, &dest.join("topo-tune").display().to_string(), forks);
    (t.elapsed().max(probe), failed)
}

/// pdsh running the deployed binary's probe on every node; wall time and nodes without an answer.
fn pdsh_run(cluster: &SshCluster, binary: &str, forks: usize) -> (Duration, usize) {
    let hosts = cluster.names.join(",");
    let t = Instant::now();
    let o = std::process::Command::new("pdsh")
        .env("PDSH_RCMD_TYPE", "ssh")
        .env("PDSH_SSH_ARGS_APPEND", format!("-F {}", cluster.ssh_config.display()))
        .args(["-f", &forks.to_string(), "-w", &hosts])
        .arg(format!("echo '{{}}' | {binary} node probe"))
        .output()
        .expect("pdsh (apt-get install pdsh)");
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&o.stdout);
    let answered = text.lines().filter(|l| l.contains("\"protocol\"")).count();
    (took, cluster.names.len().saturating_sub(answered))
}

/// TOPO_TUNE_BENCH_LOAD=N: N busy processes on the machine while measuring.
fn busy_load() -> Vec<std::process::Child> {
    (0..env_list("TOPO_TUNE_BENCH_LOAD", "0")[0])
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect()
}

fn stop(load: Vec<std::process::Child>) {
    for mut l in load {
        let _ = l.kill();
        let _ = l.wait();
    }
}

/// `pairs` runs of each, interleaved, alternating which goes first (a load that drifts moves
/// both runs of a pair alike).
fn interleaved(pairs: usize, a: &mut dyn FnMut(), b: &mut dyn FnMut()) {
    for i in 0..pairs {
        if i % 2 == 0 {
            a();
            b();
        } else {
            b();
            a();
        }
    }
}

#[test]
#[ignore = "a benchmark: cargo test --release --test main bench_pdsh -- --ignored --nocapture"]
fn bench_pdsh() {
    let pairs = env_list("TOPO_TUNE_BENCH_PAIRS", "5")[0];
    for n in env_list("TOPO_TUNE_BENCH_NODES", "8,32") {
        let trees = tempfile::tempdir().unwrap();
        let tree = trees.path().join("dgx");
        machines::dgx_like(&tree);
        let cluster = SshCluster::start(&vec![Node::Fsroot(tree.clone()); n]);
        // TOPO_TUNE_BENCH_STARTUPS: ssh.max_startups (default: topo-tune's own default).
        let extra =
            std::env::var("TOPO_TUNE_BENCH_STARTUPS").map_or(String::new(), |v| format!("  max_startups: {v}\n"));
        let cfg = cluster.cluster_yaml(&extra);
        let load = busy_load();
        let out = tempfile::tempdir().unwrap();
        let forks = n.min(64);
        // Cold: the first run deploys the binary (pdsh's cold equivalent: pdcp, then pdsh).
        let (cold, cold_failed) = topo_tune_run(&cfg, out.path(), forks);
        let cache = cluster.dir.path().join("remote-cache");
        let binary = std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
            .join("topo-tune");
        let binary = binary.display().to_string();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let (mut our_failed, mut their_failed) = (cold_failed, 0);
        interleaved(
            pairs,
            &mut || {
                let (t, f) = topo_tune_run(&cfg, out.path(), forks);
                ours.push(t);
                our_failed += f;
            },
            &mut || {
                let (t, f) = pdsh_run(&cluster, &binary, forks);
                theirs.push(t);
                their_failed += f;
            },
        );
        stop(load);
        // Cold pairs: topo-tune deploying into an empty cache against pdcp + pdsh.
        let local = crate::common::run::binary_path().display().to_string();
        let (mut cold_ours, mut cold_theirs) = (Vec::new(), Vec::new());
        interleaved(
            pairs,
            &mut || {
                let _ = std::fs::remove_dir_all(&cache);
                let (t, f) = topo_tune_run(&cfg, out.path(), forks);
                cold_ours.push(t);
                our_failed += f;
            },
            &mut || {
                let (t, f) = pdcp_pdsh_run(&cluster, &local, forks);
                cold_theirs.push(t);
                their_failed += f;
            },
        );
        let (ca, cb) = (median(cold_ours), median(cold_theirs));
        eprintln!(
            "{n} nodes cold: topo-tune {:.2} s, pdcp + pdsh {:.2} s: ratio {:.2}",
            ca.as_secs_f64(),
            cb.as_secs_f64(),
            ca.as_secs_f64() / cb.as_secs_f64()
        );
        // The median of each pair's ratio too: a load that drifts between pairs moves both
        // runs of a pair alike.
        let mut per_pair: Vec<f64> = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        per_pair.sort_by(f64::total_cmp);
        let (a, b) = (median(ours), median(theirs));
        eprintln!(
            "{n} nodes, {forks} forks: cold topo-tune {:.2} s; warm topo-tune {:.2} s, pdsh {:.2} s (medians of {pairs} interleaved pairs): ratio {:.2}, median pair ratio {:.2}; failed node-runs: topo-tune {our_failed}, pdsh {their_failed}",
            cold.as_secs_f64(),
            a.as_secs_f64(),
            b.as_secs_f64(),
            a.as_secs_f64() / b.as_secs_f64(),
            per_pair[per_pair.len() / 2]
        );
    }
}

/// A repeat `init` that changes nothing against the first one (which deploys and writes), and
/// against a first one whose binary is already deployed: medians of `TOPO_TUNE_BENCH_PAIRS`.
#[test]
#[ignore = "a benchmark: cargo test --release --test main bench_repeat_init -- --ignored --nocapture"]
fn bench_repeat_init() {
    let pairs = env_list("TOPO_TUNE_BENCH_PAIRS", "5")[0];
    let n = env_list("TOPO_TUNE_BENCH_NODES", "8")[0];
    let trees = tempfile::tempdir().unwrap();
    let nodes: Vec<Node> = (0..n)
        .map(|i| {
            let t = trees.path().join(format!("n{i}"));
            machines::dgx_like(&t);
            Node::Fsroot(t)
        })
        .collect();
    let cluster = SshCluster::start(&nodes);
    let cfg = cluster.cluster_yaml("");
    let init = || {
        let t = Instant::now();
        let o = tt(["init"]).json().config(&cfg).run();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (t.elapsed(), doc["changed"] == true)
    };
    let wipe = || {
        for i in 0..n {
            let _ = std::fs::remove_dir_all(trees.path().join(format!("n{i}/written")));
        }
    };
    let (cold, changed) = init();
    assert!(changed);
    let (mut first, mut repeat) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        wipe();
        let (t, changed) = init();
        assert!(changed);
        first.push(t);
        let (t, changed) = init();
        assert!(!changed, "a repeat changes nothing");
        repeat.push(t);
    }
    let (f, r) = (median(first), median(repeat));
    eprintln!(
        "{n} nodes: first init with deploy {:.2} s; first init, binary deployed {:.2} s; repeat {:.2} s: repeat/first {:.2}, repeat/first-with-deploy {:.2}",
        cold.as_secs_f64(),
        f.as_secs_f64(),
        r.as_secs_f64(),
        r.as_secs_f64() / f.as_secs_f64(),
        r.as_secs_f64() / cold.as_secs_f64()
    );
}

/// Not a measurement: keeps `TOPO_TUNE_BENCH_NODES` loopback nodes up for
/// `TOPO_TUNE_BENCH_HOLD_S` seconds (default 600) and prints their cluster.yaml and
/// ssh_config, to profile one command by hand (`perf`, `strace -c`, `/usr/bin/time`).
#[test]
#[ignore = "a tool for profiling by hand: prints a cluster.yaml, then waits"]
fn bench_hold_cluster() {
    let n = env_list("TOPO_TUNE_BENCH_NODES", "8")[0];
    let trees = tempfile::tempdir().unwrap();
    let tree = trees.path().join("dgx");
    machines::dgx_like(&tree);
    let cluster = SshCluster::start(&vec![Node::Fsroot(tree); n]);
    let cfg = cluster.cluster_yaml("");
    eprintln!(
        "cluster.yaml: {}\nssh_config: {}\nhosts: {}",
        cfg.display(),
        cluster.ssh_config.display(),
        cluster.names.join(",")
    );
    std::thread::sleep(Duration::from_secs(env_list("TOPO_TUNE_BENCH_HOLD_S", "600")[0] as u64));
}
