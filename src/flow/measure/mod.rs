//! The one measuring engine `diagnose`, `tune` and `apply --tuning` share: rounds of
//! benchmark runs started together, through a [`Bencher`] — the nodes ([`nodes::NodeBencher`]),
//! or paper in the tests — counted, and stopped for good once the budget is spent.

pub(crate) mod nodes;

use crate::apply::tune_stage::StagedRef;
use crate::bench::parse::BenchRun;
use crate::error::Error;
use crate::model::{Failure, FailureKind};
use crate::node::calls::TuneStage;
use crate::runner::FailedRun;

/// One benchmark run: `template` on `hosts` with their live NCCL files, or with the run files
/// `tune` staged for a candidate (`staged`; `None` for diagnose).
pub(crate) struct Run<'a> {
    pub(crate) template: &'a str,
    pub(crate) hosts: &'a [String],
    pub(crate) gpus: u32,
    pub(crate) rail: Option<u32>,
    pub(crate) staged: Option<&'a StagedRef>,
}

/// Where runs are made.
pub(crate) trait Bencher {
    /// The cluster's benchmark command (the template of every all-reduce run).
    fn command(&self) -> &str;
    /// The runs of one round at once (disjoint groups): each one's figures, or why it gave
    /// none; `None` when the budget is spent (the round did not run, or was cut short by it).
    fn round(&mut self, step: &str, runs: &[Run<'_>]) -> Result<Option<Vec<Result<BenchRun, FailedRun>>>, Error>;
    /// `--budget` in seconds, and the seconds spent so far.
    fn budget(&self) -> (Option<u64>, f64);
    /// Put `tune`'s run files on every node of `hosts`, at the same path on each.
    fn stage(&mut self, hosts: &[String], stage: &TuneStage) -> Result<(), Error>;
    /// Remove run `run`'s files from every node of `hosts`.
    fn unstage(&mut self, hosts: &[String], run: &str) -> Result<(), Error>;
}

/// A run's figure: its largest size's busbw; on one rank, where busbw is 0 by definition
/// (no bus), its algbw — what the GPU did.
pub(crate) fn figure(run: &BenchRun) -> f64 {
    let largest = run.rows.iter().max_by_key(|r| r.size);
    largest.map_or(0.0, |r| if run.ranks >= 2 { r.busbw } else { r.algbw })
}

/// Rounds counted, and the step the budget cut short: what the localisation steps read.
pub(crate) struct Bench<B> {
    pub(crate) bencher: B,
    /// Rounds run so far, the sweep included.
    pub(crate) rounds: usize,
    /// The step the budget cut short, once it is spent: no round runs after it.
    pub(crate) stopped: Option<String>,
}

impl<B: Bencher> Bench<B> {
    pub(crate) fn new(bencher: B) -> Self {
        Bench {
            bencher,
            rounds: 0,
            stopped: None,
        }
    }

    pub(crate) fn command(&self) -> String {
        self.bencher.command().to_string()
    }

    fn round(&mut self, step: &str, runs: &[Run<'_>]) -> Result<Option<Vec<Result<BenchRun, FailedRun>>>, Error> {
        if self.stopped.is_some() {
            return Ok(None);
        }
        match self.bencher.round(step, runs)? {
            None => {
                self.stopped = Some(step.to_string());
                Ok(None)
            }
            Some(results) => {
                self.rounds += 1;
                Ok(Some(results))
            }
        }
    }

    /// One round's runs, each one's figures or why it failed; `None` once the budget is
    /// spent.
    pub(crate) fn runs(
        &mut self,
        step: &str,
        runs: &[Run<'_>],
    ) -> Result<Option<Vec<Result<BenchRun, FailedRun>>>, Error> {
        self.round(step, runs)
    }

    /// The sweep on the whole set; a failed run is an error, never a figure.
    pub(crate) fn sweep(&mut self, hosts: &[String], gpus: u32) -> Result<BenchRun, Error> {
        let command = self.command();
        let run = Run {
            template: &command,
            hosts,
            gpus,
            rail: None,
            staged: None,
        };
        let failed = |why: String| Error::Reach(Failure::new(FailureKind::BenchmarkFailed, why));
        let Some(mut outcomes) = self.round("the sweep", &[run])? else {
            return Err(failed(format!(
                "the sweep did not finish within --budget {} s",
                self.bencher.budget().0.unwrap_or_default()
            )));
        };
        outcomes
            .pop()
            .ok_or_else(|| failed("the benchmark gave no answer".into()))?
            .map_err(|e| failed(e.0))
    }

    /// One round's large-message bandwidth per run (`None`: that run failed), or `None`
    /// when the budget is spent.
    pub(crate) fn figures(&mut self, step: &str, round: &[Run<'_>]) -> Result<Option<Vec<Option<f64>>>, Error> {
        Ok(self
            .round(step, round)?
            .map(|runs| runs.into_iter().map(|r| r.ok().map(|run| figure(&run))).collect()))
    }
}
