//! `topo-tune node KIND` (hidden): the node side of every cluster command. Reads one request
//! on stdin, prints one report on stdout; see `node::serve`.

use super::Done;
use crate::cli::NodeArgs;
use crate::error::Error;
use crate::exit;
use crate::transport::ssh::MAX_ANSWER_BYTES;
use crate::transport::NodeEnv;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// When the controller goes away (interrupted, or its ssh master closed), sshd closes the
/// other end of our stdout: stop then rather than run on with nobody to answer. A watcher
/// thread polls stdout for the hang-up; stdout that is a file or a terminal never reports one.
struct Watcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    fn start() -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                let stdout = std::io::stdout();
                let mut fds = [rustix::event::PollFd::new(&stdout, rustix::event::PollFlags::empty())];
                let timeout = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 200_000_000,
                };
                if rustix::event::poll(&mut fds, Some(&timeout)).is_ok()
                    && fds[0]
                        .revents()
                        .intersects(rustix::event::PollFlags::HUP | rustix::event::PollFlags::ERR)
                {
                    std::process::exit(exit::IO_ERROR);
                }
            }
        });
        Watcher { stop, thread }
    }

    /// Stop watching (hwloc reads a `--fsroot` tree only while the process is one thread).
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Tests of interruption (built with `--features fault-injection` only): a node that takes
/// `TOPO_TUNE_NODE_DELAY_S` seconds to answer.
#[cfg(feature = "fault-injection")]
fn delay_for_tests() {
    if let Some(s) = std::env::var("TOPO_TUNE_NODE_DELAY_S")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_secs(s));
    }
}

#[cfg(not(feature = "fault-injection"))]
fn delay_for_tests() {}

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
        ..NodeEnv::live()
    };
    let watcher = Watcher::start();
    delay_for_tests();
    if env.fsroot.is_some() {
        watcher.stop();
    }
    let text = crate::node::serve(&args.kind, &input, &env)?;
    Ok(Done {
        text,
        exit_code: exit::OK,
    })
}
