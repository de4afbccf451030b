//! cluster.yaml: its schema (documented in docs/cluster-yaml.md) and its validation into an
//! [`Inventory`]. Every error names `file:line:col`; nothing is guessed.

pub(crate) mod benchmark;
pub(crate) mod hostlist;
pub(crate) mod names;
pub(crate) mod select;

pub(crate) use crate::model::fabric::{Fabric, Leaf, MeshSpec, NodeHints, NvlinkHint};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

type Labels = HashMap<Spanned<String>, Spanned<String>>;

/// A key that is present must hold a value: `port: null` (or `port:`) is refused, not read as
/// "unset". An absent key is `None` (via `#[serde(default)]`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    ssh: RawSsh,
    #[serde(default, deserialize_with = "present")]
    fabric: Option<RawFabric>,
    /// NCCL variables to force on every node (validated against NCCL's table by `init`).
    #[serde(default)]
    nccl: BTreeMap<String, String>,
    /// CPUs the training processes own: IRQs are kept off them (kernel list syntax).
    #[serde(default, deserialize_with = "present")]
    reserved_cpus: Option<Spanned<String>>,
    /// NCCL version on the nodes (what the files are validated for), e.g. "2.28.9".
    #[serde(default, deserialize_with = "present")]
    nccl_version: Option<Spanned<String>>,
    /// NICs or ports that carry no GPU traffic on every node (storage, front-end).
    #[serde(default)]
    non_gpu_nics: Vec<Spanned<String>>,
    /// How `apply --canary` measures (docs/apply.md).
    #[serde(default, deserialize_with = "present")]
    benchmark: Option<benchmark::RawBenchmark>,
    nodes: Vec<RawNode>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSsh {
    #[serde(default, deserialize_with = "present")]
    config_file: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    known_hosts: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    identity_file: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    user: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    port: Option<Spanned<u16>>,
    #[serde(default, deserialize_with = "present")]
    forks: Option<usize>,
    #[serde(default, deserialize_with = "present")]
    connect_timeout: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    command_timeout: Option<u64>,
    #[serde(default)]
    sudo: bool,
    #[serde(default, deserialize_with = "present")]
    remote_dir: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    control_persist: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    max_startups: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFabric {
    #[serde(default)]
    racks: HashMap<Spanned<String>, RawRack>,
    #[serde(default)]
    leaves: HashMap<Spanned<String>, RawLeaf>,
    /// Rails per node (rail-optimised fabrics: NIC i of every node on switch plane i).
    #[serde(default, deserialize_with = "present")]
    rails: Option<u32>,
    /// HCA → rail, as `topo-tune fabric` found it.
    #[serde(default)]
    rail_hcas: HashMap<Spanned<String>, u32>,
    /// HCA → plane, for a fabric of several planes.
    #[serde(default)]
    hca_planes: HashMap<Spanned<String>, u32>,
    /// Host → why its ports break the rail pattern.
    #[serde(default)]
    off_rail: HashMap<Spanned<String>, Spanned<String>>,
}

/// HCA name → a rail or a plane.
type HcaNumbers = BTreeMap<String, u32>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRack {
    #[serde(default, deserialize_with = "present")]
    leaf: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeaf {
    #[serde(default, deserialize_with = "present")]
    spine: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    uplink_gbps: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    host: Spanned<String>,
    #[serde(default, deserialize_with = "present")]
    port: Option<Spanned<u16>>,
    #[serde(default, deserialize_with = "present")]
    user: Option<Spanned<String>>,
    #[serde(default)]
    labels: Labels,
    #[serde(default, deserialize_with = "present")]
    simulate: Option<Spanned<String>>,
    #[serde(default, deserialize_with = "present")]
    transport: Option<TransportKind>,
    /// What the node's NVLink is where it cannot say: auto, none, nvswitch or mesh.
    #[serde(default, deserialize_with = "present")]
    nvlink: Option<Spanned<NvlinkHint>>,
    /// With `nvlink: mesh`: how the GPU pairs are joined.
    #[serde(default, deserialize_with = "present")]
    nvlink_mesh: Option<Spanned<RawMesh>>,
    /// The multi-node NVLink domain the node is in, where its driver cannot say.
    #[serde(default, deserialize_with = "present")]
    nvlink_domain: Option<Spanned<String>>,
    /// The GPU part (docs/cluster-yaml.md), where the snapshot has no PCI id.
    #[serde(default, deserialize_with = "present")]
    gpu: Option<Spanned<String>>,
    /// NICs or ports of this node that carry no GPU traffic (added to the top-level list).
    #[serde(default)]
    non_gpu_nics: Vec<Spanned<String>>,
    /// Gb/s per RDMA NIC, where the node reports no port rate.
    #[serde(default, deserialize_with = "present")]
    nic_gbps: Option<Spanned<u32>>,
    /// The node's name in Slurm, where it differs from `host` (a range for a range).
    #[serde(default, deserialize_with = "present")]
    slurm_name: Option<Spanned<String>>,
}

/// `nvlink_mesh:`: exactly one of its keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMesh {
    #[serde(default, deserialize_with = "present")]
    links_per_pair: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    gbps_per_pair: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    links: Option<Vec<Vec<u32>>>,
}

/// The highest NIC rate `nic_gbps:` takes, Gb/s (1.6 Tb/s ports are shipping; headroom beyond).
const MAX_NIC_GBPS: u32 = 10_000;

/// Most GPUs a stated mesh may list, and links per pair (a GPU has 18 today).
const MESH_MAX_GPUS: usize = 64;
const MESH_MAX_LINKS: u32 = 64;

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
    pub ssh: SshDefaults,
    pub fabric: Option<Fabric>,
    pub nccl: BTreeMap<String, String>,
    pub reserved_cpus: Option<crate::model::CpuList>,
    pub nccl_version: Option<crate::model::NcclVersion>,
    pub(crate) benchmark: benchmark::Benchmark,
    pub nodes: Vec<NodeSpec>,
    /// Nodes of the file a `--nodes` selection left out: not worked on, but still the
    /// cluster's (an answer naming one is another node's; a record naming one is not foreign).
    pub(crate) set_aside: Vec<NodeSpec>,
}

/// cluster.yaml's `ssh:` section: how its nodes are reached unless a flag says otherwise
/// (`cli::resolve` makes the `ReachSettings` a run uses from it).
#[derive(Debug, Clone, PartialEq)]
pub struct SshDefaults {
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
    /// ssh connections being set up at once (key exchange, authentication), apart from
    /// `forks`: a burst of 64 handshakes starves a loaded controller into timeouts.
    pub max_startups: usize,
}

pub(crate) const DEFAULT_FORKS: usize = 64;
/// The most nodes in flight at once (`--forks`, `ssh.forks`): beyond this, ssh masters and
/// file descriptors run out before the speed-up grows.
pub(crate) const MAX_FORKS: usize = 1024;
pub(crate) const DEFAULT_CONNECT_TIMEOUT_S: u64 = 10;
pub(crate) const DEFAULT_COMMAND_TIMEOUT_S: u64 = 120;
/// Bounds of the timeouts (also those of `--connect-timeout` and `--command-timeout`).
pub(crate) const MAX_CONNECT_TIMEOUT_S: u64 = 600;
pub(crate) const MAX_COMMAND_TIMEOUT_S: u64 = 86_400;
pub(crate) const DEFAULT_REMOTE_DIR: &str = ".cache/topo-tune";
pub(crate) const DEFAULT_CONTROL_PERSIST_S: u64 = 30;
/// sshd's own default `MaxStartups` starts refusing beyond 10 unauthenticated connections;
/// 16 set-ups at once keep a controller's CPU for the handshakes it has started.
pub(crate) const DEFAULT_MAX_STARTUPS: u64 = 16;

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
    /// What cluster.yaml states about the node where its snapshot cannot tell.
    pub hints: NodeHints,
    /// Its NodeName in Slurm (`slurm_name:`, else `host`).
    pub slurm_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
}

impl crate::exit::Classify for ConfigError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        use std::io::ErrorKind;
        let code = match self {
            ConfigError::Read { source, .. } if source.kind() == ErrorKind::NotFound => exit::NO_INPUT,
            ConfigError::Read { source, .. }
                if matches!(source.kind(), ErrorKind::InvalidInput | ErrorKind::InvalidData) =>
            {
                exit::DATA_ERROR
            }
            ConfigError::Read { .. } => exit::IO_ERROR,
            ConfigError::Invalid { .. } => exit::DATA_ERROR,
        };
        Class::new(code, "config")
    }
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
        let text = crate::input::read_text(path, crate::input::CONFIG_LIMIT, "cluster.yaml").map_err(|e| {
            ConfigError::Read {
                path: path.display().to_string(),
                source: e,
            }
        })?;
        Self::parse(path, &text)
    }

    /// Every node of the file: those worked on and those a `--nodes` selection set aside.
    pub(crate) fn every_node(&self) -> impl Iterator<Item = &NodeSpec> {
        self.nodes.iter().chain(&self.set_aside)
    }

    /// This cluster on a discovered fabric (`--fabric FILE`: what `topo-tune fabric
    /// --output-dir` wrote, itself a cluster.yaml read with every rule above): its `fabric:`
    /// section replaces this one's, and each node it lists takes its fabric labels (`rack`,
    /// `leaf`, `spine`) over the typed ones. Nodes it does not list keep theirs; the hosts of
    /// the file this one does not list are ignored.
    pub(crate) fn on_fabric(mut self, discovered: Inventory) -> Inventory {
        let by_host: std::collections::HashMap<&str, &NodeSpec> =
            discovered.nodes.iter().map(|n| (n.host.as_str(), n)).collect();
        for n in &mut self.nodes {
            if let Some(d) = by_host.get(n.host.as_str()) {
                for key in ["rack", "leaf", "spine"] {
                    match d.labels.get(key) {
                        Some(v) => {
                            n.labels.insert(key.to_string(), v.clone());
                        }
                        None => {
                            n.labels.remove(key);
                        }
                    }
                }
            }
        }
        self.fabric = discovered.fabric;
        self
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let raw = parse_yaml(path, text)?;
        let cx = Loader {
            path,
            base: path.parent().unwrap_or(Path::new(".")),
        };
        let ssh = cx.ssh(&raw.ssh)?;
        let fabric = raw.fabric.as_ref().map(|f| cx.fabric(f)).transpose()?;
        let reserved_cpus = raw.reserved_cpus.as_ref().map(|r| cx.cpu_list(r)).transpose()?;
        let nccl_version = raw.nccl_version.as_ref().map(|v| cx.nccl_version(v)).transpose()?;
        cx.check_overrides(&raw.nccl, nccl_version)?;
        let ssh_user = raw.ssh.user.as_ref().map(|u| cx.user(u)).transpose()?;
        let non_gpu = cx.nic_names(&raw.non_gpu_nics)?;
        let benchmark = cx.benchmark(raw.benchmark.as_ref())?;
        let shared = Shared {
            ssh: &raw.ssh,
            ssh_user: ssh_user.as_deref(),
            fabric: fabric.as_ref(),
            non_gpu: &non_gpu,
        };
        let mut nodes: Vec<NodeSpec> = Vec::new();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for n in &raw.nodes {
            cx.node(n, &shared, &mut seen, &mut nodes)?;
        }
        if nodes.is_empty() {
            return Err(ConfigError::Invalid {
                at: path.display().to_string(),
                message: "no nodes: `nodes:` is empty".into(),
            });
        }
        let mut slurm_seen: std::collections::HashMap<&str, &NodeSpec> = std::collections::HashMap::new();
        for n in &nodes {
            if let Some(first) = slurm_seen.insert(&n.slurm_name, n) {
                return Err(ConfigError::Invalid {
                    at: n.declared_at.clone(),
                    message: format!(
                        "Slurm name `{}` of `{}` is also the Slurm name of `{}` ({})",
                        n.slurm_name, n.host, first.host, first.declared_at
                    ),
                });
            }
        }
        Ok(Inventory {
            path: path.to_path_buf(),
            ssh,
            fabric,
            nccl: raw.nccl,
            reserved_cpus,
            nccl_version,
            benchmark,
            nodes,
            set_aside: Vec::new(),
        })
    }
}

/// What YAML allows but cluster.yaml does not: tags (`!!str`, `!custom`: a value is what it
/// says, never re-typed) and carriage returns inside a line (CR-only line ends read as one
/// line). Reported at `file:line:col`.
fn check_text(path: &Path, text: &str) -> Result<(), ConfigError> {
    let at = |line: usize, col: usize, message: &str| ConfigError::Invalid {
        at: format!("{}:{line}:{col}", path.display()),
        message: message.to_string(),
    };
    for (i, line) in text.split('\n').enumerate() {
        let body = line.strip_suffix('\r').unwrap_or(line);
        if let Some(col) = body.find('\r') {
            return Err(at(
                i + 1,
                col + 1,
                "a carriage return inside a line (CR-only line ends?): save the file with LF line ends",
            ));
        }
        if let Some(col) = yaml_tag_at(body) {
            return Err(at(
                i + 1,
                col + 1,
                "YAML tags (`!!str`, `!name`) are not part of cluster.yaml: write the plain value (quote it to make it a string)",
            ));
        }
    }
    Ok(())
}

/// The byte offset of a YAML tag in one line, outside quotes and comments.
fn yaml_tag_at(line: &str) -> Option<usize> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut quote: Option<char> = None;
    let mut prev: Option<char> = None;
    let mut k = 0;
    while k < chars.len() {
        let (i, c) = chars[k];
        match quote {
            Some('"') if c == '\\' => k += 1,
            Some(q) if c == q => {
                quote = None;
                prev = Some(q);
            }
            Some(_) => {}
            None => {
                let starts_value = matches!(prev, None | Some(':' | '-' | '[' | '{' | ',' | '?'));
                if c == '#' && (k == 0 || chars[k - 1].1.is_whitespace()) {
                    return None;
                }
                if (c == '"' || c == '\'') && starts_value {
                    quote = Some(c);
                } else if c == '!' && starts_value && chars.get(k + 1).is_some_and(|(_, n)| !n.is_whitespace()) {
                    return Some(i);
                }
                if !c.is_whitespace() && quote.is_none() {
                    prev = Some(c);
                }
            }
        }
        k += 1;
    }
    None
}

/// The YAML parser's own bounds, sized for the largest cluster.yaml topo-tune reads
/// (`input::CONFIG_LIMIT`, 100,000 nodes one entry each: about 12 YAML nodes and events per
/// entry); saphyr's defaults (250,000 nodes, 1,000,000 events) refused 65,536 nodes written
/// one per entry. Still bounds: a file of anchors and aliases cannot multiply past them.
const YAML_MAX_NODES: usize = 2_000_000;
const YAML_MAX_EVENTS: usize = 4_000_000;

fn parse_yaml(path: &Path, text: &str) -> Result<RawConfig, ConfigError> {
    check_text(path, text)?;
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: YAML_MAX_NODES,
            max_events: YAML_MAX_EVENTS,
        },
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
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
    })
}

/// What every node entry inherits from the file's top level.
struct Shared<'a> {
    ssh: &'a RawSsh,
    ssh_user: Option<&'a str>,
    fabric: Option<&'a Fabric>,
    non_gpu: &'a [String],
}

/// Validates one file's sections; every error names `file:line:col`.
struct Loader<'a> {
    path: &'a Path,
    base: &'a Path,
}

impl Loader<'_> {
    fn at(&self, loc: &serde_saphyr::Location, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.path, loc, message)
    }

    fn where_(&self, loc: &serde_saphyr::Location) -> String {
        format!("{}:{}:{}", self.path.display(), loc.line(), loc.column())
    }

    /// Relative paths are relative to the file's directory.
    fn resolve(&self, p: &Spanned<String>) -> PathBuf {
        let pb = PathBuf::from(&p.value);
        if pb.is_absolute() {
            pb
        } else {
            self.base.join(pb)
        }
    }

    fn user(&self, u: &Spanned<String>) -> Result<String, ConfigError> {
        names::check_user(&u.value).map_err(|m| self.at(&u.referenced, m))?;
        Ok(u.value.clone())
    }

    fn port(&self, p: &Spanned<u16>) -> Result<u16, ConfigError> {
        if p.value == 0 {
            return Err(self.at(&p.referenced, "port 0 is not a port (1 to 65535)"));
        }
        Ok(p.value)
    }

    /// A number from the file within its documented range.
    fn within(&self, key: &str, value: u64, range: std::ops::RangeInclusive<u64>) -> Result<u64, ConfigError> {
        if range.contains(&value) {
            Ok(value)
        } else {
            Err(ConfigError::Invalid {
                at: self.path.display().to_string(),
                message: format!("{key} must be {} to {} (got {value})", range.start(), range.end()),
            })
        }
    }

    fn ssh(&self, raw: &RawSsh) -> Result<SshDefaults, ConfigError> {
        let forks = self.within(
            "ssh.forks",
            raw.forks.unwrap_or(DEFAULT_FORKS) as u64,
            1..=MAX_FORKS as u64,
        )? as usize;
        if let Some(p) = &raw.port {
            self.port(p)?;
        }
        let connect = self.within(
            "ssh.connect_timeout",
            raw.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT_S),
            1..=MAX_CONNECT_TIMEOUT_S,
        )?;
        let command = self.within(
            "ssh.command_timeout",
            raw.command_timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT_S),
            1..=MAX_COMMAND_TIMEOUT_S,
        )?;
        let persist = self.within(
            "ssh.control_persist",
            raw.control_persist.unwrap_or(DEFAULT_CONTROL_PERSIST_S),
            1..=3600,
        )?;
        let remote_dir = match &raw.remote_dir {
            Some(d) => {
                check_remote_dir(&d.value).map_err(|m| self.at(&d.referenced, m))?;
                d.value.clone()
            }
            None => DEFAULT_REMOTE_DIR.to_string(),
        };
        Ok(SshDefaults {
            config_file: raw.config_file.as_ref().map(|p| self.resolve(p)),
            known_hosts: raw.known_hosts.as_ref().map(|p| self.resolve(p)),
            identity_file: raw.identity_file.as_ref().map(|p| self.resolve(p)),
            forks,
            connect_timeout_s: connect,
            command_timeout_s: command,
            sudo: raw.sudo,
            remote_dir,
            control_persist_s: persist,
            max_startups: self.within(
                "ssh.max_startups",
                raw.max_startups.unwrap_or(DEFAULT_MAX_STARTUPS),
                1..=MAX_FORKS as u64,
            )? as usize,
        })
    }

    fn fabric(&self, f: &RawFabric) -> Result<Fabric, ConfigError> {
        let mut leaf_list: Vec<_> = f.leaves.iter().collect();
        leaf_list.sort_by_key(|(k, _)| (k.referenced.line(), k.referenced.column()));
        for (name, leaf) in &leaf_list {
            names::check_label(&name.value).map_err(|m| self.at(&name.referenced, format!("leaf name: {m}")))?;
            if let Some(spine) = &leaf.spine {
                names::check_label(&spine.value).map_err(|m| self.at(&spine.referenced, format!("spine name: {m}")))?;
            }
        }
        let leaves: BTreeMap<String, Leaf> = leaf_list
            .iter()
            .map(|(k, v)| {
                (
                    k.value.clone(),
                    Leaf {
                        spine: v.spine.as_ref().map(|s| s.value.clone()),
                        uplink_gbps: v.uplink_gbps,
                    },
                )
            })
            .collect();
        self.levels_apart(&leaf_list, f)?;
        let mut racks = BTreeMap::new();
        let mut rack_list: Vec<_> = f.racks.iter().collect();
        rack_list.sort_by_key(|(k, _)| (k.referenced.line(), k.referenced.column()));
        for (name, rack) in rack_list {
            names::check_label(&name.value).map_err(|m| self.at(&name.referenced, m))?;
            if let Some(leaf) = &rack.leaf {
                if !leaves.contains_key(&leaf.value) {
                    return Err(self.at(
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
        if let Some(r) = f.rails {
            self.within("fabric.rails", u64::from(r), 1..=64)?;
        }
        if let Some((name, leaf)) = leaves
            .iter()
            .find(|(_, l)| l.uplink_gbps.is_some_and(|g| !(g.is_finite() && g > 0.0 && g <= 1e7)))
        {
            return Err(ConfigError::Invalid {
                at: self.path.display().to_string(),
                message: format!(
                    "fabric.leaves.{name}.uplink_gbps must be a positive number of Gb/s (got {:?})",
                    leaf.uplink_gbps
                ),
            });
        }
        let (rail_hcas, hca_planes) = self.rail_hcas(f)?;
        let mut off_rail = BTreeMap::new();
        for (host, why) in &f.off_rail {
            names::check_host(&host.value).map_err(|m| self.at(&host.referenced, format!("fabric.off_rail: {m}")))?;
            if why.value.len() > 1024 || why.value.chars().any(char::is_control) {
                return Err(self.at(
                    &why.referenced,
                    "fabric.off_rail: a reason is one line of at most 1,024 characters",
                ));
            }
            off_rail.insert(host.value.clone(), why.value.clone());
        }
        Ok(Fabric {
            racks,
            leaves,
            rails: f.rails,
            rail_hcas,
            hca_planes,
            off_rail,
            stated_in: Some(self.path.display().to_string()),
        })
    }

    /// `rail_hcas` (every rail named by one HCA name or more: units may name HCAs apart)
    /// and `hca_planes` (HCAs of `rail_hcas` only). Both reach NCCL_IB_HCA's rail and plane
    /// fields, so every name is a plain device name and every number in range.
    fn rail_hcas(&self, f: &RawFabric) -> Result<(HcaNumbers, HcaNumbers), ConfigError> {
        let mut rails = BTreeMap::new();
        let mut taken: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
        for (hca, rail) in &f.rail_hcas {
            let plain = !hca.value.is_empty()
                && hca.value.len() <= 64
                && hca
                    .value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !plain {
                return Err(self.at(
                    &hca.referenced,
                    format!("fabric.rail_hcas: {:?} is not an RDMA device name", hca.value),
                ));
            }
            if f.rails.is_none_or(|n| *rail >= n) {
                return Err(self.at(
                    &hca.referenced,
                    format!(
                        "fabric.rail_hcas: {} is on rail {rail}, and fabric.rails is {}",
                        hca.value,
                        f.rails.map_or("not stated".to_string(), |n| format!(
                            "{n} (rails 0 to {})",
                            n.saturating_sub(1)
                        ))
                    ),
                ));
            }
            taken.insert(*rail);
            rails.insert(hca.value.clone(), *rail);
        }
        if let Some(n) = f.rails.filter(|n| !rails.is_empty() && taken.len() != *n as usize) {
            return Err(ConfigError::Invalid {
                at: self.path.display().to_string(),
                message: format!(
                    "fabric.rail_hcas names {} rail(s) of fabric.rails {n}: name every rail's HCA, or none",
                    taken.len()
                ),
            });
        }
        let mut planes = BTreeMap::new();
        for (hca, plane) in &f.hca_planes {
            if !rails.contains_key(&hca.value) || *plane > 63 {
                return Err(self.at(
                    &hca.referenced,
                    format!(
                        "fabric.hca_planes: {} is not an HCA of fabric.rail_hcas, or its plane is not 0 to 63",
                        hca.value
                    ),
                ));
            }
            planes.insert(hca.value.clone(), *plane);
        }
        Ok((rails, planes))
    }

    /// A switch is on one level: a name used for a rack and a leaf, or a leaf and a spine,
    /// would make one switch its own parent (Slurm's tree, the cluster graph).
    fn levels_apart(&self, leaves: &[(&Spanned<String>, &RawLeaf)], f: &RawFabric) -> Result<(), ConfigError> {
        let leaf_names: HashSet<&str> = leaves.iter().map(|(k, _)| k.value.as_str()).collect();
        for (name, leaf) in leaves {
            if let Some(spine) = leaf.spine.as_ref().filter(|s| leaf_names.contains(s.value.as_str())) {
                return Err(self.at(
                    &spine.referenced,
                    format!(
                        "leaf `{}` names `{}` as its spine, which is a leaf too: a switch is on one level",
                        name.value, spine.value
                    ),
                ));
            }
        }
        let spine_names: HashSet<&str> = leaves
            .iter()
            .filter_map(|(_, l)| l.spine.as_ref().map(|s| s.value.as_str()))
            .collect();
        let mut racks: Vec<&Spanned<String>> = f.racks.keys().collect();
        racks.sort_by_key(|k| (k.referenced.line(), k.referenced.column()));
        for rack in racks {
            if leaf_names.contains(rack.value.as_str()) || spine_names.contains(rack.value.as_str()) {
                return Err(self.at(
                    &rack.referenced,
                    format!(
                        "rack `{}` is also the name of a leaf or spine: a switch is on one level",
                        rack.value
                    ),
                ));
            }
        }
        Ok(())
    }

    fn cpu_list(&self, r: &Spanned<String>) -> Result<crate::model::CpuList, ConfigError> {
        crate::model::CpuList::parse(&r.value).map_err(|e| self.at(&r.referenced, e.to_string()))
    }

    fn nccl_version(&self, v: &Spanned<String>) -> Result<crate::model::NcclVersion, ConfigError> {
        v.value.parse().map_err(|m: String| self.at(&v.referenced, m))
    }

    /// Overrides are checked at load, so a bad one names its key before anything happens.
    fn check_overrides(
        &self,
        nccl: &BTreeMap<String, String>,
        version: Option<crate::model::NcclVersion>,
    ) -> Result<(), ConfigError> {
        for (name, value) in nccl {
            let at = || format!("{}: nccl.{name}", self.path.display());
            crate::nccl::table::check_node_wide(name, value, version).map_err(|r| ConfigError::Invalid {
                at: at(),
                message: r.reason,
            })?;
        }
        Ok(())
    }

    fn labels(&self, raw: &Labels, fabric: Option<&Fabric>) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        let mut list: Vec<_> = raw.iter().collect();
        list.sort_by_key(|(k, _)| (k.referenced.line(), k.referenced.column()));
        for (k, v) in list {
            names::check_label(&k.value).map_err(|m| self.at(&k.referenced, m))?;
            names::check_label(&v.value).map_err(|m| self.at(&v.referenced, m))?;
            if let Some(f) = fabric {
                let dangling = match k.value.as_str() {
                    "rack" if !f.racks.is_empty() => !f.racks.contains_key(&v.value),
                    "leaf" if !f.leaves.is_empty() => !f.leaves.contains_key(&v.value),
                    _ => false,
                };
                if dangling {
                    return Err(self.at(
                        &v.referenced,
                        format!(
                            "label {}: {} points nowhere: fabric declares no {} `{}`",
                            k.value, v.value, k.value, v.value
                        ),
                    ));
                }
                if let Some(other) = other_level(f, &k.value, &v.value) {
                    return Err(self.at(
                        &v.referenced,
                        format!(
                            "label {}: `{}` is a {other} of fabric: a switch is on one level",
                            k.value, v.value
                        ),
                    ));
                }
            }
            let level = ["rack", "leaf", "spine"].contains(&k.value.as_str());
            if level
                && labels
                    .iter()
                    .any(|(lk, lv)| ["rack", "leaf", "spine"].contains(&lk.as_str()) && *lv == v.value)
            {
                return Err(self.at(
                    &v.referenced,
                    format!(
                        "label {}: `{}` names another level of this node too: a switch is on one level",
                        k.value, v.value
                    ),
                ));
            }
            labels.insert(k.value.clone(), v.value.clone());
        }
        Ok(labels)
    }

    fn transport(&self, n: &RawNode) -> Result<TransportKind, ConfigError> {
        match (&n.simulate, n.transport) {
            (Some(_), None | Some(TransportKind::Simulated)) => Ok(TransportKind::Simulated),
            (Some(s), Some(other)) => Err(self.at(
                &s.referenced,
                format!("`simulate:` makes a simulated node; it cannot also use transport {other:?}"),
            )),
            (None, Some(TransportKind::Simulated)) => Err(self.at(
                &n.host.referenced,
                "transport: simulated needs `simulate: <profile or topology file>`",
            )),
            (None, t) => Ok(t.unwrap_or(TransportKind::Ssh)),
        }
    }

    /// `non_gpu_nics`: device names (`mlx5_4`) or ports (`mlx5_4:1`).
    fn nic_names(&self, raw: &[Spanned<String>]) -> Result<Vec<String>, ConfigError> {
        raw.iter()
            .map(|n| {
                let (dev, port) = n
                    .value
                    .split_once(':')
                    .map_or((n.value.as_str(), None), |(d, p)| (d, Some(p)));
                let dev_ok = !dev.is_empty()
                    && dev.len() <= 64
                    && dev
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
                let port_ok = port.is_none_or(|p| p.parse::<u32>().is_ok());
                if dev_ok && port_ok {
                    Ok(n.value.clone())
                } else {
                    Err(self.at(
                        &n.referenced,
                        format!(
                            "`{}` is not a NIC name (`mlx5_4`) or port (`mlx5_4:1`)",
                            n.value.escape_default()
                        ),
                    ))
                }
            })
            .collect()
    }

    /// `gpu:` must name a part of the table (docs/cluster-yaml.md).
    fn gpu_part(&self, g: &Spanned<String>) -> Result<String, ConfigError> {
        match crate::model::gpu_parts::by_key(&g.value) {
            Some(p) => Ok(p.key.to_string()),
            None => {
                let known: Vec<&str> = crate::model::gpu_parts::PARTS.iter().map(|p| p.key).collect();
                Err(self.at(
                    &g.referenced,
                    format!(
                        "`{}` is not a GPU part topo-tune knows ({})",
                        g.value.escape_default(),
                        known.join(", ")
                    ),
                ))
            }
        }
    }

    fn hints(&self, n: &RawNode, shared: &Shared) -> Result<NodeHints, ConfigError> {
        let mut non_gpu_nics = shared.non_gpu.to_vec();
        non_gpu_nics.extend(self.nic_names(&n.non_gpu_nics)?);
        let nvlink = n.nvlink.as_ref().map(|s| s.value).unwrap_or_default();
        let nvlink_mesh = match (&n.nvlink_mesh, nvlink) {
            (Some(m), NvlinkHint::Mesh) => Some(self.mesh(m)?),
            (Some(m), _) => {
                return Err(self.at(
                    &m.referenced,
                    "`nvlink_mesh:` describes a mesh: it goes with `nvlink: mesh`",
                ))
            }
            (None, NvlinkHint::Mesh) => {
                let at = n.nvlink.as_ref().map_or(&n.host.referenced, |s| &s.referenced);
                return Err(self.at(
                    at,
                    "`nvlink: mesh` needs `nvlink_mesh:` with one of `links_per_pair`, `gbps_per_pair` or `links` (docs/cluster-yaml.md)",
                ));
            }
            (None, _) => None,
        };
        let nvlink_domain = match &n.nvlink_domain {
            Some(d) if crate::model::nvfabric::domain_name_ok(&d.value) => Some(d.value.clone()),
            Some(d) => {
                return Err(self.at(
                    &d.referenced,
                    format!(
                        "nvlink_domain {:?}: a name of letters, digits, `-`, `_` and `.`, 1 to 63 characters, starting and ending with a letter or digit (what Slurm's BlockName and a Kubernetes label hold)",
                        d.value.escape_default().to_string()
                    ),
                ))
            }
            None => None,
        };
        let nic_gbps = match &n.nic_gbps {
            Some(r) if (1..=MAX_NIC_GBPS).contains(&r.value) => Some(r.value),
            Some(r) => {
                return Err(self.at(
                    &r.referenced,
                    format!(
                    "nic_gbps {}: Gb/s per RDMA NIC, 1 to {MAX_NIC_GBPS} (400 for NDR InfiniBand, 200 for EFA on p5en)",
                    r.value
                ),
                ))
            }
            None => None,
        };
        Ok(NodeHints {
            nvlink,
            gpu: n.gpu.as_ref().map(|g| self.gpu_part(g)).transpose()?,
            non_gpu_nics,
            nvlink_mesh,
            nvlink_domain,
            nic_gbps,
        })
    }

    /// `simulate:`: a bundled profile, or a path that exists (relative to cluster.yaml). A misspelled profile name is an error at its line, not ten nodes that
    /// fail to simulate.
    fn simulate_source(&self, s: &Spanned<String>) -> Result<String, ConfigError> {
        if profile_xml(&s.value).is_some() {
            return Ok(s.value.clone());
        }
        let path = if Path::new(&s.value).is_absolute() {
            PathBuf::from(&s.value)
        } else {
            self.base.join(&s.value)
        };
        // Anything there is the reader's to judge (a device or a FIFO is refused by it, by kind).
        if std::fs::symlink_metadata(&path).is_ok() {
            return Ok(path.display().to_string());
        }
        let names: Vec<&str> = PROFILES.iter().map(|(n, _)| *n).collect();
        Err(self.at(
            &s.referenced,
            format!(
                "simulate {:?}: neither a bundled profile ({}) nor a topology file ({} does not exist)",
                s.value.escape_default().to_string(),
                names.join(", "),
                path.display().to_string().escape_default()
            ),
        ))
    }

    /// `nvlink_mesh:`: one of its forms, within bounds; a links matrix square, symmetric, with
    /// nothing on its diagonal.
    fn mesh(&self, m: &Spanned<RawMesh>) -> Result<MeshSpec, ConfigError> {
        let at = |message: String| self.at(&m.referenced, message);
        let r = &m.value;
        match (r.links_per_pair, r.gbps_per_pair, &r.links) {
            (Some(k), None, None) if (1..=MESH_MAX_LINKS).contains(&k) => Ok(MeshSpec::LinksPerPair(k)),
            (Some(k), None, None) => Err(at(format!(
                "nvlink_mesh.links_per_pair must be 1 to {MESH_MAX_LINKS} (got {k})"
            ))),
            // At least 1 GB/s: what is less rounds to no bandwidth at all (1e-300 -> 0 GB/s).
            (None, Some(g), None) if g.is_finite() && (1.0..=10_000.0).contains(&g) => {
                Ok(MeshSpec::MbpsPerPair((g * 1000.0).round() as u32))
            }
            (None, Some(g), None) => Err(at(format!(
                "nvlink_mesh.gbps_per_pair must be 1 to 10000 GB/s (got {g})"
            ))),
            (None, None, Some(links)) => mesh_links(links).map(MeshSpec::Links).map_err(|e| at(e.to_string())),
            _ => Err(at(
                "nvlink_mesh takes exactly one of `links_per_pair`, `gbps_per_pair` or `links`".into(),
            )),
        }
    }

    /// One `nodes:` entry, expanded (host ranges) into `out`.
    fn node(
        &self,
        n: &RawNode,
        shared: &Shared,
        seen: &mut BTreeMap<String, String>,
        out: &mut Vec<NodeSpec>,
    ) -> Result<(), ConfigError> {
        let hosts = hostlist::expand(&n.host.value).map_err(|e| self.at(&n.host.referenced, e.to_string()))?;
        let user = match &n.user {
            Some(u) => Some(self.user(u)?),
            None => shared.ssh_user.map(str::to_string),
        };
        if let Some(p) = &n.port {
            self.port(p)?;
        }
        let labels = self.labels(&n.labels, shared.fabric)?;
        let hints = self.hints(n, shared)?;
        let transport = self.transport(n)?;
        let simulate = n.simulate.as_ref().map(|s| self.simulate_source(s)).transpose()?;
        let declared_at = self.where_(&n.host.referenced);
        if out.len() + hosts.len() > hostlist::MAX_HOSTS {
            return Err(self.at(
                &n.host.referenced,
                format!(
                    "more than {} nodes in all (ranges included): refused",
                    hostlist::MAX_HOSTS
                ),
            ));
        }
        let slurm_names = self.slurm_names(n, &hosts)?;
        for (host, slurm_name) in hosts.into_iter().zip(slurm_names) {
            names::check_host(&host).map_err(|m| self.at(&n.host.referenced, m))?;
            if let Some(first) = seen.get(&host) {
                return Err(ConfigError::Invalid {
                    at: declared_at,
                    message: format!("host `{host}` is listed twice (first at {first})"),
                });
            }
            seen.insert(host.clone(), declared_at.clone());
            out.push(NodeSpec {
                slurm_name: slurm_name.unwrap_or_else(|| host.clone()),
                host,
                port: n.port.as_ref().or(shared.ssh.port.as_ref()).map(|p| p.value),
                user: user.clone(),
                labels: labels.clone(),
                transport,
                simulate: simulate.clone(),
                declared_at: declared_at.clone(),
                hints: hints.clone(),
            });
        }
        Ok(())
    }

    /// Each host's Slurm name: `slurm_name:` expanded like `host:` (as many names as hosts,
    /// in the same order), each a valid node name; `None` where not given.
    fn slurm_names(&self, n: &RawNode, hosts: &[String]) -> Result<Vec<Option<String>>, ConfigError> {
        let Some(s) = &n.slurm_name else {
            return Ok(vec![None; hosts.len()]);
        };
        let names = hostlist::expand(&s.value).map_err(|e| self.at(&s.referenced, e.to_string()))?;
        if names.len() != hosts.len() {
            return Err(self.at(
                &s.referenced,
                format!(
                    "slurm_name `{}` names {} node(s) but host `{}` names {}: give one name per host, as a range of the same length",
                    s.value,
                    names.len(),
                    n.host.value,
                    hosts.len()
                ),
            ));
        }
        names
            .into_iter()
            .map(|name| {
                names::check_host(&name)
                    .map(|()| Some(name))
                    .map_err(|m| self.at(&s.referenced, format!("slurm_name: {m}")))
            })
            .collect()
    }
}

/// What is wrong with an `nvlink_mesh.links` matrix.
#[derive(Debug, thiserror::Error)]
enum MeshError {
    #[error("nvlink_mesh.links lists {0} GPUs: 2 to {MESH_MAX_GPUS}")]
    Size(usize),
    #[error("nvlink_mesh.links row {row} has {len} entries: one per GPU ({n})")]
    Row { row: usize, len: usize, n: usize },
    #[error("nvlink_mesh.links[{i}][{j}] = {k}: at most {MESH_MAX_LINKS}")]
    TooMany { i: usize, j: usize, k: u32 },
    #[error("nvlink_mesh.links[{i}][{i}] = {k}: a GPU has no NVLink to itself")]
    SelfLink { i: usize, k: u32 },
    #[error("nvlink_mesh.links[{i}][{j}] = {k} but [{j}][{i}] = {back}: a link joins both GPUs")]
    Asymmetric { i: usize, j: usize, k: u32, back: u32 },
}

/// An `nvlink_mesh.links` matrix: square, 2 to MESH_MAX_GPUS GPUs, symmetric, nothing on its
/// diagonal, each entry within bounds.
fn mesh_links(links: &[Vec<u32>]) -> Result<Vec<Vec<u32>>, MeshError> {
    let n = links.len();
    if !(2..=MESH_MAX_GPUS).contains(&n) {
        return Err(MeshError::Size(n));
    }
    if let Some((row, r)) = links.iter().enumerate().find(|(_, r)| r.len() != n) {
        return Err(MeshError::Row { row, len: r.len(), n });
    }
    for (i, row) in links.iter().enumerate() {
        for (j, &k) in row.iter().enumerate() {
            if k > MESH_MAX_LINKS {
                return Err(MeshError::TooMany { i, j, k });
            }
            if i == j && k != 0 {
                return Err(MeshError::SelfLink { i, k });
            }
            if links[j][i] != k {
                return Err(MeshError::Asymmetric {
                    i,
                    j,
                    k,
                    back: links[j][i],
                });
            }
        }
    }
    Ok(links.to_vec())
}

/// The level of `fabric` that holds `name`, when it is not the level `key` names.
fn other_level(f: &Fabric, key: &str, name: &str) -> Option<&'static str> {
    let rack = f.racks.contains_key(name);
    let leaf = f.leaves.contains_key(name);
    let spine = f.leaves.values().any(|l| l.spine.as_deref() == Some(name));
    match key {
        "rack" if leaf => Some("leaf"),
        "rack" if spine => Some("spine"),
        "leaf" if rack => Some("rack"),
        "leaf" if spine => Some("spine"),
        "spine" if rack => Some("rack"),
        "spine" if leaf => Some("leaf"),
        _ => None,
    }
}

fn check_remote_dir(dir: &str) -> Result<(), names::NameError> {
    let ok = !dir.is_empty()
        && !dir.starts_with('-')
        && !dir.split('/').any(|c| c == "..")
        && dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(names::NameError(format!(
            "ssh.remote_dir `{dir}`: use a plain path (letters, digits, `/`, `.`, `-`, `_`; no `..`)"
        )))
    }
}

/// Bundled hardware profiles usable as `simulate: <name>`.
pub(crate) const PROFILES: &[(&str, &str)] = &[
    ("aws-p4d", include_str!("../../profiles/aws-p4d.xml")),
    ("aws-p5en", include_str!("../../profiles/aws-p5en.xml")),
    ("aws-p6-b200", include_str!("../../profiles/aws-p6-b200.xml")),
];

pub(crate) fn profile_xml(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Inventory, ConfigError> {
        Inventory::parse(Path::new("/etc/topo-tune/cluster.yaml"), text)
    }

    /// The error's `file:line:col` and message.
    fn refused(text: &str) -> (String, String) {
        match parse(text) {
            Err(ConfigError::Invalid { at, message }) => (at, message),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let inv = parse("nodes:\n  - host: gpu01\n").unwrap();
        assert_eq!(inv.ssh.forks, DEFAULT_FORKS);
        assert_eq!(inv.ssh.connect_timeout_s, DEFAULT_CONNECT_TIMEOUT_S);
        assert_eq!(inv.ssh.command_timeout_s, DEFAULT_COMMAND_TIMEOUT_S);
        assert_eq!(inv.ssh.remote_dir, DEFAULT_REMOTE_DIR);
        assert_eq!(inv.ssh.max_startups as u64, DEFAULT_MAX_STARTUPS);
        let n = &inv.nodes[0];
        assert_eq!((n.transport, n.slurm_name.as_str()), (TransportKind::Ssh, "gpu01"));
        assert_eq!(n.declared_at, "/etc/topo-tune/cluster.yaml:2:11");
    }

    #[test]
    fn ranges_expand_and_inherit_the_entry() {
        let inv = parse(
            "ssh: {user: ops, port: 2222}\nnodes:\n  - host: \"gpu[01-03]\"\n    labels: {rack: r1}\n    slurm_name: \"n[1-3]\"\n",
        )
        .unwrap();
        let hosts: Vec<(&str, &str, Option<u16>)> = inv
            .nodes
            .iter()
            .map(|n| (n.host.as_str(), n.slurm_name.as_str(), n.port))
            .collect();
        assert_eq!(
            hosts,
            [
                ("gpu01", "n1", Some(2222)),
                ("gpu02", "n2", Some(2222)),
                ("gpu03", "n3", Some(2222))
            ]
        );
        assert!(inv
            .nodes
            .iter()
            .all(|n| n.user.as_deref() == Some("ops") && n.labels["rack"] == "r1"));
    }

    #[test]
    fn relative_paths_are_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.xml"), "<topology/>").unwrap();
        let inv = Inventory::parse(
            &dir.path().join("cluster.yaml"),
            "ssh: {known_hosts: keys/known_hosts}\nnodes:\n  - host: a\n    simulate: x.xml\n  - host: b\n    simulate: aws-p5en\n",
        )
        .unwrap();
        assert_eq!(
            inv.ssh.known_hosts.as_deref(),
            Some(dir.path().join("keys/known_hosts").as_path())
        );
        assert_eq!(
            inv.nodes[0].simulate.as_deref(),
            Some(dir.path().join("x.xml").to_str().unwrap())
        );
        assert_eq!(
            inv.nodes[1].simulate.as_deref(),
            Some("aws-p5en"),
            "a bundled profile stays a name"
        );
    }

    #[test]
    fn every_refusal_names_the_line() {
        let cases: &[(&str, &str, &str)] = &[
            ("nodes:\n  - host: a\n  - host: a\n", ":3:", "listed twice"),
            ("nodes:\n  - host: a\n    port: 0\n", ":3:", "port 0"),
            ("nodes:\n  - host: a\n    gpu: h9000\n", ":3:", "GPU part"),
            (
                "nodes:\n  - host: a\n    simulate: aws-p5e\n",
                ":3:",
                "neither a bundled profile (aws-p4d, aws-p5en, aws-p6-b200) nor a topology file",
            ),
            (
                "nodes:\n  - host: a\n    transport: simulated\n",
                ":2:",
                "needs `simulate:",
            ),
            ("ssh:\n  remote_dir: ../x\nnodes:\n  - host: a\n", ":2:", "remote_dir"),
            (
                "fabric:\n  racks:\n    r1: {leaf: nowhere}\nnodes:\n  - host: a\n",
                ":3:",
                "does not declare",
            ),
            (
                "fabric:\n  racks: {r1: {}}\nnodes:\n  - host: a\n    labels: {rack: r9}\n",
                ":5:",
                "points nowhere",
            ),
            (
                "nodes:\n  - host: a\n    slurm_name: \"n[1-2]\"\n",
                ":3:",
                "one name per host",
            ),
            ("nodes:\n  - host: !!str a\n", ":2:", "YAML tags"),
            ("nodes:\n  - host: a\r  - host: b\n", ":2:", "carriage return"),
        ];
        for (text, line, words) in cases {
            let (at, message) = refused(text);
            assert!(at.starts_with("/etc/topo-tune/cluster.yaml"), "{at}");
            assert!(at.contains(line), "{text:?}: {at} (wanted {line})");
            assert!(message.contains(words), "{text:?}: {message}");
        }
    }

    #[test]
    fn a_switch_is_on_one_level() {
        let (_, m) = refused("fabric:\n  leaves: {l1: {spine: l1}}\nnodes:\n  - host: a\n");
        assert!(m.contains("a switch is on one level"), "{m}");
        let (_, m) = refused("fabric:\n  leaves: {l1: {spine: s1}}\n  racks: {s1: {}}\nnodes:\n  - host: a\n");
        assert!(m.contains("rack `s1`"), "{m}");
        let (_, m) = refused("nodes:\n  - host: a\n    labels: {rack: x, leaf: x}\n");
        assert!(m.contains("another level"), "{m}");
    }

    #[test]
    fn the_wires_rails_are_read_back_and_bad_ones_refused() {
        let text = "fabric:\n  rails: 2\n  rail_hcas: {mlx5_0: 0, HCA-1: 0, mlx5_1: 1}\n  hca_planes: {mlx5_1: 1}\n  off_rail: {gpu-2: \"mlx5_0 is cabled to l2 port 1, a leaf of mlx5_1's rail\"}\nnodes: [{host: gpu-1}, {host: gpu-2}]\n";
        let inv = Inventory::parse(Path::new("fabric.yaml"), text).unwrap();
        let f = inv.fabric.unwrap();
        assert_eq!(f.rail_hcas.len(), 3);
        assert_eq!(f.hca_planes["mlx5_1"], 1);
        assert!(f.off_rail["gpu-2"].starts_with("mlx5_0 is cabled"));
        assert_eq!(f.stated_in.as_deref(), Some("fabric.yaml"));
        for (text, want) in [
            (
                "fabric: {rails: 2, rail_hcas: {mlx5_0: 0, mlx5_1: 2}}\nnodes: [{host: a}]\n",
                "on rail 2",
            ),
            (
                "fabric: {rails: 2, rail_hcas: {mlx5_0: 0}}\nnodes: [{host: a}]\n",
                "names 1 rail(s) of fabric.rails 2",
            ),
            (
                "fabric: {rail_hcas: {mlx5_0: 0}}\nnodes: [{host: a}]\n",
                "fabric.rails is not stated",
            ),
            (
                "fabric: {rails: 1, rail_hcas: {\"mlx5_0:1\": 0}}\nnodes: [{host: a}]\n",
                "not an RDMA device name",
            ),
            (
                "fabric: {rails: 1, rail_hcas: {mlx5_0: 0}, hca_planes: {mlx5_9: 0}}\nnodes: [{host: a}]\n",
                "not an HCA of fabric.rail_hcas",
            ),
            (
                "fabric: {off_rail: {\"a;b\": x}}\nnodes: [{host: a}]\n",
                "fabric.off_rail",
            ),
            ("fabric: {off_rail: {a: \"x\\ny\"}}\nnodes: [{host: a}]\n", "one line"),
        ] {
            let (_, m) = refused(text);
            assert!(m.contains(want), "{text:?}: {m}");
        }
    }

    #[test]
    fn numbers_outside_their_range_are_refused() {
        for (text, key) in [
            ("ssh: {forks: 0}\nnodes: [{host: a}]\n", "ssh.forks"),
            ("ssh: {forks: 100000}\nnodes: [{host: a}]\n", "ssh.forks"),
            ("ssh: {connect_timeout: 0}\nnodes: [{host: a}]\n", "ssh.connect_timeout"),
            ("fabric: {rails: 0}\nnodes: [{host: a}]\n", "fabric.rails"),
            (
                "fabric: {leaves: {l: {uplink_gbps: -1}}}\nnodes: [{host: a}]\n",
                "uplink_gbps",
            ),
        ] {
            let (_, m) = refused(text);
            assert!(m.contains(key), "{text:?}: {m}");
        }
    }

    #[test]
    fn nccl_overrides_are_checked_at_load() {
        let (at, m) = refused("nccl: {NCCL_DEBUG: INFO}\nnodes: [{host: a}]\n");
        assert!(at.ends_with("nccl.NCCL_DEBUG"), "{at}");
        assert!(!m.is_empty());
        assert!(parse("nccl: {NCCL_IB_TIMEOUT: \"22\"}\nnodes: [{host: a}]\n").is_ok());
    }

    #[test]
    fn tags_are_found_outside_quotes_and_comments_only() {
        assert_eq!(yaml_tag_at("  host: !!str a"), Some(8));
        assert_eq!(yaml_tag_at("- !custom x"), Some(2));
        assert_eq!(yaml_tag_at("  host: \"a!b\""), None);
        assert_eq!(yaml_tag_at("  host: 'it!s'"), None);
        assert_eq!(yaml_tag_at("  host: a # !not a tag"), None);
        assert_eq!(yaml_tag_at("  command: echo hi!"), None, "inside a plain value");
    }

    #[test]
    fn remote_dirs_are_plain_paths() {
        for ok in [".cache/topo-tune", "/opt/topo-tune", "a_b-c.d"] {
            assert!(check_remote_dir(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a/../b", "a b", "$HOME/x", "a;b"] {
            assert!(check_remote_dir(bad).is_err(), "{bad:?}");
        }
    }
}
