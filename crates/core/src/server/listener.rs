//! Listening sockets: safe replacement of stale socket files, file modes,
//! and removal on shutdown (only of the file this server created).

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use shmlink_sys::fs::{lock_exclusive, set_group, set_mode};
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
    let sock = UnixListener::bind(path).map_err(|e| e.to_string())?;
    let mode = opts.effective_socket_mode();
    set_mode(path, mode).map_err(|e| format!("cannot set mode {mode:o}: {e}"))?;
    if let Some(gid) = opts.socket_group {
        set_group(path, gid).map_err(|e| format!("cannot give socket to group {gid}: {e}"))?;
    }
    Ok(sock)
}
