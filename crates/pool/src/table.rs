//! The table of worker processes and the dispatch of calls to them: a call
//! leases an idle worker (waiting in a bounded queue), calls it, and hands
//! it back — or retires it, when it died, hung, or is due for recycling.

use std::process::Child;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use shmlink::{Client, RemoteError};

use crate::codes::{CODE_NO_WORKER, CODE_NO_WORKERS_START, CODE_POOL_STOPPING, CODE_QUEUE_FULL};

/// Where a worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Started, not connected yet.
    Starting,
    /// Connected, waiting for a call.
    Idle,
    /// Running a call.
    Busy,
    /// Told to stop (or killed); waiting for it to exit.
    Stopping,
}

impl Phase {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Idle => "idle",
            Phase::Busy => "busy",
            Phase::Stopping => "stopping",
        }
    }
}

/// One worker process.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Unique for the pool's life.
    pub(crate) id: u64,
    /// Its place among the `workers` (for the per-place restart count).
    pub(crate) place: usize,
    pub(crate) pid: u32,
    pub(crate) child: Child,
    pub(crate) phase: Phase,
    /// Since when it is in its phase.
    pub(crate) since: Instant,
    pub(crate) started: Instant,
    /// Its session, while idle (a busy worker's is with its caller).
    pub(crate) client: Option<Client>,
    pub(crate) calls: u64,
    pub(crate) rss: u64,
    /// The reload generation it was started in.
    pub(crate) generation: u64,
    /// To be stopped at the next chance (reload, memory, age, idleness).
    pub(crate) retire: bool,
    /// Why it is stopping, for the log and for counting failures.
    pub(crate) stop_reason: Option<String>,
    /// Killed by the supervisor (it hung at start or at stop).
    pub(crate) killed: bool,
}

impl Slot {
    pub(crate) fn set(&mut self, phase: Phase) {
        self.phase = phase;
        self.since = Instant::now();
    }

    /// Tells the worker to stop: its session ends with a goodbye, `run`
    /// returns in the worker, which exits.
    pub(crate) fn stop(&mut self, reason: &str) {
        self.client = None;
        self.stop_reason = Some(reason.to_string());
        self.set(Phase::Stopping);
    }
}

/// The pool's mutable state.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub(crate) slots: Vec<Slot>,
    pub(crate) next_id: u64,
    /// Calls waiting for a worker.
    pub(crate) waiting: usize,
    /// The current reload generation.
    pub(crate) generation: u64,
    /// Starts that failed in a row (reset when a worker serves a call).
    pub(crate) failures: u32,
    pub(crate) backoff_until: Option<Instant>,
    pub(crate) last_failure: Option<String>,
    /// Replacements started per place.
    pub(crate) restarts: Vec<u64>,
    pub(crate) stopping: bool,
}

impl Table {
    /// The idle worker to lease: one of the current generation first (a
    /// reload's old workers only while no new one is free).
    fn pick(&mut self) -> Option<usize> {
        let idle = |s: &&Slot| s.phase == Phase::Idle && s.client.is_some();
        let fresh = self
            .slots
            .iter()
            .position(|s| idle(&s) && !s.retire && s.generation == self.generation);
        fresh.or_else(|| self.slots.iter().position(|s| idle(&s)))
    }

    /// Takes the idle worker [`Table::pick`] chooses: busy now, its session
    /// in the lease.
    fn lease(&mut self) -> Option<Lease> {
        let i = self.pick()?;
        let s = &mut self.slots[i];
        let client = s.client.take()?;
        s.set(Phase::Busy);
        Some(Lease {
            slot: s.id,
            pid: s.pid,
            client,
        })
    }

    /// Whether waiting can bring a worker: one is running, or one is
    /// starting while starts are not failing.
    fn hope(&self) -> bool {
        self.slots.iter().any(|s| match s.phase {
            Phase::Idle | Phase::Busy => true,
            Phase::Starting => self.failures == 0,
            Phase::Stopping => false,
        }) || (self.failures == 0 && !self.stopping)
    }
}

/// A worker leased for one call.
#[derive(Debug)]
pub(crate) struct Lease {
    pub(crate) slot: u64,
    pub(crate) pid: u32,
    pub(crate) client: Client,
}

/// The table behind its lock, and the condition callers wait on.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    table: Mutex<Table>,
    /// Signalled on any change the supervisor should react to.
    pub(crate) changed: Condvar,
    /// Signalled when a worker becomes idle (or waiting callers must look
    /// again): only when a caller waits, so a call that finds its worker
    /// idle and hands it back costs no wake-up of anybody.
    idle: Condvar,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the supervisor and every waiting caller: something changed.
    pub(crate) fn notify_all(&self) {
        self.changed.notify_all();
        self.idle.notify_all();
    }

    /// Leases a worker idle right now, without waiting.
    pub(crate) fn try_acquire(&self) -> Option<Lease> {
        let mut t = self.lock();
        if t.stopping {
            return None;
        }
        t.lease()
    }

    /// Leases an idle worker, waiting up to `timeout` in a queue of at most
    /// `queue_size` callers.
    ///
    /// # Errors
    /// A remote error for the caller: queue full, no worker in time, no
    /// worker can start, pool stopping.
    pub(crate) fn acquire(
        &self,
        timeout: Duration,
        queue_size: usize,
    ) -> Result<Lease, RemoteError> {
        let mut t = self.lock();
        let deadline = Instant::now() + timeout;
        let mut queued = false;
        let result = loop {
            if t.stopping {
                break Err(RemoteError::new(CODE_POOL_STOPPING, "the pool is stopping"));
            }
            if let Some(lease) = t.lease() {
                break Ok(lease);
            }
            if !t.hope() {
                let why = t.last_failure.clone().unwrap_or_else(|| "no worker".into());
                break Err(RemoteError::new(
                    CODE_NO_WORKERS_START,
                    format!("no worker can take the call: workers keep failing to start ({why})"),
                ));
            }
            if !queued {
                if t.waiting >= queue_size {
                    break Err(RemoteError::new(
                        CODE_QUEUE_FULL,
                        format!(
                            "the queue is full: {queue_size} calls already wait for a worker (--queue {queue_size})"
                        ),
                    ));
                }
                t.waiting += 1;
                queued = true;
            }
            let now = Instant::now();
            if now >= deadline {
                let busy = t.slots.iter().filter(|s| s.phase == Phase::Busy).count();
                break Err(RemoteError::new(
                    CODE_NO_WORKER,
                    format!(
                        "no worker became free within the queue timeout of {timeout:?} ({busy} of {} workers busy)",
                        t.slots.len()
                    ),
                ));
            }
            t = self
                .idle
                .wait_timeout(t, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        if queued {
            t.waiting -= 1;
        }
        result
    }

    /// Hands a worker back after a call that it answered (with a response
    /// or its own error): idle again, or stopped when it is due for
    /// recycling. `max_jobs` 0 recycles never.
    pub(crate) fn release(&self, lease: Lease, max_jobs: u64) {
        let mut t = self.lock();
        t.failures = 0;
        t.backoff_until = None;
        if let Some(s) = t.slots.iter_mut().find(|s| s.id == lease.slot) {
            s.calls += 1;
            if s.phase != Phase::Busy {
                return;
            }
            if max_jobs > 0 && s.calls >= max_jobs {
                s.stop(&format!("recycled after {} calls (--max-jobs)", s.calls));
            } else if s.retire {
                s.stop("retired");
            } else {
                s.client = Some(lease.client);
                s.set(Phase::Idle);
                if t.waiting > 0 {
                    self.idle.notify_one();
                }
                return;
            }
        }
        // The session closes (a goodbye, an unmap) outside the lock.
        drop(t);
        drop(lease);
        self.notify_all();
    }

    /// The worker of `lease` failed the call (died, hung, broke the
    /// protocol): it is stopped (killed when `kill`) and never reused.
    pub(crate) fn discard(&self, lease: Lease, reason: &str, kill: bool) {
        let mut t = self.lock();
        if let Some(s) = t.slots.iter_mut().find(|s| s.id == lease.slot) {
            if kill {
                let _ = s.child.kill();
            }
            s.stop(reason);
        }
        drop(t);
        drop(lease);
        self.notify_all();
    }
}
