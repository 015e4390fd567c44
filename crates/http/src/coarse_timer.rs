//! hyper's timer (the header-read timeout, which ends slow-loris
//! connections) on the coarse monotonic clock, costing no system call per
//! request.
//!
//! hyper re-arms the header timeout for every request head. With tokio's
//! own timer each re-arm reads the clock and, whenever the timer wheel's
//! next wake-up moves, wakes the runtime's driver through its eventfd: a
//! `write(2)` and an extra event per request, a tenth of what a small
//! request costs a worker. Here a sleep is a deadline in a map; one task
//! sleeps on tokio's timer until the earliest deadline, wakes the sleeps
//! that are due, and waits again. Deadlines only grow (one timeout per
//! server), so that task wakes about once per timeout, not per request,
//! and not at all while no connection is open. Precision: the coarse
//! clock's (a few milliseconds), ample for timeouts of seconds.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};
use tokio::sync::Notify;

/// A sleep's place in the map: its deadline (ms on the coarse clock) and a
/// sequence number that makes it unique.
type Key = (u64, u64);

/// The timer handed to hyper.
#[derive(Clone)]
pub(crate) struct CoarseTimer(Arc<Shared>);

struct Shared {
    /// An instant and the coarse clock's reading at it: `now` is derived
    /// from them (the coarse clock is `CLOCK_MONOTONIC`'s, as `Instant`).
    base: Instant,
    base_ms: u64,
    state: Mutex<State>,
    /// Rung when a deadline earlier than the one awaited is added.
    earlier: Notify,
}

#[derive(Default)]
struct State {
    sleeps: BTreeMap<Key, Waker>,
    next_seq: u64,
    /// The deadline the sweeping task sleeps until.
    awaited: Option<u64>,
}

impl CoarseTimer {
    /// A timer; [`CoarseTimer::sweep`] must run on the runtime that serves
    /// the connections using it.
    pub(crate) fn new() -> CoarseTimer {
        CoarseTimer(Arc::new(Shared {
            base: Instant::now(),
            base_ms: shmlink_sys::clock::coarse_ms(),
            state: Mutex::new(State::default()),
            earlier: Notify::new(),
        }))
    }

    /// Wakes due sleeps, forever (abort the task to stop it).
    pub(crate) async fn sweep(self) {
        loop {
            let notified = self.0.earlier.notified();
            let next = {
                let mut st = self.0.lock();
                let now = shmlink_sys::clock::coarse_ms();
                let due: Vec<Key> = st
                    .sleeps
                    .range(..=(now, u64::MAX))
                    .map(|(k, _)| *k)
                    .collect();
                for k in due {
                    if let Some(w) = st.sleeps.remove(&k) {
                        w.wake();
                    }
                }
                st.awaited = st.sleeps.keys().next().map(|k| k.0);
                st.awaited
            };
            match next {
                Some(ms) => {
                    let at = self.0.instant(ms);
                    tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => {}
                        _ = notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ms_of(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.base).as_millis();
        self.base_ms + u64::try_from(since).unwrap_or(u64::MAX / 2)
    }

    fn instant(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms.saturating_sub(self.base_ms))
    }
}

impl Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(CoarseSleep {
            timer: Arc::clone(&self.0),
            deadline: self.0.ms_of(deadline),
            key: None,
        })
    }

    fn now(&self) -> Instant {
        self.0.instant(shmlink_sys::clock::coarse_ms())
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<CoarseSleep>() {
            Some(s) => {
                let s = s.get_mut();
                s.forget();
                s.deadline = self.0.ms_of(new_deadline);
            }
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A sleep until a deadline on the coarse clock.
struct CoarseSleep {
    timer: Arc<Shared>,
    deadline: u64,
    /// Where its waker is in the map, once polled.
    key: Option<Key>,
}

impl CoarseSleep {
    /// Takes its waker out of the map.
    fn forget(&mut self) {
        if let Some(k) = self.key.take() {
            self.timer.lock().sleeps.remove(&k);
        }
    }
}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if shmlink_sys::clock::coarse_ms() >= this.deadline {
            this.forget();
            return Poll::Ready(());
        }
        let mut st = this.timer.lock();
        if let Some(w) = this.key.and_then(|k| st.sleeps.get_mut(&k)) {
            // Still in the map: keep the newest waker.
            if !w.will_wake(cx.waker()) {
                w.clone_from(cx.waker());
            }
            return Poll::Pending;
        }
        let key = (this.deadline, st.next_seq);
        st.next_seq += 1;
        st.sleeps.insert(key, cx.waker().clone());
        this.key = Some(key);
        let earlier = st.awaited.is_none_or(|a| this.deadline < a);
        drop(st);
        if earlier {
            this.timer.earlier.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for CoarseSleep {
    fn drop(&mut self) {
        self.forget();
    }
}

impl Sleep for CoarseSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_end_after_their_deadline_and_not_before() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let timer = CoarseTimer::new();
            let sweeping = tokio::spawn(timer.clone().sweep());
            let started = Instant::now();
            let long = timer.sleep(Duration::from_millis(300));
            let short = timer.sleep(Duration::from_millis(50));
            short.await;
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(40), "{waited:?}");
            // A reset moves the deadline; the old one no longer fires it.
            let mut reset = timer.sleep(Duration::from_millis(20));
            timer.reset(&mut reset, timer.now() + Duration::from_millis(120));
            let at = Instant::now();
            reset.await;
            assert!(
                at.elapsed() >= Duration::from_millis(100),
                "{:?}",
                at.elapsed()
            );
            long.await;
            assert!(started.elapsed() >= Duration::from_millis(290));
            sweeping.abort();
        });
    }
}
