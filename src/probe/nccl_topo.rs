//! A NodeSnapshot from an NCCL topology file (the `NCCL_TOPO_FILE` / `NCCL_TOPO_DUMP_FILE`
//! dialect, docs/references.md): `system > cpu > {pci (> pci)* > {gpu > nvlink*, nic > net*}, nic}`.
//!
//! Only what the file says: a PCI id, a GPU model or a CPU count it does not give stays
//! unknown. NCCL folds a PCIe switch into one `<pci class="0x060400">` with the endpoints right
//! below it; each top-level `<pci>` of a `<cpu>` is taken as its own root complex (host
//! bridge), so two of them on one CPU read NODE, as `nvidia-smi` shows separate root complexes.
//! A `<nic>` holds one `<net>` per port; a `<nic>` may also hang straight off a `<cpu>` (a NIC
//! with no PCI path). RCCL's dialect (AMD GPUs) is refused, not guessed.

use super::xml::nesting_exceeds;
use crate::model::gpu_parts;
use crate::model::pci::{class, gen_from_speed, Bdf};
use crate::model::snapshot::*;
use crate::model::{CpuList, PcieLink};
use std::collections::HashSet;
use std::path::Path;

/// What makes a part of the file unreadable (its path is added where the file is named).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Malformed(String);

impl From<String> for Malformed {
    fn from(m: String) -> Self {
        Malformed(m)
    }
}

impl From<&str> for Malformed {
    fn from(m: &str) -> Self {
        Malformed(m.to_string())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: not a usable NCCL topology file: {reason}")]
pub(crate) struct NcclTopoError {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// The most NVLinks one `<nvlink>` element may claim (a GPU has 18 at most today).
const MAX_LINK_COUNT: u32 = 64;
/// Deeper than any real topology (a PCI tree is a dozen levels).
const MAX_DEPTH: usize = 256;

pub(crate) fn snapshot_from_text(text: &str, origin: &Path, hostname: &str) -> Result<NodeSnapshot, NcclTopoError> {
    let bad = |reason: String| NcclTopoError {
        path: origin.display().to_string(),
        reason,
    };
    if text.contains("<!ENTITY") {
        return Err(bad("entity declarations: refused (NCCL writes none)".into()));
    }
    if nesting_exceeds(text, MAX_DEPTH) {
        return Err(bad(format!("elements nested more than {MAX_DEPTH} deep: refused")));
    }
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: 10_000_000,
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|e| bad(e.to_string()))?;
    let gpus = doc.descendants().filter(|n| n.has_tag_name("gpu")).count();
    if gpus > crate::model::snapshot_check::MAX_GPUS {
        return Err(bad(format!(
            "{gpus} GPUs, more than the {} one node may have: refused",
            crate::model::snapshot_check::MAX_GPUS
        )));
    }
    let system = doc.root_element();
    match system.tag_name().name() {
        "system" => {}
        "graphs" => {
            return Err(bad(
                "this is an NCCL graph file (NCCL_GRAPH_FILE: rings and trees over GPUs), not a topology: it describes no hardware".into(),
            ))
        }
        "topology" => return Err(bad("this is an hwloc export: read it as one (`--from-hwloc-xml`)".into())),
        other => return Err(bad(format!("root element is <{other}>, expected <system version=\"1\">"))),
    }
    // RCCL's files carry other versions: say what the file is before what is wrong with it.
    refuse_rccl(&doc).map_err(|m| bad(m.0))?;
    if system.attribute("version") != Some("1") {
        return Err(bad("<system> must carry version=\"1\" (NCCL refuses any other)".into()));
    }
    let mut b = Builder::default();
    for cpu in system.children().filter(|n| n.has_tag_name("cpu")) {
        b.cpu(&cpu).map_err(|m| bad(m.0))?;
    }
    Ok(b.finish(origin, hostname))
}

/// RCCL writes the same dialect for AMD GPUs (`gcn=` on `<gpu>`, `<xgmi>` links, display or
/// accelerator classes with AMD's vendor id): topo-tune plans NCCL on NVIDIA GPUs only, and a
/// guess would be worse than a refusal.
fn refuse_rccl(doc: &roxmltree::Document) -> Result<(), Malformed> {
    for n in doc.descendants().filter(|n| n.is_element()) {
        let amd_class = n.has_tag_name("pci")
            && n.attribute("vendor").is_some_and(|v| v.eq_ignore_ascii_case("0x1002"))
            && n.attribute("class")
                .is_some_and(|c| c.starts_with("0x03") || c.starts_with("0x12"));
        let seen = if let Some(gcn) = n.attribute("gcn") {
            format!("<gpu gcn=\"{gcn}\">")
        } else if n.has_tag_name("xgmi") {
            "<xgmi> links".to_string()
        } else if amd_class {
            "an AMD GPU function".to_string()
        } else {
            continue;
        };
        return Err(Malformed(format!(
            "an RCCL topology file ({seen}): topo-tune plans NCCL on NVIDIA GPUs and does not read AMD GPUs or their xGMI fabric; nothing was guessed"
        )));
    }
    Ok(())
}

/// One endpoint under a `<pci>` tree, before it becomes a GPU or NICs.
struct Endpoint<'a, 'i> {
    node: roxmltree::Node<'a, 'i>,
    placement: PciPlacement,
    class: u32,
}

/// What the `<cpu>` elements hold, gathered before it becomes a snapshot.
#[derive(Default)]
struct Builder {
    numa_nodes: Vec<NumaNode>,
    host_bridges: Vec<HostBridge>,
    bridges: Vec<(Bdf, PciParent, Option<String>, PcieLink)>,
    gpus: Vec<Gpu>,
    nics: Vec<Nic>,
    nvswitches: Vec<Bdf>,
    seen: HashSet<Bdf>,
    architecture: Option<String>,
    affinity_known: bool,
    notes: Vec<Note>,
    /// Some GPU's NVLinks reach an NVSwitch the file cannot show (NCCL's placeholder).
    hidden_switch: bool,
    /// Devices read from fused `<net>` names, and those names.
    fused_parts: HashSet<String>,
    fused_names: Vec<String>,
}

impl Builder {
    /// One `<cpu>`: its NUMA node, each top-level `<pci>` as its own root complex, and any NIC
    /// hanging straight off it.
    fn cpu(&mut self, cpu: &roxmltree::Node) -> Result<(), Malformed> {
        let numaid: i64 = cpu
            .attribute("numaid")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Malformed("<cpu> without a numeric numaid".to_string()))?;
        let numa = u32::try_from(numaid).ok();
        let cpus = match cpu.attribute("affinity") {
            Some(a) => {
                self.affinity_known = true;
                CpuList::parse_mask(a).map_err(|e| e.to_string())?
            }
            None => CpuList::new(),
        };
        if self.architecture.is_none() {
            self.architecture = cpu
                .attribute("arch")
                .filter(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .map(str::to_string);
        }
        if let Some(id) = numa {
            self.numa_nodes.push(NumaNode {
                id,
                cpus: cpus.clone(),
                memory_bytes: None,
            });
        }
        for child in cpu.children().filter(|n| n.is_element()) {
            if child.has_tag_name("pci") {
                self.root_complex(&child, numaid, numa, &cpus)?;
            } else if child.has_tag_name("nic") {
                self.cpu_nic(&child, numaid)?;
            }
        }
        Ok(())
    }

    fn root_complex(
        &mut self,
        top: &roxmltree::Node,
        numaid: i64,
        numa: Option<u32>,
        cpus: &CpuList,
    ) -> Result<(), Malformed> {
        let bdf = busid(top)?;
        // Bus ids like Azure's `ffff:ff:01.0` repeat across CPUs, so the CPU is in the name.
        let hb = format!("root-{bdf}@cpu{numaid}");
        if !self.host_bridges.iter().any(|h| h.id == hb) {
            self.host_bridges.push(HostBridge {
                id: hb.clone(),
                domain: bdf.domain,
                first_bus: bdf.bus,
                last_bus: bdf.bus,
                numa_node: numa,
                cpus: cpus.clone(),
            });
        }
        // Depth first with an explicit stack: a deep file cannot exhaust ours.
        let mut stack = vec![(*top, PciParent::HostBridge(hb.clone()))];
        while let Some((node, parent)) = stack.pop() {
            let bdf = busid(&node)?;
            if !self.seen.insert(bdf) {
                return Err(Malformed(format!("bus id {bdf} appears twice")));
            }
            let class_id = hex_attr(&node, "class").unwrap_or(0);
            let children: Vec<roxmltree::Node> = node.children().filter(|c| c.has_tag_name("pci")).collect();
            if class_id >> 8 == u32::from(class::PCI_BRIDGE) || !children.is_empty() {
                self.bridges.push((bdf, parent, pci_id(&node), link_of(&node)));
                stack.extend(children.into_iter().rev().map(|c| (c, PciParent::Bridge(bdf))));
                continue;
            }
            let placement = PciPlacement {
                bdf,
                pci_id: pci_id(&node),
                class: format!("0x{class_id:06x}"),
                parent,
                host_bridge: hb.clone(),
                numa_node: numa,
                numa_affinity: Vec::new(),
                cpu_affinity: cpus.clone(),
                pcie: link_of(&node),
            };
            self.endpoint(Endpoint {
                node,
                placement,
                class: class_id,
            })?;
        }
        Ok(())
    }

    fn endpoint(&mut self, e: Endpoint) -> Result<(), Malformed> {
        let is_nic = e.node.children().any(|c| c.has_tag_name("nic"));
        match e.class >> 16 {
            _ if e.class >> 8 == 0x0680 => self.nvswitches.push(e.placement.bdf),
            0x03 => self.gpu(&e)?,
            0x02 => self.pci_nics(&e)?,
            _ if is_nic => self.pci_nics(&e)?,
            _ => {}
        }
        Ok(())
    }

    fn gpu(&mut self, e: &Endpoint) -> Result<(), Malformed> {
        let gpu = e.node.children().find(|c| c.has_tag_name("gpu"));
        let sm: Option<u32> = gpu.and_then(|g| g.attribute("sm")).and_then(|s| s.parse().ok());
        let bdf = e.placement.bdf;
        let mut links = Vec::new();
        for l in gpu
            .iter()
            .flat_map(|g| g.children().filter(|c| c.has_tag_name("nvlink")))
        {
            let tclass = l.attribute("tclass").unwrap_or("").to_string();
            let target = nvlink_target(l.attribute("target").ok_or("<nvlink> without a target")?, &tclass)?;
            let count: u32 = l
                .attribute("count")
                .and_then(|c| c.parse().ok())
                .filter(|c| (1..=MAX_LINK_COUNT).contains(c))
                .ok_or_else(|| Malformed(format!("<nvlink> of GPU {bdf}: count must be 1 to {MAX_LINK_COUNT}")))?;
            if target == Some(bdf) {
                self.notes.push(Note::info(
                    "self-nvlink-ignored",
                    format!("GPU {bdf} lists an NVLink to itself: ignored"),
                ));
                continue;
            }
            if target.is_none() {
                self.hidden_switch = true;
            }
            links.push((target, count, tclass));
        }
        let c2c = gpu
            .and_then(|g| g.children().find(|c| c.has_tag_name("c2c")))
            .map(|c| c2c_of(&c, bdf))
            .transpose()?;
        let index = gpu
            .and_then(|g| g.attribute("dev"))
            .and_then(|d| d.parse().ok())
            .unwrap_or(self.gpus.len() as u32);
        self.gpus.push(Gpu {
            index,
            name: gpu_name(e.placement.pci_id.as_deref(), sm),
            uuid: None,
            placement: e.placement.clone(),
            compute_capability: sm.map(|sm| format!("{}.{}", sm / 10, sm % 10)),
            // `<gpu>` without `<nvlink>` does not say "no NVLink" (files are often stripped).
            nvlink_source: (!links.is_empty()).then_some(NvlinkSource::NcclFile),
            nvlink_speed_mbps: None,
            nvlinks: (!links.is_empty()).then(|| nvlinks(&links, sm)),
            c2c,
            fabric: None,
            health: None,
            source: GpuSource::Pci,
        });
        Ok(())
    }

    /// The NICs of one PCI function: one per distinct `<net name>`, each with its ports.
    fn pci_nics(&mut self, e: &Endpoint) -> Result<(), Malformed> {
        let nets = nets_of(&e.node)?;
        if nets.is_empty() {
            self.nics.push(unnamed_nic(&e.placement, e.class));
            return Ok(());
        }
        for n in group_by_name(nets, &mut self.notes) {
            self.fused(&n);
            self.nics.push(nic_of(n, Some(e.placement.clone()), e.class));
        }
        Ok(())
    }

    /// Remember a device read from a fused one: the file may list the device itself too.
    fn fused(&mut self, n: &NamedNic) {
        if let Some(f) = &n.fused {
            self.fused_parts.insert(n.name.clone());
            if !self.fused_names.contains(f) {
                self.fused_names.push(f.clone());
            }
        }
    }

    /// A device both fused and listed on its own is the one listed on its own.
    fn drop_fused_duplicates(&mut self) {
        let fused = std::mem::take(&mut self.fused_parts);
        let mut kept: Vec<Nic> = Vec::new();
        for nic in std::mem::take(&mut self.nics) {
            let from_fused = fused.contains(&nic.name);
            match kept.iter().position(|k| k.name == nic.name) {
                Some(_) if from_fused => {}
                Some(i) => kept[i] = nic,
                None => kept.push(nic),
            }
        }
        self.nics = kept;
        for f in std::mem::take(&mut self.fused_names) {
            self.notes.push(Note::info(
                "fused-nic",
                format!(
                    "NCCL fused {f} (NCCL_IB_MERGE_NICS): read as its devices {}",
                    f.split('+').collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }

    /// A `<nic>` straight under a `<cpu>`: no PCI path, so no distance to the GPUs either.
    fn cpu_nic(&mut self, nic: &roxmltree::Node, numaid: i64) -> Result<(), Malformed> {
        let nets = nets_in(nic)?;
        for n in group_by_name(nets, &mut self.notes) {
            self.fused(&n);
            self.notes.push(Note::info(
                "nic-without-pci",
                format!(
                    "{} hangs off CPU {numaid} with no PCI path (a virtual or unknown-bus NIC): its distance to the GPUs is unknown",
                    n.name
                ),
            ));
            self.nics.push(nic_of(n, None, 0));
        }
        Ok(())
    }

    fn finish(mut self, origin: &Path, hostname: &str) -> NodeSnapshot {
        self.drop_fused_duplicates();
        self.numa_nodes.sort_by_key(|n| n.id);
        for p in self
            .gpus
            .iter_mut()
            .map(|g| &mut g.placement)
            .chain(self.nics.iter_mut().filter_map(|n| n.pci.as_mut()))
        {
            p.numa_affinity = numa_affinity(&self.numa_nodes, &p.cpu_affinity);
        }
        self.gpus.sort_by_key(|g| g.index);
        let pci = self.pci_topology();
        let notes = self.notes_for(&pci);
        let all_cpus = self.numa_nodes.iter().fold(CpuList::new(), |acc, n| acc.union(&n.cpus));
        NodeSnapshot {
            schema_version: SCHEMA_VERSION,
            hostname: hostname.to_string(),
            source: SnapshotSource {
                kind: SourceKind::NcclTopo,
                path: Some(origin.display().to_string()),
            },
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            machine: MachineInfo {
                architecture: self.architecture.clone(),
                ..MachineInfo::default()
            },
            // The file lists NUMA nodes, not sockets or cores.
            cpu: CpuSummary {
                packages: None,
                cores: None,
                pus: self.affinity_known.then_some(all_cpus.len() as u32),
                cpus: all_cpus,
            },
            numa_nodes: self.numa_nodes,
            pci,
            gpus: self.gpus,
            nics: self.nics,
            nccl_version: None,
            nvlink_domain: None,
            notes,
        }
    }

    /// NCCL folds each switch's upstream and downstream ports into one `<pci>`: every bridge
    /// there is a switch.
    fn pci_topology(&self) -> PciTopology {
        let switches = self
            .bridges
            .iter()
            .map(|(b, parent, id, _)| PciSwitch {
                upstream: *b,
                downstream_ports: Vec::new(),
                host_bridge: host_of(parent, &self.bridges),
                pci_id: id.clone(),
            })
            .collect();
        let bridges = self
            .bridges
            .iter()
            .map(|(b, parent, id, link)| {
                let (vendor, device) = id
                    .as_deref()
                    .and_then(|i| i.split_once(':'))
                    .map_or((String::new(), String::new()), |(v, d)| (v.to_string(), d.to_string()));
                PciBridge {
                    bdf: *b,
                    parent: parent.clone(),
                    role: BridgeRole::SwitchUpstream,
                    vendor_id: vendor,
                    device_id: device,
                    secondary_bus: 0,
                    subordinate_bus: 0,
                    link: link.clone(),
                }
            })
            .collect();
        let exposed = self
            .gpus
            .iter()
            .map(|g| &g.placement)
            .chain(self.nics.iter().filter_map(|n| n.pci.as_ref()))
            .any(|p| matches!(p.parent, PciParent::HostBridge(_)));
        PciTopology {
            host_bridges: self.host_bridges.clone(),
            bridges,
            switches,
            switches_visible: !exposed,
            nvswitches: self.nvswitches.clone(),
        }
    }

    fn notes_for(&mut self, pci: &PciTopology) -> Vec<Note> {
        let mut notes = vec![Note::info(
            "described-by-nccl-file",
            "snapshot made from an NCCL topology file: UUIDs, IRQs, port states and link layers are unknown",
        )];
        if self.gpus.iter().any(|g| g.nvlinks.is_none()) {
            notes.push(Note::info(
                "nvlink-unknown",
                "the file lists no <nvlink> for some GPUs: their NVLink is unknown",
            ));
        }
        if self.hidden_switch {
            notes.push(Note::info(
                "nvswitch-hidden",
                "some GPUs' NVLinks reach an NVSwitch the file cannot show (a VM, or NVLink Switch trays): read as links to an NVSwitch fabric",
            ));
        }
        if !pci.switches_visible {
            notes.push(Note::info(
                "switches-not-visible",
                "switches not visible: some GPUs or NICs sit straight under a CPU in the NCCL topology file",
            ));
        }
        if self.gpus.is_empty() {
            notes.push(Note::info(
                "no-gpu",
                "the NCCL topology file lists no GPU (class 0x03xxxx)",
            ));
        }
        notes.append(&mut self.notes);
        notes
    }
}

/// One `<net>`: a port of an RDMA device, or a socket interface.
struct Net {
    name: String,
    port: u32,
    /// Mb/s as the file says (NCCL reads ≤ 0 as 10000).
    speed_mbps: i64,
    /// The fused device (`mlx5_0+mlx5_1`) this port was read from, if any.
    fused: Option<String>,
}

/// The most devices NCCL fuses into one (`NCCL_NET_MAX_DEVS_PER_NIC`: 4 in net v11; more
/// would be a file NCCL did not write).
const MAX_FUSED: usize = 16;

fn nets_of(pci: &roxmltree::Node) -> Result<Vec<Net>, Malformed> {
    let mut out = Vec::new();
    for nic in pci.children().filter(|c| c.has_tag_name("nic")) {
        out.extend(nets_in(&nic)?);
    }
    Ok(out)
}

/// The `<net>` ports of one `<nic>`. A fused device (NCCL ≥ 2.21 merges the ports of a
/// multi-port NIC, `NCCL_IB_MERGE_NICS`, and names the result `mlx5_0+mlx5_1`) is read as
/// its devices, each with an equal share of the fused speed.
fn nets_in(nic: &roxmltree::Node) -> Result<Vec<Net>, Malformed> {
    let mut out = Vec::new();
    for n in nic.children().filter(|c| c.has_tag_name("net")) {
        let name = n.attribute("name").ok_or("<net> without a name")?;
        let port = n.attribute("port").and_then(|p| p.parse().ok()).unwrap_or(1);
        let speed_mbps: i64 = n.attribute("speed").and_then(|s| s.parse().ok()).unwrap_or(0);
        if !name.contains('+') {
            out.push(Net {
                name: name.to_string(),
                port,
                speed_mbps,
                fused: None,
            });
            continue;
        }
        let parts: Vec<&str> = name.split('+').collect();
        if parts.len() > MAX_FUSED || parts.iter().any(|p| p.is_empty()) {
            return Err(Malformed(format!(
                "<net name={:?}>: a fused device is 2 to {MAX_FUSED} device names joined by `+`",
                name.escape_default().to_string()
            )));
        }
        for part in &parts {
            out.push(Net {
                name: part.to_string(),
                port,
                speed_mbps: speed_mbps / parts.len() as i64,
                fused: Some(name.to_string()),
            });
        }
    }
    Ok(out)
}

/// One device name with its ports, in file order.
struct NamedNic {
    name: String,
    ports: Vec<(u32, f64)>,
    fused: Option<String>,
}

fn group_by_name(nets: Vec<Net>, notes: &mut Vec<Note>) -> Vec<NamedNic> {
    let mut out: Vec<NamedNic> = Vec::new();
    for n in nets {
        let gbps = if n.speed_mbps > 0 {
            n.speed_mbps as f64 / 1000.0
        } else {
            notes.push(Note::info(
                "net-speed-default",
                format!("{} port {} gives no speed: NCCL assumes 10 Gb/s", n.name, n.port),
            ));
            10.0
        };
        match out.iter_mut().find(|x| x.name == n.name) {
            Some(x) if !x.ports.iter().any(|(p, _)| *p == n.port) => x.ports.push((n.port, gbps)),
            Some(_) => {}
            None => out.push(NamedNic {
                name: n.name,
                ports: vec![(n.port, gbps)],
                fused: n.fused,
            }),
        }
    }
    out
}

/// Verbs or plugin devices by name; anything else NCCL lists (e.g. `eth0`) is a socket.
fn rdma_name(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "mlx", "rdmap", "efa", "bnxt_re", "irdma", "hfi1", "qedr", "erdma", "rocep", "ibp", "cxgb", "ionic",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A function that is RDMA whatever its name: an InfiniBand controller, or a Mellanox or EFA
/// device.
fn rdma_function(class_id: u32, pci_id: Option<&str>) -> bool {
    class_id >> 8 == 0x0207 || pci_id.is_some_and(|id| id.starts_with("15b3:") || id.starts_with("1d0f:"))
}

fn nic_of(n: NamedNic, pci: Option<PciPlacement>, class_id: u32) -> Nic {
    let rdma = rdma_name(&n.name) || rdma_function(class_id, pci.as_ref().and_then(|p| p.pci_id.as_deref()));
    if !rdma {
        let speed = n.ports.first().map(|(_, gb)| (gb * 1000.0) as u64);
        return Nic {
            netdevs: vec![Netdev {
                name: n.name.clone(),
                operstate: None,
                speed_mbps: speed,
                mtu: None,
            }],
            name: n.name,
            kind: NicKind::Ethernet,
            pci,
            rdma: None,
            driver: None,
            irqs: Vec::new(),
        };
    }
    let ports = n
        .ports
        .iter()
        .map(|(port, gbps)| RdmaPort {
            port: *port,
            state: None,
            state_code: None,
            rate: Some(format!("{gbps} Gb/sec (NCCL topology file)")),
            rate_gbps: Some(*gbps),
            link_layer: LinkLayer::Unknown,
            roce_v2_gid_indexes: Vec::new(),
            netdev: None,
        })
        .collect();
    Nic {
        name: n.name.clone(),
        kind: NicKind::Rdma,
        pci,
        rdma: Some(RdmaDevice { device: n.name, ports }),
        netdevs: Vec::new(),
        driver: None,
        irqs: Vec::new(),
    }
}

/// A NIC function the file names by bus id only (no `<nic>`/`<net>`): RDMA only when its class
/// or vendor says so, else a plain Ethernet function.
fn unnamed_nic(p: &PciPlacement, class_id: u32) -> Nic {
    let name = p.bdf.to_string();
    let rdma = rdma_function(class_id, p.pci_id.as_deref());
    Nic {
        name: name.clone(),
        kind: if rdma { NicKind::Rdma } else { NicKind::Ethernet },
        pci: Some(p.clone()),
        rdma: rdma.then(|| RdmaDevice {
            device: name,
            ports: Vec::new(),
        }),
        netdevs: Vec::new(),
        driver: None,
        irqs: Vec::new(),
    }
}

/// What a GPU is called when all the file says is its ids (if any) and SM.
fn gpu_name(pci_id: Option<&str>, sm: Option<u32>) -> String {
    match (pci_id, sm) {
        (Some(id), _) if gpu_parts::by_pci_id(id).is_some() => {
            format!("NVIDIA {}", gpu_parts::by_pci_id(id).map_or("", |p| p.name))
        }
        (Some(id), _) if id.starts_with("10de:") => format!("NVIDIA GPU {id}"),
        (Some(id), _) => format!("GPU {id}"),
        (None, Some(sm)) => format!("NVIDIA GPU (sm_{sm}; model not in the file)"),
        (None, None) => "GPU (model not in the file)".to_string(),
    }
}

/// NCCL's stand-in for an NVLink peer it cannot see (xml.cc: "Remote NVLink device is not
/// visible inside this VM. Assume NVSwitch.").
const HIDDEN_PEER: &str = "fffffff:ffff:ff";

/// An `<nvlink target>`: a bus id, or `None` for an NVSwitch the machine cannot see — NCCL's
/// placeholder, or any id that is not one when the class says NVSwitch (`0x068000`), as NCCL
/// writes for NVSwitches hidden from a VM.
fn nvlink_target(target: &str, tclass: &str) -> Result<Option<Bdf>, Malformed> {
    if let Ok(b) = target.parse::<Bdf>() {
        return Ok(Some(b));
    }
    let id_like = !target.is_empty()
        && target.len() <= 32
        && target.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    if id_like && (target.eq_ignore_ascii_case(HIDDEN_PEER) || tclass.starts_with("0x0680")) {
        return Ok(None);
    }
    Err(Malformed(format!(
        "<nvlink target={:?}>: not a PCI bus id (NCCL writes another id only for an NVSwitch it cannot see, with tclass=\"0x068000\")",
        target.escape_default().to_string()
    )))
}

/// `<c2c count bw>`: NVLink-C2C links to the CPU, `bw` in MB/s per link (NCCL reads
/// `NVML_FI_DEV_C2C_LINK_GET_MAX_BW`).
fn c2c_of(c: &roxmltree::Node, gpu: Bdf) -> Result<C2cLink, Malformed> {
    let links: u32 = c
        .attribute("count")
        .and_then(|v| v.parse().ok())
        .filter(|v| (1..=MAX_LINK_COUNT).contains(v))
        .ok_or_else(|| Malformed(format!("<c2c> of GPU {gpu}: count must be 1 to {MAX_LINK_COUNT}")))?;
    let bw = match c.attribute("bw") {
        None => None,
        Some(v) => Some(
            v.parse::<u32>()
                .ok()
                .filter(|b| (1..=10_000_000).contains(b))
                .ok_or_else(|| Malformed(format!("<c2c> of GPU {gpu}: bw must be MB/s, 1 to 10000000")))?,
        ),
    };
    Ok(C2cLink {
        links,
        gbps_per_link: bw.map(|b| f64::from(b) / 1000.0),
    })
}

/// NVLinks from `(target, count, tclass)`: to a GPU of this node, else to a switch (a hidden
/// one has no bus id).
fn nvlinks(links: &[(Option<Bdf>, u32, String)], sm: Option<u32>) -> Vec<NvLink> {
    let mut out = Vec::new();
    for (target, count, tclass) in links {
        let remote = if target.is_none() {
            NvLinkPeer::Switch
        } else if tclass.starts_with("0x03") {
            NvLinkPeer::Gpu
        } else if tclass.starts_with("0x0680") {
            NvLinkPeer::Switch
        } else {
            NvLinkPeer::Unknown
        };
        for _ in 0..*count {
            out.push(NvLink {
                link: out.len() as u32,
                active: true,
                version: None,
                remote_bdf: *target,
                remote,
                bandwidth_gbps: sm.and_then(|sm| crate::model::topo_h::nvlink_gbps((sm / 10) as i32, (sm % 10) as i32)),
            });
        }
    }
    out
}

fn host_of(parent: &PciParent, bridges: &[(Bdf, PciParent, Option<String>, PcieLink)]) -> String {
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

fn busid(n: &roxmltree::Node) -> Result<Bdf, Malformed> {
    let id = n.attribute("busid").ok_or("<pci> without busid")?;
    id.parse::<Bdf>().map_err(|e| Malformed(e.to_string()))
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

/// `vendor:device` when the file gives both (zeros, as Azure writes for synthetic bridges,
/// are no ids).
fn pci_id(n: &roxmltree::Node) -> Option<String> {
    let vendor = hex_attr(n, "vendor").filter(|v| *v != 0 && *v <= 0xffff)?;
    let device = hex_attr(n, "device").filter(|d| *d != 0 && *d <= 0xffff)?;
    Some(format!("{vendor:04x}:{device:04x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_targets_are_bus_ids_or_ncclss_hidden_switch() {
        assert_eq!(
            nvlink_target("0000:07:00.0", "0x068000").unwrap(),
            Some("0000:07:00.0".parse().unwrap())
        );
        assert_eq!(
            nvlink_target("fffffff:ffff:ff", "").unwrap(),
            None,
            "NCCL's placeholder"
        );
        assert_eq!(
            nvlink_target("fffffff:ff:ff.0", "0x068000").unwrap(),
            None,
            "any id the NVSwitch class marks"
        );
        assert!(
            nvlink_target("fffffff:ff:ff.0", "0x030200").is_err(),
            "a GPU needs a bus id"
        );
        assert!(nvlink_target("../etc", "0x068000").is_err());
        assert!(nvlink_target("", "0x068000").is_err());
    }
}
