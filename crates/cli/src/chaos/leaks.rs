//! Kernel objects a chaos run must not leave behind: memfds of sessions (and
//! of clients' arenas) held open or mapped by the server, files under
//! `/dev/shm`, socket files.

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The names session segments', arena segments' and the memfds chaos
/// clients pass with calls carry (`/proc/PID/fd` shows
/// `/memfd:shmlink-session (deleted)`): a server holding one after its
/// sessions ended leaked it.
const SEGMENTS: [&str; 3] = [
    "memfd:shmlink-session",
    "memfd:shmlink-arena",
    "memfd:shmlink-chaos-fd",
];

fn is_segment(path: &str) -> bool {
    SEGMENTS.iter().any(|s| path.contains(s))
}

/// Session memfds process `pid` holds open.
pub(crate) fn open_segments(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| is_segment(&target.to_string_lossy()))
        .count()
}

/// Distinct session segments process `pid` has mapped.
pub(crate) fn mapped_segments(pid: u32) -> usize {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return 0;
    };
    maps.lines()
        .filter(|l| is_segment(l))
        // Fields: range perms offset dev inode path; the inode names the segment.
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_owned))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Names under `/dev/shm`.
pub(crate) fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Socket files left in `dir`.
pub(crate) fn socket_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_segment_is_seen() {
        let me = std::process::id();
        let before = open_segments(me);
        let fd = shmlink_sys::memfd::create_sealed("shmlink-session", 4096).expect("memfd");
        assert_eq!(open_segments(me), before + 1);
        drop(fd);
        assert_eq!(open_segments(me), before);
    }
}
