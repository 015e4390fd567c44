//! Segments made ahead of time: a background thread keeps a few segments of
//! the most recently requested ring sizes created, mapped, and with the pages
//! a first call touches already faulted in, so accepting an `shm:` session
//! does no memfd or mmap work on its critical path. A segment is used by one
//! session only and never reused (a client may keep writing into its old
//! segment; reuse would let it disturb another session).

use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::sync::{join_all, lock};
use crate::segment::Segment;

/// Segments kept ready.
pub(crate) const READY: usize = 4;

#[derive(Default)]
struct State {
    ready: Vec<(Segment, OwnedFd)>,
    sizes: (usize, usize),
    closed: bool,
    /// The process ran out of descriptors: do not refill (each prepared
    /// segment holds one) until a session takes a segment again.
    starved: bool,
}

/// The stock of prepared segments.
#[derive(Default)]
pub(crate) struct Preparer {
    state: Mutex<State>,
    wanted: Condvar,
    /// The background thread, joined by [`Preparer::close`].
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Preparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Preparer")
    }
}

fn make(sizes: (usize, usize)) -> std::io::Result<(Segment, OwnedFd)> {
    let (seg, fd) = Segment::create(sizes.0, sizes.1)?;
    seg.prefault_first_pages();
    Ok((seg, fd))
}

impl Preparer {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Starts the background thread preparing segments of `sizes`.
    pub(crate) fn start(sizes: (usize, usize)) -> Arc<Preparer> {
        let p = Arc::new(Preparer::default());
        p.lock().sizes = sizes;
        let bg = Arc::clone(&p);
        let spawned = std::thread::Builder::new()
            .name("shmlink-prepare".into())
            .spawn(move || bg.refill_loop());
        match spawned {
            Ok(t) => *lock(&p.thread) = Some(t),
            // Without the thread every session creates its own segment.
            Err(_) => p.lock().closed = true,
        }
        p
    }

    /// A stock that is never refilled: no thread, no segments kept; `take`
    /// creates each segment itself.
    pub(crate) fn idle() -> Arc<Preparer> {
        let p = Arc::new(Preparer::default());
        p.lock().closed = true;
        p
    }

    fn refill_loop(&self) {
        let mut st = self.lock();
        loop {
            while !st.closed && (st.starved || st.ready.len() >= READY) {
                st = self.wanted.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.closed {
                return;
            }
            let sizes = st.sizes;
            drop(st);
            let made = make(sizes);
            st = self.lock();
            match made {
                Ok(s) if st.sizes == sizes => st.ready.push(s),
                Ok(_) => {}
                // Out of memory or descriptors: let sessions try themselves.
                Err(_) => st = self.wanted.wait(st).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    /// A segment for the given ring sizes: a prepared one when the sizes
    /// match, else a new one (and future ones are prepared at these sizes).
    ///
    /// # Errors
    /// When a segment has to be created here and the kernel refuses.
    pub(crate) fn take(&self, c2s: usize, s2c: usize) -> std::io::Result<(Segment, OwnedFd)> {
        let mut st = self.lock();
        st.starved = false;
        let got = if st.sizes == (c2s, s2c) {
            st.ready.pop()
        } else {
            st.sizes = (c2s, s2c);
            st.ready.clear();
            None
        };
        drop(st);
        match got {
            Some(s) => Ok(s),
            None => make((c2s, s2c)),
        }
    }

    /// Wakes the background thread to top the stock up. Called once a
    /// session's welcome is out: woken earlier, on a busy CPU it would
    /// make its segment before the welcome leaves.
    pub(crate) fn refill(&self) {
        let st = self.lock();
        let wanted = !st.closed && !st.starved && st.ready.len() < READY;
        drop(st);
        if wanted {
            self.wanted.notify_one();
        }
    }

    /// Frees one prepared segment (and its descriptor) for a process out of
    /// descriptors, and stops refilling until a session takes a segment.
    /// False when the stock was empty.
    pub(crate) fn shed(&self) -> bool {
        let mut st = self.lock();
        st.starved = true;
        st.ready.pop().is_some()
    }

    /// Stops the background thread, waits until it has ended, and frees the
    /// stock.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.ready.clear();
        drop(st);
        self.wanted.notify_all();
        let thread = lock(&self.thread).take();
        join_all(thread);
        // A segment made while closing went into the stock after the clear.
        self.lock().ready.clear();
    }
}
