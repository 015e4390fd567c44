#!/usr/bin/env python3
"""Checks that the entry docs stay true (run by ci/test.sh):

- every crate (crates/*), binding (bindings/*) and core folder
  (crates/core/src/*/) is named in the README's "Layout" table;
- every source file that allows `unsafe` (an `allow(unsafe_code)`
  attribute, tests aside) is in CONTRIBUTING.md's list of files that may,
  and every file that list names exists and does allow it.

Exits 1 naming what is missing, so a newcomer's first reading stays right.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def layout_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Layout")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def expand(pattern: str) -> list[str]:
    """`sys/src/{a,b}.rs` -> [`sys/src/a.rs`, `sys/src/b.rs`]."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(","):
        out += expand(pattern[: m.start()] + alt + pattern[m.end() :])
    return out


def unsafe_list() -> set[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    start = text.index("`unsafe` only in")
    end = text.index("// SAFETY:", start)
    listed = set()
    for code in re.findall(r"`([^`]+)`", text[start:end]):
        if code.endswith(".rs"):
            listed.update(expand(code))
    if "the C ABI crate" in text[start:end]:
        listed.add("bindings/c/src/lib.rs")
    return listed


def allows_unsafe() -> set[str]:
    found = set()
    for p in list(ROOT.glob("crates/**/*.rs")) + list(ROOT.glob("bindings/**/*.rs")):
        rel = p.relative_to(ROOT).as_posix()
        if "/tests/" in rel or "/target/" in rel or rel.endswith("/tests.rs"):
            continue
        if re.search(r"^\s*#!?\[allow\(unsafe_code\)\]", p.read_text(), re.M):
            found.add(rel)
    return found


def main() -> int:
    problems = []
    layout = layout_section()
    named = []
    named += [p for p in sorted(ROOT.glob("crates/*")) if p.is_dir()]
    named += [p for p in sorted(ROOT.glob("bindings/*")) if p.is_dir() and p.name != "target"]
    named += [p for p in sorted(ROOT.glob("crates/core/src/*")) if p.is_dir()]
    for p in named:
        rel = p.relative_to(ROOT).as_posix()
        if f"`{rel}`" not in layout and f"`{rel}/`" not in layout and f"{rel}/" not in layout:
            problems.append(f"README.md's Layout table does not name {rel}")
    listed = unsafe_list()
    for rel in sorted(allows_unsafe()):
        short = rel.removeprefix("crates/")
        if rel not in listed and short not in listed:
            problems.append(
                f"{rel} allows unsafe code but CONTRIBUTING.md's list of files that may does not name it"
            )
    allowed = allows_unsafe()
    for name in sorted(listed):
        rel = name if name.startswith("bindings/") else f"crates/{name}"
        if rel not in allowed:
            problems.append(
                f"CONTRIBUTING.md lists {name} as allowed unsafe code, but it does not allow it (or does not exist)"
            )
    for p in problems:
        print(f"entry docs: {p}", file=sys.stderr)
    if not problems:
        print(f"entry docs: {len(named)} folders named in README's Layout, {len(allowed)} files with unsafe listed in CONTRIBUTING")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
