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

/// The async runtime behind every ssh fan-out (built per command, never at start-up).
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Io {
            what: "starting the async runtime".into(),
            source: e,
        })
}
