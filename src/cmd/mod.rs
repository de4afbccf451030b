//! One module per subcommand: typed options in, a typed result out, rendered once as a table
//! (`report/`) and once as the JSON envelope.

pub(crate) mod apply;
pub(crate) mod diagnose;
pub(crate) mod docs;
pub(crate) mod doctor;
pub(crate) mod fabric;
pub(crate) mod init;
pub(crate) mod irq_pin;
pub(crate) mod node;
pub(crate) mod plan;
pub(crate) mod probe;
pub(crate) mod rollback;
pub(crate) mod status;
pub(crate) mod tune;

use crate::error::Error;
use crate::report::envelope::{to_json, Envelope};
use crate::report::{Format, Printer};
use serde::Serialize;

/// What a command prints on stdout, and its exit code.
pub(crate) struct Done {
    pub(crate) text: String,
    pub(crate) exit_code: crate::exit::ExitCode,
}

/// Render a command's result: the envelope as JSON, or the human table made from it.
pub(crate) fn finish<P: Serialize, N: Serialize>(
    printer: &Printer,
    envelope: Envelope<P, N>,
    human: impl FnOnce(&Envelope<P, N>) -> String,
) -> Result<Done, Error> {
    let exit_code = envelope.exit_code;
    let text = match printer.format {
        Format::Json => to_json(&envelope)?,
        Format::Human => without_trailing_spaces(&crate::report::visible(&human(&envelope))),
    };
    Ok(Done { text, exit_code })
}

/// Tables pad their last column: no line of human output ends in spaces (diffs and `grep -x`
/// friendly).
fn without_trailing_spaces(text: &str) -> String {
    let mut out: String = text.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}
