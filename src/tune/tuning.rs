//! The result of `tune`: `tuning.json` (versioned, read back like `plan.json`: reviewed before
//! it is obeyed) and `nccl-tuner.csv` (the rules in the format NCCL's example tuner plugin and
//! topo-tune's own read; re-read with the plugin's own parser after it is made).

use super::{Algo, Collective, Proto, Shape};
use crate::bench::stats::Change;
use crate::model::Refusal;
use serde::{Deserialize, Serialize};

pub(crate) const TUNING_SCHEMA: u32 = 1;
/// Most rules and globals a tuning may hold (a tuning has a few dozen).
const MAX_RULES: usize = 1024;
const MAX_GLOBALS: usize = 16;

/// One rule: for `collective` messages of `min_bytes..=max_bytes` on a job of `shape` (any
/// shape when `None`: the same winner held at every shape measured), NCCL's cost table is
/// told that `algorithm`/`protocol` is cheapest, with `channels` (NCCL's own when `None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    pub(crate) collective: Collective,
    pub(crate) min_bytes: u64,
    pub(crate) max_bytes: u64,
    pub(crate) algorithm: Algo,
    pub(crate) protocol: Proto,
    #[serde(default)]
    pub(crate) channels: Option<u32>,
    #[serde(default)]
    pub(crate) shape: Option<Shape>,
    /// The gain at the range's weakest size (its interval), in the confirming rounds.
    pub(crate) gain: Change,
    /// Median times at that size, µs: NCCL's own choice and the rule's.
    pub(crate) nccl_us: f64,
    pub(crate) tuned_us: f64,
    /// The whole tuning measured once more as it is written (NCCL's own against the written
    /// rules file through the plugin): this rule's gain over its sizes there (the weakest
    /// shape it applies to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) verified: Option<Change>,
    pub(crate) why: String,
}

/// One variable for every collective and size, with the evidence for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Global {
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) gain: Change,
    pub(crate) why: String,
}

/// A candidate that produced wrong values or failed: never a rule, always said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Disqualified {
    pub(crate) candidate: String,
    pub(crate) collective: Collective,
    pub(crate) shape: Shape,
    /// `wrong_values` (nccl-tests counted wrong results) or `failed`.
    pub(crate) kind: String,
    pub(crate) why: String,
}

/// Where NCCL's own choice was kept, per collective and shape: the sizes with no winner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Kept {
    pub(crate) collective: Collective,
    pub(crate) shape: Shape,
    pub(crate) sizes: Vec<u64>,
}

/// What `tune` measured and kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tuning {
    pub(crate) schema: u32,
    /// The selector the set was chosen by (`rack-1`) and its hosts.
    pub(crate) set: String,
    pub(crate) hosts: Vec<String>,
    /// The NCCL the set ran when it was measured: a node that runs another is told to tune
    /// again (`status`, `doctor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_version: Option<crate::model::NcclVersion>,
    /// The set's hardware as its plan classes it (`tune::hardware::key`): a rollout gives the
    /// tuning only to nodes of the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hardware: Option<String>,
    pub(crate) shapes: Vec<Shape>,
    pub(crate) collectives: Vec<Collective>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) globals: Vec<Global>,
    pub(crate) kept: Vec<Kept>,
    pub(crate) disqualified: Vec<Disqualified>,
    /// Candidates the budget left unmeasured.
    pub(crate) not_tried: Vec<String>,
    /// Rules the final measurement of the written file did not bear out, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) dropped: Vec<String>,
}

/// One candidate at one collective and shape, as measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Trial {
    pub(crate) collective: Collective,
    pub(crate) shape: Shape,
    pub(crate) candidate: String,
    pub(crate) phase: &'static str,
    pub(crate) rounds: usize,
    pub(crate) sizes: Vec<TrialSize>,
}

/// One size of a trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TrialSize {
    pub(crate) size: u64,
    pub(crate) nccl_us: f64,
    pub(crate) candidate_us: f64,
    pub(crate) gain: Change,
    pub(crate) p99_worse: bool,
    pub(crate) wins: bool,
}

/// `4 MiB`, `1 GiB`, `512 B`.
pub(crate) fn bytes(b: u64) -> String {
    crate::model::size::show(b)
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// `+7.9% [4.1% .. 11.6%]`.
pub(crate) fn interval(c: &Change) -> String {
    format!("{} [{} .. {}]", pct(c.median), pct(c.low), pct(c.high))
}

/// How the CSV's first line names the NCCL the tuning was measured on (`doctor` reads it).
pub(crate) const MEASURED_ON: &str = "measured on NCCL";

const WRITTEN_ON: &str = "written by topo-tune tune on";
const DO_NOT_EDIT: &str = "; do not edit: run tune again";

/// What a rules file's first line says it was measured on (`rack-1 (2 host(s)), measured on
/// NCCL 2.30.7 at 1x8,2x16 (nodes x ranks)`): `status` shows it.
pub(crate) fn provenance(csv: &str) -> Option<String> {
    let first = csv.lines().next()?;
    let rest = first.split_once(WRITTEN_ON)?.1;
    let said = rest.split_once(DO_NOT_EDIT).map_or(rest, |(s, _)| s).trim();
    (!said.is_empty() && said.len() <= 512 && !said.chars().any(char::is_control)).then(|| said.to_string())
}

/// The NCCL version a rules file's first line says it was measured on.
pub(crate) fn measured_on(csv: &str) -> Option<crate::model::NcclVersion> {
    let first = csv.lines().next()?;
    let rest = first.split_once(MEASURED_ON)?.1.trim_start();
    crate::model::NcclVersion::parse(rest.split(|c: char| c == ';' || c.is_whitespace()).next()?)
}

/// The CSV line of a rule (`-1`: any shape, NCCL's channel count); `None` for all-to-all.
fn csv_line(r: &Rule) -> Option<String> {
    let any = |v: Option<u32>| v.map_or("-1".to_string(), |v| v.to_string());
    Some(format!(
        "{},{},{},{},{},{},{},{}",
        r.collective.csv()?,
        r.min_bytes,
        r.max_bytes,
        r.algorithm.csv(),
        r.protocol.csv(),
        any(r.channels),
        any(r.shape.map(|s| s.nodes)),
        any(r.shape.map(|s| s.ranks)),
    ))
}

/// The rules as NCCL's example tuner plugin reads them (and topo-tune's own plugin): one line
/// each, `#` comments, first match wins; rules of a shape before the any-shape ones.
pub(crate) fn csv(t: &Tuning) -> String {
    let shapes: Vec<String> = t.shapes.iter().map(|s| format!("{}x{}", s.nodes, s.ranks)).collect();
    let mut out = format!(
        "# nccl-tuner.csv: {WRITTEN_ON} {} ({} host(s)){} at {} (nodes x ranks){DO_NOT_EDIT}\n\
         # collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks\n",
        t.set,
        t.hosts.len(),
        t.nccl_version
            .map(|v| format!(", {MEASURED_ON} {v}"))
            .unwrap_or_default(),
        shapes.join(",")
    );
    let mut rules: Vec<&Rule> = t.rules.iter().collect();
    rules.sort_by_key(|r| (r.shape.is_none(), r.collective, r.min_bytes));
    for r in rules {
        if let Some(line) = csv_line(r) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// The CSV read back with the plugin's own parser: the same rules, in the same order.
pub(crate) fn check_csv(t: &Tuning, text: &str) -> Result<(), Refusal> {
    let read = nccl_tuner_topo_tune::rules::parse_strict(text.as_bytes())
        .map_err(|e| Refusal(format!("nccl-tuner.csv {e}")))?;
    let want = t.rules.iter().filter(|r| r.collective.csv().is_some()).count();
    if read.len() != want {
        return Err(Refusal(format!(
            "nccl-tuner.csv holds {} rule(s), the tuning {want}",
            read.len()
        )));
    }
    Ok(())
}

/// A tuning read back (`--tuning FILE`, a rollout record) holds up before it is obeyed: its
/// schema, bounded counts, rules whose ranges are real and do not overlap (the first line would
/// silently win), every rule and global with a gain that excludes zero, globals only among
/// the variables `tune` searches, each valid for NCCL.
pub(crate) fn review(t: &Tuning) -> Result<(), Refusal> {
    let no = |why: String| Err(Refusal(why));
    if t.schema != TUNING_SCHEMA {
        return no(format!(
            "tuning schema {} (this version reads {TUNING_SCHEMA})",
            t.schema
        ));
    }
    if t.rules.len() > MAX_RULES || t.globals.len() > MAX_GLOBALS {
        return no(format!("more than {MAX_RULES} rules or {MAX_GLOBALS} globals"));
    }
    for (i, r) in t.rules.iter().enumerate() {
        review_rule(r).map_err(|why| Refusal(format!("rule {}: {}", i + 1, why.0)))?;
        let overlaps = t.rules[..i].iter().any(|o| {
            o.collective == r.collective
                && o.shape == r.shape
                && o.min_bytes <= r.max_bytes
                && r.min_bytes <= o.max_bytes
        });
        if overlaps {
            return no(format!(
                "rule {} overlaps an earlier rule of its collective and shape",
                i + 1
            ));
        }
    }
    for g in &t.globals {
        review_global(g)?;
    }
    if t.hardware
        .as_ref()
        .is_some_and(|h| h.is_empty() || h.len() > 512 || h.chars().any(char::is_control))
    {
        return no("hardware must be one line of plain text".into());
    }
    Ok(())
}

fn measured(c: &Change) -> bool {
    [c.median, c.low, c.high].iter().all(|v| v.is_finite()) && c.low > 0.0 && c.low <= c.median && c.median <= c.high
}

fn review_rule(r: &Rule) -> Result<(), Refusal> {
    let no = |why: String| Err(Refusal(why));
    if r.collective.csv().is_none() {
        return no("all-to-all has no tuner rule (NCCL does not ask a tuner about it)".into());
    }
    if r.min_bytes > r.max_bytes || r.max_bytes > 1 << 40 {
        return no(format!(
            "bounds {}..{} are not a range up to 1 TiB",
            r.min_bytes, r.max_bytes
        ));
    }
    if r.channels.is_some_and(|c| !(1..=64).contains(&c)) {
        return no("channels must be 1 to 64".into());
    }
    if r.shape
        .is_some_and(|s| s.nodes == 0 || s.ranks < s.nodes || s.ranks > 1 << 20)
    {
        return no("a shape of at least one rank per node".into());
    }
    if !measured(&r.gain) {
        return no("no measured gain that excludes zero: a rule rests on evidence".into());
    }
    if r.why.is_empty() || r.why.len() > 512 || r.why.chars().any(char::is_control) {
        return no("its reason must be one line of plain text".into());
    }
    Ok(())
}

fn review_global(g: &Global) -> Result<(), Refusal> {
    if let Some((_, why)) = super::space::NEVER.iter().find(|(n, _)| *n == g.name) {
        return Err(Refusal(format!("{}: never set by tune ({why})", g.name)));
    }
    if !super::space::searched(&g.name) {
        return Err(Refusal(format!(
            "{}: not a variable tune searches",
            g.name.escape_default()
        )));
    }
    crate::nccl::table::validate(&g.name, &g.value, None).map_err(|r| Refusal(format!("{}: {}", g.name, r.reason)))?;
    if !measured(&g.gain) || g.why.is_empty() || g.why.chars().any(char::is_control) {
        return Err(Refusal(format!(
            "{}: a debugging-class variable needs its measured evidence (a gain that excludes zero, and why)",
            g.name
        )));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn gain(low: f64) -> Change {
        Change {
            median: low + 0.05,
            low,
            high: low + 0.1,
            confidence: 0.969,
        }
    }

    pub(crate) fn sample() -> Tuning {
        Tuning {
            schema: TUNING_SCHEMA,
            set: "rack-1".into(),
            hosts: vec!["gpu1".into(), "gpu2".into()],
            nccl_version: Some(crate::model::NcclVersion(2, 28, 3)),
            hardware: Some("8 GPU(s), no NVLink, ring's worst hop PIX; 8 NIC port(s) for GPU traffic (verbs)".into()),
            shapes: vec![Shape { nodes: 2, ranks: 16 }],
            collectives: vec![Collective::AllReduce],
            rules: vec![
                Rule {
                    collective: Collective::AllReduce,
                    min_bytes: 1024,
                    max_bytes: 65536,
                    algorithm: Algo::Tree,
                    protocol: Proto::Ll,
                    channels: None,
                    shape: None,
                    gain: gain(0.04),
                    nccl_us: 20.0,
                    tuned_us: 18.0,
                    verified: None,
                    why: "measured".into(),
                },
                Rule {
                    collective: Collective::AllReduce,
                    min_bytes: 1 << 20,
                    max_bytes: 1 << 26,
                    algorithm: Algo::Ring,
                    protocol: Proto::Simple,
                    channels: Some(16),
                    shape: Some(Shape { nodes: 2, ranks: 16 }),
                    gain: gain(0.06),
                    nccl_us: 900.0,
                    tuned_us: 800.0,
                    verified: None,
                    why: "measured".into(),
                },
            ],
            globals: vec![Global {
                name: "NCCL_BUFFSIZE".into(),
                value: "8388608".into(),
                gain: gain(0.02),
                why: "measured on rack-1: +7.0% [2.0% .. 12.0%] at 64 MiB–1 GiB".into(),
            }],
            kept: Vec::new(),
            disqualified: Vec::new(),
            not_tried: Vec::new(),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn the_csv_is_what_both_plugins_read_shaped_rules_first() {
        let t = sample();
        let text = csv(&t);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            vec![
                "allreduce,1048576,67108864,ring,simple,16,2,16",
                "allreduce,1024,65536,tree,ll,-1,-1,-1"
            ]
        );
        check_csv(&t, &text).unwrap();
        assert!(check_csv(&t, "allreduce,0,1,ring,simple,-1,-1,-1\n").is_err());
        assert_eq!(measured_on(&text), Some(crate::model::NcclVersion(2, 28, 3)), "{text}");
        assert_eq!(measured_on("# hand-written\nallreduce,0,1,ring,ll,-1,-1,-1\n"), None);
        review(&t).unwrap();
    }

    #[test]
    fn a_hand_edited_tuning_is_refused_before_it_is_obeyed() {
        type Edit = Box<dyn Fn(&mut Tuning)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "chunk",
                Box::new(|t| t.globals[0].name = "NCCL_CHUNK_SIZE".into()),
                "never set by tune",
            ),
            (
                "debug",
                Box::new(|t| t.globals[0].name = "NCCL_P2P_DISABLE".into()),
                "not a variable tune searches",
            ),
            (
                "value",
                Box::new(|t| t.globals[0].value = "lots".into()),
                "NCCL_BUFFSIZE",
            ),
            ("no evidence", Box::new(|t| t.globals[0].gain = gain(-0.01)), "evidence"),
            ("bounds", Box::new(|t| t.rules[0].max_bytes = 1 << 50), "bounds"),
            ("inverted", Box::new(|t| t.rules[0].min_bytes = 1 << 20), "bounds"),
            ("channels", Box::new(|t| t.rules[1].channels = Some(0)), "channels"),
            ("rule gain", Box::new(|t| t.rules[1].gain.low = f64::NAN), "gain"),
            (
                "alltoall",
                Box::new(|t| t.rules[0].collective = Collective::AllToAll),
                "all-to-all",
            ),
            (
                "overlap",
                Box::new(|t| {
                    let mut r = t.rules[0].clone();
                    r.min_bytes = 4096;
                    t.rules.push(r);
                }),
                "overlaps",
            ),
            ("schema", Box::new(|t| t.schema = 9), "schema"),
            (
                "newline",
                Box::new(|t| t.rules[0].why = "a\nNCCL_P2P_DISABLE=1".into()),
                "one line",
            ),
        ];
        for (what, edit, needle) in cases {
            let mut t = sample();
            edit(&mut t);
            let e = review(&t).expect_err(what);
            assert!(e.0.contains(needle), "{what}: {}", e.0);
        }
        let unknown = serde_json::to_string(&sample())
            .unwrap()
            .replacen("\"schema\"", "\"extra\":1,\"schema\"", 1);
        assert!(
            serde_json::from_str::<Tuning>(&unknown).is_err(),
            "unknown fields are refused"
        );
        let algo = serde_json::to_string(&sample())
            .unwrap()
            .replace("\"tree\"", "\"warp\"");
        assert!(
            serde_json::from_str::<Tuning>(&algo).is_err(),
            "an unknown algorithm is refused"
        );
    }
}
