//! `nvlink-links` and `fabric`: every NVLink of every GPU up at the part's speed (NVML's link
//! states; NVIDIA Health Validation's `nvlink_active` and `nvlink_bandwidth_count_speed`), and
//! the fabric those links need: Fabric Manager on HGX boards with NVSwitches, IMEX (its
//! daemon, node list and channels) on Grace-Blackwell NVL72 trays, and the GPUs' fabric state
//! and health as NVML reports them (NCCL's src/mnnvl.cc; NVIDIA's IMEX guide; a Fabric
//! Manager that stayed dead 20 days: NVIDIA/NVSentinel#891).

use super::conf::read_config;
use super::facts::Facts;
use super::finding::Finding;
use crate::model::gpu_parts::{self, Board, GpuPart};
use crate::model::nvfabric::{FabricState, HealthSummary};
use crate::model::snapshot::{Gpu, NvlinkSource};

/// NVLink speed per link in MB/s a healthy link reaches, by SM (NVIDIA Health Validation:
/// 26562 for H100-class, 53125 for GB200/GB300; `nvidia-smi nvlink -s` shows the same).
fn expected_speed_mbps(sm: u32) -> Option<u32> {
    match sm {
        90 => Some(26_562),
        100 | 103 => Some(53_125),
        _ => None,
    }
}

fn part(g: &Gpu) -> Option<&'static GpuPart> {
    g.placement.pci_id.as_deref().and_then(gpu_parts::by_pci_id)
}

pub(super) fn nvlink_links(f: &Facts) -> Option<Finding> {
    let skip = |why: &str| Some(Finding::skip(why));
    let gpus = &f.snap.gpus;
    if gpus.is_empty() {
        return skip("no GPU");
    }
    if !gpus.iter().all(|g| g.nvlink_source == Some(NvlinkSource::Nvml)) {
        return skip(
            "NVLink link states need the driver (NVML): the node is described by files, or NVML did not answer",
        );
    }
    let with_nvlink: Vec<&Gpu> = gpus
        .iter()
        .filter(|g| part(g).is_some_and(|p| p.nvlinks > 0 && p.board != Board::Pcie))
        .collect();
    if with_nvlink.is_empty() {
        return Some(Finding::pass("no GPU part here has NVLink of its own"));
    }
    let reported: usize = gpus.iter().map(|g| g.nvlinks.as_ref().map_or(0, Vec::len)).sum();
    if gpus.len() == 1 && reported == 0 {
        return skip("one GPU and no NVLink reported (a single GPU passed to a VM): nothing to join");
    }
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    for g in with_nvlink {
        let links = g.nvlinks.as_deref().unwrap_or_default();
        let down: Vec<String> = links.iter().filter(|l| !l.active).map(|l| l.link.to_string()).collect();
        let up = links.iter().filter(|l| l.active).count() as u32;
        let p = part(g).map_or(0, |p| p.nvlinks);
        if !down.is_empty() {
            fails.push(format!("GPU{}: NVLink(s) {} inactive", g.index, down.join(", ")));
        }
        if up < p {
            fails.push(format!("GPU{}: {up} of its part's {p} NVLinks active", g.index));
        }
        let sm = part(g).map(|p| p.sm);
        if let (Some(speed), Some(want)) = (g.nvlink_speed_mbps, sm.and_then(expected_speed_mbps)) {
            if speed < want {
                warns.push(format!(
                    "GPU{}: NVLinks at {speed} MB/s, below the {want} its part reaches",
                    g.index
                ));
            }
        }
    }
    Some(match (fails.is_empty(), warns.is_empty()) {
        (true, true) => Finding::pass("every NVLink of every GPU active, at full speed"),
        (true, false) => Finding::warn(warns.join("; "), "nvidia-smi nvlink -s; reset the GPU or reseat the board if a link trains slow"),
        (false, _) => Finding::fail([fails, warns].concat().join("; "), "nvidia-smi nvlink -s and nvidia-smi -q | grep -A3 -i nvlink; a link down on HGX needs a GPU reset (nvidia-smi -r) or the board serviced; NCCL routes around it slower"),
    })
}

/// Whether a process of this name runs (`/proc/<pid>/comm`, as `pgrep -x` reads it: the
/// kernel keeps 15 bytes of a name, so `nv-fabricmanager` shows as `nv-fabricmanage`).
fn running(f: &Facts, name: &str) -> bool {
    let comm = &name[..name.len().min(15)];
    f.fs.list("/proc")
        .into_iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .take(1 << 20)
        .any(|p| f.fs.read_trimmed(&format!("/proc/{p}/comm")).as_deref() == Some(comm))
}

/// What the node's NVSwitch fabric needs.
enum Needs {
    FabricManager,
    Imex,
}

fn needs(f: &Facts) -> Option<Needs> {
    let board = f.snap.gpus.iter().find_map(part).map(|p| p.board)?;
    match board {
        Board::NvswitchOnPci if !f.snap.pci.nvswitches.is_empty() => Some(Needs::FabricManager),
        Board::NvswitchHidden => Some(Needs::FabricManager),
        Board::NvlinkSwitchTray => Some(Needs::Imex),
        _ => None,
    }
}

pub(super) fn fabric(f: &Facts) -> Option<Finding> {
    let needs = needs(f);
    let reported: Vec<(&Gpu, &crate::model::nvfabric::GpuFabric)> = f
        .snap
        .gpus
        .iter()
        .filter_map(|g| g.fabric.as_ref().map(|x| (g, x)))
        .filter(|(_, x)| x.state != FabricState::NotSupported)
        .collect();
    if needs.is_none() && reported.is_empty() {
        return Some(Finding::skip(
            "no NVSwitch fabric here (no NVSwitch, no NVL72 tray, none the driver reports)",
        ));
    }
    let mut fails = Vec::new();
    let mut warns = Vec::new();
    match needs {
        Some(Needs::FabricManager) if !running(f, "nv-fabricmanager") => fails.push(
            "no nv-fabricmanager process: without Fabric Manager the NVSwitches route nothing (CUDA P2P and NCCL fall back to PCIe or fail)".to_string(),
        ),
        Some(Needs::Imex) => imex(f, &mut fails),
        _ => {}
    }
    for (g, x) in &reported {
        if let Some(why) = not_ready(x, matches!(needs, Some(Needs::Imex))) {
            fails.push(format!("GPU{}: {why}", g.index));
        }
        let Some(h) = &x.health else { continue };
        let severe = h.route_unhealthy == Some(true)
            || h.incorrect_configuration.as_deref().is_some_and(|c| c != "none")
            || h.summary == Some(HealthSummary::Unhealthy);
        let problems = h.problems();
        if problems.is_empty() {
            continue;
        }
        let text = format!("GPU{}: {} (health mask 0x{:x})", g.index, problems.join(", "), h.mask);
        if severe {
            fails.push(text);
        } else {
            warns.push(text);
        }
    }
    let what = match needs {
        Some(Needs::Imex) => "IMEX and the GPUs' fabric",
        Some(Needs::FabricManager) => "Fabric Manager and the GPUs' fabric",
        None => "the GPUs' fabric",
    };
    Some(match (fails.is_empty(), warns.is_empty()) {
        (true, true) => Finding::pass(format!("{what} ready")),
        (true, false) => Finding::warn(warns.join("; "), "nvidia-smi -q | grep -A12 Fabric; watch the fabric's health (route recovery usually ends by itself)"),
        (false, _) => Finding::fail([fails, warns].concat().join("; "), match needs {
                Some(Needs::Imex) => "systemctl enable --now nvidia-imex; list every tray of the NVLink domain in /etc/nvidia-imex/nodes_config.cfg (one IP a line; restart IMEX after a change); create the channel (mknod /dev/nvidia-caps-imex-channels/channel0 c <major of nvidia-caps-imex-channels in /proc/devices> 0); nvidia-imex-ctl -N shows the domain",
                _ => "systemctl enable --now nvidia-fabricmanager (its version must match the driver's); nvidia-smi -q | grep -A12 Fabric shows the state",
            }),
    })
}

/// Why a GPU's fabric is not ready: training not completed, or completed with an error; on a
/// tray, also no domain to belong to (an HGX board's fabric is the node's alone, its cluster
/// UUID zero).
fn not_ready(x: &crate::model::nvfabric::GpuFabric, tray: bool) -> Option<String> {
    if x.state != FabricState::Completed {
        let state = match x.state {
            FabricState::NotStarted => "not started",
            FabricState::InProgress => "in progress",
            _ => "not supported",
        };
        return Some(format!(
            "fabric registration {state} (Fabric Manager has not finished training the GPU's NVLinks)"
        ));
    }
    match x.status.as_deref() {
        Some("success") => {}
        Some(other) => return Some(format!("fabric registration completed with {other}")),
        None => return Some("fabric registration completed with no status".into()),
    }
    if tray {
        return x.domain().err().map(|why| format!("in no NVLink domain ({why})"));
    }
    None
}

/// IMEX's list of the domain's nodes, one IP a line (NVIDIA's IMEX guide).
const NODES_CONFIG: &str = "/etc/nvidia-imex/nodes_config.cfg";

/// IMEX on an NVL72 tray: its daemon, its node list and a channel.
fn imex(f: &Facts, fails: &mut Vec<String>) {
    if !running(f, "nvidia-imex") {
        fails.push("no nvidia-imex process: multi-node NVLink memory sharing (fabric handles) fails".into());
    }
    let mut unreadable = Vec::new();
    let list = read_config(f.fs, NODES_CONFIG, &mut unreadable);
    let nodes = list.as_deref().map_or(0, |l| {
        l.lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .count()
    });
    if let Some(why) = unreadable.pop() {
        fails.push(format!("cannot read {why}: IMEX's node list is unknown"));
    } else if list.is_none() || nodes == 0 {
        fails.push(format!("{NODES_CONFIG} missing or empty: IMEX knows no other tray"));
    } else if nodes < 2 {
        fails.push(format!("{NODES_CONFIG} lists 1 node: the domain is this tray alone"));
    }
    let channels =
        f.fs.list("/dev/nvidia-caps-imex-channels")
            .into_iter()
            .filter(|c| c.starts_with("channel"))
            .count();
    if channels == 0 {
        fails.push("no /dev/nvidia-caps-imex-channels/channel*: NCCL fails with `Cuda failure 800 'operation not permitted'` (channels do not survive a reboot)".into());
    }
}
