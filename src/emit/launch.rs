//! Launcher files in ring order: an mpirun hostfile, a `SLURM_HOSTFILE` for
//! `srun --distribution=arbitrary` (in Slurm's node names), and a node-rank map for torchrun.

use crate::model::plan::Plan;
use std::collections::HashMap;

/// GPUs per host (1 where the host holds no ring), looked up once per plan.
fn slots(plan: &Plan) -> HashMap<&str, usize> {
    plan.node_classes
        .iter()
        .flat_map(|c| c.hosts.iter().map(move |h| (h.as_str(), c.gpus.max(1))))
        .collect()
}

/// `host slots=N`, one line per node (Open MPI; use with `--map-by slot` or `--map-by seq`).
pub(crate) fn mpi_hostfile(plan: &Plan) -> String {
    let slots = slots(plan);
    plan.node_order
        .iter()
        .map(|h| format!("{h} slots={}\n", slots.get(h.as_str()).copied().unwrap_or(1)))
        .collect()
}

/// One line per task, in rank order (`SLURM_HOSTFILE=... srun --distribution=arbitrary`),
/// each host under its Slurm name (`slurm_names`; a host not in it under its own).
pub(crate) fn slurm_hostfile(plan: &Plan, slurm_names: &HashMap<&str, &str>) -> String {
    let slots = slots(plan);
    plan.node_order
        .iter()
        .flat_map(|h| {
            let name = slurm_names.get(h.as_str()).copied().unwrap_or(h);
            std::iter::repeat_n(format!("{name}\n"), slots.get(h.as_str()).copied().unwrap_or(1))
        })
        .collect()
}

/// `host node_rank`, for `torchrun --node_rank` (torchrun otherwise ranks hosts by name).
pub(crate) fn torchrun_node_ranks(plan: &Plan) -> String {
    plan.node_order
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{h} {i}\n"))
        .collect()
}
