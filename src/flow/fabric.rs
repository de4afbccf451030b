//! `fabric`: the capture read (bounded), the fabric derived from it, held against cluster.yaml
//! when one is given, and its cluster.yaml text written through the safe writer.

use super::settings::{FabricSettings, FabricSource};
use crate::error::Error;
use crate::exit::{self, Class};
use crate::wires::compare::{self, Diff};
use crate::wires::derive::{self, Discovered};
use std::path::Path;

/// What `fabric` found, and where it wrote.
pub(crate) struct FabricOutcome {
    pub(crate) discovered: Discovered,
    pub(crate) diff: Option<Diff>,
    pub(crate) written: Option<String>,
    /// A cloud topology's placement groups and their instances.
    pub(crate) placement_groups: crate::wires::aws::Groups,
}

/// Why a capture, GUID map or topology answer cannot be used; it names the file and line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FabricError {
    #[error("{file}: {source}")]
    Open { file: String, source: std::io::Error },
    #[error("{file}: {source}")]
    Parse {
        file: String,
        source: crate::wires::ibnet::ParseError,
    },
    /// Two captures hold one switch: the same plane twice, not two planes.
    #[error("{second} holds switch {guid} of {first}: the same plane twice (or one plane captured from two ports), not two planes; give each plane's capture once")]
    SharedSwitch {
        first: String,
        second: String,
        guid: String,
    },
    /// A directory of captures with none in it, or more planes than a fabric is read with.
    #[error("{dir}: {message}")]
    Planes { dir: String, message: String },
    /// Switches, and no port that names a host: nothing to place, and nothing is written.
    #[error("{file}: {switches} switch(es) and no port that names a host ({unnamed} unnamed port(s)): nothing to place; set each HCA's node description to `<hostname> <hca>` (rdma-ndd) or pass --guid-map FILE")]
    NoHosts {
        file: String,
        switches: usize,
        unnamed: usize,
    },
}

impl crate::exit::Classify for FabricError {
    fn classify(&self) -> Class {
        match self {
            FabricError::Open { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Class::new(exit::NO_INPUT, "fabric")
            }
            FabricError::Open { source, .. } if source.kind() != std::io::ErrorKind::InvalidData => {
                Class::new(exit::IO_ERROR, "fabric")
            }
            _ => Class::new(exit::DATA_ERROR, "fabric")
                .hint("give ibnetdiscover's own output (ibnetdiscover > fabric.txt), or aws ec2 describe-instance-topology's JSON"),
        }
    }
}

impl From<FabricError> for Error {
    fn from(e: FabricError) -> Self {
        Error::Flow(Box::new(e))
    }
}

fn read(path: &Path, what: &str) -> Result<String, FabricError> {
    crate::input::read_text(path, crate::wires::ibnet::MAX_BYTES as u64, what).map_err(|source| FabricError::Open {
        file: path.display().to_string(),
        source,
    })
}

pub(crate) fn discover(s: &FabricSettings) -> Result<FabricOutcome, Error> {
    let parse_err = |p: &Path| {
        let file = p.display().to_string();
        move |source| FabricError::Parse { file, source }
    };
    let mut plane_files = Vec::new();
    let mut plane_of = None;
    let (nodes, placement_groups, source) = match &s.source {
        FabricSource::Ibnetdiscover(given) => {
            let files = captures(given)?;
            let mut planes = Vec::with_capacity(files.len());
            for p in &files {
                planes.push(crate::wires::ibnet::parse(&read(p, "ibnetdiscover capture")?).map_err(parse_err(p))?);
            }
            plane_files = files.iter().map(|p| p.display().to_string()).collect();
            let source = plane_files.join(", ");
            let joined = crate::wires::planes::join(planes).map_err(|e| FabricError::SharedSwitch {
                first: plane_files[e.first].clone(),
                second: plane_files[e.second].clone(),
                guid: e.guid,
            })?;
            if files.len() > 1 {
                plane_of = Some(joined.plane_of);
            }
            (joined.nodes, Default::default(), source)
        }
        FabricSource::AwsTopology(p) => {
            let (nodes, groups) = crate::wires::aws::parse(&read(p, "instance topology")?).map_err(parse_err(p))?;
            (nodes, groups, p.display().to_string())
        }
    };
    let mut nodes = nodes;
    let mut unmapped = Vec::new();
    if let FabricSource::AwsTopology(_) = &s.source {
        if let Some(map) = instance_names(s)? {
            unmapped = crate::wires::aws::name_instances(&mut nodes, &map);
        }
    }
    let names = match &s.guid_map {
        Some(p) => crate::wires::guid_map(&read(p, "GUID map")?).map_err(parse_err(p))?,
        None => Default::default(),
    };
    let mut discovered = derive::derive(&nodes, &names);
    // The parsed capture is done with: its memory goes before the output is made.
    drop(nodes);
    match &plane_of {
        Some(plane_of) => crate::wires::planes::mark(&mut discovered, plane_of, &plane_files),
        None if matches!(s.source, FabricSource::Ibnetdiscover(_)) => {
            discovered.findings.extend(derive::planes(&discovered.switches));
        }
        None => {}
    }
    if let Some(first) = unmapped.first() {
        discovered.findings.push(derive::Finding {
            severity: derive::Severity::Warn,
            code: "unmapped-instances",
            what: format!(
                "{} instance(s) have no host name (the first: {first}): they stay instance ids, which no cluster.yaml node is",
                unmapped.len()
            ),
            fix: "add `<instance-id> <hostname>` lines to --host-map, or an `instance_id` label to the node in cluster.yaml".into(),
        });
    }
    if discovered.hosts.is_empty() {
        return Err(FabricError::NoHosts {
            file: source.clone(),
            switches: discovered.switches.len(),
            unnamed: discovered.unnamed_ports.len(),
        }
        .into());
    }
    let diff = s.cluster.as_ref().map(|inv| compare::diff(&discovered, inv));
    let written = match &s.output_dir {
        Some(dir) => Some(write(dir, &crate::wires::section::cluster_yaml(&discovered, &source))?),
        None => None,
    };
    Ok(FabricOutcome {
        discovered,
        diff,
        written,
        placement_groups,
    })
}

/// The captures to read, one per plane: each file given, and each file of a directory given
/// (in name order; hidden files left out).
fn captures(given: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, FabricError> {
    let mut out = Vec::new();
    for p in given {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let entries = std::fs::read_dir(p).map_err(|source| FabricError::Open {
            file: p.display().to_string(),
            source,
        })?;
        let mut files: Vec<std::path::PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        if files.is_empty() {
            return Err(FabricError::Planes {
                dir: p.display().to_string(),
                message: "no capture in the directory (one ibnetdiscover file per plane)".into(),
            });
        }
        files.sort();
        out.extend(files);
    }
    if out.len() > crate::wires::planes::MAX_PLANES {
        return Err(FabricError::Planes {
            dir: given[0].display().to_string(),
            message: format!(
                "{} captures: at most {} planes are read as one fabric",
                out.len(),
                crate::wires::planes::MAX_PLANES
            ),
        });
    }
    Ok(out)
}

/// AWS instance id → host name: `--host-map`'s lines and cluster.yaml's nodes labelled
/// `instance_id` (the two must agree); `None` when neither gives any.
fn instance_names(s: &FabricSettings) -> Result<Option<std::collections::HashMap<String, String>>, FabricError> {
    let mut map = match &s.host_map {
        Some(p) => crate::wires::host_map(&read(p, "host map")?).map_err(|source| FabricError::Parse {
            file: p.display().to_string(),
            source,
        })?,
        None => Default::default(),
    };
    if let Some(inv) = &s.cluster {
        // Labels already taken from cluster.yaml: a range's entry would give one instance to
        // each of its hosts.
        let mut labelled: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
        for n in &inv.nodes {
            let Some(id) = n.labels.get("instance_id") else {
                continue;
            };
            let clash = match (map.get(id), labelled.insert(id, &n.host)) {
                (_, Some(other)) if other != n.host => Some(format!("{id} is labelled on both {other} and {}", n.host)),
                (Some(h), None) if *h != n.host => {
                    Some(format!("{id} is labelled on {} but --host-map gives it to {h}", n.host))
                }
                _ => None,
            };
            if let Some(message) = clash {
                return Err(FabricError::Parse {
                    file: inv.path.display().to_string(),
                    source: crate::wires::ibnet::ParseError {
                        line: 0,
                        message: format!("{message}: one instance, one host"),
                    },
                });
            }
            map.insert(id.clone(), n.host.clone());
        }
    }
    Ok((!map.is_empty()).then_some(map))
}

fn write(dir: &Path, text: &str) -> Result<String, Error> {
    use crate::apply::{tree::Tree, writer::WriteError};
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        what: format!("creating {}", dir.display()),
        source,
    })?;
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    tree.write("fabric.yaml", text.as_bytes(), 0o644)
        .map_err(WriteError::from)?;
    Ok(dir.join("fabric.yaml").display().to_string())
}
