//! A NodeSnapshot from an NCCL topology file (`NCCL_TOPO_FILE` / `NCCL_TOPO_DUMP_FILE` dialect,
//! research/nccl.md §2.3): `system > cpu > pci (> pci)* > {gpu > nvlink, nic > net}`.
//!
//! NCCL folds a PCIe switch into one `<pci class="0x060400">` with the endpoints right below
//! it; each top-level `<pci>` of a `<cpu>` is taken as its own root complex (host bridge), so
//! two of them on one CPU read NODE, as `nvidia-smi` would show separate root complexes.

use crate::model::pci::{class, gen_from_speed, Bdf};
use crate::model::snapshot::*;
use crate::model::{CpuList, PcieLink};
use crate::probe::assemble::numa_affinity;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
#[error("{path}: not a usable NCCL topology file: {reason}")]
pub struct NcclTopoError {
    pub path: String,
    pub reason: String,
}

pub fn looks_like_nccl_topology(text: &str) -> bool {
    text.contains("<system") && !text.contains("<topology")
}

/// What the `<cpu>` elements hold, before it becomes a snapshot.
#[derive(Default)]
struct Parsed {
    numa_nodes: Vec<NumaNode>,
    host_bridges: Vec<HostBridge>,
    bridges: Vec<(Bdf, PciParent, String, PcieLink)>,
    devices: Vec<Dev>,
}

pub fn snapshot_from_text(text: &str, origin: &Path, hostname: &str) -> Result<NodeSnapshot, NcclTopoError> {
    let bad = |reason: String| NcclTopoError {
        path: origin.display().to_string(),
        reason,
    };
    let doc = roxmltree::Document::parse(text).map_err(|e| bad(e.to_string()))?;
    let system = doc.root_element();
    if system.tag_name().name() != "system" {
        return Err(bad(format!(
            "root element is <{}>, expected <system version=\"1\">",
            system.tag_name().name()
        )));
    }
    let mut parsed = Parsed::default();
    for cpu in system.children().filter(|n| n.has_tag_name("cpu")) {
        read_cpu(&cpu, &mut parsed).map_err(bad)?;
    }
    parsed.numa_nodes.sort_by_key(|n| n.id);
    let (gpus, nics) = gpus_and_nics(&parsed);
    let pci = pci_topology(&parsed, &gpus, &nics);
    let notes = notes(&gpus, &pci);
    let all_cpus = parsed
        .numa_nodes
        .iter()
        .fold(CpuList::new(), |acc, n| acc.union(&n.cpus));
    Ok(NodeSnapshot {
        schema_version: SCHEMA_VERSION,
        hostname: hostname.to_string(),
        source: SnapshotSource {
            kind: SourceKind::NcclTopo,
            path: Some(origin.display().to_string()),
        },
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: MachineInfo::default(),
        cpu: CpuSummary {
            packages: parsed.numa_nodes.len() as u32,
            cores: 0,
            pus: all_cpus.len() as u32,
            cpus: all_cpus,
        },
        numa_nodes: parsed.numa_nodes,
        pci,
        gpus,
        nics,
        nccl_version: None,
        notes,
    })
}

/// One `<cpu>`: its NUMA node, and each top-level `<pci>` as its own root complex.
fn read_cpu(cpu: &roxmltree::Node, out: &mut Parsed) -> Result<(), String> {
    let numaid: i64 = cpu
        .attribute("numaid")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "<cpu> without a numeric numaid".to_string())?;
    let numa = u32::try_from(numaid).ok();
    let cpus = cpu
        .attribute("affinity")
        .map(|a| CpuList::parse_mask(a).map_err(|e| e.to_string()))
        .transpose()?
        .unwrap_or_default();
    if let Some(id) = numa {
        out.numa_nodes.push(NumaNode {
            id,
            cpus: cpus.clone(),
            memory_bytes: None,
        });
    }
    for top in cpu.children().filter(|n| n.has_tag_name("pci")) {
        let bdf = busid(&top)?;
        // One root complex per top-level `<pci>`; bus ids like Azure's `ffff:ff:01.0` repeat
        // across CPUs, so the CPU is part of the name.
        let hb = format!("root-{bdf}@cpu{numaid}");
        if !out.host_bridges.iter().any(|h: &HostBridge| h.id == hb) {
            out.host_bridges.push(HostBridge {
                id: hb.clone(),
                domain: bdf.domain,
                first_bus: bdf.bus,
                last_bus: bdf.bus,
                numa_node: numa,
                cpus: cpus.clone(),
            });
        }
        walk(
            &top,
            PciParent::HostBridge(hb.clone()),
            &hb,
            numa,
            &cpus,
            &mut out.bridges,
            &mut out.devices,
        )?;
    }
    Ok(())
}

/// NCCL folds each switch's upstream and downstream ports into one `<pci>`: every bridge
/// node there is a switch (research/irq.md §4.2, step 2).
fn pci_topology(p: &Parsed, gpus: &[Gpu], nics: &[Nic]) -> PciTopology {
    let bridges = &p.bridges;
    let switches: Vec<PciSwitch> = bridges
        .iter()
        .map(|(b, parent, id, _)| PciSwitch {
            upstream: *b,
            downstream_ports: Vec::new(),
            host_bridge: host_of(parent, bridges),
            pci_id: id.clone(),
        })
        .collect();
    let pci_bridges = bridges
        .iter()
        .map(|(b, parent, id, link)| PciBridge {
            bdf: *b,
            parent: parent.clone(),
            role: BridgeRole::SwitchUpstream,
            vendor_id: id.split(':').next().unwrap_or("").to_string(),
            device_id: id.split(':').nth(1).unwrap_or("").to_string(),
            secondary_bus: 0,
            subordinate_bus: 0,
            link: link.clone(),
        })
        .collect();
    let exposed = gpus
        .iter()
        .map(|g| &g.placement)
        .chain(nics.iter().filter_map(|n| n.pci.as_ref()))
        .any(|p| matches!(p.parent, PciParent::HostBridge(_)));
    PciTopology {
        host_bridges: p.host_bridges.clone(),
        bridges: pci_bridges,
        switches,
        switches_visible: !exposed,
        nvswitches: Vec::new(),
    }
}

fn notes(gpus: &[Gpu], pci: &PciTopology) -> Vec<Note> {
    let mut notes = vec![Note::info(
        "nvlink-unknown",
        "snapshot made from an NCCL topology file: names, UUIDs and IRQs are unknown",
    )];
    if !pci.switches_visible {
        notes.push(Note::info(
            "switches-not-visible",
            "switches not visible: some GPUs or NICs sit straight under a CPU in the NCCL topology file",
        ));
    }
    if gpus.is_empty() {
        notes.push(Note::info(
            "no-gpu",
            "the NCCL topology file lists no GPU (class 0x03xxxx)",
        ));
    }
    notes
}

/// GPUs (class 0x03xxxx, with their NVLinks) and NICs (class 0x02xxxx) of the file.
fn gpus_and_nics(p: &Parsed) -> (Vec<Gpu>, Vec<Nic>) {
    let mut gpus = Vec::new();
    let mut nics = Vec::new();
    let gpu_bdfs: Vec<Bdf> = p
        .devices
        .iter()
        .filter(|d| d.class >> 16 == 0x03)
        .map(|d| d.placement.bdf)
        .collect();
    for d in &p.devices {
        let mut placement = d.placement.clone();
        placement.numa_affinity = numa_affinity(&p.numa_nodes, &placement.cpu_affinity);
        match d.class >> 16 {
            0x03 => {
                let nvlinks = (!d.nvlinks.is_empty()).then(|| {
                    let mut out = Vec::new();
                    for (target, count, tclass) in &d.nvlinks {
                        let remote = if gpu_bdfs.contains(target) && !tclass.starts_with("0x0680") {
                            NvLinkPeer::Gpu
                        } else {
                            NvLinkPeer::Switch
                        };
                        for _ in 0..*count {
                            let link = out.len() as u32;
                            out.push(NvLink {
                                link,
                                active: true,
                                version: None,
                                remote_bdf: Some(*target),
                                remote,
                                bandwidth_gbps: d.sm.and_then(|sm| {
                                    crate::probe::assemble::nvlink_gbps(Some(((sm / 10) as i32, (sm % 10) as i32)))
                                }),
                            });
                        }
                    }
                    out
                });
                gpus.push(Gpu {
                    index: d.gpu_dev.unwrap_or(gpus.len() as u32),
                    name: format!("NVIDIA GPU {}", placement.pci_id),
                    uuid: None,
                    placement,
                    compute_capability: d.sm.map(|sm| format!("{}.{}", sm / 10, sm % 10)),
                    nvlinks,
                    source: GpuSource::Pci,
                });
            }
            0x02 => {
                let name = d.net_name.clone().unwrap_or_else(|| placement.bdf.to_string());
                nics.push(Nic {
                    name: name.clone(),
                    kind: NicKind::Rdma,
                    pci: Some(placement),
                    rdma: Some(RdmaDevice {
                        device: name,
                        ports: Vec::new(),
                    }),
                    netdevs: Vec::new(),
                    driver: None,
                    irqs: Vec::new(),
                });
            }
            _ => {}
        }
    }
    gpus.sort_by_key(|g| g.index);
    (gpus, nics)
}

fn host_of(parent: &PciParent, bridges: &[(Bdf, PciParent, String, PcieLink)]) -> String {
    let mut cur = parent.clone();
    for _ in 0..=bridges.len() {
        match cur {
            PciParent::HostBridge(h) => return h,
            PciParent::Bridge(b) => match bridges.iter().find(|(x, ..)| *x == b) {
                Some((_, p, ..)) => cur = p.clone(),
                None => break,
            },
        }
    }
    String::new()
}

struct Dev {
    placement: PciPlacement,
    class: u32,
    gpu_dev: Option<u32>,
    sm: Option<u32>,
    nvlinks: Vec<(Bdf, u32, String)>,
    net_name: Option<String>,
}

fn busid(n: &roxmltree::Node) -> Result<Bdf, String> {
    let id = n.attribute("busid").ok_or("<pci> without busid")?;
    id.parse::<Bdf>().map_err(|e| e.to_string())
}

fn link_of(n: &roxmltree::Node) -> PcieLink {
    let gen = n.attribute("link_speed").and_then(gen_from_speed);
    // NCCL: link_width 0 means 16.
    let width = n
        .attribute("link_width")
        .and_then(|w| w.parse::<u8>().ok())
        .map(|w| if w == 0 { 16 } else { w });
    PcieLink::from_gen_width(gen, width, None, None)
}

fn hex_attr(n: &roxmltree::Node, name: &str) -> Option<u32> {
    n.attribute(name)
        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
}

fn walk(
    node: &roxmltree::Node,
    parent: PciParent,
    host_bridge: &str,
    numa: Option<u32>,
    cpus: &CpuList,
    bridges: &mut Vec<(Bdf, PciParent, String, PcieLink)>,
    devices: &mut Vec<Dev>,
) -> Result<(), String> {
    let bdf = busid(node)?;
    let class_id = hex_attr(node, "class").unwrap_or(0);
    let pci_id = format!(
        "{:04x}:{:04x}",
        hex_attr(node, "vendor").unwrap_or(0),
        hex_attr(node, "device").unwrap_or(0)
    );
    let child_pcis: Vec<roxmltree::Node> = node.children().filter(|c| c.has_tag_name("pci")).collect();
    if class_id >> 8 == u32::from(class::PCI_BRIDGE) || !child_pcis.is_empty() {
        bridges.push((bdf, parent, pci_id, link_of(node)));
        for c in child_pcis {
            walk(&c, PciParent::Bridge(bdf), host_bridge, numa, cpus, bridges, devices)?;
        }
        return Ok(());
    }
    let gpu = node.children().find(|c| c.has_tag_name("gpu"));
    let nvlinks = gpu
        .iter()
        .flat_map(|g| g.children().filter(|c| c.has_tag_name("nvlink")))
        .filter_map(|l| {
            Some((
                l.attribute("target")?.parse::<Bdf>().ok()?,
                l.attribute("count")?.parse().ok()?,
                l.attribute("tclass").unwrap_or("").to_string(),
            ))
        })
        .collect();
    let net_name = node
        .descendants()
        .find(|c| c.has_tag_name("net"))
        .and_then(|n| n.attribute("name"))
        .map(str::to_string);
    devices.push(Dev {
        placement: PciPlacement {
            bdf,
            pci_id,
            class: format!("0x{class_id:06x}"),
            parent,
            host_bridge: host_bridge.to_string(),
            numa_node: numa,
            numa_affinity: Vec::new(),
            cpu_affinity: cpus.clone(),
            pcie: link_of(node),
        },
        class: class_id,
        gpu_dev: gpu.and_then(|g| g.attribute("dev")).and_then(|d| d.parse().ok()),
        sm: gpu.and_then(|g| g.attribute("sm")).and_then(|s| s.parse().ok()),
        nvlinks,
        net_name,
    });
    Ok(())
}
