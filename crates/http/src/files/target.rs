//! A request target as a file's path beneath the root: the query dropped,
//! percent-decoding applied once, and every shape that could name
//! something else refused before the kernel is asked (its own check,
//! `RESOLVE_BENEATH`, still stands behind this one).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use percent_encoding::percent_decode;

/// Why a target names no file of the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAFile {
    /// A path that tries to leave the root: `..` (raw or encoded), a NUL
    /// or a backslash; answered 404 by the server.
    Traversal,
    /// A path the root never serves, for the application to answer: a
    /// directory (ends in `/`), a hidden segment (`.env`, `.git/`;
    /// `.well-known` excepted), a PHP script, a target that is not a path
    /// (`*`, an absolute URI).
    Application,
}

/// The path beneath the root that `target` (as the request line has it)
/// names.
pub(crate) fn relative(target: &str) -> Result<PathBuf, NotAFile> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let Some(path) = path.strip_prefix('/') else {
        return Err(NotAFile::Application); // `*`, an absolute URI
    };
    let decoded = percent_decode(path.as_bytes()).collect::<Vec<u8>>();
    let out = segments(&decoded).ok_or(NotAFile::Traversal)?;
    if decoded.is_empty() || decoded.ends_with(b"/") {
        return Err(NotAFile::Application);
    }
    let hidden = out.iter().any(|s| {
        let s = s.as_encoded_bytes();
        s.starts_with(b".") && s != b".well-known"
    });
    let php = out
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("php") || e.eq_ignore_ascii_case("phar"));
    if hidden || php || out.as_os_str().is_empty() {
        return Err(NotAFile::Application);
    }
    Ok(out)
}

/// The path an application names in `X-Accel-Redirect` (percent-encoded,
/// from `/`): `None` when it tries to leave its directory.
pub(crate) fn beneath(uri: &str) -> Option<PathBuf> {
    let decoded = percent_decode(uri.as_bytes()).collect::<Vec<u8>>();
    let out = segments(&decoded)?;
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The segments of a decoded path as a relative path: `None` for a `..`
/// segment, a NUL or a backslash.
fn segments(decoded: &[u8]) -> Option<PathBuf> {
    if decoded.iter().any(|&b| b == 0 || b == b'\\') {
        return None;
    }
    let mut out = PathBuf::new();
    for segment in decoded.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => {}
            b".." => return None,
            s => out.push(OsStr::from_bytes(s)),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_become_paths_beneath_the_root() {
        let ok = |t: &str| relative(t).expect(t).to_string_lossy().into_owned();
        assert_eq!(ok("/a/b.css?v=1"), "a/b.css");
        assert_eq!(ok("/a//./b%20c.txt"), "a/b c.txt");
        assert_eq!(ok("/.well-known/acme"), ".well-known/acme");
        assert_eq!(ok("/caf%C3%A9.png#top"), "café.png");
    }

    #[test]
    fn traversal_is_refused_and_scripts_go_to_the_application() {
        for t in [
            "/../etc/passwd",
            "/a/%2e%2e/%2E%2E/etc/passwd",
            "/a/..%2f..%2fetc",
            "/%2e%2e",
            "/a%00.txt",
            "/a%5c..%5cb",
        ] {
            assert_eq!(relative(t), Err(NotAFile::Traversal), "{t}");
        }
        for t in [
            "/.env",
            "/app/.git/config",
            "/index.php",
            "/INDEX.PHP",
            "/x.phar",
            "*",
            "http://h/a.txt",
            "/",
            "/a/",
            "/a%2f",
        ] {
            assert_eq!(relative(t), Err(NotAFile::Application), "{t}");
        }
        assert_eq!(beneath("/x/y%20z.pdf"), Some(PathBuf::from("x/y z.pdf")));
        assert_eq!(beneath("/x/%2e%2e/y"), None);
    }
}
