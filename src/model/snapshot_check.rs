//! The trust boundary for node answers: every field of a snapshot that reaches a file, a
//! command line or a terminal is checked against its grammar, and every collection against a
//! bound, before anything uses it. A snapshot that fails names the field. Pure.

use super::snapshot::{
    Gpu, MachineInfo, Nic, NodeSnapshot, PciPlacement, PciTopology, OLDEST_READABLE, SCHEMA_VERSION,
};
use serde::Deserialize;

/// Most GPUs one node may report (an NVL72 tray shows 4; 8-GPU and 16-GPU boards are usual).
pub(crate) const MAX_GPUS: usize = 256;
/// Most NICs (RDMA devices and Ethernet functions) one node may report.
pub(crate) const MAX_NICS: usize = 1024;
/// Most PCI bridges, switches or host bridges.
pub(crate) const MAX_PCI: usize = 65_536;
/// Most NVLinks per GPU (18 today).
pub(crate) const MAX_NVLINKS: usize = 64;
/// Most interrupts per NIC.
pub(crate) const MAX_IRQS: usize = 8192;
/// Most notes, NUMA nodes, ports per device.
pub(crate) const MAX_ITEMS: usize = 4096;

/// A field that does not hold what its grammar allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    pub(crate) field: String,
    pub(crate) reason: String,
}

fn err(field: impl Into<String>, reason: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A field's name, made only when its check fails: a snapshot has thousands of fields, and
/// reading a fleet's snapshots should not format a name for each.
pub(crate) trait Field: Copy {
    fn name(self) -> String;
}

impl Field for &str {
    fn name(self) -> String {
        self.to_string()
    }
}

impl<F: Fn() -> String + Copy> Field for F {
    fn name(self) -> String {
        self()
    }
}

/// Free text shown to people (a GPU model, a note): bounded, no control characters.
fn text(field: impl Field, s: &str, max: usize) -> Result<(), FieldError> {
    if s.len() > max {
        return Err(err(field.name(), format!("{} bytes, more than {max}", s.len())));
    }
    if let Some(c) = s.chars().find(|c| c.is_control() || super::is_deceptive(*c)) {
        return Err(err(
            field.name(),
            format!(
                "holds the control or invisible formatting character {}",
                c.escape_default()
            ),
        ));
    }
    Ok(())
}

fn opt_text(field: impl Field, s: Option<&str>, max: usize) -> Result<(), FieldError> {
    s.map_or(Ok(()), |s| text(field, s, max))
}

/// A token from a restricted alphabet, 1 to `max` bytes.
fn token(field: impl Field, s: &str, max: usize, extra: &str, what: &str) -> Result<(), FieldError> {
    let ok = !s.is_empty() && s.len() <= max && s.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(c));
    if ok {
        Ok(())
    } else {
        Err(err(
            field.name(),
            format!(
                "{:?} is not {what} (letters, digits and `{extra}`, 1 to {max} characters)",
                s.escape_default().to_string()
            ),
        ))
    }
}

/// A network interface or RDMA device name as NCCL lists take them: the kernel's names
/// without anything NCCL's list syntax reads as a separator (`,`, `=`, `:`, `^`, spaces).
/// `max`: 15 for interfaces (IFNAMSIZ − 1), 63 for RDMA devices.
pub(crate) fn device_name(field: impl Field, s: &str, max: usize) -> Result<(), FieldError> {
    token(field, s, max, "_.-", "a device name")?;
    if s == "." || s == ".." {
        return Err(err(field.name(), "`.` and `..` are not device names"));
    }
    Ok(())
}

/// The most GB/s any one figure of a snapshot may state (a link, a port, a PCIe link): an
/// NVLink 5 link is 50, a whole NVL72 GPU 900, a 1.6 Tb/s port 200.
const MAX_GBPS: f64 = 10_000.0;

/// A bandwidth: a finite number of GB/s, above zero (`positive`) or at least zero, at most
/// [`MAX_GBPS`]. A negative or huge figure would become a prediction (a NIC at -400 Gb/s, a
/// link count of 4294967295).
fn gbps(field: impl Field, value: Option<f64>, positive: bool) -> Result<(), FieldError> {
    let Some(v) = value else { return Ok(()) };
    let low_ok = if positive { v > 0.0 } else { v >= 0.0 };
    if v.is_finite() && low_ok && v <= MAX_GBPS {
        return Ok(());
    }
    let low = if positive { "above 0" } else { "0" };
    Err(err(
        field.name(),
        format!("{v} GB/s: a bandwidth is {low} to {MAX_GBPS}"),
    ))
}

fn bounded<T>(field: impl Field, items: &[T], max: usize) -> Result<(), FieldError> {
    if items.len() > max {
        Err(err(field.name(), format!("{} entries, more than {max}", items.len())))
    } else {
        Ok(())
    }
}

fn hex_id(field: impl Field, s: &str) -> Result<(), FieldError> {
    let ok =
        s.len() == 9 && s.as_bytes()[4] == b':' && s.bytes().enumerate().all(|(i, b)| i == 4 || b.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(err(
            field.name(),
            format!("{:?} is not a vendor:device id", s.escape_default().to_string()),
        ))
    }
}

fn placement(field: impl Field, p: &PciPlacement) -> Result<(), FieldError> {
    if let Some(id) = &p.pci_id {
        hex_id(|| format!("{}.pci_id", field.name()), id)?;
    }
    gbps(
        || format!("{}.pcie.bandwidth_gbps", field.name()),
        p.pcie.bandwidth_gbps,
        false,
    )?;
    let class_ok =
        p.class.len() == 8 && p.class.starts_with("0x") && p.class[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if !class_ok {
        return Err(err(
            format!("{}.class", field.name()),
            format!(
                "{:?} is not a PCI class (0xCCSSPP)",
                p.class.escape_default().to_string()
            ),
        ));
    }
    token(
        || format!("{}.host_bridge", field.name()),
        &p.host_bridge,
        128,
        ":.@_-",
        "a host bridge id",
    )?;
    bounded(
        || format!("{}.numa_affinity", field.name()),
        &p.numa_affinity,
        MAX_ITEMS,
    )
}

fn nic(i: usize, n: &Nic) -> Result<(), FieldError> {
    let f = |k: &'static str| move || format!("nics[{i}].{k}");
    // A NIC known only by its bus id (an NCCL file without names) is named by it.
    if n.name.parse::<super::Bdf>().is_err() {
        device_name(f("name"), &n.name, 63)?;
    }
    if let Some(p) = &n.pci {
        placement(f("pci"), p)?;
    }
    if let Some(r) = &n.rdma {
        if r.device.parse::<super::Bdf>().is_err() {
            device_name(f("rdma.device"), &r.device, 63)?;
        }
        bounded(f("rdma.ports"), &r.ports, MAX_ITEMS)?;
        for (j, p) in r.ports.iter().enumerate() {
            let g = |k: &'static str| move || format!("nics[{i}].rdma.ports[{j}].{k}");
            opt_text(g("state"), p.state.as_deref(), 64)?;
            opt_text(g("rate"), p.rate.as_deref(), 128)?;
            gbps(g("rate_gbps"), p.rate_gbps, false)?;
            if let Some(d) = &p.netdev {
                device_name(g("netdev"), d, 15)?;
            }
            bounded(g("roce_v2_gid_indexes"), &p.roce_v2_gid_indexes, MAX_ITEMS)?;
        }
    }
    bounded(f("netdevs"), &n.netdevs, MAX_ITEMS)?;
    for (j, d) in n.netdevs.iter().enumerate() {
        device_name(|| format!("nics[{i}].netdevs[{j}].name"), &d.name, 15)?;
        opt_text(
            || format!("nics[{i}].netdevs[{j}].operstate"),
            d.operstate.as_deref(),
            32,
        )?;
    }
    if let Some(d) = &n.driver {
        token(f("driver"), d, 64, "_.-", "a driver name")?;
    }
    bounded(f("irqs"), &n.irqs, MAX_IRQS)?;
    for (j, q) in n.irqs.iter().enumerate() {
        opt_text(|| format!("nics[{i}].irqs[{j}].name"), q.name.as_deref(), 256)?;
    }
    Ok(())
}

/// A name that reaches an NCCL list names one device: two NICs of one name (or one RDMA
/// device, or one interface) would be listed twice (`NCCL_IB_HCA==mlx5_0,mlx5_0`) and leave
/// the other device out. GPU indexes are one per GPU too.
fn unique_names(s: &NodeSnapshot) -> Result<(), FieldError> {
    let mut seen = std::collections::HashSet::new();
    for (i, n) in s.nics.iter().enumerate() {
        let mut rdma = n.rdma.iter().map(|r| r.device.as_str()).filter(|d| *d != n.name);
        if !seen.insert(n.name.as_str()) {
            return Err(err(
                format!("nics[{i}].name"),
                format!("{:?} names two devices", n.name),
            ));
        }
        if let Some(d) = rdma.find(|d| !seen.insert(*d)) {
            return Err(err(
                format!("nics[{i}].rdma.device"),
                format!("{d:?} names two devices"),
            ));
        }
        if let Some((j, d)) = n
            .netdevs
            .iter()
            .enumerate()
            .find(|(_, d)| d.name != n.name && !seen.insert(d.name.as_str()))
        {
            return Err(err(
                format!("nics[{i}].netdevs[{j}].name"),
                format!("{:?} names two devices", d.name),
            ));
        }
    }
    let mut indexes = std::collections::HashSet::new();
    for (i, g) in s.gpus.iter().enumerate() {
        if !indexes.insert(g.index) {
            return Err(err(
                format!("gpus[{i}].index"),
                format!("GPU {} appears twice", g.index),
            ));
        }
    }
    Ok(())
}

/// A host name a node answers with (letters, digits, `.`, `_`, `-`; at most 253 bytes).
pub(crate) fn host_name(name: &str) -> Result<(), FieldError> {
    token("hostname", name, 253, "._-", "a host name")
}

/// Check a snapshot from outside (a node's answer, a file) before anything uses it.
pub(crate) fn check(s: &NodeSnapshot) -> Result<(), FieldError> {
    host_name(&s.hostname)?;
    text("tool_version", &s.tool_version, 64)?;
    opt_text("source.path", s.source.path.as_deref(), 4096)?;
    machine(&s.machine)?;
    bounded("numa_nodes", &s.numa_nodes, MAX_ITEMS)?;
    pci_tree(&s.pci)?;
    bounded("gpus", &s.gpus, MAX_GPUS)?;
    for (i, g) in s.gpus.iter().enumerate() {
        gpu(i, g)?;
    }
    bounded("nics", &s.nics, MAX_NICS)?;
    for (i, n) in s.nics.iter().enumerate() {
        nic(i, n)?;
    }
    unique_names(s)?;
    one_device_per_function(s)?;
    if let Some(d) = &s.nvlink_domain {
        if !super::nvfabric::domain_name_ok(d) {
            return Err(err(
                "nvlink_domain",
                format!(
                    "{:?} is not a domain name (letters, digits, `-`, `_`, `.`; 1 to 63)",
                    d.escape_default().to_string()
                ),
            ));
        }
    }
    bounded("notes", &s.notes, MAX_ITEMS)?;
    for (i, n) in s.notes.iter().enumerate() {
        token(|| format!("notes[{i}].code"), &n.code, 64, "-", "a note code")?;
        text(|| format!("notes[{i}].message"), &n.message, 4096)?;
    }
    Ok(())
}

fn machine(m: &MachineInfo) -> Result<(), FieldError> {
    opt_text("machine.product", m.product.as_deref(), 256)?;
    if let Some(a) = &m.architecture {
        token("machine.architecture", a, 32, "_", "an architecture")?;
    }
    opt_text("machine.kernel", m.kernel.as_deref(), 256)?;
    opt_text("machine.cpu_model", m.cpu_model.as_deref(), 256)?;
    opt_text("machine.nvidia_driver", m.nvidia_driver.as_deref(), 64)
}

fn pci_tree(pci: &PciTopology) -> Result<(), FieldError> {
    bounded("pci.host_bridges", &pci.host_bridges, MAX_PCI)?;
    bounded("pci.bridges", &pci.bridges, MAX_PCI)?;
    bounded("pci.switches", &pci.switches, MAX_PCI)?;
    bounded("pci.nvswitches", &pci.nvswitches, MAX_PCI)?;
    for (i, h) in pci.host_bridges.iter().enumerate() {
        token(
            || format!("pci.host_bridges[{i}].id"),
            &h.id,
            128,
            ":.@_-",
            "a host bridge id",
        )?;
    }
    for (i, b) in pci.bridges.iter().enumerate() {
        gbps(
            || format!("pci.bridges[{i}].link.bandwidth_gbps"),
            b.link.bandwidth_gbps,
            false,
        )?;
        // Empty when the source does not say (an NCCL topology file).
        if !(b.vendor_id.is_empty() && b.device_id.is_empty()) {
            hex_id(
                || format!("pci.bridges[{i}]"),
                &format!("{}:{}", b.vendor_id, b.device_id),
            )?;
        }
    }
    for (i, sw) in pci.switches.iter().enumerate() {
        if let Some(id) = &sw.pci_id {
            hex_id(|| format!("pci.switches[{i}].pci_id"), id)?;
        }
        bounded(
            || format!("pci.switches[{i}].downstream_ports"),
            &sw.downstream_ports,
            MAX_PCI,
        )?;
    }
    Ok(())
}

fn gpu(i: usize, g: &Gpu) -> Result<(), FieldError> {
    text(|| format!("gpus[{i}].name"), &g.name, 128)?;
    if let Some(u) = &g.uuid {
        token(|| format!("gpus[{i}].uuid"), u, 128, "-", "a GPU UUID")?;
    }
    if let Some(cc) = &g.compute_capability {
        token(
            || format!("gpus[{i}].compute_capability"),
            cc,
            8,
            ".",
            "a compute capability",
        )?;
    }
    placement(|| format!("gpus[{i}]"), &g.placement)?;
    if let Some(l) = &g.nvlinks {
        bounded(|| format!("gpus[{i}].nvlinks"), l, MAX_NVLINKS)?;
        for (j, link) in l.iter().enumerate() {
            gbps(
                || format!("gpus[{i}].nvlinks[{j}].bandwidth_gbps"),
                link.bandwidth_gbps,
                true,
            )?;
        }
    }
    if let Some(c) = &g.c2c {
        if !(1..=MAX_NVLINKS as u32).contains(&c.links) {
            return Err(err(format!("gpus[{i}].c2c"), "links 1 to 64"));
        }
        gbps(|| format!("gpus[{i}].c2c.gbps_per_link"), c.gbps_per_link, false)?;
    }
    if let Some(f) = &g.fabric {
        fabric(i, f)?;
    }
    Ok(())
}

fn fabric(i: usize, f: &super::nvfabric::GpuFabric) -> Result<(), FieldError> {
    if let Some(st) = &f.status {
        token(|| format!("gpus[{i}].fabric.status"), st, 64, "_", "an NVML status")?;
    }
    if let Some(u) = &f.cluster_uuid {
        let shape = u.len() == 36
            && u.char_indices().all(|(k, c)| {
                if [8, 13, 18, 23].contains(&k) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        if !shape {
            return Err(err(
                format!("gpus[{i}].fabric.cluster_uuid"),
                "not a UUID (8-4-4-4-12 hex)",
            ));
        }
    }
    if !(1..=3).contains(&f.struct_version) {
        return Err(err(format!("gpus[{i}].fabric.struct_version"), "1 to 3"));
    }
    if let Some(c) = f.health.as_ref().and_then(|h| h.incorrect_configuration.as_ref()) {
        token(
            || format!("gpus[{i}].fabric.health.incorrect_configuration"),
            c,
            64,
            "_",
            "a configuration fault",
        )?;
    }
    Ok(())
}

/// The ports of one multi-port NIC share a PCI function, and then its placement; a GPU's bus
/// id appears once, and is no NIC's.
fn one_device_per_function(s: &NodeSnapshot) -> Result<(), FieldError> {
    for (i, n) in s.nics.iter().enumerate() {
        let Some(p) = &n.pci else { continue };
        if s.nics[..i]
            .iter()
            .filter_map(|m| m.pci.as_ref())
            .any(|q| q.bdf == p.bdf && q != p)
        {
            return Err(err(
                format!("nics[{i}].pci"),
                format!("bus id {} is placed two ways by two NICs", p.bdf),
            ));
        }
    }
    let mut gpu_bdfs = std::collections::HashSet::new();
    for (i, g) in s.gpus.iter().enumerate() {
        let bdf = g.placement.bdf;
        let nic_has_it = s.nics.iter().any(|n| n.pci.as_ref().is_some_and(|p| p.bdf == bdf));
        if !gpu_bdfs.insert(bdf) || nic_has_it {
            return Err(err(format!("gpus[{i}].bdf"), format!("bus id {bdf} appears twice")));
        }
    }
    Ok(())
}

/// Reading a snapshot from outside is where the boundary starts: the layout this build
/// understands, then every field ([`check`]).
impl NodeSnapshot {
    /// Parse a snapshot from JSON, refusing layouts this build does not understand and any
    /// field outside its grammar (the trust boundary: `model::snapshot_check`).
    pub fn from_json(text: &str) -> Result<Self, SnapshotError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            schema_version: u32,
        }
        let version: VersionOnly = serde_json::from_str(text).map_err(SnapshotError::Json)?;
        Self::readable(version.schema_version)?;
        let snap: NodeSnapshot = serde_json::from_str(text).map_err(SnapshotError::Json)?;
        check(&snap)?;
        Ok(snap)
    }

    /// Refuse a snapshot whose layout this build does not read (it came from another build).
    pub(crate) fn check_version(&self) -> Result<(), SnapshotError> {
        Self::readable(self.schema_version)
    }

    fn readable(found: u32) -> Result<(), SnapshotError> {
        if (OLDEST_READABLE..=SCHEMA_VERSION).contains(&found) {
            Ok(())
        } else {
            Err(SnapshotError::Version {
                found,
                supported: SCHEMA_VERSION,
            })
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a topo-tune snapshot: {0}")]
    Json(serde_json::Error),
    #[error("snapshot schema_version {found} is not supported by this topo-tune (it reads versions 1 to {supported})")]
    Version { found: u32, supported: u32 },
    #[error("refused: {0}")]
    Field(#[from] FieldError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_change_an_nccl_list_are_refused() {
        for bad in [
            "mlx5_0,mlx5_1",
            "=mlx5_0",
            "mlx5_0:1",
            "^eth0",
            "eth 0",
            "eth0\u{1b}[2J",
            "",
            ".",
            "a/b",
        ] {
            assert!(device_name("nics[0].name", bad, 63).is_err(), "{bad:?}");
        }
        for ok in ["mlx5_0", "eth0", "ens1f0np0", "rdmap79s0", "bond0.100", "ib0"] {
            assert!(device_name("nics[0].name", ok, 15).is_ok(), "{ok}");
        }
        assert!(device_name("n", "abcdefghijklmnop", 15).is_err(), "IFNAMSIZ");
        assert!(text("gpus[0].name", "NVIDIA H200", 128).is_ok());
        assert!(text("gpus[0].name", "x\u{1b}]0;owned\u{7}", 128).is_err());
        assert!(text("gpus[0].name", "NVIDIA A100\u{202e}lanigiro", 128).is_err());
    }
}
