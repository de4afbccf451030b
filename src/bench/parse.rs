//! nccl-tests output read into typed figures: the text table (every version's columns:
//! `#wrong` or the older `error`, 2.19's `-I` per-iteration columns) and the `-J` JSON
//! (version 3). A run that reports wrong values, out-of-bounds values, an NCCL `WARN` or a
//! test failure is a failed run, never a figure. Pure: text in, figures or a reason out.

use serde::{Deserialize, Serialize};

/// The most a benchmark's output may hold before it is refused (a runaway log).
pub(crate) const OUTPUT_LIMIT: usize = 16 << 20;
/// Rows a run may report (nccl-tests steps sizes by a factor: 8 B..4 GB at ×2 is 30 rows).
const MAX_ROWS: usize = 4096;

/// One message size of one run: the out-of-place figures (in-place is left out: with one
/// rank NCCL short-cuts it, and out-of-place is what applications use most).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeFigures {
    pub size: u64,
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// P99 of the per-iteration times (`-I 1`), when the run has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
}

/// What one benchmark run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRun {
    /// `2.19.6`, when the output says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_tests_version: Option<String>,
    /// Ranks that took part (the `Rank` lines, or the JSON's devices).
    pub ranks: u32,
    pub rows: Vec<SizeFigures>,
}

impl BenchRun {
    /// What every run must hold, whoever read it (the parsers, a rollout record): at most
    /// [`MAX_ROWS`] sizes, each larger than the one before (one table, no size twice), times
    /// above zero (a zero time or P99 is a malformed run, not an infinitely fast one),
    /// bandwidths finite and not negative.
    pub(crate) fn check(&self) -> Result<(), BenchError> {
        let bad = |message: String| Err(BenchError::Json(message));
        if self.rows.len() > MAX_ROWS {
            return bad(format!("more than {MAX_ROWS} sizes"));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 && r.size <= self.rows[i - 1].size {
                return bad(format!(
                    "size {} B follows {} B: one run is one table with each size once",
                    r.size,
                    self.rows[i - 1].size
                ));
            }
            if !positive(r.time_us) || r.p99_us.is_some_and(|p| !positive(p)) {
                return bad(format!("size {} B: a time of zero or less is no measurement", r.size));
            }
            if !non_negative(r.algbw) || !non_negative(r.busbw) {
                return bad(format!("size {} B: a bandwidth is negative or not a number", r.size));
            }
        }
        Ok(())
    }
}

/// Why a run did not measure the set it was given: its ranks are not `nodes` × `gpus` (a
/// command that ignores `{hosts}` measures one node, or another set).
pub(crate) fn off_the_set(ranks: u32, nodes: usize, gpus: u32) -> Option<String> {
    let expected = (nodes as u64).saturating_mul(u64::from(gpus));
    (u64::from(ranks) != expected).then(|| {
        format!(
            "the benchmark ran {ranks} rank(s) where the {nodes} node(s) have {expected}: benchmark.command must spread over the nodes it is given (mpirun -np {{ranks}} -H {{hosts_slots}}, or srun with {{hosts}})"
        )
    })
}

/// Why a run's output gives no figures.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BenchError {
    #[error("line {line}: {message}")]
    Malformed { line: usize, message: String },
    #[error("{0}")]
    Json(String),
    #[error("line {line}: {count} wrong values at {size} B ({place}): the results are not correct")]
    Wrong {
        line: usize,
        size: u64,
        count: u64,
        place: &'static str,
    },
    #[error("line {line}: nccl-tests reports {count} out-of-bounds values (FAILED)")]
    OutOfBounds { line: usize, count: u64 },
    #[error("line {line}: {text}")]
    Failure { line: usize, text: String },
    #[error("the output has no result rows (no size/count table)")]
    NoRows,
    #[error("the output is {0} bytes, more than a benchmark log may be")]
    TooLarge(usize),
}

/// The columns of the text table, located from its header line.
struct Columns {
    time: usize,
    algbw: usize,
    busbw: usize,
    wrong: Option<usize>,
    p99: Option<usize>,
    /// The in-place `#wrong` column (correctness counts there too).
    wrong_in_place: Option<usize>,
    len: usize,
}

fn columns(header: &str) -> Option<Columns> {
    let names: Vec<&str> = header.trim_start_matches('#').split_whitespace().collect();
    let first = |n: &str| names.iter().position(|c| *c == n);
    let second = |n: &str| {
        let i = first(n)?;
        names[i + 1..].iter().position(|c| *c == n).map(|j| i + 1 + j)
    };
    if names.first() != Some(&"size") || first("busbw").is_none() {
        return None;
    }
    Some(Columns {
        time: first("time").or_else(|| first("cputime"))?,
        algbw: first("algbw")?,
        busbw: first("busbw")?,
        wrong: first("#wrong"),
        p99: first("i_p99"),
        wrong_in_place: second("#wrong"),
        len: names.len(),
    })
}

fn number(token: &str, what: &str, line: usize) -> Result<f64, BenchError> {
    token
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| BenchError::Malformed {
            line,
            message: format!("{what} `{token}` is not a non-negative number"),
        })
}

/// `N/A` (validation off) counts as no wrong values known; anything else must be a count.
fn wrong_count(token: &str, line: usize) -> Result<u64, BenchError> {
    if token == "N/A" {
        return Ok(0);
    }
    let v = number(token, "#wrong", line)?;
    count(v).ok_or_else(|| BenchError::Malformed {
        line,
        message: format!("#wrong `{token}` is not a count of values"),
    })
}

/// A count of values: a whole number, not negative (`-1` or `0.5` wrong values is no
/// verdict on correctness).
fn count(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0).then(|| v.min(u64::MAX as f64) as u64)
}

/// Lines that make the whole run a failure, wherever they appear (stdout and stderr mixed).
fn failure_line(line: &str) -> bool {
    line.contains("NCCL WARN")
        || line.contains("Test NCCL failure")
        || line.contains("Test CUDA failure")
        || line.contains(": Test failure")
}

/// Parse nccl-tests' text output (stdout, possibly with stderr mixed in).
pub fn parse_text(text: &str) -> Result<BenchRun, BenchError> {
    if text.len() > OUTPUT_LIMIT {
        return Err(BenchError::TooLarge(text.len()));
    }
    let mut cols: Option<Columns> = None;
    let mut run = BenchRun {
        nccl_tests_version: None,
        ranks: 0,
        rows: Vec::new(),
    };
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end();
        if failure_line(line) {
            return Err(BenchError::Failure {
                line: line_no,
                text: line.trim().chars().filter(|c| !c.is_control()).take(200).collect(),
            });
        }
        if let Some(rest) = line.strip_prefix('#') {
            comment(rest, line_no, &mut run, &mut cols)?;
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let is_row = tokens.first().is_some_and(|t| t.bytes().all(|b| b.is_ascii_digit()));
        if !is_row {
            continue;
        }
        let c = cols.as_ref().ok_or_else(|| BenchError::Malformed {
            line: line_no,
            message: "a result row before the column header".into(),
        })?;
        row(&tokens, c, line_no, &mut run)?;
    }
    if run.rows.is_empty() {
        return Err(BenchError::NoRows);
    }
    run.check()?;
    Ok(run)
}

/// A `#` line: the version, a rank, the column header, the out-of-bounds verdict.
fn comment(rest: &str, line: usize, run: &mut BenchRun, cols: &mut Option<Columns>) -> Result<(), BenchError> {
    let t = rest.trim();
    if let Some(v) = t.strip_prefix("nccl-tests version ") {
        run.nccl_tests_version = v.split_whitespace().next().map(str::to_string);
    } else if t.starts_with("Rank ") && t.contains(" on ") {
        run.ranks = run.ranks.saturating_add(1);
    } else if t.starts_with("size ") {
        if cols.is_some() {
            return Err(BenchError::Malformed {
                line,
                message: "a second result table: one run prints one (two runs' output mixed?)".into(),
            });
        }
        *cols = Some(columns(t).ok_or_else(|| BenchError::Malformed {
            line,
            message: "a column header without time/algbw/busbw columns".into(),
        })?);
    } else if let Some(v) = t.strip_prefix("Out of bounds values") {
        let v = v.trim_start_matches([' ', ':']).trim();
        let count = v.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
        if v.contains("FAILED") || count.is_some_and(|n| n > 0) {
            return Err(BenchError::OutOfBounds {
                line,
                count: count.unwrap_or(0),
            });
        }
    }
    Ok(())
}

fn row(tokens: &[&str], c: &Columns, line: usize, run: &mut BenchRun) -> Result<(), BenchError> {
    if tokens.len() < c.len {
        return Err(BenchError::Malformed {
            line,
            message: format!("{} columns, the header has {}", tokens.len(), c.len),
        });
    }
    if run.rows.len() >= MAX_ROWS {
        return Err(BenchError::Malformed {
            line,
            message: format!("more than {MAX_ROWS} result rows"),
        });
    }
    let size = tokens[0].parse::<u64>().map_err(|_| BenchError::Malformed {
        line,
        message: format!("size `{}` is not a byte count", tokens[0]),
    })?;
    for (col, place) in [(c.wrong, "out-of-place"), (c.wrong_in_place, "in-place")] {
        if let Some(col) = col {
            let count = wrong_count(tokens[col], line)?;
            if count > 0 {
                return Err(BenchError::Wrong {
                    line,
                    size,
                    count,
                    place,
                });
            }
        }
    }
    run.rows.push(SizeFigures {
        size,
        time_us: number(tokens[c.time], "time", line)?,
        algbw: number(tokens[c.algbw], "algbw", line)?,
        busbw: number(tokens[c.busbw], "busbw", line)?,
        p99_us: c.p99.map(|i| number(tokens[i], "i_p99", line)).transpose()?,
    });
    Ok(())
}

#[derive(Deserialize)]
struct JsonDoc {
    version: u32,
    #[serde(default)]
    config: Option<JsonConfig>,
    results: Vec<JsonResult>,
    #[serde(default)]
    out_of_bounds: Option<JsonBounds>,
}

#[derive(Deserialize)]
struct JsonConfig {
    #[serde(default)]
    devices: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct JsonBounds {
    count: u64,
}

#[derive(Deserialize)]
struct JsonResult {
    size: u64,
    out_of_place: JsonPlace,
    #[serde(default)]
    in_place: Option<JsonPlace>,
    #[serde(default)]
    out_of_place_per_iter: Option<JsonPerIter>,
}

#[derive(Deserialize)]
struct JsonPlace {
    #[serde(alias = "cpu_time")]
    time: f64,
    alg_bw: f64,
    bus_bw: f64,
    /// `null` when validation is off.
    #[serde(default)]
    nwrong: Option<f64>,
}

#[derive(Deserialize)]
struct JsonPerIter {
    p99_us: f64,
}

/// Parse nccl-tests' `-J` output (JSON version 3).
pub fn parse_json(text: &str) -> Result<BenchRun, BenchError> {
    if text.len() > OUTPUT_LIMIT {
        return Err(BenchError::TooLarge(text.len()));
    }
    let doc: JsonDoc = serde_json::from_str(text).map_err(|e| BenchError::Json(format!("not nccl-tests JSON: {e}")))?;
    if doc.version != 3 {
        return Err(BenchError::Json(format!(
            "JSON version {} (topo-tune reads version 3, nccl-tests 2.17+)",
            doc.version
        )));
    }
    if let Some(b) = doc.out_of_bounds.filter(|b| b.count > 0) {
        return Err(BenchError::OutOfBounds {
            line: 0,
            count: b.count,
        });
    }
    if doc.results.len() > MAX_ROWS {
        return Err(BenchError::Json(format!("more than {MAX_ROWS} results")));
    }
    let mut rows = Vec::with_capacity(doc.results.len());
    for r in &doc.results {
        rows.push(json_row(r)?);
    }
    if rows.is_empty() {
        return Err(BenchError::NoRows);
    }
    let run = BenchRun {
        nccl_tests_version: None,
        ranks: doc.config.map_or(0, |c| c.devices.len().min(u32::MAX as usize) as u32),
        rows,
    };
    run.check()?;
    Ok(run)
}

fn json_row(r: &JsonResult) -> Result<SizeFigures, BenchError> {
    for (place, name) in [
        (Some(&r.out_of_place), "out-of-place"),
        (r.in_place.as_ref(), "in-place"),
    ] {
        let wrong = place.and_then(|p| p.nwrong).unwrap_or(0.0);
        match count(wrong) {
            Some(0) => {}
            Some(n) => {
                return Err(BenchError::Wrong {
                    line: 0,
                    size: r.size,
                    count: n,
                    place: name,
                })
            }
            None => {
                return Err(BenchError::Json(format!(
                    "size {}: nwrong {wrong} ({name}) is not a count of values",
                    r.size
                )))
            }
        }
    }
    let p = &r.out_of_place;
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    let p99 = r.out_of_place_per_iter.as_ref().map(|i| i.p99_us);
    if !ok(p.time) || !ok(p.alg_bw) || !ok(p.bus_bw) || p99.is_some_and(|v| !ok(v)) {
        return Err(BenchError::Json(format!(
            "size {}: a figure is negative or not a number",
            r.size
        )));
    }
    Ok(SizeFigures {
        size: r.size,
        time_us: p.time,
        algbw: p.alg_bw,
        busbw: p.bus_bw,
        p99_us: p99,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";

    #[test]
    fn a_row_with_wrong_values_is_a_failure() {
        let text = format!("{HEADER}        1024   256 float sum -1  10.0 0.10 0.19  3  9.0 0.11 0.2 0\n");
        assert!(matches!(
            parse_text(&text),
            Err(BenchError::Wrong {
                count: 3,
                size: 1024,
                ..
            })
        ));
        let text = format!("{HEADER}        1024   256 float sum -1  10.0 0.10 0.19  0  9.0 0.11 0.2 1\n");
        assert!(matches!(
            parse_text(&text),
            Err(BenchError::Wrong { place: "in-place", .. })
        ));
    }

    #[test]
    fn out_of_bounds_and_warn_lines_fail_the_run() {
        let ok_row = "        1024   256 float sum -1  10.0 0.10 0.19  0  9.0 0.11 0.2 0\n";
        let text = format!("{HEADER}{ok_row}# Out of bounds values : 12 FAILED\n");
        assert!(matches!(
            parse_text(&text),
            Err(BenchError::OutOfBounds { count: 12, line: 3 })
        ));
        let text = format!("{HEADER}{ok_row}gpu1:123:456 [0] transport/net.cc:100 NCCL WARN NET/IB : oops\n");
        assert!(matches!(parse_text(&text), Err(BenchError::Failure { line: 3, .. })));
        let text = format!("{HEADER}{ok_row}gpu1: Test NCCL failure common.cu:1 'unhandled'\n");
        assert!(matches!(parse_text(&text), Err(BenchError::Failure { .. })));
    }

    #[test]
    fn validation_off_reads_na_as_no_count() {
        let text = format!("{HEADER}        1024   256 float sum -1  10.0 0.10 0.19  N/A  9.0 0.11 0.2 N/A\n");
        assert_eq!(parse_text(&text).unwrap().rows[0].busbw, 0.19);
    }

    #[test]
    fn short_rows_and_garbage_numbers_name_the_line() {
        let text = format!("{HEADER}        1024   256 float sum -1  10.0\n");
        assert!(matches!(parse_text(&text), Err(BenchError::Malformed { line: 2, .. })));
        let text = format!("{HEADER}        1024   256 float sum -1  -1 0.10 0.19  0  9.0 0.11 0.2 0\n");
        assert!(matches!(parse_text(&text), Err(BenchError::Malformed { line: 2, .. })));
        assert_eq!(parse_text("# nothing here\n"), Err(BenchError::NoRows));
    }

    #[test]
    fn zero_times_second_tables_and_repeated_sizes_are_malformed_runs() {
        let real = include_str!("../../tests/data/nccl-tests/all_reduce_perf-b8-e1M-f4-g1-n200-I1.txt");
        assert!(parse_text(real).is_ok());
        // The same run twice (stdout and stderr mixed), the second with 10x figures.
        let twice = format!("{real}{}", real.replace(" 0.01 ", " 0.10 "));
        assert!(matches!(
            parse_text(&twice),
            Err(BenchError::Malformed { message, .. }) if message.contains("second result table")
        ));
        // One size printed twice.
        let row = "        1024   256 float sum -1  10.0 0.10 0.19  0  9.0 0.11 0.2 0\n";
        assert!(parse_text(&format!("{HEADER}{row}{row}")).is_err());
        // A zero time, a zero P99.
        let zero = "        1024   256 float sum -1  0.0 0.10 0.19  0  9.0 0.11 0.2 0\n";
        assert!(parse_text(&format!("{HEADER}{zero}")).is_err());
        let json = |t: &str, p99: &str| {
            format!(
                r#"{{"version":3,"results":[{{"size":8,"out_of_place":{{"time":{t},"alg_bw":0.1,"bus_bw":0.0,"nwrong":0}},"out_of_place_per_iter":{{"p99_us":{p99}}}}}]}}"#
            )
        };
        assert!(parse_json(&json("1.0", "2.0")).is_ok());
        assert!(parse_json(&json("0.0", "2.0")).is_err());
        assert!(
            parse_json(&json("1.0", "0.0")).is_err(),
            "a zero P99 would drop the latency gate"
        );
    }

    #[test]
    fn a_wrong_count_is_a_whole_number() {
        let doc = |nwrong: &str| {
            format!(
                r#"{{"version":3,"results":[{{"size":8,"out_of_place":{{"time":1.0,"alg_bw":0.1,"bus_bw":0.0,"nwrong":{nwrong}}}}}]}}"#
            )
        };
        for bad in ["-1", "0.5", "1e400"] {
            let e = parse_json(&doc(bad)).unwrap_err().to_string();
            assert!(
                e.contains("not a count") || e.contains("not nccl-tests JSON"),
                "{bad}: {e}"
            );
        }
        let text = format!("{HEADER}        1024   256 float sum -1  10.0 0.10 0.19  0.5  9.0 0.11 0.2 0\n");
        assert!(parse_text(&text).unwrap_err().to_string().contains("not a count"));
    }

    #[test]
    fn json_wrong_and_bounds_fail() {
        let doc = |nwrong: &str, oob: u64| {
            format!(
                r#"{{"version":3,"results":[{{"size":8,"out_of_place":{{"time":1.0,"alg_bw":0.1,"bus_bw":0.0,"nwrong":{nwrong}}}}}],"out_of_bounds":{{"count":{oob},"okay":"true"}}}}"#
            )
        };
        assert!(parse_json(&doc("0.0", 0)).is_ok());
        assert!(parse_json(&doc("null", 0)).is_ok());
        assert!(matches!(
            parse_json(&doc("2.0", 0)),
            Err(BenchError::Wrong { count: 2, .. })
        ));
        assert!(matches!(
            parse_json(&doc("0.0", 5)),
            Err(BenchError::OutOfBounds { count: 5, .. })
        ));
        assert!(parse_json(&doc("0.0", 0).replace("\"version\":3", "\"version\":2")).is_err());
    }
}
