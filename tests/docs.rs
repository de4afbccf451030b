//! The documentation stands alone: every relative link in README.md, CHANGELOG.md and docs/
//! names a file that exists in the repository, and nothing points outside it (`../shared`,
//! the development workspace users never have).

use std::path::{Path, PathBuf};

fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut stack = vec![root.join("docs"), root.join("examples")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out
}

/// The targets of `[text](target)` links, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_doc_link_names_a_file_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        for (line, target) in links(&text) {
            let target = target.split_whitespace().next().unwrap_or_default();
            if target.is_empty() || target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            let resolved = file.parent().unwrap().join(path);
            checked += 1;
            let inside = resolved
                .canonicalize()
                .map(|p| p.starts_with(root.canonicalize().unwrap()));
            match inside {
                Ok(true) => {}
                Ok(false) => broken.push(format!("{shown}:{line}: {target} is outside the repository")),
                Err(_) => broken.push(format!("{shown}:{line}: {target} does not exist")),
            }
        }
        for (i, l) in text.lines().enumerate() {
            if l.contains("../shared") {
                broken.push(format!(
                    "{shown}:{}: points into ../shared, which users do not have",
                    i + 1
                ));
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: is the scan broken?");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_link_scanner_finds_links_and_their_lines() {
    let found = links("a [x](docs/a.md) b [y](b.md#part)\n\nsee [z](https://e.org)\n");
    assert_eq!(
        found,
        [
            (1, "docs/a.md".to_string()),
            (1, "b.md#part".to_string()),
            (3, "https://e.org".to_string())
        ]
    );
}

/// A command the docs show must run as written: `apply --resume ID` alone has no cluster
/// (`--cluster-config` is required), so every `apply … --resume` names one (CHANGELOG aside:
/// it tells what changed). Before: README and docs/apply.md showed `apply --resume ID`.
#[test]
fn every_resume_the_docs_show_names_its_cluster() {
    for path in markdown_files().into_iter().filter(|p| !p.ends_with("CHANGELOG.md")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            assert!(
                !line.contains("apply --resume") || line.contains("--cluster-config"),
                "{}:{}: `apply --resume` needs --cluster-config FILE: {line}",
                path.display(),
                i + 1
            );
        }
    }
    // And that spelling is what the binary takes.
    let o = crate::common::tt(["apply", "--resume", "20261130T120000Z-4242"])
        .env_remove("TOPO_TUNE_CLUSTER_CONFIG")
        .run();
    assert_eq!(o.status.code(), Some(2), "it fails without a cluster");
}
