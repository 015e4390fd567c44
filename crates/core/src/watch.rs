//! Liveness and stop signals seen by a waiting side, and the adaptive spin.

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shmlink_sys::poll::ControlState;

use crate::error::Error;
use crate::options::WaitStrategy;
use crate::segment::{Direction, Segment};

/// How often a client waiting on a shared-memory ring checks that the server
/// is still alive (the futex wait is cut into slices this long).
pub(crate) const LIVENESS_SLICE: Duration = Duration::from_millis(10);

/// Flags the server's monitor sets for one session, before waking it.
#[derive(Debug, Default)]
pub(crate) struct SessionFlags {
    /// The client's control socket hung up.
    pub gone: AtomicBool,
    /// The server is shutting down: finish what is queued, then close.
    pub stop: AtomicBool,
    /// The client wrote to its control socket after the handshake (set
    /// before `gone`).
    pub wrote_control: AtomicBool,
    /// The server hands its sessions to a successor: stop at the next
    /// message boundary, leave what is queued in the ring.
    pub hand_over: AtomicBool,
}

/// A control socket shared between the watch and the link that sends
/// descriptors on it.
pub(crate) trait ControlSocket: AsFd + Send + Sync + std::fmt::Debug {}

impl<T: AsFd + Send + Sync + std::fmt::Debug> ControlSocket for T {}

/// What tells a waiting side that waiting is pointless.
#[derive(Debug)]
pub(crate) enum Watch {
    /// Client side: the control socket, polled between sleep slices.
    Socket(UnixStream),
    /// Client side of a session that agreed on descriptors (bit 4): the
    /// control socket also carries the server's descriptor records (the
    /// segments of its arena, bit 5), so only a hang-up counts, whatever is
    /// queued before it. Shared with the link's descriptor channel (one
    /// descriptor, no duplicate).
    FdSocket(Arc<dyn ControlSocket>),
    /// Server side: flags set by the monitor, which also wakes the futexes.
    Flags(Arc<SessionFlags>),
    /// A worker's end of a direct line: the line's socket pair (for the
    /// caller's hang-up), and the worker's session with its supervisor,
    /// whose messages (a revoke) end a wait between messages: the
    /// supervisor writes to that ring, then rings the line's bell.
    Line {
        sock: UnixStream,
        supervisor: Arc<Segment>,
    },
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Keep waiting.
    Alive,
    /// The peer is gone.
    Gone,
    /// The server is stopping.
    Stopping,
    /// The peer wrote to the control socket after the handshake, which
    /// carries nothing then: a protocol error.
    WroteControl,
    /// A message waits elsewhere (a worker's supervisor wrote while the
    /// worker waits on a line): a wait between messages ends, without error.
    Elsewhere,
}

impl Watch {
    /// Checks without blocking.
    pub(crate) fn check(&self) -> Verdict {
        match self {
            Watch::Socket(s) => match shmlink_sys::poll::control_state(s) {
                ControlState::Quiet => Verdict::Alive,
                ControlState::HungUp => Verdict::Gone,
                ControlState::Bytes => Verdict::WroteControl,
            },
            Watch::FdSocket(s) => {
                if shmlink_sys::poll::peer_gone(s.as_fd()) {
                    Verdict::Gone
                } else {
                    Verdict::Alive
                }
            }
            Watch::Line { sock, supervisor } => {
                let from = supervisor.ring_header(Direction::ServerToClient);
                if from.tail.load(Ordering::Acquire) != from.head.load(Ordering::Acquire) {
                    return Verdict::Elsewhere;
                }
                match shmlink_sys::poll::control_state(sock) {
                    ControlState::Quiet => Verdict::Alive,
                    ControlState::HungUp => Verdict::Gone,
                    ControlState::Bytes => Verdict::WroteControl,
                }
            }
            Watch::Flags(f) => {
                if f.wrote_control.load(Ordering::Acquire) {
                    Verdict::WroteControl
                } else if f.gone.load(Ordering::Acquire) {
                    Verdict::Gone
                } else if f.stop.load(Ordering::Acquire) || f.hand_over.load(Ordering::Acquire) {
                    Verdict::Stopping
                } else {
                    Verdict::Alive
                }
            }
        }
    }

    /// The control socket it polls, if any (a worker's HTTP loop watches
    /// it for the supervisor's hang-up).
    pub(crate) fn socket(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            Watch::Socket(s) => Some(s.as_fd()),
            Watch::FdSocket(s) => Some(s.as_fd()),
            Watch::Line { sock, .. } => Some(sock.as_fd()),
            Watch::Flags(_) => None,
        }
    }

    /// Whether a check is cheap enough (an atomic load) to do on every spin check.
    pub(crate) fn is_cheap(&self) -> bool {
        matches!(self, Watch::Flags(_))
    }

    /// The longest single futex sleep: clients poll their socket every
    /// [`LIVENESS_SLICE`]; servers are woken by the monitor and sleep until then.
    pub(crate) fn slice(&self) -> Option<Duration> {
        match self {
            Watch::Socket(_) | Watch::FdSocket(_) | Watch::Line { .. } => Some(LIVENESS_SLICE),
            Watch::Flags(_) => None,
        }
    }
}

/// The spin part of a wait strategy, adapting its bound to recent waits
/// and to how contended this side's CPU is.
#[derive(Debug, Clone)]
pub(crate) struct Spinner {
    strategy: WaitStrategy,
    current: Duration,
    /// Whether waits spin at all (every strategy but `sleep`, or `spin:0`).
    spins: bool,
    /// Until when waits sleep at once: a spin found this side's CPU
    /// contended (the adaptive strategy only).
    calm_until: Option<Instant>,
    /// How long waits for data have taken lately (a moving average, each
    /// wait weighing a quarter, capped at [`TYPICAL_CAP`]).
    typical: Duration,
    /// Whether the peer said, when it last waited, that it runs on another
    /// CPU than this side's now (docs/protocol.md, "CPU hints"; the default
    /// strategy only). Then a slow yield here is some other thread's doing,
    /// and spinning delays nothing the answer needs. A peer on this CPU, or
    /// one that said nothing, may be what a slow yield ran (handing the CPU
    /// over at every look in that case was measured slower: 10.5 against
    /// 7.7 µs for Go beside a hog, 7.5-10 against 6.3-7.3 µs for Python).
    peer_elsewhere: bool,
}

/// Longest spin of the default strategy when recent waits predict the
/// next one: waits that take about this long on a CPU nobody else wants
/// are cheaper spun than slept (a futex wake-up of an idle vCPU costs tens
/// of microseconds; a large message keeps its peer busy for hundreds).
const PREDICTED_SPIN_CAP: Duration = Duration::from_micros(400);
/// Waits longer than this count as this long in the average: one idle
/// gap must not keep the average high for long.
const TYPICAL_CAP: Duration = Duration::from_millis(4);

/// How long waits sleep at once after a spin found the CPU contended;
/// then one spin looks again (and pays one slow yield if it still is).
const CALM: Duration = Duration::from_millis(25);

/// A spinning side yields the CPU this often, so that on an oversubscribed
/// machine the thread it waits for (or the server's accept thread) can run.
const YIELD_EVERY: Duration = Duration::from_micros(10);
/// How often the default strategy's spin yields while the peer said it
/// runs on another CPU: a yield then lets only other work on this CPU
/// run, and when such work wants the CPU the yield hands it a whole
/// scheduler slice (a 4 ms tick here), where sleeping on the bell would
/// give the CPU up only until the peer rings. Not never: a peer that moved
/// here since it said otherwise gets the CPU within this.
const ELSEWHERE_YIELD_EVERY: Duration = Duration::from_millis(1);

/// Least spin of a wait in the middle of a streamed message.
const STREAM_SPIN: Duration = Duration::from_micros(20);
/// Longest spin of the default strategy in the middle of a streamed
/// message while this side's CPU is free: a peer stopped mid-message (a
/// debugger, SIGSTOP) costs this much CPU, then the wait sleeps.
const FREE_STREAM_SPIN: Duration = Duration::from_millis(20);
/// Least spin of the adaptive strategy after long waits.
const MIN_ADAPTIVE_SPIN: Duration = Duration::from_micros(2);

impl Spinner {
    /// A spinner for a strategy.
    pub(crate) fn new(strategy: WaitStrategy) -> Self {
        let current = match strategy {
            WaitStrategy::Spin(d) => d,
            _ => Duration::ZERO,
        };
        Spinner {
            strategy,
            current,
            spins: strategy != WaitStrategy::Sleep
                && strategy != WaitStrategy::Spin(Duration::ZERO),
            calm_until: None,
            typical: Duration::ZERO,
            peer_elsewhere: false,
        }
    }

    /// Whether it adapts (the default strategy, `spin`): spins end early,
    /// and stop for a while, when this side's CPU is contended, and last
    /// as long as recent waits predict (up to [`PREDICTED_SPIN_CAP`]) while
    /// it is not. `spin:MICROS` keeps its bound.
    pub(crate) fn adapts(&self) -> bool {
        self.strategy == WaitStrategy::default()
    }

    /// Whether a spin that finds this side's CPU contended (a slow yield)
    /// ends there: the default strategy's, outside a calm period (during
    /// one it waits as `sleep` does).
    pub(crate) fn probes(&self, now: Instant) -> bool {
        self.adapts() && !self.calm(now) && !self.peer_elsewhere
    }

    fn calm(&self, now: Instant) -> bool {
        self.calm_until.is_some_and(|c| now < c)
    }

    /// A spin found this side's CPU contended (a yield handed it to another
    /// thread): waits sleep at once for [`CALM`].
    pub(crate) fn contended(&mut self, now: Instant) {
        if self.adapts() {
            self.calm_until = now.checked_add(CALM);
            self.spins = false;
        }
    }

    /// Called on the slow path, before each wait, with whether the peer
    /// runs on another CPU (as far as it said): ends a calm period that is
    /// over, or any calm period when the peer is elsewhere (then this
    /// CPU's other threads are no reason to sleep: spinning delays nothing
    /// the answer needs, and a woken sleeper costs the peer a syscall and
    /// this side a wake-up).
    pub(crate) fn refresh(&mut self, now: Instant, peer_elsewhere: bool) {
        self.peer_elsewhere = peer_elsewhere && self.adapts();
        if !self.spins && self.adapts() && (self.peer_elsewhere || !self.calm(now)) {
            self.calm_until = None;
            self.spins = true;
        }
    }

    /// How often the next wait's spin yields the CPU: [`YIELD_EVERY`], or
    /// [`ELSEWHERE_YIELD_EVERY`] for the default strategy while the peer
    /// runs on another CPU (as far as it said, at [`Spinner::refresh`]).
    pub(crate) fn yield_every(&self) -> Duration {
        if self.peer_elsewhere {
            ELSEWHERE_YIELD_EVERY
        } else {
            YIELD_EVERY
        }
    }

    /// Spin budget of the next wait (`None` = forever).
    pub(crate) fn budget(&self) -> Option<Duration> {
        match self.strategy {
            WaitStrategy::Busy => None,
            _ => Some(self.current),
        }
    }

    /// Spin budget of a wait in the middle of a streamed message (`true`) or
    /// between messages: while a message streams through the ring in chunks
    /// the peer is known to be busy with it, so even the `sleep` strategy
    /// spins [`STREAM_SPIN`] for the next chunk (or for room) before
    /// sleeping: a wake-up per chunk would cost more.
    pub(crate) fn budget_for(&self, streaming: bool, now: Instant) -> Option<Duration> {
        if self.calm(now) {
            // As `sleep` does: only a streaming peer is worth a short spin.
            return Some(if streaming {
                STREAM_SPIN
            } else {
                Duration::ZERO
            });
        }
        let predicted = if self.adapts() && self.typical <= PREDICTED_SPIN_CAP {
            (self.typical * 2).min(PREDICTED_SPIN_CAP)
        } else {
            Duration::ZERO
        };
        match self.budget() {
            Some(b) if streaming => Some(b.max(STREAM_SPIN).max(predicted)),
            Some(b) => Some(b.max(predicted)),
            None => None,
        }
    }

    /// The longer spin of a wait in the middle of a streamed message
    /// ([`FREE_STREAM_SPIN`]; the default strategy outside a calm period),
    /// kept while this side's CPU is free, and whatever this CPU's
    /// contention while the peer is on another CPU (a slow yield then ends
    /// nothing: see [`Spinner::probes`]): the peer is busy with the
    /// message, so the wait ends when the peer runs again (a peer whose CPU
    /// is shared with other work is off it for a scheduler slice, ms), and
    /// a side that slept meanwhile costs the peer a wake-up syscall per
    /// chunk. `None`: no such spin.
    pub(crate) fn free_spin(&self, streaming: bool, now: Instant) -> Option<Duration> {
        (streaming && self.adapts() && !self.calm(now)).then_some(FREE_STREAM_SPIN)
    }

    /// Whether a wait spins before sleeping (the adaptive bound never
    /// shrinks to zero; false during a calm period, where waits sleep at
    /// once as `sleep`'s do).
    #[inline(always)]
    pub(crate) fn spins(&self) -> bool {
        self.spins
    }

    /// Records a wait that ended within its first few spins (well within
    /// any bound).
    pub(crate) fn caught_spinning(&mut self) {
        if let WaitStrategy::Spin(max) = self.strategy {
            self.current = max;
            self.typical = self.typical * 3 / 4;
        }
    }

    /// Records how long the last wait took: a wait that the full bound would
    /// have caught restores it; a longer one halves it.
    pub(crate) fn record(&mut self, waited: Duration) {
        if let WaitStrategy::Spin(max) = self.strategy {
            self.typical = (self.typical * 3 + waited.min(TYPICAL_CAP)) / 4;
            self.current = if waited <= max {
                max
            } else {
                (self.current / 2).max(MIN_ADAPTIVE_SPIN.min(max))
            };
        }
    }
}

/// Turns a verdict into the error a waiting side returns.
pub(crate) fn verdict_error(v: Verdict, address: &str) -> Option<Error> {
    match v {
        Verdict::Alive | Verdict::Elsewhere => None,
        Verdict::Gone => Some(Error::PeerGone {
            address: address.to_string(),
            detail: "control socket closed".into(),
        }),
        Verdict::Stopping => Some(Error::Closed {
            address: address.to_string(),
            reason: "server is shutting down".into(),
        }),
        Verdict::WroteControl => Some(Error::Protocol {
            peer: address.to_string(),
            detail: "bytes on the control socket after the handshake (it carries nothing then)"
                .into(),
        }),
    }
}

/// Time left until a deadline, or `None` for no deadline.
pub(crate) fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// The default spins through waits that recent ones predict short (up
    /// to 400 µs) and sleeps for a while once its CPU was found contended;
    /// `spin:MICROS` keeps its bound, `busy` spins whatever it costs.
    #[test]
    fn default_spin_predicts_and_calms() {
        let now = Instant::now();
        let mut s = Spinner::new(WaitStrategy::default());
        assert_eq!(s.budget_for(false, now), Some(50 * US));
        for _ in 0..16 {
            s.record(150 * US);
        }
        let b = s.budget_for(false, now).expect("bounded");
        assert!(b > 250 * US && b <= 300 * US, "{b:?}");
        // Long waits: back to the plain bound, halving.
        for _ in 0..16 {
            s.record(Duration::from_secs(1));
        }
        assert_eq!(s.budget_for(false, now), Some(MIN_ADAPTIVE_SPIN));
        assert_eq!(s.budget_for(true, now), Some(STREAM_SPIN));
        // Contended: waits behave as `sleep` for CALM, then probe again.
        assert!(s.probes(now));
        s.contended(now);
        assert!(!s.probes(now));
        assert!(!s.spins(), "no spin before the sleep while calm");
        s.refresh(now, false);
        assert!(!s.spins(), "still calm");
        assert_eq!(s.budget_for(false, now), Some(Duration::ZERO));
        assert_eq!(s.budget_for(true, now), Some(STREAM_SPIN));
        let later = now + CALM;
        assert!(s.probes(later));
        s.refresh(later, false);
        assert!(s.spins(), "spinning again after the calm");
        assert_eq!(s.budget_for(false, later), Some(MIN_ADAPTIVE_SPIN));

        // A peer on another CPU: a contended CPU here is some other
        // thread's doing; the spin neither ends at a slow yield nor calms.
        s.contended(later);
        s.refresh(later, true);
        assert!(s.spins(), "no calm while the peer is elsewhere");
        assert!(!s.probes(later), "slow yields do not end the spin");
        assert_eq!(
            s.yield_every(),
            ELSEWHERE_YIELD_EVERY,
            "a yield would hand this CPU to other work for a slice, helping no peer"
        );
        assert_eq!(s.budget_for(false, later), Some(MIN_ADAPTIVE_SPIN));
        assert_eq!(
            s.free_spin(true, later),
            Some(FREE_STREAM_SPIN),
            "mid-message, a peer elsewhere is worth spinning for (slow yields end nothing)"
        );
        s.refresh(later, false);
        assert!(s.probes(later), "probing again once the peer may be here");
        assert_eq!(s.yield_every(), YIELD_EVERY);

        let mut fixed = Spinner::new(WaitStrategy::Spin(30 * US));
        for _ in 0..16 {
            fixed.record(25 * US);
        }
        fixed.refresh(now, true);
        assert_eq!(fixed.yield_every(), YIELD_EVERY, "only the default adapts");
        fixed.contended(now);
        assert!(!fixed.probes(now));
        assert_eq!(fixed.budget_for(false, now), Some(30 * US));
        let mut busy = Spinner::new(WaitStrategy::Busy);
        busy.contended(now);
        assert_eq!(busy.budget_for(false, now), None);
    }
}
