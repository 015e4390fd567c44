//! Listening sockets: safe replacement of stale socket files, file modes,
//! and removal on shutdown (only of the file this server created).

use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::BuildHasher;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use shmlink_sys::fs::{lock_exclusive, rename_noreplace, set_group, set_mode};
use shmlink_sys::net::accept_nonblocking;

use super::conn::Conn;
use crate::address::{Address, Transport};
use crate::error::{Error, Result};
use crate::options::ServerOptions;

/// One bound address.
#[derive(Debug)]
pub(crate) enum Listener {
    /// `shm:` or `unix:`.
    Unix {
        /// The socket.
        sock: UnixListener,
        /// The address.
        addr: Address,
        /// Identity of the file we created, to remove only that one.
        ino: (u64, u64),
    },
    /// `tcp:`.
    Tcp {
        /// The socket.
        sock: TcpListener,
        /// The address, with the port resolved.
        addr: Address,
    },
}

impl Listener {
    pub(crate) fn bind(addr: &Address, opts: &ServerOptions) -> Result<Listener> {
        let fail = |reason: String| Error::Bind {
            address: addr.to_string(),
            reason,
        };
        match addr {
            Address::Shm(path) | Address::Unix(path) => {
                let sock = bind_unix(path, opts).map_err(fail)?;
                sock.set_nonblocking(true)
                    .map_err(|e| fail(e.to_string()))?;
                let md = fs::symlink_metadata(path).map_err(|e| fail(e.to_string()))?;
                Ok(Listener::Unix {
                    sock,
                    addr: addr.clone(),
                    ino: (md.dev(), md.ino()),
                })
            }
            Address::Tcp(hp) => {
                let sock = TcpListener::bind(hp.as_str()).map_err(|e| fail(e.to_string()))?;
                sock.set_nonblocking(true)
                    .map_err(|e| fail(e.to_string()))?;
                let local = sock.local_addr().map_err(|e| fail(e.to_string()))?;
                Ok(Listener::Tcp {
                    sock,
                    addr: Address::Tcp(local.to_string()),
                })
            }
        }
    }

    /// A listener handed over by a predecessor (docs/protocol.md,
    /// "Hand-over"): its socket must listen on `addr` (the path, or the
    /// TCP address), and its socket file becomes this server's to remove.
    ///
    /// # Errors
    /// A socket of another kind or address.
    pub(crate) fn adopt(
        addr: &Address,
        fd: std::os::fd::OwnedFd,
    ) -> std::result::Result<Listener, String> {
        match addr {
            Address::Shm(path) | Address::Unix(path) => {
                // Bound under a temporary name and renamed into place, the
                // socket's own name does not tell its path: it must be a
                // Unix socket bound to a file, and the path a socket file.
                let sock = UnixListener::from(fd);
                let local = sock.local_addr().map_err(|e| format!("{addr}: {e}"))?;
                if local.as_pathname().is_none() {
                    return Err(format!("{addr}: the socket listens on {local:?}"));
                }
                let md = fs::symlink_metadata(path).map_err(|e| format!("{addr}: {e}"))?;
                if !md.file_type().is_socket() {
                    return Err(format!("{addr}: {} is not a socket file", path.display()));
                }
                sock.set_nonblocking(true)
                    .map_err(|e| format!("{addr}: {e}"))?;
                Ok(Listener::Unix {
                    sock,
                    addr: addr.clone(),
                    ino: (md.dev(), md.ino()),
                })
            }
            Address::Tcp(hp) => {
                let sock = TcpListener::from(fd);
                let local = sock.local_addr().map_err(|e| format!("{addr}: {e}"))?;
                if local.to_string() != *hp {
                    return Err(format!("{addr}: the socket listens on {local}"));
                }
                sock.set_nonblocking(true)
                    .map_err(|e| format!("{addr}: {e}"))?;
                Ok(Listener::Tcp {
                    sock,
                    addr: addr.clone(),
                })
            }
        }
    }

    /// Leaves the socket file in place when this listener closes (its
    /// successor listens on it now).
    pub(crate) fn keep_file(&mut self) {
        if let Listener::Unix { ino, .. } = self {
            *ino = (u64::MAX, u64::MAX);
        }
    }

    pub(crate) fn address(&self) -> &Address {
        match self {
            Listener::Unix { addr, .. } | Listener::Tcp { addr, .. } => addr,
        }
    }

    pub(crate) fn transport(&self) -> Transport {
        self.address().transport()
    }

    /// Accepts one waiting connection (non-blocking: `WouldBlock` when none),
    /// as a non-blocking socket: the handshake waits by `poll`.
    ///
    /// # Errors
    /// `WouldBlock`, out of descriptors, and the other `accept(2)` errors.
    pub(crate) fn accept(&self) -> io::Result<Conn> {
        match self {
            Listener::Unix { sock, .. } => accept_nonblocking(sock).map(|s| Conn::Unix(s.into())),
            Listener::Tcp { sock, .. } => accept_nonblocking(sock).map(|s| Conn::Tcp(s.into())),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Unix { sock, .. } => sock.as_fd(),
            Listener::Tcp { sock, .. } => sock.as_fd(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix { addr, ino, .. } = self {
            if let Some(path) = addr.socket_path() {
                if fs::symlink_metadata(path).is_ok_and(|md| (md.dev(), md.ino()) == *ino) {
                    let _ = fs::remove_file(path);
                }
            }
        }
    }
}

/// Binds a Unix socket at `path`. A socket file nobody listens on (left by a
/// dead server) is replaced; a live one is never taken over; anything that is
/// not a socket is never removed. The check and the replacement happen under
/// an exclusive `flock` on the directory, so two servers starting at once
/// cannot both replace the same stale file.
fn bind_unix(path: &Path, opts: &ServerOptions) -> std::result::Result<UnixListener, String> {
    let dir: PathBuf = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dirfd = fs::File::open(&dir)
        .map_err(|e| format!("cannot open directory {}: {e}", dir.display()))?;
    lock_exclusive(&dirfd).map_err(|e| format!("cannot lock directory {}: {e}", dir.display()))?;
    match fs::symlink_metadata(path) {
        Ok(md) if !md.file_type().is_socket() => {
            return Err(format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            ));
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(format!(
                    "another server is already listening on {}",
                    path.display()
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                fs::remove_file(path)
                    .map_err(|e| format!("cannot remove stale socket {}: {e}", path.display()))?;
            }
            Err(e) => {
                return Err(format!(
                    "cannot probe existing socket {}: {e}",
                    path.display()
                ))
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    }
    sweep_hidden(&dir, path);
    // Bound and listening under a hidden name, its mode and group set, then
    // renamed into place: `path` never names a socket that refuses connects
    // (bound, not listening yet) or that has the wrong mode.
    let (sock, hidden) = bind_hidden(path)?;
    if let Err(e) = finish_socket(&hidden, path, opts) {
        let _ = fs::remove_file(&hidden);
        return Err(e);
    }
    Ok(sock)
}

/// Removes the hidden sockets a server killed between its bind and its
/// rename left beside `path` (names as [`hidden_name`] draws them, of
/// `path`'s length): sockets of this uid that nothing listens on. Called
/// under the directory lock, which every server of the library holds from
/// its bind to its rename, so none is a live server's half-made socket.
/// Best effort: what cannot be read or removed stays.
fn sweep_hidden(dir: &Path, path: &Path) {
    let Some(len) = path.file_name().map(|n| n.as_bytes().len()) else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let uid = shmlink_sys::cred::current_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !is_hidden_name(name.as_bytes(), len) {
            continue;
        }
        let candidate = entry.path();
        let ours = fs::symlink_metadata(&candidate)
            .is_ok_and(|md| md.file_type().is_socket() && md.uid() == uid);
        if ours
            && UnixStream::connect(&candidate)
                .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
        {
            let _ = fs::remove_file(&candidate);
        }
    }
}

/// Whether `name` is one [`hidden_name`] could draw for a name of `len`.
fn is_hidden_name(name: &[u8], len: usize) -> bool {
    len > 1
        && name.len() == len
        && name[0] == b'.'
        && name[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Binds a listening socket beside `path` under a free hidden name of the
/// same length (so that a path that fits `sun_path` fits it too).
fn bind_hidden(path: &Path) -> std::result::Result<(UnixListener, PathBuf), String> {
    let len = path.file_name().map_or(1, |n| n.as_bytes().len()).max(1);
    // Random keys per bind: the names differ between processes and tries.
    let keys = RandomState::new();
    for attempt in 0..HIDDEN_TRIES {
        let hidden = path.with_file_name(hidden_name(len, &keys, attempt));
        if hidden == path {
            continue;
        }
        match UnixListener::bind(&hidden) {
            Ok(sock) => return Ok((sock, hidden)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "no free temporary name beside {} after {HIDDEN_TRIES} tries",
        path.display()
    ))
}

/// Tries at a free hidden name before giving up.
const HIDDEN_TRIES: usize = 32;

/// Sets the socket file's mode and group, then renames it to `path`
/// (never over a file: the stale socket was removed under the lock).
fn finish_socket(
    hidden: &Path,
    path: &Path,
    opts: &ServerOptions,
) -> std::result::Result<(), String> {
    let mode = opts.effective_socket_mode();
    set_mode(hidden, mode).map_err(|e| format!("cannot set mode {mode:o}: {e}"))?;
    if let Some(gid) = opts.socket_group {
        set_group(hidden, gid).map_err(|e| format!("cannot give socket to group {gid}: {e}"))?;
    }
    match rename_noreplace(hidden, path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            Err(format!("{} appeared while binding", path.display()))
        }
        // A file system without RENAME_NOREPLACE: `path` was free under
        // the directory lock a moment ago.
        Err(e) if e.raw_os_error() == Some(EINVAL) => {
            fs::rename(hidden, path).map_err(|e| format!("cannot move socket into place: {e}"))
        }
        Err(e) => Err(format!("cannot move socket into place: {e}")),
    }
}

/// `EINVAL`: what `renameat2` returns for a flag the file system lacks.
const EINVAL: i32 = 22;

/// A name of `len` bytes (a dot, then letters and digits; a single one for
/// `len` 1), drawn for try `attempt` with `keys`.
fn hidden_name(len: usize, keys: &RandomState, attempt: usize) -> std::ffi::OsString {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let name: String = (0..len)
        .map(|i| {
            if i == 0 && len > 1 {
                return '.';
            }
            let pick = keys.hash_one((attempt, i)) % ALPHABET.len() as u64;
            char::from(ALPHABET[pick as usize])
        })
        .collect();
    name.into()
}
