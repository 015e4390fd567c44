//! A peer written by hand from docs/protocol.md, for tests that must break
//! the rules: the handshake, frames on the socket or, for `shm:`, through
//! the ring crate over the mapped segment.
#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ops::Deref;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use shmlink::wire::{
    FrameHeader, Hello, Kind, RingHeader, SegmentHeader, Welcome, Wire, CAPS, HEADER_LEN,
    PROTOCOL_MAX, PROTOCOL_MIN, WELCOME_LEN,
};
use shmlink::CODE_PROTOCOL_ERROR;
use shmlink_ring::{Consumer, Pop, Producer, Push, RawMemory};
use shmlink_sys::{fdpass, Mapping};

use super::{socket_path, T};
/// A ring header inside a mapping the handle keeps alive.
pub struct Hdr {
    ptr: NonNull<RingHeader>,
    _map: Arc<Mapping>,
}

impl Deref for Hdr {
    type Target = RingHeader;
    fn deref(&self) -> &RingHeader {
        // `ptr` points at a ring header inside `_map` (offsets from the
        // segment layout, checked against the mapping's length when the
        // handle was made), aligned to 128 (a page-aligned mapping plus a
        // multiple of 128); RingHeader is atomics only.
        // SAFETY: in bounds, aligned, atomics only; `_map` keeps it mapped.
        unsafe { self.ptr.as_ref() }
    }
}

/// A ring's data area inside a mapping the handle keeps alive.
pub struct Data {
    raw: RawMemory,
    _map: Arc<Mapping>,
}

impl shmlink_ring::Memory for Data {
    fn len(&self) -> usize {
        self.raw.len()
    }
    fn write(&self, off: usize, src: &[u8]) {
        self.raw.write(off, src)
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.raw.read(off, dst)
    }
}

pub fn ring(map: &Arc<Mapping>, hdr: u64, data: u64, len: u64) -> (Hdr, Data) {
    assert!(hdr as usize + RingHeader::SIZE <= map.len());
    assert!(data as usize + len as usize <= map.len());
    // Both offsets are inside the mapping (asserted above); the ring only
    // copies through the data pointer, never forming references into it.
    // SAFETY: in bounds (asserted); `_map` keeps the mapping alive.
    unsafe {
        (
            Hdr {
                ptr: NonNull::new_unchecked(map.as_ptr().add(hdr as usize).cast()),
                _map: Arc::clone(map),
            },
            Data {
                raw: RawMemory::new(map.as_ptr().add(data as usize), len as usize),
                _map: Arc::clone(map),
            },
        )
    }
}

pub enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    pub fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(b),
            Sock::Tcp(s) => s.read(b),
        }
    }
    pub fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.write_all(b),
            Sock::Tcp(s) => s.write_all(b),
        }
    }
    pub fn set_read_timeout(&self, t: Duration) {
        match self {
            Sock::Unix(s) => s.set_read_timeout(Some(t)),
            Sock::Tcp(s) => s.set_read_timeout(Some(t)),
        }
        .expect("read timeout");
    }
}

/// Rings the consumer's doorbell of the ring behind `h`.
pub fn ring_data_bell(h: &RingHeader) {
    h.data_bell
        .fetch_add(1, std::sync::atomic::Ordering::Release);
    shmlink_sys::futex::wake(&h.data_bell, 1);
}

/// A session opened by hand (a client, or a worker with `CAP_SERVE`).
pub struct RawSession {
    pub sock: Sock,
    /// For `shm:`: the ring this side writes and the one it reads.
    pub rings: Option<(Producer<Hdr, Data>, Consumer<Hdr, Data>)>,
    /// For `shm:`: the data area of the ring this side writes, for bytes
    /// no producer would write.
    out: Option<Data>,
}

/// What a hand-made client asks for: the default hello of its transport.
pub fn hello(t: T) -> Hello {
    Hello {
        version_min: PROTOCOL_MIN,
        version_max: PROTOCOL_MAX,
        wire: if t == T::Shm { Wire::Shm } else { Wire::Stream },
        caps: CAPS,
        ring_c2s: 65536,
        ring_s2c: 65536,
        max_message: 1 << 20,
    }
}

pub fn connect_raw(addr: &str) -> Sock {
    let s = match socket_path(addr) {
        Some(p) => Sock::Unix(UnixStream::connect(p).expect("connect")),
        None => Sock::Tcp(TcpStream::connect(addr.trim_start_matches("tcp:")).expect("connect")),
    };
    s.set_read_timeout(Duration::from_secs(5));
    s
}

/// Reads a whole welcome (and the descriptors that came with it).
pub fn read_welcome(sock: &mut Sock) -> (Welcome, Vec<OwnedFd>) {
    let mut buf = vec![0u8; WELCOME_LEN];
    let mut fds = Vec::new();
    let mut have = 0;
    while have < WELCOME_LEN {
        let n = match sock {
            Sock::Unix(s) => {
                let (n, mut got) = fdpass::recv_with_fds(&*s, &mut buf[have..]).expect("welcome");
                fds.append(&mut got);
                n
            }
            Sock::Tcp(_) => sock.read(&mut buf[have..]).expect("welcome"),
        };
        assert!(n > 0, "EOF in the welcome after {have} bytes");
        have += n;
    }
    let (w, text) = Welcome::decode_fixed(&buf).expect("a welcome");
    let mut t = vec![0u8; text];
    let mut got = 0;
    while got < text {
        let n = sock.read(&mut t[got..]).expect("refusal text");
        assert!(n > 0, "EOF in the refusal text");
        got += n;
    }
    (w.with_text(&t), fds)
}

impl RawSession {
    /// Connects and sends `h`; the welcome, and the session when accepted.
    pub fn open(addr: &str, h: &Hello) -> (Welcome, Option<RawSession>) {
        let mut sock = connect_raw(addr);
        sock.write_all(&h.encode()).expect("hello");
        let (w, fds) = read_welcome(&mut sock);
        let Welcome::Accepted {
            ring_c2s, ring_s2c, ..
        } = w
        else {
            return (w, None);
        };
        let mut out = None;
        let rings = (h.wire == Wire::Shm).then(|| {
            let lay = SegmentHeader::for_rings(ring_c2s as usize, ring_s2c as usize);
            let fd = fds.first().expect("the segment's descriptor");
            let map =
                Arc::new(Mapping::map_shared(fd, lay.total_len as usize, false).expect("map"));
            let (out_h, out_d) = ring(&map, lay.c2s_header, lay.c2s_data, lay.c2s_len);
            let (in_h, in_d) = ring(&map, lay.s2c_header, lay.s2c_data, lay.s2c_len);
            out = Some(ring(&map, lay.c2s_header, lay.c2s_data, lay.c2s_len).1);
            (
                Producer::new(out_h, out_d).expect("producer"),
                Consumer::new(in_h, in_d).expect("consumer"),
            )
        });
        (w, Some(RawSession { sock, rings, out }))
    }

    /// Writes `bytes` at offset `off` of the data area of the ring this side
    /// writes (`shm:` only), as no producer would: nothing is published.
    pub fn write_out(&self, off: u64, bytes: &[u8]) {
        use shmlink_ring::Memory;
        let out = self.out.as_ref().expect("an shm session");
        assert!(off as usize + bytes.len() <= out.len(), "inside the ring");
        out.write(off as usize, bytes);
    }

    /// Sends one frame: a header (possibly invalid, as raw bytes) and its payload.
    pub fn send_raw(&mut self, header: [u8; HEADER_LEN], payload: &[u8]) {
        match &mut self.rings {
            Some((p, _)) => {
                let t0 = Instant::now();
                loop {
                    match p.try_push(&[&header, payload]).expect("push") {
                        Push::Done { wake } => {
                            if wake {
                                shmlink_sys::futex::wake(&p.header().data_bell, 1);
                            }
                            return;
                        }
                        Push::Full => {
                            assert!(t0.elapsed() < Duration::from_secs(5), "ring stays full");
                            thread::yield_now();
                        }
                    }
                }
            }
            None => {
                let mut b = header.to_vec();
                b.extend_from_slice(payload);
                self.sock.write_all(&b).expect("write frame");
            }
        }
    }

    pub fn send(&mut self, h: FrameHeader, payload: &[u8]) {
        self.send_raw(h.encode(), payload);
    }

    /// The next frame from the server; `None` when the session ended first
    /// (or nothing came within 5 s).
    pub fn recv(&mut self) -> Option<(FrameHeader, Vec<u8>)> {
        let deadline = Instant::now() + Duration::from_secs(5);
        match &mut self.rings {
            Some((_, c)) => loop {
                let got = c
                    .try_pop(|r| {
                        let mut v = Vec::new();
                        r.read_to_vec(&mut v);
                        v
                    })
                    .expect("the server's ring is sound");
                match got {
                    Pop::Done { value, .. } => {
                        let h = FrameHeader::decode(&value).expect("a frame header");
                        return Some((h, value[HEADER_LEN..].to_vec()));
                    }
                    Pop::Empty if Instant::now() > deadline => return None,
                    Pop::Empty => thread::yield_now(),
                }
            },
            None => {
                let mut hb = [0u8; HEADER_LEN];
                read_full(&mut self.sock, &mut hb)?;
                let h = FrameHeader::decode(&hb).expect("a frame header");
                let mut body = vec![0u8; h.len as usize];
                read_full(&mut self.sock, &mut body)?;
                Some((h, body))
            }
        }
    }

    /// Whether the server closed the socket (the control socket of `shm:`).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 256];
        loop {
            match self.sock.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    /// Expects a `Goodbye` reporting a protocol error whose reason contains
    /// `needle`, then the end of the session.
    pub fn expect_protocol_goodbye(&mut self, needle: &str, what: &str) {
        let (h, body) = self
            .recv()
            .unwrap_or_else(|| panic!("{what}: no goodbye before the session ended"));
        assert_eq!(h.kind, Kind::Goodbye, "{what}: got {h:?}");
        assert_eq!(h.id, 0, "{what}: a goodbye carries id 0");
        let r = shmlink::RemoteError::decode(&body).expect("goodbye body: code + reason");
        assert_eq!(r.code, CODE_PROTOCOL_ERROR, "{what}: {r:?}");
        assert!(
            r.message.contains(needle),
            "{what}: reason {:?} lacks {needle:?}",
            r.message
        );
        assert!(
            self.closed_by_server(),
            "{what}: the server closes after its goodbye"
        );
    }
}

pub fn read_full(s: &mut Sock, buf: &mut [u8]) -> Option<()> {
    let mut have = 0;
    while have < buf.len() {
        match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return None,
            Ok(n) => have += n,
        }
    }
    Some(())
}

/// A frame header with arbitrary values (as a peer may send them).
pub fn raw_header(kind: u8, flags: u8, id: u64, len: u32, total: u64) -> [u8; HEADER_LEN] {
    let mut b = FrameHeader::whole(Kind::Request, id, 0).encode();
    b[0..4].copy_from_slice(&len.to_le_bytes());
    b[4] = kind;
    b[5] = flags;
    b[16..24].copy_from_slice(&total.to_le_bytes());
    b
}
