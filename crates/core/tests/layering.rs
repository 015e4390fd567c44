//! Rooms with one-way doors: no two modules of the core (nor of the other
//! crates of the workspace) import each other,
//! directly or through others. Reads the sources, builds the graph of which
//! module names which (`use` lines and inline `crate::`/`super::` paths, and
//! a parent naming its child modules), and fails on any cycle, printing it;
//! then the same between rooms (each module counted as the top-level module
//! or folder it lies in), so two folders cannot import each other either.
//! The crates checked are the workspace's members, read from its Cargo.toml.
//! Test modules (`#[cfg(test)] mod tests { .. }`) and comments are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path, `["server", "monitor"]`; the crate root is empty.
type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// The code without comments, string and char literals (replaced by spaces),
/// and without `#[cfg(test)] mod ... { ... }` blocks.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == '\''
            && b.get(i + 2) == Some(&'\'')
            && b.get(i + 1).is_some_and(|c| *c != '\\')
        {
            i += 3;
            out.push(' ');
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    strip_test_modules(&out)
}

fn strip_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let Some(open) = after.find(['{', ';']) else {
            rest = after;
            break;
        };
        if after.as_bytes()[open] == b';' {
            rest = &after[open + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').expect("closing brace")];
        let base = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], &base, out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        out.push(join(prefix, path));
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}::{b}"),
    }
}

/// Every path the code names: the expanded `use` items, and inline paths
/// starting with `crate::`, `super::` or `self::`.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let stmt_end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
        let tree: String = rest[at + 3..stmt_end]
            .chars()
            .filter(|c| !c.is_whitespace() || *c == ' ')
            .collect();
        expand_use(&tree, "", &mut paths);
        rest = &rest[stmt_end..];
    }
    let chars: Vec<char> = code.chars().collect();
    let text: String = chars.iter().collect();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(root) {
            let at = from + i;
            let before = text[..at].chars().last();
            if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                let path: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(path.trim_end_matches(':').to_string());
            }
            from = at + root.len();
        }
    }
    paths
}

/// Whether `word` occurs as a whole identifier directly followed by `next`.
fn find_word_followed(s: &str, word: &str, next: &str) -> bool {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let before = s[..at].chars().last();
        let ok_before = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        if ok_before && s[at + word.len()..].starts_with(next) {
            return true;
        }
        from = at + word.len();
    }
    false
}

fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let before = s[..at].chars().last();
        let after = s[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if boundary(before) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The module a path names (its longest prefix that is a module), resolved
/// from module `from`; `None` for paths outside the crate.
fn resolve(path: &str, from: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    let mut segs = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Module = match segs.peek().copied() {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("super") | Some("self") => {
            let mut m = from.clone();
            while let Some(&s) = segs.peek() {
                match s {
                    "super" => {
                        m.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs.next();
            }
            m
        }
        // A child module named directly (`mod shm;` then `shm::ShmLink`).
        Some(first) => {
            let mut child = from.clone();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            from.clone()
        }
        None => return None,
    };
    for s in segs {
        let mut next = at.clone();
        next.push(s.to_string());
        if modules.contains(&next) {
            at = next;
        } else {
            break;
        }
    }
    Some(at)
}

fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for f in &files {
        let from = module_of(src, f);
        let code = code_only(&std::fs::read_to_string(f).expect("read source"));
        let targets = edges.entry(from.clone()).or_default();
        let mut paths = named_paths(&code);
        // A parent naming a child module (`mod shm;` then `shm::ShmLink`).
        for child in modules
            .iter()
            .filter(|m| m.len() == from.len() + 1 && m.starts_with(&from))
        {
            let last = child.last().expect("child name");
            if find_word_followed(&code, last, "::") {
                paths.push(format!("self::{last}"));
            }
        }
        for p in paths {
            if let Some(to) = resolve(&p, &from, &modules) {
                // The root only declares modules and re-exports (it may name
                // anything); naming the root itself hides which module is
                // meant, so those paths count as edges to the root.
                if to != from && !from.is_empty() {
                    targets.insert(to);
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(t: &mut T<'_>, v: &Module) {
        t.index.insert(v.clone(), t.next);
        t.low.insert(v.clone(), t.next);
        t.next += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let succ: Vec<Module> = t
            .edges
            .get(v)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(v).expect("low");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().expect("stack");
                t.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// The graph between rooms: each module counts as the top-level module it
/// lies in (`server::admit` as `server`, `session` and `session::lend` as
/// `session`), so two folders (or a folder and a file) that import each
/// other through any of their modules form a cycle.
fn rooms(edges: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeMap<Module, BTreeSet<Module>> {
    let room = |m: &Module| m.iter().take(1).cloned().collect::<Module>();
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, tos) in edges {
        let (a, set) = (room(from), out.entry(room(from)).or_default());
        for to in tos {
            let b = room(to);
            if b != a && !b.is_empty() {
                set.insert(b);
            }
        }
    }
    out
}

fn assert_acyclic(crate_dir: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(crate_dir)
        .join("src");
    let modules = graph(&src);
    check_acyclic(crate_dir, "modules", &modules);
    check_acyclic(
        crate_dir,
        "rooms (top-level modules and folders)",
        &rooms(&modules),
    );
}

fn check_acyclic(crate_dir: &str, what: &str, edges: &BTreeMap<Module, BTreeSet<Module>>) {
    let found = cycles(edges);
    let mut report = String::new();
    for comp in &found {
        let set: BTreeSet<&Module> = comp.iter().collect();
        report.push_str("cycle among:\n");
        for m in comp {
            for to in edges.get(m).into_iter().flatten() {
                if set.contains(to) {
                    report.push_str(&format!("  {} -> {}\n", name(m), name(to)));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "{crate_dir}: {what} import each other\n{report}"
    );
}

#[test]
fn no_module_of_the_core_imports_one_that_imports_it() {
    assert_acyclic(".");
}

/// The same rule for every other member of the workspace (read from the
/// workspace's Cargo.toml, so a new crate is checked without a word here).
#[test]
fn nor_in_the_other_crates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("workspace Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line in the workspace's Cargo.toml");
    let members: Vec<&str> = line
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|m| *m != "crates/core")
        .collect();
    assert!(members.len() >= 8, "members read: {members:?}");
    for m in members {
        assert_acyclic(&format!("../../{m}"));
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let dir = std::env::temp_dir().join(format!("shmlink-layering-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").expect("lib");
    std::fs::write(
        src.join("a/mod.rs"),
        "mod c;\n// use crate::b; in a comment does not count\npub(crate) fn f() { c::g() }\n",
    )
    .expect("a");
    std::fs::write(src.join("a/c.rs"), "use crate::b::{self, X};\n").expect("c");
    std::fs::write(
        src.join("b.rs"),
        "pub(crate) fn h() { crate::a::f() }\n#[cfg(test)]\nmod tests { use crate::b; }\n",
    )
    .expect("b");
    let edges = graph(&src);
    let found = cycles(&edges);
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(found.len(), 1, "{edges:?}");
    let mut comp: Vec<String> = found[0].iter().map(name).collect();
    comp.sort();
    assert_eq!(comp, ["a", "a::c", "b"]);
}

/// Two folders that import each other through different modules: no two
/// modules form a cycle, the rooms do.
#[test]
fn the_checker_sees_a_cycle_between_folders() {
    let dir = std::env::temp_dir().join(format!("shmlink-rooms-{}", std::process::id()));
    let src = dir.join("src");
    for d in ["x", "y"] {
        std::fs::create_dir_all(src.join(d)).expect("mkdir");
    }
    let files = [
        ("lib.rs", "mod x;\nmod y;\n"),
        ("x/mod.rs", "mod p;\nmod r;\n"),
        ("x/p.rs", "use crate::y::q::Q;\n"),
        ("x/r.rs", "pub(crate) struct R;\n"),
        ("y/mod.rs", "pub(crate) mod q;\n"),
        ("y/q.rs", "pub(crate) struct Q(crate::x::r::R);\n"),
    ];
    for (f, text) in files {
        std::fs::write(src.join(f), text).expect("write");
    }
    let edges = graph(&src);
    let modules = cycles(&edges);
    let rooms = cycles(&rooms(&edges));
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert!(modules.is_empty(), "no module cycle: {edges:?}");
    assert_eq!(rooms.len(), 1, "{edges:?}");
    let mut comp: Vec<String> = rooms[0].iter().map(name).collect();
    comp.sort();
    assert_eq!(comp, ["x", "y"]);
}
