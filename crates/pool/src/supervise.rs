//! The supervisor's rounds: reap exited workers (a failed start backs off),
//! kill the ones that hang at start or refuse to stop, recycle by memory,
//! age and idleness, hand over after a reload, and start workers until the
//! pool has its number of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink::Deadline;

use crate::inner::Inner;
use crate::restart::Restart;
use crate::spawn;
use crate::table::{Phase, Slot, Table};

/// A worker that lives this long counts as started well (its exit is no
/// failure of the start).
const STARTED_WELL: Duration = Duration::from_secs(2);
/// First delay after a failed start; doubles per failure in a row.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// Longest delay between starts.
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How often memory is read: a worker that serves HTTP itself can leak
/// hundreds of megabytes a second (bench/http/apps/leaky at 40,000
/// requests/s), so every round; a read of `/proc/PID/statm` costs a few
/// microseconds.
const MEASURE_EVERY: Duration = Duration::from_millis(20);

/// Runs the rounds until the pool stops; a round every 20 ms, or sooner
/// when something changed.
pub(crate) fn run(inner: &Arc<Inner>) {
    let mut last_measure = Instant::now();
    loop {
        let mut t = inner.shared.lock();
        if t.stopping {
            return;
        }
        reap(inner, &mut t);
        collect_lines(inner, &mut t);
        enforce_deadlines(inner, &mut t);
        watch_http(inner, &mut t);
        if last_measure.elapsed() >= MEASURE_EVERY {
            last_measure = Instant::now();
            measure(inner, &mut t);
        }
        recycle(inner, &mut t);
        hand_over(&mut t);
        start_missing(inner, &mut t);
        inner.sample_rate();
        drop(
            inner
                .shared
                .changed
                .wait_timeout(t, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner()),
        );
    }
}

/// Removes the workers that exited; an unexpected exit soon after a start
/// is a failed start, which delays the next one.
fn reap(inner: &Inner, t: &mut Table) {
    let mut i = 0;
    while i < t.slots.len() {
        let exited = match t.slots[i].child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        };
        let Some(status) = exited else {
            i += 1;
            continue;
        };
        let s = t.slots.swap_remove(i);
        if let (Some(h), Some(slot)) = (&inner.http_workers, s.http) {
            h.release(slot);
        }
        let expected = s.phase == Phase::Stopping;
        if !t.stopping {
            inner.metrics.restart(restart_of(&s));
        }
        let reason = s.stop_reason.as_deref().unwrap_or("unexpectedly");
        inner.say(&format!(
            "worker {} exited ({status}) after {} calls: {reason}",
            s.pid, s.calls
        ));
        let failed_start = s.phase == Phase::Starting
            || (!expected && s.calls == 0 && !s.lent && s.started.elapsed() < STARTED_WELL);
        if failed_start {
            t.failures += 1;
            let delay = BACKOFF_FIRST
                .saturating_mul(1 << (t.failures - 1).min(16))
                .min(BACKOFF_MAX);
            t.backoff_until = Some(Instant::now() + delay);
            let how = match (&s.stop_reason, s.phase) {
                (Some(reason), Phase::Starting) => reason.clone(),
                (_, Phase::Starting) => format!("exited before connecting ({status})"),
                _ => format!("exited ({status})"),
            };
            t.last_failure = Some(format!(
                "worker {} {how}, {:?} after its start",
                s.pid,
                s.started.elapsed()
            ));
            inner.say(&format!(
                "{} failed start(s) in a row; next start in {delay:?}",
                t.failures
            ));
        }
        inner.shared.notify_all();
    }
}

/// Kills workers that hang: not connected within the start timeout, or
/// not gone within the stop timeout.
fn enforce_deadlines(inner: &Inner, t: &mut Table) {
    for s in &mut t.slots {
        let (limit, what) = match s.phase {
            Phase::Starting => (inner.opts.start_timeout, "did not connect"),
            Phase::Stopping => (inner.opts.stop_timeout, "did not exit"),
            _ => continue,
        };
        if s.since.elapsed() >= limit && !s.killed {
            inner.say(&format!("worker {} {what} within {limit:?}: killed", s.pid));
            if s.phase == Phase::Starting {
                s.stop_reason = Some(format!(
                    "did not connect within the start timeout of {limit:?}"
                ));
            }
            let _ = s.child.kill();
            s.killed = true;
        }
    }
}

/// Workers that serve HTTP themselves: their requests are their calls
/// (for `status`, `--max-jobs` and `--idle-ttl`); one whose request runs
/// past the call timeout is killed (its client's connection closes), and
/// one past `--max-jobs` requests is told to stop: it answers what it
/// holds, closes its connections between requests and exits, while its
/// replacement starts.
fn watch_http(inner: &Inner, t: &mut Table) {
    let Some(h) = &inner.http_workers else {
        return;
    };
    let limit = inner.opts.call_timeout;
    for s in &mut t.slots {
        let Some(slot) = s.http else { continue };
        if s.phase != Phase::Idle {
            continue;
        }
        let (handed, answered) = h.application(slot);
        if handed != s.calls {
            s.calls = handed;
            s.since = Instant::now();
        }
        if handed > answered {
            match s.running {
                Some((seen, at)) if seen == handed => {
                    if at.elapsed() >= limit && !s.killed {
                        inner.say(&format!(
                            "worker {} did not answer an HTTP request within the call timeout of {limit:?}: killed",
                            s.pid
                        ));
                        let _ = s.child.kill();
                        s.killed = true;
                        s.stop("killed: an HTTP request ran past the call timeout");
                    }
                }
                _ => s.running = Some((handed, Instant::now())),
            }
        } else {
            s.running = None;
        }
        if let Some(why) = s.due(inner.opts.max_jobs) {
            s.stop(&why);
        }
    }
}

/// Workers on direct lines: a line given back makes its worker idle (or
/// stops it, when due for recycling); a worker due for recycling is asked
/// for its line back; one that does not give it back within the call
/// timeout hangs and is killed.
fn collect_lines(inner: &Inner, t: &mut Table) {
    let mut freed = false;
    // A retired worker keeps its line (and its client the speed of one)
    // until its replacement serves.
    let replaced = t.replaced();
    for s in &mut t.slots {
        if s.phase != Phase::Lined {
            continue;
        }
        let (Some(client), Some(hold)) = (s.client.as_mut(), s.line.as_ref()) else {
            continue;
        };
        if s.retire && replaced && s.revoked.is_none() {
            s.revoked = Some(Instant::now());
            if client.revoke_line(hold).is_err() {
                s.stop("died on a direct line");
                continue;
            }
        }
        match client.line_returned(hold, &mut Deadline::In(Duration::ZERO)) {
            Ok(Some(served)) => {
                inner.shared.count_line_calls(served);
                s.calls += served;
                s.line = None;
                s.revoked = None;
                // A retired one is stopped by the rounds' own rules, once
                // its replacement serves (`hand_over`).
                if let Some(why) = s.due(inner.opts.max_jobs) {
                    s.stop(&why);
                } else {
                    s.set(Phase::Idle);
                    freed = true;
                }
            }
            Ok(None) => {
                if s.revoked
                    .is_some_and(|at| at.elapsed() >= inner.opts.call_timeout)
                {
                    inner.say(&format!(
                        "worker {} kept its direct line past the call timeout of {:?}: killed",
                        s.pid, inner.opts.call_timeout
                    ));
                    let _ = s.child.kill();
                    s.stop("killed: kept a direct line past the call timeout");
                }
            }
            Err(e) => {
                inner.say(&format!("worker {} broke its direct line: {e}", s.pid));
                let _ = s.child.kill();
                s.stop("died on a direct line");
            }
        }
    }
    if freed && t.waiting > 0 {
        inner.shared.notify_all();
    }
}

/// Reads every running worker's memory; marks the ones over the soft
/// limit, kills the ones over the hard one.
fn measure(inner: &Inner, t: &mut Table) {
    for s in &mut t.slots {
        if matches!(s.phase, Phase::Idle | Phase::Busy | Phase::Lined) {
            s.rss = spawn::rss(s.pid);
            let hard = inner.opts.max_memory_hard;
            if hard > 0 && s.rss > hard && !s.killed {
                inner.say(&format!(
                    "worker {} uses {} bytes (--max-memory-hard {hard}): killed",
                    s.pid, s.rss
                ));
                let _ = s.child.kill();
                s.killed = true;
                s.retire_why = Some(Restart::MaxMemory);
                // The call it runs fails as a worker's death does.
                continue;
            }
            if inner.opts.max_memory > 0 && s.rss > inner.opts.max_memory && !s.retire {
                inner.say(&format!(
                    "worker {} uses {} bytes (--max-memory {}): recycled after its call",
                    s.pid, s.rss, inner.opts.max_memory
                ));
                s.retire = true;
                s.retire_why = Some(Restart::MaxMemory);
            }
        }
    }
}

/// Stops idle workers due for recycling (age, idleness, memory, reload); a
/// busy one is stopped when its call ends.
fn recycle(inner: &Inner, t: &mut Table) {
    for s in &mut t.slots {
        if !matches!(s.phase, Phase::Idle | Phase::Lined) {
            continue;
        }
        if let Some(ttl) = inner.opts.ttl {
            if s.started.elapsed() >= ttl && !s.retire {
                s.retire = true;
                s.retire_why = Some(Restart::Ttl);
                inner.say(&format!(
                    "worker {} is older than --ttl {ttl:?}: recycled",
                    s.pid
                ));
            }
        }
        if let Some(idle) = inner.opts.idle_ttl {
            if s.phase == Phase::Idle && s.since.elapsed() >= idle && !s.retire {
                s.retire = true;
                s.retire_why = Some(Restart::IdleTtl);
                inner.say(&format!(
                    "worker {} was idle for --idle-ttl {idle:?}: recycled",
                    s.pid
                ));
            }
        }
    }
}

/// Retired workers (recycled, or of a generation before a reload) that are
/// idle stop once their replacements serve (`Table::replaced`): until
/// then they go on taking calls (calls prefer the others), so the pool is
/// never short of a worker while one starts.
fn hand_over(t: &mut Table) {
    if !t.replaced() {
        return;
    }
    for s in &mut t.slots {
        if s.phase == Phase::Idle && s.retire {
            let why = s.retired_because();
            s.stop(&why);
        }
    }
}

/// Starts workers until the pool has its number of current ones (not
/// retiring, not stopping), unless a failed start asks to wait.
fn start_missing(inner: &Inner, t: &mut Table) {
    if t.backoff_until.is_some_and(|b| Instant::now() < b) {
        return;
    }
    let generation = t.generation;
    let (max_jobs, start) = (inner.opts.max_jobs, t.start_took);
    // Workers about to reach --max-jobs do not count: their successors
    // start early, to be ready when they stop.
    let current = |s: &Slot| {
        s.generation == generation
            && s.phase != Phase::Stopping
            && !s.retire
            && !s.expiring(max_jobs, start)
    };
    // A worker judged about to expire when its successor started may not be
    // any more (its rate fell when the load stopped): then the pool holds
    // more current workers than it runs, and nothing else would ever stop
    // them. The surplus retires, those with most calls first; they stop
    // once idle with the others serving (`hand_over`).
    let surplus = t
        .slots
        .iter()
        .filter(|s| current(s))
        .count()
        .saturating_sub(inner.opts.workers);
    if surplus > 0 {
        let mut older: Vec<(u64, usize)> = t
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| current(s) && s.phase != Phase::Starting)
            .map(|(i, s)| (s.calls, i))
            .collect();
        older.sort_unstable_by(|a, b| b.cmp(a));
        for (_, i) in older.into_iter().take(surplus) {
            let s = &mut t.slots[i];
            s.retire = true;
            s.retire_why = Some(Restart::MaxJobs);
            inner.say(&format!(
                "worker {} retires: its successor started for --max-jobs, and the pool has {} workers",
                s.pid, inner.opts.workers
            ));
        }
    }
    while t.slots.iter().filter(|s| current(s)).count() < inner.opts.workers {
        let taken: Vec<usize> = t
            .slots
            .iter()
            .filter(|s| current(s))
            .map(|s| s.place)
            .collect();
        let place = (0..inner.opts.workers)
            .find(|p| !taken.contains(p))
            .unwrap_or(0);
        let http = match &inner.http_workers {
            Some(h) => match h.take_slot() {
                Some(slot) => Some((h, slot)),
                // Every slot is a worker's still: start when one exits.
                None => return,
            },
            None => None,
        };
        let started = spawn::start(
            &inner.opts.command,
            &inner.port_address,
            inner.opts.idle_worker_wait,
            http,
            &inner.log,
        );
        if let (Err(_), Some((h, slot))) = (&started, http) {
            h.release(slot);
        }
        match started {
            Ok((child, copies)) => {
                inner.keep(copies);
                if t.restarts.len() < inner.opts.workers {
                    t.restarts.resize(inner.opts.workers, 0);
                }
                let pid = child.id();
                if inner.started_once(place) {
                    t.restarts[place] += 1;
                }
                let id = t.next_id;
                t.next_id += 1;
                let now = Instant::now();
                t.slots.push(Slot {
                    id,
                    place,
                    pid,
                    child,
                    phase: Phase::Starting,
                    since: now,
                    started: now,
                    client: None,
                    calls: 0,
                    rss: 0,
                    generation,
                    retire: false,
                    retire_why: None,
                    stop_reason: None,
                    killed: false,
                    line: None,
                    revoked: None,
                    lent: false,
                    http: http.map(|(_, slot)| slot),
                    running: None,
                });
                inner.say(&format!("worker {pid} started (place {place})"));
            }
            Err(e) => {
                t.failures += 1;
                let delay = BACKOFF_FIRST
                    .saturating_mul(1 << (t.failures - 1).min(16))
                    .min(BACKOFF_MAX);
                t.backoff_until = Some(Instant::now() + delay);
                let why = format!("cannot start {:?}: {e}", inner.opts.command[0]);
                inner.say(&format!("{why}; next try in {delay:?}"));
                t.last_failure = Some(why);
                return;
            }
        }
    }
}

/// Why a worker that exited is replaced (the restart metrics' reason).
fn restart_of(s: &Slot) -> Restart {
    let reason = s.stop_reason.as_deref().unwrap_or("");
    if reason.contains("--max-jobs") {
        Restart::MaxJobs
    } else if let Some(why) = s.retire_why {
        why
    } else if reason.contains("reload") || (s.retire && reason == "retired") {
        Restart::Reload
    } else if reason.starts_with("killed") || reason.contains("timeout") {
        Restart::Timeout
    } else {
        Restart::Crash
    }
}
