//! The path matrix as `nvidia-smi topo -m` prints it: same classes, legend and NIC legend,
//! columns aligned with spaces, plus a `Link` column that flags degraded PCIe links.

use crate::graph::paths::{PathMatrix, LEGEND};
use std::fmt::Write;

/// How the GPU↔GPU cells know NVLink, for the legend.
pub(crate) enum NvlinkShown {
    /// Read from the driver: nvidia-smi's own view, nothing to add.
    Driver,
    /// Read from a file (hwloc's NVLinkBandwidth matrix, an NCCL topology file): said.
    File(&'static str),
    /// The source cannot say: the cells show PCIe paths only.
    Unknown,
}

/// What the snapshot says about its GPUs' NVLink, for [`render`].
pub(crate) fn nvlink_shown(s: &crate::model::NodeSnapshot) -> NvlinkShown {
    use crate::model::snapshot::NvlinkSource;
    if s.gpus.len() < 2 {
        return NvlinkShown::Driver;
    }
    match s.gpus.iter().find_map(|g| g.nvlink_source) {
        Some(NvlinkSource::Nvml) => NvlinkShown::Driver,
        Some(NvlinkSource::HwlocDistances) => NvlinkShown::File("hwloc's NVLinkBandwidth matrix"),
        Some(NvlinkSource::NcclFile) => NvlinkShown::File("the NCCL topology file's <nvlink> elements"),
        None if s.gpus.iter().any(|g| g.nvlinks.is_some()) => NvlinkShown::Driver,
        None => NvlinkShown::Unknown,
    }
}

/// The matrix, with a line under the legend saying where NVLink came from when not the driver.
pub(crate) fn render(m: &PathMatrix, nvlink: NvlinkShown) -> String {
    let mut header: Vec<String> = vec![String::new()];
    header.extend(m.devices.iter().map(|d| d.label.clone()));
    header.extend(["CPU Affinity", "NUMA Affinity", "Link"].map(String::from));
    let mut rows = vec![header];
    for (i, d) in m.devices.iter().enumerate() {
        let mut row = vec![d.label.clone()];
        row.extend(m.classes[i].iter().map(|c| c.to_string()));
        row.push(d.cpu_affinity.clone());
        row.push(d.numa_affinity.clone());
        row.push(
            d.degraded_link
                .as_ref()
                .map_or_else(|| "ok".to_string(), |l| format!("DEGRADED {l}")),
        );
        rows.push(row);
    }
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| format!("{cell:<w$}", w = widths[c]))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    let _ = write!(out, "\n{LEGEND}\n");
    if let NvlinkShown::File(source) = nvlink {
        let _ = writeln!(
            out,
            "\n  NV# read from {source} (no driver was asked): links as the file counts them."
        );
    }
    if matches!(nvlink, NvlinkShown::Unknown) {
        let _ = write!(
            out,
            "\n  NVLink UNKNOWN: this source does not say whether the GPUs have NVLink (no driver, or a file\n  \
             that omits it); GPU-GPU cells show PCIe paths only. `plan` judges NVLink from the GPU part\n  \
             and NVSwitch functions, or from cluster.yaml's `nvlink:` (see its notes).\n"
        );
    }
    let nics: Vec<_> = m.devices.iter().filter(|d| d.label.starts_with("NIC")).collect();
    if !nics.is_empty() {
        let _ = write!(out, "\nNIC Legend:\n\n");
        for d in nics {
            let _ = writeln!(out, "  {}: {}", d.label, d.name);
        }
    }
    out
}
