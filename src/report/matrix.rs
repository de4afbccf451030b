//! The path matrix as `nvidia-smi topo -m` prints it: same classes, legend and NIC legend,
//! columns aligned with spaces, plus a `Link` column that flags degraded PCIe links.

use crate::graph::paths::{PathMatrix, LEGEND};
use std::fmt::Write;

/// The matrix; `nvlink_unknown`: the source cannot say whether GPUs have NVLink, so the
/// legend says the GPU↔GPU cells show PCIe paths only.
pub(crate) fn render(m: &PathMatrix, nvlink_unknown: bool) -> String {
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
    if nvlink_unknown {
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
