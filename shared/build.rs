//! Writes the guide (`crate::guide`) from the pages under `guide/` (in the
//! repository a link to its `docs/`; in the package a copy of them, packed by
//! `cargo package`): `$OUT_DIR/guide.rs`, one module per page, and
//! `$OUT_DIR/guide/<page>.md`, each page's text with its links rewritten for
//! rustdoc (see `rewrite`). The pages' Rust blocks are the modules' doctests,
//! in the repository and in the package alike.
//!
//! Sets `cfg(workspace_docs)` when this crate sits in its workspace (the
//! parent directory is the workspace), and writes
//! `$OUT_DIR/workspace_docs.rs`: one item per page of the workspace that is
//! not in the guide (`README.md`, `CONTRIBUTING.md`), its text as the item's
//! docs, so that `cargo test --doc` compiles and runs their Rust blocks too.
//! The published package holds neither: there the cfg is off.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(workspace_docs)");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    guide(&manifest, &out);
    workspace_docs(&manifest, &out);
}

/// The folder of the guide's pages: `guide/`, a link to `../docs` in the
/// repository (or, where links are checked out as files, a file holding
/// that path), a folder in the package.
fn guide_dir(manifest: &Path) -> PathBuf {
    let guide = manifest.join("guide");
    println!("cargo::rerun-if-changed={}", guide.display());
    if guide.is_file() {
        let target = std::fs::read_to_string(&guide).expect("read guide");
        return manifest.join(target.trim());
    }
    guide
}

/// A page: its path under the guide (`sources/sqs.md`) and its module path
/// under `crate::guide` (`["sources", "sqs"]`; the guide's `README.md` is the
/// guide module itself, `[]`).
struct Page {
    rel: PathBuf,
    module: Vec<String>,
}

/// A module name from a file or folder name: `dynamodb-streams` →
/// `dynamodb_streams`.
fn ident(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn page(rel: &Path) -> Page {
    let mut module: Vec<String> = rel
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .map(|c| ident(&c.as_os_str().to_string_lossy()))
        .collect();
    let stem = rel
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem != "README" {
        module.push(ident(&stem));
    }
    Page {
        rel: rel.to_path_buf(),
        module,
    }
}

fn guide(manifest: &Path, out: &Path) {
    let dir = guide_dir(manifest);
    let mut files = Vec::new();
    collect(&dir, &mut files);
    files.sort();
    let pages: Vec<Page> = files
        .iter()
        .map(|f| page(f.strip_prefix(&dir).expect("under the guide")))
        .collect();
    let modules = pages
        .iter()
        .map(|p| (p.rel.clone(), p.module.clone()))
        .collect();
    let texts: Vec<String> = pages
        .iter()
        .map(|page| {
            let source = dir.join(&page.rel);
            println!("cargo::rerun-if-changed={}", source.display());
            std::fs::read_to_string(&source).expect("read a page")
        })
        .collect();
    let guide = Guide {
        modules,
        ids: pages
            .iter()
            .zip(&texts)
            .map(|(p, t)| (p.rel.clone(), heading_ids(t)))
            .collect(),
        dir: dir.clone(),
        absent: absent_items(&manifest.join("src/lib.rs")),
    };
    let out_pages = out.join("guide");
    for (page, text) in pages.iter().zip(&texts) {
        let text = rewrite(text, &page.rel, &guide);
        let target = out_pages.join(&page.rel);
        std::fs::create_dir_all(target.parent().expect("a folder")).expect("create a folder");
        std::fs::write(&target, text).expect("write a page");
    }
    // The module tree: one module per page, one per folder.
    let mut tree = Tree::default();
    for page in &pages {
        let mut node = &mut tree;
        for name in &page.module {
            node = node.children.entry(name.clone()).or_default();
        }
        node.page = Some(out_pages.join(&page.rel));
    }
    let mut code = String::new();
    // The guide module's own docs are in src/guide.rs (its README).
    for (name, child) in &tree.children {
        child.write(name, &[], &mut code);
    }
    std::fs::write(out.join("guide.rs"), code).expect("write guide.rs");
}

/// The guide's modules.
#[derive(Default)]
struct Tree {
    page: Option<PathBuf>,
    children: BTreeMap<String, Tree>,
}

impl Tree {
    fn write(&self, name: &str, parents: &[&str], code: &mut String) {
        match &self.page {
            Some(page) => {
                let _ = writeln!(
                    code,
                    "#[doc = include_str!({:?})]",
                    page.display().to_string()
                );
            }
            None => {
                let folder: Vec<&str> = parents.iter().copied().chain([name]).collect();
                let _ = writeln!(
                    code,
                    "/// The pages of the guide's `{}/` folder, one module each.",
                    folder.join("/")
                );
            }
        }
        let _ = writeln!(code, "pub mod {name} {{");
        let path: Vec<&str> = parents.iter().copied().chain([name]).collect();
        for (child, tree) in &self.children {
            tree.write(child, &path, code);
        }
        let _ = writeln!(code, "}}");
    }
}

/// What a page's links are rewritten with.
struct Guide {
    /// Each page's module path under `crate::guide`.
    modules: BTreeMap<PathBuf, Vec<String>>,
    /// Each page's headings: GitHub's anchor → rustdoc's `id`.
    ids: BTreeMap<PathBuf, BTreeMap<String, String>>,
    /// The guide's folder, where its pictures are.
    dir: PathBuf,
    /// The crate root's items this build leaves out (their features off).
    absent: BTreeSet<String>,
}

impl Guide {
    /// The rustdoc `id` of the heading GitHub names `anchor` on `page` (the
    /// anchor itself when it is no heading's: an HTML anchor of the page).
    fn id<'a>(&'a self, page: &Path, anchor: &'a str) -> &'a str {
        self.ids
            .get(page)
            .and_then(|ids| ids.get(anchor))
            .map_or(anchor, String::as_str)
    }

    /// A `data:` URI of the SVG picture at `rel` (under the guide), if it is
    /// one.
    fn data_uri(&self, rel: &Path) -> Option<String> {
        if rel.extension().is_none_or(|e| e != "svg") {
            return None;
        }
        let path = self.dir.join(rel);
        println!("cargo::rerun-if-changed={}", path.display());
        let bytes = std::fs::read(&path).ok()?;
        Some(format!(
            "data:image/svg+xml;base64,{}",
            STANDARD.encode(&bytes)
        ))
    }
}

/// `path` with `.` and `..` resolved, or `None` if it leaves its root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// What a link of a page becomes in rustdoc.
enum Target {
    /// The same target (a URL, an anchor of the same page).
    Keep,
    /// Another target: an intra-doc link to the page's module, a picture's
    /// `data:` URI.
    To(String),
    /// No link: a file outside the guide, which the package does not hold;
    /// the text names it ("the repository's `tests/README.md`").
    Outside(String),
}

/// Where a link of the page `page` (under the guide) to `target` goes in
/// rustdoc.
fn target(target: &str, page: &Path, guide: &Guide) -> Target {
    if let Some(anchor) = target.strip_prefix('#') {
        let id = guide.id(page, anchor);
        return if id == anchor {
            Target::Keep
        } else {
            Target::To(format!("#{id}"))
        };
    }
    if target.is_empty() || target.contains(':') {
        return Target::Keep;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let joined = page.parent().unwrap_or(Path::new("")).join(path);
    let Some(resolved) = normalize(&joined) else {
        // Outside the guide: named by its path in the repository, where the
        // guide is `docs/`.
        let repo = normalize(&Path::new("docs").join(&joined))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| path.to_owned());
        return Target::Outside(repo);
    };
    if let Some(module) = guide.modules.get(&resolved) {
        let mut link = String::from("crate::guide");
        for name in module {
            link.push_str("::");
            link.push_str(name);
        }
        if let Some(anchor) = anchor {
            link.push('#');
            link.push_str(guide.id(&resolved, anchor));
        }
        return Target::To(link);
    }
    if let Some(uri) = guide.data_uri(&resolved) {
        return Target::To(uri);
    }
    Target::Outside(Path::new("docs").join(&resolved).display().to_string())
}

/// The page's text for rustdoc: outside code blocks and code spans, each
/// link to another page becomes an intra-doc link to its module (its anchor
/// the heading's rustdoc `id`, see `heading_ids`), a link to a picture
/// its `data:` URI, and a link to a file outside the guide plain text that
/// names the file; a code span naming an item by its full path
/// (`` `lambda_idempotency::sqs::SqsProcessor` ``) becomes an intra-doc link
/// to it.
fn rewrite(text: &str, page: &Path, guide: &Guide) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prose = String::new();
    let mut fence: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                out.push_str(&inline(&std::mem::take(&mut prose), page, guide));
                fence = Some(m);
                out.push_str(line);
            }
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => {
                fence = None;
                out.push_str(line);
            }
            (Some(_), _) => out.push_str(line),
            (None, None) => prose.push_str(line),
        }
    }
    out.push_str(&inline(&prose, page, guide));
    out
}

/// The item a code span names by its full path, as an intra-doc link
/// target: `lambda_idempotency::sqs::SqsProcessor` → `crate::sqs::SqsProcessor`.
/// `None` when the item's root module or re-export is left out of this build
/// (`Guide::absent`): the span stays a code span.
fn item_path(code: &str, guide: &Guide) -> Option<String> {
    let rest = code.strip_prefix("lambda_idempotency::")?;
    let valid = !rest.is_empty()
        && rest
            .split("::")
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    let root = rest.split("::").next().unwrap_or_default();
    (valid && !guide.absent.contains(root)).then(|| format!("crate::{rest}"))
}

/// The names `lib.rs` declares under a feature that is off in this build:
/// each `pub mod name;` or `pub use path::{A, B};` right after a
/// `#[cfg(feature = "..")]` (or `#[cfg(any(feature = "..", ..))]`) none of
/// whose features is on. An intra-doc link to one would not resolve (the
/// docs built with every feature, as docs.rs builds them, link it).
fn absent_items(lib: &Path) -> BTreeSet<String> {
    println!("cargo::rerun-if-changed={}", lib.display());
    let text = std::fs::read_to_string(lib).unwrap_or_default();
    let on = |feature: &str| {
        let var = format!("CARGO_FEATURE_{}", feature.to_uppercase().replace('-', "_"));
        std::env::var_os(var).is_some()
    };
    let mut absent = BTreeSet::new();
    let mut gate: Option<Vec<String>> = None;
    for line in text.lines().map(str::trim) {
        if let Some(cfg) = line.strip_prefix("#[cfg(") {
            let features: Vec<String> = cfg
                .split("feature = \"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next().map(str::to_owned))
                .collect();
            gate = Some(features);
            continue;
        }
        if line.starts_with("#[") || line.starts_with("//") {
            continue;
        }
        let Some(features) = gate.take() else {
            continue;
        };
        if features.is_empty() || features.iter().any(|f| on(f)) {
            continue;
        }
        if let Some(name) = line.strip_prefix("pub mod ") {
            absent.insert(name.trim_end_matches(';').trim().to_owned());
        } else if let Some(path) = line.strip_prefix("pub use ") {
            let path = path.trim_end_matches(';');
            let names = match path.split_once('{') {
                Some((_, list)) => list.trim_end_matches('}').split(',').collect(),
                None => vec![path.rsplit("::").next().unwrap_or(path)],
            };
            absent.extend(
                names
                    .into_iter()
                    .map(|n| n.trim().to_owned())
                    .filter(|n| !n.is_empty()),
            );
        }
    }
    absent
}

/// Links and code spans of a run of prose (see `rewrite`).
fn inline(text: &str, page: &Path, guide: &Guide) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    // The byte offsets in `out` of the open `[` of the links being read.
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    out.push(next);
                }
                i += 2;
            }
            '`' => {
                let run = chars[i..].iter().take_while(|&&c| c == '`').count();
                let body_start = i + run;
                // The closing run of exactly as many backticks.
                let mut j = body_start;
                let mut close = None;
                while j < chars.len() {
                    if chars[j] == '`' {
                        let n = chars[j..].iter().take_while(|&&c| c == '`').count();
                        if n == run {
                            close = Some(j);
                            break;
                        }
                        j += n;
                    } else {
                        j += 1;
                    }
                }
                let Some(close) = close else {
                    out.extend(&chars[i..body_start]);
                    i = body_start;
                    continue;
                };
                let span: String = chars[i..close + run].iter().collect();
                let code: String = chars[body_start..close].iter().collect();
                match item_path(code.trim(), guide) {
                    Some(item) if open.is_empty() => {
                        let _ = write!(out, "[{span}]({item})");
                    }
                    _ => out.push_str(&span),
                }
                i = close + run;
            }
            '[' => {
                open.push(out.len());
                out.push(c);
                i += 1;
            }
            ']' => {
                let start = open.pop();
                let dest_end = (chars.get(i + 1) == Some(&'('))
                    .then(|| chars[i + 2..].iter().position(|&c| c == ')'))
                    .flatten()
                    .map(|n| i + 2 + n);
                match (start, dest_end) {
                    (Some(start), Some(end)) => {
                        let dest: String = chars[i + 2..end].iter().collect();
                        match target(dest.trim(), page, guide) {
                            Target::Keep => {
                                let _ = write!(out, "]({dest})");
                            }
                            Target::To(to) => {
                                let _ = write!(out, "]({to})");
                            }
                            Target::Outside(file) => {
                                // The file it names, after the text unless
                                // the text is the file's name.
                                let text = out[start + 1..].to_owned();
                                let raw = text.trim_matches('`');
                                let bare = raw.trim_end_matches('/');
                                let named = raw.contains(['.', '/'])
                                    && (file.ends_with(bare) || file.starts_with(bare));
                                out.truncate(start);
                                if named {
                                    let _ = write!(out, "the repository's `{file}`");
                                } else {
                                    let _ = write!(out, "{text} (the repository's `{file}`)");
                                }
                            }
                        }
                        i = end + 1;
                    }
                    _ => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The workspace's pages outside the guide (`README.md`, `CONTRIBUTING.md`)
/// as items whose docs they are (see the file's docs).
fn workspace_docs(manifest: &Path, out: &Path) {
    let Some(root) = manifest.parent() else {
        return;
    };
    let in_workspace = std::fs::read_to_string(root.join("Cargo.toml"))
        .is_ok_and(|m| m.contains("[workspace]"))
        && root.join("shared").canonicalize().ok() == manifest.canonicalize().ok();
    if !in_workspace {
        return;
    }
    let mut code = String::new();
    for name in ["README.md", "CONTRIBUTING.md"] {
        let page = root.join(name);
        println!("cargo::rerun-if-changed={}", page.display());
        let item: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let _ = writeln!(
            code,
            "/// `{name}`\n#[doc = include_str!({:?})]\npub struct {item};",
            page.display()
        );
    }
    std::fs::write(out.join("workspace_docs.rs"), code).expect("write workspace_docs.rs");
    println!("cargo::rustc-cfg=workspace_docs");
}

/// Every `.md` file under `dir`, relative to nothing (full paths).
fn collect(dir: &Path, pages: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            println!("cargo::rerun-if-changed={}", path.display());
            collect(&path, pages);
        } else if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
}

/// The `id`s rustdoc gives its own parts of a page: a heading of that text
/// gets the next free `-n` (as a second heading of one text does).
const RUSTDOC_IDS: &[&str] = &[
    "help",
    "settings",
    "main",
    "main-content",
    "search",
    "crate-search",
    "toggle-all-docs",
    "all-types",
    "default-settings",
    "rustdoc-vars",
    "sidebar-vars",
    "copy-path",
    "rustdoc-modal-container",
    "modules",
    "structs",
    "enums",
    "functions",
    "traits",
    "macros",
    "types",
    "constants",
    "statics",
    "unions",
    "primitives",
    "keywords",
    "reexports",
    "fields",
    "variants",
    "implementations",
    "trait-implementations",
    "synthetic-implementations",
    "blanket-implementations",
    "required-associated-types",
    "provided-associated-types",
    "required-associated-consts",
    "provided-associated-consts",
    "required-methods",
    "provided-methods",
    "implementors",
    "synthetic-implementors",
    "implementors-list",
    "synthetic-implementors-list",
    "foreign-impls",
    "object-safety",
    "dyn-compatibility",
    "aliased-type",
];

/// A page's headings outside code blocks: GitHub's anchor of each (its
/// slug, `-1`, `-2` for the second and third of one slug) → the `id`
/// rustdoc gives it (the same slug, numbered past rustdoc's own `id`s).
fn heading_ids(text: &str) -> BTreeMap<String, String> {
    let mut github: BTreeMap<String, usize> = BTreeMap::new();
    let mut rustdoc: BTreeMap<String, usize> =
        RUSTDOC_IDS.iter().map(|id| ((*id).to_owned(), 1)).collect();
    let mut ids = BTreeMap::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            (None, None) => {
                let hashes = line.chars().take_while(|&c| c == '#').count();
                if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
                    let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
                    let numbered = |seen: &mut BTreeMap<String, usize>| {
                        let n = seen.entry(base.clone()).or_insert(0);
                        let id = if *n == 0 {
                            base.clone()
                        } else {
                            format!("{base}-{n}")
                        };
                        *n += 1;
                        id
                    };
                    let anchor = numbered(&mut github);
                    ids.insert(anchor, numbered(&mut rustdoc));
                }
            }
            _ => {}
        }
    }
    ids
}

/// A heading's slug: its text (code spans and links reduced to their text)
/// in lower case, every character but letters, digits, `_`, `-` and spaces
/// dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' | '[' => {}
            ']' if chars.peek() == Some(&'(') => {
                // The link's target is not part of the text.
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            c => text.push(c),
        }
    }
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '_' || c == '-' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}
