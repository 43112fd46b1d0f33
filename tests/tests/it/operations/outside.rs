//! The crate from outside the workspace: a tiny function crate in a
//! temporary directory, with a path dependency on `shared/` as the package
//! README shows, checked offline against the workspace's `Cargo.lock` (the
//! same versions, already downloaded) in this run's target dir (its
//! dependencies already built by the workspace).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The package README's quick start: its first `rust` block (the layer
/// around a handler, the engine from the environment).
fn readme_quick_start() -> String {
    let readme =
        std::fs::read_to_string(root().join("shared/README.md")).expect("shared/README.md");
    let start = readme
        .find("```rust")
        .and_then(|i| readme[i..].find('\n').map(|n| i + n + 1))
        .expect("a rust block in shared/README.md");
    let end = start
        + readme[start..]
            .find("```")
            .expect("the end of the rust block");
    readme[start..end].to_owned()
}

/// The tiny crate: the package README's quick start, with `lambda-idempotency` as a
/// path dependency.
fn write_crate(dir: &Path, library: &Path) {
    let manifest = format!(
        r#"[package]
name = "outside-user"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
lambda-idempotency = {{ path = {library:?} }}
lambda_runtime = "1.5"
serde_json = "1"
tokio = {{ version = "1", features = ["macros", "rt-multi-thread"] }}

# Its own workspace, whatever directory holds it.
[workspace]

# The workspace's dev profile, so that the dependencies built there are reused.
[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false
"#,
        library = library.display().to_string()
    );
    let main = readme_quick_start();
    std::fs::create_dir_all(dir.join("src")).expect("create the crate's src");
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    std::fs::write(dir.join("src/main.rs"), main).expect("write main.rs");
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");
}

#[test]
fn a_crate_outside_the_workspace_builds_against_the_library() {
    let dir = std::env::temp_dir().join(test_kit::unique_name("outside-user"));
    write_crate(&dir, &root().join("shared"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // This run's target dir: the dependencies the workspace built are reused.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "a crate outside the workspace, with `shared = {{ path = \".../shared\" }}` as the package \
         README shows, does not build ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
