//! Builds directory trees shaped like a real machine's `/sys` and `/proc`, for `--fsroot`.
//!
//! What this machine cannot have (8 GPUs, mlx5 NICs, two sockets) is described here, file by
//! file, in the kernel's own formats (research/irq.md §2; drivers/pci/pci-sysfs.c;
//! drivers/infiniband/core/sysfs.c). Real hwloc reads these trees through `HWLOC_FSROOT`, so:
//! - every PCI function has `class`, `vendor`, `device`, `subsystem_*`, `numa_node`,
//!   `local_cpus` (`%*pb` mask) and `local_cpulist`, link speed/width files, and a 64-byte
//!   `config` (what a non-root reader gets) whose header type and bus numbers hwloc uses to
//!   rebuild the bridge tree;
//! - `/sys/bus/pci/devices/<bdf>`, `/sys/class/net/<if>` and `/sys/class/infiniband/<dev>`
//!   are relative symlinks into `/sys/devices/pci<DDDD:BB>/...`, as on a real system;
//! - IRQs appear in `msi_irqs/`, `/proc/interrupts`, `/proc/irq/N/` and `/sys/kernel/irq/N/`.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// A CPU's `flags` as a bare-metal Sapphire Rapids shows the start of them.
const CPU_FLAGS: &str =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht";

pub(crate) struct FakeMachine {
    pub root: PathBuf,
    ncpus: u32,
    nodes: Vec<Vec<u32>>,
    dev_paths: HashMap<String, String>,
    irqs: BTreeMap<u32, FakeIrq>,
}

#[derive(Clone)]
pub(crate) struct FakeIrq {
    pub name: String,
    pub chip: String,
    pub per_cpu: Vec<u64>,
    pub affinity: String,
}

#[derive(Clone)]
pub(crate) struct Pci {
    pub bdf: &'static str,
    /// Parent bridge; `None` puts the function on the root bus `pciDDDD:BB`.
    pub parent: Option<&'static str>,
    pub class: u32,
    pub vendor: u16,
    pub device: u16,
    /// `numa_node`; -1 for "unknown" (VMs).
    pub numa: i32,
    /// `(current_speed, current_width, max_speed, max_width)`; `None` for legacy devices.
    pub link: Option<(&'static str, u8, &'static str, u8)>,
    pub driver: Option<&'static str>,
    /// For bridges: `(secondary, subordinate)` bus.
    pub bridge: Option<(u8, u8)>,
}

impl Pci {
    pub(crate) fn new(
        bdf: &'static str,
        parent: Option<&'static str>,
        class: u32,
        vendor: u16,
        device: u16,
        numa: i32,
    ) -> Self {
        Pci {
            bdf,
            parent,
            class,
            vendor,
            device,
            numa,
            link: Some(("32.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16)),
            driver: None,
            bridge: None,
        }
    }
    pub(crate) fn bridge(mut self, secondary: u8, subordinate: u8) -> Self {
        self.bridge = Some((secondary, subordinate));
        self.driver = Some("pcieport");
        self
    }
    pub(crate) fn link(mut self, cur: &'static str, cur_w: u8, max: &'static str, max_w: u8) -> Self {
        self.link = Some((cur, cur_w, max, max_w));
        self
    }
    pub(crate) fn no_link(mut self) -> Self {
        self.link = None;
        self
    }
    pub(crate) fn driver(mut self, d: &'static str) -> Self {
        self.driver = Some(d);
        self
    }
}

pub(crate) struct Port {
    pub state: &'static str,
    pub rate: &'static str,
    pub link_layer: &'static str,
    /// `(type, gid)` per GID index; type as in `gid_attrs/types/N`.
    pub gids: Vec<(&'static str, &'static str)>,
    pub ndev: Option<&'static str>,
}

impl FakeMachine {
    pub(crate) fn new(root: &Path, hostname: &str) -> Self {
        let m = FakeMachine {
            root: root.to_path_buf(),
            ncpus: 0,
            nodes: Vec::new(),
            dev_paths: HashMap::new(),
            irqs: BTreeMap::new(),
        };
        m.write("/proc/sys/kernel/hostname", &format!("{hostname}\n"));
        m.write("/proc/sys/kernel/osrelease", "6.8.0-fake\n");
        m
    }

    pub(crate) fn write(&self, path: &str, content: &str) {
        self.write_bytes(path, content.as_bytes());
    }

    pub(crate) fn write_bytes(&self, path: &str, content: &[u8]) {
        let p = self.root.join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn link(&self, path: &str, target: &str) {
        let p = self.root.join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// Linux numbering on an SMT machine: all first threads, then all second threads.
    pub(crate) fn cpus(&mut self, sockets: u32, cores_per_socket: u32, threads: u32) -> &mut Self {
        let cores = sockets * cores_per_socket;
        self.ncpus = cores * threads;
        let n = self.ncpus;
        self.nodes = (0..sockets).map(|_| Vec::new()).collect();
        for cpu in 0..n {
            let core = cpu % cores;
            let socket = core / cores_per_socket;
            self.nodes[socket as usize].push(cpu);
            let siblings: Vec<u32> = (0..threads).map(|t| core + t * cores).collect();
            let package: Vec<u32> = (0..n).filter(|c| (c % cores) / cores_per_socket == socket).collect();
            let t = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
            self.write(&format!("{t}/physical_package_id"), &format!("{socket}\n"));
            self.write(&format!("{t}/die_id"), "0\n");
            self.write(&format!("{t}/core_id"), &format!("{}\n", core % cores_per_socket));
            for (name, set) in [
                ("core_cpus", &siblings),
                ("thread_siblings", &siblings),
                ("package_cpus", &package),
                ("core_siblings", &package),
                ("die_cpus", &package),
            ] {
                self.write(&format!("{t}/{name}"), &format!("{}\n", mask(set, n)));
                self.write(&format!("{t}/{name}_list"), &format!("{}\n", list(set)));
            }
            if cpu > 0 {
                self.write(&format!("/sys/devices/system/cpu/cpu{cpu}/online"), "1\n");
            }
        }
        let all: Vec<u32> = (0..n).collect();
        for f in ["online", "possible", "present"] {
            self.write(&format!("/sys/devices/system/cpu/{f}"), &format!("{}\n", list(&all)));
        }
        self.write("/sys/devices/system/cpu/isolated", "\n");
        let nodes = self.nodes.clone();
        for (i, cpus) in nodes.iter().enumerate() {
            let d = format!("/sys/devices/system/node/node{i}");
            self.write(&format!("{d}/cpumap"), &format!("{}\n", mask(cpus, n)));
            self.write(&format!("{d}/cpulist"), &format!("{}\n", list(cpus)));
            self.write(
                &format!("{d}/meminfo"),
                &format!("Node {i} MemTotal:       263921232 kB\nNode {i} MemFree:        200000000 kB\n"),
            );
            let distance: Vec<String> = (0..nodes.len())
                .map(|j| if i == j { "10".into() } else { "21".into() })
                .collect();
            self.write(&format!("{d}/distance"), &format!("{}\n", distance.join(" ")));
        }
        let node_ids: Vec<u32> = (0..nodes.len() as u32).collect();
        for f in ["online", "possible", "has_cpu", "has_memory"] {
            self.write(
                &format!("/sys/devices/system/node/{f}"),
                &format!("{}\n", list(&node_ids)),
            );
        }
        self.write(
            "/proc/meminfo",
            &format!(
                "MemTotal:       {} kB\nMemFree:        400000000 kB\n",
                263921232u64 * nodes.len() as u64
            ),
        );
        let mut cpuinfo = String::new();
        for cpu in 0..n {
            cpuinfo.push_str(&format!("processor\t: {cpu}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nphysical id\t: {}\ncore id\t\t: {}\nflags\t\t: {CPU_FLAGS}\n\n", (cpu % cores) / cores_per_socket, cpu % cores % cores_per_socket));
        }
        self.write("/proc/cpuinfo", &cpuinfo);
        self
    }

    /// Mark the machine a guest: the kernel adds `hypervisor` to every CPU's flags (as the
    /// captured H200 VM's `lscpu` shows).
    pub(crate) fn hypervisor(&mut self) -> &mut Self {
        let path = self.root.join("proc/cpuinfo");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(path, text.replace(CPU_FLAGS, &format!("{CPU_FLAGS} hypervisor"))).unwrap();
        self
    }

    /// A PCIe port's configuration space made whole (4096 bytes, what root reads): AER at
    /// 0x100, then ACS at 0x148 with this control register (`lspci -vvv`'s ACSCtl; bit 2
    /// ReqRedir, bit 3 CmpltRedir), after the 64-byte header hwloc reads.
    pub(crate) fn acs_control(&self, bdf: &str, control: u16) {
        let path = self
            .root
            .join(format!("{}/config", self.dev_paths[bdf].trim_start_matches('/')));
        let mut c = fs::read(&path).unwrap();
        c.resize(4096, 0);
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        c[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
        c[0x14c..0x14e].copy_from_slice(&0x005fu16.to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&control.to_le_bytes());
        fs::write(path, c).unwrap();
    }

    /// The sysfs directory of a PCI function (`/sys/devices/pci…/…`).
    pub(crate) fn dev_path(&self, bdf: &str) -> String {
        self.dev_paths[bdf].clone()
    }

    /// Put a PCI function in an IOMMU group of this default-domain type (`DMA`, `DMA-FQ`,
    /// `identity`), linked as the kernel links it.
    pub(crate) fn iommu_group(&self, bdf: &str, group: u32, ty: &str) {
        let path = self.dev_paths[bdf].clone();
        self.write(&format!("/sys/kernel/iommu_groups/{group}/type"), &format!("{ty}\n"));
        let link = self.root.join(format!("{}/iommu_group", path.trim_start_matches('/')));
        let _ = fs::remove_file(&link);
        symlink(format!("{}/kernel/iommu_groups/{group}", up(&path)), link).unwrap();
    }

    pub(crate) fn node_cpus(&self, numa: i32) -> Vec<u32> {
        if numa < 0 {
            (0..self.ncpus).collect()
        } else {
            self.nodes[numa as usize].clone()
        }
    }

    pub(crate) fn pci(&mut self, d: Pci) -> &mut Self {
        let bdf = d.bdf;
        let path = match d.parent {
            Some(p) => format!("{}/{bdf}", self.dev_paths[p]),
            None => format!("/sys/devices/pci{}/{bdf}", &bdf[..7]),
        };
        self.dev_paths.insert(bdf.to_string(), path.clone());
        self.write(&format!("{path}/class"), &format!("0x{:06x}\n", d.class));
        self.write(&format!("{path}/vendor"), &format!("0x{:04x}\n", d.vendor));
        self.write(&format!("{path}/device"), &format!("0x{:04x}\n", d.device));
        self.write(&format!("{path}/subsystem_vendor"), &format!("0x{:04x}\n", d.vendor));
        self.write(&format!("{path}/subsystem_device"), "0x0000\n");
        self.write(&format!("{path}/numa_node"), &format!("{}\n", d.numa));
        let local = self.node_cpus(d.numa);
        self.write(
            &format!("{path}/local_cpus"),
            &format!("{}\n", mask(&local, self.ncpus)),
        );
        self.write(&format!("{path}/local_cpulist"), &format!("{}\n", list(&local)));
        self.write(&format!("{path}/irq"), "0\n");
        if let Some((cs, cw, ms, mw)) = d.link {
            self.write(&format!("{path}/current_link_speed"), &format!("{cs}\n"));
            self.write(&format!("{path}/current_link_width"), &format!("{cw}\n"));
            self.write(&format!("{path}/max_link_speed"), &format!("{ms}\n"));
            self.write(&format!("{path}/max_link_width"), &format!("{mw}\n"));
        }
        let bus = u8::from_str_radix(&bdf[5..7], 16).unwrap();
        self.write_bytes(
            &format!("{path}/config"),
            &config_space(d.vendor, d.device, d.class, bus, d.bridge),
        );
        if let Some(drv) = d.driver {
            self.link(
                &format!("{path}/driver"),
                &format!("{}/bus/pci/drivers/{drv}", up(&path)),
            );
            fs::create_dir_all(self.root.join(format!("sys/bus/pci/drivers/{drv}"))).unwrap();
        }
        self.link(
            &format!("/sys/bus/pci/devices/{bdf}"),
            &format!("../../../{}", path.trim_start_matches("/sys/")),
        );
        self
    }

    /// MSI-X vectors of a PCI function, with `/proc/irq` and `/sys/kernel/irq` entries.
    pub(crate) fn msix(&mut self, bdf: &str, irqs: &[(u32, String, Vec<u64>, String)]) -> &mut Self {
        let path = self.dev_paths[bdf].clone();
        for (i, (irq, name, per_cpu, affinity)) in irqs.iter().enumerate() {
            self.write(&format!("{path}/msi_irqs/{irq}"), "msix\n");
            let chip = format!("PCI-MSIX-{bdf}");
            self.write(&format!("/sys/kernel/irq/{irq}/actions"), &format!("{name}\n"));
            self.write(&format!("/sys/kernel/irq/{irq}/chip_name"), &format!("{chip}\n"));
            self.write(&format!("/sys/kernel/irq/{irq}/hwirq"), &format!("{i}\n"));
            self.irqs.insert(
                *irq,
                FakeIrq {
                    name: name.clone(),
                    chip,
                    per_cpu: per_cpu.clone(),
                    affinity: affinity.clone(),
                },
            );
        }
        self
    }

    pub(crate) fn rdma(&mut self, bdf: &str, name: &str, ports: &[Port]) -> &mut Self {
        let dir = format!("{}/infiniband/{name}", self.dev_paths[bdf]);
        self.link(&format!("{dir}/device"), &format!("../../../{bdf}"));
        self.link(
            &format!("/sys/class/infiniband/{name}"),
            &format!("../../{}", dir.trim_start_matches("/sys/")),
        );
        for (i, p) in ports.iter().enumerate() {
            let pd = format!("{dir}/ports/{}", i + 1);
            self.write(&format!("{pd}/state"), &format!("{}\n", p.state));
            self.write(&format!("{pd}/phys_state"), "5: LinkUp\n");
            self.write(&format!("{pd}/rate"), &format!("{}\n", p.rate));
            self.write(&format!("{pd}/link_layer"), &format!("{}\n", p.link_layer));
            for (g, (ty, gid)) in p.gids.iter().enumerate() {
                self.write(&format!("{pd}/gids/{g}"), &format!("{gid}\n"));
                self.write(&format!("{pd}/gid_attrs/types/{g}"), &format!("{ty}\n"));
                if let Some(nd) = p.ndev {
                    self.write(&format!("{pd}/gid_attrs/ndevs/{g}"), &format!("{nd}\n"));
                }
            }
            // Unpopulated GID slots exist as files that refuse reads (EINVAL); a directory
            // stands in for "unreadable" here.
            fs::create_dir_all(self.root.join(format!(
                "{}/gid_attrs/types/{}",
                pd.trim_start_matches('/'),
                p.gids.len()
            )))
            .unwrap();
        }
        self
    }

    pub(crate) fn netdev(&mut self, bdf: &str, name: &str, speed: i64, operstate: &str) -> &mut Self {
        let dir = format!("{}/net/{name}", self.dev_paths[bdf]);
        self.link(&format!("{dir}/device"), &format!("../../../{bdf}"));
        self.link(
            &format!("/sys/class/net/{name}"),
            &format!("../../{}", dir.trim_start_matches("/sys/")),
        );
        self.write(&format!("{dir}/speed"), &format!("{speed}\n"));
        self.write(&format!("{dir}/operstate"), &format!("{operstate}\n"));
        self.write(&format!("{dir}/mtu"), "9000\n");
        self.write(&format!("{dir}/address"), "b8:3f:d2:00:00:01\n");
        self.write(&format!("{dir}/type"), "1\n");
        self
    }

    /// A virtual netdev (no `device` link), as `lo` is.
    pub(crate) fn virtual_netdev(&mut self, name: &str) -> &mut Self {
        let dir = format!("/sys/devices/virtual/net/{name}");
        self.write(&format!("{dir}/operstate"), "unknown\n");
        self.link(
            &format!("/sys/class/net/{name}"),
            &format!("../../devices/virtual/net/{name}"),
        );
        self
    }

    /// Write `/proc/interrupts` (format of kernel/irq/proc.c) and `/proc/irq/N/*`.
    pub(crate) fn finish_interrupts(&mut self) -> &mut Self {
        let n = self.ncpus as usize;
        let mut text = String::from("        ");
        for c in 0..n {
            text.push_str(&format!("   CPU{c:<8}"));
        }
        text = text.trim_end().to_string();
        text.push('\n');
        text.push_str(&format!("{:>4}: ", 0));
        for _ in 0..n {
            text.push_str(&format!("{:>10} ", 40));
        }
        text.push_str(" IO-APIC   2-edge      timer\n");
        for (irq, i) in &self.irqs {
            text.push_str(&format!("{irq:>4}: "));
            for c in 0..n {
                text.push_str(&format!("{:>10} ", i.per_cpu.get(c).copied().unwrap_or(0)));
            }
            text.push_str(&format!("{}   {}-edge      {}\n", i.chip, irq % 64, i.name));
        }
        text.push_str(&format!("{:>4}: ", "NMI"));
        for _ in 0..n {
            text.push_str(&format!("{:>10} ", 0));
        }
        text.push_str("  Non-maskable interrupts\nERR:          0\nMIS:          0\n");
        self.write("/proc/interrupts", &text);
        let irqs: Vec<(u32, FakeIrq)> = self.irqs.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (irq, i) in irqs {
            let cpus = parse_list(&i.affinity);
            self.write(
                &format!("/proc/irq/{irq}/smp_affinity_list"),
                &format!("{}\n", i.affinity),
            );
            self.write(
                &format!("/proc/irq/{irq}/smp_affinity"),
                &format!("{}\n", mask(&cpus, self.ncpus)),
            );
            self.write(
                &format!("/proc/irq/{irq}/effective_affinity_list"),
                &format!("{}\n", cpus.first().copied().unwrap_or(0)),
            );
            self.write(
                &format!("/proc/irq/{irq}/affinity_hint"),
                &format!("{}\n", mask(&[], self.ncpus)),
            );
            self.write(&format!("/proc/irq/{irq}/node"), "0\n");
            fs::create_dir_all(self.root.join(format!("proc/irq/{irq}/{}", i.name.replace('/', "_")))).unwrap();
        }
        self
    }
}

/// `../` repeated to climb from a `/sys/...` path to `/sys`.
fn up(path: &str) -> String {
    let depth = path.trim_start_matches('/').split('/').count() - 1;
    let mut s = String::new();
    for _ in 0..depth {
        s.push_str("../");
    }
    s.trim_end_matches('/').to_string()
}

/// The kernel's `%*pb`: hex, comma every 32 bits, most significant first, nr_cpu_ids bits wide.
pub(crate) fn mask(cpus: &[u32], nr_cpus: u32) -> String {
    let groups = nr_cpus.div_ceil(32).max(1) as usize;
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let top_bits = nr_cpus - (groups as u32 - 1) * 32;
    let top_digits = top_bits.div_ceil(4).max(1) as usize;
    let mut parts = Vec::new();
    for (i, w) in words.iter().enumerate().rev() {
        if i == groups - 1 {
            parts.push(format!("{w:0top_digits$x}"));
        } else {
            parts.push(format!("{w:08x}"));
        }
    }
    parts.join(",")
}

/// The kernel's `%*pbl`.
pub(crate) fn list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

pub(crate) fn parse_list(s: &str) -> Vec<u32> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()).collect::<Vec<_>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect()
}

/// The first 64 bytes of config space, as a non-root reader sees them.
fn config_space(vendor: u16, device: u16, class: u32, bus: u8, bridge: Option<(u8, u8)>) -> Vec<u8> {
    let mut c = vec![0u8; 64];
    c[0..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    c[9] = (class & 0xff) as u8;
    c[10] = ((class >> 8) & 0xff) as u8;
    c[11] = ((class >> 16) & 0xff) as u8;
    if let Some((sec, sub)) = bridge {
        c[0x0e] = 1;
        c[0x18] = bus;
        c[0x19] = sec;
        c[0x1a] = sub;
    }
    c
}
