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
    /// `nvmlSystemGetCudaDriverVersion_v2` as `major.minor` (12080 → `12.8`).
    #[serde(default)]
    pub(crate) cuda_driver_version: Option<String>,
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
    /// `nvmlDeviceGetGpuFabricInfoV` (or the v1 call), as NVML answered; `null` when the
    /// driver has neither call.
    #[serde(default)]
    pub(crate) fabric: Option<DriverFabric>,
    /// NVLink-C2C links that are up (`NVML_FI_DEV_C2C_LINK_*`); `null` when the driver does
    /// not report C2C.
    #[serde(default)]
    pub(crate) c2c: Option<DriverC2c>,
    /// `NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON`: MB/s per active link.
    #[serde(default)]
    pub(crate) nvlink_speed_mbps: Option<u32>,
    /// Memory errors and clock slowdowns, as NVML answers them (`null`: not asked).
    #[serde(default)]
    pub(crate) health: Option<crate::model::snapshot::GpuHealth>,
}

/// NVML's `nvmlGpuFabricInfo_v3_t` (v2, v1: fewer fields), with the call's return code.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriverFabric {
    /// The call's `nvmlReturn_t` (0: answered; 3: not supported on this GPU).
    pub(crate) ret: u32,
    /// The struct version the driver filled (3, 2 or 1).
    pub(crate) version: u32,
    /// `clusterUuid`, 16 bytes as 32 hex digits.
    pub(crate) cluster_uuid: String,
    /// `status`: an `nvmlReturn_t`, meaningful once the state is completed.
    pub(crate) status: u32,
    pub(crate) clique_id: u32,
    /// `nvmlGpuFabricState_t`: 0 not supported, 1 not started, 2 in progress, 3 completed.
    pub(crate) state: u8,
    /// v2 and later.
    #[serde(default)]
    pub(crate) health_mask: Option<u32>,
    /// v3.
    #[serde(default)]
    pub(crate) health_summary: Option<u8>,
}

/// NVLink-C2C links reported up, and the max bandwidth NVML gives per link (MB/s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriverC2c {
    pub(crate) links: u32,
    pub(crate) max_bw_mbps: u32,
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
                fabric: raw::fabric_info(&nvml, &dev),
                c2c: raw::c2c_links(&nvml, &dev),
                nvlink_speed_mbps: raw::field(
                    &nvml,
                    &dev,
                    nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON,
                    0,
                )
                .filter(|s| *s > 0),
                health: Some(health(&nvml, &dev)),
            });
        }
        Ok(DriverReport {
            driver_version: nvml.sys_driver_version().ok(),
            cuda_driver_version: nvml.sys_cuda_driver_version().ok().map(cuda_version),
            gpus,
        })
    }
}

/// `12080` → `12.8` (NVML's `CUDA_VERSION` encoding: major × 1000 + minor × 10).
fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// What NVML says of a GPU's health without traffic; a call the GPU does not support is
/// `None` (ECC off, no row remapper before Ampere, no page retirement after it).
fn health(nvml: &nvml_wrapper::Nvml, dev: &nvml_wrapper::Device) -> crate::model::snapshot::GpuHealth {
    use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
    let remap = raw::remapped_rows(nvml, dev);
    crate::model::snapshot::GpuHealth {
        ecc_uncorrected: dev
            .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .ok(),
        retired_pages_dbe: dev
            .retired_pages(RetirementCause::DoubleBitEccError)
            .ok()
            .map(|p| u32::try_from(p.len()).unwrap_or(u32::MAX)),
        retirement_pending: dev.are_pages_pending_retired().ok(),
        remapped_uncorrectable: remap.map(|r| r.0),
        remap_pending: remap.map(|r| r.1),
        remap_failed: remap.map(|r| r.2),
        clock_event_reasons: dev.current_throttle_reasons().ok().map(|r| r.bits()),
    }
}

/// The NVML calls nvml-wrapper does not wrap: the GPU fabric info and per-link C2C fields.
mod raw {
    use super::{DriverC2c, DriverFabric};
    use nvml_wrapper_sys::bindings as b;
    use std::mem::size_of;

    /// `NVML_STRUCT_VERSION(GpuFabricInfo, v)`: the struct's size, its version in the top byte.
    fn struct_version<T>(v: u32) -> u32 {
        size_of::<T>() as u32 | (v << 24)
    }

    fn hex(bytes: &[u8; 16]) -> String {
        bytes.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The newest struct version the driver fills: v3, else v2 (both through
    /// `nvmlDeviceGetGpuFabricInfoV`), else the v1 call; `None` when the driver has neither.
    pub(super) fn fabric_info(nvml: &nvml_wrapper::Nvml, dev: &nvml_wrapper::Device) -> Option<DriverFabric> {
        let lib = nvml.lib();
        // SAFETY: the handle is valid while `nvml` lives (it does for this call); each struct is
        // plain C data of the size its version field declares, zeroed, filled by NVML.
        unsafe {
            let handle = dev.handle();
            if let Ok(get_v) = lib.nvmlDeviceGetGpuFabricInfoV.as_ref() {
                let mut v3: b::nvmlGpuFabricInfo_v3_t = std::mem::zeroed();
                v3.version = struct_version::<b::nvmlGpuFabricInfo_v3_t>(3);
                let ret = get_v(handle, &mut v3);
                if ret != b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH {
                    return Some(DriverFabric {
                        ret,
                        version: 3,
                        cluster_uuid: hex(&v3.clusterUuid),
                        status: v3.status,
                        clique_id: v3.cliqueId,
                        state: v3.state,
                        health_mask: Some(v3.healthMask),
                        health_summary: Some(v3.healthSummary),
                    });
                }
                let mut v2: b::nvmlGpuFabricInfo_v2_t = std::mem::zeroed();
                v2.version = struct_version::<b::nvmlGpuFabricInfo_v2_t>(2);
                let ret = get_v(handle, (&mut v2 as *mut b::nvmlGpuFabricInfo_v2_t).cast());
                if ret != b::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH {
                    return Some(DriverFabric {
                        ret,
                        version: 2,
                        cluster_uuid: hex(&v2.clusterUuid),
                        status: v2.status,
                        clique_id: v2.cliqueId,
                        state: v2.state,
                        health_mask: Some(v2.healthMask),
                        health_summary: None,
                    });
                }
            }
            let get_v1 = lib.nvmlDeviceGetGpuFabricInfo.as_ref().ok()?;
            let mut v1: b::nvmlGpuFabricInfo_t = std::mem::zeroed();
            let ret = get_v1(handle, &mut v1);
            Some(DriverFabric {
                ret,
                version: 1,
                cluster_uuid: hex(&v1.clusterUuid),
                status: v1.status,
                clique_id: v1.cliqueId,
                state: v1.state,
                health_mask: None,
                health_summary: None,
            })
        }
    }

    /// C2C links whose status is up, and their max bandwidth, as NCCL reads them
    /// (`NVML_FI_DEV_C2C_LINK_COUNT`, then `_GET_STATUS` and `_GET_MAX_BW` per link).
    /// One unsigned field value (`nvmlDeviceGetFieldValues`, with a scope: a link's index).
    pub(super) fn field(nvml: &nvml_wrapper::Nvml, dev: &nvml_wrapper::Device, field: u32, scope: u32) -> Option<u32> {
        let get = nvml.lib().nvmlDeviceGetFieldValues.as_ref().ok()?;
        // SAFETY: one zeroed `nvmlFieldValue_t` NVML fills; the handle is valid while `nvml`
        // lives.
        unsafe {
            let mut fv: b::nvmlFieldValue_t = std::mem::zeroed();
            fv.fieldId = field;
            fv.scopeId = scope;
            let ret = get(dev.handle(), 1, &mut fv);
            (ret == b::nvmlReturn_enum_NVML_SUCCESS && fv.nvmlReturn == b::nvmlReturn_enum_NVML_SUCCESS)
                .then_some(fv.value.uiVal)
        }
    }

    /// `nvmlDeviceGetRemappedRows`: (uncorrectable rows, a remap pending, a remap failed).
    pub(super) fn remapped_rows(nvml: &nvml_wrapper::Nvml, dev: &nvml_wrapper::Device) -> Option<(u32, bool, bool)> {
        let get = nvml.lib().nvmlDeviceGetRemappedRows.as_ref().ok()?;
        let (mut corr, mut unc, mut pending, mut failed) = (0u32, 0u32, 0u32, 0u32);
        // SAFETY: four plain out-parameters NVML fills; the handle is valid while `nvml` lives.
        let ret = unsafe { get(dev.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
        (ret == b::nvmlReturn_enum_NVML_SUCCESS).then_some((unc, pending != 0, failed != 0))
    }

    pub(super) fn c2c_links(nvml: &nvml_wrapper::Nvml, dev: &nvml_wrapper::Device) -> Option<DriverC2c> {
        let value = |f: u32, scope: u32| field(nvml, dev, f, scope);
        let count = value(b::field_id::NVML_FI_DEV_C2C_LINK_COUNT, 0)?;
        let mut links = 0;
        let mut max_bw_mbps = 0;
        for l in 0..count.min(64) {
            if value(b::field_id::NVML_FI_DEV_C2C_LINK_GET_STATUS, l) == Some(1) {
                if let Some(bw) = value(b::field_id::NVML_FI_DEV_C2C_LINK_GET_MAX_BW, l) {
                    links += 1;
                    max_bw_mbps = bw;
                }
            }
        }
        (links > 0).then_some(DriverC2c { links, max_bw_mbps })
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
