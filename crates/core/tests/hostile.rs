//! Hostile peers on shared memory: a client that completes the handshake by
//! hand and then writes adversarial values into the rings, and fake servers
//! that send broken segments or garbage responses. The library must end the
//! affected session (server) or fail the call (client) — never panic, hang,
//! or disturb other sessions.
#![allow(unsafe_code)]

mod support;

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use shmlink::wire::SegmentHeader;
use shmlink::wire::{FrameHeader, Kind, HEADER_LEN};
use shmlink::wire::{
    Hello, Welcome, Wire, CAPS, CAP_DESCRIPTORS, CAP_FDS, HELLO_LEN, PROTOCOL_MAX, PROTOCOL_MIN,
    WELCOME_LEN,
};
use shmlink::{Client, ClientOptions, Error, RemoteError, ServerOptions};
use shmlink_sys::{fdpass, futex, memfd, Mapping};
use support::*;

const TAG_DATA: u32 = 0x4441_5441;
const TAG_PAD: u32 = 0x5041_4444;

/// Ring header layout (shmlink-ring `RingHeader`, 768 bytes): one 128-byte
/// line per word. The bells are wake counters the peer increments before a
/// `FUTEX_WAKE`; the sleep words hold a non-zero epoch while their owner sleeps.
const RING_HEADER_SIZE: u64 = 768;
const OFF_TAIL: u64 = 0;
const OFF_HEAD: u64 = 128;
const OFF_DATA_BELL: u64 = 256;
const OFF_DATA_SLEEP: u64 = 384;
const OFF_SPACE_BELL: u64 = 512;
const OFF_SPACE_SLEEP: u64 = 640;
const FLAG_MORE: u8 = 1;

// ---------- panics in library threads ----------

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records panics on threads other than the tests' own (the library's
/// session threads catch panics, which would otherwise go unnoticed).
fn watch_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = thread::current().name().unwrap_or("?").to_string();
            if name.starts_with("shmlink") {
                PANICS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("{name}: {info}"));
            }
            prev(info);
        }));
    });
}

fn assert_no_library_panics() {
    let p = PANICS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(p.is_empty(), "library threads panicked: {p:#?}");
}

// ---------- raw access to a segment ----------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    C2s,
    S2c,
}

/// A mapped segment, accessed only through atomics and raw copies.
struct Seg {
    map: Mapping,
    lay: SegmentHeader,
}

impl Seg {
    fn hdr(&self, d: Dir) -> u64 {
        match d {
            Dir::C2s => self.lay.c2s_header,
            Dir::S2c => self.lay.s2c_header,
        }
    }

    fn data(&self, d: Dir) -> (u64, u64) {
        match d {
            Dir::C2s => (self.lay.c2s_data, self.lay.c2s_len),
            Dir::S2c => (self.lay.s2c_data, self.lay.s2c_len),
        }
    }

    fn u64_at(&self, off: u64) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off as usize + 8 <= self.map.len());
        // SAFETY: in bounds and 8-aligned (checked; the mapping is page
        // aligned); AtomicU64 has u64's layout and every bit pattern is
        // valid; the peer accesses it concurrently, which atomics allow; the
        // reference cannot outlive `self`, which owns the mapping.
        unsafe { &*self.map.as_ptr().add(off as usize).cast::<AtomicU64>() }
    }

    fn u32_at(&self, off: u64) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off as usize + 4 <= self.map.len());
        // SAFETY: as in `u64_at`, for a 4-aligned u32.
        unsafe { &*self.map.as_ptr().add(off as usize).cast::<AtomicU32>() }
    }

    fn tail(&self, d: Dir) -> &AtomicU64 {
        self.u64_at(self.hdr(d) + OFF_TAIL)
    }
    fn head(&self, d: Dir) -> &AtomicU64 {
        self.u64_at(self.hdr(d) + OFF_HEAD)
    }
    fn data_bell(&self, d: Dir) -> &AtomicU32 {
        self.u32_at(self.hdr(d) + OFF_DATA_BELL)
    }
    fn data_sleep(&self, d: Dir) -> &AtomicU32 {
        self.u32_at(self.hdr(d) + OFF_DATA_SLEEP)
    }
    fn space_bell(&self, d: Dir) -> &AtomicU32 {
        self.u32_at(self.hdr(d) + OFF_SPACE_BELL)
    }
    fn space_sleep(&self, d: Dir) -> &AtomicU32 {
        self.u32_at(self.hdr(d) + OFF_SPACE_SLEEP)
    }

    /// Copies `bytes` into ring `d`'s data area at `pos` (no wrap).
    fn write(&self, d: Dir, pos: u64, bytes: &[u8]) {
        let (data, cap) = self.data(d);
        assert!(
            pos + bytes.len() as u64 <= cap,
            "test bug: write past the ring"
        );
        // SAFETY: [data + pos, data + pos + len) is inside the mapping (the
        // ring data area lies in it by layout; bounds checked above); the
        // source is a distinct Rust slice; the peer may read these bytes
        // concurrently, which is the hostile behaviour under test and cannot
        // affect this process's memory safety (no references are formed).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_ptr().add((data + pos) as usize),
                bytes.len(),
            );
        }
    }

    fn read(&self, d: Dir, pos: u64, buf: &mut [u8]) {
        let (data, cap) = self.data(d);
        assert!(pos + buf.len() as u64 <= cap, "read past the ring");
        // SAFETY: in bounds as in `write`; copying out of shared memory into
        // our own buffer forms no reference to the shared bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.map.as_ptr().add((data + pos) as usize),
                buf.as_mut_ptr(),
                buf.len(),
            );
        }
    }

    fn write_record_header(&self, d: Dir, pos: u64, len: u32, tag: u32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&len.to_le_bytes());
        b[4..].copy_from_slice(&tag.to_le_bytes());
        self.write(d, pos, &b);
    }

    /// Stores a tail, then rings the consumer's doorbell as a producer does
    /// (unconditionally: we do not track the consumer's sleep epochs).
    fn publish(&self, d: Dir, tail: u64) {
        self.tail(d).swap(tail, Ordering::AcqRel);
        self.ring_data_bell(d);
    }

    fn ring_data_bell(&self, d: Dir) {
        self.data_bell(d).fetch_add(1, Ordering::AcqRel);
        futex::wake(self.data_bell(d), u32::MAX);
    }

    /// Stores a head, then wakes a producer waiting for space.
    fn release(&self, d: Dir, head: u64) {
        self.head(d).swap(head, Ordering::AcqRel);
        self.space_bell(d).fetch_add(1, Ordering::AcqRel);
        futex::wake(self.space_bell(d), u32::MAX);
    }
}

fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

fn frame(kind: u8, flags: u8, id: u64, total: u64, len: u32) -> [u8; HEADER_LEN] {
    let mut b = FrameHeader {
        len,
        kind: Kind::Request,
        flags: 0,
        fds: 0,
        id,
        total: total.max(u64::from(len)),
    }
    .encode();
    b[4] = kind;
    b[5] = flags;
    b[16..24].copy_from_slice(&total.to_le_bytes());
    b
}

/// A ring producer/consumer written from the protocol description.
struct Cursor {
    tail: u64,
    head: u64,
}

impl Seg {
    /// Appends one data record (padding to the end of the buffer first when
    /// it would not fit) without publishing; returns the new tail.
    fn append(&self, d: Dir, cur: &mut Cursor, parts: &[&[u8]]) {
        let (_, cap) = self.data(d);
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let rec = 8 + align8(len as u64);
        let mut pos = cur.tail & (cap - 1);
        if pos + rec > cap {
            self.write_record_header(d, pos, (cap - pos - 8) as u32, TAG_PAD);
            cur.tail += cap - pos;
            pos = 0;
        }
        self.write_record_header(d, pos, len as u32, TAG_DATA);
        let mut at = pos + 8;
        for p in parts {
            self.write(d, at, p);
            at += p.len() as u64;
        }
        cur.tail += rec;
    }

    /// Reads one whole message (all chunks) from ring `d`, freeing space as
    /// it goes; `None` on timeout.
    fn read_message(
        &self,
        d: Dir,
        cur: &mut Cursor,
        timeout: Duration,
    ) -> Option<(u8, u64, Vec<u8>)> {
        let (_, cap) = self.data(d);
        let deadline = Instant::now() + timeout;
        let mut body = Vec::new();
        loop {
            while self.tail(d).load(Ordering::Acquire) == cur.head {
                if Instant::now() > deadline {
                    return None;
                }
                thread::yield_now();
            }
            let pos = cur.head & (cap - 1);
            let mut rh = [0u8; 8];
            self.read(d, pos, &mut rh);
            let len = u64::from(u32::from_le_bytes(rh[..4].try_into().expect("4")));
            let tag = u32::from_le_bytes(rh[4..].try_into().expect("4"));
            if tag == TAG_PAD {
                cur.head += cap - pos;
                self.release(d, cur.head);
                continue;
            }
            assert_eq!(tag, TAG_DATA, "server wrote a bad record tag");
            let mut fh = [0u8; HEADER_LEN];
            self.read(d, pos + 8, &mut fh);
            let h = FrameHeader::decode(&fh).expect("server wrote a bad frame header");
            let start = body.len();
            body.resize(start + h.len as usize, 0);
            self.read(d, pos + 8 + HEADER_LEN as u64, &mut body[start..]);
            assert_eq!(len, HEADER_LEN as u64 + u64::from(h.len));
            cur.head += 8 + align8(len);
            self.release(d, cur.head);
            if !h.more() {
                return Some((h.kind as u8, h.id, body));
            }
        }
    }
}

// ---------- the hostile client ----------

struct RawShm {
    sock: UnixStream,
    seg: Seg,
    c2s: Cursor,
    s2c: Cursor,
    next_id: u64,
}

impl RawShm {
    fn connect(path: &std::path::Path, ring: u32) -> RawShm {
        let mut sock = UnixStream::connect(path).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let hello = Hello {
            version_min: PROTOCOL_MIN,
            version_max: PROTOCOL_MAX,
            wire: Wire::Shm,
            caps: CAPS,
            ring_c2s: ring,
            ring_s2c: ring,
            max_message: 1 << 20,
        };
        sock.write_all(&hello.encode()).expect("hello");
        let mut buf = [0u8; WELCOME_LEN];
        let mut have = 0;
        let mut fds: Vec<OwnedFd> = Vec::new();
        while have < WELCOME_LEN {
            let (n, mut got) = fdpass::recv_with_fds(&sock, &mut buf[have..]).expect("welcome");
            assert!(n > 0, "EOF in welcome");
            fds.append(&mut got);
            have += n;
        }
        let (w, _) = Welcome::decode_fixed(&buf).expect("welcome");
        assert!(matches!(w, Welcome::Accepted { .. }), "refused: {w:?}");
        assert_eq!(fds.len(), 1, "one segment fd");
        let lay = SegmentHeader::for_rings(ring as usize, ring as usize);
        assert_eq!(
            lay.s2c_header - lay.c2s_header,
            RING_HEADER_SIZE,
            "ring header layout changed: update the offsets in this test"
        );
        let map = Mapping::map_shared(&fds[0], lay.total_len as usize, false).expect("map");
        RawShm {
            sock,
            seg: Seg { map, lay },
            c2s: Cursor { tail: 0, head: 0 },
            s2c: Cursor { tail: 0, head: 0 },
            next_id: 1,
        }
    }

    fn cap(&self) -> u64 {
        self.seg.lay.c2s_len
    }

    /// Appends a valid single-frame message (not yet published).
    fn push(&mut self, kind: Kind, body: &[u8]) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let h = FrameHeader {
            len: body.len() as u32,
            kind,
            flags: 0,
            fds: 0,
            id,
            total: body.len() as u64,
        }
        .encode();
        self.seg.append(Dir::C2s, &mut self.c2s, &[&h, body]);
        id
    }

    fn flush(&self) {
        self.seg.publish(Dir::C2s, self.c2s.tail);
    }

    /// A correct call by hand, verified.
    fn call(&mut self, body: &[u8]) -> Vec<u8> {
        let id = self.push(Kind::Request, body);
        self.flush();
        let (kind, rid, resp) = self
            .seg
            .read_message(Dir::S2c, &mut self.s2c, Duration::from_secs(5))
            .unwrap_or_else(|| {
                let threads: Vec<String> = fs::read_dir("/proc/self/task").map(|rd| rd.flatten().map(|e| {
                    let r = |f: &str| fs::read_to_string(e.path().join(f)).unwrap_or_default().trim().to_string();
                    format!("{} {} wchan={} stat={}", e.file_name().to_string_lossy(), r("comm"), r("wchan"), r("stat").split(' ').nth(2).unwrap_or("?"))
                }).collect()).unwrap_or_default();
                panic!(
                    "threads {threads:#?}\nno response to a valid hand-made call {id} of {} bytes: c2s tail {} head {} bell {}, s2c tail {} head {} (ours {}) space bell {}",
                    body.len(),
                    self.seg.tail(Dir::C2s).load(Ordering::Acquire),
                    self.seg.head(Dir::C2s).load(Ordering::Acquire),
                    self.seg.data_bell(Dir::C2s).load(Ordering::Acquire),
                    self.seg.tail(Dir::S2c).load(Ordering::Acquire),
                    self.seg.head(Dir::S2c).load(Ordering::Acquire),
                    self.s2c.head,
                    self.seg.space_bell(Dir::S2c).load(Ordering::Acquire),
                )
            });
        assert_eq!((kind, rid), (Kind::Response as u8, id));
        resp
    }

    /// Writes a raw record at the current tail (no wrap handling).
    fn raw_record(&mut self, len_field: u32, tag: u32, payload: &[u8]) {
        let pos = self.c2s.tail & (self.cap() - 1);
        self.seg.write_record_header(Dir::C2s, pos, len_field, tag);
        self.seg.write(Dir::C2s, pos + 8, payload);
    }

    /// A data record holding `fh` + `body`, tail advanced accordingly.
    fn raw_frame(&mut self, fh: [u8; HEADER_LEN], body: &[u8]) {
        let mut p = fh.to_vec();
        p.extend_from_slice(body);
        self.raw_record(p.len() as u32, TAG_DATA, &p);
        self.c2s.tail += 8 + align8(p.len() as u64);
    }

    /// True when the server closed the control socket.
    fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 64];
        loop {
            match self.sock.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

fn hostile_handler(req: &[u8], resp: &mut Vec<u8>) -> Result<(), RemoteError> {
    if let Some(n) = req
        .strip_prefix(b"len:")
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse::<usize>().ok())
    {
        resp.resize(n, 7);
    } else {
        xform_into(req, resp);
    }
    Ok(())
}

/// How a session ends after the corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ends {
    /// The server detects it while our socket is still open.
    Detected,
    /// We hang up ourselves (the corruption was benign or mid-message).
    HangUp,
}

const KINDS: usize = 26;

/// Applies corruption number `k`; returns its name and how the session ends.
fn corrupt(s: &mut RawShm, k: usize, rng: &mut Rng) -> (&'static str, Ends) {
    let cap = s.cap();
    match k {
        0 => {
            let n = 8 * (1 + rng.below(64));
            let junk = rng.bytes(n as usize);
            s.seg.write(Dir::C2s, 0, &junk);
            s.seg.publish(Dir::C2s, n);
            ("random data", Ends::Detected)
        }
        1 => {
            let t = [cap + 8, 2 * cap, 1 << 40, !7u64][rng.below(4) as usize];
            s.seg.publish(Dir::C2s, t);
            ("tail far beyond head", Ends::Detected)
        }
        2 => {
            let t = 8 * rng.below(64) + 1 + rng.below(7);
            s.seg.publish(Dir::C2s, t);
            ("tail not a multiple of 8", Ends::Detected)
        }
        3 => {
            let r = s.call(b"valid first");
            assert_bytes("valid call", &r, &xform(b"valid first"));
            let t = if rng.below(2) == 0 { 0 } else { s.c2s.tail - 8 };
            s.seg.publish(Dir::C2s, t);
            ("tail moved backwards", Ends::Detected)
        }
        4 => {
            let len = [
                cap as u32 / 2 - 7,
                cap as u32 / 2,
                cap as u32 - 8,
                cap as u32,
                u32::MAX,
                0x8000_0000,
            ][rng.below(6) as usize];
            s.raw_record(len, TAG_DATA, &[]);
            s.seg.publish(Dir::C2s, 64);
            ("record length over the limit", Ends::Detected)
        }
        5 => {
            // Move to 3072 with two valid calls, then a record that would
            // run past the end of the buffer.
            let a = rng.bytes(2016);
            assert_bytes("call a", &s.call(&a), &xform(&a));
            let b = rng.bytes(992);
            assert_bytes("call b", &s.call(&b), &xform(&b));
            assert_eq!(s.c2s.tail, 3072);
            s.raw_record(2000, TAG_DATA, &[]);
            s.seg.publish(Dir::C2s, 4096);
            ("record past the end of the buffer", Ends::Detected)
        }
        6 => {
            s.raw_record(100, TAG_DATA, &[]);
            s.seg.publish(Dir::C2s, 16);
            ("record past the tail", Ends::Detected)
        }
        7 => {
            s.raw_record(100 + 8 * rng.below(10) as u32, TAG_PAD, &[]);
            s.seg.publish(Dir::C2s, cap);
            ("pad record of the wrong length", Ends::Detected)
        }
        8 => {
            s.raw_record(cap as u32 - 8, TAG_PAD, &[]);
            s.seg.publish(Dir::C2s, 64);
            ("pad record past the tail", Ends::Detected)
        }
        9 => {
            let len = [u32::MAX, 9, 1000, 7][rng.below(4) as usize];
            s.raw_frame(frame(Kind::Request as u8, 0, 1, u64::MAX, len), &[0u8; 8]);
            s.flush();
            ("frame length disagrees with record", Ends::Detected)
        }
        10 => {
            let total = [u64::MAX, (64 << 20) + 1, 1 << 40][rng.below(3) as usize];
            s.raw_frame(
                frame(Kind::Request as u8, FLAG_MORE, 1, total, 8),
                &[1u8; 8],
            );
            s.flush();
            ("message total over the limit", Ends::Detected)
        }
        11 => {
            let kind = [0u8, 7, 99, 255][rng.below(4) as usize];
            s.raw_frame(frame(kind, 0, 1, 4, 4), b"abcd");
            s.flush();
            ("unknown frame kind", Ends::Detected)
        }
        12 => {
            let kind = [Kind::Response, Kind::Error, Kind::Descriptor][rng.below(3) as usize] as u8;
            s.raw_frame(frame(kind, 0, 1, 4, 4), b"abcd");
            s.flush();
            ("frame kind a client may not send", Ends::Detected)
        }
        13 => {
            let mut fh = frame(Kind::Request as u8, 0, 1, 4, 4);
            match rng.below(3) {
                0 => fh[5] = 0x80,
                1 => fh[5] = 0x02,
                _ => fh[6] = 1,
            }
            s.raw_frame(fh, b"abcd");
            s.flush();
            ("unknown flags or reserved bytes", Ends::Detected)
        }
        14 => {
            s.raw_frame(frame(Kind::Request as u8, FLAG_MORE, 1, 100, 10), &[1; 10]);
            s.raw_frame(frame(Kind::Request as u8, FLAG_MORE, 2, 100, 10), &[2; 10]);
            s.flush();
            ("chunks of two messages interleaved", Ends::Detected)
        }
        15 => {
            s.raw_frame(frame(Kind::Request as u8, 0, 1, 100, 10), &[1; 10]);
            s.flush();
            ("message ends short of its total", Ends::Detected)
        }
        16 => {
            s.raw_frame(frame(Kind::Request as u8, FLAG_MORE, 1, 100, 60), &[1; 60]);
            s.raw_frame(frame(Kind::Request as u8, 0, 1, 100, 60), &[2; 60]);
            s.flush();
            ("chunks add up to more than the total", Ends::Detected)
        }
        17 | 18 => {
            // Our head of the response ring: far ahead, or not aligned. The
            // server sees it when it needs space for the second response.
            let h = if k == 17 {
                [1u64 << 40, !7u64][rng.below(2) as usize]
            } else {
                4
            };
            s.seg.head(Dir::S2c).store(h, Ordering::Release);
            s.push(Kind::Request, b"len:3000");
            s.push(Kind::Request, b"len:3000");
            s.flush();
            (
                if k == 17 {
                    "response ring head ahead of tail"
                } else {
                    "response ring head unaligned"
                },
                Ends::Detected,
            )
        }
        19 => {
            // Consume two large responses properly (the server refreshes our
            // head while waiting for space), then move the head backwards.
            for _ in 0..2 {
                let r = s.call(b"len:3000");
                assert_eq!(r, vec![7u8; 3000]);
            }
            s.seg.head(Dir::S2c).store(0, Ordering::Release);
            for _ in 0..3 {
                s.push(Kind::Request, b"len:3000");
            }
            s.flush();
            ("response ring head moved backwards", Ends::Detected)
        }
        20 => {
            s.push(Kind::Goodbye, b"");
            s.flush();
            ("goodbye", Ends::Detected)
        }
        21 => {
            for d in [Dir::C2s, Dir::S2c] {
                s.seg
                    .data_bell(d)
                    .store(rng.next_u64() as u32, Ordering::Release);
                s.seg
                    .space_bell(d)
                    .store(rng.next_u64() as u32, Ordering::Release);
                s.seg
                    .data_sleep(d)
                    .store(rng.next_u64() as u32, Ordering::Release);
                s.seg
                    .space_sleep(d)
                    .store(rng.next_u64() as u32, Ordering::Release);
            }
            for i in 0..3u8 {
                assert_bytes(
                    "call after garbage bells",
                    &s.call(&[i; 100]),
                    &xform(&[i; 100]),
                );
            }
            ("garbage doorbells (benign), then hang-up", Ends::HangUp)
        }
        22 => {
            s.raw_frame(
                frame(Kind::Request as u8, FLAG_MORE, 1, 1000, 100),
                &[3; 100],
            );
            s.flush();
            ("hang-up in the middle of a message", Ends::HangUp)
        }
        23 => {
            // Random record of plausible shape.
            let len = rng.below(cap / 2) as u32;
            let mut p = rng.bytes(len.min(cap as u32 / 2 - 8) as usize);
            if p.len() >= HEADER_LEN {
                p[4] = 1 + rng.below(6) as u8;
                p[5] = 0;
                p[6] = 0;
                p[7] = 0;
            }
            s.raw_record(len.max(1), TAG_DATA, &p);
            s.seg.publish(Dir::C2s, 8 + align8(u64::from(len.max(1))));
            ("random frame in a plausible record", Ends::Detected)
        }
        24 => {
            let r = s.call(b"valid first");
            assert_bytes("valid call", &r, &xform(b"valid first"));
            s.seg.publish(Dir::C2s, s.c2s.tail + cap + 8);
            ("tail more than a ring ahead after traffic", Ends::Detected)
        }
        25 => {
            // Random values into every header word of both rings.
            for d in [Dir::C2s, Dir::S2c] {
                s.seg.head(d).store(rng.next_u64(), Ordering::Release);
            }
            let t = rng.next_u64() | 1;
            s.seg.publish(Dir::C2s, t);
            ("random header words", Ends::Detected)
        }
        _ => unreachable!(),
    }
}

fn hostile_iterations() -> usize {
    std::env::var("SHMLINK_HOSTILE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(KINDS * 60)
}

#[test]
fn hostile_client_corrupts_rings() {
    watch_panics();
    // About 2 ms an iteration on the 2-core VM; the watchdog allows 4, and
    // never less than 600 s (sanitizer builds are slower).
    let limit =
        Duration::from_secs(600).max(Duration::from_millis(4) * hostile_iterations() as u32);
    watchdog("hostile_client_corrupts_rings", limit, || {
        let srv = start(T::Shm, ServerOptions::default(), hostile_handler);
        let path = socket_path(&srv.addr).expect("path");
        // A well-behaved client on its own session, calling all along.
        let stop = Arc::new(AtomicBool::new(false));
        let good = {
            let (addr, stop) = (srv.addr.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let mut c = connect(&addr, ClientOptions::default());
                let mut rng = Rng::new(99);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let len = rng.below(20_000) as usize;
                    let req = rng.bytes(len);
                    match c.call(&req) {
                        Ok(r) if r == xform(&req) => n += 1,
                        Ok(_) => return Err(format!("call {n}: wrong response")),
                        Err(e) => return Err(format!("call {n}: {e}")),
                    }
                }
                Ok(n)
            })
        };
        let stats = srv.stats();
        wait_until("good client connected", Duration::from_secs(5), || {
            stats.sessions_opened.load(Ordering::Acquire) == 1
        });
        let iters = hostile_iterations();
        let mut rng = Rng::new(2024);
        let t0 = Instant::now();
        let mut slowest = (Duration::ZERO, "");
        for i in 0..iters {
            let k = i % KINDS;
            let closed = stats.sessions_closed.load(Ordering::Acquire);
            let mut s = RawShm::connect(&path, 4096);
            let c0 = Instant::now();
            let (name, ends) = corrupt(&mut s, k, &mut rng);
            if ends == Ends::HangUp {
                s.sock.shutdown(std::net::Shutdown::Both).expect("hang up");
            }
            let ok = wait_for(Duration::from_secs(3), || {
                stats.sessions_closed.load(Ordering::Acquire) > closed
            });
            assert!(ok, "iteration {i}: corruption {k} ({name}): the server did not end the session within 3 s");
            let took = c0.elapsed();
            if took > slowest.0 {
                slowest = (took, name);
            }
            assert_eq!(stats.sessions_closed.load(Ordering::Acquire), closed + 1);
            if ends == Ends::Detected {
                assert!(
                    s.closed_by_server(),
                    "iteration {i}: {name}: server closed the control socket"
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        let good_calls = good
            .join()
            .expect("good client thread")
            .unwrap_or_else(|e| panic!("well-behaved client failed: {e}"));
        eprintln!(
            "{iters} hostile sessions ({KINDS} kinds) in {:?}; slowest detection {:?} ({}); well-behaved client made {good_calls} verified calls meanwhile",
            t0.elapsed(),
            slowest.0,
            slowest.1
        );
        assert!(good_calls > 0);
        wait_until("all sessions closed", Duration::from_secs(5), || {
            stats.active_sessions() == 0
        });
        assert_alive_shm(&srv);
        assert_no_library_panics();
    });
}

/// Thousands of random writes into one session's header and data while the
/// server reads it: the session ends, nothing else happens.
#[test]
fn hostile_client_random_storm() {
    watch_panics();
    watchdog("hostile_client_random_storm", LIMIT, || {
        let srv = start(T::Shm, ServerOptions::default(), hostile_handler);
        let path = socket_path(&srv.addr).expect("path");
        let stats = srv.stats();
        let mut rng = Rng::new(31337);
        for round in 0..20 {
            let closed = stats.sessions_closed.load(Ordering::Acquire);
            let s = RawShm::connect(&path, 4096);
            for _ in 0..10_000 / 20 {
                match rng.below(4) {
                    0 => s.seg.publish(Dir::C2s, rng.next_u64() & 0x1FFF),
                    1 => {
                        let pos = 8 * rng.below(500);
                        s.seg.write(Dir::C2s, pos, &rng.bytes(8));
                    }
                    2 => s
                        .seg
                        .head(Dir::S2c)
                        .store(rng.next_u64() & 0x1FFF, Ordering::Release),
                    _ => s
                        .seg
                        .data_bell(Dir::C2s)
                        .store(rng.next_u64() as u32, Ordering::Release),
                }
                if rng.below(8) == 0 {
                    s.seg.ring_data_bell(Dir::C2s);
                }
            }
            // Make sure it is invalid in the end, whatever the storm left.
            s.seg.publish(Dir::C2s, !7u64);
            assert!(
                wait_for(Duration::from_secs(3), || stats
                    .sessions_closed
                    .load(Ordering::Acquire)
                    > closed),
                "round {round}: session not ended"
            );
        }
        assert_alive_shm(&srv);
        assert_no_library_panics();
    });
}

fn assert_alive_shm(srv: &Srv) {
    let mut c = connect(&srv.addr, ClientOptions::default());
    for i in 0..10u8 {
        assert_eq!(
            c.call(&[i; 1000]).expect("server still serves"),
            xform(&[i; 1000])
        );
    }
}

/// The hand-made protocol used above is right: a hand-made client gets
/// correct answers for many calls, including wrap-around and chunked ones.
#[test]
fn hand_made_client_is_correct() {
    watchdog("hand_made_client_is_correct", LIMIT, || {
        let srv = start(T::Shm, ServerOptions::default(), hostile_handler);
        let path = socket_path(&srv.addr).expect("path");
        let mut s = RawShm::connect(&path, 4096);
        let mut rng = Rng::new(4);
        for i in 0..200 {
            let n = rng.below(1500) as usize;
            let req = rng.bytes(n);
            assert_bytes(&format!("call {i}"), &s.call(&req), &xform(&req));
        }
        assert_eq!(s.call(b"len:10000"), vec![7u8; 10000]);
        assert!(s.c2s.tail > 4 * 4096, "wrapped around several times");
        assert_eq!(srv.stats().calls.load(Ordering::Relaxed), 201);
    });
}

// ---------- fake servers against the real client ----------

fn make_segment(c2s: usize, s2c: usize) -> (OwnedFd, Seg) {
    let lay = SegmentHeader::for_rings(c2s, s2c);
    let fd = memfd::create_sealed("shmlink-fake", lay.total_len).expect("memfd");
    let map = Mapping::map_shared(&fd, lay.total_len as usize, false).expect("map");
    // SAFETY: the mapping is at least one page (>= size of the header) and
    // page aligned; no one else maps it yet.
    unsafe { map.as_ptr().cast::<SegmentHeader>().write_volatile(lay) };
    (fd, Seg { map, lay })
}

fn accepted(h: &Hello) -> Welcome {
    Welcome::Accepted {
        version: 1,
        caps: h.caps & (CAPS | CAP_FDS),
        session_id: 7,
        ring_c2s: h.ring_c2s,
        ring_s2c: h.ring_s2c,
        max_message: 1 << 20,
    }
}

fn send_welcome(s: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
    let n = fdpass::send_with_fds(s, bytes, fds).expect("send welcome");
    assert_eq!(n, bytes.len());
}

/// A fake server on a fresh socket: accepts one client, reads its hello,
/// and runs `behave`, which gets a channel that fires when the test is done
/// with the client (keep the connection until then).
fn fake_server<F>(behave: F) -> (TempDir, String, mpsc::Sender<()>, thread::JoinHandle<()>)
where
    F: FnOnce(UnixStream, Hello, mpsc::Receiver<()>) + Send + 'static,
{
    let dir = TempDir::new("fake");
    let path = dir.join("fake.sock");
    let l = UnixListener::bind(&path).expect("bind fake");
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut hb = [0u8; HELLO_LEN];
        s.read_exact(&mut hb).expect("hello");
        let hello = Hello::decode(&hb).expect("client hello decodes");
        behave(s, hello, rx);
    });
    (dir, format!("shm:{}", path.display()), tx, h)
}

fn client_opts() -> ClientOptions {
    ClientOptions {
        ring_size: 4096,
        timeout: Duration::from_secs(2),
        ..Default::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Ok(&'static [u8]),
    Protocol(&'static str),
    Closed(&'static str),
    Timeout,
}

/// What the fake server writes into the response ring (and, for
/// descriptors, its control socket `ctl`) once the client's request has
/// arrived.
fn garbage_s2c(seg: &Seg, ctl: &UnixStream, k: usize, rng: &mut Rng) -> (&'static str, Want) {
    let d = Dir::S2c;
    let cap = seg.lay.s2c_len;
    let rec = |fh: [u8; HEADER_LEN], body: &[u8]| {
        let mut p = fh.to_vec();
        p.extend_from_slice(body);
        seg.write_record_header(d, 0, p.len() as u32, TAG_DATA);
        seg.write(d, 8, &p);
        8 + align8(p.len() as u64)
    };
    let resp = Kind::Response as u8;
    match k {
        0 => {
            let t = rec(frame(resp, 0, 1, 7, 7), b"fake-ok");
            seg.publish(d, t);
            ("a valid response (control)", Want::Ok(b"fake-ok"))
        }
        1 => {
            seg.write(d, 0, &rng.bytes(64));
            seg.publish(d, 64);
            ("random bytes", Want::Protocol(""))
        }
        2 => {
            seg.publish(d, 1 << 40);
            ("tail far ahead", Want::Protocol("capacity"))
        }
        3 => {
            seg.publish(d, 12);
            ("tail not a multiple of 8", Want::Protocol("multiple of 8"))
        }
        4 => {
            seg.write_record_header(d, 0, u32::MAX, TAG_DATA);
            seg.publish(d, 64);
            ("record length u32::MAX", Want::Protocol("record limit"))
        }
        5 => {
            seg.write_record_header(d, 0, 100, TAG_PAD);
            seg.publish(d, cap);
            ("pad of the wrong length", Want::Protocol("pad"))
        }
        6 => {
            let t = rec(frame(Kind::Request as u8, 0, 1, 4, 4), b"ping");
            seg.publish(d, t);
            (
                "a request sent to the client",
                Want::Protocol("only responses"),
            )
        }
        7 => {
            let t = rec(frame(Kind::Goodbye as u8, 0, 0, 0, 0), b"");
            seg.publish(d, t);
            (
                "a goodbye frame (the server closes)",
                Want::Closed("the peer closed the session"),
            )
        }
        8 => {
            let t = rec(frame(resp, 0, 999, 4, 4), b"nope");
            seg.publish(d, t);
            (
                "a response for a call not in flight",
                Want::Protocol("not in flight"),
            )
        }
        9 => {
            let t = rec(frame(Kind::Error as u8, 0, 1, 2, 2), b"ab");
            seg.publish(d, t);
            (
                "an error response without a code",
                Want::Protocol("no code"),
            )
        }
        10 => {
            let t = rec(frame(resp, FLAG_MORE, 1, u64::MAX, 8), &[0; 8]);
            seg.publish(d, t);
            (
                "a response announcing u64::MAX bytes",
                Want::Protocol("maximum message size"),
            )
        }
        11 => {
            let mut fh = frame(resp, 0, 1, 1000, 1000);
            fh[0..4].copy_from_slice(&1000u32.to_le_bytes());
            seg.write_record_header(d, 0, 32, TAG_DATA);
            seg.write(d, 8, &fh);
            seg.publish(d, 40);
            (
                "frame length disagrees with its record",
                Want::Protocol("claiming"),
            )
        }
        12 => {
            let t = rec(frame(99, 0, 1, 4, 4), b"abcd");
            seg.publish(d, t);
            ("unknown frame kind", Want::Protocol("unknown frame kind"))
        }
        13 => {
            // Garbage everywhere, but the tail says "empty".
            seg.write(d, 0, &rng.bytes(cap as usize));
            seg.ring_data_bell(d);
            ("garbage behind an empty-looking tail", Want::Timeout)
        }
        14 => {
            // Two chunks that disagree about the message.
            let a = rec(frame(resp, FLAG_MORE, 1, 100, 10), &[1; 10]);
            let mut fh = frame(resp, 0, 1, 50, 10);
            fh[8..16].copy_from_slice(&1u64.to_le_bytes());
            let mut p = fh.to_vec();
            p.extend_from_slice(&[2; 10]);
            seg.write_record_header(d, a, p.len() as u32, TAG_DATA);
            seg.write(d, a + 8, &p);
            seg.publish(d, a + 8 + align8(p.len() as u64));
            ("inconsistent chunks", Want::Protocol("interleaved"))
        }
        15 => {
            let mut body = shmlink::CODE_PROTOCOL_ERROR.to_le_bytes().to_vec();
            body.extend_from_slice(b"you sent garbage");
            let n = body.len() as u64;
            let t = rec(frame(Kind::Goodbye as u8, 0, 0, n, n as u32), &body);
            seg.publish(d, t);
            (
                "a goodbye with a reason",
                Want::Closed("(code 0xffff0004): you sent garbage"),
            )
        }
        16 => {
            let t = rec(frame(Kind::OneWay as u8, 0, 0, 4, 4), b"ping");
            seg.publish(d, t);
            (
                "a one-way message sent to the client",
                Want::Protocol("only responses"),
            )
        }
        17 => {
            let t = rec(frame(resp, 0, 0, 4, 4), b"zero");
            seg.publish(d, t);
            ("a response with id 0", Want::Protocol("non-zero id"))
        }
        18 => {
            // Descriptors announced, none on the control socket.
            let mut fh = frame(resp, 0, 1, 4, 4);
            fh[6] = 1;
            let t = rec(fh, b"fds?");
            seg.publish(d, t);
            (
                "a response announcing descriptors never sent",
                Want::Protocol("no descriptor record"),
            )
        }
        19 => {
            // A well-formed record and frame, but responses carry none.
            let fd = memfd::create_sealed("shmlink-fake-fd", 4096).expect("memfd");
            let mut record = b"SLFD".to_vec();
            record.extend_from_slice(&1u32.to_le_bytes());
            record.extend_from_slice(&1u64.to_le_bytes());
            send_welcome(ctl, &record, &[fd.as_fd()]);
            let mut fh = frame(resp, 0, 1, 4, 4);
            fh[6] = 1;
            let t = rec(fh, b"fds!");
            seg.publish(d, t);
            (
                "a response carrying a descriptor",
                Want::Protocol("only requests (capability bit 4), segment notices, line grants and bells carry descriptors"),
            )
        }
        _ => unreachable!(),
    }
}

/// Runs fake-server garbage kind `k` against a real client; returns the
/// kind's name, what was expected, the result, how long the call took, and
/// the client's state afterwards (connected, result of a second call).
type GarbageOutcome = (
    &'static str,
    Want,
    shmlink::Result<Vec<u8>>,
    Duration,
    bool,
    shmlink::Result<Vec<u8>>,
);

fn run_garbage_kind(k: usize, seed: u64) -> GarbageOutcome {
    let (name_tx, name_rx) = mpsc::channel();
    let (_dir, addr, done, h) = fake_server(move |s, hello, done| {
        let (fd, seg) = make_segment(hello.ring_c2s as usize, hello.ring_s2c as usize);
        send_welcome(&s, &accepted(&hello).encode(), &[fd.as_fd()]);
        // Wait for the client's request.
        let t0 = Instant::now();
        while seg.tail(Dir::C2s).load(Ordering::Acquire) == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "client request never came"
            );
            thread::yield_now();
        }
        let mut r = Rng::new(seed);
        let what = garbage_s2c(&seg, &s, k, &mut r);
        name_tx.send(what).expect("report");
        let _ = done.recv_timeout(Duration::from_secs(20));
        drop(s);
    });
    let mut c =
        Client::connect(&addr, client_opts()).unwrap_or_else(|e| panic!("kind {k}: connect: {e}"));
    let t0 = Instant::now();
    let r = c.call_timeout(b"hello", Duration::from_secs(1));
    let took = t0.elapsed();
    let (name, want) = name_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("fake server ran");
    let connected = c.is_connected();
    let again = c.call_timeout(b"again", Duration::from_millis(100));
    let _ = done.send(());
    h.join().expect("fake server thread");
    (name, want, r, took, connected, again)
}

const GARBAGE_KINDS: usize = 20;

#[test]
fn hostile_server_garbage_responses() {
    watchdog("hostile_server_garbage_responses", LIMIT, || {
        let mut rng = Rng::new(8);
        for k in 0..GARBAGE_KINDS {
            let (name, want, r, took, connected, again) = run_garbage_kind(k, rng.next_u64());
            eprintln!("fake server kind {k} ({name}): client got {r:?} after {took:?}");
            assert!(
                took < Duration::from_secs(2),
                "{name}: client waited {took:?}"
            );
            match (want, &r) {
                (Want::Ok(b), Ok(v)) => assert_eq!(v.as_slice(), b),
                (Want::Protocol(needle), Err(Error::Protocol { detail, .. })) => {
                    assert!(
                        detail.contains(needle),
                        "{name}: detail {detail:?} lacks {needle:?}"
                    );
                    assert!(!connected, "{name}: session broken after a protocol error");
                    assert!(
                        matches!(again, Err(Error::Closed { .. })),
                        "{name}: later calls fail with Closed, got {again:?}"
                    );
                }
                (Want::Closed(needle), Err(Error::Closed { reason, .. })) => {
                    assert!(
                        reason.contains(needle),
                        "{name}: reason {reason:?} lacks {needle:?}"
                    );
                    assert!(!connected, "{name}: session over after a goodbye");
                }
                (Want::Timeout, Err(Error::Timeout { .. })) => {}
                _ => panic!("kind {k} ({name}): want {want:?}, got {r:?}"),
            }
        }
    });
}

/// Every protocol error names the peer it came from.
#[test]
fn protocol_errors_name_the_peer() {
    watchdog("protocol_errors_name_the_peer", LIMIT, || {
        let mut unnamed = Vec::new();
        for k in 1..GARBAGE_KINDS {
            if let (name, Want::Protocol(_), Err(Error::Protocol { peer, detail }), ..) =
                run_garbage_kind(k, k as u64)
            {
                if !peer.starts_with("shm:") {
                    unnamed.push(format!("{name}: peer {peer:?} ({detail})"));
                }
            }
        }
        assert!(
            unnamed.is_empty(),
            "Protocol errors without the peer's address: {unnamed:#?}"
        );
    });
}

/// What a fake server sends instead of a proper segment.
#[derive(Debug, Clone, Copy)]
enum BadSeg {
    NoFd,
    TwoFds,
    Unsealed,
    RegularFile,
    Pipe,
    WrongSize,
    ZeroHeader,
    CorruptRingState,
    WrongRingSizes,
    BadVersion,
    ExtraCaps,
    ArenaWithoutFds,
    BadMagic,
    TrailingBytes,
    HangUpWithoutWelcome,
    NeverAnswers,
}

#[test]
fn hostile_server_bad_segments() {
    watchdog("hostile_server_bad_segments", LIMIT, || {
        use BadSeg::*;
        let cases: [(BadSeg, &str); 16] = [
            (NoFd, "0 descriptors"),
            (TwoFds, "2 descriptors"),
            (Unsealed, "seal"),
            (RegularFile, "seal"),
            (Pipe, "seal"),
            (WrongSize, "expected"),
            (ZeroHeader, "does not match"),
            (CorruptRingState, ""),
            (WrongRingSizes, "ring sizes"),
            (BadVersion, "version"),
            (ExtraCaps, "capabilities"),
            (ArenaWithoutFds, "without descriptors"),
            (BadMagic, "bad magic"),
            (TrailingBytes, "control socket after the welcome"),
            (HangUpWithoutWelcome, ""),
            (NeverAnswers, "timed out"),
        ];
        for (case, needle) in cases {
            let (_dir, addr, done, h) = fake_server(move |s, hello, done| {
                let lay =
                    SegmentHeader::for_rings(hello.ring_c2s as usize, hello.ring_s2c as usize);
                let w = accepted(&hello);
                let scratch = TempDir::new("fakefile");
                match case {
                    NoFd => send_welcome(&s, &w.encode(), &[]),
                    TwoFds => {
                        let (a, _sa) = make_segment(4096, 4096);
                        let (b, _sb) = make_segment(4096, 4096);
                        send_welcome(&s, &w.encode(), &[a.as_fd(), b.as_fd()]);
                    }
                    Unsealed | RegularFile => {
                        let p = if matches!(case, Unsealed)
                            && std::path::Path::new("/dev/shm").is_dir()
                        {
                            std::path::PathBuf::from(format!(
                                "/dev/shm/shl-fake-{}",
                                std::process::id()
                            ))
                        } else {
                            scratch.join("seg")
                        };
                        let f = fs::OpenOptions::new()
                            .read(true)
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .open(&p)
                            .expect("file");
                        f.set_len(lay.total_len).expect("size");
                        let _ = fs::remove_file(&p);
                        send_welcome(&s, &w.encode(), &[f.as_fd()]);
                    }
                    Pipe => {
                        let (r, _w) = std::io::pipe().expect("pipe");
                        send_welcome(&s, &w.encode(), &[r.as_fd()]);
                    }
                    WrongSize => {
                        let fd = memfd::create_sealed("shmlink-fake", lay.total_len + 4096)
                            .expect("memfd");
                        send_welcome(&s, &w.encode(), &[fd.as_fd()]);
                    }
                    ZeroHeader => {
                        let fd =
                            memfd::create_sealed("shmlink-fake", lay.total_len).expect("memfd");
                        send_welcome(&s, &w.encode(), &[fd.as_fd()]);
                    }
                    CorruptRingState => {
                        let (fd, seg) =
                            make_segment(hello.ring_c2s as usize, hello.ring_s2c as usize);
                        seg.tail(Dir::C2s).store(12, Ordering::Release);
                        seg.head(Dir::C2s).store(1 << 40, Ordering::Release);
                        seg.tail(Dir::S2c).store(u64::MAX, Ordering::Release);
                        send_welcome(&s, &w.encode(), &[fd.as_fd()]);
                    }
                    WrongRingSizes | BadVersion | ExtraCaps | ArenaWithoutFds => {
                        let (fd, _seg) =
                            make_segment(hello.ring_c2s as usize, hello.ring_s2c as usize);
                        let w = match (case, w) {
                            (
                                WrongRingSizes,
                                Welcome::Accepted {
                                    version,
                                    caps,
                                    session_id,
                                    max_message,
                                    ..
                                },
                            ) => Welcome::Accepted {
                                version,
                                caps,
                                session_id,
                                max_message,
                                ring_c2s: 8192,
                                ring_s2c: 8192,
                            },
                            (
                                BadVersion,
                                Welcome::Accepted {
                                    caps,
                                    session_id,
                                    max_message,
                                    ring_c2s,
                                    ring_s2c,
                                    ..
                                },
                            ) => Welcome::Accepted {
                                version: 9,
                                caps,
                                session_id,
                                max_message,
                                ring_c2s,
                                ring_s2c,
                            },
                            (
                                _,
                                Welcome::Accepted {
                                    version,
                                    session_id,
                                    max_message,
                                    ring_c2s,
                                    ring_s2c,
                                    ..
                                },
                            ) => Welcome::Accepted {
                                version,
                                caps: if matches!(case, ArenaWithoutFds) {
                                    CAPS | CAP_DESCRIPTORS
                                } else {
                                    1 << 40
                                },
                                session_id,
                                max_message,
                                ring_c2s,
                                ring_s2c,
                            },
                            (_, w) => w,
                        };
                        send_welcome(&s, &w.encode(), &[fd.as_fd()]);
                    }
                    BadMagic => {
                        let mut b = w.encode();
                        b[0] = b'X';
                        send_welcome(&s, &b, &[]);
                    }
                    TrailingBytes => {
                        let (fd, _seg) =
                            make_segment(hello.ring_c2s as usize, hello.ring_s2c as usize);
                        let mut b = w.encode();
                        b.extend_from_slice(b"extra");
                        send_welcome(&s, &b, &[fd.as_fd()]);
                    }
                    HangUpWithoutWelcome => {
                        drop(s);
                        return;
                    }
                    NeverAnswers => {}
                }
                let _ = done.recv_timeout(Duration::from_secs(20));
                drop(s);
            });
            let t0 = Instant::now();
            let r = Client::connect(
                &addr,
                ClientOptions {
                    timeout: Duration::from_millis(500),
                    ..client_opts()
                },
            );
            let took = t0.elapsed();
            eprintln!(
                "fake server {case:?}: connect -> {:?} after {took:?}",
                r.as_ref().map(|_| "Ok")
            );
            assert!(
                took < Duration::from_secs(2),
                "{case:?}: connect took {took:?}"
            );
            match (case, &r) {
                (HangUpWithoutWelcome, Err(Error::PeerGone { .. })) => {}
                (NeverAnswers, Err(Error::Timeout { .. })) => {}
                (_, Err(Error::Protocol { detail, .. })) => {
                    assert!(
                        detail.contains(needle),
                        "{case:?}: detail {detail:?} lacks {needle:?}"
                    );
                }
                _ => panic!(
                    "{case:?}: expected a Protocol error, got {:?}",
                    r.map(|_| "connected")
                ),
            }
            let _ = done.send(());
            h.join().expect("fake server thread");
        }
    });
}
