//! The layers stay one way: `model` imports nothing of the crate, the pure core (`model`,
//! `graph`, `nccl`, `solve`, `emit`, `digest`) imports only the pure core and touches no
//! filesystem, network, clock, process or environment, no two modules import each other
//! (directly or around a cycle), and docs/architecture.md shows the graph as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const PURE: &[&str] = &["model", "graph", "nccl", "solve", "emit", "digest", "bench", "trace"];
/// What a pure module must not name: I/O, the clock, the environment, processes, async.
const IMPURE: &[&str] = &[
    "std::fs",
    "std::net",
    "std::env",
    "std::process",
    "std::io::stdin",
    "std::io::stdout",
    "SystemTime",
    "Instant",
    "tokio",
    "std::thread",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`src/x.rs` and `src/x/**` are `x`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .to_string();
    first.trim_end_matches(".rs").to_string()
}

/// Code without `//` comments (doc comments mention modules in prose).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Top-level modules named by `crate::x` paths and `use crate::{x, y::z}` groups.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// module → the modules it imports, and module → its code.
fn graph() -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for f in files {
        let m = module_of(&src, &f);
        if m == "lib" || m == "main" {
            continue;
        }
        let c = code(&std::fs::read_to_string(&f).unwrap());
        let mut names = imports(&c);
        names.remove(&m);
        deps.entry(m.clone()).or_default().extend(names);
        texts.entry(m).or_default().push_str(&c);
    }
    (deps, texts)
}

/// A cycle through `start`, if any (depth-first over the import graph).
fn cycle_from(deps: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((m, path)) = stack.pop() {
        for d in deps.get(&m).into_iter().flatten() {
            if d == start {
                let mut c = path.clone();
                c.push(d.clone());
                return Some(c);
            }
            if seen.insert(d.clone()) {
                let mut p = path.clone();
                p.push(d.clone());
                stack.push((d.clone(), p));
            }
        }
    }
    None
}

/// The graph as docs/architecture.md prints it.
fn rendered(deps: &BTreeMap<String, BTreeSet<String>>) -> String {
    deps.iter()
        .map(|(m, d)| {
            let list: Vec<&str> = d.iter().map(String::as_str).collect();
            format!(
                "{m} -> {}\n",
                if list.is_empty() {
                    "(nothing)".to_string()
                } else {
                    list.join(", ")
                }
            )
        })
        .collect()
}

#[test]
fn model_is_a_leaf_and_the_pure_core_imports_only_itself() {
    let (deps, _) = graph();
    assert!(deps["model"].is_empty(), "model imports {:?}", deps["model"]);
    for m in PURE {
        let bad: Vec<&String> = deps[*m].iter().filter(|d| !PURE.contains(&d.as_str())).collect();
        assert!(bad.is_empty(), "pure module `{m}` imports I/O modules {bad:?}");
    }
}

#[test]
fn the_pure_core_does_no_io() {
    let (_, texts) = graph();
    for m in PURE {
        for word in IMPURE {
            assert!(!texts[*m].contains(word), "pure module `{m}` names `{word}`");
        }
    }
}

#[test]
fn no_import_cycles() {
    let (deps, _) = graph();
    for m in deps.keys() {
        assert_eq!(cycle_from(&deps, m), None, "import cycle");
    }
}

#[test]
fn the_documented_graph_is_the_real_one() {
    let (deps, _) = graph();
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
    let block = doc
        .split("<!-- imports:begin -->\n```\n")
        .nth(1)
        .and_then(|b| b.split("```\n<!-- imports:end -->").next())
        .expect("docs/architecture.md holds the import graph between <!-- imports:begin/end -->");
    let real = rendered(&deps);
    assert!(
        block == real,
        "docs/architecture.md shows another import graph; the real one is:\n{real}"
    );
}

#[test]
fn the_checker_sees_what_it_must() {
    // The scanner itself: grouped imports, nested paths, comments ignored.
    let c = code("use crate::{model::x, graph};\n// crate::cmd in a comment\nlet y = crate::nccl::table::lookup(z);");
    assert_eq!(
        imports(&c),
        ["graph", "model", "nccl"].iter().map(|s| s.to_string()).collect()
    );
    let looped = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert!(cycle_from(&looped, "a").is_some());
}

/// Files of one top-level module: its first-level child (`src/m/a.rs` and `src/m/a/**` are
/// `a`) → that child's code. `mod.rs` is left out: it declares and re-exports its children.
fn rooms(module: &str) -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(module);
    let mut files = Vec::new();
    sources(&dir, &mut files);
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for f in files {
        let child = module_of(&dir, &f);
        if child == "mod" {
            continue;
        }
        out.entry(child)
            .or_default()
            .push_str(&code(&std::fs::read_to_string(&f).unwrap()));
    }
    out
}

/// The siblings a child of `module` names: `super::x` (from a direct child file) and
/// `crate::module::x`, grouped forms included.
fn sibling_imports(module: &str, code: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["super::".to_string(), format!("crate::{module}::")] {
        let mut rest = code;
        while let Some(i) = rest.find(&prefix) {
            rest = &rest[i + prefix.len()..];
            // `super::super::x` leaves the room: not a sibling.
            if rest.starts_with("super::") {
                rest = rest.trim_start_matches("super::");
                continue;
            }
            let names: Vec<String> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(',')
                    .map(|p| {
                        p.trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect()
                    })
                    .collect(),
                None => vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()],
            };
            out.extend(names.into_iter().filter(|n| siblings.contains(n)));
        }
    }
    out
}

#[test]
fn flow_imports_no_cli_and_no_clap() {
    let (deps, texts) = graph();
    assert!(!deps["flow"].contains("cli"), "flow imports cli: {:?}", deps["flow"]);
    assert!(!deps["flow"].contains("cmd"), "flow imports cmd: {:?}", deps["flow"]);
    assert!(!texts["flow"].contains("clap"), "flow names clap");
    for m in deps
        .keys()
        .filter(|m| !["cli", "cmd", "error", "fuzz", "api"].contains(&m.as_str()))
    {
        assert!(
            !deps[m].contains("cli"),
            "`{m}` imports cli: settings are resolved once, in cli"
        );
    }
}

#[test]
fn no_cmd_file_imports_another() {
    let files = rooms("cmd");
    let names: BTreeSet<String> = files.keys().cloned().collect();
    for (file, code) in &files {
        let mut others = sibling_imports("cmd", code, &names);
        others.remove(file);
        assert!(
            others.is_empty(),
            "cmd/{file} imports cmd/{others:?}: shared flows live in flow/"
        );
    }
}

#[test]
fn no_circle_inside_a_room() {
    let (deps, _) = graph();
    for module in deps.keys() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(module);
        if !dir.is_dir() {
            continue;
        }
        let files = rooms(module);
        let names: BTreeSet<String> = files.keys().cloned().collect();
        let inner: BTreeMap<String, BTreeSet<String>> = files
            .iter()
            .map(|(f, code)| {
                let mut d = sibling_imports(module, code, &names);
                d.remove(f);
                (f.clone(), d)
            })
            .collect();
        for f in inner.keys() {
            assert_eq!(cycle_from(&inner, f), None, "a circle inside {module}/");
        }
    }
}

#[test]
fn the_room_checker_sees_siblings_only() {
    let names: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let c = code("use super::{a::X, b};\nuse super::super::c;\nlet y = crate::m::c::f();\n// super::b");
    assert_eq!(
        sibling_imports("m", &c, &names),
        ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
    );
    let only_outer = code("use super::super::c;");
    assert!(sibling_imports("m", &only_outer, &names).is_empty());
}
