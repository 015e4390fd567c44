//! Deadlines resolved lazily: an operation that never waits never reads the
//! clock (a clock read costs about as much as a whole ring hand-off).

use std::time::{Duration, Instant};

/// When a wait must give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Wait as long as needed (liveness checks still apply).
    Never,
    /// This long after the first wait begins.
    In(Duration),
    /// At this instant.
    At(Instant),
}

impl Deadline {
    /// The instant, fixing it now if it was relative.
    pub fn at(&mut self) -> Option<Instant> {
        self.at_from(Instant::now())
    }

    /// The instant, fixing a relative deadline from `now` (a clock reading
    /// the caller already has).
    pub fn at_from(&mut self, now: Instant) -> Option<Instant> {
        match *self {
            Deadline::Never => None,
            Deadline::In(d) => {
                let at = now.checked_add(d);
                if let Some(at) = at {
                    *self = Deadline::At(at);
                }
                at
            }
            Deadline::At(at) => Some(at),
        }
    }
}
