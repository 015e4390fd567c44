//! Anonymous, sealed shared-memory files (`memfd_create`).
//!
//! A segment never has a name in `/dev/shm` or anywhere else: the kernel frees
//! it when the last descriptor and the last mapping are gone, so a crash of
//! either side leaves nothing behind.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self, MemfdFlags, SealFlags};

/// Seals every shmlink segment carries: it can neither shrink (a peer
/// truncating it would make our accesses fault with `SIGBUS`) nor grow, and
/// the seal set itself is frozen.
pub const REQUIRED_SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// Creates a memfd of exactly `len` bytes and seals it against resizing.
///
/// # Errors
/// Fails when the kernel refuses the memfd (descriptor or memory limits), the
/// size, or the seals.
pub fn create_sealed(name: &str, len: u64) -> io::Result<OwnedFd> {
    let fd = fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    fs::ftruncate(&fd, len)?;
    fs::fcntl_add_seals(&fd, REQUIRED_SEALS)?;
    Ok(fd)
}

/// What a received segment descriptor looks like, as checked before mapping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentFacts {
    /// Size of the file in bytes.
    pub len: u64,
    /// Whether it carries every seal of [`REQUIRED_SEALS`].
    pub sealed: bool,
}

/// Reads the size and seals of a descriptor received from a peer.
///
/// # Errors
/// Fails when the descriptor is not a file that supports seals (a socket, a
/// pipe, a regular file without sealing).
pub fn inspect(fd: impl AsFd) -> io::Result<SegmentFacts> {
    let fd = fd.as_fd();
    let seals = fs::fcntl_get_seals(fd)?;
    let st = fs::fstat(fd)?;
    let len = u64::try_from(st.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    Ok(SegmentFacts {
        len,
        sealed: seals.contains(REQUIRED_SEALS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_segment_is_sealed_and_sized() {
        let fd = create_sealed("shmlink-test", 8192).expect("memfd");
        let facts = inspect(&fd).expect("inspect");
        assert_eq!(
            facts,
            SegmentFacts {
                len: 8192,
                sealed: true
            }
        );
        assert!(
            fs::ftruncate(&fd, 4096).is_err(),
            "shrinking a sealed segment must fail"
        );
    }
}
