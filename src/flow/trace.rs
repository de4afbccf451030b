//! `diagnose --trace`: the job's profiler traces found (files, or the `.json`/`.json.gz` in a
//! directory), opened as regular files only, gunzipped while read and bounded, read in
//! parallel (one rank per worker, each reduced to figures before the next is read), mapped to
//! hosts (a hostfile, or ranks per node), held against an nccl-tests sweep (a file, or one
//! measured first on `--nodes`), and — when the cluster is known — the straggler's host
//! doctored like a bisection suspect.

use super::diagnose::{doctor_on, verdict};
use super::trace_error::TraceError;
use crate::error::Error;
use crate::flow::settings::TraceSettings;
use crate::report::Printer;
use crate::trace::job::{DoctorSaid, Finding};
use crate::trace::{self, read, RankTrace, SweepRef, TraceReport};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most trace files one run reads (a 4,096-GPU job has 4,096).
const MAX_FILES: usize = 65_536;
/// Most bytes one trace may hold once decompressed.
const MAX_TRACE_BYTES: u64 = 16 << 30;
/// Most collectives kept across every rank (64 bytes each: 640 MB); a job past it is refused
/// rather than read into swap. 64 ranks of 124,000 collectives each fit under 1 GiB.
pub(crate) const MAX_COLLECTIVES: usize = 10_000_000;

/// The report, with doctor's word on the straggler's host when it was asked.
pub(crate) struct TraceOutcome {
    pub(crate) report: TraceReport,
    pub(crate) doctor: Vec<crate::report::diagnose::DoctorOn>,
}

pub(crate) fn diagnose_traces(s: &TraceSettings, printer: &Printer) -> Result<TraceOutcome, Error> {
    let files = trace_files(&s.paths)?;
    let hosts = match &s.hostfile {
        Some(f) => Some(hostfile(f, s.ranks_per_node)?),
        None => None,
    };
    let ranks = read_all(&files, s.workers, MAX_COLLECTIVES, |rank| {
        let host = hosts.as_deref().and_then(|h| h.get(rank as usize).cloned());
        let group = s
            .ranks_per_node
            .filter(|_| hosts.is_none())
            .map(|n| format!("node{}", rank / n));
        (host, group)
    })?;
    // Measured (or read) after the traces: a bad trace costs no benchmark run.
    let sweep = match (&s.measure, &s.sweep) {
        (Some(m), _) => {
            let run = super::diagnose::measured_sweep(m, printer)?;
            Some(SweepRef {
                file: format!("the sweep on {} node(s)", m.hosts.len()),
                rows: run.rows,
                ranks: run.ranks,
            })
        }
        (None, Some(f)) => Some(load_sweep(f)?),
        (None, None) => None,
    };
    let mut report = trace::analyse(&ranks, sweep.as_ref());
    let mut doctor = Vec::new();
    let suspect = report
        .skew
        .straggler
        .and_then(|r| ranks.iter().find(|t| t.rank == r))
        .and_then(|t| t.host.clone());
    if let (Some((inv, reach)), Some(host)) = (&s.cluster, suspect) {
        if inv.nodes.iter().any(|n| n.host == host) {
            doctor = doctor_on(inv, reach, std::slice::from_ref(&host), printer)?;
            let said = doctor_said(&doctor, &host);
            report.findings.push(Finding::Doctor { host, said });
        }
    }
    Ok(TraceOutcome { report, doctor })
}

/// What doctor said of the straggler's host, as figures for the verdict.
fn doctor_said(doctor: &[crate::report::diagnose::DoctorOn], host: &str) -> DoctorSaid {
    if let Some(c) = verdict::most_telling(doctor, host) {
        return DoctorSaid::Cause {
            phrase: crate::doctor::cause(&c.check).1.to_string(),
            check: c.check.clone(),
            detail: c.detail.clone(),
            fix: c.fix.clone(),
        };
    }
    match verdict::doctor_error(doctor, host) {
        Some(why) => DoctorSaid::CouldNot(why.to_string()),
        None => DoctorSaid::Nothing,
    }
}

/// The trace files named: each file as given, each directory's `.json`/`.json.gz` files.
fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, TraceError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| TraceError::Open {
            file: p.display().to_string(),
            source: e,
        })?;
        if !meta.is_dir() {
            out.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p).map_err(|e| TraceError::Open {
            file: p.display().to_string(),
            source: e,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".json") || n.ends_with(".json.gz"))
            })
            .take(MAX_FILES + 1)
            .collect();
        if found.is_empty() {
            return Err(TraceError::NoTraces {
                path: p.display().to_string(),
            });
        }
        found.sort();
        out.extend(found);
        if out.len() > MAX_FILES {
            return Err(TraceError::TooManyFiles(MAX_FILES));
        }
    }
    Ok(out)
}

/// A reader that fails once more than its limit has come through (a gzip bomb, a runaway
/// file), instead of reading on.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "more than {} once decompressed: refused",
                    crate::input::show_size(MAX_TRACE_BYTES)
                ),
            )
        })?;
        Ok(n)
    }
}

/// Read one trace: gzip by its magic bytes, not its name.
fn read_one(path: &Path) -> Result<read::RawTrace, TraceError> {
    let file = path.display().to_string();
    let open = |source| TraceError::Open {
        file: file.clone(),
        source,
    };
    let f = crate::input::open_regular(path, "trace").map_err(open)?;
    let mut buffered = BufReader::with_capacity(1 << 20, f);
    let gz = {
        use std::io::BufRead;
        buffered.fill_buf().map_err(open)?.starts_with(&[0x1f, 0x8b])
    };
    let input: Box<dyn Read> = if gz {
        Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
    } else {
        Box::new(buffered)
    };
    let capped = BufReader::with_capacity(
        1 << 20,
        Capped {
            inner: input,
            left: MAX_TRACE_BYTES,
        },
    );
    read::read(capped).map_err(|source| TraceError::Read { file, source })
}

/// `rank-3`, `rank_3`, `Rank3` in a file name.
fn rank_in_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    let at = name.rfind("rank")? + 4;
    let rest = name[at..].trim_start_matches(['-', '_']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Every trace read and reduced to figures, `workers` at a time, in rank order.
fn read_all(
    files: &[PathBuf],
    workers: usize,
    max_collectives: usize,
    host: impl Fn(u32) -> (Option<String>, Option<String>) + Sync,
) -> Result<Vec<RankTrace>, TraceError> {
    let next = AtomicUsize::new(0);
    let kept = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RankTrace, TraceError>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, files.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                if kept.load(Ordering::Relaxed) > max_collectives {
                    break;
                }
                let one = read_one(path).and_then(|raw| {
                    let file = path.display().to_string();
                    let rank = raw
                        .dist
                        .as_ref()
                        .and_then(|d| d.rank)
                        .and_then(|r| u32::try_from(r).ok())
                        .or_else(|| rank_in_name(path))
                        .ok_or(TraceError::NoRank { file: file.clone() })?;
                    let (h, group) = host(rank);
                    let t = RankTrace::new(rank, file, h, group, raw);
                    let so_far =
                        kept.fetch_add(t.figures.collectives.len(), Ordering::Relaxed) + t.figures.collectives.len();
                    if so_far > max_collectives {
                        return Err(TraceError::TooManyCollectives {
                            limit: max_collectives,
                            file: t.file,
                        });
                    }
                    Ok(t)
                });
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(one);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    let mut ranks = Vec::with_capacity(results.len());
    for r in results.into_iter().flatten() {
        ranks.push(r?);
    }
    ranks.sort_by_key(|r| r.rank);
    if let Some(w) = ranks.windows(2).find(|w| w[0].rank == w[1].rank) {
        return Err(TraceError::SameRank {
            rank: w[0].rank,
            first: w[0].file.clone(),
            second: w[1].file.clone(),
        });
    }
    trace::one_job(&ranks)?;
    Ok(ranks)
}

/// An mpirun hostfile (`host slots=N`, `host:N`, `host`; `#` comments), expanded to one
/// entry per rank in order (mpirun's by-slot mapping). Slots default to `--ranks-per-node`.
fn hostfile(path: &Path, per_node: Option<u32>) -> Result<Vec<String>, TraceError> {
    let file = path.display().to_string();
    let text =
        crate::input::read_text(path, crate::input::CONFIG_LIMIT, "hostfile").map_err(|source| TraceError::Open {
            file: file.clone(),
            source,
        })?;
    let mut ranks = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |message: String| TraceError::Hostfile {
            file: file.clone(),
            line: i + 1,
            message,
        };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        let (host, colon) = match first.split_once(':') {
            Some((h, n)) => (h, Some(n)),
            None => (first, None),
        };
        if crate::config::names::check_host(host).is_err() {
            return Err(bad(format!("{host:?} is not a host name")));
        }
        let slots_word = words.find_map(|w| w.strip_prefix("slots="));
        let slots = match colon.or(slots_word) {
            Some(n) => n
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=4096).contains(n))
                .ok_or_else(|| bad(format!("{n:?} is not a slot count (1 to 4096)")))?,
            None => per_node.unwrap_or(1),
        };
        ranks.extend(std::iter::repeat_n(host.to_string(), slots as usize));
        if ranks.len() > 1 << 20 {
            return Err(bad("more than 1,048,576 ranks".into()));
        }
    }
    Ok(ranks)
}

/// An nccl-tests all-reduce run (`-J` JSON or the text table).
fn load_sweep(path: &Path) -> Result<SweepRef, TraceError> {
    let file = path.display().to_string();
    let text = crate::input::read_text(path, crate::bench::parse::OUTPUT_LIMIT as u64, "sweep").map_err(|source| {
        TraceError::Open {
            file: file.clone(),
            source,
        }
    })?;
    let run = if text.trim_start().starts_with('{') {
        crate::bench::parse::parse_json(&text)
    } else {
        crate::bench::parse::parse_text(&text)
    }
    .map_err(|e| TraceError::Sweep {
        file: file.clone(),
        message: e.to_string(),
    })?;
    if run.rows.is_empty() {
        return Err(TraceError::Sweep {
            file,
            message: "no size in it".into(),
        });
    }
    Ok(SweepRef {
        file,
        rows: run.rows,
        ranks: run.ranks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory budget is a stated number of collectives across every rank: past it the
    /// traces are refused (naming the file that crossed it), not read into swap.
    #[test]
    fn past_the_collective_budget_the_traces_are_refused() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces");
        // 3 collectives a rank (nested-sizes.json), as ranks 0 and 1.
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(data.join("nested-sizes.json")).unwrap();
        for r in 0..2 {
            let t = text.replace("\"rank\": 0", &format!("\"rank\": {r}"));
            std::fs::write(dir.path().join(format!("rank-{r}.json")), t).unwrap();
        }
        let files = trace_files(&[dir.path().to_path_buf()]).unwrap();
        let none = |_| (None, None);
        assert_eq!(read_all(&files, 2, 6, none).unwrap().len(), 2);
        let Err(e) = read_all(&files, 1, 5, none) else {
            panic!("6 collectives read under a budget of 5");
        };
        let e = e.to_string();
        assert!(e.contains("the traces hold more than 5 collectives together"), "{e}");
    }

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_in_name(Path::new("/t/sampled_rank-1.json.gz")), Some(1));
        assert_eq!(rank_in_name(Path::new("Rank12.json")), Some(12));
        assert_eq!(rank_in_name(Path::new("trace.json")), None);
    }

    #[test]
    fn hostfiles_as_mpirun_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("hosts");
        std::fs::write(&f, "# the job\ngpu-01 slots=2\ngpu-02:1\ngpu-03   # two by default\n").unwrap();
        assert_eq!(
            hostfile(&f, Some(2)).unwrap(),
            ["gpu-01", "gpu-01", "gpu-02", "gpu-03", "gpu-03"]
        );
        std::fs::write(&f, "gpu-01 slots=lots\n").unwrap();
        assert!(hostfile(&f, None)
            .unwrap_err()
            .to_string()
            .contains(":1: \"lots\" is not a slot count"));
        std::fs::write(&f, "gpu;rm slots=1\n").unwrap();
        assert!(hostfile(&f, None)
            .unwrap_err()
            .to_string()
            .contains("is not a host name"));
    }
}
