//! The command line: `--event FILE` (or `-e`, `--event=FILE`) is a local
//! run, which prints what it would publish.

/// Whether `args` ask for a local run.
pub(crate) fn is_local(args: impl IntoIterator<Item = String>) -> bool {
    args.into_iter()
        .any(|a| a == "--event" || a == "-e" || a.starts_with("--event="))
}
