//! `topo-tune node KIND` (hidden): the node side of every cluster command. Reads one request
//! on stdin, prints one report on stdout; see `node::serve_stdin`.

use super::Done;
use crate::cli::NodeArgs;
use crate::error::Error;
use crate::exit;

pub(crate) fn run(args: &NodeArgs) -> Result<Done, Error> {
    let s = args.resolve();
    let text = crate::node::serve_stdin(&s.kind, &s.env)?;
    Ok(Done {
        text,
        exit_code: exit::OK,
    })
}
