//! The rollout engine's way to the nodes (`canary::rollout::Fleet`): stage, unstage, state,
//! promote, roll back as node calls over each node's transport, and benchmark through the
//! measuring engine `tune` and `diagnose` use (`flow::measure`).

use super::measure::nodes::NodeBencher;
use super::measure::Run;
use super::reach::on_nodes;
use super::settings::ReachSettings;
use crate::apply::stage::{NodeState, StageRecord};
use crate::apply::writer::WriteReport;
use crate::canary::rollout::{Fleet, Results};
use crate::canary::state::Rollout;
use crate::config::{Inventory, NodeSpec};
use crate::error::Error;
use crate::model::{Failure, FailureKind};
use crate::node::calls::{Rollback, Stage, State, Unstage, Write};
use crate::node::{write_target, Call, NodeJob};
use crate::report::Printer;
use crate::runner::{BenchAnswer, Variant};

/// The engine's way to the nodes: the node calls, over each node's transport.
pub(crate) struct NodeFleet<'a> {
    pub(crate) inv: &'a Inventory,
    pub(crate) reach: &'a ReachSettings,
    pub(crate) printer: &'a Printer,
    /// The plugin a tuning's bundles install (the record keeps only its sha256).
    pub(crate) plugin: Option<crate::apply::plugin::PluginCopy>,
}

impl NodeFleet<'_> {
    /// `host`'s candidate as a node writes it: with the plugin's bytes when it has a tuning.
    fn bundle(&self, r: &Rollout, host: &str) -> Option<crate::apply::writer::Bundle> {
        let mut bundle = r.bundles.get(*r.host_bundle.get(host)?)?.clone();
        if let Some(t) = bundle.tuner.as_mut() {
            t.plugin = Some(self.plugin.clone()?);
        }
        Some(bundle)
    }

    fn spec(&self, host: &str) -> Option<&NodeSpec> {
        self.inv.nodes.iter().find(|n| n.host == host)
    }

    fn call<C: Call>(
        &self,
        r: &Rollout,
        hosts: &[String],
        make: impl Fn(&str) -> Option<C>,
    ) -> Result<Results<C::Answer>, Error> {
        let mut out = Vec::new();
        let mut jobs = Vec::new();
        for h in hosts {
            match (self.spec(h), make(h)) {
                (Some(n), Some(call)) => jobs.push(NodeJob {
                    node: n.clone(),
                    target: write_target(n, r.options.output_dir.as_deref()),
                    call,
                }),
                _ => out.push((
                    h.clone(),
                    Err(Failure::new(
                        FailureKind::NotPlanned,
                        "not in cluster.yaml or without a candidate any more",
                    )),
                )),
            }
        }
        let outcomes = on_nodes(self.inv, self.reach, self.printer, jobs)?;
        out.extend(outcomes.into_iter().map(|o| (o.host, o.result)));
        Ok(out)
    }
}

impl Fleet for NodeFleet<'_> {
    type Stop = Error;

    fn stage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Error> {
        self.call(r, hosts, |h| {
            let bundle = self.bundle(r, h)?;
            Some(Stage {
                bundle,
                rollout: r.id.clone(),
            })
        })
    }

    fn unstage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Error> {
        self.call(r, hosts, |_| Some(Unstage { rollout: r.id.clone() }))
    }

    fn promote(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Error> {
        self.call(r, hosts, |h| {
            let bundle = self.bundle(r, h)?;
            Some(Write {
                bundle,
                check: false,
                diff: false,
                run_id: Some(run_id.to_string()),
            })
        })
    }

    fn rollback(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Error> {
        self.call(r, hosts, |_| {
            Some(Rollback {
                run_id: Some(run_id.to_string()),
            })
        })
    }

    fn state(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<NodeState>, Error> {
        self.call(r, hosts, |_| Some(State::default()))
    }

    fn end(&mut self, r: &Rollout, marker: &str) {
        // A run on the controller is found by its mark; one on a first node ended with its
        // node-side process (which exits when the controller's connection goes).
        if r.options.benchmark.runs_on == crate::config::benchmark::RunsOn::Controller {
            let n = crate::runner::end_marked(marker);
            if n > 0 {
                tracing::warn!(marker, groups = n, "ended a benchmark a killed run left");
            }
        }
    }

    fn bench(
        &mut self,
        r: &Rollout,
        hosts: &[String],
        variant: Variant,
        marker: &str,
    ) -> Result<Result<BenchAnswer, Failure>, Error> {
        let b = &r.options.benchmark;
        if hosts.first().and_then(|h| self.spec(h)).is_none() {
            return Ok(Err(Failure::new(FailureKind::NotPlanned, "no node to benchmark")));
        }
        // The measuring engine tune and diagnose use, with the record's command (a resume
        // checked it is cluster.yaml's); the rollout prints its own progress lines: no bar.
        let quiet = Printer::quiet(self.printer.format);
        let mut engine = NodeBencher::new(
            self.inv,
            self.reach,
            &quiet,
            r.options.output_dir.as_deref(),
            None,
            "apply",
        );
        let run = Run {
            template: &b.command,
            hosts,
            gpus: r.gpus_per_node(hosts),
            rail: None,
            staged: None,
        };
        engine.one(&run, variant, marker, b.timeout_s)
    }
}
