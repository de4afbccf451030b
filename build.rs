//! Records the git commit the binary was built from, for `topo-tune --version`.
//!
//! Reruns only when the commit changes: `.git/HEAD` (a checkout), the branch file it names (a
//! commit), and `packed-refs` (a branch packed by `git gc`). Not `.git/index`, which `git
//! status` rewrites: watching it rebuilt everything on every `cargo install`.

use std::path::Path;

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TOPO_TUNE_COMMIT={commit}");
    // A missing .git (a source tarball) is fine: cargo then reruns only on source changes.
    // Only files that exist are watched: cargo reruns a script on every build while a watched
    // path is missing.
    let git = Path::new(".git");
    let branch = std::fs::read_to_string(git.join("HEAD"))
        .ok()
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
        .filter(|r| r.starts_with("refs/") && !r.contains(".."));
    let watched = ["HEAD".to_string(), "packed-refs".to_string()]
        .into_iter()
        .chain(branch);
    for name in watched {
        if git.join(&name).is_file() {
            println!("cargo:rerun-if-changed=.git/{name}");
        }
    }
}
