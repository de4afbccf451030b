//! `diagnose`'s benchmark runs: rounds of runs at once through the canary's runner, each
//! bounded by cluster.yaml's `benchmark.timeout` and all of them together by `--budget`.

use crate::bench::parse::BenchRun;
use crate::cli::{DiagnoseArgs, OutputFormat};
use crate::cmd::reach::{bench_target, benchmarks_on_nodes};
use crate::config::Inventory;
use crate::error::Error;
use crate::model::{Failure, FailureKind};
use crate::node::{calls, NodeJob};
use crate::runner::{self, BenchRequest, Variant};
use std::time::{Duration, Instant};

/// One benchmark run: `template` on `hosts` with their live NCCL files.
pub(super) struct Run<'a> {
    pub template: &'a str,
    pub hosts: &'a [String],
    pub gpus: u32,
    pub rail: Option<u32>,
}

/// A run's figure: its largest size's busbw; on one rank, where busbw is 0 by definition
/// (no bus), its algbw — what the GPU did.
fn figure(run: &BenchRun) -> f64 {
    let largest = run.rows.iter().max_by_key(|r| r.size);
    largest.map_or(0.0, |r| if run.ranks >= 2 { r.busbw } else { r.algbw })
}

/// The time all runs may take together (`--budget`), counted from the sweep's start.
struct Budget {
    limit: Option<Duration>,
    start: Instant,
}

impl Budget {
    /// A run's timeout: `benchmark.timeout`, or what is left of the budget when less;
    /// `None` when less than a second is left.
    fn timeout(&self, bench_timeout_s: u64) -> Option<u64> {
        let Some(limit) = self.limit else {
            return Some(bench_timeout_s);
        };
        let left = limit.saturating_sub(self.start.elapsed()).as_secs();
        (left >= 1).then(|| left.min(bench_timeout_s))
    }
}

/// Rounds of runs on one set of nodes, counted, under one budget.
pub(super) struct Bench<'a> {
    pub inv: &'a Inventory,
    args: &'a DiagnoseArgs,
    output: OutputFormat,
    budget: Budget,
    /// Rounds run so far, the sweep included.
    pub rounds: usize,
    /// The step the budget cut short, once it is spent.
    pub stopped: Option<String>,
}

impl<'a> Bench<'a> {
    pub fn new(inv: &'a Inventory, args: &'a DiagnoseArgs, output: OutputFormat) -> Self {
        Bench {
            inv,
            args,
            output,
            budget: Budget {
                limit: args.budget.map(Duration::from_secs),
                start: Instant::now(),
            },
            rounds: 0,
            stopped: None,
        }
    }

    pub fn limit_s(&self) -> Option<u64> {
        self.args.budget
    }

    pub fn spent_s(&self) -> f64 {
        self.budget.start.elapsed().as_secs_f64()
    }

    /// The sweep on the whole set; a failed run is an error, never a figure.
    pub fn sweep(&mut self, hosts: &[String], gpus: u32) -> Result<BenchRun, Error> {
        let run = Run {
            template: &self.inv.benchmark.command,
            hosts,
            gpus,
            rail: None,
        };
        let failed = |why: String| Error::Reach(Failure::new(FailureKind::BenchmarkFailed, why));
        let Some(mut outcomes) = self.round("the sweep", &[run])? else {
            return Err(failed(format!(
                "the sweep did not finish within --budget {} s",
                self.args.budget.unwrap_or_default()
            )));
        };
        outcomes
            .pop()
            .ok_or_else(|| failed("the benchmark gave no answer".into()))?
            .map_err(failed)
    }

    /// One round's large-message bandwidth per run (`None`: that run failed), or `None`
    /// when the budget is spent (the round did not run, or was cut short by it).
    pub fn figures(&mut self, step: &str, round: &[Run<'_>]) -> Result<Option<Vec<Option<f64>>>, Error> {
        Ok(self
            .round(step, round)?
            .map(|runs| runs.into_iter().map(|r| r.ok().map(|run| figure(&run))).collect()))
    }

    /// The runs of one round at once (disjoint groups): each one's figures, or why it gave
    /// none; `None` when the budget is spent.
    fn round(&mut self, step: &str, round: &[Run<'_>]) -> Result<Option<Vec<Result<BenchRun, String>>>, Error> {
        let b = &self.inv.benchmark;
        let timeout_s = match (&self.stopped, self.budget.timeout(b.timeout_s)) {
            (None, Some(t)) => t,
            _ => {
                self.stopped.get_or_insert_with(|| step.to_string());
                return Ok(None);
            }
        };
        let mut jobs = Vec::new();
        for r in round {
            let first = self
                .inv
                .nodes
                .iter()
                .find(|n| r.hosts.first() == Some(&n.host))
                .ok_or_else(|| Error::Usage("no node selected".into()))?;
            jobs.push(NodeJob {
                node: first.clone(),
                target: bench_target(first, b.runs_on, self.args.output_dir.as_deref())?,
                call: calls::Bench {
                    request: BenchRequest {
                        template: r.template.to_string(),
                        variant: Variant::Baseline,
                        hosts: r.hosts.to_vec(),
                        gpus_per_node: r.gpus,
                        timeout_s,
                        rail: r.rail,
                        marker: String::new(),
                    },
                },
            });
        }
        let outcomes = benchmarks_on_nodes(
            self.inv,
            &self.args.gather.reach,
            self.output,
            jobs,
            timeout_s,
            Some(format!("(diagnose round {}: {step})", self.rounds + 1)),
        )?;
        // A run stopped by the budget, not by benchmark.timeout, measured nothing about
        // the fabric: the round counts for nothing.
        let cut_by_budget =
            timeout_s < b.timeout_s && outcomes.iter().any(|o| o.result.as_ref().is_ok_and(|a| a.timed_out));
        if cut_by_budget {
            self.stopped = Some(step.to_string());
            return Ok(None);
        }
        self.rounds += 1;
        Ok(Some(
            outcomes
                .into_iter()
                .map(|o| match o.result {
                    Ok(answer) => runner::judge(&answer, timeout_s)
                        .map_err(|why| format!("the benchmark ({}) {why}", answer.command)),
                    Err(f) => Err(f.message),
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::figure;
    use crate::bench::parse::parse_text;

    #[test]
    fn one_rank_is_judged_by_its_algbw_many_by_their_busbw() {
        // The H200's one-rank all_reduce_perf: busbw 0 everywhere, algbw real.
        let one = parse_text(include_str!(
            "../../../tests/data/nccl-tests/all_reduce_perf-b8-e256M-f4-g1.txt"
        ))
        .unwrap();
        assert_eq!(one.ranks, 1);
        let largest = one.rows.iter().max_by_key(|r| r.size).unwrap();
        assert!(largest.algbw > 100.0 && largest.busbw == 0.0, "{largest:?}");
        assert_eq!(figure(&one), largest.algbw);
        let mut many = one.clone();
        many.ranks = 8;
        for r in &mut many.rows {
            r.busbw = r.algbw * 1.75;
        }
        assert_eq!(figure(&many), many.rows.last().unwrap().busbw);
    }
}
