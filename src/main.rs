//! The `topo-tune` binary: parse, run, exit with the documented code. Nothing else.

/// jemalloc, not glibc's malloc: reading a large fabric or trace is millions of small strings
/// made and freed, where glibc's free lists cost a third of the run (docs/performance.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    std::process::exit(topo_tune::run(std::env::args_os()));
}
