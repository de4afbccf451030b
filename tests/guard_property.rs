//! The never-slower guard, as a property: on random nodes (NIC and port counts, ports per NIC,
//! InfiniBand/RoCE/EFA/Broadcom mixes, distances from the GPUs, ports up and down, names that
//! are prefixes of others), the NCCL settings topo-tune derives never leave out a port NCCL
//! would use for GPU traffic, and the guard refuses exactly the overrides that would. What
//! NCCL would use and how it matches names are computed here independently of the crate:
//! from how the node was generated, and from NCCL's list syntax (src/misc/utils.cc).

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use topo_tune::api::derive;
use topo_tune::api::guard;
use topo_tune::api::snapshot::LinkLayer;
use topo_tune::api::NodeSnapshot;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Mlx,
    Bnxt,
    Efa,
}

#[derive(Debug, Clone)]
struct GenNic {
    kind: Kind,
    /// Where it sits: under switch `s`, or straight under a CPU's root port.
    under: Under,
    /// Per port: active?, Ethernet link layer (RoCE)?
    ports: Vec<(bool, bool)>,
    /// Ports as one device with several ports (`mlx5_0` ports 1, 2) or a device per port.
    one_device: bool,
}

#[derive(Debug, Clone, Copy)]
enum Under {
    Switch(usize),
    Cpu(usize),
}

#[derive(Debug, Clone)]
struct GenNode {
    cpus: usize,
    /// Per switch: its CPU and how many GPUs it holds.
    switches: Vec<(usize, usize)>,
    nics: Vec<GenNic>,
}

fn node() -> impl Strategy<Value = GenNode> {
    (1usize..=2).prop_flat_map(|cpus| {
        let switches = prop::collection::vec((0..cpus, 0usize..=2), 1..=4);
        switches.prop_flat_map(move |switches| {
            let n_sw = switches.len();
            let under = prop_oneof![(0..n_sw).prop_map(Under::Switch), (0..cpus).prop_map(Under::Cpu)];
            let kind = prop_oneof![4 => Just(Kind::Mlx), 1 => Just(Kind::Bnxt), 1 => Just(Kind::Efa)];
            let nic = (
                kind,
                under,
                prop::collection::vec((prop::bool::weighted(0.8), any::<bool>()), 1..=2),
                any::<bool>(),
            )
                .prop_map(|(kind, under, ports, one_device)| GenNic {
                    kind,
                    under,
                    ports,
                    one_device,
                });
            let switches = switches.clone();
            prop::collection::vec(nic, 0..=14).prop_map(move |nics| GenNode {
                cpus,
                switches: switches.clone(),
                nics,
            })
        })
    })
}

/// One port as the generator made it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Port {
    device: String,
    port: u32,
}

struct Built {
    xml: String,
    /// GPUs: (switch, cpu).
    gpus: Vec<(usize, usize)>,
    /// Per port: device, port number, NIC index, active, RoCE.
    ports: Vec<(Port, usize, bool, bool)>,
}

/// Device numbers in an order that puts names which are prefixes of others (`mlx5_1`,
/// `mlx5_10`) on small nodes too: NCCL matches names by prefix unless told `=`.
const TRAP_ORDER: [u32; 28] = [
    1, 10, 11, 2, 20, 21, 3, 0, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 24, 25, 26, 27,
];

/// One NIC of a generated node as NCCL topology XML; its ports (with the NIC's index, active,
/// RoCE) go to `ports`. `counts`: the mlx5 and bnxt_re devices named so far.
fn nic_xml(
    i: usize,
    nic: &GenNic,
    bus: u32,
    counts: (&mut u32, &mut u32),
    ports: &mut Vec<(Port, usize, bool, bool)>,
) -> String {
    let (class, vendor, device) = match nic.kind {
        Kind::Mlx => ("0x020700", "0x15b3", "0x101d"),
        Kind::Bnxt => ("0x020000", "0x14e4", "0x1760"),
        Kind::Efa => ("0x020000", "0x1d0f", "0xefa2"),
    };
    let mut s = format!("<pci busid=\"0000:{bus:02x}:00.0\" class=\"{class}\" vendor=\"{vendor}\" device=\"{device}\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"><nic>\n");
    let mut name = String::new();
    for (k, &(active, roce)) in nic.ports.iter().enumerate() {
        if k == 0 || !nic.one_device {
            name = match nic.kind {
                Kind::Mlx => {
                    *counts.0 += 1;
                    format!("mlx5_{}", TRAP_ORDER[*counts.0 as usize - 1])
                }
                Kind::Bnxt => {
                    *counts.1 += 1;
                    format!("bnxt_re{}", TRAP_ORDER[*counts.1 as usize - 1])
                }
                Kind::Efa => format!("rdmap{bus}s{k}"),
            };
        }
        let port = k as u32 + 1;
        s.push_str(&format!(
            "<net name=\"{name}\" dev=\"0\" speed=\"200000\" port=\"{port}\" gdr=\"1\"/>\n"
        ));
        ports.push((
            Port {
                device: name.clone(),
                port,
            },
            i,
            active,
            roce,
        ));
    }
    s.push_str("</nic></pci>\n");
    s
}

fn build(n: &GenNode) -> Built {
    let mut bus = 0x10u32;
    let mut next_bus = || {
        bus += 1;
        bus
    };
    let (mut mlx, mut bnxt) = (0u32, 0u32);
    let mut gpus = Vec::new();
    let mut ports = Vec::new();
    let mut xml = String::from("<system version=\"1\">\n");
    for cpu in 0..n.cpus {
        xml.push_str(&format!(
            "<cpu numaid=\"{cpu}\" affinity=\"{:08x}\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n",
            0xffu32 << (8 * cpu)
        ));
        for (s, &(sw_cpu, n_gpus)) in n.switches.iter().enumerate() {
            if sw_cpu != cpu {
                continue;
            }
            let b = next_bus();
            xml.push_str(&format!("<pci busid=\"0000:{b:02x}:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"));
            for _ in 0..n_gpus {
                let b = next_bus();
                let g = gpus.len();
                xml.push_str(&format!("<pci busid=\"0000:{b:02x}:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"><gpu dev=\"{g}\" sm=\"90\" rank=\"{g}\" gdr=\"1\"/></pci>\n"));
                gpus.push((s, cpu));
            }
            for (i, nic) in n.nics.iter().enumerate() {
                if matches!(nic.under, Under::Switch(x) if x == s) {
                    xml.push_str(&nic_xml(i, nic, next_bus(), (&mut mlx, &mut bnxt), &mut ports));
                }
            }
            xml.push_str("</pci>\n");
        }
        for (i, nic) in n.nics.iter().enumerate() {
            if matches!(nic.under, Under::Cpu(c) if c == cpu) {
                xml.push_str(&nic_xml(i, nic, next_bus(), (&mut mlx, &mut bnxt), &mut ports));
            }
        }
        xml.push_str("</cpu>\n");
    }
    xml.push_str("</system>\n");
    Built { xml, gpus, ports }
}

/// Distance of a NIC from a GPU, as an order: same switch, same CPU, other CPU.
fn level(n: &GenNode, gpu: (usize, usize), nic: &GenNic) -> u8 {
    let nic_cpu = match nic.under {
        Under::Switch(s) if s == gpu.0 => return 0,
        Under::Switch(s) => n.switches[s].0,
        Under::Cpu(c) => c,
    };
    if nic_cpu == gpu.1 {
        1
    } else {
        2
    }
}

/// The ports NCCL uses for GPU traffic left to itself: per GPU, those on its switch, or its
/// nearest where none is on its switch.
fn used_ports(n: &GenNode, b: &Built) -> BTreeSet<Port> {
    let mut used = BTreeSet::new();
    for &g in &b.gpus {
        let active = b.ports.iter().filter(|p| p.2);
        let Some(nearest) = active.clone().map(|p| level(n, g, &n.nics[p.1])).min() else {
            continue;
        };
        // Level 0 is "within PXB": a GPU uses every NIC there, or else its nearest ones.
        used.extend(
            active
                .filter(|p| level(n, g, &n.nics[p.1]) <= nearest)
                .map(|p| p.0.clone()),
        );
    }
    used
}

/// NCCL's list matching, written from utils.cc's description: `^` excludes, `=` exact, else
/// prefix; `name:port` limits to a port.
fn nccl_allows(list: &str, device: &str, port: u32) -> bool {
    let (exclude, rest) = list.strip_prefix('^').map_or((false, list), |r| (true, r));
    let (exact, rest) = rest.strip_prefix('=').map_or((false, rest), |r| (true, r));
    let hit = rest.split(',').filter(|s| !s.is_empty()).any(|item| {
        let (name, p) = item
            .split_once(':')
            .map_or((item, None), |(n, p)| (n, p.parse::<u32>().ok()));
        let name_ok = if exact {
            device == name
        } else {
            device.starts_with(name)
        };
        name_ok && p.is_none_or(|p| p == port)
    });
    hit != exclude
}

fn snapshot(b: &Built) -> NodeSnapshot {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.xml");
    std::fs::write(&file, &b.xml).unwrap();
    let mut s =
        topo_tune::api::from_source(file.to_str().unwrap(), "n1").unwrap_or_else(|e| panic!("{e:?}\n{}", b.xml));
    // Port states and link layers: what a live probe would have read.
    for (p, _, active, roce) in &b.ports {
        let nic = s.nics.iter_mut().find(|n| n.name == p.device).unwrap();
        let rp = nic
            .rdma
            .as_mut()
            .unwrap()
            .ports
            .iter_mut()
            .find(|x| x.port == p.port)
            .unwrap();
        rp.state_code = Some(if *active { 4 } else { 1 });
        rp.state = Some(if *active { "ACTIVE" } else { "DOWN" }.into());
        rp.link_layer = if *roce {
            LinkLayer::Ethernet
        } else {
            LinkLayer::InfiniBand
        };
    }
    s
}

fn is_verbs(p: &Port) -> bool {
    !p.device.starts_with("rdmap")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn derived_settings_never_leave_out_a_port_nccl_uses(n in node()) {
        let b = build(&n);
        let s = snapshot(&b);
        let used = used_ports(&n, &b);
        let d = derive(&s, None, None, &BTreeMap::new()).unwrap();
        if let Some(hca) = d.settings.iter().find(|x| x.name == "NCCL_IB_HCA") {
            for p in used.iter().filter(|p| is_verbs(p)) {
                prop_assert!(nccl_allows(&hca.value, &p.device, p.port), "{} leaves out {p:?}\n{}", hca.value, b.xml);
            }
        }
        let ports = guard::gpu_ports(&s);
        let protected: BTreeSet<Port> = ports.iter().map(|p| Port { device: p.device.clone(), port: p.port.unwrap_or(0) }).collect();
        prop_assert_eq!(&protected, &used, "the guard protects what NCCL uses\n{}", b.xml);
        prop_assert!(guard::check(&d.settings, &ports, &[], false, None).is_ok());
    }

    #[test]
    fn the_guard_refuses_exactly_the_overrides_that_leave_out_a_used_port(
        n in node(),
        pick in prop::collection::vec(any::<bool>(), 0..=16),
        exclude in any::<bool>(),
        exact in any::<bool>(),
        with_port in any::<bool>(),
    ) {
        let b = build(&n);
        let s = snapshot(&b);
        let used = used_ports(&n, &b);
        let names: Vec<String> = b.ports.iter().filter(|p| is_verbs(&p.0)).map(|p| {
            if with_port { format!("{}:{}", p.0.device, p.0.port) } else { p.0.device.clone() }
        }).collect::<BTreeSet<_>>().into_iter().collect();
        let chosen: Vec<&str> = names.iter().zip(pick.iter().chain(std::iter::repeat(&false))).filter(|(_, k)| **k).map(|(n, _)| n.as_str()).collect();
        if chosen.is_empty() {
            return Ok(());
        }
        let value = format!("{}{}{}", if exclude { "^" } else { "" }, if exact { "=" } else { "" }, chosen.join(","));
        let narrows = used.iter().filter(|p| is_verbs(p)).any(|p| !nccl_allows(&value, &p.device, p.port));
        let settings = vec![topo_tune::api::Setting { name: "NCCL_IB_HCA".into(), value: value.clone(), reason: String::new() }];
        let verdict = guard::check(&settings, &guard::gpu_ports(&s), &[], false, None);
        prop_assert_eq!(verdict.is_err(), narrows, "{} on {:?}: {:?}", value, used, verdict);
    }

    #[test]
    fn the_nvlink_guard_refuses_exactly_what_turns_nvlink_off(
        nvlink in any::<bool>(),
        in_domain in any::<bool>(),
        picks in prop::collection::vec((0usize..5, 0usize..7), 0..=4),
        with_nvlink_file in any::<bool>(),
    ) {
        // What NCCL does, written here from its source (init.cc, mnnvl.cc, paths.cc), not
        // from the crate: P2P level 0 (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC or its legacy 0)
        // takes NVLink away, and multi-node NVLink with it; multi-node NVLink also needs cuMem
        // (NCCL_CUMEM_ENABLE) and is off with NCCL_MNNVL_ENABLE=0. A topology file's <nvlink>
        // replaces the driver's NVLink detection.
        const VARS: [&str; 5] = ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_CUMEM_ENABLE", "NCCL_MNNVL_ENABLE", "NCCL_IB_HCA"];
        const VALUES: [&str; 7] = ["0", "1", "2", "LOC", "NVL", "SYS", "=mlx5_0"];
        let settings: Vec<topo_tune::api::Setting> = picks
            .iter()
            .map(|(v, x)| topo_tune::api::Setting { name: VARS[*v].into(), value: VALUES[*x].into(), reason: String::new() })
            .collect();
        let has_nvlink = nvlink || in_domain;
        let kills = settings.iter().any(|s| match (s.name.as_str(), s.value.as_str()) {
            ("NCCL_P2P_DISABLE", "1") => has_nvlink,
            ("NCCL_P2P_LEVEL", "LOC" | "0") => has_nvlink,
            ("NCCL_CUMEM_ENABLE", "0") | ("NCCL_MNNVL_ENABLE", "0") => in_domain,
            _ => false,
        }) || (has_nvlink && with_nvlink_file);
        let facts = guard::NvlinkGuard { nvlink, domain: in_domain.then(|| "nvl72-a".to_string()) };
        let xml = with_nvlink_file.then_some("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu dev=\"0\"><nvlink target=\"0000:02:00.0\" count=\"1\"/></gpu></pci></cpu></system>");
        let verdict = guard::check_nvlink(&settings, &facts, xml);
        prop_assert_eq!(verdict.is_err(), kills, "{:?} on nvlink={} domain={}: {:?}", settings, nvlink, in_domain, verdict);
        if let Err(v) = verdict {
            let text = v.to_string();
            prop_assert!(text.contains("NVLink"), "the violation names the fact: {}", text);
        }
    }
}
