//! Atomics of the ring come only from `src/sync.rs`, which swaps in loom's
//! under `cfg(loom)`: an atomic taken from std anywhere else would be
//! invisible to the model checker.
//!
//! (A clippy `disallowed-types` rule cannot express this: the shim re-exports
//! the std types, so every legitimate use resolves to the disallowed path.)

use std::path::Path;

#[test]
fn atomics_come_only_from_the_sync_shim() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(&src).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("sync.rs") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).expect("read source");
        for (n, line) in text.lines().enumerate() {
            if line.contains("std::sync::atomic") || line.contains("core::sync::atomic") {
                offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(seen >= 8, "expected the crate's source files under {src:?}");
    assert!(
        offenders.is_empty(),
        "use crate::sync instead of std::sync::atomic:\n{}",
        offenders.join("\n")
    );
}
