//! cluster.yaml's `benchmark:` section: how the canary runs NCCL's benchmark (the launcher
//! command as a template, where it runs, its timeout) and the thresholds of the decision
//! rule. Validated at load: an unknown placeholder or an out-of-range figure names its line.

use crate::bench::stats::Gate;
use crate::model::Refusal;
use serde::Deserialize;
use serde_saphyr::Spanned;

/// The placeholders a command template may use (docs/apply.md).
pub(crate) const PLACEHOLDERS: &[(&str, &str)] = &[
    ("hosts", "the wave's hosts, comma-separated"),
    ("hosts_slots", "the hosts with their GPU count, `h1:8,h2:8` (mpirun -H)"),
    (
        "hostfile",
        "a file with one `HOST slots=N` line per host (mpirun --hostfile)",
    ),
    ("nodes", "the number of hosts"),
    ("ranks", "hosts × GPUs per node"),
    ("gpus_per_node", "GPUs per node"),
    (
        "nccl_conf",
        "the NCCL config file of this variant (NCCL_CONF_FILE, NCCL 2.23+)",
    ),
    ("env_file", "the same settings as an env file (older NCCL, containers)"),
    ("json", "where nccl-tests writes its -J output"),
    (
        "rail",
        "diagnose's per-rail runs: the GPU/NIC index of the run (one GPU per node, e.g. CUDA_VISIBLE_DEVICES={rail}); 0 otherwise",
    ),
    ("variant", "`baseline` or `candidate`"),
    (
        "collective",
        "nccl-tests' binary stem: `all_reduce`, or what `tune` measures (`all_gather`, `reduce_scatter`, `alltoall`)",
    ),
];

/// Default launcher: nccl-tests' all_reduce_perf under Open MPI, one process per GPU.
pub(crate) const DEFAULT_COMMAND: &str =
    "mpirun --allow-run-as-root -np {ranks} -H {hosts_slots} -x NCCL_CONF_FILE={nccl_conf} \
     all_reduce_perf -b 8 -e 4G -f 2 -g 1 -I 1 -J {json}";

pub(crate) const DEFAULT_TIMEOUT_S: u64 = 1800;

/// The command with nccl-tests' `sendrecv_perf` in place of `all_reduce_perf` (the same
/// build directory, flags and launcher): `diagnose`'s ring-neighbour runs. `None` when the
/// command does not name `all_reduce_perf`.
pub(crate) fn sendrecv_command(command: &str) -> Option<String> {
    perf_command(command, "sendrecv")
}

/// The command with nccl-tests' `STEM_perf` in place of `all_reduce_perf`: `{collective}`
/// filled where the command has it, else the binary's name replaced (the same build
/// directory, flags and launcher). `None` when the command names neither: it measures what it
/// measures, and no other collective can be made of it.
pub(crate) fn perf_command(command: &str, stem: &str) -> Option<String> {
    if command.contains("{collective}") {
        return Some(command.replace("{collective}", stem));
    }
    command
        .contains("all_reduce_perf")
        .then(|| command.replace("all_reduce_perf", &format!("{stem}_perf")))
}
pub(crate) const DEFAULT_ROUNDS: u32 = 6;
/// Rounds per wave: fewer than 6 cannot reach the decision rule's confidence (docs/apply.md).
pub(crate) const ROUNDS: std::ops::RangeInclusive<u32> = 6..=50;
/// `benchmark.timeout`, seconds.
pub(crate) const TIMEOUT_S: std::ops::RangeInclusive<u64> = 1..=86_400;
/// `benchmark.gpus_per_node`.
pub(crate) const GPUS_PER_NODE: std::ops::RangeInclusive<u32> = 1..=64;

/// What a benchmark command must be, wherever it comes from (cluster.yaml, a rollout
/// record): one non-empty line, only known placeholders, and `{json}` (topo-tune reads
/// nccl-tests' JSON there).
pub(crate) fn check_command(command: &str) -> Result<(), Refusal> {
    if command.trim().is_empty() || command.contains(['\n', '\r', '\0']) {
        return Err(Refusal("benchmark.command must be one non-empty line".into()));
    }
    if command.len() > 1 << 16 {
        return Err(Refusal("benchmark.command is longer than 64 KiB".into()));
    }
    let used = placeholders(command).map_err(|(_, m)| Refusal(m))?;
    if !used.contains(&"json") {
        return Err(Refusal(
            "benchmark.command must pass `-J {json}` (topo-tune reads nccl-tests' JSON there)".into(),
        ));
    }
    Ok(())
}

impl Benchmark {
    /// The section's every rule, for a copy read back from a rollout record.
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        check_command(&self.command)?;
        if !TIMEOUT_S.contains(&self.timeout_s) {
            return Err(Refusal(format!(
                "benchmark.timeout {} is outside {TIMEOUT_S:?}",
                self.timeout_s
            )));
        }
        if self.gpus_per_node.is_some_and(|g| !GPUS_PER_NODE.contains(&g)) {
            return Err(Refusal("benchmark.gpus_per_node is outside 1..=64".into()));
        }
        if !ROUNDS.contains(&self.rounds) {
            return Err(Refusal(format!(
                "benchmark.rounds {} is outside {ROUNDS:?}",
                self.rounds
            )));
        }
        self.gate.check()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RunsOn {
    /// The machine running topo-tune (mpirun/srun reach the nodes themselves).
    Controller,
    /// The wave's first node, through the same transport as the node work.
    FirstNode,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBenchmark {
    #[serde(default, deserialize_with = "super::present")]
    command: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "super::present")]
    runs_on: Option<RunsOn>,
    #[serde(default, deserialize_with = "super::present")]
    timeout: Option<Spanned<u64>>,
    #[serde(default, deserialize_with = "super::present")]
    gpus_per_node: Option<Spanned<u32>>,
    #[serde(default, deserialize_with = "super::present")]
    rounds: Option<Spanned<u32>>,
    #[serde(default, deserialize_with = "super::present")]
    threshold_pct: Option<Spanned<f64>>,
    #[serde(default, deserialize_with = "super::present")]
    p99_threshold_pct: Option<Spanned<f64>>,
    #[serde(default, deserialize_with = "super::present")]
    small_max: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "super::present")]
    large_min: Option<Spanned<String>>,
}

/// The validated section (defaults where cluster.yaml says nothing).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Benchmark {
    pub(crate) command: String,
    pub(crate) runs_on: RunsOn,
    pub(crate) timeout_s: u64,
    /// GPUs per node; default: what the plan found on the wave's nodes.
    pub(crate) gpus_per_node: Option<u32>,
    pub(crate) rounds: u32,
    pub(crate) gate: Gate,
}

impl Default for Benchmark {
    fn default() -> Self {
        Benchmark {
            command: DEFAULT_COMMAND.to_string(),
            runs_on: RunsOn::Controller,
            timeout_s: DEFAULT_TIMEOUT_S,
            gpus_per_node: None,
            rounds: DEFAULT_ROUNDS,
            gate: Gate::default(),
        }
    }
}

/// The program a benchmark command starts, as `sh -c` finds it: the first word after any
/// `NAME=value` assignments. `None` when that word is not plain (a placeholder, quoting, a
/// shell construct): what it names is not guessed.
pub(crate) fn program(command: &str) -> Option<&str> {
    let assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let word = command.split_ascii_whitespace().find(|w| !assignment(w))?;
    let plain = word.chars().all(|c| c.is_ascii_alphanumeric() || "_./+-".contains(c));
    plain.then_some(word)
}

/// The placeholders of a template, or the first unknown or unclosed one (byte offset).
pub(crate) fn placeholders(template: &str) -> Result<Vec<&str>, (usize, String)> {
    let mut out = Vec::new();
    let mut rest = template;
    let mut offset = 0;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let end = after
            .find('}')
            .ok_or_else(|| (offset + i, "a `{` without its `}`".to_string()))?;
        let name = &after[..end];
        if !PLACEHOLDERS.iter().any(|(p, _)| *p == name) {
            let known: Vec<&str> = PLACEHOLDERS.iter().map(|(p, _)| *p).collect();
            return Err((
                offset + i,
                format!("unknown placeholder `{{{name}}}` (known: {})", known.join(", ")),
            ));
        }
        out.push(name);
        offset += i + 1 + end + 1;
        rest = &after[end + 1..];
    }
    Ok(out)
}

impl super::Loader<'_> {
    pub(super) fn benchmark(&self, raw: Option<&RawBenchmark>) -> Result<Benchmark, super::ConfigError> {
        let empty = RawBenchmark::default();
        let raw = raw.unwrap_or(&empty);
        let d = Benchmark::default();
        let command = match &raw.command {
            Some(c) => {
                check_command(&c.value).map_err(|m| self.at(&c.referenced, m.0))?;
                c.value.clone()
            }
            None => d.command,
        };
        let int = |v: &Option<Spanned<u64>>, key: &str, range: std::ops::RangeInclusive<u64>, dflt: u64| {
            v.as_ref().map_or(Ok(dflt), |s| {
                if range.contains(&s.value) {
                    Ok(s.value)
                } else {
                    Err(self.at(
                        &s.referenced,
                        format!("{key} must be {}..={}", range.start(), range.end()),
                    ))
                }
            })
        };
        let widen = |v: &Option<Spanned<u32>>| {
            v.as_ref().map(|s| Spanned {
                value: u64::from(s.value),
                referenced: s.referenced,
                defined: s.defined,
            })
        };
        let widened = |r: &std::ops::RangeInclusive<u32>| u64::from(*r.start())..=u64::from(*r.end());
        let gpus = raw
            .gpus_per_node
            .as_ref()
            .map(|_| {
                int(
                    &widen(&raw.gpus_per_node),
                    "benchmark.gpus_per_node",
                    widened(&GPUS_PER_NODE),
                    0,
                )
            })
            .transpose()?;
        Ok(Benchmark {
            command,
            runs_on: raw.runs_on.unwrap_or(RunsOn::Controller),
            timeout_s: int(&raw.timeout, "benchmark.timeout", TIMEOUT_S, DEFAULT_TIMEOUT_S)?,
            gpus_per_node: gpus.map(|g| g as u32),
            rounds: int(
                &widen(&raw.rounds),
                "benchmark.rounds",
                widened(&ROUNDS),
                u64::from(DEFAULT_ROUNDS),
            )? as u32,
            gate: Gate {
                threshold: self.pct(&raw.threshold_pct, "benchmark.threshold_pct", d.gate.threshold)?,
                p99_threshold: self.pct(
                    &raw.p99_threshold_pct,
                    "benchmark.p99_threshold_pct",
                    d.gate.p99_threshold,
                )?,
                small_max: self.size(&raw.small_max, "benchmark.small_max", d.gate.small_max)?,
                large_min: self.size(&raw.large_min, "benchmark.large_min", d.gate.large_min)?,
                require_gain: false,
            },
        })
    }

    fn pct(&self, v: &Option<Spanned<f64>>, key: &str, dflt: f64) -> Result<f64, super::ConfigError> {
        match v {
            None => Ok(dflt),
            Some(s) if s.value.is_finite() && s.value > 0.0 && s.value <= 50.0 => Ok(s.value / 100.0),
            Some(s) => Err(self.at(&s.referenced, format!("{key} is a percentage in (0, 50]"))),
        }
    }

    fn size(&self, v: &Option<Spanned<String>>, key: &str, dflt: u64) -> Result<u64, super::ConfigError> {
        match v {
            None => Ok(dflt),
            Some(s) => s
                .value
                .parse::<crate::model::size::ByteSize>()
                .map(|b| b.0)
                .map_err(|m| self.at(&s.referenced, format!("{key}: {m}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_known_or_refused() {
        assert_eq!(placeholders("a {hosts} b {json}").unwrap(), vec!["hosts", "json"]);
        assert!(placeholders("x {host} {json}")
            .unwrap_err()
            .1
            .contains("unknown placeholder `{host}`"));
        assert_eq!(placeholders("x {json").unwrap_err().0, 2);
        assert!(placeholders(DEFAULT_COMMAND).is_ok());
        assert_eq!(program(DEFAULT_COMMAND), Some("mpirun"));
        assert_eq!(program("FAKE=1 X_Y={ranks} python3 tests/x -b 8"), Some("python3"));
        assert_eq!(
            program("/opt/nccl-tests/build/all_reduce_perf -b 8"),
            Some("/opt/nccl-tests/build/all_reduce_perf")
        );
        assert_eq!(program("{nccl_tests}/all_reduce_perf"), None);
        assert_eq!(program("\"my tool\" -x"), None);
        assert_eq!(program("A=1"), None);
    }

    #[test]
    fn a_collectives_command_fills_the_placeholder_or_swaps_the_binary() {
        assert_eq!(
            perf_command("srun /b/{collective}_perf -J {json}", "all_gather").as_deref(),
            Some("srun /b/all_gather_perf -J {json}")
        );
        assert_eq!(
            perf_command("srun /b/all_reduce_perf -J {json}", "alltoall").as_deref(),
            Some("srun /b/alltoall_perf -J {json}")
        );
        assert_eq!(perf_command("srun ./my_bench -J {json}", "all_gather"), None);
        assert!(
            check_command("srun /b/{collective}_perf -J {json}").is_ok(),
            "a known placeholder"
        );
    }

    #[test]
    fn the_sendrecv_command_swaps_only_the_test_binary() {
        assert_eq!(
            sendrecv_command(DEFAULT_COMMAND).unwrap(),
            DEFAULT_COMMAND.replace(" all_reduce_perf ", " sendrecv_perf ")
        );
        assert_eq!(
            sendrecv_command("srun /opt/nccl-tests/build/all_reduce_perf -J {json}").as_deref(),
            Some("srun /opt/nccl-tests/build/sendrecv_perf -J {json}")
        );
        assert_eq!(sendrecv_command("srun ./my_bench -J {json}"), None);
    }
}
