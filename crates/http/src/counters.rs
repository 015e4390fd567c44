//! An HTTP server's counters: in this process's memory (the front), or in a
//! slot of the counters page a pool shares with the workers that serve HTTP
//! themselves (docs/protocol.md, "HTTP counters page"): each worker writes
//! only its own slot, with relaxed atomic adds; the pool reads every slot
//! and sums them. A value read from a worker's slot is a number to show,
//! never an index or a length, so a worker that writes nonsense there only
//! spoils its own figures.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmlink_sys::Mapping;

use shmlink_wire::counters::PageHeader;
pub(crate) use shmlink_wire::counters::{Field, CELLS, MAX_SLOTS, PAGE_HEADER, SLOT_BYTES};
pub use shmlink_wire::counters::{DURATION_BOUNDS_US, STATUS_CODES};

use crate::error::HttpError;
use crate::stats::{Durations, HttpStats};

/// A [`Field::Busy`] reading older than this (ms) is not current.
const STALE_MS: u64 = 300;
/// A page's connections as one of its servers sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareView {
    /// Connections this server holds open.
    pub(crate) mine: u64,
    /// Connections open in every server of the page.
    pub(crate) total: u64,
    /// Servers that accept connections (this one among them).
    pub(crate) accepting: u64,
    /// What the least busy other accepting server wanted (millionths of a
    /// CPU, [`Field::Busy`]); `None` when there is no other.
    pub(crate) idlest_peer: Option<u64>,
    /// An accepting server of a lower slot takes new connections before
    /// this one: it does not shed, and is not held in one request.
    pub(crate) taker_before: bool,
}

/// Counters in use: [`Field`] cells in local memory or in a page's slot.
#[derive(Debug)]
pub(crate) struct Counters(Cells);

#[derive(Debug)]
enum Cells {
    Local(Box<[AtomicU64; CELLS]>),
    Page {
        map: Arc<Mapping>,
        base: usize,
        slots: usize,
    },
}

impl Default for Counters {
    fn default() -> Self {
        Counters(Cells::Local(Box::new(std::array::from_fn(|_| {
            AtomicU64::new(0)
        }))))
    }
}

impl Counters {
    fn cell(&self, f: Field) -> &AtomicU64 {
        self.cell_at(f as usize)
    }

    /// Counter `i` (< [`CELLS`]) of this server's cells.
    fn cell_at(&self, i: usize) -> &AtomicU64 {
        match &self.0 {
            Cells::Local(cells) => &cells[i],
            Cells::Page { map, base, .. } => map.atomic_u64(base + 8 * i),
        }
    }

    /// Connections open in every server counting here: this one's, or,
    /// in a page, every slot's (the pool zeroes a slot's count when its
    /// worker exits).
    pub(crate) fn open_everywhere(&self) -> u64 {
        match &self.0 {
            Cells::Local(cells) => cells[Field::Open as usize].load(Ordering::Relaxed),
            Cells::Page { map, slots, .. } => (0..*slots)
                .map(|i| {
                    let at = PAGE_HEADER + i * SLOT_BYTES + 8 * Field::Open as usize;
                    map.atomic_u64(at).load(Ordering::Relaxed)
                })
                .fold(0u64, u64::wrapping_add),
        }
    }

    /// Whether these counters are a slot of a page shared with other
    /// servers.
    pub(crate) fn in_page(&self) -> bool {
        matches!(self.0, Cells::Page { .. })
    }

    /// Publishes how busy this server was over its last window
    /// ([`Field::Busy`], [`Field::BusyAt`]).
    pub(crate) fn publish_busy(&self, ppm: u64, now_ms: u64) {
        self.cell(Field::Busy).store(ppm, Ordering::Relaxed);
        self.cell(Field::BusyAt).store(now_ms, Ordering::Relaxed);
    }

    /// Publishes whether this server sheds load ([`Field::Shedding`]).
    pub(crate) fn publish_shedding(&self, yes: bool) {
        self.cell(Field::Shedding)
            .store(u64::from(yes), Ordering::Relaxed);
    }

    /// The page's connections as this server sees them at `now_ms`, for
    /// sharing them by load; `None` alone (no page).
    pub(crate) fn share_view(&self, now_ms: u64) -> Option<ShareView> {
        let Cells::Page { map, base, slots } = &self.0 else {
            return None;
        };
        let mut v = ShareView {
            mine: self.get(Field::Open),
            total: 0,
            accepting: 0,
            idlest_peer: None,
            taker_before: false,
        };
        for i in 0..*slots {
            let at = PAGE_HEADER + i * SLOT_BYTES;
            let cell = |f: Field| map.atomic_u64(at + 8 * f as usize).load(Ordering::Relaxed);
            v.total = v.total.wrapping_add(cell(Field::Open));
            if cell(Field::Accepting) != 1 {
                continue;
            }
            v.accepting += 1;
            if at == *base {
                continue;
            }
            // A reading older than a few windows: its server has not
            // turned since, so it is idle, or held in one request.
            let current = cell(Field::BusyAt).saturating_add(STALE_MS) >= now_ms;
            let held = !current && cell(Field::Handed) > cell(Field::Returned);
            let busy = match (current, held) {
                (true, _) => cell(Field::Busy),
                (false, true) => 1_000_000,
                (false, false) => 0,
            };
            v.idlest_peer = Some(v.idlest_peer.map_or(busy, |b: u64| b.min(busy)));
            if at < *base && !held && cell(Field::Shedding) != 1 {
                v.taker_before = true;
            }
        }
        Some(v)
    }

    /// Says whether this server accepts connections ([`Field::Accepting`]).
    pub(crate) fn set_accepting(&self, yes: bool) {
        self.cell(Field::Accepting)
            .store(u64::from(yes), Ordering::Relaxed);
    }

    /// Adds `n` to a counter.
    pub(crate) fn add(&self, f: Field, n: u64) {
        self.cell(f).fetch_add(n, Ordering::Relaxed);
    }

    /// Takes 1 from a counter (never below 0 as far as this side goes).
    pub(crate) fn sub(&self, f: Field) {
        self.cell(f).fetch_sub(1, Ordering::Relaxed);
    }

    /// A counter's value.
    pub(crate) fn get(&self, f: Field) -> u64 {
        self.cell(f).load(Ordering::Relaxed)
    }

    /// Counts one answered request, which took `took` from its head to
    /// its answer.
    pub(crate) fn answered(&self, status: u16, body_in: usize, body_out: usize, took: Duration) {
        self.add(Field::Requests, 1);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if let Some(i) = DURATION_BOUNDS_US.iter().position(|&b| us <= b) {
            self.cell_at(Field::Bucket0 as usize + i)
                .fetch_add(1, Ordering::Relaxed);
        }
        self.add(Field::DurationMicros, us);
        self.add(Field::Timed, 1);
        let class = match status {
            0..=399 => Field::Ok,
            400..=499 => Field::ClientErrors,
            _ => Field::ServerErrors,
        };
        self.add(class, 1);
        if status == 413 {
            self.add(Field::TooLarge, 1);
        }
        if let Ok(i) = STATUS_CODES.binary_search(&status) {
            self.cell_at(Field::Code0 as usize + i)
                .fetch_add(1, Ordering::Relaxed);
        }
        self.add(Field::BytesIn, body_in as u64);
        self.add(Field::BytesOut, body_out as u64);
    }

    pub(crate) fn snapshot(&self) -> HttpStats {
        let g = |f| self.get(f);
        HttpStats {
            connections_open: g(Field::Open),
            connections: g(Field::Connections),
            connections_refused: g(Field::Refused),
            requests: g(Field::Requests),
            ok: g(Field::Ok),
            client_errors: g(Field::ClientErrors),
            server_errors: g(Field::ServerErrors),
            too_large: g(Field::TooLarge),
            bytes_in: g(Field::BytesIn),
            bytes_out: g(Field::BytesOut),
            front_cpu_ns: g(Field::FrontNanos),
            front_samples: g(Field::FrontSamples),
            durations: Durations {
                buckets: std::array::from_fn(|i| {
                    self.cell_at(Field::Bucket0 as usize + i)
                        .load(Ordering::Relaxed)
                }),
                sum_us: g(Field::DurationMicros),
                count: g(Field::Timed),
            },
            codes: std::array::from_fn(|i| {
                self.cell_at(Field::Code0 as usize + i)
                    .load(Ordering::Relaxed)
            }),
        }
    }
}

/// A handle on a front's counters that outlives nothing it should not: it
/// holds the counters themselves (the pool's status reads it).
#[derive(Debug, Clone)]
pub struct StatsHandle(pub(crate) Arc<Counters>);

impl StatsHandle {
    /// The counters now.
    pub fn snapshot(&self) -> HttpStats {
        self.0.snapshot()
    }
}

/// The counters page of a pool whose workers serve HTTP: a sealed memfd of
/// [`PAGE_HEADER`] bytes and `slots` slots of [`SLOT_BYTES`], one slot per
/// worker process alive.
#[derive(Debug)]
pub struct CountersPage {
    map: Arc<Mapping>,
    slots: usize,
}

impl CountersPage {
    /// Makes a page of `slots` slots, all zero; returns it and its
    /// descriptor (to hand to workers).
    ///
    /// # Errors
    /// A slot count of 0 or over [`MAX_SLOTS`]; the kernel refusing the
    /// memfd or the mapping.
    pub fn create(slots: usize) -> Result<(OwnedFd, CountersPage), HttpError> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(HttpError::Options(format!(
                "a counters page has 1 to {MAX_SLOTS} slots, not {slots}"
            )));
        }
        let header = PageHeader { slots };
        let len = header.page_len();
        let io = |context: &str| {
            let context = context.to_string();
            move |source| HttpError::Io { context, source }
        };
        let fd = shmlink_sys::memfd::create_sealed("shmlink-http-counters", len as u64)
            .map_err(io("making the HTTP counters page"))?;
        let map =
            Mapping::map_shared(&fd, len, false).map_err(io("mapping the HTTP counters page"))?;
        let header = header.encode();
        map.write_at(0, &header);
        Ok((
            fd,
            CountersPage {
                map: Arc::new(map),
                slots,
            },
        ))
    }

    /// Maps a page made by [`CountersPage::create`] elsewhere and gives the
    /// counters of slot `slot`, after checking the header and the size.
    pub(crate) fn open_slot(fd: impl AsFd, slot: usize) -> Result<Counters, HttpError> {
        let bad = |why: String| HttpError::Options(format!("the HTTP counters page {why}"));
        let facts = shmlink_sys::memfd::inspect(&fd)
            .map_err(|e| bad(format!("is not a sealed memfd: {e}")))?;
        // Unsealed, its maker could shrink it under our mapping (SIGBUS).
        if !facts.sealed {
            return Err(bad("is not sealed against resizing".into()));
        }
        let size = facts.len;
        let len = usize::try_from(size).map_err(|_| bad(format!("has {size} bytes")))?;
        if len < PAGE_HEADER {
            return Err(bad(format!("has {len} bytes, fewer than its header")));
        }
        let map = Mapping::map_shared(&fd, len, false)
            .map_err(|e| bad(format!("cannot be mapped: {e}")))?;
        let mut header = [0u8; 16];
        map.read_at(0, &mut header);
        let slots = PageHeader::decode(&header, len).map_err(bad)?.slots;
        if slot >= slots {
            return Err(bad(format!(
                "has {slots} slots in {len} bytes; slot {slot} is not one of them"
            )));
        }
        Ok(Counters(Cells::Page {
            map: Arc::new(map),
            base: PAGE_HEADER + slot * SLOT_BYTES,
            slots,
        }))
    }

    /// Slots of the page.
    pub fn slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, slot: usize) -> Counters {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        Counters(Cells::Page {
            map: Arc::clone(&self.map),
            base: PAGE_HEADER + slot * SLOT_BYTES,
            slots: self.slots,
        })
    }

    /// What the worker of `slot` counted.
    ///
    /// # Panics
    /// When `slot` is not a slot of the page.
    pub fn stats(&self, slot: usize) -> HttpStats {
        self.slot(slot).snapshot()
    }

    /// Requests handed to the worker's application and answered by it: the
    /// first is above the second while it runs a request.
    ///
    /// # Panics
    /// When `slot` is not a slot of the page.
    pub fn application(&self, slot: usize) -> (u64, u64) {
        let s = self.slot(slot);
        (s.get(Field::Handed), s.get(Field::Returned))
    }

    /// A worker of `slot` is gone: its connections closed with it.
    ///
    /// # Panics
    /// When `slot` is not a slot of the page.
    pub fn closed_all(&self, slot: usize) {
        let s = self.slot(slot);
        s.cell(Field::Open).store(0, Ordering::Relaxed);
        s.set_accepting(false);
    }

    /// Zeroes a slot for its next worker.
    ///
    /// # Panics
    /// When `slot` is not a slot of the page.
    pub fn clear(&self, slot: usize) {
        let base = PAGE_HEADER + slot * SLOT_BYTES;
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        for i in 0..SLOT_BYTES / 8 {
            self.map
                .atomic_u64(base + 8 * i)
                .store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_slot_is_seen_by_the_page() {
        let (fd, page) = CountersPage::create(3).expect("page");
        let c = CountersPage::open_slot(&fd, 2).expect("slot");
        c.answered(200, 10, 20, Duration::from_micros(700));
        c.answered(413, 0, 5, Duration::from_secs(3));
        c.add(Field::Open, 1);
        let s = page.stats(2);
        assert_eq!(
            (s.requests, s.ok, s.client_errors, s.too_large),
            (2, 1, 1, 1)
        );
        assert_eq!((s.bytes_in, s.bytes_out, s.connections_open), (10, 25, 1));
        // 700 µs: the 1 ms bucket; 3 s: past the last bound, timed only.
        let d = s.durations;
        assert_eq!((d.buckets[1], d.buckets.iter().sum::<u64>()), (1, 1));
        assert_eq!((d.count, d.sum_us), (2, 3_000_700));
        // By status: both are among the statuses counted one by one.
        let by = s.by_status();
        assert_eq!(by, vec![("200".to_string(), 1), ("413".to_string(), 1)]);
        assert_eq!(page.stats(1), HttpStats::default());
        page.clear(2);
        assert_eq!(page.stats(2), HttpStats::default());
    }

    #[test]
    fn a_slot_past_the_page_or_a_foreign_memfd_is_refused() {
        let (fd, _page) = CountersPage::create(2).expect("page");
        let e = CountersPage::open_slot(&fd, 2).expect_err("slot 2 of 2");
        assert!(e.to_string().contains("slot 2 is not one of them"), "{e}");
        let other = shmlink_sys::memfd::create_sealed("other", 4096).expect("memfd");
        let e = CountersPage::open_slot(&other, 0).expect_err("no header");
        assert!(e.to_string().contains("not version 4"), "{e}");
        assert!(CountersPage::create(0).is_err());
        assert!(CountersPage::create(MAX_SLOTS + 1).is_err());
    }
}
