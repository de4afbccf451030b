//! topo-tune: make NCCL fast on the hardware it really runs on.
//!
//! Layers, one way (docs/architecture.md; a test keeps it so): `model` is plain data and
//! imports nothing else of the crate; `graph`, `nccl`, `solve`, `emit`, `bench` and `trace` are pure (no
//! filesystem, network, clock or environment); `config`, `probe`, `apply`, `irq`,
//! `transport` and `node` do the I/O; `flow` composes them; `report` renders; `cmd` is thin;
//! `cli` parses. Outside the crate: [`run`] (the binary), [`exit`] (the codes), and [`api`]
//! (what the tests and benchmarks use).

pub mod api;
pub(crate) mod apply;
pub(crate) mod bench;
pub(crate) mod canary;
pub(crate) mod cli;
pub(crate) mod cmd;
pub(crate) mod config;
pub(crate) mod digest;
pub(crate) mod doctor;
pub(crate) mod emit;
pub(crate) mod error;
pub mod exit;
pub(crate) mod flow;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod graph;
pub(crate) mod input;
pub(crate) mod irq;
pub(crate) mod model;
pub(crate) mod nccl;
pub(crate) mod node;
pub(crate) mod probe;
pub(crate) mod report;
pub(crate) mod runner;
pub(crate) mod solve;
pub(crate) mod trace;
pub(crate) mod transport;
pub(crate) mod tune;
pub(crate) mod wires;

use clap::Parser;
use cli::{Cli, Command, OutputFormat};
use exit::ExitCode;
use report::envelope::{to_json, Envelope, ErrorDetail, ErrorPayload, NoDetail};
use std::ffi::OsString;
use std::io::Write;

/// Run the command line and return the process exit code (see [`exit`]).
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    probe::child::limit_if_child();
    // hwloc's own minimal XML importer, never libxml2 (which crashed on crafted DTDs); set
    // while the process is still one thread.
    std::env::set_var("HWLOC_LIBXML_IMPORT", "0");
    probe::isolate_imports();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, cli::wants_json(&args)),
    };
    logging(&cli);
    // The output policy, decided here once (the terminal is asked once, too).
    let format = match cli.output {
        OutputFormat::Human => report::Format::Human,
        OutputFormat::Json => report::Format::Json,
    };
    let printer = report::Printer::new(
        format,
        cli.no_progress,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    let result = match &cli.command {
        Command::Probe(a) => cmd::probe::run(a, &printer),
        Command::Init(a) => cmd::init::run(a, &printer),
        Command::Plan(a) => cmd::plan::run(a, &printer),
        Command::Apply(a) => cmd::apply::run(a, &printer),
        Command::IrqPin(a) => cmd::irq_pin::run(a, &printer),
        Command::Doctor(a) => cmd::doctor::run(a, &printer),
        Command::Status(a) => cmd::status::run(a, &printer),
        Command::Rollback(a) => cmd::rollback::run(a, &printer),
        Command::Node(a) => cmd::node::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(a, &printer),
        Command::Tune(a) => cmd::tune::run(a, &printer),
        Command::Fabric(a) => cmd::fabric::run(a, &printer),
        Command::Completions { shell } => Ok(cmd::docs::completions(*shell)),
        Command::Man => cmd::docs::man(),
    };
    let code = match result {
        Ok(done) => match write_stdout(&done.text) {
            exit::OK => done.exit_code,
            failed => failed,
        },
        Err(err) => report_error(&err, &printer, command_name(&cli.command)),
    };
    code.code()
}

/// Logs go to stderr, never stdout (which holds the result): `-q` errors only, default
/// warnings, `-v` info, `-vv` debug, `-vvv` trace; RUST_LOG, when set, decides instead.
fn logging(cli: &Cli) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(format!("topo_tune={level},warn")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true)
        .try_init();
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Probe(_) => "probe",
        Command::Init(_) => "init",
        Command::Plan(_) => "plan",
        Command::Apply(_) => "apply",
        Command::IrqPin(_) => "irq-pin",
        Command::Doctor(_) => "doctor",
        Command::Status(_) => "status",
        Command::Rollback(_) => "rollback",
        Command::Node(_) => "node",
        Command::Diagnose(_) => "diagnose",
        Command::Tune(_) => "tune",
        Command::Fabric(_) => "fabric",
        Command::Completions { .. } => "completions",
        Command::Man => "man",
    }
}

/// Print to stdout; a closed pipe (`| head`) is not an error, a failed write is (74).
fn write_stdout(text: &str) -> ExitCode {
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

/// The error envelope: what went wrong, in the same shape as every command's result.
fn error_envelope(
    command: &'static str,
    kind: &'static str,
    message: String,
    hint: Option<String>,
    code: ExitCode,
) -> String {
    let envelope = Envelope {
        command,
        changed: false,
        failed: true,
        msg: message.clone(),
        exit_code: code,
        nodes: Vec::<report::envelope::NodeRow<NoDetail>>::new(),
        payload: ErrorPayload {
            error: ErrorDetail { kind, message, hint },
        },
    };
    to_json(&envelope).unwrap_or_else(|_| format!("{{\"failed\": true, \"exit_code\": {code}}}\n"))
}

fn report_error(err: &error::Error, printer: &report::Printer, command: &'static str) -> ExitCode {
    let code = err.exit_code();
    eprintln!("error: {}", report::visible(&err.to_string()));
    if let Some(hint) = err.hint() {
        eprintln!("  (hint: {})", report::visible(&hint));
    }
    if printer.json() {
        // Programs get the same facts on stdout, in the envelope every command uses.
        let _ = write_stdout(&error_envelope(command, err.kind(), err.to_string(), err.hint(), code));
    }
    code
}

/// clap's errors: `--help` and `--version` exit 0 with their text; usage errors exit 2, and
/// under `--output json` also print the error envelope.
fn usage_error(e: &clap::Error, json: bool) -> i32 {
    let code = e.exit_code();
    let _ = e.print();
    if json && code == exit::USAGE.code() {
        // clap's message up to the usage line: "error: …" and what it lists after a colon
        // (the missing arguments), on one line.
        let text = e.to_string();
        let message = text
            .lines()
            .map(str::trim)
            .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
            .collect::<Vec<_>>()
            .join(" ")
            .trim_start_matches("error: ")
            .to_string();
        let message = if message.is_empty() {
            "usage error".to_string()
        } else {
            message
        };
        let _ = write_stdout(&error_envelope(
            "topo-tune",
            "usage",
            message,
            Some("see `topo-tune --help`".into()),
            exit::USAGE,
        ));
    }
    code
}
