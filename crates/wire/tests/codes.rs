//! The one registry of codes (`shmlink_wire::codes`) against every place
//! that states codes for someone else: docs/protocol.md's two tables, the C
//! header, the Go and Python bindings, the PHP extension. A code added,
//! renumbered or reworded in one place and not in the registry fails here,
//! naming the place.

use std::collections::BTreeSet;
use std::path::PathBuf;

use shmlink_wire::codes::{CODES, REFUSALS};

fn repo_file(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The rows of the first Markdown table after the line starting with
/// `after`, as cells with their backticks kept.
fn table_after(doc: &str, after: &str) -> Vec<Vec<String>> {
    let start = doc
        .lines()
        .position(|l| l.starts_with(after))
        .unwrap_or_else(|| panic!("docs/protocol.md has no line starting {after:?}"));
    doc.lines()
        .skip(start)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and the rule
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn protocol_md_states_every_reserved_code_as_the_registry_does() {
    let doc = repo_file("docs/protocol.md");
    let rows = table_after(&doc, "### Errors and codes");
    let want: Vec<Vec<String>> = CODES
        .iter()
        .map(|c| {
            vec![
                format!("`0x{:08X}`", c.value),
                format!("`{}`", c.carrier.name()),
                c.meaning.to_string(),
            ]
        })
        .collect();
    assert_eq!(
        rows, want,
        "docs/protocol.md's table of reserved codes differs from crates/wire/src/codes.rs"
    );
}

#[test]
fn protocol_md_states_every_refusal_code_as_the_registry_does() {
    let doc = repo_file("docs/protocol.md");
    let rows = table_after(&doc, "Refusal codes (");
    let want: Vec<Vec<String>> = REFUSALS
        .iter()
        .map(|r| vec![r.code.to_wire().to_string(), r.meaning.to_string()])
        .collect();
    assert_eq!(
        rows, want,
        "docs/protocol.md's table of refusal codes differs from crates/wire/src/codes.rs"
    );
}

/// `(name, value)` of each `#define SHMLINK_REMOTE_*` in the C header.
fn c_header_codes() -> BTreeSet<(String, u32)> {
    repo_file("bindings/c/include/shmlink.h")
        .lines()
        .filter_map(|l| l.strip_prefix("#define SHMLINK_REMOTE_"))
        .map(|rest| {
            let (name, value) = rest.split_once(' ').expect("#define NAME VALUE");
            let value = value.trim().parse().expect("a decimal value");
            (format!("SHMLINK_REMOTE_{name}"), value)
        })
        .collect()
}

#[test]
fn the_c_header_defines_every_reserved_code_with_its_value() {
    let want: BTreeSet<(String, u32)> = CODES.iter().map(|c| (c.c_name(), c.value)).collect();
    assert_eq!(
        c_header_codes(),
        want,
        "bindings/c/include/shmlink.h (from bindings/c/src/status.rs; `make header`) differs from the registry"
    );
}

#[test]
fn go_names_every_reserved_code_after_the_c_header() {
    let go = repo_file("bindings/go/errors.go");
    let found: BTreeSet<(String, String)> = go
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().split_once(" uint32 = C.")?;
            name.starts_with("Code")
                .then(|| (name.to_string(), rest.trim().to_string()))
        })
        .collect();
    let want: BTreeSet<(String, String)> =
        CODES.iter().map(|c| (c.go_name(), c.c_name())).collect();
    assert_eq!(
        found, want,
        "bindings/go/errors.go's Code constants differ from the registry"
    );
}

/// The `CODE_*` words in `text`.
fn code_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("CODE_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn python_exports_and_types_every_reserved_code() {
    let want: BTreeSet<String> = CODES.iter().map(|c| c.name.to_string()).collect();
    for file in [
        "bindings/python/python/shmlink/__init__.py",
        "bindings/python/python/shmlink/__init__.pyi",
        "bindings/python/python/shmlink/_shmlink.pyi",
    ] {
        let text = repo_file(file);
        assert_eq!(
            code_words(&text),
            want,
            "{file} names other codes than the registry"
        );
        for name in &want {
            assert!(
                text.contains(&format!("'{name}'")) || text.contains(&format!("\"{name}\"")),
                "{file} leaves {name} out of __all__"
            );
        }
    }
    // The native module adds them from the registry itself.
    let lib = repo_file("bindings/python/src/lib.rs");
    assert!(lib.contains("for code in shmlink::wire::CODES"));
}

#[test]
fn php_declares_every_reserved_code_on_remote_exception() {
    // The stub declares each as `public const NAME = UNKNOWN` with
    // `@cvalue SHMLINK_REMOTE_NAME`: gen_stub.php takes the value from the
    // C header into the arginfo.
    let stub = repo_file("bindings/php/shmlink.stub.php");
    for code in CODES {
        let short = code.name.trim_start_matches("CODE_");
        assert!(
            stub.contains(&format!("@cvalue {}\n", code.c_name()))
                && stub.contains(&format!("public const {short} = UNKNOWN;")),
            "bindings/php/shmlink.stub.php does not declare Shmlink\\RemoteException::{short} (@cvalue {})",
            code.c_name()
        );
    }
    let declared = stub.matches("@cvalue SHMLINK_REMOTE_").count();
    assert_eq!(
        declared,
        CODES.len(),
        "the stub declares codes the registry does not have"
    );
}
