//! The shared page of the spin and futex baselines: two sequence words, a
//! stop word and two payload buffers in one sealed memfd mapped by both
//! processes.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicU32;

use shmlink_sys::Mapping;

/// Written by the bench: the sequence number of the request in the buffer.
pub(crate) const REQ_SEQ: usize = 0;
/// Written by the peer: the sequence number of the response in the buffer.
pub(crate) const RESP_SEQ: usize = 128;
/// Written by the bench: non-zero asks the peer to stop.
pub(crate) const STOP: usize = 256;
/// Start of the request buffer.
pub(crate) const REQ_DATA: usize = 4096;

const PAGE: usize = 4096;

/// Where the response buffer starts for requests of `size` bytes.
pub(crate) fn resp_data(size: usize) -> usize {
    REQ_DATA + size.div_ceil(PAGE).max(1) * PAGE
}

/// Total segment length for requests of `size` and responses of `reply` bytes.
pub(crate) fn segment_len(size: usize, reply: usize) -> usize {
    resp_data(size) + reply.div_ceil(PAGE).max(1) * PAGE
}

/// A mapped shared page (plus buffers).
#[derive(Debug)]
pub(crate) struct SharedPage {
    map: Mapping,
}

impl SharedPage {
    /// Creates a sealed memfd of `len` bytes and maps it; returns the fd to
    /// hand to the peer.
    pub(crate) fn create(len: usize) -> io::Result<(SharedPage, OwnedFd)> {
        let fd = shmlink_sys::memfd::create_sealed("shmlink-bench-baseline", len as u64)?;
        let page = SharedPage::map(&fd, len)?;
        Ok((page, fd))
    }

    /// Maps a segment received from the bench, checking its size.
    pub(crate) fn map(fd: impl AsFd, len: usize) -> io::Result<SharedPage> {
        let facts = shmlink_sys::memfd::inspect(&fd)?;
        if facts.len != len as u64 || len < REQ_DATA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("baseline segment is {} bytes, expected {len}", facts.len),
            ));
        }
        let map = Mapping::map_shared(fd, len, true)?;
        Ok(SharedPage { map })
    }

    /// The 32-bit word at `off` (one of the constants above).
    pub(crate) fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off + 4 <= REQ_DATA, "words live before the buffers");
        self.map.atomic_u32(off)
    }

    /// Copies `src` into the mapping at `off` (a buffer, never the words).
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        assert!(off >= REQ_DATA, "buffers live after the words");
        self.map.write_at(off, src);
    }

    /// Copies bytes of the mapping at `off` into `dst`.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off >= REQ_DATA, "buffers live after the words");
        self.map.read_at(off, dst);
    }
}

/// How long a futex sleep lasts before `check` runs again.
const SLEEP_SLICE: std::time::Duration = std::time::Duration::from_millis(100);
/// Spins between two runs of `check`.
const SPINS_PER_CHECK: u32 = 1 << 16;

/// Waits until `word` holds `target`: spinning, or with `futex` sleeping in
/// `FUTEX_WAIT` at once on every turn. `check` runs every 2^16 spins or
/// 100 ms of sleep and ends the wait with its error (peer gone, deadline,
/// interrupt).
pub(crate) fn wait_for(
    word: &AtomicU32,
    target: u32,
    futex: bool,
    mut check: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering;
    let mut spins = 0u32;
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == target {
            return Ok(());
        }
        if futex {
            let wake = shmlink_sys::futex::wait(word, seen, Some(SLEEP_SLICE));
            if wake == shmlink_sys::futex::Wake::TimedOut {
                check()?;
            }
        } else {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPINS_PER_CHECK) {
                check()?;
            }
        }
    }
}
