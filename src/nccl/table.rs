//! What topo-tune knows about NCCL's variables: syntax, valid values, the first version that
//! reads each, and NCCL's own class ("system configuration" or "debugging", env.rst); NCCL's
//! defaults by version beside each entry. Sources: docs/references.md (NVIDIA/nccl tags
//! 2.18.1–2.30.7).

use crate::model::NcclVersion;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// "System configuration" in NCCL's docs: fine in a config file.
    System,
    /// "Debugging": "should not be used in production nor retained in scripts". Never written
    /// by rule; only a canary may try one.
    Debug,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Integer in an inclusive range.
    Int(i64, i64),
    /// One of these exact strings (case matters).
    OneOf(&'static [&'static str]),
    /// NCCL path level name (`LOC NVL NVB PIX PXB PXN PHB SYS`, `C2C` ≥ 2.26, `P2C` ≥ 2.27);
    /// compared with strcmp: lower case is silently ignored by NCCL, so it is refused here.
    Level,
    /// `[^][=]name[:port],...` device list (NCCL_IB_HCA, NCCL_SOCKET_IFNAME).
    DeviceList,
    /// An absolute path.
    Path,
    /// Comma list of subsystem names.
    SubsysList,
    /// Free text of safe characters (plugin names).
    Name,
}

#[derive(Debug, Clone, Copy)]
pub struct Var {
    pub name: &'static str,
    pub class: Class,
    pub syntax: Syntax,
    /// First NCCL version that reads it.
    pub since: NcclVersion,
}

const V2_0: NcclVersion = NcclVersion(2, 0, 0);
const LEVELS: &[&str] = &["LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "C2C", "P2C"];

pub(crate) const VARS: &[Var] = &[
    // NCCL's default: unset from 2.0.
    // RDMA devices to use; `=` makes names exact (mlx5_1 would also match mlx5_10..19)
    Var {
        name: "NCCL_IB_HCA",
        class: Class::System,
        syntax: Syntax::DeviceList,
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // bootstrap and socket interface; a wrong one fails every job at bootstrap
    Var {
        name: "NCCL_SOCKET_IFNAME",
        class: Class::System,
        syntax: Syntax::DeviceList,
        since: V2_0,
    },
    // NCCL's default: 2 from 2.0.
    // 0 keeps each ring on one NIC (rail-optimised fabrics)
    Var {
        name: "NCCL_CROSS_NIC",
        class: Class::System,
        syntax: Syntax::OneOf(&["0", "1", "2"]),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0; -1 from 2.21.0.
    // RoCE GID; -1 (2.21+) auto-selects RoCE v2
    Var {
        name: "NCCL_IB_GID_INDEX",
        class: Class::System,
        syntax: Syntax::Int(-1, 255),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0; -1 from 2.26.0.
    // traffic class; must match the fabric
    Var {
        name: "NCCL_IB_TC",
        class: Class::System,
        syntax: Syntax::Int(-1, 255),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0; -1 from 2.26.0.
    // service level; must match the fabric
    Var {
        name: "NCCL_IB_SL",
        class: Class::System,
        syntax: Syntax::Int(-1, 15),
        since: V2_0,
    },
    // NCCL's default: unset from 2.22.3.
    // traffic class of control messages
    Var {
        name: "NCCL_IB_FIFO_TC",
        class: Class::System,
        syntax: Syntax::Int(0, 255),
        since: NcclVersion(2, 22, 3),
    },
    // NCCL's default: 14 from 2.0; 18 from 2.14.0; 20 from 2.23.0.
    // 4.096 µs × 2^value
    Var {
        name: "NCCL_IB_TIMEOUT",
        class: Class::System,
        syntax: Syntax::Int(0, 31),
        since: V2_0,
    },
    // NCCL's default: 7 from 2.0.
    Var {
        name: "NCCL_IB_RETRY_CNT",
        class: Class::System,
        syntax: Syntax::Int(0, 7),
        since: V2_0,
    },
    // NCCL's default: /var/run/nvidia-topologyd/virtualTopology.xml from 2.0.
    // topology overlay; a malformed file fails every job
    Var {
        name: "NCCL_TOPO_FILE",
        class: Class::System,
        syntax: Syntax::Path,
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // a comma list only from 2.27
    Var {
        name: "NCCL_NET_PLUGIN",
        class: Class::System,
        syntax: Syntax::Name,
        since: V2_0,
    },
    // NCCL's default: unset from 2.19.0.
    Var {
        name: "NCCL_TUNER_PLUGIN",
        class: Class::System,
        syntax: Syntax::Name,
        since: NcclVersion(2, 19, 0),
    },
    // Read by tuner plugins (NCCL's example, topo-tune's), not by NCCL itself; in nccl.conf
    // NCCL exports it to the process's environment before it loads the plugin
    // (src/misc/param.cc setEnvFile).
    Var {
        name: "NCCL_TUNER_CONFIG_FILE",
        class: Class::System,
        syntax: Syntax::Path,
        since: NcclVersion(2, 19, 0),
    },
    // NCCL's default: 0 from 2.0.
    // SHARP/CollNet plugin
    Var {
        name: "NCCL_COLLNET_ENABLE",
        class: Class::System,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: -2 from 2.0.
    // threads × sockets ≤ 64
    Var {
        name: "NCCL_SOCKET_NTHREADS",
        class: Class::System,
        syntax: Syntax::Int(1, 16),
        since: V2_0,
    },
    // NCCL's default: -2 from 2.0.
    Var {
        name: "NCCL_NSOCKS_PERTHREAD",
        class: Class::System,
        syntax: Syntax::Int(1, 64),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0.
    // Azure sets 1 on NDv4/NDv5 with a topology file
    Var {
        name: "NCCL_IGNORE_CPU_AFFINITY",
        class: Class::System,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: AUTO from 2.28.0.
    // AUTO | MAX:N | ALL
    Var {
        name: "NCCL_NETDEVS_POLICY",
        class: Class::System,
        syntax: Syntax::Name,
        since: NcclVersion(2, 28, 0),
    },
    // NCCL's default: unset from 2.0.
    // INFO fleet-wide floods logs
    Var {
        name: "NCCL_DEBUG",
        class: Class::System,
        syntax: Syntax::OneOf(&["VERSION", "WARN", "INFO", "ABORT", "TRACE"]),
        since: V2_0,
    },
    // NCCL's default: INIT,BOOTSTRAP,ENV from 2.0.
    Var {
        name: "NCCL_DEBUG_SUBSYS",
        class: Class::System,
        syntax: Syntax::SubsysList,
        since: V2_0,
    },
    // NCCL's default: auto (-2) since 2.19 (0 in 2.18). `0` turns multi-node NVLink off
    // (src/mnnvl.cc): the NVLink guard refuses it on domain members.
    Var {
        name: "NCCL_CUMEM_ENABLE",
        class: Class::System,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: NcclVersion(2, 18, 0),
    },
    // NCCL's default: 2 (auto) since 2.21. `0` turns multi-node NVLink off: the NVLink guard
    // refuses it on domain members.
    Var {
        name: "NCCL_MNNVL_ENABLE",
        class: Class::System,
        syntax: Syntax::OneOf(&["0", "1", "2"]),
        since: NcclVersion(2, 21, 0),
    },
    // NCCL's default: PXB from 2.0.
    // GPUDirect RDMA distance
    Var {
        name: "NCCL_NET_GDR_LEVEL",
        class: Class::Debug,
        syntax: Syntax::Level,
        since: NcclVersion(2, 4, 0),
    },
    // NCCL's default: -2 from 2.0.
    Var {
        name: "NCCL_NET_GDR_READ",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: SYS from 2.0; PXB from 2.23.0.
    Var {
        name: "NCCL_P2P_LEVEL",
        class: Class::Debug,
        syntax: Syntax::Level,
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0.
    Var {
        name: "NCCL_P2P_DISABLE",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0.
    Var {
        name: "NCCL_SHM_DISABLE",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: 0 from 2.0.
    Var {
        name: "NCCL_IB_DISABLE",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // a bad token fails init from 2.24
    Var {
        name: "NCCL_ALGO",
        class: Class::Debug,
        syntax: Syntax::Name,
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // LL128 where unsupported can corrupt data
    Var {
        name: "NCCL_PROTO",
        class: Class::Debug,
        syntax: Syntax::Name,
        since: V2_0,
    },
    // NCCL's default: 512 from 2.0.
    // multiple of 32
    Var {
        name: "NCCL_NTHREADS",
        class: Class::Debug,
        syntax: Syntax::Int(64, 512),
        since: V2_0,
    },
    // NCCL's default: 4194304 from 2.0.
    Var {
        name: "NCCL_BUFFSIZE",
        class: Class::Debug,
        syntax: Syntax::Int(1, 1 << 30),
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // deprecated in 2.17 for NCCL_MIN_CTAS
    Var {
        name: "NCCL_MIN_NCHANNELS",
        class: Class::Debug,
        syntax: Syntax::Int(1, 64),
        since: V2_0,
    },
    // NCCL's default: unset from 2.0.
    // deprecated in 2.17 for NCCL_MAX_CTAS
    Var {
        name: "NCCL_MAX_NCHANNELS",
        class: Class::Debug,
        syntax: Syntax::Int(1, 64),
        since: V2_0,
    },
    // NCCL's default: 2 from 2.17.0.
    Var {
        name: "NCCL_NVLS_ENABLE",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1", "2"]),
        since: NcclVersion(2, 17, 0),
    },
    // NCCL's default: 2 from 2.18.1 (src/graph/paths.cc); a communicator config field from
    // 2.28, the variable overriding it (src/init.cc). Not in env.rst: measured, never by rule.
    Var {
        name: "NCCL_NCHANNELS_PER_NET_PEER",
        class: Class::Debug,
        syntax: Syntax::Int(1, 64),
        since: NcclVersion(2, 18, 0),
    },
    // NCCL's default: 1 from 2.0.
    Var {
        name: "NCCL_IB_QPS_PER_CONNECTION",
        class: Class::Debug,
        syntax: Syntax::Int(1, 128),
        since: V2_0,
    },
    // NCCL's default: 1 from 2.0; 0 from 2.20.0.
    Var {
        name: "NCCL_IB_SPLIT_DATA_ON_QPS",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: -2 from 2.0.
    Var {
        name: "NCCL_IB_ADAPTIVE_ROUTING",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1"]),
        since: V2_0,
    },
    // NCCL's default: 2 from 2.0.
    // 1 fails where relaxed ordering is missing
    Var {
        name: "NCCL_IB_PCI_RELAXED_ORDERING",
        class: Class::Debug,
        syntax: Syntax::OneOf(&["0", "1", "2"]),
        since: V2_0,
    },
];

/// Names that must never be in a config file, with why.
pub(crate) const REFUSED: &[(&str, &str)] = &[
    (
        "NCCL_GRAPH_FILE",
        "applies to every communicator: a job on a subset of GPUs fails init (NVIDIA/nccl#1008); emit it per job only",
    ),
    (
        "NCCL_CONF_FILE",
        "read from the process environment before any file: it has no effect inside a file",
    ),
    (
        "NCCL_ASYNC_ERROR_HANDLING",
        "a PyTorch variable, not NCCL's: set TORCH_NCCL_ASYNC_ERROR_HANDLING in the job environment",
    ),
];

pub fn lookup(name: &str) -> Option<&'static Var> {
    VARS.iter().find(|v| v.name == name)
}

/// Why a NAME=VALUE cannot go into an NCCL config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value}: {reason}")]
pub struct Rejection {
    pub name: String,
    pub value: String,
    pub reason: String,
}

/// Check one variable for a file read by NCCL `version` (when known).
pub(crate) fn validate(name: &str, value: &str, version: Option<NcclVersion>) -> Result<&'static Var, Rejection> {
    let reject = |reason: String| Rejection {
        name: name.to_string(),
        value: value.to_string(),
        reason,
    };
    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
        return Err(reject(format!("never written to a config file: {why}")));
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(reject(
            "a name is upper-case letters, digits and `_` (NCCL does not trim: `NAME =` defines another variable)"
                .into(),
        ));
    }
    let var = lookup(name)
        .ok_or_else(|| reject("unknown to topo-tune's NCCL table (a typo is silently ignored by NCCL)".into()))?;
    value_as_nccl_reads_it(value, &reject)?;
    if let Some(v) = version {
        if v < var.since {
            return Err(reject(format!("NCCL {v} does not read it (since {})", var.since)));
        }
    }
    of_its_syntax(var, value, version, &reject)?;
    if var.name == "NCCL_NTHREADS" && value.parse::<i64>().is_ok_and(|n| n % 32 != 0) {
        return Err(reject(
            "must be a multiple of 32 (NCCL resets it to 512 otherwise)".into(),
        ));
    }
    Ok(var)
}

/// What NCCL's config-file reader keeps in a value that the writer did not mean: it trims
/// nothing, has no quoting and no inline comments.
fn value_as_nccl_reads_it(value: &str, reject: &dyn Fn(String) -> Rejection) -> Result<(), Rejection> {
    if value.is_empty() {
        return Err(reject("empty value: an empty variable blocks NCCL's default".into()));
    }
    if value.len() > 1023 {
        return Err(reject("longer than NCCL's 1023-character limit".into()));
    }
    if let Some(c) = value.chars().find(|c| c.is_whitespace()) {
        return Err(reject(format!(
            "contains whitespace ({c:?}): NCCL keeps it in the value, so the setting never matches"
        )));
    }
    if value.contains('"') || value.contains('\'') {
        return Err(reject(
            "contains quotes: NCCL keeps them in the value (\"eth0\" is no interface)".into(),
        ));
    }
    if value.contains('#') {
        return Err(reject(
            "contains `#`: NCCL has no inline comments, the rest would be part of the value".into(),
        ));
    }
    Ok(())
}

/// NCCL 2.30.7 reads `<hca>[:<port>[:<rail>[:<plane>]]]` (src/misc/utils.cc
/// `parseStringList`: each field `atoi`, empty = -1); 2.30.4 and older read `<hca>:<port>` and
/// take `atoi` of everything after the first colon (utils.cc@v2.30.4-1 line 212), so
/// `mlx5_0::0` is port 0 there, which matches no port and drops the NIC. Rail and plane fields
/// are written only for an NCCL known to read them; every field is a number or empty (`atoi`
/// reads `x` as 0 without a word).
fn device_fields(
    name: &str,
    value: &str,
    version: Option<NcclVersion>,
    reject: &dyn Fn(String) -> Rejection,
) -> Result<(), Rejection> {
    let body = value.trim_start_matches('^').trim_start_matches('=');
    for item in body.split(',') {
        let fields: Vec<&str> = item.split(':').collect();
        if fields.len() > 4
            || fields[1..]
                .iter()
                .any(|f| !f.bytes().all(|b| b.is_ascii_digit()) || f.len() > 4)
        {
            return Err(reject(format!(
                "`{item}`: a device is `name[:port[:rail[:plane]]]`, each field a number or empty"
            )));
        }
        if fields.len() > 2 && (name != "NCCL_IB_HCA" || version.is_none_or(|v| v < NcclVersion(2, 30, 7))) {
            return Err(reject(format!(
                "`{item}`: rail and plane fields are read by NCCL_IB_HCA from NCCL 2.30.7; older NCCL reads the rest as a port number and drops the device"
            )));
        }
    }
    Ok(())
}

/// The value against the variable's syntax (levels by NCCL version).
fn of_its_syntax(
    var: &Var,
    value: &str,
    version: Option<NcclVersion>,
    reject: &dyn Fn(String) -> Rejection,
) -> Result<(), Rejection> {
    let ok = match var.syntax {
        Syntax::Int(lo, hi) => value.parse::<i64>().is_ok_and(|n| n >= lo && n <= hi),
        Syntax::OneOf(opts) => opts.contains(&value),
        Syntax::Level => {
            let known = LEVELS.contains(&value)
                && !(value == "C2C" && version.is_some_and(|v| v < NcclVersion(2, 26, 0)))
                && !(value == "P2C" && version.is_some_and(|v| v < NcclVersion(2, 27, 0)));
            if !known && LEVELS.contains(&value.to_ascii_uppercase().as_str()) {
                return Err(reject(format!(
                    "level names are upper case: NCCL silently ignores `{value}` (write {})",
                    value.to_ascii_uppercase()
                )));
            }
            known
        }
        Syntax::DeviceList => {
            device_fields(var.name, value, version, reject)?;
            let body = value.trim_start_matches('^').trim_start_matches('=');
            body.len() >= 2
                && body.split(',').all(|d| {
                    !d.is_empty()
                        && d.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
                })
        }
        Syntax::Path => value.starts_with('/') && !value.split('/').any(|c| c == ".."),
        Syntax::SubsysList => value
            .trim_start_matches('^')
            .split(',')
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c == '_')),
        Syntax::Name => value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | ',' | ';' | '^' | '/')),
    };
    if ok {
        return Ok(());
    }
    let expected = match var.syntax {
        Syntax::Int(lo, hi) => format!("an integer from {lo} to {hi}"),
        Syntax::OneOf(opts) => format!("one of {}", opts.join(", ")),
        Syntax::Level => "a level name: LOC NVL NVB PIX PXB PXN PHB SYS (C2C 2.26+, P2C 2.27+)".into(),
        Syntax::DeviceList => "a device list such as =mlx5_0,mlx5_1 or ^docker".into(),
        Syntax::Path => "an absolute path without `..`".into(),
        Syntax::SubsysList => "a comma list such as INIT,NET".into(),
        Syntax::Name => "a name".into(),
    };
    Err(reject(format!("expected {expected}")))
}

/// What every node-wide file may hold, whoever asked for the setting (a rule, cluster.yaml's
/// `nccl:`, a reviewed plan, a rollout record): a valid value for `version`, of NCCL's
/// "system configuration" class, and not a value that belongs in one job's environment.
pub(crate) fn check_node_wide(
    name: &str,
    value: &str,
    version: Option<NcclVersion>,
) -> Result<&'static Var, Rejection> {
    let var = validate(name, value, version)?;
    let reject = |reason: &str| Rejection {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    if var.class == Class::Debug {
        return Err(reject(
            "a debugging variable in NCCL's docs (\"should not be used in production\"): never written node-wide (a canary may try it)",
        ));
    }
    if name == "NCCL_DEBUG" && matches!(value, "INFO" | "TRACE") {
        return Err(reject(
            "INFO and TRACE on every node floods every job's log (research: \"never set blindly\"): set it in one job's environment",
        ));
    }
    Ok(var)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_wide_files_hold_no_debugging_class_and_no_log_flood() {
        let v = Some(NcclVersion(2, 28, 9));
        for (name, value) in [
            ("NCCL_P2P_DISABLE", "1"),
            ("NCCL_IB_DISABLE", "1"),
            ("NCCL_NET_GDR_LEVEL", "LOC"),
            ("NCCL_ALGO", "Ring"),
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG", "TRACE"),
        ] {
            assert!(check_node_wide(name, value, v).is_err(), "{name}={value}");
            assert!(validate(name, value, v).is_ok(), "{name}={value} is valid NCCL");
        }
        for (name, value) in [
            ("NCCL_DEBUG", "WARN"),
            ("NCCL_IB_HCA", "=mlx5_0"),
            ("NCCL_CROSS_NIC", "0"),
        ] {
            assert!(check_node_wide(name, value, v).is_ok(), "{name}={value}");
        }
    }

    #[test]
    fn the_traps_of_research_nccl_md_are_refused() {
        let v = Some(NcclVersion(2, 28, 9));
        for (name, value, needle) in [
            ("NCCL_SOCKET_IFNAME", "\"eth0\"", "quotes"),
            ("NCCL_SOCKET_IFNAME", "eth0 ", "whitespace"),
            ("NCCL_SOCKET_IFNAME", "eth0\r", "whitespace"),
            ("NCCL_P2P_LEVEL", "pxb", "upper case"),
            ("NCCL_IB_HCA", "mlx5_0 # rail 0", "whitespace"),
            ("NCCL_IB_HCA", "mlx5_0#x", "inline comments"),
            ("NCCL_GRAPH_FILE", "/etc/g.xml", "NVIDIA/nccl#1008"),
            ("NCCL_CONF_FILE", "/x", "environment"),
            ("NCCL_SOCKET_IFNAM", "eth0", "unknown"),
            ("NCCL_IB_TIMEOUT", "32", "0 to 31"),
            ("NCCL_NTHREADS", "100", "multiple of 32"),
            ("NCCL_NETDEVS_POLICY", "AUTO", ""),
            ("NCCL_ASYNC_ERROR_HANDLING", "1", "PyTorch"),
            ("NCCL_DEBUG", "info", "one of"),
            ("NCCL_IB_GID_INDEX", "", "empty"),
        ] {
            match validate(name, value, v) {
                Err(r) => assert!(r.reason.contains(needle), "{name}={value}: {}", r.reason),
                Ok(_) => assert!(needle.is_empty(), "{name}={value} should be refused"),
            }
        }
        assert!(validate("NCCL_NETDEVS_POLICY", "MAX:1", Some(NcclVersion(2, 27, 7)))
            .unwrap_err()
            .reason
            .contains("since 2.28"));
        assert!(validate("NCCL_NET_GDR_LEVEL", "C2C", Some(NcclVersion(2, 25, 0))).is_err());
        // Rail fields: only where NCCL reads them.
        let rails = "=mlx5_0::0,mlx5_3::1:0";
        assert!(validate("NCCL_IB_HCA", rails, Some(NcclVersion(2, 30, 7))).is_ok());
        for v in [None, Some(NcclVersion(2, 30, 4))] {
            assert!(validate("NCCL_IB_HCA", rails, v).unwrap_err().reason.contains("2.30.7"));
        }
        assert!(validate("NCCL_IB_HCA", "=mlx5_0:1", None).is_ok());
        assert!(validate("NCCL_IB_HCA", "=mlx5_0:x", None)
            .unwrap_err()
            .reason
            .contains("a number or empty"));
        assert!(validate("NCCL_SOCKET_IFNAME", "=eth0::0", Some(NcclVersion(2, 30, 7))).is_err());
        assert!(validate("NCCL_NET_GDR_LEVEL", "C2C", Some(NcclVersion(2, 26, 2))).is_ok());
    }
}
