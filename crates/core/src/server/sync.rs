//! Locking and joining as the server's threads do it.

use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Locks `m`, also after a panic while it was held (the state stays usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Joins `threads`, skipping the calling thread (which cannot join itself).
pub(crate) fn join_all(threads: impl IntoIterator<Item = JoinHandle<()>>) {
    let me = std::thread::current().id();
    for t in threads {
        if t.thread().id() != me {
            let _ = t.join();
        }
    }
}
