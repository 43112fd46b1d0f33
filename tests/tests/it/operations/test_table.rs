//! `tests/README.md` names tests that exist. Every test path in its
//! guarantee table resolves to exactly one test of the workspace, each row's
//! count is the number of tests it names, and the group table lists the
//! modules each group holds. The tests are found by reading the Rust
//! sources (no build, no `cargo test -- --list`): a `fn` under a `#[test]`
//! or `#[tokio::test]` attribute, at the module path its file and inline
//! `mod` blocks give it, from each crate's root; a `contract::<case>` is a
//! case of the store contract suite (`stores/contract.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What of Rust source matters to find tests: identifiers and punctuation
/// (literals and comments are skipped).
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// The index past a string literal whose opening `"` is at `i`.
fn skip_string(s: &[char], mut i: usize) -> usize {
    i += 1;
    while i < s.len() && s[i] != '"' {
        i += if s[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// The index past a raw string literal whose `r` is at `i`, if one starts
/// there (`r"…"`, `r#"…"#`).
fn skip_raw_string(s: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while s.get(j) == Some(&'#') {
        j += 1;
    }
    if s.get(j) != Some(&'"') {
        return None;
    }
    let hashes = j - i - 1;
    j += 1;
    while j < s.len() {
        if s[j] == '"' && (1..=hashes).all(|k| s.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

fn tokens(src: &str) -> Vec<Tok> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&s, i);
        } else if c == 'b' && next == Some('"') {
            i = skip_string(&s, i + 1);
        } else if c == 'b' && next == Some('\'') {
            i += 1; // the char literal below
        } else if let Some(end) = (c == 'r')
            .then(|| skip_raw_string(&s, i))
            .flatten()
            .or_else(|| {
                (c == 'b' && next == Some('r'))
                    .then(|| skip_raw_string(&s, i + 1))
                    .flatten()
            })
        {
            i = end;
        } else if c == '\'' {
            if next == Some('\\') {
                // An escaped char literal: to its closing quote.
                i += 2;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1; // a lifetime: its name reads as an identifier
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < s.len() && is_ident(s[i]) {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < s.len() && is_ident(s[i]) {
                i += 1;
            }
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// The tests of one crate: their paths (`module::…::name`) and how many
/// functions each names.
#[derive(Debug, Default)]
struct Tests(BTreeMap<String, usize>);

impl Tests {
    /// Every test of the crate whose root file is `root_file`.
    fn of_crate(root_file: &Path) -> Self {
        let mut tests = Tests::default();
        tests.scan_file(root_file, &[]);
        tests
    }

    /// Scans `file`, the module at `path`, and the files of its `mod x;`.
    fn scan_file(&mut self, file: &Path, path: &[String]) {
        let toks = tokens(&read(file));
        // Where the files of this file's child modules are.
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = file.parent().expect("a file in a directory");
        let children_dir = if matches!(stem, "mod" | "lib" | "main") {
            dir.to_path_buf()
        } else {
            dir.join(stem)
        };
        let ident = |k: usize| match toks.get(k) {
            Some(Tok::Ident(s)) => Some(s.as_str()),
            _ => None,
        };
        let punct = |k: usize, c: char| toks.get(k) == Some(&Tok::Punct(c));
        // Inline modules open in this file: (name, brace depth inside it).
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0usize;
        let mut test_attribute = false;
        let mut k = 0;
        while k < toks.len() {
            if punct(k, '#') && (punct(k + 1, '[') || (punct(k + 1, '!') && punct(k + 2, '['))) {
                // An attribute: its path, then past its closing bracket.
                let open = if punct(k + 1, '[') { k + 1 } else { k + 2 };
                let mut attr_path = Vec::new();
                let mut j = open + 1;
                while let Some(name) = ident(j) {
                    attr_path.push(name);
                    if punct(j + 1, ':') && punct(j + 2, ':') {
                        j += 3;
                    } else {
                        break;
                    }
                }
                test_attribute |= attr_path.last() == Some(&"test");
                let mut brackets = 0;
                j = open;
                while j < toks.len() {
                    if punct(j, '[') {
                        brackets += 1;
                    } else if punct(j, ']') {
                        brackets -= 1;
                        if brackets == 0 {
                            break;
                        }
                    }
                    j += 1;
                }
                k = j + 1;
                continue;
            }
            match &toks[k] {
                Tok::Ident(word) if word == "mod" => {
                    if let Some(name) = ident(k + 1) {
                        let mut child: Vec<String> = path.to_vec();
                        child.extend(inline.iter().map(|(n, _)| n.clone()));
                        child.push(name.to_owned());
                        if punct(k + 2, ';') {
                            let mut base = children_dir.clone();
                            for (n, _) in &inline {
                                base.push(n);
                            }
                            let file = [
                                base.join(format!("{name}.rs")),
                                base.join(name).join("mod.rs"),
                            ]
                            .into_iter()
                            .find(|f| f.exists())
                            .unwrap_or_else(|| {
                                panic!("no file for mod {name} of {}", file.display())
                            });
                            self.scan_file(&file, &child);
                            k += 3;
                            test_attribute = false;
                            continue;
                        }
                        if punct(k + 2, '{') {
                            depth += 1;
                            inline.push((name.to_owned(), depth));
                            k += 3;
                            test_attribute = false;
                            continue;
                        }
                    }
                }
                Tok::Ident(word) if word == "fn" => {
                    if let (true, Some(name)) = (test_attribute, ident(k + 1)) {
                        let mut full: Vec<String> = path.to_vec();
                        full.extend(inline.iter().map(|(n, _)| n.clone()));
                        full.push(name.to_owned());
                        *self.0.entry(full.join("::")).or_default() += 1;
                    }
                    test_attribute = false;
                }
                Tok::Punct('{') => {
                    depth += 1;
                    test_attribute = false;
                }
                Tok::Punct('}') => {
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                    depth = depth.saturating_sub(1);
                    test_attribute = false;
                }
                Tok::Punct(';') => test_attribute = false,
                _ => {}
            }
            k += 1;
        }
    }

    /// How many tests `name` names: a test path, or `module::*` (every
    /// test under the module).
    fn resolve(&self, name: &str) -> usize {
        match name.strip_suffix("::*") {
            Some(module) => {
                let prefix = format!("{module}::");
                self.0
                    .iter()
                    .filter(|(p, _)| p.starts_with(&prefix))
                    .map(|(_, n)| n)
                    .sum()
            }
            None => self.0.get(name).copied().unwrap_or(0),
        }
    }
}

/// The store contract suite's cases (`contract_suite!` in
/// `stores/contract.rs`): its stores (with `+ writes` or not), its record
/// cases and its write cases.
struct Contract {
    stores: Vec<(String, bool)>,
    records: Vec<String>,
    writes: Vec<String>,
}

impl Contract {
    fn read() -> Self {
        let text = read(&root().join("tests/tests/it/stores/contract.rs"));
        let list = |label: &str| -> Vec<String> {
            let start = text
                .find(&format!("{label}: ["))
                .unwrap_or_else(|| panic!("`{label}: [` in the contract suite"));
            let rest = &text[start + label.len() + 3..];
            rest[..rest.find(']').expect("a closing bracket")]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let stores = list("stores")
            .into_iter()
            .map(|s| match s.split_once('+') {
                Some((name, _)) => (name.trim().to_owned(), true),
                None => (s, false),
            })
            .collect();
        Contract {
            stores,
            records: list("records"),
            writes: list("writes"),
        }
    }

    /// How many cases of the suite `case` names (each also defined once in
    /// `test_kit::contract`).
    fn resolve(&self, case: &str, kit: &[Tok]) -> usize {
        let listed = self
            .records
            .iter()
            .chain(&self.writes)
            .filter(|c| *c == case)
            .count();
        let defined = kit
            .windows(2)
            .filter(|w| w[0] == Tok::Ident("fn".into()) && w[1] == Tok::Ident(case.into()))
            .count();
        if defined == 1 { listed } else { 0 }
    }
}

/// The rows of the markdown table that follows `heading` in `text`: each
/// row's cells.
fn table_after(text: &str, heading: &str) -> Vec<Vec<String>> {
    let start = text.find(heading).unwrap_or_else(|| panic!("{heading:?}"));
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The backticked spans of a cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// Every name of the guarantee table resolves to exactly one test (a
/// `::*` to the tests under it), and each row counts what it names.
fn check_guarantee_table(readme: &str) -> Vec<String> {
    let mut it = Tests::of_crate(&root().join("tests/tests/it/main.rs"));
    let library = Tests::of_crate(&root().join("shared/src/lib.rs"));
    let contract = Contract::read();
    // The suite's tests, as its macro names them.
    for (store, writes) in &contract.stores {
        let cases = contract
            .records
            .iter()
            .chain(contract.writes.iter().filter(|_| *writes));
        for case in cases {
            *it.0
                .entry(format!("stores::contract::{store}::{case}"))
                .or_default() += 1;
        }
    }
    let kit = tokens(&read(&root().join("tests/kit/src/contract.rs")));
    let mut wrong = Vec::new();
    let rows = table_after(readme, "## Guarantees and the tests that prove them");
    assert!(rows.len() > 10, "the guarantee table was read: {rows:?}");
    for row in rows {
        let [guarantee, tests, count] = &row[..] else {
            wrong.push(format!("a row of {} cells: {row:?}", row.len()));
            continue;
        };
        let mut named = 0;
        for name in code_spans(tests).into_iter().filter(|n| n.contains("::")) {
            let found = if let Some(path) = name.strip_prefix("lambda-idempotency: ") {
                library.resolve(path)
            } else if let Some(case) = name.strip_prefix("contract::") {
                contract.resolve(case, &kit)
            } else {
                it.resolve(name)
            };
            let wildcard = name.ends_with("::*");
            if found == 0 || (!wildcard && found != 1) {
                wrong.push(format!(
                    "`{name}` names {found} tests (row {guarantee:.40})"
                ));
            }
            named += found;
        }
        if count.parse() != Ok(named) {
            wrong.push(format!(
                "row {guarantee:.40}: count {count}, but it names {named} tests"
            ));
        }
    }
    // "16 record cases on three stores, 17 write cases on two: 82 tests".
    let word = |n: usize| ["none", "one", "two", "three", "four", "five"][n];
    let writing = contract.stores.iter().filter(|(_, w)| *w).count();
    let sentence = format!(
        "({} record cases on {} stores, {} write cases on {}: {} tests)",
        contract.records.len(),
        word(contract.stores.len()),
        contract.writes.len(),
        word(writing),
        contract.records.len() * contract.stores.len() + contract.writes.len() * writing
    );
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    if !flat.contains(&sentence) {
        wrong.push(format!("the contract suite's sentence is not {sentence:?}"));
    }
    // The group table: each group's modules are those holding its tests.
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in it.0.keys() {
        let mut parts = path.split("::");
        if let (Some(group), Some(module), Some(_)) = (parts.next(), parts.next(), parts.next()) {
            modules
                .entry(group.to_owned())
                .or_default()
                .insert(module.to_owned());
        }
    }
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in table_after(readme, "## Groups") {
        let group = code_spans(&row[0])
            .first()
            .copied()
            .unwrap_or_default()
            .to_owned();
        let names = row.last().map(|c| code_spans(c)).unwrap_or_default();
        listed.insert(group, names.into_iter().map(str::to_owned).collect());
    }
    let groups: BTreeSet<&String> = listed.keys().chain(modules.keys()).collect();
    let none = BTreeSet::new();
    for group in groups {
        let (said, held) = (
            listed.get(group).unwrap_or(&none),
            modules.get(group).unwrap_or(&none),
        );
        if said != held {
            wrong.push(format!(
                "group `{group}`: the table lists {said:?}, its modules with tests are {held:?}"
            ));
        }
    }
    wrong
}

#[test]
fn every_test_the_readme_names_exists_once() {
    let readme = read(&root().join("tests/README.md"));
    let wrong = check_guarantee_table(&readme);
    assert!(wrong.is_empty(), "tests/README.md:\n{}", wrong.join("\n"));
}

/// The check itself: a moved or misspelt name fails it, and so does a count
/// that disagrees.
#[test]
fn a_stale_name_in_the_readme_is_caught() {
    let readme = read(&root().join("tests/README.md"));
    let good = "`lambda-idempotency: batch::settings::tests::the_default_margin_is_at_most_a_tenth_of_the_batch_time`";
    assert!(readme.contains(good));
    let stale = readme.replace(
        good,
        "`lambda-idempotency: batch::pipeline::tests::the_default_margin_is_at_most_a_tenth_of_the_batch_time`",
    );
    let wrong = check_guarantee_table(&stale);
    assert_eq!(
        wrong,
        [
            "`lambda-idempotency: batch::pipeline::tests::the_default_margin_is_at_most_a_tenth_of_the_batch_time` \
             names 0 tests (row **The deadline margin**: a record whose )",
            "row **The deadline margin**: a record whose : count 4, but it names 3 tests",
        ]
    );
    let miscounted = readme.replace(
        "`contract::kill_switch_runs_unprotected`, `contract::get_many_and_kill_switch`, `contract::messages_commit_with_the_record`, `lambda-idempotency: batch::tests::pipeline::kill_switch_runs_every_record` | 4 |",
        "`contract::kill_switch_runs_unprotected`, `contract::get_many_and_kill_switch`, `contract::messages_commit_with_the_record`, `lambda-idempotency: batch::tests::pipeline::kill_switch_runs_every_record` | 5 |",
    );
    assert_ne!(miscounted, readme);
    let wrong = check_guarantee_table(&miscounted);
    assert!(
        wrong.len() == 1 && wrong[0].contains("count 5, but it names 4"),
        "{wrong:?}"
    );
}

/// The source scanner on the shapes it must read: inline modules, raw
/// strings and char literals holding braces, attributes with arguments.
#[test]
fn the_scanner_finds_tests_where_rustc_does() {
    let dir = std::env::temp_dir().join(format!("test-table-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        r####"
mod a;
#[cfg(test)]
mod tests {
    const T: &str = r#"} { mod x { #[test] fn not_a_test() {} }"#;
    const C: char = '{';
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one() { let s = "}"; }
    fn helper<'a>(x: &'a str) -> &'a str { x }
    mod inner {
        #[test]
        #[should_panic]
        fn two() {}
    }
    #[test]
    fn three() {}
}
"####,
    )
    .unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "mod b { #[test] fn four() {} }\n/* } */ #[test] fn five() {}\n",
    )
    .unwrap();
    let tests = Tests::of_crate(&dir.join("lib.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
    let found: Vec<&str> = tests.0.keys().map(String::as_str).collect();
    assert_eq!(
        found,
        [
            "a::b::four",
            "a::five",
            "tests::inner::two",
            "tests::one",
            "tests::three"
        ]
    );
    assert_eq!(tests.resolve("tests::*"), 3);
    assert_eq!(tests.resolve("tests::helper"), 0);
}
