//! A bencher on paper, for the localisation's unit tests: every run's figure is a base
//! bandwidth times the factor of each slow element the run goes through (the same model as
//! the nccl-tests double the integration tests run), with a seeded ±noise per run.

use crate::bench::parse::{BenchRun, SizeFigures};
use crate::error::Error;
use crate::flow::measure::{Bencher, Run};
use crate::runner::FailedRun;

/// One slow element of the fabric and how much slower it makes a run through it.
#[derive(Debug, Clone)]
pub(crate) enum Slow {
    /// A node's network: runs that span hosts and include it.
    Node(String, f64),
    /// A node's NVLink/PCIe: runs with more than one GPU on it.
    Inside(String, f64),
    /// One NIC: runs across hosts that include the node on that rail (or on every rail).
    Nic(String, u32, f64),
    /// One rail's switch: runs across hosts on that rail (or on every rail).
    Rail(u32, f64),
    /// The cable between two nodes: runs where they are ring neighbours.
    Link(String, String, f64),
}

pub(crate) struct Paper {
    pub(crate) slow: Vec<Slow>,
    /// ± this fraction per run, drawn from `seed` and the run counter.
    pub(crate) noise: f64,
    pub(crate) seed: u64,
    pub(crate) command: String,
    pub(crate) runs: u64,
}

impl Paper {
    pub(crate) fn new(slow: Vec<Slow>, noise: f64, seed: u64) -> Paper {
        Paper {
            slow,
            noise,
            seed,
            command: "mpirun all_reduce_perf -g 1 CUDA_VISIBLE_DEVICES={rail} -J {json}".into(),
            runs: 0,
        }
    }

    fn factor(&self, run: &Run<'_>) -> f64 {
        let n = run.hosts.len();
        let across = n > 1;
        let has = |h: &str| run.hosts.iter().any(|x| x == h);
        let neighbours = |a: &str, b: &str| {
            (0..n).any(|i| {
                let (x, y) = (&run.hosts[i], &run.hosts[(i + 1) % n]);
                n > 1 && ((x == a && y == b) || (x == b && y == a))
            })
        };
        let on_rail = |r: u32| run.rail.is_none_or(|x| x == r);
        self.slow
            .iter()
            .map(|s| match s {
                Slow::Node(h, f) if across && has(h) => *f,
                Slow::Inside(h, f) if run.gpus > 1 && run.rail.is_none() && has(h) => *f,
                Slow::Nic(h, r, f) if across && has(h) && on_rail(*r) => *f,
                Slow::Rail(r, f) if across && on_rail(*r) => *f,
                Slow::Link(a, b, f) if neighbours(a, b) => *f,
                _ => 1.0,
            })
            .product()
    }

    /// A deterministic draw in [-1, 1] for this run (splitmix64).
    fn draw(&self) -> f64 {
        let mut z = self.seed.wrapping_add(self.runs.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z as f64 / u64::MAX as f64) * 2.0 - 1.0
    }
}

impl Bencher for Paper {
    fn command(&self) -> &str {
        &self.command
    }

    fn budget(&self) -> (Option<u64>, f64) {
        (None, 0.0)
    }

    /// Diagnose's paper figures depend on no file: nothing to stage.
    fn stage(&mut self, _hosts: &[String], _stage: &crate::node::calls::TuneStage) -> Result<(), Error> {
        Ok(())
    }

    fn unstage(&mut self, _hosts: &[String], _run: &str) -> Result<(), Error> {
        Ok(())
    }

    fn round(&mut self, _step: &str, runs: &[Run<'_>]) -> Result<Option<Vec<Result<BenchRun, FailedRun>>>, Error> {
        let mut out = Vec::new();
        for run in runs {
            self.runs += 1;
            let busbw = 100.0 * self.factor(run) * (1.0 + self.noise * self.draw());
            let ranks = run.hosts.len() as u32 * run.gpus;
            let size = 1u64 << 30;
            out.push(Ok(BenchRun {
                nccl_tests_version: None,
                ranks,
                rows: vec![SizeFigures {
                    size,
                    time_us: size as f64 / (busbw * 1e3),
                    algbw: busbw,
                    busbw,
                    p99_us: None,
                }],
            }));
        }
        Ok(Some(out))
    }
}
