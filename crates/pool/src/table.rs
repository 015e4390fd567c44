//! The table of worker processes and the dispatch of calls to them: a call
//! leases an idle worker (waiting in a bounded queue), calls it, and hands
//! it back — or retires it, when it died, hung, or is due for recycling.

use std::process::Child;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use shmlink::{Client, Deadline, LineHold, RemoteError};

use crate::codes::{CODE_NO_WORKER, CODE_NO_WORKERS_START, CODE_POOL_STOPPING, CODE_QUEUE_FULL};
use crate::restart::Restart;

/// Where a worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Started, not connected yet.
    Starting,
    /// Connected, waiting for a call.
    Idle,
    /// Running a call.
    Busy,
    /// Lent to a client on a direct line: serving its calls, unseen by the
    /// pool until it gives the line back.
    Lined,
    /// Told to stop (or killed); waiting for it to exit.
    Stopping,
}

impl Phase {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Idle => "idle",
            Phase::Busy => "busy",
            Phase::Lined => "direct",
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
    /// Why it was retired, for the restart metrics (`None`: not retired,
    /// or by `--max-jobs`, which its stop reason says).
    pub(crate) retire_why: Option<Restart>,
    /// Why it is stopping, for the log and for counting failures.
    pub(crate) stop_reason: Option<String>,
    /// Killed by the supervisor (it hung at start or at stop).
    pub(crate) killed: bool,
    /// The direct line it serves (phase `Lined`).
    pub(crate) line: Option<LineHold>,
    /// When the pool asked for the line back.
    pub(crate) revoked: Option<Instant>,
    /// It was lent on a line: it connected and took calls, whatever its
    /// count says (a line's calls are counted when it is given back), so
    /// its death is no failed start.
    pub(crate) lent: bool,
    /// Its slot of the HTTP counters page, when it serves HTTP itself.
    pub(crate) http: Option<usize>,
    /// An HTTP request it runs: the count of requests handed to its
    /// application when the supervisor first saw it running, and when.
    pub(crate) running: Option<(u64, Instant)>,
}

impl Slot {
    /// Why it stops now that its calls are counted: `--max-jobs` reached
    /// (`max_jobs` 0: never), an exact limit; its successor was started
    /// early ([`Slot::expiring`]) and is ready by then unless calls come
    /// faster than workers start.
    pub(crate) fn due(&mut self, max_jobs: u64) -> Option<String> {
        (max_jobs > 0 && self.calls >= max_jobs).then(|| {
            self.retire_why = Some(Restart::MaxJobs);
            format!("recycled after {} calls (--max-jobs)", self.calls)
        })
    }

    /// Whether it will reach `--max-jobs` before a worker started now is
    /// ready: at its call rate so far, within `start` (how long the last
    /// start took, doubled) or in its last `max_jobs / 2` calls; a worker
    /// on a direct line under `--max-jobs`, whose calls the pool sees only
    /// when the line comes back, always is. Its successor starts now.
    pub(crate) fn expiring(&self, max_jobs: u64, start: Duration) -> bool {
        if max_jobs == 0 {
            return false;
        }
        if self.phase == Phase::Lined {
            return true;
        }
        let age = self.started.elapsed().as_secs_f64();
        let rate = if age > 0.0 {
            self.calls as f64 / age
        } else {
            0.0
        };
        let lead = (rate * 2.0 * start.as_secs_f64()).ceil() as u64;
        self.calls + lead.clamp(1, (max_jobs / 2).max(1)) >= max_jobs
    }

    /// Why a retired worker stops (its log line).
    pub(crate) fn retired_because(&self) -> String {
        match self.retire_why {
            Some(Restart::MaxJobs) => format!("recycled after {} calls (--max-jobs)", self.calls),
            Some(Restart::MaxMemory) => "recycled: over --max-memory".into(),
            Some(Restart::Ttl) => "recycled: older than --ttl".into(),
            Some(Restart::IdleTtl) => "recycled: idle for --idle-ttl".into(),
            Some(Restart::Reload) => "replaced by a reload".into(),
            _ => "retired".into(),
        }
    }

    pub(crate) fn set(&mut self, phase: Phase) {
        self.phase = phase;
        self.since = Instant::now();
    }

    /// Tells the worker to stop: its session ends with a goodbye, `run`
    /// returns in the worker, which exits.
    pub(crate) fn stop(&mut self, reason: &str) {
        self.client = None;
        // A worker on a line waits there: woken, it reads the goodbye.
        if let Some(line) = self.line.take() {
            line.wake();
        }
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
    /// The pool takes its lines back before it stops (`revoke_lines`): a
    /// line lent from now on is taken back at once and never offered.
    pub(crate) revoking: bool,
    /// Workers the pool keeps (`--workers`): a retired worker stops only
    /// once this many others of the current generation serve.
    pub(crate) target: usize,
    /// How long the last worker took from its start to its connection.
    pub(crate) start_took: Duration,
}

impl Table {
    /// Whether the retired workers are replaced: as many workers of the
    /// current generation, not retired, serve (or may, lent on a line) as
    /// the pool keeps. Until then retired ones go on serving, so that
    /// recycling and reloads never leave the pool short of workers.
    pub(crate) fn replaced(&self) -> bool {
        let g = self.generation;
        self.slots
            .iter()
            .filter(|s| {
                s.generation == g
                    && !s.retire
                    && matches!(s.phase, Phase::Idle | Phase::Busy | Phase::Lined)
            })
            .count()
            >= self.target
    }

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

    /// The idle worker to lend on a direct line: one of the current
    /// generation that serves lines, while no call waits; with the calls it
    /// may still serve before `--max-jobs` (0: no limit).
    fn lease_for_line(&mut self, max_jobs: u64) -> Option<(Lease, u32)> {
        if self.stopping || self.waiting > 0 {
            return None;
        }
        let generation = self.generation;
        let i = self.slots.iter().position(|s| {
            s.phase == Phase::Idle
                && !s.retire
                && s.generation == generation
                && s.client.as_ref().is_some_and(Client::serves_lines)
        })?;
        let s = &mut self.slots[i];
        let allowed = if max_jobs == 0 {
            0
        } else {
            u32::try_from(max_jobs.saturating_sub(s.calls).max(1)).unwrap_or(u32::MAX)
        };
        let client = s.client.take()?;
        s.set(Phase::Busy);
        Some((
            Lease {
                slot: s.id,
                pid: s.pid,
                client,
            },
            allowed,
        ))
    }

    /// A worker on a line to take back for a waiting call: busy from now,
    /// its session and line with the caller that revokes it.
    fn reclaim(&mut self) -> Option<Reclaim> {
        let s = self
            .slots
            .iter_mut()
            .find(|s| s.phase == Phase::Lined && s.client.is_some() && s.line.is_some())?;
        let (client, hold) = (s.client.take()?, s.line.take()?);
        s.set(Phase::Busy);
        Some(Reclaim {
            lease: Lease {
                slot: s.id,
                pid: s.pid,
                client,
            },
            hold,
            revoked: s.revoked.take(),
        })
    }

    /// Whether waiting can bring a worker: one is running, or one is
    /// starting while starts are not failing.
    fn hope(&self) -> bool {
        self.slots.iter().any(|s| match s.phase {
            Phase::Idle | Phase::Busy | Phase::Lined => true,
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

/// A worker taken back from its line by a caller that needs it.
#[derive(Debug)]
struct Reclaim {
    lease: Lease,
    hold: LineHold,
    /// When the supervisor already revoked it.
    revoked: Option<Instant>,
}

/// What a pool's calls wait under (from its options).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terms {
    pub(crate) queue_timeout: Duration,
    pub(crate) queue_size: usize,
    pub(crate) max_jobs: u64,
    pub(crate) call_timeout: Duration,
}

/// The table behind its lock, and the condition callers wait on.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    table: Mutex<Table>,
    /// Signalled on any change the supervisor should react to.
    pub(crate) changed: Condvar,
    /// Calls served on direct lines, counted as lines are given back.
    pub(crate) line_calls: std::sync::atomic::AtomicU64,
    /// Signalled when a worker becomes idle (or waiting callers must look
    /// again): only when a caller waits, so a call that finds its worker
    /// idle and hands it back costs no wake-up of anybody.
    idle: Condvar,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `n` workers serve (connected, not stopping), up to
    /// `deadline`; whether they do.
    pub(crate) fn wait_serving(&self, n: usize, deadline: Instant) -> bool {
        let mut t = self.lock();
        loop {
            let serving = t
                .slots
                .iter()
                .filter(|s| !matches!(s.phase, Phase::Starting | Phase::Stopping))
                .count();
            if serving >= n {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            t = self
                .changed
                .wait_timeout(t, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
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
    pub(crate) fn acquire(&self, terms: Terms) -> Result<Lease, RemoteError> {
        let (timeout, queue_size) = (terms.queue_timeout, terms.queue_size);
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
            if let Some(r) = t.reclaim() {
                drop(t);
                let got = self.take_back(r, terms);
                t = self.lock();
                match got {
                    Some(lease) => break Ok(lease),
                    None => continue,
                }
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
                let busy = t
                    .slots
                    .iter()
                    .filter(|s| matches!(s.phase, Phase::Busy | Phase::Lined))
                    .count();
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

    /// Counts calls served on a line given back.
    pub(crate) fn count_line_calls(&self, served: u64) {
        self.line_calls
            .fetch_add(served, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes an idle worker to lend on a direct line (see
    /// [`Table::lease_for_line`]).
    pub(crate) fn try_lend(&self, max_jobs: u64) -> Option<(Lease, u32)> {
        self.lock().lease_for_line(max_jobs)
    }

    /// Files a worker lent on a line: `Lined` until it gives the line back.
    /// Whether the line may be offered to its client: not when the pool
    /// began taking its lines back (or stopped the worker) while this one
    /// was being lent. The client, never told of the line, goes on through
    /// its session; a line it were told of would end with its worker in
    /// the middle of a call.
    pub(crate) fn lined(&self, lease: Lease, hold: LineHold) -> bool {
        let mut t = self.lock();
        let revoking = t.revoking;
        match t.slots.iter_mut().find(|s| s.id == lease.slot) {
            Some(s) if s.phase == Phase::Busy => {
                let mut client = lease.client;
                if revoking && client.revoke_line(&hold).is_ok() {
                    s.revoked = Some(Instant::now());
                } else {
                    s.revoked = None;
                }
                s.client = Some(client);
                s.line = Some(hold);
                s.lent = true;
                s.set(Phase::Lined);
                !revoking
            }
            // Stopped meanwhile (the pool stopping): the line's socket
            // closes with the session; the worker exits.
            _ => {
                drop(t);
                hold.wake();
                false
            }
        }
    }

    /// Puts a worker that could not be lent back, idle, its calls uncounted.
    pub(crate) fn put_back(&self, lease: Lease) {
        let mut t = self.lock();
        if let Some(s) = t.slots.iter_mut().find(|s| s.id == lease.slot) {
            if s.phase == Phase::Busy {
                s.client = Some(lease.client);
                s.set(Phase::Idle);
                if t.waiting > 0 {
                    self.idle.notify_one();
                }
            }
        }
    }

    /// Takes a worker back from its line for a waiting call: revoked (if
    /// the supervisor has not yet), then its return awaited for up to the
    /// call timeout; a worker that does not give it back in time hangs
    /// (killed), one that broke the line or died is discarded. `None` when
    /// it cannot take the call (discarded, or due for recycling).
    fn take_back(&self, mut r: Reclaim, terms: Terms) -> Option<Lease> {
        let client = &mut r.lease.client;
        let revoked = match r.revoked {
            Some(at) => Ok(at),
            None => client.revoke_line(&r.hold).map(|()| Instant::now()),
        };
        let returned = revoked.and_then(|at| {
            let mut deadline = Deadline::In(terms.call_timeout.saturating_sub(at.elapsed()));
            client.line_returned(&r.hold, &mut deadline)
        });
        match returned {
            Ok(Some(served)) => self.returned(r.lease, served, terms.max_jobs),
            Ok(None) => {
                self.discard(
                    r.lease,
                    "killed: kept a direct line past the call timeout",
                    true,
                );
                None
            }
            Err(_) => {
                self.discard(r.lease, "died on a direct line", true);
                None
            }
        }
    }

    /// A worker gave its line back, having served `served` calls on it:
    /// the lease for the caller that took it back, or `None` when it is
    /// due for recycling (stopped).
    fn returned(&self, lease: Lease, served: u64, max_jobs: u64) -> Option<Lease> {
        let mut t = self.lock();
        self.count_line_calls(served);
        let i = t.slots.iter().position(|s| s.id == lease.slot)?;
        t.slots[i].calls += served;
        let replaced = t.replaced();
        let s = &mut t.slots[i];
        if s.phase != Phase::Busy {
            return Some(lease);
        }
        let why = match s.due(max_jobs) {
            Some(why) => why,
            None if s.retire && replaced => s.retired_because(),
            None => return Some(lease),
        };
        s.stop(&why);
        drop(t);
        drop(lease);
        self.notify_all();
        None
    }

    /// Hands a worker back after a call that it answered (with a response
    /// or its own error): idle again, or stopped when it is due for
    /// recycling. `max_jobs` 0 recycles never.
    pub(crate) fn release(&self, lease: Lease, max_jobs: u64) {
        let mut t = self.lock();
        t.failures = 0;
        t.backoff_until = None;
        if let Some(i) = t.slots.iter().position(|s| s.id == lease.slot) {
            t.slots[i].calls += 1;
            if t.slots[i].phase != Phase::Busy {
                return;
            }
            let replaced = t.replaced();
            let s = &mut t.slots[i];
            let why = match s.due(max_jobs) {
                Some(why) => Some(why),
                None if s.retire && replaced => Some(s.retired_because()),
                None => None,
            };
            if let Some(why) = why {
                s.stop(&why);
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
