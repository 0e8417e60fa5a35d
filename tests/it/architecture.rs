//! The one-way rule of docs/architecture.md, checked on the source: a module
//! imports only from the layers below it, and no files import each other in
//! a loop. Until the layers are crates of their own (issue: a workspace of
//! crates), this test is what keeps an upward import from landing; each
//! exception it knows is named with the reason, and it fails when an
//! exception is no longer needed, so the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, lowest layer first: each may import only
/// from those before it.
#[rustfmt::skip]
const LAYERS: &[&str] = &[
    // Leaves every layer may use (crate ccl-read; crate ccl-store's way of
    // writing files).
    "error", "naming", "human", "safe", "progress", "memory", "source", "confined", "atomic",
    // The timeline model (crate ccl-model).
    "model",
    // Synthetic traces, readers, the format table, discovery (crate ccl-read).
    "synth", "read", "formats", "discover",
    // Figures derived once per rank, metrics, two runs compared and gated
    // (crate ccl-metrics).
    "derive", "metrics", "compare", "gate",
    // Storage: summaries, pages, kept results' files, spill files (crate ccl-store).
    "spill", "summary",
    // Reading a run, and how it is held (session/load.rs reads).
    "session",
    // Views.
    "report",
    // What a summary's metrics printed, kept for the next ask (its files:
    // ccl-store); a run's figures kept as a named baseline for the gate.
    "kept", "baseline",
    "export",
    // The questions one-answer commands and the MCP server answer, as JSON.
    "answers",
    "fuzz", "cli", "headless", "mcp", "tui", "entry",
];

/// Imports that run upward today, with why; each must still exist.
const UPWARD: &[(&str, &str, &str)] = &[];

/// Files that import each other in a loop today, with why; each loop must
/// still be exactly this.
const LOOPS: &[(&[&str], &str)] = &[];

/// The source folders and the module each stands for: the application's
/// `src/`, and each crate it is made of as the module it is used as
/// (`pub use ccl_model as model`).
fn roots() -> Vec<(PathBuf, &'static str)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![
        (root.join("src"), ""),
        (root.join("crates/model/src"), "model"),
        // Used by their modules' own names (`pub use ccl_read::{read, ...}`).
        (root.join("crates/read/src"), ""),
        (root.join("crates/metrics/src"), ""),
        (root.join("crates/store/src"), ""),
    ]
}

/// Every source file as its module path (`tui/tabs/timeline`), with its
/// text outside comments and test modules.
fn files() -> BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    for (dir, module) in roots() {
        let mut found = Vec::new();
        walk(&dir, &mut found);
        paths.extend(found.into_iter().map(|p| (dir.clone(), module, p)));
    }
    let comment = regex::Regex::new(r"//[^\n]*").unwrap();
    let test_mod =
        regex::Regex::new(r"#\[cfg\(test\)\]\s*(?:pub(?:\(crate\))? )?mod (\w+);").unwrap();
    let mut out = BTreeMap::new();
    let mut test_only = BTreeSet::new();
    for (dir, module, p) in paths {
        let rel = p.strip_prefix(&dir).unwrap().with_extension("");
        let rel = rel.to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        if module.is_empty() && (rel == "lib" || rel == "main") {
            // Not a module of its own; its test-only modules are noted.
            for c in test_mod.captures_iter(&text) {
                test_only.insert(c[1].to_owned());
            }
            continue;
        }
        // A crate's own paths (`crate::x`) are its module's (`model/x`).
        let (name, text) = match (module, rel.as_str()) {
            ("", _) => (rel.clone(), text),
            (m, "lib") => (m.to_owned(), crate_paths(&text, m)),
            (m, _) => (format!("{m}/{rel}"), crate_paths(&text, m)),
        };
        // A file's own tests may use anything.
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => text[..i].to_owned(),
            None => text,
        };
        let parent = name.rsplit_once('/').map_or("", |(a, _)| a).to_owned();
        let module_dir = name.clone();
        for c in test_mod.captures_iter(&text) {
            // `mod x;` in `a.rs` (or `a/mod.rs`) is `a/x.rs`.
            test_only.insert(format!("{module_dir}/{}", &c[1]));
            if !parent.is_empty() {
                test_only.insert(format!("{parent}/{}", &c[1]));
            }
        }
        let text = test_mod.replace_all(&text, "");
        out.insert(name, comment.replace_all(&text, "").into_owned());
    }
    out.retain(|name, _| {
        !test_only
            .iter()
            .any(|t| name == t || name.starts_with(&format!("{t}/")))
    });
    out
}

/// `text` of a crate used as module `m`, its `crate::` paths written as the
/// application's (`crate::m::`).
fn crate_paths(text: &str, m: &str) -> String {
    text.replace("crate::", &format!("crate::{m}::"))
}

/// The module paths a file names (`crate::a::b::c`, `super::x`, `use
/// crate::{a, b}`, `use super::{x, y::z}`), resolved to the files that
/// exist, longest first.
fn imports(name: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let path =
        regex::Regex::new(r"\b((?:crate|super)(?:::(?:super|\w+))*)(?:::\{([^}]*)\})?").unwrap();
    let parent: Vec<&str> = name.split('/').collect();
    let mut out = BTreeSet::new();
    let mut resolve = |segments: Vec<String>| {
        // The longest prefix that is a file.
        for n in (1..=segments.len()).rev() {
            let cand = segments[..n].join("/");
            if known.contains(&cand) {
                if cand != name {
                    out.insert(cand);
                }
                return;
            }
        }
    };
    for c in path.captures_iter(text) {
        let mut parts = c[1].split("::");
        let mut base: Vec<String> = match parts.next() {
            Some("crate") => Vec::new(),
            // `super` of `a/b` (a file in folder a) is module `a`.
            _ => parent[..parent.len().saturating_sub(1)]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        for p in parts {
            if p == "super" {
                base.pop();
            } else {
                base.push(p.to_owned());
            }
        }
        match c.get(2) {
            Some(items) => {
                for item in items.as_str().split(',') {
                    let first = item.trim().split("::").next().unwrap_or("").trim();
                    if first.is_empty() || first == "self" {
                        resolve(base.clone());
                    } else {
                        let mut seg = base.clone();
                        seg.push(first.to_owned());
                        resolve(seg);
                    }
                }
            }
            None => resolve(base),
        }
    }
    out
}

fn top(module: &str) -> &str {
    module.split('/').next().unwrap()
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = files();
    let mut known: BTreeSet<String> = files.keys().cloned().collect();
    // `a.rs` beside `a/`: the folder's modules resolve through `a`.
    known.extend(files.keys().map(|k| top(k).to_owned()));
    files
        .iter()
        .map(|(name, text)| (name.clone(), imports(name, text, &known)))
        .collect()
}

#[test]
fn architecture_layers_import_only_downward() {
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut upward: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (file, deps) in graph() {
        let from = top(&file).to_owned();
        let r = rank(&from).unwrap_or_else(|| panic!("src/{from} is in no layer of LAYERS"));
        for d in deps {
            let to = top(&d).to_owned();
            if to == from {
                continue;
            }
            let t = rank(&to).unwrap_or_else(|| panic!("src/{to} is in no layer of LAYERS"));
            if t > r {
                upward
                    .entry((from.clone(), to))
                    .or_default()
                    .insert(file.clone());
            }
        }
    }
    let allowed: BTreeSet<(String, String)> = UPWARD
        .iter()
        .map(|(a, b, _)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<String> = upward
        .iter()
        .filter(|(k, _)| !allowed.contains(*k))
        .map(|((a, b), files)| format!("{a} -> {b} (in {files:?})"))
        .collect();
    assert!(
        new.is_empty(),
        "imports that run upward (see docs/architecture.md):\n{}",
        new.join("\n")
    );
    let gone: Vec<_> = allowed
        .iter()
        .filter(|k| !upward.contains_key(*k))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer upward, so take them out of UPWARD: {gone:?}"
    );
}

/// The strongly connected components of more than one file (Tarjan).
fn loops(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct S<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !g.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[test]
fn architecture_no_files_import_each_other_in_a_loop() {
    let found = loops(&graph());
    let known: Vec<Vec<String>> = LOOPS
        .iter()
        .map(|(files, _)| files.iter().map(|f| f.to_string()).collect())
        .collect();
    assert_eq!(
        found, known,
        "files that import each other in a loop (left: found; right: the known ones in LOOPS)"
    );
}

#[test]
fn architecture_loops_are_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(loops(&g), vec![vec!["a", "b", "c"]]);
    let known: BTreeSet<String> = ["tui", "tui/app", "tui/svg", "report", "report/safe"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let deps = imports(
        "tui/app",
        "use super::{svg, app::X};\nuse crate::report::safe::Safe;\nfn f() { crate::tui::svg::save(); }",
        &known,
    );
    assert_eq!(
        deps.into_iter().collect::<Vec<_>>(),
        vec!["report/safe", "tui/svg"]
    );
}

/// The model is plain data: it depends on no crate that reaches files
/// (storage lives in `ccl-store`, reading in `ccl-read`) and opens none
/// itself, so nothing about where a run is kept can creep into it.
#[test]
fn architecture_the_model_holds_no_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/model");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("\n[").next())
        .expect("the model's Cargo.toml lists its dependencies");
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n.trim()))
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect();
    let plain = ["serde", "serde_json", "regex", "foldhash", "toml"];
    let other: Vec<_> = names.iter().filter(|n| !plain.contains(n)).collect();
    assert!(
        other.is_empty(),
        "ccl-model depends on {other:?}: the model holds plain data, and its dependencies are \
         {plain:?}; a crate for files, maps or tables belongs in ccl-read or ccl-store"
    );
    let mut files = Vec::new();
    let mut dirs = vec![root.join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 10, "the model's sources are found");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for word in ["std::fs", "File::open", "File::create", "TempDir"] {
            assert!(
                !text.contains(word),
                "{} names {word}: the model opens no file",
                f.display()
            );
        }
    }
}
