#!/usr/bin/env python3
"""The guide as the packaged crate shows it: every page of docs/ is a page of
the crate's docs (`lambda_idempotency::guide`), every link of those pages to
an anchor leads to an element of that id, no link is left pointing at a `.md`
file, the guide's front page shows the record picture inline, and (given the
packaged crate's `cargo test --doc` output) each page's Rust examples ran as
that many passing doctests.

usage: check_guide.py DOCS_DIR CRATE_DOC_DIR [DOCTEST_LOG]
  DOCS_DIR       the repository's docs/
  CRATE_DOC_DIR  <target>/doc/lambda_idempotency, from `cargo doc` of the
                 unpacked package
  DOCTEST_LOG    the output of `cargo test --doc` in the unpacked package
"""

import base64
import html
import os
import re
import sys

RUST_ATTRS = {
    "rust", "ignore", "should_panic", "no_run", "compile_fail", "test_harness",
    "standalone_crate", "edition2015", "edition2018", "edition2021", "edition2024",
}


def module_dir(rel):
    """The folder of a page's rustdoc page, relative to the guide's."""
    parts = [re.sub(r"[^a-z0-9]", "_", p.lower()) for p in rel[:-3].split("/")]
    if parts[-1] == "readme":
        parts.pop()
    return "/".join(parts)


def rust_blocks(text):
    """How many fenced blocks of a page rustdoc runs as Rust."""
    count, fence = 0, None
    for line in text.splitlines():
        stripped = line.lstrip()
        marker = next((m for m in ("```", "~~~") if stripped.startswith(m)), None)
        if fence is None and marker:
            fence = marker
            info = stripped[len(marker):].strip()
            tokens = [t.strip() for t in re.split(r"[,\s]+", info) if t.strip()]
            if not tokens or all(t in RUST_ATTRS for t in tokens):
                count += 1
        elif fence and marker == fence and stripped.rstrip() == fence:
            fence = None
    return count


def main():
    docs, crate_doc = sys.argv[1], sys.argv[2]
    log = open(sys.argv[3]).read() if len(sys.argv) > 3 else None
    guide = os.path.join(crate_doc, "guide")
    problems, pages, links, examples = [], 0, 0, 0
    for folder, _, files in os.walk(docs):
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), docs).replace(os.sep, "/")
            pages += 1
            page = os.path.join(guide, module_dir(rel), "index.html")
            if not os.path.isfile(page):
                problems.append(f"docs/{rel}: no page {page}")
            if log is None:
                continue
            want = rust_blocks(open(os.path.join(folder, name)).read())
            module = "guide" + "".join("::" + p for p in module_dir(rel).split("/") if p)
            ran = len(re.findall(rf"^test \S*guide/{re.escape(rel)} - {re.escape(module)} \(line \d+\)( - compile)? \.\.\. ok$", log, re.M))
            examples += ran
            if ran != want:
                problems.append(f"docs/{rel}: {want} Rust block(s), {ran} passing doctest(s) of {module}")
    for folder, _, files in os.walk(guide):
        for name in files:
            if not name.endswith(".html"):
                continue
            path = os.path.join(folder, name)
            text = open(path).read()
            for href in map(html.unescape, re.findall(r'href="([^"]+)"', text)):
                if "://" in href or href.startswith(("data:", "mailto:")) or href == "#" or "src/" in href:
                    continue
                target, _, anchor = href.partition("#")
                if re.search(r"\.md($|#)", href):
                    problems.append(f"{path}: a link to a Markdown file: {href}")
                if not anchor:
                    continue
                links += 1
                target = os.path.normpath(os.path.join(folder, target)) if target else path
                if not os.path.isfile(target):
                    problems.append(f"{path}: {href}: no file {target}")
                elif f'id="{anchor}"' not in open(target).read():
                    problems.append(f"{path}: {href}: no element #{anchor} in {target}")
    front = os.path.join(guide, "index.html")
    picture = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)"', open(front).read()) if os.path.isfile(front) else None
    if picture is None or base64.b64decode(picture.group(1)) != open(os.path.join(docs, "record-flow.svg"), "rb").read():
        problems.append(f"{front}: the record picture (docs/record-flow.svg) is not inline")
    for p in problems:
        print(p)
    summary = f"{pages} page(s), {links} anchored link(s)"
    if log is not None:
        summary += f", {examples} doctest(s) of the pages"
    print(f"check_guide: {summary}, {len(problems)} problem(s)")
    sys.exit(1 if problems or pages == 0 else 0)


if __name__ == "__main__":
    main()
