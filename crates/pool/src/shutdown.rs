//! `--shutdown-timeout`: how long the calls and HTTP requests in flight
//! when the pool is told to stop may still run. New ones are refused from
//! the first moment (the listeners close, sessions are told "shutting
//! down", queued calls get `CODE_POOL_STOPPING`); at the deadline the
//! workers still running one are killed, and their callers get
//! `CODE_POOL_STOPPING` saying so (an HTTP client, 503).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use shmlink::Deadline;

use crate::inner::Inner;
use crate::table::{Phase, Slot};

/// The deadline's watch, from the stop until the workers are gone.
pub(crate) struct Expiry {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// When the calls in flight must be done.
    pub(crate) deadline: Instant,
}

impl Expiry {
    /// Starts watching: at `--shutdown-timeout` from now, unless finished
    /// first, the workers still running a call or a request are killed.
    pub(crate) fn start(inner: &Arc<Inner>) -> Expiry {
        let timeout = inner.opts.shutdown_timeout;
        let deadline = Instant::now() + timeout;
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let (d, inner) = (Arc::clone(&done), Arc::clone(inner));
        let thread = std::thread::Builder::new()
            .name("shmlink-pool-shutdown".into())
            .spawn(move || {
                let (lock, cv) = &*d;
                let mut finished = lock.lock().unwrap_or_else(|p| p.into_inner());
                while !*finished {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        drop(finished);
                        expire(&inner);
                        return;
                    }
                    finished = cv
                        .wait_timeout(finished, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            })
            .ok();
        Expiry {
            done,
            thread,
            deadline,
        }
    }

    /// Everything stopped: the watch ends.
    pub(crate) fn finish(mut self) {
        let (lock, cv) = &*self.done;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether a worker runs something: a call, a line, an HTTP request it
/// serves itself.
pub(crate) fn running(inner: &Inner, s: &Slot) -> bool {
    let http = s
        .http
        .zip(inner.http_workers.as_ref())
        .is_some_and(|(slot, h)| h.runs_request(slot));
    matches!(s.phase, Phase::Busy | Phase::Lined) || http
}

/// The deadline passed: every worker still running something is killed.
/// (A worker told to stop is in phase `Stopping`, but still has its
/// request in hand when `running` says so.)
fn expire(inner: &Inner) {
    inner.shutdown_expired.store(true, Ordering::Release);
    let mut t = inner.shared.lock();
    for s in &mut t.slots {
        if running(inner, s) && !s.killed {
            inner.say(&killed(inner, s.pid));
            let _ = s.child.kill();
            s.killed = true;
        }
    }
}

/// The log line of a worker killed at the deadline.
pub(crate) fn killed(inner: &Inner, pid: u32) -> String {
    format!(
        "worker {pid} still ran a call {:?} after the stop (--shutdown-timeout): killed",
        inner.opts.shutdown_timeout
    )
}

/// What a caller whose call was cut at the deadline is told.
pub(crate) fn cut_off(inner: &Inner, pid: u32) -> String {
    format!(
        "the pool stopped before worker {pid} answered: the call ran past --shutdown-timeout of {:?} and the worker was killed",
        inner.opts.shutdown_timeout
    )
}

/// Takes every direct line back before the workers are told to stop: each
/// lined worker answers the call in hand and gives its line back, and its
/// client goes on through its session (at an upgrade, the successor's,
/// which lends it a line of its own). Waits until `deadline` at most; a
/// line not back by then ends with its worker.
pub(crate) fn revoke_lines(inner: &Inner, deadline: Instant) {
    let mut t = inner.shared.lock();
    t.revoking = true; // a line being lent now is taken back at once (`Shared::lined`)
    for s in &mut t.slots {
        if s.phase != Phase::Lined || s.revoked.is_some() {
            continue;
        }
        if let (Some(client), Some(hold)) = (s.client.as_mut(), s.line.as_ref()) {
            if client.revoke_line(hold).is_ok() {
                s.revoked = Some(Instant::now());
            }
        }
    }
    for s in &mut t.slots {
        if s.phase != Phase::Lined {
            continue;
        }
        let (Some(client), Some(hold)) = (s.client.as_mut(), s.line.as_ref()) else {
            continue;
        };
        if let Ok(Some(served)) = client.line_returned(hold, &mut Deadline::At(deadline)) {
            inner.shared.count_line_calls(served);
            s.calls += served;
            s.line = None;
            s.revoked = None;
            s.set(Phase::Idle);
        }
    }
}
