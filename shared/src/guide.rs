// The guide: one module per page of the repository's `docs/` (which the
// package carries as `guide/`), each page the docs of its module, written by
// `build.rs` with the links between pages leading from module to module. The
// pages' examples are doctests of this crate.
#![doc = include_str!(concat!(env!("OUT_DIR"), "/guide/README.md"))]

include!(concat!(env!("OUT_DIR"), "/guide.rs"));
