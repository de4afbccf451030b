//! The layers stay one way: `model` imports nothing of the crate, the pure core (`model`,
//! `graph`, `nccl`, `solve`, `emit`, `digest`) imports only the pure core and touches no
//! filesystem, network, clock, process or environment, no two modules import each other
//! (directly or around a cycle), and docs/architecture.md shows the graph as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const PURE: &[&str] = &[
    "model", "graph", "nccl", "solve", "emit", "digest", "bench", "trace", "tune",
];
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

/// Every `.rs` file under `src/`, with its path relative to `src/` and its code (comments
/// out).
fn src_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().display().to_string();
            (rel, code(&std::fs::read_to_string(&f).unwrap()))
        })
        .collect()
}

/// The names of the `*Settings` types a file defines.
fn settings_types(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for kw in ["struct ", "enum "] {
        let mut rest = code;
        while let Some(i) = rest.find(kw) {
            rest = &rest[i + kw.len()..];
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if name.ends_with("Settings") {
                out.push(name);
            }
        }
    }
    out
}

/// What a `cmd/` file reads of its flags other than `args.resolve()`.
fn raw_flag_reads(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("args.") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "args.".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let field: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if field != "resolve" {
            out.push(format!("args.{field}"));
        }
    }
    out
}

#[test]
fn settings_are_resolved_in_one_place() {
    for (file, code) in src_files() {
        if file != "flow/settings.rs" {
            let found = settings_types(&code);
            assert!(
                found.is_empty(),
                "src/{file} defines {found:?}: every command's settings live in flow/settings.rs"
            );
        }
        if file.starts_with("cmd/") {
            let raw = raw_flag_reads(&code);
            assert!(
                raw.is_empty(),
                "src/{file} reads {raw:?}: cmd/ reads only what `args.resolve()` gives (cli/resolve.rs)"
            );
        }
    }
}

/// Each `Result<T, String>` in the code (the error side exactly `String`).
fn string_errors(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("Result<") {
        rest = &rest[i + "Result<".len()..];
        let (mut depth, mut comma) = (1, None);
        let mut end = rest.len();
        for (k, c) in rest.char_indices() {
            match c {
                '<' => depth += 1,
                '>' if !rest[..k].ends_with('-') => {
                    depth -= 1;
                    if depth == 0 {
                        end = k;
                        break;
                    }
                }
                ',' if depth == 1 => comma = Some(k),
                _ => {}
            }
        }
        if let Some(c) = comma {
            if rest[c + 1..end].trim() == "String" {
                out.push(format!("Result<{}>", &rest[..end]));
            }
        }
    }
    out
}

#[test]
fn no_function_fails_with_a_bare_string() {
    for (file, code) in src_files() {
        let found = string_errors(&code);
        assert!(
            found.is_empty(),
            "src/{file}: {found:?}: errors are typed (a thiserror enum that says what went wrong)"
        );
    }
}

/// The enum paths a `match` arm of `error.rs` names (`Foo::Bar` before `=>`).
fn matched_enums(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| l.contains("=>")) {
        let pattern = line.split("=>").next().unwrap_or("");
        for part in pattern.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            if let Some((ty, _)) = part.split_once("::") {
                if ty.chars().next().is_some_and(char::is_uppercase) {
                    out.insert(ty.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn error_rs_matches_no_other_modules_enum() {
    let code = code(&std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/error.rs")).unwrap());
    let foreign: Vec<String> = matched_enums(&code).into_iter().filter(|t| t != "Error").collect();
    assert!(
        foreign.is_empty(),
        "src/error.rs matches into {foreign:?}: each module's error classifies itself (exit::Classify)"
    );
}

#[test]
fn every_src_folder_is_in_the_readme_layout_and_the_architecture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let arch = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    for e in std::fs::read_dir(root.join("src")).unwrap().flatten() {
        if !e.path().is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        assert!(
            readme.contains(&format!("`src/{name}`")),
            "README.md's layout does not name src/{name}"
        );
        assert!(
            arch.contains(&format!("| `{name}` |")) || arch.contains(&format!("| `{name}`,")),
            "docs/architecture.md's layer table has no row for {name}"
        );
    }
}

/// Modules whose files share types through files of their own, never through `mod.rs`
/// (which holds the registry): no arrow runs back up inside the room.
const NO_ARROW_UP: &[&str] = &["doctor"];

#[test]
fn doctor_checks_import_nothing_from_the_registry() {
    for module in NO_ARROW_UP {
        let files = rooms(module);
        let names: BTreeSet<String> = files.keys().cloned().collect();
        for (file, code) in &files {
            let mut rest = code.as_str();
            while let Some(i) = rest.find("super::") {
                rest = &rest[i + "super::".len()..];
                let group = rest.strip_prefix('{').map(|g| &g[..g.find('}').unwrap_or(g.len())]);
                let items: Vec<String> = match group {
                    Some(g) => g
                        .split(',')
                        .map(|p| p.trim().split("::").next().unwrap_or("").to_string())
                        .collect(),
                    None => vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()],
                };
                for item in items.into_iter().filter(|i| !i.is_empty() && i != "super") {
                    assert!(
                        names.contains(&item),
                        "{module}/{file}.rs imports `super::{item}` from {module}/mod.rs: shared types go in a file of their own"
                    );
                }
            }
        }
    }
}

#[test]
fn the_new_checkers_see_what_they_must() {
    assert_eq!(
        settings_types("pub(crate) struct TraceSettings {"),
        vec!["TraceSettings"]
    );
    assert_eq!(
        raw_flag_reads("let s = args.resolve()?; if args.list {}"),
        vec!["args.list"]
    );
    assert!(raw_flag_reads("let x = myargs.list;").is_empty());
    assert_eq!(
        string_errors("fn f() -> Result<Vec<Vec<u32>>, String> {"),
        vec!["Result<Vec<Vec<u32>>, String>"]
    );
    assert!(string_errors("fn f() -> Result<BTreeMap<String, String>, ConfigError> {").is_empty());
    assert!(string_errors("fn f() -> Result<(), Box<dyn Fn() -> String>> {").is_empty());
    assert_eq!(
        matched_enums("Error::Trace(e) => trace_class(e),\nTraceError::Open { .. } => x,"),
        ["Error", "TraceError"].iter().map(|s| s.to_string()).collect()
    );
}
