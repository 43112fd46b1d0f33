//! The Amazon MQ source written outside the library
//! (`tests/examples/amazon-mq/`, its own tests beside it) stays small: a
//! source is what is its own, over the library's public API. Counted: every
//! line of its `src/` that is not blank and not a comment; its tests live in
//! its `tests/`, so no test hides code below it (`#[cfg(test)]` in `src/` is
//! refused). The same count in a shell:
//! `grep -hvE '^\s*(//.*)?$' tests/examples/amazon-mq/src/*.rs | wc -l`.

use std::path::{Path, PathBuf};

/// At most this many lines of code.
const BUDGET: usize = 150;

/// The lines of `text` that count: not blank, not a comment.
fn code_lines(text: &str) -> usize {
    let code = |line: &&str| !line.trim().is_empty() && !line.trim_start().starts_with("//");
    text.lines().filter(code).count()
}

/// The `.rs` files under `dir`, in name order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn the_amazon_mq_example_is_at_most_150_lines_of_code() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/amazon-mq/src");
    let mut total = 0;
    for path in sources(&src) {
        let text = std::fs::read_to_string(&path).expect("a source file");
        assert!(
            !text.contains("#[cfg(test)]"),
            "{}: the example's tests live in its tests/ folder",
            path.display()
        );
        total += code_lines(&text);
    }
    assert!(total > 0, "no code found under {}", src.display());
    assert!(
        total <= BUDGET,
        "the Amazon MQ example has {total} lines of code (not blank, not comments), over its \
         budget of {BUDGET}"
    );
}

#[test]
fn blank_lines_and_comments_do_not_count() {
    let text = "//! doc\n\nuse x;\n    /// item doc\n    // note\nfn f() {}  // trailing\n\t\n";
    assert_eq!(code_lines(text), 2);
}
