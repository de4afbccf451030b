//! `topo-tune plan`: gather snapshots (as `init` does), solve, print the plan, and with
//! `--output-dir` write plan.json (what `init --plan` applies) and the launcher files.

use super::gather::{gather, Snapshots};
use super::{finish, Done};
use crate::apply::tree::Tree;
use crate::apply::writer::WriteError;
use crate::cli::{OutputFormat, PlanArgs};
use crate::config::Inventory;
use crate::emit;
use crate::error::Error;
use crate::exit;
use crate::model::plan::{Excluded, Plan, PLAN_SCHEMA_VERSION};
use crate::report::envelope::{to_json, Envelope, NoDetail, NodeRow};
use crate::report::plan::{self as plan_report, PlanPayload};
use crate::solve::plan::{plan, NcclPolicy, PlanInput, PlanNode};
use std::collections::HashSet;
use std::path::Path;

/// The plan for every node that answered; nodes that did not are `excluded` with why.
pub(crate) fn build_plan(inv: &Inventory, snapshots: &Snapshots, message_bytes: u64) -> Plan {
    let mut failed = Vec::new();
    let nodes: Vec<PlanNode> = snapshots
        .iter()
        .zip(&inv.nodes)
        .filter_map(|(o, spec)| match &o.result {
            Ok(snap) => Some(PlanNode {
                host: o.host.clone(),
                labels: spec.labels.clone(),
                snapshot: snap,
                hints: spec.hints.clone(),
            }),
            Err(f) => {
                failed.push(Excluded {
                    host: o.host.clone(),
                    reason: format!("not probed: {}", f.message),
                });
                None
            }
        })
        .collect();
    let policy = NcclPolicy {
        cluster_version: inv.nccl_version,
        overrides: inv.nccl.clone(),
    };
    let mut p = plan(&PlanInput {
        nodes: &nodes,
        fabric: inv.fabric.as_ref(),
        message_bytes,
        nccl: &policy,
    });
    p.excluded.extend(failed);
    p
}

/// A reviewed plan.json, checked against this build and this cluster before anything runs.
pub(crate) fn read_plan(path: &Path, inv: &Inventory) -> Result<Plan, Error> {
    let bad = |message: String| Error::PlanFile {
        path: path.display().to_string(),
        message,
    };
    let text = crate::input::read_text(path, crate::input::PLAN_LIMIT, "plan").map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Io {
            what: format!("--plan {}", path.display()),
            source: e,
        },
        _ => bad(e.to_string()),
    })?;
    #[derive(serde::Deserialize)]
    struct VersionOnly {
        schema_version: u32,
    }
    let v: VersionOnly = serde_json::from_str(&text).map_err(|e| bad(format!("not a topo-tune plan: {e}")))?;
    if v.schema_version != PLAN_SCHEMA_VERSION {
        return Err(bad(format!(
            "plan schema_version {} is not the one this topo-tune writes ({PLAN_SCHEMA_VERSION})",
            v.schema_version
        )));
    }
    let plan: Plan = serde_json::from_str(&text).map_err(|e| bad(format!("not a topo-tune plan: {e}")))?;
    let known: HashSet<&str> = inv.nodes.iter().map(|n| n.host.as_str()).collect();
    let strangers: Vec<&str> = plan
        .nccl
        .classes
        .iter()
        .flat_map(|c| c.hosts.iter())
        .map(String::as_str)
        .filter(|h| !known.contains(h))
        .collect();
    if let Some(first) = strangers.first() {
        return Err(bad(format!(
            "names {} host(s) that {} does not list (e.g. `{first}`): made for another cluster?",
            strangers.len(),
            inv.path.display()
        )));
    }
    check_plan_files(&plan).map_err(bad)?;
    Ok(plan)
}

/// What a plan would write besides its settings (checked by the writer): a topology file must
/// be an NCCL topology topo-tune can read back, and each GPU port a device name.
fn check_plan_files(plan: &Plan) -> Result<(), String> {
    for c in &plan.nccl.classes {
        if let Some(xml) = &c.topology_xml {
            let origin = format!("nccl.classes[{}].topology_xml", c.name);
            if crate::probe::nccl_topo::kind_of(xml) != crate::probe::nccl_topo::XmlKind::NcclTopology {
                return Err(format!("{origin} is not an NCCL topology (<system>)"));
            }
            crate::probe::snapshot_from_xml_text(xml, &origin, Some("plan")).map_err(|e| format!("{origin}: {e}"))?;
        }
        for p in &c.gpu_ports {
            crate::model::snapshot_check::device_name(&format!("nccl.classes[{}].gpu_ports", c.name), &p.device, 63)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

pub fn run(args: &PlanArgs, output: OutputFormat) -> Result<Done, Error> {
    let inv = Inventory::load(&args.gather.cluster_config)?;
    let snapshots = gather(&inv, &args.gather, output)?;
    let mut p = build_plan(&inv, &snapshots, args.message_size.0);
    let changed = match &args.output_dir {
        Some(dir) => write_outputs(&mut p, dir)?,
        None => false,
    };
    let nodes: Vec<NodeRow<NoDetail>> = snapshots
        .iter()
        .map(|o| match &o.result {
            Ok(_) => NodeRow::ok(&o.host, false, NoDetail {}),
            Err(f) => NodeRow::failed(&o.host, f.clone(), NoDetail {}),
        })
        .collect();
    let any_failed = snapshots.iter().any(|o| o.result.is_err());
    let msg = format!(
        "plan: {} node(s) in the ring, predicted gain {:.2}x over hostname order{}",
        p.node_order.len(),
        p.predicted.gain,
        if any_failed {
            "; some nodes could not be probed"
        } else {
            ""
        }
    );
    let envelope = Envelope {
        command: "plan",
        changed,
        failed: any_failed,
        msg,
        exit_code: if any_failed { exit::PARTIAL_FAILURE } else { exit::OK },
        nodes,
        payload: PlanPayload {
            plan: p,
            output_dir: args.output_dir.as_ref().map(|d| d.display().to_string()),
        },
    };
    finish(output, envelope, plan_report::render)
}

fn write_outputs(p: &mut Plan, dir: &Path) -> Result<bool, Error> {
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    let write = |name: &str, content: &str| -> Result<bool, Error> {
        Ok(tree.write(name, content.as_bytes(), 0o644).map_err(WriteError::from)?)
    };
    let mut changed = false;
    for class in p.node_classes.iter_mut() {
        if let Some(xml) = &class.graph_xml {
            let name = format!("nccl-graph-{}.xml", class.name);
            changed |= write(&name, xml)?;
            class.graph_file = Some(dir.join(&name).display().to_string());
        }
    }
    changed |= write("hostfile", &emit::launch::mpi_hostfile(p))?;
    changed |= write("slurm-hostfile", &emit::launch::slurm_hostfile(p))?;
    changed |= write("torchrun-node-ranks.txt", &emit::launch::torchrun_node_ranks(p))?;
    changed |= write("plan.json", &to_json(p)?)?;
    Ok(changed)
}
