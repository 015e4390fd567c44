//! The HTTP counters page (docs/protocol.md, "HTTP counters page"): a
//! sealed memfd a pool shares with the workers that serve HTTP themselves,
//! a 64-byte header, then one slot per worker of [`CELLS`] u64 counters
//! (native byte order, written with relaxed atomic adds by the HTTP crate).
//! Here: the header, the slot layout and what each counter holds.
//!
//! ```text
//! offset size field
//!  0     4    magic       "SLHC"
//!  4     4    version     u32 LE, PAGE_VERSION
//!  8     4    slots       u32 LE, 1..=MAX_SLOTS
//! 12     4    slot bytes  u32 LE, SLOT_BYTES
//! 16    48    reserved    0
//! ```

use crate::le::u32_at;

/// First four bytes of a counters page: `SLHC`.
pub const PAGE_MAGIC: [u8; 4] = *b"SLHC";
/// The page layout's version.
pub const PAGE_VERSION: u32 = 4;
/// Bytes of the page's header.
pub const PAGE_HEADER: usize = 64;
/// Counters in a slot.
pub const CELLS: usize = 64;
/// Bytes of one slot ([`CELLS`] counters of 8 bytes).
pub const SLOT_BYTES: usize = CELLS * 8;
/// Upper bounds of the request-duration buckets, in µs: a request that
/// took `t` counts in the first bucket whose bound is at least `t`, one
/// slower than the last in none (only in [`Field::Timed`]).
pub const DURATION_BOUNDS_US: [u64; 12] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000,
];
/// The statuses counted one by one (ascending); any other counts in its
/// class only ([`Field::Ok`], [`Field::ClientErrors`],
/// [`Field::ServerErrors`]).
pub const STATUS_CODES: [u16; 28] = [
    200, 201, 202, 204, 206, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405, 408, 409, 410,
    413, 416, 422, 429, 431, 500, 502, 503, 504,
];
/// Most slots a page may have.
pub const MAX_SLOTS: usize = 4096;

/// One counter of a slot: its index (its byte offset in the slot is 8
/// times that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Field {
    /// Connections open now.
    Open = 0,
    /// Connections accepted.
    Connections = 1,
    /// Connections closed at once (over the connection limit).
    Refused = 2,
    /// Requests answered (by the application or by the server itself).
    Requests = 3,
    /// Responses 1xx-3xx.
    Ok = 4,
    /// Responses 4xx.
    ClientErrors = 5,
    /// Responses 5xx.
    ServerErrors = 6,
    /// Responses 413.
    TooLarge = 7,
    /// Request body bytes received.
    BytesIn = 8,
    /// Response body bytes sent.
    BytesOut = 9,
    /// Requests handed to the application (a worker's PHP code).
    Handed = 10,
    /// Requests the application answered.
    Returned = 11,
    /// CPU time of the server's own path, in nanoseconds, over the sampled
    /// requests (a worker samples one request in a few).
    FrontNanos = 12,
    /// Requests sampled for [`Field::FrontNanos`].
    FrontSamples = 13,
    /// 1 while this server accepts connections, else 0: the servers of a
    /// page share the connections among those that accept
    /// (the HTTP crate's `Counters::share_view`).
    Accepting = 14,
    /// How much CPU this server's thread wanted over its last window
    /// (running, or runnable and waiting), in millionths of a CPU (see
    /// the HTTP crate's `engine/balance.rs`).
    Busy = 15,
    /// Requests answered in each duration bucket ([`DURATION_BOUNDS_US`]):
    /// this one and the 11 after it.
    Bucket0 = 16,
    /// Sum of the answered requests' durations, in µs.
    DurationMicros = 28,
    /// Requests whose duration was counted.
    Timed = 29,
    /// When [`Field::Busy`] was written (coarse ms of `CLOCK_MONOTONIC`).
    BusyAt = 30,
    /// 1 while this server sheds load (leaves new connections to the
    /// others), else 0.
    Shedding = 31,
    /// Responses with each status of [`STATUS_CODES`]: this one and the 27
    /// after it.
    Code0 = 32,
}

/// The header of a counters page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// Slots in the page, one per worker.
    pub slots: usize,
}

impl PageHeader {
    /// Bytes of a page with this many slots.
    pub fn page_len(&self) -> usize {
        PAGE_HEADER + self.slots * SLOT_BYTES
    }

    /// The header's first 16 bytes (the rest is zero).
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&PAGE_MAGIC);
        b[4..8].copy_from_slice(&PAGE_VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&u32::try_from(self.slots).unwrap_or(u32::MAX).to_le_bytes());
        b[12..16].copy_from_slice(&(SLOT_BYTES as u32).to_le_bytes());
        b
    }

    /// Reads the header of a page of `page_len` bytes from its first
    /// bytes `b`: this version's magic, version and slot size, 1 to
    /// [`MAX_SLOTS`] slots that fit in the page.
    ///
    /// # Errors
    /// What is wrong, as a phrase ("has header ..., not version 4 ...").
    pub fn decode(b: &[u8], page_len: usize) -> Result<PageHeader, String> {
        if b.len() < 16 || page_len < PAGE_HEADER {
            return Err(format!("has {page_len} bytes, fewer than its header"));
        }
        let word = |i: usize| u32_at(b, i);
        if b[..4] != PAGE_MAGIC || word(4) != PAGE_VERSION || word(12) as usize != SLOT_BYTES {
            return Err(format!(
                "has header {:?}, not version {PAGE_VERSION} of {:?} with {SLOT_BYTES}-byte slots",
                &b[..16],
                PAGE_MAGIC
            ));
        }
        let slots = word(8) as usize;
        let fits = PAGE_HEADER
            .checked_add(slots.saturating_mul(SLOT_BYTES))
            .is_some_and(|end| end <= page_len);
        if slots == 0 || slots > MAX_SLOTS || !fits {
            return Err(format!("has {slots} slots in {page_len} bytes"));
        }
        Ok(PageHeader { slots })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_bad_ones_are_named() {
        let h = PageHeader { slots: 3 };
        assert_eq!(PageHeader::decode(&h.encode(), h.page_len()), Ok(h));
        let short = PageHeader::decode(&h.encode(), h.page_len() - 1).expect_err("short page");
        assert!(short.contains("3 slots in"), "{short}");
        let mut old = h.encode();
        old[4] = 3;
        let e = PageHeader::decode(&old, h.page_len()).expect_err("version 3");
        assert!(e.contains("not version 4"), "{e}");
        assert!(PageHeader::decode(&PageHeader { slots: 0 }.encode(), 4096).is_err());
    }
}
