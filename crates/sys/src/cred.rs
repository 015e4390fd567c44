//! Peer credentials of a connected Unix socket (`SO_PEERCRED`).

use std::io;
use std::os::fd::AsFd;

/// Who is on the other end of a Unix socket, as the kernel recorded it at
/// `connect`/`socketpair` time (the peer cannot forge it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// Reads the peer's credentials.
///
/// # Errors
/// Fails when the descriptor is not a connected Unix socket.
pub fn peer_cred(sock: impl AsFd) -> io::Result<PeerCred> {
    let c = rustix::net::sockopt::socket_peercred(sock)?;
    Ok(PeerCred {
        pid: c.pid.as_raw_nonzero().get(),
        uid: c.uid.as_raw(),
        gid: c.gid.as_raw(),
    })
}

/// This process's effective uid.
pub fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// This process's effective gid.
pub fn current_gid() -> u32 {
    rustix::process::getegid().as_raw()
}

/// This process's supplementary groups.
pub fn current_groups() -> Vec<u32> {
    rustix::process::getgroups()
        .map(|g| g.iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socketpair_peer_is_us() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let c = peer_cred(&a).expect("cred");
        assert_eq!(c.uid, current_uid());
        assert_eq!(c.pid, std::process::id() as i32);
    }
}
