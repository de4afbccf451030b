//! One module per subcommand: validated options in, a typed result out.

pub mod init;
pub mod irq;
pub mod plan;
pub mod probe;
pub mod write;

use crate::error::Error;

/// The answer of every subcommand that is declared but not built yet.
pub fn not_implemented(command: &str) -> Error {
    Error::NotImplemented {
        command: command.to_string(),
        version: env!("CARGO_PKG_VERSION"),
    }
}
