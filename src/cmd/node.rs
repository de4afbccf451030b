//! `topo-tune node KIND` (hidden): the node side of every cluster command. Reads one request
//! on stdin, prints one report on stdout; see `node::serve_stdin`.

use super::Done;
use crate::cli::NodeArgs;
use crate::error::Error;
use crate::exit;
use crate::transport::NodeEnv;

pub(crate) fn run(args: &NodeArgs) -> Result<Done, Error> {
    let env = NodeEnv {
        write_root: args.root.clone(),
        fsroot: args.fsroot.clone(),
        hwloc_xml: args.from_hwloc_xml.clone(),
        ..NodeEnv::live()
    };
    let text = crate::node::serve_stdin(&args.kind, &env)?;
    Ok(Done {
        text,
        exit_code: exit::OK,
    })
}
