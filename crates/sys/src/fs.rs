//! File-system calls of the server's socket files: the directory lock under
//! which a stale socket is replaced, the socket file's mode and group, the
//! rename that puts a listening socket in place, and the reserve descriptor
//! kept for refusing clients when descriptors run out.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FlockOperation, Gid, Mode, OFlags, RenameFlags, CWD};

/// `flock(LOCK_EX)` on an open file (a directory, here): blocks until this
/// process holds the exclusive lock; closing `file` releases it.
///
/// # Errors
/// `EINTR` (a signal), `ENOLCK`, `EBADF`.
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    Ok(rustix::fs::flock(file, FlockOperation::LockExclusive)?)
}

/// `chmod(2)`: sets the permission bits of `path` (e.g. `0o600`).
///
/// # Errors
/// `ENOENT`, `EPERM` (not the owner), `EROFS`.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::chmod(path, Mode::from_raw_mode(mode))?)
}

/// `chown(2)` with the owner unchanged: gives `path` to group `gid`.
///
/// # Errors
/// `EPERM` when this process may not give files to that group, `ENOENT`.
pub fn set_group(path: &Path, gid: u32) -> io::Result<()> {
    Ok(rustix::fs::chown(path, None, Some(Gid::from_raw(gid)))?)
}

/// `renameat2(2)` with `RENAME_NOREPLACE`: renames `from` to `to` only if
/// nothing exists at `to`, atomically (both in one file system).
///
/// # Errors
/// `EEXIST` when `to` exists, `ENOENT`, `EXDEV` (another file system),
/// `EACCES`, `EINVAL` where the file system does not support the flag.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    Ok(rustix::fs::renameat_with(
        CWD,
        from,
        CWD,
        to,
        RenameFlags::NOREPLACE,
    )?)
}

/// Opens `/dev/null` read-only (`open(2)`, `O_CLOEXEC`): a descriptor held in
/// reserve, closed to make room when the process runs out of them.
///
/// # Errors
/// `EMFILE`/`ENFILE` when there is no descriptor left already.
pub fn reserve_descriptor() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        "/dev/null",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Whether an error says the process (`EMFILE`) or the system (`ENFILE`) is
/// out of file descriptors.
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(rustix::io::Errno::MFILE.raw_os_error())
        || code == Some(rustix::io::Errno::NFILE.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn temp(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("shmlink-sys-fs-{}-{name}", std::process::id()));
        std::fs::write(&p, b"").expect("create");
        p
    }

    #[test]
    fn mode_and_group_are_set() {
        let p = temp("mode");
        set_mode(&p, 0o640).expect("chmod");
        let md = std::fs::metadata(&p).expect("stat");
        assert_eq!(md.permissions().mode() & 0o777, 0o640);
        // Our own group is always allowed.
        set_group(&p, crate::cred::current_gid()).expect("chown to own group");
        assert_eq!(
            std::fs::metadata(&p).expect("stat").gid(),
            crate::cred::current_gid()
        );
        assert!(set_mode(&p.with_extension("missing"), 0o600).is_err());
        std::fs::remove_file(&p).expect("remove");
    }

    #[test]
    fn rename_never_replaces() {
        let a = temp("rename-a");
        let b = a.with_extension("b");
        rename_noreplace(&a, &b).expect("rename to a free name");
        assert!(!a.exists() && b.exists());
        let c = temp("rename-c");
        let e = rename_noreplace(&c, &b).expect_err("the target exists");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(c.exists() && b.exists());
        std::fs::remove_file(&b).expect("remove");
        std::fs::remove_file(&c).expect("remove");
    }

    #[test]
    fn lock_is_exclusive_per_open_file() {
        let dir = File::open(std::env::temp_dir()).expect("open dir");
        lock_exclusive(&dir).expect("lock");
        // A second open file description would block; the same one relocks.
        lock_exclusive(&dir).expect("relock");
    }

    #[test]
    fn reserve_and_descriptor_errors() {
        let fd = reserve_descriptor().expect("open /dev/null");
        drop(fd);
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(
            rustix::io::Errno::MFILE.raw_os_error()
        )));
        assert!(!is_out_of_descriptors(&io::Error::from(
            io::ErrorKind::WouldBlock
        )));
    }
}
