//! The measuring engine's runs on the nodes: rounds of runs at once through the benchmark
//! runner, each bounded by cluster.yaml's `benchmark.timeout` and all of them together by
//! `--budget`.

use super::{Bencher, Run};
use crate::bench::parse::BenchRun;
use crate::config::Inventory;
use crate::error::Error;
use crate::flow::reach::{bench_target, benchmarks_on_nodes, on_nodes};
use crate::flow::settings::ReachSettings;
use crate::model::Failure;
use crate::node::calls::{TuneStage, TuneUnstage};
use crate::node::{calls, write_target, Call, NodeJob};
use crate::report::Printer;
use crate::runner::FailedRun;
use crate::runner::{self, BenchRequest, Variant};
use std::path::Path;
use std::time::{Duration, Instant};

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

/// Runs of the cluster's command on its nodes, under one budget.
pub(crate) struct NodeBencher<'a> {
    pub(crate) inv: &'a Inventory,
    pub(crate) reach: &'a ReachSettings,
    pub(crate) printer: &'a Printer,
    pub(crate) output_dir: Option<&'a Path>,
    budget: Budget,
    rounds: usize,
    /// The command whose rounds these are (`diagnose`, `tune`): what the progress bar says.
    caller: &'static str,
}

impl<'a> NodeBencher<'a> {
    pub(crate) fn new(
        inv: &'a Inventory,
        reach: &'a ReachSettings,
        printer: &'a Printer,
        output_dir: Option<&'a Path>,
        budget: Option<Duration>,
        caller: &'static str,
    ) -> Self {
        NodeBencher {
            inv,
            reach,
            printer,
            output_dir,
            budget: Budget {
                limit: budget,
                start: Instant::now(),
            },
            rounds: 0,
            caller,
        }
    }
}

impl NodeBencher<'_> {
    /// The node call of one run: made on its first host (or the controller), with the
    /// variant's files (the canary's candidate is staged beside the live ones) and the
    /// marker a resume finds a killed run's processes by.
    fn job(&self, r: &Run<'_>, variant: Variant, marker: &str, timeout_s: u64) -> Result<NodeJob<calls::Bench>, Error> {
        let b = &self.inv.benchmark;
        let first = self
            .inv
            .nodes
            .iter()
            .find(|n| r.hosts.first() == Some(&n.host))
            .ok_or_else(|| Error::Usage("no node selected".into()))?;
        Ok(NodeJob {
            node: first.clone(),
            target: bench_target(first, b.runs_on, self.output_dir)?,
            call: calls::Bench {
                request: BenchRequest {
                    template: r.template.to_string(),
                    variant,
                    hosts: r.hosts.to_vec(),
                    gpus_per_node: r.gpus,
                    timeout_s,
                    rail: r.rail,
                    marker: marker.to_string(),
                    staged: r.staged.cloned(),
                },
            },
        })
    }

    /// One run of a canary wave's round (`apply`): the variant's files, the run marked for a
    /// resume, bounded by `timeout_s`, answered as the node gave it — the rollout records the
    /// command and its seconds and judges the figures itself. Not counted against `--budget`
    /// (a rollout has none: its rounds are cluster.yaml's).
    pub(crate) fn one(
        &mut self,
        run: &Run<'_>,
        variant: Variant,
        marker: &str,
        timeout_s: u64,
    ) -> Result<Result<crate::runner::BenchAnswer, Failure>, Error> {
        let job = self.job(run, variant, marker, timeout_s)?;
        self.rounds += 1;
        let mut outcomes = benchmarks_on_nodes(self.inv, self.reach, self.printer, vec![job], timeout_s, None)?;
        Ok(outcomes.pop().map_or_else(
            || Err(Failure::new(crate::model::FailureKind::Internal, "no answer")),
            |o| o.result,
        ))
    }

    /// One call on every node of `hosts`, where its files live (`--output-dir` trees for
    /// paper nodes); any node that fails fails the whole: a run with files on some nodes and
    /// not others would measure a job whose ranks disagree.
    fn each<C: Call>(&self, hosts: &[String], make: impl Fn(&str) -> C, what: &str) -> Result<(), Error> {
        let mut jobs = Vec::new();
        for h in hosts {
            let node = self
                .inv
                .nodes
                .iter()
                .find(|n| &n.host == h)
                .ok_or_else(|| Error::Usage(format!("{h} is not in cluster.yaml")))?;
            jobs.push(NodeJob {
                node: node.clone(),
                target: write_target(node, self.output_dir),
                call: make(h),
            });
        }
        for o in on_nodes(self.inv, self.reach, self.printer, jobs)? {
            if let Err(f) = o.result {
                return Err(Error::Reach(Failure::new(
                    f.kind,
                    format!("{what} on {}: {}", o.host, f.message),
                )));
            }
        }
        Ok(())
    }
}

impl Bencher for NodeBencher<'_> {
    fn command(&self) -> &str {
        &self.inv.benchmark.command
    }

    fn budget(&self) -> (Option<u64>, f64) {
        (
            self.budget.limit.map(|l| l.as_secs()),
            self.budget.start.elapsed().as_secs_f64(),
        )
    }

    fn stage(&mut self, hosts: &[String], stage: &TuneStage) -> Result<(), Error> {
        self.each(hosts, |_| stage.clone(), "staging tune's run files")
    }

    fn unstage(&mut self, hosts: &[String], run: &str) -> Result<(), Error> {
        let call = TuneUnstage { run: run.to_string() };
        self.each(hosts, |_| call.clone(), "removing tune's run files")
    }

    fn round(&mut self, step: &str, round: &[Run<'_>]) -> Result<Option<Vec<Result<BenchRun, FailedRun>>>, Error> {
        let b = &self.inv.benchmark;
        let Some(timeout_s) = self.budget.timeout(b.timeout_s) else {
            return Ok(None);
        };
        let jobs = round
            .iter()
            .map(|r| self.job(r, Variant::Baseline, "", timeout_s))
            .collect::<Result<Vec<_>, Error>>()?;
        self.rounds += 1;
        let outcomes = benchmarks_on_nodes(
            self.inv,
            self.reach,
            self.printer,
            jobs,
            timeout_s,
            Some(format!("({} run {}: {step})", self.caller, self.rounds)),
        )?;
        // A run stopped by the budget, not by benchmark.timeout, measured nothing about
        // the fabric: the round counts for nothing.
        let cut_by_budget =
            timeout_s < b.timeout_s && outcomes.iter().any(|o| o.result.as_ref().is_ok_and(|a| a.timed_out));
        if cut_by_budget {
            return Ok(None);
        }
        Ok(Some(
            outcomes
                .into_iter()
                .map(|o| match o.result {
                    Ok(answer) => runner::judge(&answer, timeout_s)
                        .map_err(|why| FailedRun(format!("the benchmark ({}) {why}", answer.command))),
                    Err(f) => Err(FailedRun(f.message)),
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::figure;
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
