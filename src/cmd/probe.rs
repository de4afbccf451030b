//! `topo-tune probe`: snapshot one node (live, `--fsroot` tree, or hwloc XML) and print it.

use crate::cli::{OutputFormat, ProbeArgs};
use crate::error::Error;
use crate::graph::paths::{path_matrix, PathMatrix};
use crate::model::NodeSnapshot;
use crate::probe::{probe, ProbeRequest, Target};
use crate::report;
use serde::Serialize;

/// The snapshot with its path matrix beside it (`probe --matrix --output json`).
#[derive(Serialize)]
struct WithMatrix<'a> {
    #[serde(flatten)]
    snapshot: &'a NodeSnapshot,
    matrix: PathMatrix,
}

pub fn run(args: &ProbeArgs, output: OutputFormat) -> Result<String, Error> {
    let target = match (&args.from_hwloc_xml, &args.fsroot) {
        (Some(xml), _) => Target::HwlocXml(xml.clone()),
        (None, fsroot) => Target::Machine { fsroot: fsroot.clone() },
    };
    let snapshot = probe(&ProbeRequest {
        target,
        nvml_fixture: args.nvml_fixture.clone(),
    })?;
    let text = match output {
        OutputFormat::Json => {
            let json = if args.matrix {
                serde_json::to_string_pretty(&WithMatrix {
                    snapshot: &snapshot,
                    matrix: path_matrix(&snapshot),
                })
            } else {
                serde_json::to_string_pretty(&snapshot)
            };
            json.map_err(|e| Error::Output(e.into()))? + "\n"
        }
        OutputFormat::Human if args.matrix => report::matrix::render(&path_matrix(&snapshot)),
        OutputFormat::Human => report::probe::render(&snapshot),
    };
    Ok(text)
}
