//! Sets `cfg(workspace_docs)` when this crate sits in its workspace (the
//! parent directory is the workspace, with `README.md` and `docs/`), and
//! writes `$OUT_DIR/workspace_docs.rs`: one item per Markdown page
//! (`README.md`, `CONTRIBUTING.md`, `docs/**/*.md`), its text as the item's docs, so that
//! `cargo test --doc` compiles and runs every page's Rust blocks. The
//! published package holds none of these files: there the cfg is off and
//! the crate builds alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(workspace_docs)");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let Some(root) = manifest.parent() else {
        return;
    };
    let in_workspace = std::fs::read_to_string(root.join("Cargo.toml"))
        .is_ok_and(|m| m.contains("[workspace]"))
        && root.join("shared").canonicalize().ok() == manifest.canonicalize().ok();
    if !in_workspace {
        return;
    }
    let mut pages = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    collect(&root.join("docs"), &mut pages);
    pages.retain(|p| p.is_file());
    pages.sort();
    let mut code = String::new();
    for page in &pages {
        println!("cargo::rerun-if-changed={}", page.display());
        let name: String = page
            .strip_prefix(root)
            .unwrap_or(page)
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let _ = writeln!(
            code,
            "/// `{}`\n#[doc = include_str!({:?})]\npub struct {name};",
            page.strip_prefix(root).unwrap_or(page).display(),
            page.display()
        );
    }
    println!("cargo::rerun-if-changed={}", root.join("docs").display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out.join("workspace_docs.rs"), code).expect("write workspace_docs.rs");
    println!("cargo::rustc-cfg=workspace_docs");
}

/// Every `.md` file under `dir`.
fn collect(dir: &Path, pages: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, pages);
        } else if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
}
