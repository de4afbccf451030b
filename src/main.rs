//! The `topo-tune` binary: parse, run, exit with the documented code. Nothing else.

fn main() {
    std::process::exit(topo_tune::run(std::env::args_os()));
}
