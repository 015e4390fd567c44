//! The caller's end of a direct line, and when a caller asks for one
//! (`crate::client` makes its calls over it).

use std::time::Duration;

use crate::session::Session;

/// Calls made through the server before the first ask.
const FIRST_ASK: u32 = 16;
/// The longest run of calls between asks after refusals.
const MOST_CALLS_BETWEEN_ASKS: u32 = 1 << 12;

/// The caller's end of a line.
#[derive(Debug)]
pub(crate) struct CallerLine {
    pub(crate) id: u64,
    pub(crate) session: Session,
    /// The supervisor's call timeout, when it has one.
    pub(crate) call_timeout: Option<Duration>,
}

/// When the next ask is due: after `every` calls through the server,
/// doubled by each refusal or lost line, back to [`FIRST_ASK`] on a grant.
#[derive(Debug)]
pub(crate) struct Asking {
    calls: u32,
    every: u32,
}

impl Default for Asking {
    fn default() -> Self {
        Asking {
            calls: 0,
            every: FIRST_ASK,
        }
    }
}

impl Asking {
    pub(crate) fn due(&mut self) -> bool {
        self.calls += 1;
        if self.calls < self.every {
            return false;
        }
        self.calls = 0;
        true
    }

    /// The next call asks (a line ended because its worker left, not
    /// because lines fail here); refusals then back off from there.
    pub(crate) fn ask_next(&mut self) {
        self.calls = 0;
        self.every = 1;
    }

    pub(crate) fn back_off(&mut self) {
        self.every = (self.every * 2).min(MOST_CALLS_BETWEEN_ASKS);
    }
}
