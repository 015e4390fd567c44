//! The wire crate stays pure: no dependency (std only), no I/O, no threads,
//! no clocks, no `unsafe` (the root forbids it; this also finds an
//! `allow` that would undo it). Reads its own Cargo.toml and sources.

use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn it_depends_on_nothing() {
    let toml = std::fs::read_to_string(crate_dir().join("Cargo.toml")).expect("Cargo.toml");
    let deps: Vec<&str> = toml
        .lines()
        .skip_while(|l| l.trim() != "[dependencies]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert!(
        deps.is_empty(),
        "shmlink-wire is std only; it depends on {deps:?}"
    );
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn it_does_no_io_and_starts_no_thread() {
    let mut files = Vec::new();
    sources(&crate_dir().join("src"), &mut files);
    assert!(files.len() > 5, "found the sources");
    let banned = [
        "std::io",
        "std::fs",
        "std::net",
        "std::os",
        "std::thread",
        "std::process",
        "std::sync",
        "std::time",
        "unsafe",
        "extern crate",
    ];
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for b in banned {
                assert!(
                    !code.contains(b) || code.contains("forbid(unsafe_code)"),
                    "{}:{}: `{b}` in the wire crate (pure encode/decode only): {line}",
                    f.display(),
                    n + 1
                );
            }
        }
    }
}
