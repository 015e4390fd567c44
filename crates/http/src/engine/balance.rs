//! Sharing a page's connections by load (workers mode: every worker
//! accepts from the same listening sockets).
//!
//! Connections are packed, then spilled by load. New connections go to the
//! first worker (by slot) that takes them: one that does not shed and is
//! not held in a long request; the others leave a new connection in the
//! queue for it, and take it themselves 2 ms later if it is still there.
//! So a client opening 16 at once finds them on one worker, as under an
//! event-driven server whose first process wakes first. Whether to spread
//! them depends on the machine, not on counts: a worker that is saturated
//! (its thread busy for most of a window) while another has room and the
//! machine has a CPU to spare *sheds*: new connections go past it, and
//! what it holds above an even share is asked to move: their next
//! response says `Connection: close` (nothing of the connection is lost;
//! the client opens a new one, which the next worker takes). Where the
//! machine has no CPU to spare (a small machine whose client runs beside
//! the server, say), connections stay where they are: a second busy worker
//! would only take CPU time from the first.

use std::time::Instant;

use crate::counters::{Counters, ShareView};

/// How often a worker measures itself and decides (ms).
pub(super) const WINDOW_MS: u64 = 100;
/// Wanting at least this much of a CPU over a window (running, or
/// runnable and waiting for a CPU): saturated (millionths).
const SATURATED_PPM: u64 = 900_000;
/// Another worker has room when it wants at least this much less
/// (millionths).
const ROOM_PPM: u64 = 250_000;
/// The machine must have sat idle at least this much of a CPU over the
/// window (thousandths) for another worker to have a CPU to run on.
const SPARE_CPU_MILLI: u64 = 500;

/// What a window decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Decision {
    /// Leave new connections to the others for a moment.
    pub(super) shed: bool,
    /// Connections of this worker to close after their next response.
    pub(super) nudge: usize,
}

/// The rule: shed while saturated with room elsewhere (a worker that wants
/// [`ROOM_PPM`] less, the machine [`SPARE_CPU_MILLI`] idle), and move what
/// this worker holds above an even share.
pub(super) fn decide(busy_ppm: u64, view: &ShareView, spare_cpu_milli: Option<u64>) -> Decision {
    let room = busy_ppm >= SATURATED_PPM
        && view
            .idlest_peer
            .is_some_and(|b| b.saturating_add(ROOM_PPM) <= busy_ppm)
        && spare_cpu_milli.is_some_and(|m| m >= SPARE_CPU_MILLI);
    if !room {
        return Decision::default();
    }
    let even = view.total.div_ceil(view.accepting.max(1));
    let over = view.mine.saturating_sub(even);
    Decision {
        shed: true,
        nudge: usize::try_from(over).unwrap_or(usize::MAX),
    }
}

/// One worker's measurements, window after window.
#[derive(Debug)]
pub(super) struct Balance {
    /// When the window began (coarse ms, and precisely).
    since_ms: u64,
    since: Instant,
    /// The thread's time running and waiting to run then (ns).
    cpu_ns: u64,
    /// The machine's (idle, all) ticks at the last window's end, while
    /// saturated.
    machine: Option<(u64, u64)>,
    shedding: bool,
    /// New connections are left to a worker of a lower slot.
    defer: bool,
}

impl Balance {
    pub(super) fn new(now_ms: u64) -> Balance {
        Balance {
            since_ms: now_ms,
            since: Instant::now(),
            cpu_ns: wanted_ns(),
            machine: None,
            shedding: false,
            defer: false,
        }
    }

    /// Whether new connections are left to the other workers (for a
    /// moment): this one sheds, or one of a lower slot takes them.
    pub(super) fn defers(&self) -> bool {
        self.defer
    }

    /// At the end of a window (nothing before): measures this thread,
    /// publishes it in the page and decides; returns how many connections
    /// to ask to move. Alone (no page), nothing is measured.
    pub(super) fn tick(&mut self, now_ms: u64, counters: &Counters) -> usize {
        if now_ms < self.since_ms + WINDOW_MS || !counters.in_page() {
            return 0;
        }
        let cpu = wanted_ns();
        let wall = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let busy = cpu
            .saturating_sub(self.cpu_ns)
            .saturating_mul(1_000_000)
            .checked_div(wall)
            .unwrap_or(0)
            .min(1_000_000);
        (self.since_ms, self.since, self.cpu_ns) = (now_ms, Instant::now(), cpu);
        counters.publish_busy(busy, now_ms);
        let Some(view) = counters.share_view(now_ms) else {
            return 0;
        };
        // The machine is read only while saturated with a worker to go to.
        let spare = if busy >= SATURATED_PPM && view.idlest_peer.is_some() {
            self.spare_cpu()
        } else {
            self.machine = None;
            None
        };
        let d = decide(busy, &view, spare);
        if d.shed != self.shedding {
            counters.publish_shedding(d.shed);
        }
        self.shedding = d.shed;
        self.defer = d.shed || view.taker_before;
        d.nudge
    }

    /// How much of a CPU the machine left idle since the last reading
    /// (thousandths); `None` at the first reading.
    fn spare_cpu(&mut self) -> Option<u64> {
        let (idle, all, cpus) = shmlink_sys::process::machine_cpu_ticks().ok()?;
        let before = self.machine.replace((idle, all))?;
        let all = all.checked_sub(before.1).filter(|&d| d > 0)?;
        let idle = idle.saturating_sub(before.0);
        Some(idle.saturating_mul(1000 * cpus as u64) / all)
    }
}

/// The CPU time this thread wanted so far: running, or runnable and
/// waiting (ns); its running time alone where schedstats are not kept.
fn wanted_ns() -> u64 {
    shmlink_sys::process::thread_run_and_wait_ns()
        .map_or_else(|_| shmlink_sys::clock::thread_cpu_ns(), |(r, w)| r + w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(mine: u64, total: u64, accepting: u64, idlest_peer: Option<u64>) -> ShareView {
        ShareView {
            mine,
            total,
            accepting,
            idlest_peer,
            taker_before: false,
        }
    }

    #[test]
    fn a_saturated_worker_moves_its_excess_where_a_cpu_is_spare() {
        let d = decide(990_000, &view(16, 16, 2, Some(0)), Some(900));
        assert_eq!(
            d,
            Decision {
                shed: true,
                nudge: 8
            }
        );
        // 12 of 16 held: 4 over the even 8 move.
        assert_eq!(
            decide(990_000, &view(12, 16, 2, Some(700_000)), Some(600)).nudge,
            4
        );
        // At its share: sheds new ones, moves none.
        assert_eq!(
            decide(990_000, &view(8, 16, 2, Some(0)), Some(900)),
            Decision {
                shed: true,
                nudge: 0
            }
        );
    }

    #[test]
    fn connections_stay_where_spreading_cannot_help() {
        let stay = Decision::default();
        // The machine has no CPU to spare (the client beside it).
        assert_eq!(decide(930_000, &view(16, 16, 2, Some(0)), Some(300)), stay);
        // Not known yet (the first reading).
        assert_eq!(decide(930_000, &view(16, 16, 2, Some(0)), None), stay);
        // Not saturated.
        assert_eq!(decide(850_000, &view(16, 16, 2, Some(0)), Some(1500)), stay);
        // The other worker wants nearly as much.
        assert_eq!(
            decide(990_000, &view(16, 20, 2, Some(800_000)), Some(900)),
            stay
        );
        // Alone.
        assert_eq!(decide(990_000, &view(16, 16, 1, None), Some(900)), stay);
    }

    #[test]
    fn alone_nothing_is_measured() {
        let c = Counters::default();
        let mut b = Balance::new(0);
        assert_eq!(b.tick(WINDOW_MS - 1, &c), 0);
        // Alone: nothing measured, nothing decided.
        assert_eq!(b.tick(WINDOW_MS, &c), 0);
        assert!(!b.defers());
    }
}
