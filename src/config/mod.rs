//! cluster.yaml: its schema (documented in docs/cluster-yaml.md) and its validation into an
//! [`Inventory`]. Every error names `file:line:col`; nothing is guessed.

pub mod hostlist;
pub mod names;

use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

type Labels = HashMap<Spanned<String>, Spanned<String>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    ssh: RawSsh,
    #[serde(default)]
    fabric: Option<RawFabric>,
    /// NCCL variables to force on every node (validated against NCCL's table by `init`).
    #[serde(default)]
    nccl: BTreeMap<String, String>,
    /// CPUs the training processes own: IRQs are kept off them (kernel list syntax).
    #[serde(default)]
    reserved_cpus: Option<Spanned<String>>,
    /// NCCL version on the nodes (what the files are validated for), e.g. "2.28.9".
    #[serde(default)]
    nccl_version: Option<Spanned<String>>,
    nodes: Vec<RawNode>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSsh {
    config_file: Option<Spanned<String>>,
    known_hosts: Option<Spanned<String>>,
    identity_file: Option<Spanned<String>>,
    user: Option<Spanned<String>>,
    port: Option<u16>,
    forks: Option<usize>,
    connect_timeout: Option<u64>,
    command_timeout: Option<u64>,
    #[serde(default)]
    sudo: bool,
    remote_dir: Option<Spanned<String>>,
    control_persist: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFabric {
    #[serde(default)]
    racks: HashMap<Spanned<String>, RawRack>,
    #[serde(default)]
    leaves: HashMap<Spanned<String>, RawLeaf>,
    /// Rails per node (rail-optimised fabrics: NIC i of every node on switch plane i).
    rails: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRack {
    leaf: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeaf {
    spine: Option<String>,
    uplink_gbps: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    host: Spanned<String>,
    port: Option<u16>,
    user: Option<Spanned<String>>,
    #[serde(default)]
    labels: Labels,
    simulate: Option<Spanned<String>>,
    #[serde(default)]
    transport: Option<TransportKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Through the operator's `ssh` (default).
    Ssh,
    /// This machine, without ssh.
    Local,
    /// No machine: a snapshot made from `simulate:`.
    Simulated,
}

/// A validated cluster description.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub path: PathBuf,
    pub ssh: SshSettings,
    pub fabric: Option<Fabric>,
    pub nccl: BTreeMap<String, String>,
    pub reserved_cpus: Option<crate::model::CpuList>,
    pub nccl_version: Option<crate::nccl::version::NcclVersion>,
    pub nodes: Vec<NodeSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SshSettings {
    pub config_file: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub identity_file: Option<PathBuf>,
    pub forks: usize,
    pub connect_timeout_s: u64,
    pub command_timeout_s: u64,
    pub sudo: bool,
    /// Where the probe binary is cached on nodes (relative paths are under the login's home).
    pub remote_dir: String,
    /// Seconds an idle ssh control master lingers: bounds its life even if topo-tune is killed.
    pub control_persist_s: u64,
}

pub const DEFAULT_FORKS: usize = 64;
pub const DEFAULT_CONNECT_TIMEOUT_S: u64 = 10;
pub const DEFAULT_COMMAND_TIMEOUT_S: u64 = 120;
pub const DEFAULT_REMOTE_DIR: &str = ".cache/topo-tune";
pub const DEFAULT_CONTROL_PERSIST_S: u64 = 30;

#[derive(Debug, Clone, PartialEq)]
pub struct Fabric {
    pub racks: BTreeMap<String, Option<String>>,
    pub leaves: BTreeMap<String, (Option<String>, Option<f64>)>,
    pub rails: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Inventory name: the ssh destination (host, IP or ssh_config alias).
    pub host: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub transport: TransportKind,
    /// Snapshot source for simulated nodes (a profile name or topology file).
    pub simulate: Option<String>,
    /// `file:line` where the node was declared.
    pub declared_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
}

impl ConfigError {
    fn at(path: &Path, loc: &serde_saphyr::Location, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            at: format!("{}:{}:{}", path.display(), loc.line(), loc.column()),
            message: message.into(),
        }
    }
}

impl Inventory {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let loc = e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default();
            // saphyr's text: "error: line L column C: <message>\n --> <input>:L:C\n<snippet>".
            let rendered = e.to_string().replace("<input>", &path.display().to_string());
            let message = rendered
                .split_once(": ")
                .and_then(|(_, rest)| rest.split_once(": "))
                .map_or(rendered.clone(), |(_, m)| m.to_string());
            ConfigError::Invalid {
                at: format!("{}{loc}", path.display()),
                message,
            }
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &Spanned<String>| -> PathBuf {
            let pb = PathBuf::from(&p.value);
            if pb.is_absolute() {
                pb
            } else {
                base.join(pb)
            }
        };

        let ssh_user = match &raw.ssh.user {
            Some(u) => {
                names::check_user(&u.value).map_err(|m| ConfigError::at(path, &u.referenced, m))?;
                Some(u.value.clone())
            }
            None => None,
        };
        let forks = raw.ssh.forks.unwrap_or(DEFAULT_FORKS);
        if forks == 0 {
            return Err(ConfigError::Invalid {
                at: path.display().to_string(),
                message: "ssh.forks must be at least 1".into(),
            });
        }
        let remote_dir = match &raw.ssh.remote_dir {
            Some(d) => {
                check_remote_dir(&d.value).map_err(|m| ConfigError::at(path, &d.referenced, m))?;
                d.value.clone()
            }
            None => DEFAULT_REMOTE_DIR.to_string(),
        };
        let ssh = SshSettings {
            config_file: raw.ssh.config_file.as_ref().map(resolve),
            known_hosts: raw.ssh.known_hosts.as_ref().map(resolve),
            identity_file: raw.ssh.identity_file.as_ref().map(resolve),
            forks,
            connect_timeout_s: raw.ssh.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT_S).max(1),
            command_timeout_s: raw.ssh.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT_S).max(1),
            sudo: raw.ssh.sudo,
            remote_dir,
            control_persist_s: raw.ssh.control_persist.unwrap_or(DEFAULT_CONTROL_PERSIST_S).max(1),
        };

        let fabric = match raw.fabric {
            None => None,
            Some(f) => {
                let leaves: BTreeMap<String, (Option<String>, Option<f64>)> = f
                    .leaves
                    .iter()
                    .map(|(k, v)| (k.value.clone(), (v.spine.clone(), v.uplink_gbps)))
                    .collect();
                let mut racks = BTreeMap::new();
                let mut rack_list: Vec<_> = f.racks.iter().collect();
                rack_list.sort_by_key(|(k, _)| (k.referenced.line(), k.referenced.column()));
                for (name, rack) in rack_list {
                    names::check_label(&name.value).map_err(|m| ConfigError::at(path, &name.referenced, m))?;
                    if let Some(leaf) = &rack.leaf {
                        if !leaves.contains_key(&leaf.value) {
                            return Err(ConfigError::at(
                                path,
                                &leaf.referenced,
                                format!(
                                    "rack `{}` hangs off leaf `{}`, which fabric.leaves does not declare",
                                    name.value, leaf.value
                                ),
                            ));
                        }
                    }
                    racks.insert(name.value.clone(), rack.leaf.as_ref().map(|l| l.value.clone()));
                }
                Some(Fabric {
                    racks,
                    leaves,
                    rails: f.rails,
                })
            }
        };

        let reserved_cpus = match &raw.reserved_cpus {
            Some(r) => Some(
                crate::model::CpuList::parse(&r.value)
                    .map_err(|e| ConfigError::at(path, &r.referenced, e.to_string()))?,
            ),
            None => None,
        };

        let nccl_version = match &raw.nccl_version {
            Some(v) => Some(crate::nccl::version::NcclVersion::parse(&v.value).ok_or_else(|| {
                ConfigError::at(
                    path,
                    &v.referenced,
                    format!("`{}` is not an NCCL version (e.g. 2.28.9)", v.value),
                )
            })?),
            None => None,
        };
        // Overrides are checked here, so a bad one names its line before anything happens.
        for (name, value) in &raw.nccl {
            let var = crate::nccl::table::validate(name, value, nccl_version).map_err(|r| ConfigError::Invalid {
                at: format!("{}: nccl.{name}", path.display()),
                message: r.reason,
            })?;
            if var.class == crate::nccl::table::Class::Debug {
                return Err(ConfigError::Invalid {
                    at: format!("{}: nccl.{name}", path.display()),
                    message: "a debugging variable in NCCL's docs: never written globally (a canary may try it)".into(),
                });
            }
        }
        let mut nodes: Vec<NodeSpec> = Vec::new();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for n in &raw.nodes {
            let at = |loc: &serde_saphyr::Location| format!("{}:{}:{}", path.display(), loc.line(), loc.column());
            let hosts = hostlist::expand(&n.host.value)
                .map_err(|e| ConfigError::at(path, &n.host.referenced, e.to_string()))?;
            let user = match &n.user {
                Some(u) => {
                    names::check_user(&u.value).map_err(|m| ConfigError::at(path, &u.referenced, m))?;
                    Some(u.value.clone())
                }
                None => ssh_user.clone(),
            };
            let mut labels = BTreeMap::new();
            let mut label_list: Vec<_> = n.labels.iter().collect();
            label_list.sort_by_key(|(k, _)| (k.referenced.line(), k.referenced.column()));
            for (k, v) in label_list {
                names::check_label(&k.value).map_err(|m| ConfigError::at(path, &k.referenced, m))?;
                names::check_label(&v.value).map_err(|m| ConfigError::at(path, &v.referenced, m))?;
                if let Some(f) = &fabric {
                    let dangling = match k.value.as_str() {
                        "rack" if !f.racks.is_empty() => !f.racks.contains_key(&v.value),
                        "leaf" if !f.leaves.is_empty() => !f.leaves.contains_key(&v.value),
                        _ => false,
                    };
                    if dangling {
                        return Err(ConfigError::at(
                            path,
                            &v.referenced,
                            format!(
                                "label {}: {} points nowhere: fabric declares no {} `{}`",
                                k.value, v.value, k.value, v.value
                            ),
                        ));
                    }
                }
                labels.insert(k.value.clone(), v.value.clone());
            }
            let transport = match (&n.simulate, n.transport) {
                (Some(_), None | Some(TransportKind::Simulated)) => TransportKind::Simulated,
                (Some(s), Some(other)) => {
                    return Err(ConfigError::at(
                        path,
                        &s.referenced,
                        format!("`simulate:` makes a simulated node; it cannot also use transport {other:?}"),
                    ));
                }
                (None, Some(TransportKind::Simulated)) => {
                    return Err(ConfigError::at(
                        path,
                        &n.host.referenced,
                        "transport: simulated needs `simulate: <profile or topology file>`",
                    ));
                }
                (None, t) => t.unwrap_or(TransportKind::Ssh),
            };
            let simulate = n.simulate.as_ref().map(|s| {
                if profile_xml(&s.value).is_some() || Path::new(&s.value).is_absolute() {
                    s.value.clone()
                } else {
                    base.join(&s.value).display().to_string()
                }
            });
            for host in hosts {
                names::check_host(&host).map_err(|m| ConfigError::at(path, &n.host.referenced, m))?;
                let declared_at = at(&n.host.referenced);
                if let Some(first) = seen.get(&host) {
                    return Err(ConfigError::Invalid {
                        at: declared_at,
                        message: format!("host `{host}` is listed twice (first at {first})"),
                    });
                }
                seen.insert(host.clone(), declared_at.clone());
                nodes.push(NodeSpec {
                    host,
                    port: n.port.or(raw.ssh.port),
                    user: user.clone(),
                    labels: labels.clone(),
                    transport,
                    simulate: simulate.clone(),
                    declared_at,
                });
            }
        }
        if nodes.is_empty() {
            return Err(ConfigError::Invalid {
                at: path.display().to_string(),
                message: "no nodes: `nodes:` is empty".into(),
            });
        }
        Ok(Inventory {
            path: path.to_path_buf(),
            ssh,
            fabric,
            nccl: raw.nccl,
            reserved_cpus,
            nccl_version,
            nodes,
        })
    }
}

fn check_remote_dir(dir: &str) -> Result<(), String> {
    let ok = !dir.is_empty()
        && !dir.starts_with('-')
        && !dir.split('/').any(|c| c == "..")
        && dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "ssh.remote_dir `{dir}`: use a plain path (letters, digits, `/`, `.`, `-`, `_`; no `..`)"
        ))
    }
}

/// Bundled hardware profiles usable as `simulate: <name>`.
pub const PROFILES: &[(&str, &str)] = &[
    ("aws-p4d", include_str!("../../profiles/aws-p4d.xml")),
    ("aws-p5en", include_str!("../../profiles/aws-p5en.xml")),
    ("aws-p6-b200", include_str!("../../profiles/aws-p6-b200.xml")),
];

pub fn profile_xml(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}
