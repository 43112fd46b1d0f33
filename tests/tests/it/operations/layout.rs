//! The library's layout, checked from its sources (no build, no external
//! tool): at most 30 names at the root of `lambda-idempotency`, no import
//! circle between its top-level modules (and the batch core imports no
//! source), and no run of six or more lines repeated between two sources'
//! folders under `shared/src/sources/`. Test code is left out of the last
//! two: test files (`tests.rs`, `tests/`, `*_tests.rs`, `*_tests/`,
//! `testkit.rs`, and any file a `#[cfg(test)] mod x;` declares) and inline
//! `#[cfg(test)]` blocks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's `src/`.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Whether `path` (below `src()`) is test code by its name.
fn is_test_by_name(path: &Path) -> bool {
    let rel = path.strip_prefix(src()).unwrap_or(path);
    rel.components().any(|c| {
        let name = c.as_os_str().to_string_lossy();
        let stem = name.strip_suffix(".rs").unwrap_or(&name);
        stem == "tests" || stem == "testkit" || stem.ends_with("_tests")
    })
}

/// The directory holding the child modules of the module in `file`.
fn child_dir(file: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_string_lossy();
    let dir = file.parent().unwrap();
    if name == "mod.rs" || name == "lib.rs" {
        dir.to_path_buf()
    } else {
        dir.join(name.trim_end_matches(".rs"))
    }
}

/// The name `line` declares as a module (`mod x;`, `pub(crate) mod x {`).
fn declared_mod(line: &str) -> Option<(&str, bool)> {
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix("pub(crate) ")
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let rest = rest.strip_prefix("mod ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let (name, tail) = rest.split_at(end);
    Some((name, tail.trim_start().starts_with('{')))
}

/// The library's non-test source files, each with its non-test lines
/// (numbered from 1; inline `#[cfg(test)]` items removed) and its path.
fn non_test_sources() -> Vec<(PathBuf, Vec<(usize, String)>)> {
    let files = rust_files(&src());
    // Files a `#[cfg(test)] mod x;` declares (and everything below them).
    let mut test_roots: Vec<PathBuf> = Vec::new();
    for file in &files {
        let text = read(file);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[cfg(test)]" {
                continue;
            }
            if let Some((name, false)) = lines.get(i + 1).and_then(|l| declared_mod(l)) {
                let dir = child_dir(file);
                test_roots.push(dir.join(format!("{name}.rs")));
                test_roots.push(dir.join(name));
            }
        }
    }
    let is_test =
        |path: &Path| is_test_by_name(path) || test_roots.iter().any(|root| path.starts_with(root));
    files
        .into_iter()
        .filter(|f| !is_test(f))
        .map(|file| {
            let text = read(&file);
            let lines: Vec<&str> = text.lines().collect();
            let mut kept = Vec::new();
            let mut i = 0;
            while i < lines.len() {
                if lines[i].trim() == "#[cfg(test)]" {
                    // Skip the attribute and the item under it: a `mod x;`
                    // line, or a block up to its closing brace.
                    let mut depth = 0i64;
                    let mut opened = false;
                    i += 1;
                    while i < lines.len() {
                        for c in lines[i].chars() {
                            match c {
                                '{' => {
                                    depth += 1;
                                    opened = true;
                                }
                                '}' => depth -= 1,
                                _ => {}
                            }
                        }
                        let ends = if opened {
                            depth <= 0
                        } else {
                            lines[i].trim_end().ends_with(';')
                        };
                        i += 1;
                        if ends {
                            break;
                        }
                    }
                    continue;
                }
                kept.push((i + 1, lines[i].to_owned()));
                i += 1;
            }
            (file, kept)
        })
        .collect()
}

/// The items `shared/src/lib.rs` re-exports at the root (`pub use`), each
/// with the module path it comes from, and whether it is itself a module.
fn root_reexports() -> Vec<(String, String, bool)> {
    let lib = read(&src().join("lib.rs"));
    // Join each `pub use …;` statement onto one line.
    let mut statements = Vec::new();
    let mut current: Option<String> = None;
    for line in lib.lines() {
        let line = line.trim();
        if let Some(cur) = current.as_mut() {
            cur.push(' ');
            cur.push_str(line);
        } else if line.starts_with("pub use ") {
            current = Some(line.to_owned());
        }
        if current.as_ref().is_some_and(|c| c.ends_with(';')) {
            statements.push(current.take().unwrap());
        }
    }
    let mut out = Vec::new();
    for statement in statements {
        let path = statement
            .trim_start_matches("pub use ")
            .trim_end_matches(';')
            .trim();
        let (prefix, names): (&str, Vec<&str>) = match path.find('{') {
            Some(open) => (
                path[..open].trim_end_matches("::"),
                path[open + 1..path.rfind('}').expect("a closing brace")]
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .collect(),
            ),
            None => {
                let (prefix, name) = path.rsplit_once("::").expect("a path");
                (prefix, vec![name])
            }
        };
        for name in names {
            let (name, alias) = match name.split_once(" as ") {
                Some((n, a)) => (n.trim(), a.trim()),
                None => (name, name),
            };
            let dir = src().join(prefix.replace("::", "/"));
            let module =
                dir.join(format!("{name}.rs")).is_file() || dir.join(name).join("mod.rs").is_file();
            out.push((alias.to_owned(), prefix.to_owned(), module));
        }
    }
    out
}

/// The root's names: every item `lib.rs` re-exports that is not a module,
/// under every feature (as the layout that set the bound counted them: 27
/// names "plus modules"). At most 30.
#[test]
fn the_root_exports_at_most_thirty_names() {
    let reexports = root_reexports();
    assert!(
        reexports.len() > 10,
        "lib.rs's re-exports were not read: {reexports:?}"
    );
    let names: Vec<&str> = reexports
        .iter()
        .filter(|(_, _, module)| !module)
        .map(|(name, _, _)| name.as_str())
        .collect();
    let modules: Vec<&str> = reexports
        .iter()
        .filter(|(_, _, module)| *module)
        .map(|(name, _, _)| name.as_str())
        .collect();
    // The re-exported modules are told apart from items by their file.
    assert!(modules.contains(&"sqs") && names.contains(&"Idempotency"));
    assert!(
        names.len() <= 30,
        "the root of lambda-idempotency exports {} names (at most 30), besides the modules {modules:?}: {names:?}",
        names.len()
    );
}

/// The top-level modules of the library: `shared/src/<name>.rs` and
/// `shared/src/<name>/`.
fn top_modules() -> BTreeSet<String> {
    std::fs::read_dir(src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            if p.is_dir() {
                Some(name)
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib").then(|| stem.to_owned())
            }
        })
        .collect()
}

/// The first identifiers of the paths after each `crate::` in `code`
/// (`crate::a::b` gives `a`; `crate::{a::X, b}` gives `a` and `b`).
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "crate::".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `pub(crate)`-like words, `mycrate::`
        }
        if let Some(group) = after.strip_prefix('{') {
            // A use tree: its top-level items.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            out.push(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(after);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The module graph: top-level module → the top-level modules its
/// non-test code names through `crate::` (a root re-export counts as the
/// module it comes from), with one place for each edge.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let tops = top_modules();
    let via_root: BTreeMap<String, String> = root_reexports()
        .into_iter()
        .map(|(name, prefix, _)| {
            let top = prefix.split("::").next().unwrap().to_owned();
            (name, top)
        })
        .collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (file, lines) in non_test_sources() {
        let rel = file.strip_prefix(src()).unwrap().to_path_buf();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let from = first.trim_end_matches(".rs").to_owned();
        if from == "lib" {
            continue;
        }
        for (number, line) in &lines {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue; // comments and doc links are no imports
            }
            let code = code.split(" //").next().unwrap_or(code);
            for name in crate_paths(code) {
                let to = if tops.contains(&name) {
                    name
                } else if let Some(top) = via_root.get(&name) {
                    top.clone()
                } else {
                    continue;
                };
                if to != from {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| format!("{}:{number}", rel.display()));
                }
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &str) {
            self.index.insert(v.to_owned(), self.next);
            self.low.insert(v.to_owned(), self.next);
            self.next += 1;
            self.stack.push(v.to_owned());
            self.on_stack.insert(v.to_owned());
            let targets: Vec<String> = self
                .graph
                .get(v)
                .map(|e| e.keys().cloned().collect())
                .unwrap_or_default();
            for w in targets {
                if !self.index.contains_key(&w) {
                    self.visit(&w);
                    let low = self.low[v].min(self.low[&w]);
                    self.low.insert(v.to_owned(), low);
                } else if self.on_stack.contains(&w) {
                    let low = self.low[v].min(self.index[&w]);
                    self.low.insert(v.to_owned(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(&w);
                    let done = w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn the_cycle_finder_finds_a_circle_and_the_path_reader_reads_use_trees() {
    assert_eq!(
        crate_paths("use crate::{a::X, b, c::{d, e}}; let x = crate::f::g(); pub(crate) use y;"),
        ["a", "b", "c", "f"]
    );
    let edge = |a: &str, b: &str| {
        (
            a.to_owned(),
            BTreeMap::from([(b.to_owned(), String::new())]),
        )
    };
    let graph = BTreeMap::from([
        edge("a", "b"),
        edge("b", "c"),
        edge("c", "a"),
        edge("d", "a"),
    ]);
    assert_eq!(cycles(&graph), [["a", "b", "c"]]);
    let graph = BTreeMap::from([edge("a", "b"), edge("b", "c"), edge("d", "a")]);
    assert!(cycles(&graph).is_empty());
}

/// No import circle between the library's top-level modules, and the batch
/// core imports no source (`sources/`, or a source through its root name).
#[test]
fn no_import_circle_between_top_level_modules() {
    let graph = module_graph();
    assert!(
        graph
            .get("sources")
            .is_some_and(|e| e.contains_key("batch")),
        "the graph was not read: {graph:?}"
    );
    let found = cycles(&graph);
    let described: Vec<String> = found
        .iter()
        .map(|component| {
            let edges: Vec<String> = component
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| component.contains(to))
                        .map(move |(to, at)| format!("{from} -> {to} ({at})"))
                })
                .collect();
            format!("{component:?}: {}", edges.join(", "))
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles between top-level modules:\n{}",
        described.join("\n")
    );
    let upward = graph.get("batch").and_then(|e| e.get("sources"));
    assert!(
        upward.is_none(),
        "batch/ imports sources/ at {}",
        upward.map(String::as_str).unwrap_or_default()
    );
}

/// A line as the repetition check compares it: white space folded; `None`
/// for what it passes over (blank lines, comments, lone punctuation,
/// imports).
fn shape(line: &str) -> Option<String> {
    let folded = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let thin = folded
        .chars()
        .all(|c| matches!(c, '{' | '}' | '(' | ')' | '[' | ']' | ';' | ',' | ' '));
    let skipped = folded.is_empty()
        || thin
        || folded.starts_with("//")
        || folded.starts_with("use ")
        || folded.starts_with("pub use ")
        || folded.starts_with("pub(crate) use ");
    (!skipped).then_some(folded)
}

/// Where a run stands: `(group, file, first line, last line)`.
type Place = (String, String, usize, usize);

/// A file of a group: `(group, file, its numbered lines)`.
type GroupFile = (String, String, Vec<(usize, String)>);

/// The runs of at least `min` compared lines that stand in the files of
/// two different groups, as pairs of places.
fn repeated_runs(files: &[GroupFile], min: usize) -> Vec<(Place, Place)> {
    // Each file's compared lines, with their line numbers.
    let shaped: Vec<Vec<(usize, String)>> = files
        .iter()
        .map(|(_, _, lines)| {
            lines
                .iter()
                .filter_map(|(n, l)| shape(l).map(|s| (*n, s)))
                .collect()
        })
        .collect();
    // Every window of `min` lines → where it stands.
    let mut windows: BTreeMap<Vec<&str>, Vec<(usize, usize)>> = BTreeMap::new();
    for (f, lines) in shaped.iter().enumerate() {
        for start in 0..lines.len().saturating_sub(min - 1) {
            let key: Vec<&str> = lines[start..start + min]
                .iter()
                .map(|(_, s)| s.as_str())
                .collect();
            windows.entry(key).or_default().push((f, start));
        }
    }
    // Pairs of windows in two groups, merged into maximal runs.
    let mut starts: BTreeSet<(usize, usize, usize, usize)> = BTreeSet::new();
    for places in windows.values() {
        for (i, &(fa, sa)) in places.iter().enumerate() {
            for &(fb, sb) in &places[i + 1..] {
                if files[fa].0 != files[fb].0 {
                    starts.insert((fa, sa, fb, sb));
                }
            }
        }
    }
    let mut out = Vec::new();
    for &(fa, sa, fb, sb) in &starts {
        if sa > 0 && sb > 0 && starts.contains(&(fa, sa - 1, fb, sb - 1)) {
            continue; // inside a run that starts earlier
        }
        let mut len = min;
        while starts.contains(&(fa, sa + len - min + 1, fb, sb + len - min + 1)) {
            len += 1;
        }
        let place = |f: usize, s: usize| -> Place {
            (
                files[f].0.clone(),
                files[f].1.clone(),
                shaped[f][s].0,
                shaped[f][s + len - 1].0,
            )
        };
        out.push((place(fa, sa), place(fb, sb)));
    }
    out
}

#[test]
fn the_repetition_finder_finds_a_run_in_two_groups_only() {
    let file = |group: &str, text: &str| -> GroupFile {
        (
            group.to_owned(),
            format!("{group}.rs"),
            text.lines()
                .enumerate()
                .map(|(i, l)| (i + 1, l.to_owned()))
                .collect(),
        )
    };
    let body =
        "let a = 1;\n  let b = 2;\n}\nlet c = 3;\n// note\nlet d = 4;\nlet e = 5;\nlet f = 6;\n";
    let other =
        "let a = 1;\nlet b  =  2;\nlet c = 3;\nlet d = 4;\nlet e = 5;\nlet f = 6;\nlet g = 7;\n";
    let runs = repeated_runs(&[file("x", body), file("y", other)], 6);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!((runs[0].0.2, runs[0].0.3), (1, 8));
    assert_eq!((runs[0].1.2, runs[0].1.3), (1, 6));
    // Five lines are not a run; the same group is not two sources.
    let five = "let a = 1;\nlet b = 2;\nlet c = 3;\nlet d = 4;\nlet e = 5;\n";
    assert!(repeated_runs(&[file("x", body), file("y", five)], 6).is_empty());
    assert!(repeated_runs(&[file("x", body), file("x", other)], 6).is_empty());
}

/// No run of six or more lines (white space folded; blank lines, comments,
/// lone punctuation and imports passed over) stands in two sources'
/// folders' non-test code.
#[test]
fn no_run_of_six_lines_repeats_between_two_sources() {
    let sources = src().join("sources");
    let files: Vec<GroupFile> = non_test_sources()
        .into_iter()
        .filter_map(|(path, lines)| {
            let rel = path.strip_prefix(&sources).ok()?;
            let mut parts = rel.components();
            let group = parts.next()?.as_os_str().to_string_lossy().into_owned();
            // A source is a folder; `sources/mod.rs` is the shared part.
            parts.next()?;
            Some((group, rel.display().to_string(), lines))
        })
        .collect();
    let groups: BTreeSet<&str> = files.iter().map(|(g, _, _)| g.as_str()).collect();
    assert!(
        groups.contains("sqs") && groups.contains("kafka"),
        "the sources were not read: {groups:?}"
    );
    let runs = repeated_runs(&files, 6);
    let described: Vec<String> = runs
        .iter()
        .map(|(a, b)| {
            format!(
                "sources/{}:{}-{} ~ sources/{}:{}-{}",
                a.1, a.2, a.3, b.1, b.2, b.3
            )
        })
        .collect();
    assert!(
        runs.is_empty(),
        "{} runs of six or more lines repeat between two sources (one place for \
         both, in the core or sources/mod.rs):\n{}",
        runs.len(),
        described.join("\n")
    );
}
