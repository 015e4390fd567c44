//! The environment a scope gives the processes below it.

/// The tokens of the scopes a process runs in, separated by spaces: each
/// scope appends its own for its command, and every process below inherits
/// the list.
pub(crate) const TOKENS: &str = "SHMLINK_SCOPE";
/// The guardian's pid, in the environment of the command it runs: that
/// command (and only it: its parent is the guardian) is scoped.
pub(crate) const PARENT: &str = "SHMLINK_SCOPE_PARENT";
/// `1` in a janitor's environment: other janitors let it finish its
/// cleanup before they stop it.
pub(crate) const JANITOR: &str = "SHMLINK_SCOPE_JANITOR";
/// The temporary directory the outermost scope was given: every scope's
/// directory goes there, side by side, whatever `TMPDIR` says below.
pub(crate) const ROOT: &str = "SHMLINK_SCOPE_TMP";

/// Whether this process is the command of a scope: its parent is the
/// guardian named in its environment.
pub fn is_scoped() -> bool {
    std::env::var(PARENT)
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|p| p == shmlink_sys::children::parent_pid())
}

/// `outer` with `token` appended.
pub(crate) fn with_token(outer: Option<&str>, token: &str) -> String {
    match outer.map(str::trim) {
        Some(o) if !o.is_empty() => format!("{o} {token}"),
        _ => token.to_owned(),
    }
}

/// Whether an environment block (`/proc/PID/environ`: `NAME=value` entries
/// separated by NUL bytes) holds `token` in its scope list, and whether it
/// is a janitor's.
pub(crate) fn read_block(block: &[u8], token: &str) -> (bool, bool) {
    let tokens = format!("{TOKENS}=");
    let janitor = format!("{JANITOR}=1");
    let (mut carries, mut is_janitor) = (false, false);
    for entry in block.split(|&b| b == 0) {
        if let Some(list) = entry.strip_prefix(tokens.as_bytes()) {
            carries = list.split(|&b| b == b' ').any(|t| t == token.as_bytes());
        } else if entry == janitor.as_bytes() {
            is_janitor = true;
        }
    }
    (carries, is_janitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_append_and_are_found_whole() {
        assert_eq!(with_token(None, "1.2"), "1.2");
        assert_eq!(with_token(Some(" "), "1.2"), "1.2");
        assert_eq!(with_token(Some("9.9"), "1.2"), "9.9 1.2");
        let block = b"PATH=/bin\0SHMLINK_SCOPE=9.9 1.2\0X=1\0";
        assert_eq!(read_block(block, "1.2"), (true, false));
        assert_eq!(read_block(block, "9.9"), (true, false));
        assert_eq!(read_block(block, "1.22"), (false, false));
        assert_eq!(read_block(block, "1."), (false, false));
        let janitor = b"SHMLINK_SCOPE=1.2\0SHMLINK_SCOPE_JANITOR=1\0";
        assert_eq!(read_block(janitor, "1.2"), (true, true));
        assert_eq!(read_block(b"", "1.2"), (false, false));
    }
}
