//! A rollout record read back (`apply --resume`, `status`) is an input like cluster.yaml: it
//! is obeyed — its benchmark command runs as root, its candidates are installed, its phase
//! decides what happens next — only once every field holds what topo-tune itself would have
//! written for this cluster: the template rules, the ranges, the ids, waves that are disjoint
//! and inside the inventory, a phase its verdict and rounds agree with, candidates that pass
//! the same checks as a plan's. Pure, apart from parsing a candidate's topology file.

use super::state::{Phase, Rollout, RolloutStatus, Wave, STATE_VERSION};
use crate::bench::stats::{self, Round};
use crate::config::benchmark::ROUNDS;
use crate::config::Inventory;
use crate::model::files::run_id_ok;
use crate::model::Refusal;
use std::collections::HashSet;
use std::path::{Component, Path};

fn text_ok(s: &str, max: usize) -> bool {
    s.len() <= max && !s.chars().any(|c| c.is_control() || crate::model::is_deceptive(c))
}

/// Check `r` against this build and `inv` (the cluster.yaml it names).
pub(crate) fn check(r: &Rollout, inv: &Inventory) -> Result<(), Refusal> {
    if r.version != STATE_VERSION {
        return Err(Refusal(format!(
            "version {} is not this build's ({STATE_VERSION})",
            r.version
        )));
    }
    if !run_id_ok(&r.id) {
        return Err(Refusal(format!("id {:?} is not one topo-tune makes", r.id)));
    }
    options(r)?;
    hosts(r, inv)?;
    bundles(r, inv)?;
    if r.waves.is_empty() {
        return Err(Refusal("waves: a rollout has at least one wave".into()));
    }
    for (i, w) in r.waves.iter().enumerate() {
        wave(r, i, w).map_err(|m| Refusal(format!("waves[{i}] ({}): {m}", w.name.escape_default())))?;
    }
    if r.status == RolloutStatus::Completed && r.waves.iter().any(|w| w.phase != Phase::Promoted) {
        return Err(Refusal("status: completed with a wave that is not promoted".into()));
    }
    Ok(())
}

fn options(r: &Rollout) -> Result<(), Refusal> {
    let o = &r.options;
    o.benchmark.check().map_err(|m| Refusal(format!("options: {m}")))?;
    o.gate.check().map_err(|m| Refusal(format!("options.gate: {m}")))?;
    if !ROUNDS.contains(&o.rounds) {
        return Err(Refusal(format!(
            "options.rounds {} is outside {ROUNDS:?}: fewer rounds promote below the rule's confidence",
            o.rounds
        )));
    }
    if o.wave_size.is_some_and(|n| !(1..=100_000).contains(&n)) {
        return Err(Refusal("options.wave_size is outside 1..=100000".into()));
    }
    if o.canary.as_deref().is_some_and(|c| !text_ok(c, 4096)) {
        return Err(Refusal("options.canary is not plain text".into()));
    }
    if let Some(dir) = &o.output_dir {
        output_dir(dir)?;
    }
    Ok(())
}

/// Where a rollout's files go: an absolute, plain path (no `.`, `..`), never `/` itself (that
/// would put `/<host>/etc/nccl.conf` on the controller's root).
pub(crate) fn output_dir(dir: &Path) -> Result<(), Refusal> {
    let plain = dir
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !dir.is_absolute() || !plain || dir.parent().is_none() {
        return Err(Refusal(format!(
            "options.output_dir {:?} is not an absolute path below / without `.` or `..`",
            dir.display().to_string()
        )));
    }
    Ok(())
}

fn hosts(r: &Rollout, inv: &Inventory) -> Result<(), Refusal> {
    let known: HashSet<&str> = inv.every_node().map(|n| n.host.as_str()).collect();
    let stranger = r
        .host_bundle
        .keys()
        .chain(r.gpus.keys())
        .chain(r.untouched.keys())
        .chain(r.waves.iter().flat_map(|w| w.hosts.iter()))
        .find(|h| !known.contains(h.as_str()));
    if let Some(h) = stranger {
        return Err(Refusal(format!(
            "names host {h:?}, which {} does not list",
            inv.path.display()
        )));
    }
    let mut seen = HashSet::new();
    for w in &r.waves {
        if w.hosts.is_empty() {
            return Err(Refusal(format!("wave {} has no hosts", w.name.escape_default())));
        }
        if let Some(h) = w.hosts.iter().find(|h| !seen.insert(h.as_str())) {
            return Err(Refusal(format!("host {h} is in two waves")));
        }
        if let Some(h) = w.hosts.iter().find(|h| !r.host_bundle.contains_key(*h)) {
            return Err(Refusal(format!("host {h} is in a wave but has no candidate")));
        }
    }
    if let Some((h, _)) = r.host_bundle.iter().find(|(_, b)| **b >= r.bundles.len()) {
        return Err(Refusal(format!(
            "host_bundle: {h} names a candidate that does not exist"
        )));
    }
    if let Some((h, g)) = r.gpus.iter().find(|(_, g)| !(1..=256).contains(*g)) {
        return Err(Refusal(format!("gpus: {h} has {g}")));
    }
    if r.untouched.values().any(|w| !text_ok(w, 4096)) {
        return Err(Refusal("untouched: not plain text".into()));
    }
    Ok(())
}

/// Every candidate passes what a plan's class must: the settings as cluster.yaml's `nccl:`
/// must, only topo-tune's or cluster.yaml's files and libraries, a topology file it reads
/// back.
fn bundles(r: &Rollout, inv: &Inventory) -> Result<(), Refusal> {
    for (i, b) in r.bundles.iter().enumerate() {
        let at = |m: &dyn std::fmt::Display| Refusal(format!("bundles[{i}]: {m}"));
        if b.dropin.len() as u64 > crate::model::files::FILE_LIMIT {
            return Err(at(&"the drop-in is larger than 1 MiB"));
        }
        let mut settings = crate::nccl::review::dropin_settings(&b.dropin).map_err(|e| at(&e))?;
        tuning_of(r, b, &mut settings).map_err(|e| at(&e.0))?;
        crate::nccl::review::check_settings(&settings, &inv.nccl, b.topology_xml.is_some(), b.nccl_version)
            .map_err(|e| at(&e))?;
        if let Some(xml) = &b.topology_xml {
            crate::probe::check_topology_artifact(xml, "topology_xml").map_err(|e| at(&e))?;
        }
    }
    Ok(())
}

/// A candidate's tuning is the record's, exactly: its rules file made from the recorded
/// tuning (which holds up as any read back), never a plugin's bytes, and a drop-in whose
/// tuner lines name that rules file and the recorded plugin's content-addressed path. Those
/// lines and the tuning's own globals are taken out of `settings`, which are then checked as
/// any candidate's.
fn tuning_of(
    r: &Rollout,
    b: &crate::apply::writer::Bundle,
    settings: &mut Vec<crate::model::Setting>,
) -> Result<(), Refusal> {
    let Some(rt) = &r.tuning else {
        return match b.tuner {
            Some(_) => Err(Refusal("carries a rules file, but the record holds no tuning".into())),
            None => Ok(()),
        };
    };
    crate::tune::tuning::review(&rt.tuning).map_err(|e| Refusal(format!("tuning: {}", e.0)))?;
    if rt.judged.len() > 2048 || rt.judged.iter().any(|j| !text_ok(&j.rule, 512)) {
        return Err(Refusal("tuning.judged is not the canary's word on its rules".into()));
    }
    let mut own: Vec<(String, String)> = rt
        .tuning
        .globals
        .iter()
        .map(|g| (g.name.clone(), g.value.clone()))
        .collect();
    if let Some(t) = &b.tuner {
        if t.plugin.is_some() {
            return Err(Refusal(
                "carries a plugin's bytes: a record names its sha256 only".into(),
            ));
        }
        if t.csv != crate::tune::tuning::csv(&rt.tuning) {
            return Err(Refusal(
                "its rules file is not the one the recorded tuning makes".into(),
            ));
        }
        let sha = rt
            .plugin_sha256
            .as_deref()
            .filter(|h| crate::apply::staged::is_sha256(h))
            .ok_or_else(|| Refusal("a rules file with no plugin sha256 recorded".into()))?;
        own.push(("NCCL_TUNER_PLUGIN".into(), crate::model::files::plugin_path(sha)));
        own.push(("NCCL_TUNER_CONFIG_FILE".into(), crate::model::files::TUNER_CSV.into()));
    }
    settings.retain(|s| !own.iter().any(|(n, v)| *n == s.name && *v == s.value));
    Ok(())
}

fn wave(r: &Rollout, i: usize, w: &Wave) -> Result<(), Refusal> {
    if !text_ok(&w.name, 256) {
        return Err(Refusal("its name is not plain text".into()));
    }
    if w.run_id != format!("{}-{}", r.id, i + 1) {
        return Err(Refusal(format!("run_id {:?} is not {}-{}", w.run_id, r.id, i + 1)));
    }
    let outsider = w
        .failures
        .keys()
        .chain(w.staged.keys())
        .chain(w.unfinished.keys())
        .chain(w.changed.iter())
        .any(|h| !w.hosts.contains(h));
    if outsider {
        return Err(Refusal("names a host that is not in the wave".into()));
    }
    if w.failures
        .values()
        .chain(w.outcome.iter())
        .any(|t| !text_ok(t, 1 << 16))
    {
        return Err(Refusal("failures or outcome are not plain text".into()));
    }
    if let Some((h, rec)) = w.staged.iter().find(|(_, s)| s.check().is_err() || s.rollout != r.id) {
        return Err(Refusal(format!(
            "staged: {h} holds another rollout's stage, or not a stage ({})",
            rec.rollout
        )));
    }
    if w.in_flight
        .as_deref()
        .is_some_and(|m| !m.starts_with(&w.run_id) || !text_ok(m, 256))
    {
        return Err(Refusal("in_flight is not a mark of this wave's runs".into()));
    }
    // Waves run in order: one starts only after the one before it was promoted.
    if i > 0 && w.phase != Phase::Pending && r.waves[i - 1].phase != Phase::Promoted {
        return Err(Refusal(format!(
            "{:?} while the wave before it is {:?}",
            w.phase,
            r.waves[i - 1].phase
        )));
    }
    rounds(r, w)
}

/// The rounds are real runs of this wave, and the phase is what its rounds give: a wave
/// promotes only on the verdict the decision rule draws from exactly these figures.
fn rounds(r: &Rollout, w: &Wave) -> Result<(), Refusal> {
    let wanted = r.options.rounds as usize;
    if w.rounds.len() > wanted {
        return Err(Refusal(format!(
            "{} rounds recorded, {wanted} asked for",
            w.rounds.len()
        )));
    }
    let gpus = r.gpus_per_node(&w.hosts);
    let mut judged = Vec::new();
    for (n, round) in w.rounds.iter().enumerate() {
        for run in [&round.baseline, &round.candidate] {
            if !(run.seconds.is_finite() && run.seconds >= 0.0 && text_ok(&run.command, 1 << 16)) {
                return Err(Refusal(format!("round {}: not a run", n + 1)));
            }
            if let Some(f) = &run.figures {
                f.check().map_err(|e| Refusal(format!("round {}: {e}", n + 1)))?;
                if let Some(why) = crate::bench::parse::off_the_set(f.ranks, w.hosts.len(), gpus) {
                    return Err(Refusal(format!("round {}: {why}", n + 1)));
                }
            }
        }
        if let (Some(b), Some(c)) = (&round.baseline.figures, &round.candidate.figures) {
            judged.push(Round {
                baseline: b.clone(),
                candidate: c.clone(),
            });
        }
    }
    let promoting = matches!(w.phase, Phase::Promoting | Phase::Promoted);
    if matches!(w.phase, Phase::Pending | Phase::Staging) && (!w.rounds.is_empty() || w.verdict.is_some()) {
        return Err(Refusal(format!("{:?} with rounds or a verdict", w.phase)));
    }
    let Some(v) = &w.verdict else {
        return if promoting {
            Err(Refusal(format!(
                "{:?} without a verdict: promotion is only on a measured gain",
                w.phase
            )))
        } else {
            Ok(())
        };
    };
    if judged.len() != wanted {
        return Err(Refusal(format!(
            "a verdict over {} complete round(s) where {wanted} are asked for",
            judged.len()
        )));
    }
    let again = stats::judge(&judged, &r.options.gate)
        .map_err(|e| Refusal(format!("the verdict's rounds cannot be judged: {e}")))?;
    if again.decision != v.decision || again.reason != v.reason {
        return Err(Refusal(format!(
            "the recorded verdict ({:?}) is not what its rounds give ({:?}: {})",
            v.decision, again.decision, again.reason
        )));
    }
    if promoting && !v.decision.promotes() {
        return Err(Refusal(format!(
            "{:?} on a verdict that halts ({:?})",
            w.phase, v.decision
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_dir_is_absolute_plain_and_not_the_root() {
        for bad in ["/", "out", "./out", "/tmp/../etc", ""] {
            assert!(output_dir(Path::new(bad)).is_err(), "{bad}");
        }
        for ok in ["/tmp/out", "/srv/topo-tune/out"] {
            assert!(output_dir(Path::new(ok)).is_ok(), "{ok}");
        }
    }
}
