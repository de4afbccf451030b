//! The node side's watch on its controller: when the controller goes away (interrupted, or
//! its ssh master closed), sshd closes the other end of our stdout, and the node side stops
//! rather than run on with nobody to answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// When the controller goes away (interrupted, or its ssh master closed), sshd closes the
/// other end of our stdout: stop then rather than run on with nobody to answer. A watcher
/// thread polls stdout for the hang-up; stdout that is a file or a terminal never reports one.
pub(crate) struct Watcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    pub(crate) fn start() -> Watcher {
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
                    std::process::exit(crate::exit::IO_ERROR.code());
                }
            }
        });
        Watcher { stop, thread }
    }

    /// Stop watching (hwloc reads a `--fsroot` tree only while the process is one thread).
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Tests of interruption (built with `--features fault-injection` only): a node that takes
/// `TOPO_TUNE_NODE_DELAY_S` seconds to answer.
#[cfg(feature = "fault-injection")]
pub(crate) fn delay_for_tests() {
    if let Some(s) = std::env::var("TOPO_TUNE_NODE_DELAY_S")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_secs(s));
    }
}

#[cfg(not(feature = "fault-injection"))]
pub(crate) fn delay_for_tests() {}
