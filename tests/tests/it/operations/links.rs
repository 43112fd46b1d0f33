//! Every relative link of the documentation resolves: in README.md,
//! CONTRIBUTING.md, docs/**/*.md and tests/README.md, each `[text](target)`
//! and `[label]: target` whose target is not a URL names a file or folder
//! that exists, and its `#anchor` (or a bare `#anchor` on the same page)
//! names a heading of that page by GitHub's slug rules: the heading's text
//! (code spans and links reduced to their text) in lower case, every
//! character but letters, digits, `_`, `-` and spaces dropped, spaces as
//! `-`, and the second heading of one slug `-1`, the third `-2`. No network:
//! `http(s):` and `mailto:` targets are not followed, but a page the Rust
//! docs name (`the repository's `docs/<path>``) must exist. And no tracked
//! file links to a home the project does not have: the GitHub organisation
//! of the crate's name does not exist, so no file names it. The README's
//! picture of the way a record goes (`docs/record-flow.svg`) is drawn from
//! its Graphviz source (`docs/record-flow.dot`): the same text, line by line.
//! The guide's front page (`docs/README.md`, the `lambda_idempotency::guide`
//! module's docs) links every page of `docs/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pages checked: README.md, CONTRIBUTING.md, tests/README.md and every
/// `.md` under docs/, as paths relative to the root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![
        PathBuf::from("README.md"),
        PathBuf::from("CONTRIBUTING.md"),
        PathBuf::from("tests/README.md"),
    ];
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(root.join(&dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let name = PathBuf::from(entry.expect("a dir entry").file_name());
            let path = dir.join(&name);
            if root.join(&path).is_dir() {
                dirs.push(path);
            } else if name.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `line` with its code spans removed (links inside them are not links).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A heading's text as GitHub renders it: code spans and links reduced to
/// their text, emphasis markers dropped by the slug's own rule.
fn heading_text(raw: &str) -> String {
    let mut text = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {}
            ']' if chars.peek() == Some(&'(') => {
                // The link's target is not part of the text.
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            '[' => {}
            c => text.push(c),
        }
    }
    text
}

/// GitHub's slug of a heading's text (before de-duplication).
fn slug(heading: &str) -> String {
    heading_text(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '_' || c == '-' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page: its headings' slugs (de-duplicated as GitHub
/// does) and the `id`/`name` of its HTML anchors.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
            let n = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find("<a ") {
                rest = &rest[at + 3..];
                let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
                if let Some(v) = tag.find(attr) {
                    let value = &tag[v + attr.len()..];
                    anchors.insert(value[..value.find('"').unwrap_or(value.len())].to_owned());
                }
            }
        }
    }
    anchors
}

/// The link targets of a page: `(line, target)` for inline links
/// `[text](target)` and reference definitions `[label]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
            && trimmed.find("](").is_none_or(|inline| close < inline)
        {
            let target = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
            out.push((n, target.to_owned()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push((n, target.trim_matches(['<', '>']).to_owned()));
            rest = &rest[end..];
        }
    }
    out
}

/// `path` with `.` and `..` resolved (no file system access).
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            _ => return None,
        }
    }
    Some(out)
}

/// Every broken link of `pages` (relative path → text), one line each:
/// `page:line: target: why`. A target that is one of `pages` is checked
/// against its text; any other against the files under `root`.
fn broken_links(root: &Path, pages: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let anchors_of: BTreeMap<&PathBuf, BTreeSet<String>> =
        pages.iter().map(|(p, t)| (p, anchors(t))).collect();
    let mut broken = Vec::new();
    for (page, text) in pages {
        for (line, target) in links(text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with("tel:")
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                Some(page.clone())
            } else {
                normalize(&page.parent().unwrap_or(Path::new("")).join(path))
            };
            let at = format!("{}:{line}: {target}", page.display());
            let Some(resolved) = resolved else {
                broken.push(format!("{at}: leaves the repository"));
                continue;
            };
            let known = anchors_of.get(&resolved);
            if known.is_none() && !root.join(&resolved).exists() {
                broken.push(format!("{at}: no file {}", resolved.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let owned;
            let anchors = match known {
                Some(a) => a,
                None if resolved.extension().is_some_and(|e| e == "md") => {
                    let text = std::fs::read_to_string(root.join(&resolved)).unwrap_or_default();
                    owned = anchors(&text);
                    &owned
                }
                // An anchor into a file that is not a page (a line of a
                // source file on GitHub): not checked.
                None => continue,
            };
            if !anchors.contains(anchor) {
                broken.push(format!(
                    "{at}: no heading #{anchor} in {}",
                    resolved.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = root();
    let pages: BTreeMap<PathBuf, String> = pages(&root)
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect();
    assert!(
        pages.len() >= 20,
        "{} pages: {:?}",
        pages.len(),
        pages.keys()
    );
    let broken = broken_links(&root, &pages);
    assert!(
        broken.is_empty(),
        "{} broken link(s) in the docs:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn a_broken_link_or_anchor_is_caught() {
    let page = |path: &str, text: &str| (PathBuf::from(path), text.to_owned());
    let pages = BTreeMap::from([
        page(
            "docs/a.md",
            "# Page A\n\n## Settings: `IDEMPOTENCY_TABLE`, [its page](b.md)\n\n## Settings: `IDEMPOTENCY_TABLE`, [its page](b.md)\n\n\
             [ok](b.md#whats-new-100) [ok](#settings-idempotency_table-its-page-1) [ok](../README.md)\n\
             [missing file](c.md) [missing anchor](b.md#nope) [here](#nowhere)\n\
             `[in code](nope.md)`\n\n```md\n[in a fence](nope.md)\n```\n\
             [out](../../../x.md) [web](https://example.com/#x)\n\n[ref]: b.md#also-nope\n",
        ),
        page("docs/b.md", "# What's new: 1.0.0\n"),
    ]);
    let broken = broken_links(&root(), &pages);
    assert_eq!(
        broken,
        [
            "docs/a.md:8: c.md: no file docs/c.md",
            "docs/a.md:8: b.md#nope: no heading #nope in docs/b.md",
            "docs/a.md:8: #nowhere: no heading #nowhere in docs/a.md",
            "docs/a.md:14: ../../../x.md: leaves the repository",
            "docs/a.md:16: b.md#also-nope: no heading #also-nope in docs/b.md",
        ],
        "{broken:#?}"
    );
    assert_eq!(
        slug("Streams: order per key, a shard checkpoint"),
        "streams-order-per-key-a-shard-checkpoint"
    );
    assert_eq!(
        slug("HTTP APIs: `Idempotency-Key`"),
        "http-apis-idempotency-key"
    );
    assert_eq!(
        slug("Lambda Managed Instances: many invocations in one process"),
        "lambda-managed-instances-many-invocations-in-one-process"
    );
}

/// The guide's front page: it links every other page of the guide.
const FRONT_PAGE: &str = "docs/README.md";

/// The pages of the guide (`docs/**/*.md` of `pages`) that its front page
/// does not link to.
fn unlisted(pages: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let front = Path::new(FRONT_PAGE);
    let linked: BTreeSet<PathBuf> = pages
        .get(front)
        .map(|text| {
            links(text)
                .into_iter()
                .filter_map(|(_, target)| {
                    let path = target.split('#').next().unwrap_or_default().to_owned();
                    normalize(&Path::new("docs").join(path))
                })
                .collect()
        })
        .unwrap_or_default();
    pages
        .keys()
        .filter(|p| p.starts_with("docs") && p.as_path() != front && !linked.contains(*p))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn the_guide_front_page_lists_every_page() {
    let root = root();
    let pages: BTreeMap<PathBuf, String> = pages(&root)
        .into_iter()
        .filter(|p| p.starts_with("docs"))
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).expect("a page");
            (p, text)
        })
        .collect();
    assert!(
        pages.contains_key(Path::new(FRONT_PAGE)) && pages.len() >= 15,
        "{} pages: {:?}",
        pages.len(),
        pages.keys()
    );
    let unlisted = unlisted(&pages);
    assert!(
        unlisted.is_empty(),
        "{FRONT_PAGE}, the guide's front page (the `lambda_idempotency::guide` module's docs), \
         has no line for: {unlisted:?}"
    );
}

#[test]
fn a_page_missing_from_the_front_page_is_caught() {
    let page = |path: &str, text: &str| (PathBuf::from(path), text.to_owned());
    let pages = BTreeMap::from([
        page(
            FRONT_PAGE,
            "# The guide\n\n- [SQS](sources/sqs.md#settings)\n- `[in code](cost.md)`\n",
        ),
        page("docs/sources/sqs.md", "# SQS\n"),
        page("docs/cost.md", "# Cost\n"),
        page("README.md", "# Not the guide\n"),
    ]);
    assert_eq!(unlisted(&pages), ["docs/cost.md"]);
}

/// The `.rs` files under `dirs` (relative to `root`), `target` folders
/// skipped.
fn rust_files(root: &Path, dirs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
    while let Some(dir) = todo.pop() {
        let entries =
            std::fs::read_dir(root.join(&dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = dir.join(entry.expect("a dir entry").file_name());
            if root.join(&path).is_dir() {
                if !path.ends_with("target") {
                    todo.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every `<prefix><path>[#anchor]` of `text` that names no file under
/// `root`, or no heading of the page it names: `file:line: target: why`.
/// Returns the number of links seen too.
fn broken_repository_links(
    root: &Path,
    file: &Path,
    text: &str,
    prefix: &str,
) -> (usize, Vec<String>) {
    let (mut seen, mut broken) = (0, Vec::new());
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, ')' | '>' | '"' | '`' | ']'))
                .unwrap_or(rest.len());
            let target = &rest[..end];
            seen += 1;
            let at = format!("{}:{}: {target}", file.display(), n + 1);
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            if path.is_empty() || !root.join(path).exists() {
                broken.push(format!("{at}: no file {path}"));
            } else if let Some(anchor) = anchor
                && path.ends_with(".md")
                && !anchors(&std::fs::read_to_string(root.join(path)).unwrap_or_default())
                    .contains(anchor)
            {
                broken.push(format!("{at}: no heading #{anchor} in {path}"));
            }
        }
    }
    (seen, broken)
}

/// How the Rust docs name a page of the repository: "the repository's
/// `docs/...`", the path relative to the root.
const PAGE_NAME: &str = "the repository's `";

#[test]
fn every_page_the_rust_docs_name_exists() {
    let root = root();
    let (mut seen, mut broken) = (0, Vec::new());
    for file in rust_files(&root, &["shared/src", "functions"]) {
        let text = std::fs::read_to_string(root.join(&file)).expect("a source file");
        let (n, b) = broken_repository_links(&root, &file, &text, PAGE_NAME);
        seen += n;
        broken.extend(b);
    }
    // Each source's module doc names its page.
    assert!(seen >= 7, "only {seen} page name(s) ({PAGE_NAME}...) found");
    assert!(
        broken.is_empty(),
        "{} page(s) named in the Rust docs do not exist:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The GitHub organisation of the crate's name, which does not exist (built
/// from parts so this file does not name it).
fn missing_home() -> String {
    ["github.com/", "lambda-idempotency"].concat()
}

/// Every `file:line` of `text` naming `home` (case-insensitive).
fn names_of(home: &str, file: &Path, text: &str) -> Vec<String> {
    let home = home.to_ascii_lowercase();
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.to_ascii_lowercase().contains(&home))
        .map(|(n, line)| format!("{}:{}: {}", file.display(), n + 1, line.trim()))
        .collect()
}

/// The repository's files: tracked ones and untracked ones git does not
/// ignore, relative to the root.
fn repository_files(root: &Path) -> Vec<PathBuf> {
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .expect("git ls-files runs");
    assert!(
        out.status.success(),
        "git ls-files: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect()
}

#[test]
fn no_file_links_to_a_home_that_does_not_exist() {
    let root = root();
    let home = missing_home();
    let files = repository_files(&root);
    assert!(files.len() > 100, "only {} file(s) listed", files.len());
    let mut found = Vec::new();
    for file in files {
        // Deleted but still tracked, or not text: nothing to read.
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else {
            continue;
        };
        found.extend(names_of(&home, &file, &text));
    }
    assert!(
        found.is_empty(),
        "{} line(s) name {home}, which does not exist (use a path dependency or a \
         placeholder the reader fills in):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn a_link_to_the_missing_home_is_caught() {
    let home = missing_home();
    let org = "Lambda-Idempotency";
    let text = format!(
        "ok\nlambda-idempotency = {{ git = \"https://{home}/lambda-idempotency\" }}\n\
         see https://GitHub.com/{org}/x\n"
    );
    let found = names_of(&home, Path::new("x.md"), &text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("x.md:2: "), "{found:?}");
    assert!(found[1].starts_with("x.md:3: "), "{found:?}");
}

#[test]
fn a_broken_repository_link_is_caught() {
    let prefix = PAGE_NAME;
    let text = format!(
        "//! ok: {prefix}docs/sources/sqs.md`, {prefix}README.md#documentation`\n\
         //! gone: {prefix}docs/sources/nope.md`.\n//! anchor: {prefix}docs/sources/sqs.md#nowhere`\n"
    );
    let (seen, broken) = broken_repository_links(&root(), Path::new("x.rs"), &text, prefix);
    assert_eq!(seen, 4);
    assert_eq!(
        broken,
        [
            "x.rs:2: docs/sources/nope.md: no file docs/sources/nope.md",
            "x.rs:3: docs/sources/sqs.md#nowhere: no heading #nowhere in docs/sources/sqs.md",
        ]
    );
}

/// The lines of every `label="..."` of a Graphviz source, in order of
/// appearance, sorted.
fn dot_label_lines(dot: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = dot;
    while let Some(at) = rest.find("label=\"") {
        rest = &rest[at + "label=\"".len()..];
        let end = rest.find('"').expect("a closed label");
        out.extend(rest[..end].split("\\n").map(str::to_owned));
        rest = &rest[end + 1..];
    }
    out.sort();
    out
}

/// The text of every `<text>` element of an SVG, entities decoded, sorted.
fn svg_text_lines(svg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find("<text") {
        rest = &rest[at..];
        let start = rest.find('>').expect("a closed tag") + 1;
        let end = rest.find("</text>").expect("a closed text");
        out.push(
            rest[start..end]
                .replace("&#45;", "-")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&amp;", "&"),
        );
        rest = &rest[end..];
    }
    out.sort();
    out
}

#[test]
fn the_record_picture_is_drawn_from_its_source() {
    let root = root();
    let dot = std::fs::read_to_string(root.join("docs/record-flow.dot")).expect("the source");
    let svg = std::fs::read_to_string(root.join("docs/record-flow.svg")).expect("the picture");
    let (labels, texts) = (dot_label_lines(&dot), svg_text_lines(&svg));
    assert!(labels.len() >= 20, "{labels:?}");
    assert_eq!(
        labels, texts,
        "docs/record-flow.svg is not drawn from docs/record-flow.dot: \
         run `dot -Tsvg docs/record-flow.dot -o docs/record-flow.svg`"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(
        readme.contains("](docs/record-flow.svg)"),
        "README.md shows the picture"
    );
}
