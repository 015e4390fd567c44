//! The byte-exact test vectors of `docs/protocol-vectors.json`, for other
//! implementations. Two directions, so the spec, the vectors and the code
//! cannot drift apart:
//!
//! - `the_file_is_what_the_code_encodes`: every vector is built here from
//!   its field values with our encoders (and ring records by our ring), and
//!   the committed file must equal the result. To regenerate it after a
//!   deliberate change: `SHMLINK_WRITE_VECTORS=1 cargo test -p shmlink --test
//!   vectors`.
//! - `every_vector_decodes_to_its_fields`: every committed vector is decoded
//!   by our decoders (and ring records popped by our ring) and must give
//!   exactly its `decoded` fields; invalid ones must be refused with an
//!   error containing `error_contains`.

use std::cell::RefCell;
use std::path::PathBuf;

use serde_json::{json, Map, Value};
use shmlink::wire::handover::{
    decode_refusal, encode_refusal, Ask, ListenerKind, ListenerRecord, Offer, SessionRecord, END,
    SESSION_BELL, SESSION_STREAM, TOOK,
};
use shmlink::wire::{
    encode_release, Descriptor, FrameHeader, Hello, Kind, LineBody, LineOp, Report, ReportSession,
    ReportTotals, ReportTransport, RingHeader, SegmentHeader, SegmentNotice, Welcome, Wire, CAPS,
    CAP_BELL, CAP_BOTH_WAYS, CAP_FDS, CAP_INSPECT, CAP_SERVE, FLAG_MORE, FLAG_OVER_SOCKET,
    HEADER_LEN, REPORT_HEADER_LEN, UID_UNKNOWN, WELCOME_LEN,
};
use shmlink::{RefusalCode, RemoteError, CODE_PROTOCOL_ERROR};
use shmlink_ring::{Consumer, Memory, Pop, Producer, Push};

mod vectors_pubsub;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol-vectors.json")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A u64 as JSON: a number up to 2^53, a decimal string above.
fn n(v: u64) -> Value {
    if v < 1 << 53 {
        json!(v)
    } else {
        json!(v.to_string())
    }
}

fn valid(name: &str, bytes: &[u8], decoded: Value) -> Value {
    json!({"name": name, "hex": hex(bytes), "decoded": decoded})
}

fn invalid(name: &str, bytes: &[u8], error_contains: &str) -> Value {
    json!({"name": name, "hex": hex(bytes), "valid": false, "error_contains": error_contains})
}

// ---------- building (encoders) ----------

fn hello_fields(h: &Hello) -> Value {
    json!({
        "magic": "SHMLNKHI",
        "version_min": h.version_min,
        "version_max": h.version_max,
        "wire": h.wire as u8,
        "caps": n(h.caps),
        "ring_c2s": h.ring_c2s,
        "ring_s2c": h.ring_s2c,
        "max_message": n(h.max_message),
    })
}

fn hellos() -> Vec<Value> {
    let shm = Hello {
        version_min: 1,
        version_max: 1,
        wire: Wire::Shm,
        caps: CAPS,
        ring_c2s: 65536,
        ring_s2c: 65536,
        max_message: 64 << 20,
    };
    let stream = Hello {
        wire: Wire::Stream,
        ring_c2s: 0,
        ring_s2c: 0,
        ..shm
    };
    let worker = Hello {
        caps: CAPS | CAP_SERVE,
        ..shm
    };
    let range = Hello {
        version_min: 1,
        version_max: 3,
        ring_c2s: 4096,
        ring_s2c: 1 << 20,
        max_message: 1024,
        caps: 0,
        ..shm
    };
    let inspect = Hello {
        caps: CAP_INSPECT,
        ring_c2s: 0,
        ring_s2c: 0,
        max_message: 1024,
        ..shm
    };
    let both_ways = Hello {
        caps: CAPS | CAP_FDS | CAP_BELL | CAP_BOTH_WAYS,
        ..shm
    };
    let mut out: Vec<Value> = [
        ("shm client, defaults", shm),
        (
            "shm client offering calls both ways (capability bit 10), descriptors and bell",
            both_ways,
        ),
        ("inspection (capability bit 8 alone, rings 0/0)", inspect),
        ("stream client (unix: or tcp:), ring fields 0", stream),
        ("worker (capability bit 3)", worker),
        (
            "versions 1..3, no capabilities, asymmetric rings, smallest limit",
            range,
        ),
    ]
    .iter()
    .map(|(name, h)| valid(name, &h.encode(), hello_fields(h)))
    .collect();
    let b = shm.encode();
    let with = |i: usize, v: u8| {
        let mut x = b;
        x[i] = v;
        x
    };
    out.push(invalid("bad magic", &with(0, b'X'), "bad magic"));
    out.push(invalid("unknown wire 3", &with(12, 3), "unknown wire 3"));
    out.push(invalid(
        "reserved byte 13 set",
        &with(13, 1),
        "reserved hello bytes",
    ));
    out.push(invalid(
        "reserved byte 40 set",
        &with(40, 1),
        "reserved hello bytes",
    ));
    out.push(invalid(
        "empty version range (min 2 > max 1)",
        &with(8, 2),
        "is empty",
    ));
    out.push(invalid("47 bytes", &b[..47], "hello is 47 bytes"));
    out
}

fn welcomes() -> Vec<Value> {
    let accepted = Welcome::Accepted {
        version: 1,
        caps: CAPS,
        session_id: 7,
        ring_c2s: 65536,
        ring_s2c: 65536,
        max_message: 64 << 20,
    };
    let listener = Welcome::Accepted {
        version: 1,
        caps: CAPS | CAP_BOTH_WAYS,
        session_id: 8,
        ring_c2s: 0,
        ring_s2c: 0,
        max_message: 64 << 20,
    };
    let mut out = vec![
        valid(
            "accepted",
            &accepted.encode(),
            json!({"magic": "SHMLNKOK", "version": 1, "status": 0, "text_len": 0, "caps": n(CAPS),
                   "session_id": 7, "ring_c2s": 65536, "ring_s2c": 65536, "max_message": n(64 << 20)}),
        ),
        valid(
            "accepted by a listener over tcp: calls both ways (capability bit 10)",
            &listener.encode(),
            json!({"magic": "SHMLNKOK", "version": 1, "status": 0, "text_len": 0,
                   "caps": n(CAPS | CAP_BOTH_WAYS), "session_id": 8, "ring_c2s": 0, "ring_s2c": 0,
                   "max_message": n(64 << 20)}),
        ),
    ];
    let refusals = [
        (RefusalCode::NotAllowed, "server at shm:/run/app.sock refused uid 1001 (gid 1001, pid 4242): not in allowed uids []"),
        (RefusalCode::Version, "server at unix:/run/app.sock: no common protocol version: client speaks 2..=3, server speaks 1..=1"),
        (RefusalCode::TooManySessions, "server at shm:/run/app.sock has reached its maximum of 4096 sessions"),
        (RefusalCode::BadRequest, "server at tcp:127.0.0.1:7000: no complete hello within the handshake timeout of 2s"),
        (RefusalCode::ShuttingDown, "server at shm:/run/app.sock is shutting down"),
        (RefusalCode::ServerFailure, "server at shm:/run/app.sock cannot take a session now: Too many open files (os error 24)"),
    ];
    for (code, text) in refusals {
        let w = Welcome::Refused {
            code,
            message: text.to_string(),
        };
        out.push(valid(
            &format!("refused, code {} ({code})", code.to_wire()),
            &w.encode(),
            json!({"magic": "SHMLNKOK", "version": 0, "status": code.to_wire(),
                   "text_len": text.len(), "text": text}),
        ));
    }
    let b = accepted.encode();
    let mut bad_magic = b.clone();
    bad_magic[0] = b'X';
    out.push(invalid("bad magic", &bad_magic, "bad magic"));
    let mut long_text = Welcome::Refused {
        code: RefusalCode::BadRequest,
        message: String::new(),
    }
    .encode();
    long_text[12..16].copy_from_slice(&1025u32.to_le_bytes());
    out.push(invalid(
        "refusal text of 1025 bytes",
        &long_text,
        "exceeds 1024",
    ));
    let mut reserved = b.clone();
    reserved[48] = 1;
    out.push(invalid(
        "accepted, reserved byte 48 set",
        &reserved,
        "reserved welcome bytes",
    ));
    out.push(invalid("55 bytes", &b[..55], "welcome is 55 bytes"));
    out
}

fn segment_fields(h: &SegmentHeader) -> Value {
    json!({"magic": "SHMLSEG\u{0}", "layout_version": h.layout_version, "reserved": h.reserved,
           "total_len": n(h.total_len), "c2s_header": n(h.c2s_header), "c2s_data": n(h.c2s_data),
           "c2s_len": n(h.c2s_len), "s2c_header": n(h.s2c_header), "s2c_data": n(h.s2c_data),
           "s2c_len": n(h.s2c_len)})
}

fn segment_headers() -> Vec<Value> {
    [(4096, 4096), (65536, 65536), (4096, 1 << 20)]
        .iter()
        .map(|&(c2s, s2c)| {
            let h = SegmentHeader::for_rings(c2s, s2c);
            let mut v = valid(
                &format!("rings {c2s} / {s2c}"),
                &h.encode(),
                segment_fields(&h),
            );
            v["ring_c2s"] = json!(c2s);
            v["ring_s2c"] = json!(s2c);
            v
        })
        .collect()
}

fn frame_fields(h: &FrameHeader) -> Value {
    json!({"len": h.len, "kind": h.kind as u8, "flags": h.flags, "fds": h.fds, "id": n(h.id),
           "total": n(h.total)})
}

fn frame(name: &str, h: FrameHeader, payload: &[u8]) -> Value {
    let mut v = valid(name, &h.encode(), frame_fields(&h));
    v["payload_hex"] = json!(hex(payload));
    v
}

fn frames() -> Vec<Value> {
    let err = RemoteError::new(42, "no such key").encode();
    let bye = RemoteError::new(
        CODE_PROTOCOL_ERROR,
        "client sent a Response frame; only requests, one-way messages and goodbyes are expected",
    )
    .encode();
    let desc = Descriptor {
        slot: 1,
        generation: 7,
        offset: 4096,
        length: 100,
    }
    .encode();
    let notice = SegmentNotice {
        slot: 0,
        retire: false,
        generation: 1,
    }
    .encode();
    let release = encode_release(&[(0, 1, 0), (0, 1, 131072)]);
    let mut out = vec![
        frame(
            "request, id 1",
            FrameHeader::whole(Kind::Request, 1, 4),
            b"ping",
        ),
        frame(
            "response, id 1",
            FrameHeader::whole(Kind::Response, 1, 4),
            b"pong",
        ),
        frame(
            "error, id 2: code 42, \"no such key\"",
            FrameHeader::whole(Kind::Error, 2, err.len()),
            &err,
        ),
        frame(
            "request, id 4, with 2 file descriptors (capability bit 4)",
            FrameHeader {
                fds: 2,
                ..FrameHeader::whole(Kind::Request, 4, 4)
            },
            b"file",
        ),
        frame(
            "one-way, id 0",
            FrameHeader::whole(Kind::OneWay, 0, 4),
            b"note",
        ),
        frame(
            "descriptor: request 3 lent from slot 1 (kind 5)",
            FrameHeader::whole(Kind::Descriptor, 3, desc.len()),
            &desc,
        ),
        frame(
            "segment notice: slot 0, generation 1, with its memfd (kind 7)",
            FrameHeader {
                fds: 1,
                ..FrameHeader::whole(Kind::Segment, 0, notice.len())
            },
            &notice,
        ),
        frame(
            "release of two lent buffers (kind 8)",
            FrameHeader::whole(Kind::Release, 0, release.len()),
            &release,
        ),
        frame(
            "bell: an eventfd to ring (kind 10, capability bit 9)",
            FrameHeader {
                fds: 1,
                ..FrameHeader::whole(Kind::Bell, 0, 0)
            },
            b"",
        ),
        frame(
            "goodbye, normal close",
            FrameHeader::whole(Kind::Goodbye, 0, 0),
            b"",
        ),
        frame(
            "goodbye, protocol error 0xFFFF0004 with a reason",
            FrameHeader::whole(Kind::Goodbye, 0, bye.len()),
            &bye,
        ),
    ];
    // A request of 10 bytes in three chunks (MORE on all but the last).
    let body = b"0123456789";
    for (i, part) in [&body[0..4], &body[4..8], &body[8..10]].iter().enumerate() {
        let h = FrameHeader {
            len: part.len() as u32,
            kind: Kind::Request,
            flags: if i < 2 { FLAG_MORE } else { 0 },
            fds: 0,
            id: 9,
            total: body.len() as u64,
        };
        out.push(frame(
            &format!("chunk {} of 3 of request 9 (10 bytes)", i + 1),
            h,
            part,
        ));
    }
    let good = FrameHeader::whole(Kind::Request, 1, 4).encode();
    let with = |i: usize, v: u8| {
        let mut x = good;
        x[i] = v;
        x
    };
    out.push(invalid("kind 0", &with(4, 0), "unknown frame kind 0"));
    out.push(invalid("kind 11", &with(4, 11), "unknown frame kind 11"));
    out.push(invalid(
        "unknown flag bit 1",
        &with(5, 2),
        "unknown frame flags",
    ));
    out.push(invalid(
        "fds 65: over the limit of 64",
        &with(6, 65),
        "more than the limit of 64",
    ));
    out.push(invalid(
        "fds 256 (byte 7 set)",
        &with(7, 1),
        "256 file descriptors",
    ));
    out.push(invalid(
        "len 5 > total 4",
        &with(0, 5),
        "carries 5 bytes of a message of 4",
    ));
    out.push(invalid("truncated: 10 bytes", &good[..10], "truncated"));
    out
}

/// A ring data area that records can be read back from.
struct Mem(RefCell<Vec<u8>>);

/// The producer and the consumer share one area: they hold it by reference.
impl Memory for &Mem {
    fn len(&self) -> usize {
        self.0.borrow().len()
    }
    fn write(&self, off: usize, src: &[u8]) {
        self.0.borrow_mut()[off..off + src.len()].copy_from_slice(src);
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0.borrow()[off..off + dst.len()]);
    }
}

const RING_CAPACITY: usize = 64;

/// A ring of 64 bytes after records of 4, 20 and 20 payload bytes, each
/// consumed before the next: the third does not fit before the end, so a pad
/// record fills bytes 48..64 and the record starts at 0.
fn rings() -> Vec<Value> {
    let hdr = RingHeader::new();
    let mem = Mem(RefCell::new(vec![0u8; RING_CAPACITY]));
    let mut p = Producer::new(&hdr, &mem).expect("producer");
    let mut c = Consumer::new(&hdr, &mem).expect("consumer");
    let payloads: [&[u8]; 3] = [b"abcd", b"twenty bytes, record", b"this one wraps: pad!"];
    let mut out = Vec::new();
    for (i, payload) in payloads.iter().enumerate() {
        assert!(matches!(
            p.try_push(&[payload]).expect("push"),
            Push::Done { .. }
        ));
        let tail = hdr.tail.load(std::sync::atomic::Ordering::Relaxed);
        let head = hdr.head.load(std::sync::atomic::Ordering::Relaxed);
        let bytes = mem.0.borrow().clone();
        let v = valid(
            &format!(
                "ring of {RING_CAPACITY} bytes after record {} ({} payload bytes)",
                i + 1,
                payload.len()
            ),
            &bytes,
            json!({"capacity": RING_CAPACITY, "head": head, "tail": tail,
                   "records": ring_layout(i), "payload_hex": hex(payload)}),
        );
        out.push(v);
        assert!(matches!(c.try_pop(|_| ()).expect("pop"), Pop::Done { .. }));
    }
    out
}

/// Where the records of step `i` of [`rings`] lie (position, len, tag).
fn ring_layout(i: usize) -> Value {
    match i {
        0 => json!([{"position": 0, "len": 4, "tag": "DATA"}]),
        1 => json!([{"position": 8 + 8, "len": 20, "tag": "DATA"}]),
        _ => {
            json!([{"position": 48, "len": 8, "tag": "PADD"}, {"position": 0, "len": 20, "tag": "DATA"}])
        }
    }
}

/// The consumer's line of a ring header, its first 8 bytes (offset 384):
/// the sleep epoch, then the CPU hint (the consumer's CPU plus one, 0 when
/// not said).
fn cpu_hints() -> Vec<Value> {
    let mut out = Vec::new();
    for cpu in [None, Some(0u32), Some(5), Some(4094)] {
        let hdr = RingHeader::new();
        let mem = Mem(RefCell::new(vec![0u8; RING_CAPACITY]));
        let c = Consumer::new(&hdr, &mem).expect("consumer");
        if let Some(n) = cpu {
            c.say_cpu(n);
        }
        let o = std::sync::atomic::Ordering::Relaxed;
        let mut bytes = hdr.data_sleep.epoch.load(o).to_le_bytes().to_vec();
        bytes.extend(hdr.data_sleep.cpu.load(o).to_le_bytes());
        let name = cpu.map_or("not said".to_string(), |n| format!("CPU {n}"));
        out.push(valid(
            &format!("consumer's line: {name}"),
            &bytes,
            json!({"data_sleep": 0, "cpu_hint": cpu.map_or(0, |n| n + 1), "cpu": cpu}),
        ));
    }
    out
}

fn descriptors() -> Vec<Value> {
    let d = Descriptor {
        slot: 1,
        generation: 7,
        offset: 4096,
        length: 100,
    };
    let b = d.encode();
    let with = |i: usize, v: u8| {
        let mut x = b;
        x[i] = v;
        x
    };
    vec![
        valid(
            "slot 1, generation 7, offset 4096, length 100",
            &b,
            json!({"version": 1, "flags": 0, "slot": 1, "generation": 7, "offset": 4096, "length": 100}),
        ),
        invalid("31 bytes", &b[..31], "descriptor body is 31 bytes"),
        invalid("version 2", &with(0, 2), "unknown descriptor version 2"),
        invalid("flags set", &with(2, 1), "flags"),
        invalid(
            "offset 4099, not a multiple of 8",
            &with(16, 3),
            "multiple of 8",
        ),
    ]
}

fn line_fields(b: &LineBody, fds: usize) -> Value {
    json!({"op": b.op as u32, "line": n(b.line), "ring_c2s": b.ring_c2s, "ring_s2c": b.ring_s2c,
           "value": n(b.value), "limit": b.limit, "fds": fds})
}

/// Line bodies (kind 9, capability bit 7), each with the descriptors that
/// came with it (`fds`).
fn lines() -> Vec<Value> {
    let grant = LineBody {
        op: LineOp::Grant,
        line: 3,
        ring_c2s: 65536,
        ring_s2c: 65536,
        value: 1 << 20,
        limit: 1000,
    };
    let returned = LineBody {
        value: 1000,
        ..LineBody::of(LineOp::Returned, 3)
    };
    let mut out: Vec<Value> = [
        (
            "grant of line 3 to a worker: 64 KiB rings, caller takes 1 MiB, 1000 calls",
            grant,
            2,
        ),
        ("ask", LineBody::of(LineOp::Ask, 0), 0),
        ("deny", LineBody::of(LineOp::Deny, 0), 0),
        ("revoke line 3", LineBody::of(LineOp::Revoke, 3), 0),
        ("line 3 returned after 1000 calls", returned, 0),
    ]
    .into_iter()
    .map(|(name, b, fds)| valid(name, &b.encode(), line_fields(&b, fds)))
    .collect();
    let with = |b: &LineBody, i: usize, v: u8| {
        let mut x = b.encode();
        x[i] = v;
        x
    };
    let ask = LineBody::of(LineOp::Ask, 0);
    let bad: [(&str, Vec<u8>, usize, &str); 7] = [
        (
            "39 bytes",
            ask.encode()[..39].to_vec(),
            0,
            "line frame of 39 bytes",
        ),
        ("op 6", with(&ask, 0, 6).to_vec(), 0, "unknown op 6"),
        (
            "reserved byte set",
            with(&ask, 4, 1).to_vec(),
            0,
            "reserved",
        ),
        (
            "ask naming line 5",
            with(&ask, 8, 5).to_vec(),
            0,
            "fields it does not use",
        ),
        (
            "revoke of line 0",
            LineBody::of(LineOp::Revoke, 0).encode().to_vec(),
            0,
            "without its line id",
        ),
        (
            "grant without its descriptors",
            grant.encode().to_vec(),
            0,
            "with 0 file descriptors",
        ),
        (
            "returned with a descriptor",
            returned.encode().to_vec(),
            1,
            "with 1 file descriptors",
        ),
    ];
    for (name, bytes, fds, needle) in bad {
        let mut v = invalid(name, &bytes, needle);
        v["fds"] = json!(fds);
        out.push(v);
    }
    out
}

fn report_fields(r: &Report) -> Value {
    let t = &r.totals;
    let sessions: Vec<Value> = r
        .sessions
        .iter()
        .map(|s| {
            json!({"session_id": n(s.session_id), "peer_pid": s.peer_pid, "peer_uid": s.peer_uid,
                   "transport": s.transport as u8, "flags": s.flags, "age_ms": n(s.age_ms),
                   "messages_in": n(s.messages_in), "messages_out": n(s.messages_out),
                   "bytes_in": n(s.bytes_in), "bytes_out": n(s.bytes_out),
                   "ring_c2s": s.ring_c2s, "fill_c2s": s.fill_c2s,
                   "ring_s2c": s.ring_s2c, "fill_s2c": s.fill_s2c,
                   "arena_own": n(s.arena_own), "arena_peer": n(s.arena_peer)})
        })
        .collect();
    json!({"magic": "SHMLNKIR", "version": 1, "header_len": 96, "record_len": 96,
           "sessions": sessions, "server_pid": t.server_pid, "uptime_ms": n(t.uptime_ms),
           "sessions_opened": n(t.sessions_opened), "sessions_closed": n(t.sessions_closed),
           "refused": n(t.refused), "calls": n(t.calls), "errors": n(t.errors),
           "shm_bytes": n(t.shm_bytes), "kept_segments": t.kept_segments,
           "kept_bytes": n(t.kept_bytes)})
}

/// Inspection reports (capability bit 8): header, then one record per session.
fn reports() -> Vec<Value> {
    let totals = ReportTotals {
        server_pid: 4242,
        uptime_ms: 3_600_000,
        sessions_opened: 12,
        sessions_closed: 10,
        refused: 1,
        calls: 123_456,
        errors: 3,
        shm_bytes: 2 * 135_168,
        kept_segments: 1,
        kept_bytes: 135_168,
    };
    let shm = ReportSession {
        session_id: 11,
        peer_pid: 5150,
        peer_uid: 1000,
        transport: ReportTransport::Shm,
        flags: 0,
        age_ms: 61_000,
        messages_in: 1000,
        messages_out: 999,
        bytes_in: 64_000,
        bytes_out: 63_936,
        ring_c2s: 65536,
        fill_c2s: 64,
        ring_s2c: 65536,
        fill_s2c: 0,
        arena_own: 0,
        arena_peer: 4 << 20,
    };
    let over_socket = ReportSession {
        session_id: 12,
        flags: FLAG_OVER_SOCKET,
        ring_c2s: 0,
        fill_c2s: 0,
        ring_s2c: 0,
        arena_peer: 0,
        ..shm
    };
    let tcp = ReportSession {
        session_id: 9,
        peer_pid: 0,
        peer_uid: UID_UNKNOWN,
        transport: ReportTransport::Tcp,
        ..over_socket
    };
    let two = Report {
        totals,
        sessions: vec![shm, tcp],
    };
    let idle = Report {
        totals: ReportTotals {
            sessions_closed: 12,
            ..totals
        },
        sessions: vec![],
    };
    let fallback = Report {
        totals,
        sessions: vec![over_socket],
    };
    let mut out: Vec<Value> = [
        ("an shm: session and a tcp: one", &two),
        ("no session open", &idle),
        ("an shm: session continuing over its socket", &fallback),
    ]
    .iter()
    .map(|(name, r)| valid(name, &r.encode(), report_fields(r)))
    .collect();
    let b = two.encode();
    let with = |i: usize, v: u8| {
        let mut x = b.clone();
        x[i] = v;
        x
    };
    let rec = REPORT_HEADER_LEN;
    out.push(invalid("bad magic", &with(0, b'X'), "bad magic"));
    out.push(invalid("version 2", &with(8, 2), "version 2"));
    out.push(invalid("header_len 95", &with(10, 95), "header_len 95"));
    out.push(invalid("reserved byte 14 set", &with(14, 1), "reserved"));
    out.push(invalid(
        "three records announced, two sent",
        &with(16, 3),
        "announces",
    ));
    out.push(invalid(
        "unknown transport 4",
        &with(rec + 16, 4),
        "transport 4",
    ));
    out.push(invalid(
        "unknown flag bit 1",
        &with(rec + 17, 2),
        "unknown flags",
    ));
    out.push(invalid(
        "a fill above its ring's size",
        &with(rec + 70, 2),
        "fill above",
    ));
    out.push(invalid(
        "header cut at 50 bytes",
        &b[..50],
        "header of 50 bytes",
    ));
    out
}

fn session_fields(r: &SessionRecord) -> Value {
    json!({"kind": "session", "id": n(r.id), "caps": n(r.caps), "peer_max": n(r.peer_max),
           "ring_c2s": r.ring_c2s, "ring_s2c": r.ring_s2c, "flags": r.flags, "fds": r.fds(),
           "listener": r.listener, "recv_epoch": r.epochs.0, "send_epoch": r.epochs.1,
           "read_ahead": r.read_ahead})
}

/// The hand-over's messages (docs/protocol.md, "Hand-over"). A session
/// record is decoded within an offer of 2 listeners and next session 9.
fn handovers() -> Vec<Value> {
    let ask = Ask::ours();
    let offer = Offer {
        version: 1,
        listeners: 2,
        sessions: 1,
        next_session: 9,
    };
    let listener = ListenerRecord {
        kind: ListenerKind::Shm,
        address: "shm:/run/a.sock".into(),
    };
    let session = SessionRecord {
        id: 7,
        caps: 0x237,
        peer_max: 64 << 20,
        ring_c2s: 1 << 20,
        ring_s2c: 1 << 20,
        flags: SESSION_BELL,
        listener: 0,
        epochs: (41, 3),
        read_ahead: 0,
    };
    let stream = SessionRecord {
        id: 8,
        caps: 0x11,
        peer_max: 1 << 20,
        ring_c2s: 0,
        ring_s2c: 0,
        flags: SESSION_STREAM,
        listener: 1,
        epochs: (0, 0),
        read_ahead: 30,
    };
    let mut out = vec![
        valid(
            "ask: versions 1 to 2",
            &ask.encode(),
            json!({"kind": "ask", "version_min": 1, "version_max": 2}),
        ),
        valid(
            "offer: version 1, 2 listeners, 1 session, next session 9",
            &offer.encode(),
            json!({"kind": "offer", "version": 1, "listeners": 2, "sessions": 1, "next_session": 9}),
        ),
        valid(
            "offer: version 2, 2 listeners, 2 sessions, next session 9",
            &Offer {
                version: 2,
                sessions: 2,
                ..offer
            }
            .encode(),
            json!({"kind": "offer", "version": 2, "listeners": 2, "sessions": 2, "next_session": 9}),
        ),
        valid(
            "listener record: shm:/run/a.sock (its socket with the first byte)",
            &listener.encode(),
            json!({"kind": "listener", "listener_kind": 1, "address": "shm:/run/a.sock"}),
        ),
        valid(
            "session record: id 7, 1 MiB rings, a bell, epochs 41 and 3 (3 descriptors)",
            &session.encode(),
            session_fields(&session),
        ),
        valid(
            "session record (version 2): stream session 8 of listener 1, its socket, 30 bytes read ahead after it",
            &stream.encode(),
            session_fields(&stream),
        ),
        valid("end", &END, json!({"kind": "end"})),
        valid("took", &TOOK, json!({"kind": "took"})),
        valid(
            "refusal: \"not today\"",
            &encode_refusal("not today"),
            json!({"kind": "refusal", "text": "not today"}),
        ),
    ];
    let with = |b: &[u8], i: usize, v: u8| {
        let mut x = b.to_vec();
        x[i] = v;
        x
    };
    let bad: [(&str, Vec<u8>, &str); 7] = [
        (
            "ask: versions 3 to 2",
            with(&ask.encode(), 8, 3),
            "versions 3 to 2",
        ),
        (
            "offer: no listener",
            with(&offer.encode(), 10, 0),
            "0 listeners",
        ),
        (
            "session record: id 9, not below the next session",
            with(&session.encode(), 0, 9),
            "session id 9",
        ),
        (
            "session record: 2 descriptors where its bell flag says 3",
            with(&session.encode(), 36, 2),
            "announces 2 descriptors",
        ),
        (
            "session record: reserved byte set",
            with(&session.encode(), 42, 1),
            "reserved",
        ),
        (
            "session record: bytes read ahead on an shm: session",
            with(&session.encode(), 53, 1),
            "read ahead",
        ),
        (
            "session record: a stream session with a ring",
            with(&stream.encode(), 26, 1),
            "rings",
        ),
    ];
    out.extend(bad.iter().map(|(name, b, says)| invalid(name, b, says)));
    out
}

fn build() -> Value {
    json!({
        "version": 1,
        "description": "Byte-exact vectors of docs/protocol.md. Each structure has vectors of \
            {name, hex, decoded} (hex: the bytes, lowercase; decoded: every field by the names \
            of docs/protocol.md; u64 values above 2^53 as decimal strings), and invalid ones of \
            {name, hex, valid: false, error_contains} that a receiver must refuse (our \
            decoder's message contains error_contains). frame: the 24-byte header in hex, its \
            payload in payload_hex. ring: the whole data area of a 64-byte ring after each \
            push (each record consumed before the next push). cpu_hint: the first 8 bytes of \
            a ring header's consumer line (offset 384): sleep epoch, CPU hint. Checked by \
            crates/core/tests/vectors.rs; regenerate with SHMLINK_WRITE_VECTORS=1 cargo test \
            -p shmlink --test vectors.",
        "hello": hellos(),
        "welcome": welcomes(),
        "segment_header": segment_headers(),
        "frame": frames(),
        "ring": rings(),
        "cpu_hint": cpu_hints(),
        "descriptor": descriptors(),
        "line": lines(),
        "inspect_report": reports(),
        "handover": handovers(),
        "pubsub": vectors_pubsub::build(),
    })
}

#[test]
fn the_file_is_what_the_code_encodes() {
    let built = build();
    let text = serde_json::to_string_pretty(&built).expect("json") + "\n";
    if std::env::var_os("SHMLINK_WRITE_VECTORS").is_some() {
        std::fs::write(path(), &text).expect("write the vectors");
    }
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(path()).expect("docs/protocol-vectors.json"))
            .expect("valid json");
    assert!(
        committed == built,
        "docs/protocol-vectors.json differs from what the code encodes: regenerate it \
         (SHMLINK_WRITE_VECTORS=1 cargo test -p shmlink --test vectors) after checking the change"
    );
}

// ---------- checking (decoders) ----------

fn as_u64(v: &Value) -> u64 {
    match v {
        Value::Number(x) => x.as_u64().expect("u64"),
        Value::String(s) => s.parse().expect("decimal u64"),
        other => panic!("not a u64: {other}"),
    }
}

fn check_fields(what: &str, got: &Value, want: &Value) {
    let want: &Map<String, Value> = want.as_object().expect("decoded is an object");
    for (k, v) in want {
        let g = &got[k];
        let same = match (g, v) {
            (Value::String(_) | Value::Number(_), Value::Number(_) | Value::String(_))
                if v.as_str().is_none_or(|s| s.parse::<u64>().is_ok()) =>
            {
                as_u64(g) == as_u64(v)
            }
            _ => g == v,
        };
        assert!(same, "{what}: field {k} is {g}, the vector says {v}");
    }
}

fn cases<'a>(all: &'a Value, section: &str) -> &'a Vec<Value> {
    let v = all[section]
        .as_array()
        .unwrap_or_else(|| panic!("no section {section}"));
    assert!(
        v.iter().any(|c| c["valid"] != json!(false)),
        "{section}: no valid vector"
    );
    v
}

fn refused<E: std::fmt::Display>(what: &str, c: &Value, r: Result<(), E>) {
    let needle = c["error_contains"].as_str().expect("error_contains");
    match r {
        Ok(()) => panic!("{what}: accepted an invalid vector"),
        Err(e) => assert!(
            e.to_string().contains(needle),
            "{what}: {e} lacks {needle:?}"
        ),
    }
}

#[test]
fn every_vector_decodes_to_its_fields() {
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(path()).expect("docs/protocol-vectors.json"))
            .expect("valid json");
    for section in ["hello", "welcome", "frame", "descriptor"] {
        assert!(
            cases(&all, section)
                .iter()
                .any(|c| c["valid"] == json!(false)),
            "{section}: no invalid vector"
        );
    }
    for c in cases(&all, "hello") {
        let what = format!("hello {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            refused(&what, c, Hello::decode(&b).map(drop));
            continue;
        }
        let h = Hello::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_fields(&what, &hello_fields(&h), &c["decoded"]);
        assert_eq!(&b[..8], b"SHMLNKHI");
    }
    for c in cases(&all, "welcome") {
        let what = format!("welcome {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        let decoded = Welcome::decode_fixed(&b[..b.len().min(WELCOME_LEN)])
            .map(|(w, n)| w.with_text(&b[WELCOME_LEN..WELCOME_LEN + n.min(b.len() - WELCOME_LEN)]));
        if c["valid"] == json!(false) {
            refused(&what, c, decoded.map(drop));
            continue;
        }
        let got = match decoded.unwrap_or_else(|e| panic!("{what}: {e}")) {
            Welcome::Accepted {
                version,
                caps,
                session_id,
                ring_c2s,
                ring_s2c,
                max_message,
            } => json!({
                "magic": "SHMLNKOK", "version": version, "status": 0, "text_len": 0, "caps": n(caps),
                "session_id": n(session_id), "ring_c2s": ring_c2s, "ring_s2c": ring_s2c,
                "max_message": n(max_message)}),
            Welcome::Refused { code, message } => json!({
                "magic": "SHMLNKOK", "version": 0, "status": code.to_wire(),
                "text_len": message.len(), "text": message}),
        };
        check_fields(&what, &got, &c["decoded"]);
    }
    for c in cases(&all, "segment_header") {
        let what = format!("segment header {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        let h = SegmentHeader::decode(&b).expect("72 bytes");
        check_fields(&what, &segment_fields(&h), &c["decoded"]);
        let rings = (
            as_u64(&c["ring_c2s"]) as usize,
            as_u64(&c["ring_s2c"]) as usize,
        );
        assert_eq!(
            h,
            SegmentHeader::for_rings(rings.0, rings.1),
            "{what}: the layout of its rings"
        );
    }
    for c in cases(&all, "frame") {
        let what = format!("frame {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            refused(&what, c, FrameHeader::decode(&b).map(drop));
            continue;
        }
        let h = FrameHeader::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(b.len(), HEADER_LEN);
        check_fields(&what, &frame_fields(&h), &c["decoded"]);
        let payload = unhex(c["payload_hex"].as_str().expect("payload_hex"));
        assert_eq!(payload.len(), h.len as usize, "{what}: payload length");
        if matches!(h.kind, Kind::Error) || (h.kind == Kind::Goodbye && !payload.is_empty()) {
            RemoteError::decode(&payload).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
    for c in cases(&all, "cpu_hint") {
        let what = format!("cpu_hint {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        assert_eq!(b.len(), 8, "{what}");
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let hdr = RingHeader::new();
        let o = std::sync::atomic::Ordering::Relaxed;
        hdr.data_sleep.epoch.store(word(0), o);
        hdr.data_sleep.cpu.store(word(4), o);
        let mem = Mem(RefCell::new(vec![0u8; RING_CAPACITY]));
        let p = Producer::new(&hdr, &mem).expect("producer");
        let fields = json!({"data_sleep": word(0), "cpu_hint": word(4), "cpu": p.consumer_cpu()});
        check_fields(&what, &fields, &c["decoded"]);
    }
    for c in cases(&all, "ring") {
        let what = format!("ring {}", c["name"]);
        let d = &c["decoded"];
        let bytes = unhex(c["hex"].as_str().expect("hex"));
        assert_eq!(bytes.len(), as_u64(&d["capacity"]) as usize);
        // Replay: a consumer whose head stands before the last push pops it.
        let hdr = RingHeader::new();
        let last = &d["records"].as_array().expect("records")[0];
        let start = as_u64(&d["tail"])
            - d["records"]
                .as_array()
                .expect("records")
                .iter()
                .map(|r| 8 + as_u64(&r["len"]).div_ceil(8) * 8)
                .sum::<u64>();
        hdr.head.store(start, std::sync::atomic::Ordering::Relaxed);
        hdr.tail
            .store(as_u64(&d["tail"]), std::sync::atomic::Ordering::Relaxed);
        let mem = Mem(RefCell::new(bytes.clone()));
        let mut cons = Consumer::new(&hdr, &mem).expect("consumer");
        let popped = cons
            .try_pop(|r| {
                let mut v = Vec::new();
                r.read_to_vec(&mut v);
                v
            })
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let Pop::Done { value, .. } = popped else {
            panic!("{what}: nothing to pop");
        };
        assert_eq!(
            hex(&value),
            d["payload_hex"].as_str().expect("payload"),
            "{what}"
        );
        let pos = as_u64(&last["position"]) as usize;
        let tag = &bytes[pos + 4..pos + 8];
        assert_eq!(
            tag,
            last["tag"]
                .as_str()
                .expect("tag")
                .as_bytes()
                .iter()
                .rev()
                .copied()
                .collect::<Vec<_>>(),
            "{what}: tag"
        );
    }
    for c in cases(&all, "line") {
        let what = format!("line {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        let fds = as_u64(if c["valid"] == json!(false) {
            &c["fds"]
        } else {
            &c["decoded"]["fds"]
        }) as usize;
        if c["valid"] == json!(false) {
            refused(&what, c, LineBody::decode(&b, fds).map(drop));
            continue;
        }
        let d = LineBody::decode(&b, fds).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_fields(&what, &line_fields(&d, fds), &c["decoded"]);
    }
    for c in cases(&all, "handover") {
        let what = format!("handover {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            let r = match &b[..8] {
                m if m == b"SLHOASK\0" => Ask::decode(&b).map(drop),
                m if m == b"SLHOOFFR" => Offer::decode(&b).map(drop),
                _ => SessionRecord::decode(&b, 2, 9).map(drop),
            };
            refused(&what, c, r);
            continue;
        }
        let d = &c["decoded"];
        let got = match d["kind"].as_str().expect("kind") {
            "ask" => {
                let a = Ask::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
                json!({"kind": "ask", "version_min": a.version_min, "version_max": a.version_max})
            }
            "offer" => {
                let o = Offer::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
                json!({"kind": "offer", "version": o.version, "listeners": o.listeners,
                       "sessions": o.sessions, "next_session": n(o.next_session)})
            }
            "listener" => {
                let l = ListenerRecord::decode(&b[..8], &b[8..])
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                json!({"kind": "listener", "listener_kind": l.kind as u8, "address": l.address})
            }
            "session" => session_fields(
                &SessionRecord::decode(&b, 2, 9).unwrap_or_else(|e| panic!("{what}: {e}")),
            ),
            "end" => json!({"kind": if b == END { "end" } else { "?" }}),
            "took" => json!({"kind": if b == TOOK { "took" } else { "?" }}),
            "refusal" => {
                let len = decode_refusal(&b[..16]).unwrap_or_else(|e| panic!("{what}: {e}"));
                json!({"kind": "refusal", "text": String::from_utf8_lossy(&b[16..16 + len])})
            }
            k => panic!("{what}: unknown kind {k}"),
        };
        check_fields(&what, &got, d);
    }
    vectors_pubsub::check(cases(&all, "pubsub"), &check_fields);
    for c in cases(&all, "inspect_report") {
        let what = format!("inspect_report {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            refused(&what, c, Report::decode(&b).map(drop));
            continue;
        }
        let r = Report::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_fields(&what, &report_fields(&r), &c["decoded"]);
    }
    for c in cases(&all, "descriptor") {
        let what = format!("descriptor {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            refused(&what, c, Descriptor::decode(&b).map(drop));
            continue;
        }
        let d = Descriptor::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = json!({"version": 1, "flags": 0, "slot": d.slot, "generation": n(d.generation),
                         "offset": n(d.offset), "length": n(d.length)});
        check_fields(&what, &got, &c["decoded"]);
    }
}
