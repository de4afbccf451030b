//! The never-slower guard: a node's final settings — from rules, cluster.yaml overrides or a
//! hand-edited plan — must not take away from NCCL a port it would otherwise use for GPU
//! traffic, unless a stated fact says that port carries none (`non_gpu_nics`). One check, on
//! every node's final set. Pure.
//!
//! NCCL's own matching (src/misc/utils.cc `parseStringList`/`matchIfList`, net_ib.cc): a list
//! `[^][=]name[:port],…`; `^` excludes, `=` makes names exact (else a name is a prefix: `mlx5_1`
//! also matches `mlx5_10`), a missing port matches every port; no list means every device.

use crate::graph::paths::path_classes;
use crate::model::plan::{GpuPort, PortTransport};
use crate::model::snapshot::{Nic, NicKind, NodeSnapshot};
use crate::model::{PathClass, Setting};

/// A setting that would take a GPU port away from NCCL, or that needs a fact nobody stated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} would leave out {port} ({detail}), which NCCL uses for GPU traffic by default: refused (if it carries no GPU traffic, say so in cluster.yaml: `non_gpu_nics: [{device}]`)")]
pub struct Violation {
    pub(crate) setting: String,
    pub(crate) port: String,
    pub(crate) device: String,
    pub(crate) detail: String,
}

/// NCCL's device-list syntax, parsed.
struct DeviceList {
    exclude: bool,
    exact: bool,
    items: Vec<(String, Option<u32>)>,
}

impl DeviceList {
    fn parse(value: &str) -> DeviceList {
        let (exclude, rest) = match value.strip_prefix('^') {
            Some(r) => (true, r),
            None => (false, value),
        };
        let (exact, rest) = match rest.strip_prefix('=') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let items = rest
            .split(',')
            .filter(|i| !i.is_empty())
            // `name[:port[:rail[:plane]]]`; an empty or absent port is any port
            // (src/misc/utils.cc parseStringList).
            .map(|i| {
                let mut fields = i.split(':');
                let name = fields.next().unwrap_or_default().to_string();
                (name, fields.next().and_then(|p| p.parse().ok()))
            })
            .collect();
        DeviceList { exclude, exact, items }
    }

    /// Does NCCL use this device's port under this list?
    fn allows(&self, device: &str, port: Option<u32>) -> bool {
        if self.items.is_empty() {
            return true;
        }
        let matched = self.items.iter().any(|(name, p)| {
            let name_ok = if self.exact {
                device == name
            } else {
                device.starts_with(name.as_str())
            };
            let port_ok = p.is_none() || port.is_none() || *p == port;
            name_ok && port_ok
        });
        matched != self.exclude
    }
}

/// AWS EFA: NCCL reaches it through the aws-ofi-nccl plugin, not verbs.
pub(crate) fn is_efa(n: &Nic) -> bool {
    n.driver.as_deref() == Some("efa")
        || n.name.starts_with("rdmap")
        || n.pci
            .as_ref()
            .and_then(|p| p.pci_id.as_deref())
            .is_some_and(|id| id.starts_with("1d0f:"))
}

/// The ports NCCL would use for GPU traffic on this node left to itself: for each GPU, the
/// active RDMA ports within PXB of it — or, where it has none that close, its nearest ones
/// (NCCL then uses those); on a node with no RDMA port at all, its Ethernet interfaces that
/// are up (NCCL's socket transport then carries the data).
pub fn gpu_ports(snap: &NodeSnapshot) -> Vec<GpuPort> {
    let classes = path_classes(snap);
    gpu_ports_with(snap, &classes)
}

fn active_ports(nic: &Nic) -> Vec<Option<u32>> {
    let ports = nic.rdma.as_ref().map(|r| r.ports.as_slice()).unwrap_or_default();
    if ports.is_empty() {
        return vec![None];
    }
    ports
        .iter()
        .filter(|p| p.state_code.is_none_or(|c| c == 4))
        .map(|p| Some(p.port))
        .collect()
}

/// [`gpu_ports`] from the node's path classes computed once.
pub(crate) fn gpu_ports_with(snap: &NodeSnapshot, classes: &[Vec<PathClass>]) -> Vec<GpuPort> {
    let gpus = snap.gpus.len();
    let nics: Vec<(&Nic, Vec<Option<u32>>)> = snap.matrix_nics().map(|n| (n, active_ports(n))).collect();
    // For each GPU, how far NCCL reaches for a NIC: PXB, or its nearest active one if farther.
    let reach: Vec<Option<PathClass>> = (0..gpus)
        .map(|g| {
            let nearest = (0..nics.len())
                .filter(|&i| !nics[i].1.is_empty())
                .map(|i| classes[g][gpus + i])
                .min();
            nearest.map(|c| c.max(PathClass::Pxb))
        })
        .collect();
    let mut out = Vec::new();
    for (i, (nic, ports)) in nics.iter().enumerate() {
        let used = (0..gpus)
            .filter(|&g| reach[g].is_some_and(|r| classes[g][gpus + i] <= r))
            .map(|g| classes[g][gpus + i])
            .min();
        let Some(near) = used else {
            continue;
        };
        let transport = if is_efa(nic) {
            PortTransport::Efa
        } else {
            PortTransport::Verbs
        };
        out.extend(ports.iter().map(|&p| GpuPort::new(&nic.name, p, transport, near)));
    }
    if snap.nics.iter().all(|n| n.kind != NicKind::Rdma) {
        let up = snap
            .nics
            .iter()
            .flat_map(|n| n.netdevs.iter())
            .filter(|d| d.operstate.as_deref() == Some("up"));
        out.extend(up.map(|d| GpuPort::socket(&d.name)));
    }
    out
}

/// Is the port named (as `dev` or `dev:port`) in cluster.yaml's `non_gpu_nics`?
fn stated_non_gpu(port: &GpuPort, non_gpu: &[String]) -> bool {
    non_gpu.iter().any(|n| match n.split_once(':') {
        Some((dev, p)) => dev == port.device && p.parse::<u32>().ok() == port.port,
        None => n == &port.device,
    })
}

fn setting<'a>(settings: &'a [Setting], name: &str) -> Option<&'a Setting> {
    settings.iter().find(|s| s.name == name)
}

/// Check a node's final settings against the ports NCCL would use by itself.
pub fn check(
    settings: &[Setting],
    ports: &[GpuPort],
    non_gpu: &[String],
    rails_stated: bool,
    topology_xml: Option<&str>,
) -> Result<(), Violation> {
    let guarded = ports.iter().filter(|p| !stated_non_gpu(p, non_gpu));
    for port in guarded {
        let name = match port.transport {
            PortTransport::Verbs => "NCCL_IB_HCA",
            PortTransport::Socket => "NCCL_SOCKET_IFNAME",
            // EFA goes through the aws-ofi-nccl plugin: no NCCL_* list narrows it.
            PortTransport::Efa => continue,
        };
        if let Some(s) = setting(settings, name) {
            if !DeviceList::parse(&s.value).allows(&port.device, port.port) {
                return Err(violation(s, port));
            }
        }
        if let Some(xml) = topology_xml.filter(|x| x.contains("<net ")) {
            if !xml.contains(&format!("name=\"{}\"", port.device)) {
                return Err(Violation {
                    setting: "NCCL_TOPO_FILE (its <net> list)".into(),
                    port: port.label(),
                    device: port.device.clone(),
                    detail: port.nearest.clone(),
                });
            }
        }
    }
    match setting(settings, "NCCL_CROSS_NIC") {
        Some(s) if s.value == "0" && !rails_stated => Err(Violation {
            setting: "NCCL_CROSS_NIC=0".into(),
            port: "every port".into(),
            device: "…".into(),
            detail: "it forbids rings that change NIC between nodes, which only a rail-optimised fabric (`fabric.rails`) makes right".into(),
        }),
        _ => Ok(()),
    }
}

/// What the NVLink edition of the guard protects on a node: NVLink between its GPUs (known
/// or assumed by the plan) and the multi-node NVLink domain it is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvlinkGuard {
    pub nvlink: bool,
    pub domain: Option<String>,
}

/// A setting that would silently take NVLink, or multi-node NVLink, away from NCCL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: refused", self.describe())]
pub struct NvlinkViolation {
    pub(crate) setting: String,
    pub(crate) effect: &'static str,
    pub(crate) fact: String,
}

impl NvlinkViolation {
    /// What the setting does, and where that matters.
    pub(crate) fn describe(&self) -> String {
        format!("{} {} on a node where {}", self.setting, self.effect, self.fact)
    }
}

/// The settings NCCL reads as "no NVLink" (`NCCL_P2P_DISABLE=1`, `NCCL_P2P_LEVEL=LOC`: P2P
/// level 0, which also gates multi-node NVLink in init.cc) or "no multi-node NVLink"
/// (`NCCL_CUMEM_ENABLE=0`, `NCCL_MNNVL_ENABLE=0`, src/mnnvl.cc), each with its effect and the
/// fact it needs to matter; empty where none applies.
pub(crate) fn nvlink_killers(settings: &[(String, String)], g: &NvlinkGuard) -> Vec<NvlinkViolation> {
    let mut out = Vec::new();
    let nvlink_fact = || match &g.domain {
        Some(d) => format!("the GPUs are in NVLink domain {d}"),
        None => "the GPUs are joined by NVLink".to_string(),
    };
    for (name, value) in settings {
        let v = value.trim();
        let hit = match name.as_str() {
            "NCCL_P2P_DISABLE" if v == "1" && (g.nvlink || g.domain.is_some()) => Some((
                "turns NVLink (CUDA P2P) off, and multi-node NVLink with it",
                nvlink_fact(),
            )),
            "NCCL_P2P_LEVEL" if matches!(v, "LOC" | "0") && (g.nvlink || g.domain.is_some()) => Some((
                "keeps P2P inside each GPU: NVLink unused, multi-node NVLink off",
                nvlink_fact(),
            )),
            "NCCL_CUMEM_ENABLE" if v == "0" => g.domain.as_ref().map(|d| {
                (
                    "turns cuMem off, which multi-node NVLink needs",
                    format!("the GPUs are in NVLink domain {d}"),
                )
            }),
            "NCCL_MNNVL_ENABLE" if v == "0" => g.domain.as_ref().map(|d| {
                (
                    "turns multi-node NVLink off",
                    format!("the GPUs are in NVLink domain {d}"),
                )
            }),
            _ => None,
        };
        if let Some((effect, fact)) = hit {
            out.push(NvlinkViolation {
                setting: format!("{name}={value}"),
                effect,
                fact,
            });
        }
    }
    out
}

/// The NVLink edition of the guard, on the settings topo-tune writes: none may turn NVLink
/// or multi-node NVLink off where the node has them, and a topology file may not list
/// `<nvlink>` (NCCL then skips the driver's NVLink detection for those GPUs; topo-tune's
/// files never list them).
pub fn check_nvlink(settings: &[Setting], g: &NvlinkGuard, topology_xml: Option<&str>) -> Result<(), NvlinkViolation> {
    let pairs: Vec<(String, String)> = settings.iter().map(|s| (s.name.clone(), s.value.clone())).collect();
    if let Some(v) = nvlink_killers(&pairs, g).into_iter().next() {
        return Err(v);
    }
    if (g.nvlink || g.domain.is_some()) && topology_xml.is_some_and(|x| x.contains("<nvlink")) {
        return Err(NvlinkViolation {
            setting: "NCCL_TOPO_FILE (its <nvlink> elements)".into(),
            effect: "replaces the driver's NVLink detection with the file's links",
            fact: match &g.domain {
                Some(d) => format!("the GPUs are in NVLink domain {d}"),
                None => "the GPUs are joined by NVLink".to_string(),
            },
        });
    }
    Ok(())
}

fn violation(s: &Setting, port: &GpuPort) -> Violation {
    Violation {
        setting: format!("{}={}", s.name, s.value),
        port: port.label(),
        device: port.device.clone(),
        detail: port.nearest.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_matching_as_nccl_does_it() {
        let l = DeviceList::parse("mlx5_1");
        assert!(l.allows("mlx5_1", Some(1)) && l.allows("mlx5_10", Some(1)), "a prefix");
        let l = DeviceList::parse("=mlx5_1");
        assert!(l.allows("mlx5_1", Some(2)) && !l.allows("mlx5_10", Some(1)), "exact");
        let l = DeviceList::parse("=mlx5_0:1");
        assert!(l.allows("mlx5_0", Some(1)) && !l.allows("mlx5_0", Some(2)), "a port");
        let l = DeviceList::parse("^=mlx5_2");
        assert!(l.allows("mlx5_0", Some(1)) && !l.allows("mlx5_2", Some(1)), "excluded");
        let l = DeviceList::parse("^mlx5_1");
        assert!(!l.allows("mlx5_11", Some(1)), "a prefix exclusion reaches mlx5_11");
        let l = DeviceList::parse("=mlx5_0::3,mlx5_1:2:4:1");
        assert!(
            l.allows("mlx5_0", Some(1)) && l.allows("mlx5_0", Some(2)),
            "an empty port is any port"
        );
        assert!(
            l.allows("mlx5_1", Some(2)) && !l.allows("mlx5_1", Some(1)),
            "the rail is no port"
        );
    }

    fn port(dev: &str, p: Option<u32>) -> GpuPort {
        GpuPort::new(dev, p, PortTransport::Verbs, PathClass::Pix)
    }

    fn set(name: &str, value: &str) -> Vec<Setting> {
        vec![Setting {
            name: name.into(),
            value: value.into(),
            reason: String::new(),
        }]
    }

    #[test]
    fn half_the_ports_of_a_dual_port_hca_is_refused() {
        let ports = [port("mlx5_0", Some(1)), port("mlx5_1", Some(2))];
        let v = check(&set("NCCL_IB_HCA", "=mlx5_0"), &ports, &[], false, None).unwrap_err();
        assert_eq!(v.port, "mlx5_1 port 2");
        assert!(
            v.to_string()
                .contains("NCCL_IB_HCA==mlx5_0 would leave out mlx5_1 port 2"),
            "{v}"
        );
        assert!(check(&set("NCCL_IB_HCA", "=mlx5_0,mlx5_1"), &ports, &[], false, None).is_ok());
        assert!(
            check(&set("NCCL_IB_HCA", "=mlx5_0"), &ports, &["mlx5_1".into()], false, None).is_ok(),
            "stated: mlx5_1 carries no GPU traffic"
        );
    }

    #[test]
    fn cross_nic_zero_needs_a_railed_fabric() {
        assert!(check(&set("NCCL_CROSS_NIC", "0"), &[], &[], false, None).is_err());
        assert!(check(&set("NCCL_CROSS_NIC", "0"), &[], &[], true, None).is_ok());
        assert!(check(&set("NCCL_CROSS_NIC", "1"), &[], &[], false, None).is_ok());
    }

    #[test]
    fn a_topology_file_listing_nets_must_list_every_gpu_port() {
        let ports = [port("mlx5_0", Some(1)), port("mlx5_1", Some(1))];
        let xml = "<system version=\"1\"><cpu numaid=\"0\"><nic><net name=\"mlx5_0\"/></nic></cpu></system>";
        assert!(check(&[], &ports, &[], false, Some(xml)).is_err());
        assert!(check(&[], &ports, &[], false, Some("<system version=\"1\"></system>")).is_ok());
    }
}
