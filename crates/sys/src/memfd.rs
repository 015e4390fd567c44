//! Anonymous, sealed shared-memory files (`memfd_create`).
//!
//! A segment never has a name in `/dev/shm` or anywhere else: the kernel frees
//! it when the last descriptor and the last mapping are gone, so a crash of
//! either side leaves nothing behind.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self, MemfdFlags, SealFlags};

use crate::failed;

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
    let fd = memfd_create(name)?;
    fs::ftruncate(&fd, len).map_err(failed("ftruncate"))?;
    fs::fcntl_add_seals(&fd, REQUIRED_SEALS).map_err(failed("fcntl(F_ADD_SEALS)"))?;
    Ok(fd)
}

/// `memfd_create(2)`, close-on-exec and sealable.
fn memfd_create(name: &str) -> io::Result<OwnedFd> {
    fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(failed("memfd_create"))
}

/// Seals of an arena segment once its owner has mapped it: those of
/// [`REQUIRED_SEALS`], and no new writable mapping or `write` (its peer can
/// map it read-only only, so what the owner lends cannot change under it
/// but by the owner's hand).
pub const ARENA_SEALS: SealFlags = REQUIRED_SEALS.union(SealFlags::FUTURE_WRITE);

/// Creates an arena segment of `len` bytes: a memfd mapped read-write here,
/// then sealed with [`ARENA_SEALS`] (the mapping made before the seal stays
/// writable).
///
/// # Errors
/// Fails when the kernel refuses the memfd, its size, the mapping or the
/// seals (`F_SEAL_FUTURE_WRITE` needs Linux 5.1).
pub fn create_arena(name: &str, len: u64) -> io::Result<(OwnedFd, crate::Mapping)> {
    let fd = memfd_create(name)?;
    fs::ftruncate(&fd, len).map_err(failed("ftruncate"))?;
    let size = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let map = crate::Mapping::map_shared(&fd, size, false)?;
    fs::fcntl_add_seals(&fd, ARENA_SEALS).map_err(failed("fcntl(F_ADD_SEALS)"))?;
    Ok((fd, map))
}

/// Which file a descriptor refers to: its device and inode (`fstat(2)`).
/// Two descriptors with the same id refer to the same file as long as one
/// of them, or a mapping of the file, is alive: the kernel does not give a
/// file's inode number to another file before the file is freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// The seals a received segment descriptor carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seals {
    /// Whether it carries every seal of [`REQUIRED_SEALS`].
    pub sealed: bool,
    /// Whether it also carries [`ARENA_SEALS`] (no writable mapping can be
    /// made any more).
    pub arena_sealed: bool,
}

/// What a received segment descriptor looks like, as checked before mapping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentFacts {
    /// Which file it is.
    pub id: FileId,
    /// Size of the file in bytes.
    pub len: u64,
    /// Whether it carries every seal of [`REQUIRED_SEALS`].
    pub sealed: bool,
    /// Whether it also carries [`ARENA_SEALS`] (no writable mapping can be
    /// made any more).
    pub arena_sealed: bool,
}

/// Reads the size and seals of a descriptor received from a peer
/// ([`seals`], then [`identify`]).
///
/// # Errors
/// Fails when the descriptor is not a file that supports seals (a socket, a
/// pipe, a regular file without sealing).
pub fn inspect(fd: impl AsFd) -> io::Result<SegmentFacts> {
    let fd = fd.as_fd();
    let s = seals(fd)?;
    let (id, len) = identify(fd)?;
    Ok(SegmentFacts {
        id,
        len,
        sealed: s.sealed,
        arena_sealed: s.arena_sealed,
    })
}

/// The seals of a descriptor (`fcntl(2)` `F_GET_SEALS`).
///
/// # Errors
/// `EINVAL` when the descriptor is not a file that supports seals (a
/// socket, a pipe, a regular file without sealing).
pub fn seals(fd: impl AsFd) -> io::Result<Seals> {
    let seals = fs::fcntl_get_seals(fd)?;
    Ok(Seals {
        sealed: seals.contains(REQUIRED_SEALS),
        arena_sealed: seals.contains(ARENA_SEALS),
    })
}

/// Which file a descriptor refers to, and its size (`fstat(2)`): one call,
/// which works on any descriptor (check [`seals`] before trusting the file).
///
/// # Errors
/// `EBADF`; `InvalidData` for a negative size.
pub fn identify(fd: impl AsFd) -> io::Result<(FileId, u64)> {
    let st = fs::fstat(fd)?;
    let len = u64::try_from(st.st_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    let id = FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    };
    Ok((id, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arena_segment_is_writable_here_and_read_only_elsewhere() {
        let (fd, map) = create_arena("shmlink-arena-test", 8192).expect("arena");
        map.write_at(100, b"lent");
        let facts = inspect(&fd).expect("inspect");
        assert!(facts.sealed && facts.arena_sealed);
        assert!(
            crate::Mapping::map_shared(&fd, 8192, false).is_err(),
            "no new writable mapping"
        );
        let ro = crate::ReadOnlyMapping::map(&fd, 8192).expect("read-only map");
        assert_eq!(ro.len(), 8192);
    }

    #[test]
    fn a_file_keeps_its_id_through_other_descriptors() {
        let a = create_sealed("shmlink-id-test", 4096).expect("memfd");
        let b = create_sealed("shmlink-id-test", 4096).expect("memfd");
        let dup = a.try_clone().expect("dup");
        let (id_a, len) = identify(&a).expect("fstat");
        assert_eq!(len, 4096);
        assert_eq!(identify(&dup).expect("fstat").0, id_a);
        assert_ne!(identify(&b).expect("fstat").0, id_a);
        assert_eq!(inspect(&a).expect("inspect").id, id_a);
    }

    #[test]
    fn created_segment_is_sealed_and_sized() {
        let fd = create_sealed("shmlink-test", 8192).expect("memfd");
        let facts = inspect(&fd).expect("inspect");
        assert_eq!(
            facts,
            SegmentFacts {
                id: identify(&fd).expect("fstat").0,
                len: 8192,
                sealed: true,
                arena_sealed: false,
            }
        );
        assert!(
            fs::ftruncate(&fd, 4096).is_err(),
            "shrinking a sealed segment must fail"
        );
    }
}
