//! `topo-tune probe`: snapshot one node (live, `--fsroot` tree, or hwloc XML) and print it.

use crate::cli::{OutputFormat, ProbeArgs};
use crate::error::Error;
use crate::graph::paths::path_matrix;
use crate::probe::{probe, ProbeRequest, Target};
use crate::report;

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
            let mut value = serde_json::to_value(&snapshot).map_err(|e| Error::Output(e.into()))?;
            if args.matrix {
                let matrix = serde_json::to_value(path_matrix(&snapshot)).map_err(|e| Error::Output(e.into()))?;
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("matrix".into(), matrix);
                }
            }
            let mut s = serde_json::to_string_pretty(&value).map_err(|e| Error::Output(e.into()))?;
            s.push('\n');
            s
        }
        OutputFormat::Human if args.matrix => report::matrix::render(&path_matrix(&snapshot)),
        OutputFormat::Human => report::probe::render(&snapshot),
    };
    Ok(text)
}
