//! topo-tune: make NCCL fast on the hardware it really runs on.
//!
//! Data flows one way (see ../shared/DESIGN.md): `probe` reads a machine into a
//! [`model::NodeSnapshot`]; `graph` derives views from snapshots; `report` renders results.
//! `model` and `graph` are pure; `probe` is the only module here that touches the system.

pub mod cli;
pub mod cmd;
pub mod error;
pub mod exit;
pub mod graph;
pub mod model;
pub mod nccl;
pub mod probe;
pub mod report;

use clap::Parser;
use cli::{Cli, Command, OutputFormat};
use std::ffi::OsString;
use std::io::Write;

/// Run the command line and return the process exit code (see [`exit`]).
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version land here too, with exit code 0.
            let _ = e.print();
            return e.exit_code();
        }
    };
    let result = match &cli.command {
        Command::Probe(args) => cmd::probe::run(args, cli.output).map(|text| (text, exit::OK)),
        Command::Init(args) => cmd::init::run(args, cli.output).map(|r| (r.text, r.exit_code)),
        Command::Plan(args) => cmd::plan::run(args, cli.output).map(|r| (r.text, r.exit_code)),
        Command::Apply(_) => Err(cmd::not_implemented("apply")),
        Command::IrqPin(args) => cmd::irq::irq_pin(args, cli.output).map(|r| (r.text, r.exit_code)),
        Command::Doctor(args) => cmd::irq::doctor(args, cli.output).map(|r| (r.text, r.exit_code)),
        Command::Status(_) => Err(cmd::not_implemented("status")),
        Command::Rollback(args) => cmd::write::rollback(args, cli.output).map(|r| (r.text, r.exit_code)),
        Command::WriteNode(args) => cmd::write::write_node(args).map(|text| (text, exit::OK)),
    };
    match result {
        Ok((text, code)) => match write_stdout(&text) {
            exit::OK => code,
            failed => failed,
        },
        Err(err) => report_error(&err, cli.output),
    }
}

/// Print to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            eprintln!("error: writing output: {e}");
            exit::IO_ERROR
        }
    }
}

fn report_error(err: &error::Error, output: OutputFormat) -> i32 {
    let code = err.exit_code();
    eprintln!("error: {err}");
    if let Some(hint) = err.hint() {
        eprintln!("  (hint: {hint})");
    }
    if output == OutputFormat::Json {
        // Programs get the same facts on stdout, as one JSON object.
        let doc = serde_json::json!({ "failed": true, "changed": false, "msg": err.to_string(), "hint": err.hint(), "exit_code": code });
        println!("{doc}");
    }
    code
}
pub mod apply;
pub mod config;
pub mod emit;
pub mod irq;
pub mod solve;
pub mod transport;
