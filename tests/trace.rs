//! `diagnose --trace` on real PyTorch profiler traces (HolisticTraceAnalysis's test data, and
//! one-GPU H200 traces), each figure checked against an independent Python computation
//! (`tests/data/traces/check_trace.py`), plus a made job of four ranks on two hosts that has
//! each fault the verdict names, and every kind of bad input.

use crate::common::{assert_schema, json, tt};
use std::io::Write as _;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
}

fn diagnose(args: &[&std::ffi::OsStr]) -> (Option<i32>, serde_json::Value, String) {
    let o = tt(["diagnose"]).args(args).args(["--output", "json"]).run();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = if o.stdout.is_empty() {
        serde_json::Value::Null
    } else {
        json(&o)
    };
    (o.status.code(), doc, stderr)
}

fn human(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let o = tt(["diagnose"]).args(args).run();
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code(), text)
}

fn os<P: AsRef<std::ffi::OsStr> + ?Sized>(p: &P) -> &std::ffi::OsStr {
    p.as_ref()
}

/// The Python check's figures for one trace.
fn python(trace: &Path) -> serde_json::Value {
    let o = std::process::Command::new("python3")
        .arg(data("check_trace.py"))
        .arg(trace)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.01 * a.abs().max(b.abs()) + 1e-9
}

/// topo-tune's figures for `trace` (its one rank) equal the Python check's within 1 %.
fn cross_check(trace: &Path) -> serde_json::Value {
    let want = python(trace);
    let (code, doc, err) = diagnose(&[os("--trace"), os(trace)]);
    assert_eq!(code, Some(0), "{err}");
    assert_schema("diagnose-trace", &doc);
    let t = &doc["trace"];
    let steps = t["ranks"][0]["steps"].as_array().unwrap();
    let want_steps = want["steps"].as_array().unwrap();
    assert_eq!(steps.len(), want_steps.len(), "{}", trace.display());
    for (got, want) in steps.iter().zip(want_steps) {
        assert_eq!(got["step"], want["step"]);
        for f in [
            "step_us",
            "gpu_busy_us",
            "compute_us",
            "comm_us",
            "overlap_us",
            "exposed_us",
        ] {
            let (g, w) = (got[f].as_f64().unwrap(), want[f].as_f64().unwrap());
            assert!(
                close(g, w),
                "{} step {}: {f} {g} vs Python {w}",
                trace.display(),
                got["step"]
            );
        }
    }
    let overall = &t["ranks"][0]["overall"];
    for f in ["gpu_busy_us", "compute_us", "comm_us", "overlap_us", "exposed_us"] {
        let (g, w) = (overall[f].as_f64().unwrap(), want["overall"][f].as_f64().unwrap());
        assert!(close(g, w), "{} overall: {f} {g} vs Python {w}", trace.display());
    }
    let kinds = want["kinds"].as_object().unwrap();
    let got_kinds = t["sizes"]["kinds"].as_array().unwrap();
    assert_eq!(
        got_kinds.len(),
        kinds.len(),
        "{}: {got_kinds:?} vs {kinds:?}",
        trace.display()
    );
    for k in got_kinds {
        let w = &kinds[k["kind"].as_str().unwrap()];
        assert_eq!(k["count"], w["count"], "{k}");
        assert_eq!(k["unknown_size"], w["unknown"], "{k}");
        assert_eq!(k["small"], w["small"], "{k}");
        assert!(
            close(k["gpu_us"].as_f64().unwrap(), w["gpu_us"].as_f64().unwrap()),
            "{k} vs {w}"
        );
    }
    want
}

#[test]
fn every_shared_trace_matches_the_python_check() {
    for name in [
        "sampled_rank-0.json.gz",
        "sampled_rank-1.json.gz",
        "nccl_data.json.gz",
        "trace-ddp-bucket1.json.gz",
        "trace-ddp-bucket25.json.gz",
    ] {
        cross_check(&data(name));
    }
    // NCCL 2.17.1's kernels carry the collective's arguments: sizes from them, none missing.
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("nccl_data.json.gz"))]);
    let t = &doc["trace"];
    assert_eq!(t["ranks"][0]["nccl_version"], "2.17.1");
    assert_eq!(
        t["ranks"][0]["collectives"], 21,
        "15 all-reduces and 6 broadcasts, as the kernels say"
    );
    assert_eq!(t["sizes"]["unknown_size"], 0);
}

/// Absolute-µs timestamps (`1694128201435031.xxx`, as Kineto writes epoch time) are read to
/// the nanosecond: through an f64 the `record_param_comms` that ends where its c10d op ends
/// was pushed 96 ns past it, read as a second collective (2 instead of 1).
#[test]
fn absolute_microsecond_timestamps_keep_their_nanoseconds() {
    let want = cross_check(&data("absolute-us.json"));
    assert_eq!(want["kinds"]["allreduce"]["count"], 1);
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("absolute-us.json"))]);
    let rank = &doc["trace"]["ranks"][0];
    assert_eq!(rank["collectives"], 1, "{rank}");
    // The GEMM starts 123 ns before the NCCL kernel: 1.878 µs of overlap, 4.124 µs busy (an
    // f64 put both starts on one 256 ns grid point: 2.001 and 4.001).
    assert_eq!(rank["steps"][0]["overlap_us"], 1.878, "{rank}");
    assert_eq!(rank["steps"][0]["gpu_busy_us"], 4.124, "{rank}");
}

/// A `record_param_comms` that names nothing inside a `wait()` span is the wait's own, not a
/// collective (2 "unknown" collectives before); a real all-to-all issued inside an
/// awaitable's `wait()` stays one.
#[test]
fn a_wait_is_not_a_collective() {
    let want = cross_check(&data("waits.json"));
    assert!(want["kinds"].get("unknown").is_none() && want["kinds"].get("record_param_comms").is_none());
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("waits.json"))]);
    let t = &doc["trace"];
    assert_eq!(t["ranks"][0]["collectives"], 1, "{t}");
    assert_eq!(t["sizes"]["kinds"][0]["kind"], "alltoall");
    assert_eq!(t["sizes"]["unknown_size"], 0);
}

/// Sizes nested in a `nccl:*` title under a `record_param_comms` without one are the
/// collective's (all three were "the profiler recorded no shapes" before); the title holds the
/// send buffer, so an all-gather's message is that times its group; an all-to-all of `[[0],[0]]`
/// is 0 bytes, not unknown.
#[test]
fn nested_nccl_sizes_and_zero_byte_all_to_alls_are_sizes() {
    let want = cross_check(&data("nested-sizes.json"));
    let k = &want["kinds"];
    assert_eq!(
        (
            &k["allreduce"]["bytes"],
            &k["allgather"]["bytes"],
            &k["alltoall"]["bytes"]
        ),
        (
            &394_241u64.saturating_mul(4).into(),
            &(2u64 << 20 << 2).into(),
            &0.into()
        )
    );
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("nested-sizes.json"))]);
    let sizes = &doc["trace"]["sizes"];
    assert_eq!(sizes["unknown_size"], 0, "{sizes}");
    let buckets: Vec<(u64, u64)> = sizes["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["from_bytes"].as_u64().unwrap(), b["to_bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(buckets, vec![(0, 1), (1 << 20, 2 << 20), (8 << 20, 16 << 20)]);
}

/// GPU work that runs past the end of the step that launched it is cut there and said: the
/// all-reduce launched in step 1 runs 160 µs into step 2 — step 1 was 200 % communication,
/// the rank busy 240 µs in a 200 µs span (every step's sum), the verdict "100 % of the step".
#[test]
fn work_past_its_step_is_cut_and_said_and_the_rank_is_one_union() {
    let want = cross_check(&data("past-step.json"));
    assert_eq!(want["overall"]["gpu_busy_us"], 80.0);
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("past-step.json"))]);
    let t = &doc["trace"];
    let rank = &t["ranks"][0];
    for s in rank["steps"].as_array().unwrap() {
        assert!(s["comm_us"].as_f64().unwrap() <= s["step_us"].as_f64().unwrap(), "{s}");
    }
    assert_eq!(rank["overall"]["gpu_busy_us"], 80.0, "{rank}");
    assert_eq!(rank["past_step"]["kernels"], 1);
    assert_eq!(rank["past_step"]["us"], 160.0);
    let v = t["verdict"].as_str().unwrap();
    assert!(v.starts_with("communication 20% of the step, 20% exposed"), "{v}");
    assert!(
        v.contains("1 GPU event(s) on 1 rank(s) ran past the end of the profiler step"),
        "{v}"
    );
}

/// A CUDA-graph replay (vLLM's default) replays `multimem_all_reduce_kernel` — its real
/// name, in an anonymous namespace — with no CPU op around it: communication by its own
/// name (before: "no collective in the traces", 0 % communication).
#[test]
fn a_graph_replay_of_symmetric_memory_all_reduces_is_communication() {
    let want = cross_check(&data("graph-replay.json"));
    assert_eq!(want["overall"]["comm_us"], 20.0);
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("graph-replay.json"))]);
    let t = &doc["trace"];
    assert_eq!(t["ranks"][0]["anonymous_comm_kernels"], 2);
    let v = t["verdict"].as_str().unwrap();
    assert!(v.starts_with("communication 25% of the step, 25% exposed"), "{v}");
    assert!(
        v.contains("2 communication kernel(s) ran with no CPU op issuing them"),
        "{v}"
    );
    assert!(
        !v.contains("FSDP") && !v.contains("bucket"),
        "no training advice without sizes: {v}"
    );
}

/// Ranks of two jobs are refused, naming the files and what they disagree on (a world of 8
/// and one of 2 were read as one job, exit 0, "no collective matched").
#[test]
fn two_jobs_traces_are_refused_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rank0 = std::fs::read_to_string(data("past-step.json")).unwrap();
    assert!(rank0.contains(r#""rank": 0, "world_size": 8"#));
    let write = |name: &str, text: String| {
        std::fs::write(d.join(name), text).unwrap();
        d.join(name)
    };
    let cases = [
        (r#""rank": 1, "world_size": 2"#.to_string(), "world size 8 and 2"),
        (
            r#""rank": 1, "world_size": 8, "nccl_version": "2.21.5""#.to_string(),
            "",
        ),
        (r#""rank": 9, "world_size": 8"#.to_string(), "rank 9 in a world of 8"),
        (
            r#""rank": 1, "world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 4, "ranks": [0, 1, 2, 3]}]"#
                .to_string(),
            "",
        ),
    ];
    for (dist, want) in cases {
        let _ = std::fs::remove_dir_all(d.join("job"));
        std::fs::create_dir(d.join("job")).unwrap();
        let a = write("job/rank-0.json", rank0.clone());
        let b = write("job/rank-1.json", rank0.replace(r#""rank": 0, "world_size": 8"#, &dist));
        let (code, err) = human(&[os("--trace"), os(&d.join("job"))]);
        if want.is_empty() {
            // Another NCCL or group on one rank alone: the other says nothing of it.
            assert_eq!(code, Some(0), "{dist}: {err}");
            continue;
        }
        assert_eq!(code, Some(65), "{dist}: {err}");
        assert!(
            (err.contains("are not one job's traces") || err.contains("is not a trace of this job"))
                && err.contains(want),
            "{err}"
        );
        if want.contains("world size") {
            assert!(
                err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()),
                "{err}"
            );
        }
    }
    // Both say, and disagree: refused.
    std::fs::remove_dir_all(d.join("job")).unwrap();
    std::fs::create_dir(d.join("job")).unwrap();
    for (name, nccl, pg) in [("rank-0.json", "2.21.5", 8), ("rank-1.json", "2.27.3", 8)] {
        let rank = if name == "rank-0.json" { 0 } else { 1 };
        write(
            &format!("job/{name}"),
            rank0.replace(
                r#""rank": 0, "world_size": 8"#,
                &format!(r#""rank": {rank}, "world_size": 8, "nccl_version": "{nccl}", "pg_config": [{{"pg_name": "0", "pg_size": {pg}}}]"#),
            ),
        );
    }
    let (code, err) = human(&[os("--trace"), os(&d.join("job"))]);
    assert_eq!(code, Some(65), "{err}");
    assert!(err.contains("NCCL 2.21.5 and 2.27.3"), "{err}");
    write(
        "job/rank-1.json",
        rank0.replace(
            r#""rank": 0, "world_size": 8"#,
            r#""rank": 1, "world_size": 8, "nccl_version": "2.21.5", "pg_config": [{"pg_name": "0", "pg_size": 2}]"#,
        ),
    );
    let (code, err) = human(&[os("--trace"), os(&d.join("job"))]);
    assert_eq!(code, Some(65), "{err}");
    assert!(err.contains("process group `0` of 8 and of 2 ranks"), "{err}");
}

/// An all-to-all's size is its send side, as the docs say and nccl-tests counts it: an uneven
/// one sending 1,000 floats and receiving 3,000 is 4,000 B, from `In msg nelems` or from the
/// c10d op's input tensor (both were 12,000 B, the receive side, before); an all-gather
/// keeps the larger (its output).
#[test]
fn an_all_to_all_is_sized_by_what_it_sends() {
    let want = cross_check(&data("alltoall-send.json"));
    assert_eq!(want["kinds"]["alltoall"]["bytes"], 8000);
    assert_eq!(want["kinds"]["allgather"]["bytes"], 16000);
    let (_, doc, _) = diagnose(&[os("--trace"), os(&data("alltoall-send.json"))]);
    let buckets: Vec<(u64, u64)> = doc["trace"]["sizes"]["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["from_bytes"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(buckets, vec![(2048, 2), (8192, 1)]);
}

#[test]
fn the_sampled_job_names_its_kinds_from_the_cpu_op_not_the_kernel() {
    // Every NCCL kernel of this job is named `ncclKernel_SendRecv_…`; the collectives are
    // all-to-alls, all-gathers and all-reduces, as their ops say.
    let (code, doc, err) = diagnose(&[
        os("--trace"),
        os(&data("sampled_rank-0.json.gz")),
        os(&data("sampled_rank-1.json.gz")),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let kinds: Vec<&str> = doc["trace"]["sizes"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allgather", "allreduce", "alltoall"]);
    assert!(!kinds.contains(&"sendrecv"));
    // The all-reduces' sizes are in their nested `nccl:all_reduce` titles: a sampled trace
    // keeps other all-reduces on each rank, and two of the pairs its order makes are of
    // different sizes — not the same collective, so not matched (with the sizes unread, all
    // 10 were matched and judged).
    assert_eq!(doc["trace"]["skew"]["matched"], 8);
    assert_eq!(doc["trace"]["skew"]["mismatched"], 2);
    assert_eq!(doc["trace"]["sizes"]["unknown_size"], 0);
    let v = doc["trace"]["verdict"].as_str().unwrap();
    assert!(v.starts_with("communication 31% of the step, 26% exposed"), "{v}");
}

#[test]
fn one_gpu_traces_find_communication_through_record_param_comms() {
    let stats = |name: &str| {
        let raw = python(&data(name));
        let (code, doc, err) = diagnose(&[os("--trace"), os(&data(name))]);
        assert_eq!(code, Some(0), "{err}");
        (raw, doc["trace"].clone())
    };
    let (_, small) = stats("trace-ddp-bucket1.json.gz");
    let (_, large) = stats("trace-ddp-bucket25.json.gz");
    for t in [&small, &large] {
        // No NCCL kernel: one rank moves nothing, yet every collective is found.
        assert_eq!(t["ranks"][0]["anonymous_comm_kernels"], 0);
        assert_eq!(t["job"]["comm_us"], 0.0);
        assert!(
            t["verdict"].as_str().unwrap().contains("one rank (group size 1)"),
            "{}",
            t["verdict"]
        );
    }
    let count = |t: &serde_json::Value| t["ranks"][0]["collectives"].as_u64().unwrap();
    assert_eq!(
        (count(&small), count(&large)),
        (48, 30),
        "1 MiB buckets: more all-reduces"
    );
    // The same gradients in smaller pieces: DDP's all-reduces are 16 MiB with 1 MiB buckets
    // (one layer each) and 32 MiB with 25 MiB buckets.
    let largest = |t: &serde_json::Value| {
        t["sizes"]["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .max_by_key(|b| b["count"].as_u64().unwrap())
            .map(|b| b["from_bytes"].as_u64().unwrap())
            .unwrap()
    };
    assert_eq!(largest(&small), 16 << 20);
    assert_eq!(largest(&large), 32 << 20);
}

/// One rank of a made job: 3 steps of 20 ms, compute 0–6 ms on stream 7, then 20
/// all-reduces of 64 KiB (50 µs each) and one of 64 MiB (1 ms), the last rank's kernels
/// `late_us` shorter (the others wait for it). `base_us` puts each host on its own clock.
fn made_rank(rank: u32, ranks: u32, base_us: f64, late_us: f64) -> String {
    let mut ev = Vec::new();
    let mut corr = 1000 * (rank as u64 + 1);
    for step in 0..3u64 {
        let t0 = base_us + step as f64 * 20_000.0;
        ev.push(format!(r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}","pid":1,"tid":100,"ts":{t0},"dur":20000}}"#));
        corr += 1;
        ev.push(format!(r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":100,"ts":{},"dur":2,"args":{{"correlation":{corr}}}}}"#, t0 + 1.0));
        ev.push(format!(r#"{{"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16","pid":0,"tid":7,"ts":{},"dur":6000,"args":{{"stream":7,"correlation":{corr}}}}}"#, t0 + 5.0));
        let mut at = t0 + 5000.0;
        for i in 0..21 {
            let (nelems, dur) = if i < 20 { (16_384u64, 50.0) } else { (16 << 20, 1000.0) };
            corr += 1;
            ev.push(format!(
                r#"{{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":100,"ts":{at},"dur":5,"args":{{"Collective name":"allreduce","In msg nelems":{nelems},"Out msg nelems":{nelems},"dtype":"Float","Group size":{ranks},"Process Group Name":"0","Process Group Ranks":"[0, 1, 2, 3]"}}}}"#
            ));
            ev.push(format!(r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":100,"ts":{},"dur":2,"args":{{"correlation":{corr}}}}}"#, at + 1.0));
            let kernel_dur = dur + 200.0 - late_us;
            ev.push(format!(
                r#"{{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":20,"ts":{},"dur":{kernel_dur},"args":{{"stream":20,"correlation":{corr}}}}}"#,
                at + 10.0 + late_us
            ));
            at += kernel_dur + 20.0 + late_us;
        }
    }
    format!(
        r#"{{"schemaVersion":1,"distributedInfo":{{"backend":"nccl","rank":{rank},"world_size":{ranks}}},"traceEvents":[{}]}}"#,
        ev.join(",\n")
    )
}

/// An nccl-tests all_reduce_perf table over four ranks: busbw rising to 300 GB/s, half of it
/// reached at 4 MiB (the crossover).
fn made_sweep() -> String {
    let mut t = String::from("# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n# Collective test starting: all_reduce_perf\n#\n# Using devices\n");
    for r in 0..4 {
        t += &format!(
            "#  Rank  {r} Group  0 Pid   1957 on     gpu-0{} device  {r} [0000:00:06] NVIDIA H200\n",
            r / 2 + 1
        );
    }
    t += "#\n#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n";
    for (size, busbw) in [
        (65_536u64, 4.0),
        (262_144, 14.0),
        (1 << 20, 40.0),
        (4 << 20, 160.0),
        (16 << 20, 250.0),
        (64 << 20, 300.0),
    ] {
        let algbw: f64 = busbw / 1.5;
        let time = size as f64 / algbw / 1000.0;
        t += &format!(
            "{size:>12} {:>13}     float     sum      -1 {time:>8.2} {algbw:>7.2} {busbw:>7.2}       0 {time:>8.2} {algbw:>7.2} {busbw:>7.2}       0\n",
            size / 4
        );
    }
    t += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 120\n#\n# Collective test concluded: all_reduce_perf\n";
    t
}

fn made_job(dir: &Path) {
    for r in 0..4u32 {
        let base = if r < 2 { 1.0e9 } else { 5.0e9 };
        let late = if r == 3 { 150.0 } else { 0.0 };
        std::fs::write(dir.join(format!("trace-{r}.json")), made_rank(r, 4, base, late)).unwrap();
    }
    std::fs::write(dir.join("hosts"), "gpu-01 slots=2\ngpu-02 slots=2\n").unwrap();
    std::fs::write(dir.join("sweep.txt"), made_sweep()).unwrap();
}

/// Small collectives whose time is other ranks waiting for the last one are not a
/// small-message problem: rank 3's own 64 KiB kernels take 5 µs, the others' 250 µs wait for
/// it. Before, 77 % of communication was "in all-reduces under 1 MiB" and the first advice
/// was to raise the bucket size; the transfers are 2 % of it, and the waiting is the
/// straggler's.
#[test]
fn small_message_advice_rests_on_the_transfer_not_the_waiting() {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..4u32 {
        let late = if r == 3 { 245.0 } else { 0.0 };
        std::fs::write(dir.path().join(format!("trace-{r}.json")), made_rank(r, 4, 1.0e9, late)).unwrap();
    }
    // Each rank's own figures as the independent reading has them.
    for r in 0..4 {
        cross_check(&dir.path().join(format!("trace-{r}.json")));
    }
    let (code, doc, err) = diagnose(&[os("--trace"), os(dir.path())]);
    assert_eq!(code, Some(0), "{err}");
    assert_schema("diagnose-trace", &doc);
    let t = &doc["trace"];
    let share = t["sizes"]["small_time_share"].as_f64().unwrap();
    assert!(share < 0.05, "{share}");
    let k = &t["sizes"]["kinds"][0];
    // 60 small all-reduces × 3 ranks × 245 µs, and 3 large ones × 3 ranks × 245 µs.
    assert!(
        (k["waiting_us"].as_f64().unwrap() - 63.0 * 3.0 * 245.0).abs() < 0.01,
        "{k}"
    );
    let v = t["verdict"].as_str().unwrap();
    assert!(!v.contains("bucket") && !v.contains("under 1 MiB"), "{v}");
    assert!(
        v.contains(
            "rank 3 arrives last in 100% of 63 matched collectives (46.30 ms of kernel time waiting for the last rank"
        ),
        "{v}"
    );
}

#[test]
fn a_made_job_gets_every_part_of_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    made_job(dir.path());
    for r in 0..4 {
        cross_check(&dir.path().join(format!("trace-{r}.json")));
    }
    let hosts = dir.path().join("hosts");
    let sweep = dir.path().join("sweep.txt");
    let (code, doc, err) = diagnose(&[
        os("--trace"),
        os(dir.path()),
        os("--hostfile"),
        os(&hosts),
        os("--sweep"),
        os(&sweep),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_schema("diagnose-trace", &doc);
    let t = &doc["trace"];
    assert_eq!(t["sizes"]["small_below"], 4 << 20, "the sweep's crossover");
    // Both sizes run below half of nccl-tests' figure; the verdict names the one that loses
    // the most time (60 × 250 µs at a tenth of the sweep's bandwidth).
    let rows: Vec<(u64, f64)> = t["bandwidth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["size"].as_u64().unwrap(), b["ratio"].as_f64().unwrap()))
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].0, rows[1].0), (65_536, 64 << 20));
    assert!(rows.iter().all(|(_, r)| *r < 0.5), "{rows:?}");
    // 64 MiB in 1.2 ms over 4 ranks: 55.9 GB/s algbw, 83.9 GB/s busbw (the median rank).
    assert!((t["bandwidth"][1]["job_busbw_gbps"].as_f64().unwrap() - 83.886).abs() < 0.01);
    assert_eq!(t["skew"]["straggler"], 3);
    assert_eq!(t["skew"]["ranks"][3]["host"], "gpu-02");
    assert_eq!(t["skew"]["ranks"][3]["last_share"], 1.0);
    // Start times are compared within a host only: both hosts' clocks differ by 4000 s.
    let within: Vec<&str> = t["skew"]["within_host"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(within, ["gpu-01", "gpu-02"]);
    assert!(t["skew"]["within_host"][0]["max_spread_us"].as_f64().unwrap() < 1.0);
    let v = t["verdict"].as_str().unwrap();
    for part in [
        "communication ",
        "of it in all-reduces under 4 MiB (latency-bound on this fabric below 4 MiB): raise DDP's bucket size",
        "all-reduce of 64 KiB runs at 0.4 GB/s busbw in the job, 4.0 GB/s in nccl-tests: contention or a wait inside the job",
        "rank 3 (gpu-02) arrives last in 100% of 63 matched collectives (28.35 ms of kernel time waiting for the last rank, 36.60 ms transferring): doctor on gpu-02",
    ] {
        assert!(v.contains(part), "{part:?} not in {v}");
    }
    // The human table says the same.
    let (code, text) = human(&[
        os("--trace"),
        os(dir.path()),
        os("--hostfile"),
        os(&hosts),
        os("--sweep"),
        os(&sweep),
    ]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("verdict: communication") && text.contains("Last to arrive"),
        "{text}"
    );

    // With the cluster, the straggler's host is doctored (a paper node here: it says so).
    let yaml = dir.path().join("cluster.yaml");
    std::fs::write(&yaml, "nodes:\n  - host: \"gpu-0[1-2]\"\n    simulate: aws-p5en\n").unwrap();
    let (code, doc, err) = diagnose(&[
        os("--cluster-config"),
        os(&yaml),
        os("--trace"),
        os(dir.path()),
        os("--hostfile"),
        os(&hosts),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(doc["doctor"][0]["host"], "gpu-02");
    let v = doc["trace"]["verdict"].as_str().unwrap();
    assert!(v.contains("doctor could not check gpu-02"), "{v}");
}

#[test]
fn a_sweep_measured_in_the_same_run_is_held_against_the_job() {
    // The paper rack with the nccl-tests double (9 µs + 400 GB/s): diagnose sweeps it first.
    let dir = tempfile::tempdir().unwrap();
    made_job(dir.path());
    let cfg = crate::diagnose::cluster(dir.path(), "");
    let out = dir.path().join("out");
    let (code, doc, err) = diagnose(&[
        os("--cluster-config"),
        os(&cfg),
        os("--nodes"),
        os("rack-1"),
        os("--output-dir"),
        os(&out),
        os("--trace"),
        os(dir.path()),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let t = &doc["trace"];
    assert_eq!(t["sweep"], "the sweep on 4 node(s)");
    assert_eq!(t["sizes"]["small_from"], "sweep");
    let rows = t["bandwidth"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for b in rows {
        // The double's busbw at that size over 32 ranks: 400 GB/s algbw × 2·31/32.
        let size = b["size"].as_f64().unwrap();
        let want = size / (9.0e-6 + size / 400.0e9) / 1e9 * 2.0 * 31.0 / 32.0;
        assert!(
            (b["sweep_busbw_gbps"].as_f64().unwrap() - want).abs() < 0.02 * want,
            "{b} vs {want}"
        );
    }
    // A file and a measured sweep at once: one or the other.
    let (code, text) = human(&[
        os("--cluster-config"),
        os(&cfg),
        os("--nodes"),
        os("rack-1"),
        os("--trace"),
        os(dir.path()),
        os("--sweep"),
        os(&dir.path().join("sweep.txt")),
    ]);
    assert_eq!(code, Some(2), "{text}");
    // A benchmark that ignores its hosts measured one GPU, not the rack: not a yardstick.
    let one = tempfile::tempdir().unwrap();
    let cfg1 = crate::diagnose::cluster(one.path(), "FAKE_NCCL_RANKS=1");
    let (code, text) = human(&[
        os("--cluster-config"),
        os(&cfg1),
        os("--nodes"),
        os("rack-1"),
        os("--output-dir"),
        os(&one.path().join("out")),
        os("--trace"),
        os(dir.path()),
    ]);
    assert_eq!(code, Some(65), "{text}");
    assert!(
        text.contains("the sweep on --nodes measured another set")
            && text.contains("ran 1 rank(s) where the 4 node(s) have 32"),
        "{text}"
    );
    // --output-dir without --nodes would be ignored: refused instead.
    let (code, text) = human(&[os("--trace"), os(dir.path()), os("--output-dir"), os(&out)]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("go with --nodes"), "{text}");
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn bad_traces_are_errors_naming_the_file_or_counted_skips() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let real = std::fs::read(data("sampled_rank-0.json.gz")).unwrap();
    let cases: Vec<(&str, Vec<u8>, i32, &str)> = vec![
        ("cut.json.gz", real[..real.len() / 2].to_vec(), 65, "truncated"),
        ("garbage.json", b"hello".to_vec(), 65, "not a JSON object"),
        ("empty.json", Vec::new(), 65, "ends early"),
        (
            "object.json",
            b"{\"schemaVersion\":1}".to_vec(),
            65,
            "not a PyTorch profiler trace: no `traceEvents`",
        ),
        ("array.json", b"[{\"ph\":\"X\"}]".to_vec(), 65, "bare JSON array"),
        (
            "nested.json",
            format!(
                "{{\"traceEvents\":[{{\"args\":{{\"deep\":{}{}}}}}]}}",
                "[".repeat(200),
                "]".repeat(200)
            )
            .into_bytes(),
            65,
            "which rank it is is unknown",
        ),
        (
            "open.json",
            format!("{{\"traceEvents\":[{{\"args\":{}", "[".repeat(200)).into_bytes(),
            65,
            "event 0: the file ends early",
        ),
        (
            "events.json.gz",
            gz(b"{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1,\"dur\":2},7]}"),
            65,
            "event 1: invalid type: integer `7`",
        ),
        (
            "norank.json",
            b"{\"traceEvents\":[]}".to_vec(),
            65,
            "which rank it is is unknown",
        ),
    ];
    for (name, bytes, want_code, want) in cases {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        let (code, text) = human(&[os("--trace"), os(&p)]);
        assert_eq!(code, Some(want_code), "{name}: {text}");
        assert!(
            text.contains(&p.display().to_string()) && text.contains(want),
            "{name}: {text}"
        );
        assert!(!text.contains("panicked"), "{name}: {text}");
    }
    // Two files that claim one rank.
    let two = d.join("two");
    std::fs::create_dir(&two).unwrap();
    std::fs::write(two.join("a.json.gz"), &real).unwrap();
    std::fs::write(two.join("b.json.gz"), &real).unwrap();
    let (code, text) = human(&[os("--trace"), os(&two)]);
    assert_eq!(code, Some(65), "{text}");
    assert!(
        text.contains("a.json.gz and") && text.contains("b.json.gz both claim rank 0"),
        "{text}"
    );
    // A FIFO is refused without waiting for a writer; a directory without traces is no input.
    let fifo = d.join("fifo.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (code, text) = human(&[os("--trace"), os(&fifo)]);
    assert_eq!(code, Some(74), "{text}");
    assert!(text.contains("a FIFO: refused"), "{text}");
    std::fs::remove_file(&fifo).unwrap();
    let bare = d.join("bare");
    std::fs::create_dir(&bare).unwrap();
    let (code, text) = human(&[os("--trace"), os(&bare)]);
    assert_eq!(code, Some(66), "{text}");
    assert!(text.contains("no .json or .json.gz trace in it"), "{text}");
}

#[test]
fn missing_negative_and_overlapping_times_are_counted_not_figured() {
    let dir = tempfile::tempdir().unwrap();
    let clean = made_rank(0, 4, 1.0e9, 0.0);
    // The same rank with junk added: an event without dur, one with a negative dur, one with
    // a string ts, and a second copy of a kernel overlapping the first on its stream.
    let junk = r#"{"ph":"X","cat":"kernel","name":"ncclDevKernel_x","tid":20,"ts":1000000100},
        {"ph":"X","cat":"kernel","name":"ncclDevKernel_x","tid":20,"ts":1000000100,"dur":-40},
        {"ph":"X","cat":"kernel","name":"sm90_gemm","tid":7,"ts":"late","dur":4},
        {"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16","pid":0,"tid":7,"ts":1000000010,"dur":3000,"args":{"stream":7}},"#;
    let dirty = clean.replacen("\"traceEvents\":[", &format!("\"traceEvents\":[{junk}"), 1);
    std::fs::write(dir.path().join("clean-rank0.json"), &clean).unwrap();
    std::fs::write(dir.path().join("dirty-rank0.json"), &dirty).unwrap();
    let run = |name: &str| diagnose(&[os("--trace"), os(&dir.path().join(name))]).1;
    let (c, d) = (run("clean-rank0.json"), run("dirty-rank0.json"));
    let rank = |doc: &serde_json::Value| doc["trace"]["ranks"][0].clone();
    assert_eq!(rank(&d)["skipped"], serde_json::json!({"no_time": 1, "bad_time": 2}));
    assert_eq!(
        rank(&c)["overall"],
        rank(&d)["overall"],
        "the overlapping copy merges into the kernel it overlaps"
    );
    let (_, text) = human(&[os("--trace"), os(&dir.path().join("dirty-rank0.json"))]);
    assert!(
        text.contains("3 event(s) skipped (1 without ts/dur, 2 with a negative or invalid time)"),
        "{text}"
    );
}
