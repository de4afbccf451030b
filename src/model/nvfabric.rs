//! A GPU's multi-node NVLink fabric as NVML reports it (`nvmlDeviceGetGpuFabricInfoV`:
//! cluster UUID, clique id, state, status, health), decoded field by field, and the NVLink
//! domain a node's GPUs form: `<clusterUuid>.<cliqueId>`, the string GPU Feature Discovery
//! labels a node with (`nvidia.com/gpu.clique`). Pure. Sources: NVML's fabric definitions
//! (`nvmlGpuFabricInfo_v3_t`, `NVML_GPU_FABRIC_HEALTH_MASK_*`), NCCL's `src/mnnvl.cc`, cited in
//! docs/references.md.

use serde::{Deserialize, Serialize};

/// `nvmlGpuFabricState_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    NotSupported,
    NotStarted,
    InProgress,
    Completed,
}

impl FabricState {
    /// NVML's number (0 to 3); anything else is not a state NVML defines.
    pub fn from_nvml(v: u8) -> Option<FabricState> {
        Some(match v {
            0 => FabricState::NotSupported,
            1 => FabricState::NotStarted,
            2 => FabricState::InProgress,
            3 => FabricState::Completed,
            _ => return None,
        })
    }
}

/// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*` (struct version 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthSummary {
    NotSupported,
    Healthy,
    Unhealthy,
    LimitedCapacity,
}

impl HealthSummary {
    pub fn from_nvml(v: u8) -> Option<HealthSummary> {
        Some(match v {
            0 => HealthSummary::NotSupported,
            1 => HealthSummary::Healthy,
            2 => HealthSummary::Unhealthy,
            3 => HealthSummary::LimitedCapacity,
            _ => return None,
        })
    }
}

/// The health mask decoded per field (each field is 2 bits, the configuration field 4): `None`
/// where the driver says the field is not supported. `0xaa` is all four flags FALSE: healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricHealth {
    /// The raw `healthMask`, as NCCL logs it.
    pub mask: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<HealthSummary>,
    pub degraded_bandwidth: Option<bool>,
    pub route_recovery_in_progress: Option<bool>,
    pub route_unhealthy: Option<bool>,
    pub access_timeout_recovery: Option<bool>,
    /// `none` when the configuration is correct, else what is wrong (`incorrect_sysguid`,
    /// `incorrect_chassis_sn`, `no_partition`, `insufficient_nvlinks`, `incompatible_gpu_fw`,
    /// `invalid_location`); `null` when not supported.
    pub incorrect_configuration: Option<String>,
}

impl FabricHealth {
    /// Decode NVML's mask (shift, width per field as `NVML_GPU_FABRIC_HEALTH_MASK_*`).
    pub fn decode(mask: u32, summary: Option<HealthSummary>) -> FabricHealth {
        // 1 = TRUE (or "in progress"), 2 = FALSE, 0 = not supported.
        let flag = |shift: u32| match (mask >> shift) & 0x3 {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        };
        let config = match (mask >> 8) & 0xf {
            1 => Some("none"),
            2 => Some("incorrect_sysguid"),
            3 => Some("incorrect_chassis_sn"),
            4 => Some("no_partition"),
            5 => Some("insufficient_nvlinks"),
            6 => Some("incompatible_gpu_fw"),
            7 => Some("invalid_location"),
            _ => None,
        };
        FabricHealth {
            mask,
            summary,
            degraded_bandwidth: flag(0),
            route_recovery_in_progress: flag(2),
            route_unhealthy: flag(4),
            access_timeout_recovery: flag(6),
            incorrect_configuration: config.map(str::to_string),
        }
    }

    /// What is wrong, in words (empty when nothing is).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.summary == Some(HealthSummary::Unhealthy) {
            out.push("health summary: unhealthy".to_string());
        }
        if self.summary == Some(HealthSummary::LimitedCapacity) {
            out.push("health summary: limited capacity".to_string());
        }
        let flags = [
            (self.degraded_bandwidth, "NVLink bandwidth degraded"),
            (self.route_recovery_in_progress, "route recovery in progress"),
            (self.route_unhealthy, "route unhealthy"),
            (self.access_timeout_recovery, "access timeout recovery in progress"),
        ];
        out.extend(
            flags
                .iter()
                .filter(|(f, _)| *f == Some(true))
                .map(|(_, w)| w.to_string()),
        );
        if let Some(c) = self.incorrect_configuration.as_deref().filter(|c| *c != "none") {
            out.push(format!("incorrect configuration: {c}"));
        }
        out
    }
}

/// One GPU's fabric info.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFabric {
    pub state: FabricState,
    /// NVML's `status` once the state is completed: `success`, or the error NVML names
    /// (`NVML_ERROR_…` in lower case without the prefix); `null` before completion.
    pub status: Option<String>,
    /// `8-4-4-4-12` hex; `null` when all zero (no domain: NCCL refuses a zero UUID).
    pub cluster_uuid: Option<String>,
    pub clique_id: Option<u32>,
    /// Struct version 2 and later.
    pub health: Option<FabricHealth>,
    /// The `nvmlGpuFabricInfo` version the driver answered (1 to 3).
    pub struct_version: u32,
}

/// The UUID's canonical text, or `None` when all bytes are zero.
pub(crate) fn uuid_text(bytes: &[u8; 16]) -> Option<String> {
    if bytes.iter().all(|b| *b == 0) {
        return None;
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// Why a GPU is in no NVLink domain (what `GpuFabric::domain` refuses).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotInDomain {
    #[error("{}", format!("fabric state {:?}", .0).to_lowercase())]
    State(FabricState),
    #[error("fabric status {0}")]
    Status(String),
    #[error("no fabric status")]
    NoStatus,
    #[error("an all-zero cluster UUID")]
    ZeroUuid,
    #[error("no clique id")]
    NoClique,
}

impl GpuFabric {
    /// The GPU's domain, `<clusterUuid>.<cliqueId>`, or why it is in none. As NCCL decides
    /// (src/mnnvl.cc): the state must be completed, the status a success and the UUID not zero.
    pub fn domain(&self) -> Result<String, NotInDomain> {
        if self.state != FabricState::Completed {
            return Err(NotInDomain::State(self.state));
        }
        match self.status.as_deref() {
            Some("success") => {}
            Some(other) => return Err(NotInDomain::Status(other.to_string())),
            None => return Err(NotInDomain::NoStatus),
        }
        let uuid = self.cluster_uuid.as_deref().ok_or(NotInDomain::ZeroUuid)?;
        let clique = self.clique_id.ok_or(NotInDomain::NoClique)?;
        Ok(format!("{uuid}.{clique}"))
    }
}

/// Why a node's GPUs form no one domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoDomain {
    /// No GPU reported fabric info (no driver, a file, an older driver).
    NotReported,
    /// The driver says the GPUs are on no multi-node fabric (H100/H200 HGX, PCIe cards).
    NotSupported,
    /// Some GPU is not (yet) a domain member, with why.
    NotMember { gpu: usize, why: String },
    /// GPUs name different domains (GPU Feature Discovery then labels none).
    Mixed(Vec<String>),
}

/// The node's NVLink domain: every GPU reports the same one (GPU Feature Discovery labels a
/// node only then), or why there is none. `fabrics`: each GPU's info, `None` where it gave none.
pub(crate) fn node_domain(fabrics: &[Option<&GpuFabric>]) -> Result<String, NoDomain> {
    if fabrics.is_empty() || fabrics.iter().all(Option::is_none) {
        return Err(NoDomain::NotReported);
    }
    if fabrics.iter().flatten().all(|f| f.state == FabricState::NotSupported) {
        return Err(NoDomain::NotSupported);
    }
    let mut seen: Vec<String> = Vec::new();
    for (gpu, f) in fabrics.iter().enumerate() {
        let Some(f) = f else {
            return Err(NoDomain::NotMember {
                gpu,
                why: "no fabric info".into(),
            });
        };
        let d = f.domain().map_err(|why| NoDomain::NotMember {
            gpu,
            why: why.to_string(),
        })?;
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    match seen.len() {
        1 => Ok(seen.remove(0)),
        _ => Err(NoDomain::Mixed(seen)),
    }
}

/// NVML's name for an `nvmlReturn_t`, lower case without `NVML_ERROR_` (`not_supported`).
pub(crate) fn nvml_return_name(code: u32) -> String {
    let name = match code {
        0 => "success",
        1 => "uninitialized",
        2 => "invalid_argument",
        3 => "not_supported",
        4 => "no_permission",
        6 => "not_found",
        9 => "driver_not_loaded",
        10 => "timeout",
        13 => "function_not_found",
        15 => "gpu_is_lost",
        16 => "reset_required",
        17 => "operating_system",
        19 => "in_use",
        21 => "no_data",
        25 => "argument_version_mismatch",
        27 => "not_ready",
        29 => "invalid_state",
        999 => "unknown",
        other => return format!("error_{other}"),
    };
    name.to_string()
}

/// Bytes from 32 hex digits (how a driver answer carries `clusterUuid`).
pub(crate) fn uuid_bytes(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// A domain name topo-tune accepts (from NVML or cluster.yaml): what reaches Slurm's
/// `BlockName=`, a Kubernetes label value and the plan: letters, digits, `-`, `_`, `.`, 1 to 63
/// characters (a label value's limit), not starting or ending with a separator.
pub(crate) fn domain_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(uuid: &str, clique: u32) -> GpuFabric {
        GpuFabric {
            state: FabricState::Completed,
            status: Some("success".into()),
            cluster_uuid: Some(uuid.into()),
            clique_id: Some(clique),
            health: Some(FabricHealth::decode(0xaa, Some(HealthSummary::Healthy))),
            struct_version: 3,
        }
    }

    #[test]
    fn the_healthy_mask_is_healthy_field_by_field() {
        // 0xaa = 10 10 10 10b: every flag FALSE (github.com/NVIDIA/nccl/issues/2186 read it
        // as four paths down).
        let h = FabricHealth::decode(0xaa, None);
        assert_eq!(h.degraded_bandwidth, Some(false));
        assert_eq!(h.route_recovery_in_progress, Some(false));
        assert_eq!(h.route_unhealthy, Some(false));
        assert_eq!(h.access_timeout_recovery, Some(false));
        assert_eq!(h.incorrect_configuration, None, "bits 8-11 are 0: not supported");
        assert!(h.problems().is_empty());
        let with_config = FabricHealth::decode(0x1aa, None);
        assert_eq!(with_config.incorrect_configuration.as_deref(), Some("none"));
        assert!(with_config.problems().is_empty());
    }

    #[test]
    fn each_fault_is_named() {
        let degraded = FabricHealth::decode(0xa9, None);
        assert_eq!(degraded.degraded_bandwidth, Some(true));
        assert_eq!(degraded.problems(), ["NVLink bandwidth degraded"]);
        let route = FabricHealth::decode(0x9a, Some(HealthSummary::Unhealthy));
        assert_eq!(route.route_unhealthy, Some(true));
        assert_eq!(route.problems(), ["health summary: unhealthy", "route unhealthy"]);
        let partition = FabricHealth::decode(0x4aa, None);
        assert_eq!(partition.problems(), ["incorrect configuration: no_partition"]);
        assert_eq!(FabricHealth::decode(0, None).degraded_bandwidth, None);
    }

    #[test]
    fn a_uuid_of_zeros_is_no_uuid() {
        assert_eq!(uuid_text(&[0; 16]), None);
        let mut b = [0u8; 16];
        b[0] = 0xdc;
        b[15] = 0x78;
        assert_eq!(uuid_text(&b).as_deref(), Some("dc000000-0000-0000-0000-000000000078"));
    }

    #[test]
    fn a_domain_needs_completed_success_and_a_uuid() {
        let ok = completed("dc6e40c4-d722-4357-9ba6-5291dd461278", 32766);
        assert_eq!(ok.domain().unwrap(), "dc6e40c4-d722-4357-9ba6-5291dd461278.32766");
        let mut busy = ok.clone();
        busy.state = FabricState::InProgress;
        assert_eq!(busy.domain().unwrap_err().to_string(), "fabric state inprogress");
        let mut failed = ok.clone();
        failed.status = Some("not_ready".into());
        assert!(failed.domain().unwrap_err().to_string().contains("not_ready"));
        let mut zero = ok.clone();
        zero.cluster_uuid = None;
        assert!(zero.domain().unwrap_err().to_string().contains("all-zero"));
    }

    #[test]
    fn a_node_has_a_domain_only_when_every_gpu_agrees() {
        let a = completed("dc6e40c4-d722-4357-9ba6-5291dd461278", 2);
        let b = completed("dc6e40c4-d722-4357-9ba6-5291dd461278", 3);
        assert_eq!(
            node_domain(&[Some(&a), Some(&a)]).unwrap(),
            "dc6e40c4-d722-4357-9ba6-5291dd461278.2"
        );
        assert!(matches!(node_domain(&[Some(&a), Some(&b)]), Err(NoDomain::Mixed(v)) if v.len() == 2));
        assert_eq!(node_domain(&[None, None]), Err(NoDomain::NotReported));
        assert!(matches!(
            node_domain(&[Some(&a), None]),
            Err(NoDomain::NotMember { gpu: 1, .. })
        ));
        let unsupported = GpuFabric {
            state: FabricState::NotSupported,
            status: None,
            cluster_uuid: None,
            clique_id: None,
            health: None,
            struct_version: 3,
        };
        assert_eq!(node_domain(&[Some(&unsupported)]), Err(NoDomain::NotSupported));
    }

    #[test]
    fn domain_names_fit_slurm_and_kubernetes() {
        assert!(domain_name_ok("dc6e40c4-d722-4357-9ba6-5291dd461278.32766"));
        assert!(domain_name_ok("nvl72-rack-1"));
        for bad in ["", "-x", "x-", "a b", "a/b", &"x".repeat(64), "a,b"] {
            assert!(!domain_name_ok(bad), "{bad:?}");
        }
    }
}
