//! Fuzzing every parser of outside input (the entry points in `topo_tune::fuzz`): a seeded,
//! mutational black-box fuzzer over the committed corpus in `fuzz/corpus/<target>/`. Each
//! input runs in-process; a panic is a crash, an input slower than `SLOW` a hang (a watchdog
//! saves it and stops the run). Inputs with an outcome not seen before join the corpus.
//!
//! CI runs each target for a few seconds; a campaign sets `TOPO_TUNE_FUZZ_SECS` (600 for the
//! record) and `TOPO_TUNE_FUZZ_SAVE=1` to keep new corpus entries:
//!
//!   TOPO_TUNE_FUZZ_SECS=600 TOPO_TUNE_FUZZ_SAVE=1 cargo test --release --all-features --test main fuzz::
//!
//! A finding is replayed with `TOPO_TUNE_FUZZ_REPLAY=target/fuzz-findings/<target>-… cargo test
//! --release --all-features --test main fuzz::<target> -- --nocapture`.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An input slower than this is a hang.
const SLOW: Duration = Duration::from_secs(10);
/// Largest input the mutator makes (the parsers' own size limits are tested elsewhere).
const MAX_LEN: usize = 1 << 20;
/// Corpus entries kept per target.
const MAX_CORPUS: usize = 256;

/// Tokens that matter to one format or another: separators, escapes, huge numbers.
const DICT: &[&str] = &[
    "<",
    ">",
    "/>",
    "</",
    "\"",
    "'",
    "=",
    "&",
    "&amp;",
    "<!DOCTYPE x [<!ENTITY a \"b\">]>",
    "<!--",
    "-->",
    "\n",
    "\r",
    "\r\n",
    "\t",
    " ",
    ":",
    ",",
    "^",
    "-",
    "..",
    "../",
    "/",
    "\0",
    "\u{1b}[2J",
    "0xf...f",
    "0x",
    "ffffffff,",
    "18446744073709551615",
    "4294967295",
    "-1",
    "0",
    "65535",
    "99999",
    "1e308",
    "NaN",
    "null",
    "~",
    "!!str ",
    "!tag ",
    "&anchor ",
    "*anchor",
    "{",
    "}",
    "[",
    "]",
    "- ",
    "nodes:",
    "host:",
    "simulate:",
    "ssh:",
    "port:",
    "forks:",
    "labels:",
    "fabric:",
    "rails:",
    "nccl:",
    "reserved_cpus:",
    "NCCL_IB_HCA=",
    "NCCL_SOCKET_IFNAME=",
    "NCCL_TOPO_FILE=",
    "#",
    "<system version=\"1\">",
    "<cpu numaid=\"0\" affinity=\"ff\">",
    "<pci busid=\"0000:01:00.0\" class=\"0x030200\">",
    "</pci>",
    "<gpu dev=\"0\" sm=\"90\"/>",
    "<nvlink target=\"0000:01:00.0\" count=\"18\" tclass=\"0x068000\"/>",
    "<nic><net name=\"mlx5_0\" port=\"1\" speed=\"400000\"/></nic>",
    "gcn=\"gfx942\"",
    "<xgmi ",
    "<graphs version=\"1\">",
    "<object type=\"PCIDev\" ",
    "cpuset=\"",
    "nodeset=\"",
    "pci_busid=\"",
    "pci_type=\"0302 [10de:2335] [10de:18be] a1\"",
    "\"schema_version\":2",
    "\"name\":",
    "\"architecture\":",
    "\"cpus\":\"0-65535\"",
    "mlx5_comp0@pci:0000:81:00.0",
    "CPU0",
    "PCI-MSIX-0000:81:00.0",
    "IR-PCI-MSI",
];

/// xorshift64*: seeded, so a run can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(9) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next() as u8;
            }
            2 | 3 => {
                let tok = DICT[rng.below(DICT.len())].as_bytes();
                out.splice(at..at, tok.iter().copied());
            }
            4 if !out.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                out.drain(at.min(end)..end);
            }
            5 if !out.is_empty() => {
                // Repeat a slice (nesting, duplicate lines, long lists).
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(256)).min(out.len());
                let piece = out[start..end].to_vec();
                for _ in 0..1 + rng.below(64) {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            6 => {
                // Splice another corpus entry in.
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let start = rng.below(other.len());
                    let end = (start + 1 + rng.below(512)).min(other.len());
                    out.splice(at..at, other[start..end].iter().copied());
                }
            }
            7 if !out.is_empty() => out.truncate(rng.below(out.len())),
            _ => {
                let n = rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
        }
        out.truncate(MAX_LEN);
    }
    out
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

fn load_corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let corpus: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    assert!(!corpus.is_empty(), "fuzz/corpus/{target}/ holds the seeds");
    corpus
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `TOPO_TUNE_FUZZ_REPLAY=FILE`: run one saved input (a finding) of this target once and say
/// what it does and how long it takes. Returns whether a replay was asked for.
fn replay(target: &str, run: fn(&[u8]) -> String) -> bool {
    let Some(file) = std::env::var_os("TOPO_TUNE_FUZZ_REPLAY").filter(|f| Path::new(f).exists()) else {
        return false;
    };
    let name = Path::new(&file).file_name().map(|n| n.to_string_lossy().into_owned());
    if name.is_some_and(|n| n.starts_with(target)) {
        let input = std::fs::read(&file).unwrap();
        let t = Instant::now();
        let outcome = run(&input);
        eprintln!("fuzz {target}: replayed in {:?}: {outcome}", t.elapsed());
    }
    true
}

/// What the watchdog watches: when the input in flight started, whether one is in flight,
/// and the input.
struct Watchdog {
    started: Arc<AtomicU64>,
    busy: Arc<AtomicBool>,
    current: Arc<std::sync::Mutex<Vec<u8>>>,
}

/// A watchdog for hangs: the input in flight is saved before the process stops.
fn watchdog(target: &str, findings: &Path, epoch: Instant) -> Watchdog {
    let started = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicBool::new(false));
    let current = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let (w_started, w_busy, w_current, findings, target) = (
        Arc::clone(&started),
        Arc::clone(&busy),
        Arc::clone(&current),
        findings.to_path_buf(),
        target.to_string(),
    );
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        // Read the start first: an input that starts after `elapsed` was read must not
        // underflow into a false hang.
        let start = w_started.load(Ordering::SeqCst);
        let since = (epoch.elapsed().as_millis() as u64).saturating_sub(start);
        if w_busy.load(Ordering::SeqCst) && since > SLOW.as_millis() as u64 {
            let input = w_current.lock().map(|c| c.clone()).unwrap_or_default();
            let _ = std::fs::create_dir_all(&findings);
            let path = findings.join(format!("{target}-hang-{:016x}", fnv(&input)));
            let _ = std::fs::write(&path, &input);
            eprintln!(
                "fuzz {target}: an input ran past {} s: {}",
                SLOW.as_secs(),
                path.display()
            );
            std::process::abort();
        }
    });
    Watchdog { started, busy, current }
}

/// Run one target for `TOPO_TUNE_FUZZ_SECS` (default 3) and report executions; a panic or a
/// hang fails the test, with the input saved under `target/fuzz-findings/`.
fn fuzz(target: &str, run: fn(&[u8]) -> String) {
    if replay(target, run) {
        return;
    }
    let secs: u64 = std::env::var("TOPO_TUNE_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let save = std::env::var_os("TOPO_TUNE_FUZZ_SAVE").is_some();
    let trace = std::env::var_os("TOPO_TUNE_FUZZ_TRACE").is_some();
    let seed: u64 = std::env::var("TOPO_TUNE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed)
        ^ fnv(target.as_bytes());
    let findings = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings");
    let mut corpus = load_corpus(target);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // The seeds run first, unmutated.
    for input in corpus.clone() {
        seen.insert(run(&input));
    }
    let epoch = Instant::now();
    let Watchdog { started, busy, current } = watchdog(target, &findings, epoch);
    let mut rng = Rng(seed | 1);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut execs, mut added, mut isolated) = (0u64, 0usize, 0u64);
    while Instant::now() < deadline {
        let base = corpus[rng.below(corpus.len())].clone();
        let input = mutate(&mut rng, &base, &corpus);
        if let Ok(mut c) = current.lock() {
            c.clone_from(&input);
        }
        if trace {
            // A crash inside C code (a signal) cannot be caught: the last input is on disk.
            let _ = std::fs::create_dir_all(&findings);
            let _ = std::fs::write(findings.join(format!("{target}-last")), &input);
        }
        started.store(epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
        busy.store(true, Ordering::SeqCst);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| run(&input)));
        busy.store(false, Ordering::SeqCst);
        execs += 1;
        match result {
            Ok(outcome) if outcome.contains("died (signal") => {
                // Isolated: topo-tune refused the file and went on; kept for the record.
                isolated += 1;
                let _ = std::fs::create_dir_all(&findings);
                let _ = std::fs::write(findings.join(format!("{target}-isolated-{:016x}", fnv(&input))), &input);
            }
            Ok(outcome) => {
                if seen.insert(outcome) && corpus.len() < MAX_CORPUS {
                    if save && input.len() <= 64 * 1024 {
                        let _ = std::fs::write(corpus_dir(target).join(format!("found-{:016x}", fnv(&input))), &input);
                    }
                    corpus.push(input);
                    added += 1;
                }
            }
            Err(_) => {
                let _ = std::fs::create_dir_all(&findings);
                let path = findings.join(format!("{target}-crash-{:016x}", fnv(&input)));
                let _ = std::fs::write(&path, &input);
                panic!(
                    "fuzz {target}: a panic after {execs} executions; the input is {}",
                    path.display()
                );
            }
        }
    }
    eprintln!(
        "fuzz {target}: {secs} s, {execs} executions, 0 crashes, 0 hangs, {isolated} crashes of the C library taken by the child process, {} outcomes, {added} new corpus entries",
        seen.len()
    );
}

#[test]
fn cluster_yaml() {
    fuzz("cluster_yaml", topo_tune::fuzz::cluster_yaml);
}

#[test]
fn hwloc_xml() {
    // hwloc's importer is C: it runs in the child process the CLI uses.
    topo_tune::fuzz::set_binary(crate::common::run::binary_path());
    fuzz("hwloc_xml", topo_tune::fuzz::hwloc_xml);
}

#[test]
fn nccl_topology() {
    fuzz("nccl_topology", topo_tune::fuzz::nccl_topology);
}

#[test]
fn proc_interrupts() {
    fuzz("proc_interrupts", topo_tune::fuzz::proc_interrupts);
}

#[test]
fn foreign_nccl_conf() {
    fuzz("foreign_nccl_conf", topo_tune::fuzz::foreign_nccl_conf);
}

#[test]
fn nccl_config_lines() {
    fuzz("nccl_config_lines", topo_tune::fuzz::nccl_config_lines);
}

#[test]
fn aws_topology() {
    fuzz("aws_topology", topo_tune::fuzz::aws_topology);
}

#[test]
fn guid_map() {
    fuzz("guid_map", topo_tune::fuzz::guid_map);
}

#[test]
fn ibnetdiscover() {
    fuzz("ibnetdiscover", topo_tune::fuzz::ibnetdiscover);
}

#[test]
fn irq_restore_record() {
    fuzz("irq_restore_record", topo_tune::fuzz::irq_restore_record);
}

#[test]
fn doctor_answer() {
    fuzz("doctor_answer", topo_tune::fuzz::doctor_answer);
}

#[test]
fn snapshot_json() {
    fuzz("snapshot_json", topo_tune::fuzz::snapshot_json);
}

#[test]
fn nccl_tests_text() {
    fuzz("nccl_tests_text", topo_tune::fuzz::nccl_tests_text);
}

#[test]
fn nccl_tests_json() {
    fuzz("nccl_tests_json", topo_tune::fuzz::nccl_tests_json);
}

#[test]
fn rollout_record() {
    fuzz("rollout_record", topo_tune::fuzz::rollout_record);
}

#[test]
fn plan_json() {
    fuzz("plan_json", topo_tune::fuzz::plan_json);
}

#[test]
fn tuning_json() {
    fuzz("tuning_json", topo_tune::fuzz::tuning_json);
}

#[test]
fn trace_events() {
    fuzz("trace_events", topo_tune::fuzz::trace_events);
}
