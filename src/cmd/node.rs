//! `topo-tune node KIND` (hidden): the node side of every cluster command. Reads one request
//! on stdin, prints one report on stdout; see `node::serve`.

use super::Done;
use crate::cli::NodeArgs;
use crate::error::Error;
use crate::exit;
use crate::transport::ssh::MAX_ANSWER_BYTES;
use crate::transport::NodeEnv;
use std::io::Read;

pub fn run(args: &NodeArgs) -> Result<Done, Error> {
    let mut input = Vec::new();
    std::io::stdin()
        .take(MAX_ANSWER_BYTES + 1)
        .read_to_end(&mut input)
        .map_err(|e| Error::Io {
            what: "reading the request on stdin".into(),
            source: e,
        })?;
    if input.len() as u64 > MAX_ANSWER_BYTES {
        return Err(Error::Usage(format!(
            "the request on stdin is larger than {} MiB",
            MAX_ANSWER_BYTES >> 20
        )));
    }
    let env = NodeEnv {
        write_root: args.root.clone(),
        fsroot: args.fsroot.clone(),
        hwloc_xml: args.from_hwloc_xml.clone(),
    };
    let text = crate::node::serve(&args.kind, &input, &env)?;
    Ok(Done {
        text,
        exit_code: exit::OK,
    })
}
