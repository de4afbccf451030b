//! GPU facts from the NVIDIA driver (NVML), behind [`GpuDriver`] so tests can answer for it.
//!
//! NVML is loaded at run time (nvml-wrapper dlopens `libnvidia-ml.so.1`), so a machine without
//! the driver builds and runs; the probe then falls back to GPUs seen on PCI.

use crate::model::pci::Bdf;
use crate::model::CpuList;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `NVML_NVLINK_MAX_LINKS` in nvml.h (18 since Hopper).
const NVLINK_MAX_LINKS: u32 = 18;

/// What the driver says, shaped like NVML's own answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriverReport {
    pub(crate) driver_version: Option<String>,
    pub(crate) gpus: Vec<DriverGpu>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriverGpu {
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) uuid: Option<String>,
    /// NVML's bus id (`00000000:00:06.0`).
    pub(crate) bus_id: String,
    /// `nvmlDeviceGetNumaNodeId`: only Grace-class GPUs answer (their own memory node).
    pub(crate) numa_node: Option<u32>,
    pub(crate) pcie_current_gen: Option<u32>,
    pub(crate) pcie_current_width: Option<u32>,
    pub(crate) pcie_max_gen: Option<u32>,
    pub(crate) pcie_max_width: Option<u32>,
    /// `nvmlDeviceGetCpuAffinity`, as a CPU list.
    pub(crate) cpu_affinity: Option<String>,
    pub(crate) compute_capability: Option<(i32, i32)>,
    pub(crate) nvlinks: Vec<DriverNvLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriverNvLink {
    pub(crate) link: u32,
    pub(crate) active: bool,
    pub(crate) version: Option<u32>,
    pub(crate) remote_bus_id: Option<String>,
}

/// Why the driver gave no answer. None of these is an error for the probe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DriverError {
    #[error("NVIDIA driver library not found ({0}); install the NVIDIA driver's NVML library (Debian/Ubuntu: libnvidia-ml1 or nvidia-utils-<version>)")]
    LibraryMissing(String),
    #[error("NVIDIA kernel driver is not loaded (NVML: {0})")]
    NotLoaded(String),
    #[error("NVML failed: {0}")]
    Other(String),
    #[error("NVML fixture {path}: {reason}")]
    Fixture { path: String, reason: String },
}

pub(crate) trait GpuDriver {
    fn report(&self) -> Result<DriverReport, DriverError>;
}

/// The real driver, through NVML.
pub(crate) struct Nvml {
    pub(crate) lib_path: Option<PathBuf>,
}

/// A recorded answer (JSON of [`DriverReport`]), for machines this one cannot be.
pub(crate) struct NvmlFixture {
    pub(crate) path: PathBuf,
}

/// No driver at all (used for `--fsroot` and hwloc XML: the GPUs there are not this machine's).
pub(crate) struct NoDriver;

impl GpuDriver for NoDriver {
    fn report(&self) -> Result<DriverReport, DriverError> {
        Err(DriverError::LibraryMissing(
            "not queried for a machine described by files".into(),
        ))
    }
}

impl GpuDriver for NvmlFixture {
    fn report(&self) -> Result<DriverReport, DriverError> {
        let bad = |reason: String| DriverError::Fixture {
            path: self.path.display().to_string(),
            reason,
        };
        let text = crate::input::read_text(&self.path, crate::input::FIXTURE_LIMIT, "NVML fixture")
            .map_err(|e| bad(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
    }
}

impl GpuDriver for Nvml {
    fn report(&self) -> Result<DriverReport, DriverError> {
        use nvml_wrapper::error::NvmlError;
        let nvml = match &self.lib_path {
            Some(p) => nvml_wrapper::Nvml::builder().lib_path(p.as_os_str()).init(),
            None => nvml_wrapper::Nvml::init(),
        };
        let nvml = nvml.map_err(|e| match e {
            NvmlError::LibloadingError(l) => DriverError::LibraryMissing(l.to_string()),
            NvmlError::DriverNotLoaded => DriverError::NotLoaded(e.to_string()),
            NvmlError::LibraryNotFound => DriverError::LibraryMissing(e.to_string()),
            other => DriverError::Other(other.to_string()),
        })?;
        let count = nvml.device_count().map_err(|e| DriverError::Other(e.to_string()))?;
        let mut gpus = Vec::new();
        for i in 0..count {
            let dev = nvml
                .device_by_index(i)
                .map_err(|e| DriverError::Other(format!("GPU {i}: {e}")))?;
            let bus_id = dev
                .pci_info()
                .map_err(|e| DriverError::Other(format!("GPU {i} PCI info: {e}")))?
                .bus_id;
            let words = dev.cpu_affinity(cpu_words()).ok();
            let cpu_affinity = words.map(|w| affinity_words_to_list(&w).to_string());
            let nvlinks = (0..NVLINK_MAX_LINKS)
                .filter_map(|l| {
                    let link = dev.link_wrapper_for(l);
                    // NotSupported on the first link means no NVLink at all (PCIe-only GPU).
                    let active = link.is_active().ok()?;
                    Some(DriverNvLink {
                        link: l,
                        active,
                        version: link.version().ok(),
                        remote_bus_id: if active {
                            link.remote_pci_info().ok().map(|p| p.bus_id)
                        } else {
                            None
                        },
                    })
                })
                .collect();
            gpus.push(DriverGpu {
                index: dev.index().unwrap_or(i),
                name: dev.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
                uuid: dev.uuid().ok(),
                bus_id,
                numa_node: dev.numa_node_id().ok(),
                pcie_current_gen: dev.current_pcie_link_gen().ok(),
                pcie_current_width: dev.current_pcie_link_width().ok(),
                pcie_max_gen: dev.max_pcie_link_gen().ok(),
                pcie_max_width: dev.max_pcie_link_width().ok(),
                cpu_affinity,
                compute_capability: dev.cuda_compute_capability().ok().map(|c| (c.major, c.minor)),
                nvlinks,
            });
        }
        Ok(DriverReport {
            driver_version: nvml.sys_driver_version().ok(),
            gpus,
        })
    }
}

/// Enough 64-bit words for every possible CPU of this machine (at least 4, as nvidia-smi asks).
fn cpu_words() -> usize {
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| CpuList::parse(&s).ok());
    let max = possible.and_then(|p| p.iter().last()).unwrap_or(255) as usize;
    (max / 64 + 1).max(4)
}

/// NVML's affinity is an array of unsigned longs, lowest CPUs in word 0.
pub(crate) fn affinity_words_to_list(words: &[std::os::raw::c_ulong]) -> CpuList {
    let bits = std::mem::size_of::<std::os::raw::c_ulong>() * 8;
    CpuList::from_ids(words.iter().enumerate().flat_map(|(w, word)| {
        (0..bits)
            .filter(move |b| word & (1 << b) != 0)
            .map(move |b| (w * bits + b) as u32)
    }))
}

pub(crate) fn parse_bus_id(bus_id: &str) -> Option<Bdf> {
    bus_id.trim().parse().ok()
}

/// The driver to use for a probe: a fixture if given, none for file-described machines,
/// else the real NVML.
pub(crate) fn driver_for(fixture: Option<&Path>, describes_this_machine: bool) -> Box<dyn GpuDriver> {
    match fixture {
        Some(p) => Box::new(NvmlFixture { path: p.to_path_buf() }),
        None if describes_this_machine => Box::new(Nvml { lib_path: None }),
        None => Box::new(NoDriver),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_words_like_the_h200_capture() {
        // nvml.txt: "cpu affinity words [65535, 0, 0, 0]"
        assert_eq!(affinity_words_to_list(&[65535, 0, 0, 0]).to_string(), "0-15");
        assert_eq!(affinity_words_to_list(&[0, 1]).to_string(), "64");
    }

    #[test]
    fn missing_library_is_a_clean_error_not_a_crash() {
        let nvml = Nvml {
            lib_path: Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")),
        };
        match nvml.report() {
            Err(DriverError::LibraryMissing(msg)) => assert!(msg.contains("nonexistent")),
            other => panic!("expected LibraryMissing, got {other:?}"),
        }
    }
}
