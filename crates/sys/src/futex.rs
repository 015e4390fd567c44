//! The futex doorbell: wait on and wake a 32-bit word in shared memory.
//!
//! The word lives in memory shared between processes, so the operations never
//! use `FUTEX_PRIVATE_FLAG`.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::io::Errno;
use rustix::thread::futex::{self, Flags};
use rustix::time::Timespec;

/// Why [`wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Woken by a `FUTEX_WAKE`, a signal, or spuriously: re-check the condition.
    Woken,
    /// The word no longer held the expected value when the wait began.
    Changed,
    /// The timeout elapsed.
    TimedOut,
}

/// Sleeps while `*word == expected`, for at most `timeout` (forever when `None`).
#[cold]
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> Wake {
    let ts = timeout.map(|d| Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    match futex::wait(word, Flags::empty(), expected, ts.as_ref()) {
        Ok(()) => Wake::Woken,
        Err(Errno::AGAIN) => Wake::Changed,
        Err(Errno::TIMEDOUT) => Wake::TimedOut,
        // EINTR and anything unexpected: report a wake-up, the caller re-checks.
        Err(_) => Wake::Woken,
    }
}

/// Wakes up to `n` waiters on `word`; returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32) -> usize {
    futex::wake(word, Flags::empty(), n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wait_times_out_and_sees_changes() {
        let w = AtomicU32::new(1);
        assert_eq!(wait(&w, 0, Some(Duration::from_millis(1))), Wake::Changed);
        assert_eq!(wait(&w, 1, Some(Duration::from_millis(1))), Wake::TimedOut);
    }

    #[test]
    fn wake_releases_a_waiter() {
        let w = Arc::new(AtomicU32::new(1));
        let w2 = Arc::clone(&w);
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 1 {
                wait(&w2, 1, Some(Duration::from_secs(5)));
            }
        });
        w.store(0, Ordering::Release);
        wake(&w, 1);
        t.join().expect("waiter thread");
    }
}
