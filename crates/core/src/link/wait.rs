//! The one wait loop of the `shm:` links, for every wait strategy: a side
//! waiting for data in its incoming ring and a side waiting for room in its
//! outgoing ring run the same code, told apart by a [`Waiter`].
//!
//! A wait spins within the strategy's budget (`busy`: forever; `sleep`:
//! not at all; `spin`: the adaptive bound), checking the clock, the
//! deadline and the peer's liveness every [`SPINS_PER_CHECK`] turns and
//! yielding the CPU as often as the terms say (every 10 µs, or every 1 ms
//! while the peer runs on another CPU: `Spinner::yield_every`); then it
//! sleeps on the ring's doorbell: announce sleep, re-check, `FUTEX_WAIT`,
//! in slices no longer than the watch or the waiter asks for.

use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use shmlink_sys::futex;

use crate::error::{Error, Result};
use crate::watch::{remaining, verdict_error, Verdict, Watch};

/// Spin turns between clock reads.
pub(crate) const SPINS_PER_CHECK: u32 = 64;
/// A spinning side checks its peer's liveness this often (unless the check
/// is cheap enough to make at every clock read).
const CHECK_EVERY: Duration = Duration::from_millis(1);
/// A yield that takes longer than this gave the CPU to another thread that
/// wanted it: this side's CPU is contended, and spinning on it only delays
/// that thread and this side's own wake-up (the scheduler favours a thread
/// that slept over one that spun). Tens of microseconds: an uncontended
/// `sched_yield` returns in about one; a contended one hands over a
/// scheduler slice (milliseconds).
const YIELD_SLOW: Duration = Duration::from_micros(50);

/// How a wait went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// It ended while spinning.
    Spinning,
    /// It ended asleep (or after the spin bound).
    Sleeping,
    /// Spinning found this side's CPU contended: it slept instead.
    Contended,
}

/// How the spin phase ended.
enum Spun {
    /// The wait is over.
    Done,
    /// The bound passed.
    Over,
    /// A yield took long: the CPU is contended.
    Contended,
}

/// What one wait waits for.
pub(crate) trait Waiter {
    /// Whether the wait is over (data to read, or room to write).
    fn ready(&mut self) -> Result<bool>;
    /// Announces sleep and re-checks: `Some(seen)` to sleep on the bell
    /// while it holds `seen`, `None` when the wait is over. Either way
    /// [`Waiter::finish_sleep`] follows.
    fn prepare_sleep(&mut self) -> Result<Option<u32>>;
    /// Withdraws the sleep announcement.
    fn finish_sleep(&self);
    /// The futex word this side sleeps on.
    fn bell(&self) -> &AtomicU32;
    /// Work done while waiting (a sender drains its incoming ring); returns
    /// whether it consumed anything. The default does nothing.
    fn meanwhile(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// The longest single sleep this waiter allows (`None`: no limit of its
    /// own; a draining sender sleeps in slices, since its peer may fill the
    /// incoming ring while it sleeps on the outgoing one).
    fn sleep_slice(&self) -> Option<Duration> {
        None
    }
}

/// The terms of one wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terms<'a> {
    /// How long to spin before sleeping: `None` forever.
    pub(crate) spin: Option<Duration>,
    /// A longer spin, for a peer mid-message: the answer only waits for the
    /// peer to run again. Kept while this side's CPU is free (every yield
    /// fast), and while a slow yield ends nothing (`yield_ends_it` false:
    /// the peer on another CPU), so spinning costs the peer nothing.
    pub(crate) spin_if_free: Option<Duration>,
    /// When to give up.
    pub(crate) deadline: Option<Instant>,
    /// When the wait began.
    pub(crate) started: Instant,
    /// Whether the server stopping ends the wait (not in the middle of a
    /// message, which is finished first).
    pub(crate) stop_ends_it: bool,
    /// What is waited for, for the timeout error.
    pub(crate) op: &'static str,
    /// The peer's liveness and the server's stop.
    pub(crate) watch: &'a Watch,
    /// The peer, for errors.
    pub(crate) address: &'a str,
    /// Whether a slow yield (a contended CPU) ends the spin (the adaptive
    /// strategy; `busy` spins whatever it costs).
    pub(crate) yield_ends_it: bool,
    /// How often the spin yields the CPU ([`crate::watch::Spinner::yield_every`]).
    pub(crate) yield_every: Duration,
}

impl Terms<'_> {
    /// `Ok(true)`: the wait ends here without error (a message waits
    /// elsewhere, between messages).
    fn check_watch(&self) -> Result<bool> {
        match self.watch.check() {
            Verdict::Stopping | Verdict::Elsewhere if !self.stop_ends_it => Ok(false),
            Verdict::Elsewhere => Ok(true),
            v => verdict_error(v, self.address).map_or(Ok(false), Err),
        }
    }

    #[cold]
    fn timeout(&self) -> Error {
        Error::Timeout {
            address: self.address.to_string(),
            op: self.op,
            after: self.started.elapsed(),
        }
    }
}

/// The first turns of a wait, without reading the clock (a clock read costs
/// as much as a hand-off, and most hand-offs complete within these turns).
/// Whether the wait is already over.
#[inline(always)]
pub(crate) fn spin_briefly(w: &mut impl Waiter) -> Result<bool> {
    for _ in 0..SPINS_PER_CHECK {
        std::hint::spin_loop();
        if w.ready()? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Waits until `w` is ready, the deadline passes, the peer dies or (with
/// `stop_ends_it`) the server stops.
///
/// # Errors
/// [`Error::Timeout`], [`Error::PeerGone`], [`Error::Closed`] (stopping), or
/// what the waiter's checks return (a corrupted ring).
#[cold]
pub(crate) fn wait(w: &mut impl Waiter, t: &Terms<'_>) -> Result<Waited> {
    let how = if t.spin == Some(Duration::ZERO) {
        Waited::Sleeping
    } else {
        match spin(w, t)? {
            Spun::Done => return Ok(Waited::Spinning),
            Spun::Over => Waited::Sleeping,
            Spun::Contended => Waited::Contended,
        }
    };
    sleep(w, t).map(|()| how)
}

/// The spin phase.
fn spin(w: &mut impl Waiter, t: &Terms<'_>) -> Result<Spun> {
    let cheap_watch = t.watch.is_cheap();
    let mut next_check = t.started + CHECK_EVERY;
    let mut next_yield = t.started + t.yield_every;
    let bound = match (t.spin, t.spin_if_free) {
        (Some(b), Some(free)) => Some(b.max(free)),
        (b, _) => b,
    };
    loop {
        if spin_briefly(w)? {
            return Ok(Spun::Done);
        }
        let now = Instant::now();
        if t.deadline.is_some_and(|d| now >= d) {
            return Err(t.timeout());
        }
        if bound.is_some_and(|b| now - t.started >= b) {
            return Ok(Spun::Over);
        }
        if cheap_watch || now >= next_check {
            next_check = now + CHECK_EVERY;
            if t.check_watch()? {
                return Ok(Spun::Done);
            }
        }
        if now >= next_yield {
            std::thread::yield_now();
            let back = Instant::now();
            // A slow yield ends an adaptive spin that probes; where it does
            // not (the peer on another CPU, `busy`, a fixed bound, a calm
            // period), it changes nothing.
            if back - now >= YIELD_SLOW && t.yield_ends_it {
                return Ok(Spun::Contended);
            }
            next_yield = back + t.yield_every;
        }
        w.meanwhile()?;
    }
}

/// The sleep phase, on the doorbell.
fn sleep(w: &mut impl Waiter, t: &Terms<'_>) -> Result<()> {
    loop {
        if w.meanwhile()? {
            if w.ready()? {
                return Ok(());
            }
            continue;
        }
        let Some(seen) = w.prepare_sleep()? else {
            w.finish_sleep();
            return Ok(());
        };
        // Checked after reading the bell: a monitor that flags us and rings
        // after that read makes the wait below return at once.
        match t.check_watch() {
            Ok(false) => {}
            Ok(true) => {
                w.finish_sleep();
                return Ok(());
            }
            Err(e) => {
                w.finish_sleep();
                return Err(e);
            }
        }
        let slice = min_opt(
            min_opt(remaining(t.deadline), t.watch.slice()),
            w.sleep_slice(),
        );
        if slice == Some(Duration::ZERO) {
            w.finish_sleep();
            return Err(t.timeout());
        }
        futex::wait(w.bell(), seen, slice);
        w.finish_sleep();
        if w.ready()? {
            return Ok(());
        }
    }
}

fn min_opt(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
