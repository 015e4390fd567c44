//! The send timeout: a client that takes no byte of a response being
//! written (a body, a file the server sends) for [`Limits::send_timeout`]
//! loses its connection; the time starts again at each byte it takes. One
//! timer per connection with output pending, armed lazily: progress only
//! moves the connection's `taken_at`, and a timer that falls due early is
//! put back at `taken_at` plus the timeout. A streamed answer waits with
//! the same patience (`stream.rs`).
//!
//! The header timeout's timers leave a connection with output pending to
//! this one (a large response read slowly is not an idle keep-alive
//! connection); its next head's time starts once its output is all out.
//!
//! [`Limits::send_timeout`]: super::Limits::send_timeout

use std::cmp::Reverse;

use super::Engine;

impl Engine {
    /// After a write on `slot`'s connection (`progressed`: the client took
    /// bytes): while output is pending, a timer runs.
    pub(super) fn note_sending(&mut self, slot: usize, progressed: bool) {
        let at = self.now + self.send_timeout_ms();
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if c.flushed() {
            return;
        }
        if progressed || !c.send_armed {
            c.taken_at = self.now;
        }
        if !c.send_armed {
            c.send_armed = true;
            self.sends.push(Reverse((at, slot, c.serial)));
        }
    }

    /// Closes the connections whose client took nothing for the send
    /// timeout; puts back the timers of those that took some since.
    pub(super) fn expire_sends(&mut self) {
        let timeout = self.send_timeout_ms();
        while let Some(&Reverse((at, slot, serial))) = self.sends.peek() {
            if at > self.now {
                break;
            }
            self.sends.pop();
            let Some(c) = self
                .conns
                .get_mut(slot)
                .and_then(Option::as_mut)
                .filter(|c| c.serial == serial)
            else {
                continue;
            };
            c.send_armed = false;
            if c.flushed() {
                continue;
            }
            let due = c.taken_at + timeout;
            if due <= self.now {
                self.close(slot);
            } else {
                c.send_armed = true;
                self.sends.push(Reverse((due, slot, serial)));
            }
        }
    }

    /// When the first send timer falls due (coarse ms).
    pub(super) fn next_send_due(&self) -> Option<u64> {
        self.sends.peek().map(|&Reverse((at, _, _))| at)
    }

    fn send_timeout_ms(&self) -> u64 {
        u64::try_from(self.limits.send_timeout.as_millis()).unwrap_or(u64::MAX / 2)
    }
}
