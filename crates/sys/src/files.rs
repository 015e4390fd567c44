//! File calls of an HTTP server serving files: a directory held open as
//! the root of what may be served, a file opened strictly beneath it
//! (`openat2(2)` with `RESOLVE_BENEATH`: no `..`, no absolute path, no
//! symbolic link leaving the directory, checked by the kernel while it
//! resolves, so no race with a link swapped in after a check), and
//! `sendfile(2)` from such a file into a socket.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Opens the directory `path` to resolve files beneath it (`O_PATH`: no
/// read permission on the directory itself is needed).
///
/// # Errors
/// `ENOENT`, `ENOTDIR` (not a directory), `EACCES`.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `rel` for reading, resolved beneath the directory `dir`
/// (`openat2(2)`, `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`). Opened
/// non-blocking so that a FIFO or a device beneath the directory does not
/// hold the caller: the caller serves regular files only.
///
/// # Errors
/// `EXDEV` when resolving would leave `dir` (`..` above it, an absolute
/// path, a symbolic link pointing outside), `ENOENT`, `ENOTDIR`, `EACCES`,
/// `ELOOP`, `ENOSYS` before Linux 5.6.
pub fn open_beneath(dir: &OwnedFd, rel: &Path) -> io::Result<File> {
    let fd = rustix::fs::openat2(
        dir,
        rel,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(File::from(fd))
}

/// An unnamed file in the directory `dir` (`O_TMPFILE`, mode 0600), for
/// reading and writing: it has no name, so nothing of it stays on disk
/// once the last descriptor to it closes, however the process ends.
/// Another process of the same user reaches it at `/proc/PID/fd/FD`.
///
/// # Errors
/// `EOPNOTSUPP` where the file system has no unnamed files, `ENOENT`,
/// `EACCES`, `ENOSPC`, `EMFILE`.
pub fn unnamed_file(dir: &Path) -> io::Result<File> {
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    Ok(File::from(fd))
}

/// Whether `e`, from [`open_beneath`], says the path would leave the
/// directory (`EXDEV`), rather than that it is not there.
pub fn leaves_dir(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error())
}

/// `sendfile(2)`: copies up to `count` bytes of `file` from `*offset`
/// into the socket `out` inside the kernel, advancing `*offset`; the number
/// copied (0 at the file's end). A non-blocking socket that is full gives
/// `WouldBlock`.
///
/// # Errors
/// `EAGAIN` (`WouldBlock`), `EPIPE`/`ECONNRESET` (the peer is gone),
/// `EINTR`, `EIO`.
pub fn sendfile(out: impl AsFd, file: &File, offset: &mut u64, count: usize) -> io::Result<usize> {
    Ok(rustix::fs::sendfile(out, file, Some(offset), count)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn files_open_beneath_their_directory_only() {
        let base = std::env::temp_dir().join(format!("shmlink-files-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::write(base.join("secret"), b"no").expect("write");
        std::fs::File::create(root.join("sub/a.txt"))
            .and_then(|mut f| f.write_all(b"hello"))
            .expect("write");
        std::os::unix::fs::symlink("../secret", root.join("out")).expect("link");
        std::os::unix::fs::symlink("sub/a.txt", root.join("in")).expect("link");
        let dir = open_dir(&root).expect("dir");
        assert!(open_beneath(&dir, Path::new("sub/a.txt")).is_ok());
        assert!(open_beneath(&dir, Path::new("in")).is_ok(), "a link inside");
        for bad in ["../secret", "out", "/etc/passwd", "sub/../../secret"] {
            let e = open_beneath(&dir, Path::new(bad)).expect_err(bad);
            assert!(leaves_dir(&e), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&base).expect("clean");
    }

    #[test]
    fn unnamed_files_leave_nothing_behind() {
        use std::io::{Read, Seek};
        let dir = std::env::temp_dir().join(format!("shmlink-unnamed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut f = unnamed_file(&dir).expect("O_TMPFILE");
        f.write_all(b"spooled").expect("write");
        f.rewind().expect("rewind");
        let mut back = String::new();
        f.read_to_string(&mut back).expect("read");
        assert_eq!(back, "spooled");
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0, "no name");
        std::fs::remove_dir(&dir).expect("clean");
    }
}
