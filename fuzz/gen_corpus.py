#!/usr/bin/env python3
"""Writes the committed seed corpus under fuzz/corpus/<target>/: a few small
valid inputs per target, in the input formats the targets document.

    python3 fuzz/gen_corpus.py [TARGET...]   (default all; idempotent: rewrites the same files)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

REQUEST, RESPONSE, ERROR, ONE_WAY, DESCRIPTOR, GOODBYE = 1, 2, 3, 4, 5, 6
MORE = 1
TAG_DATA, TAG_PAD = 0x44415441, 0x50414444


def frame(length, kind, flags, call_id, total):
    return struct.pack("<IBBHQQ", length, kind, flags, 0, call_id, total)


def hello(vmin, vmax, wire, caps, c2s, s2c, max_message):
    b = b"SHMLNKHI" + struct.pack("<HHB3xQIIQ", vmin, vmax, wire, caps, c2s, s2c, max_message)
    return b + bytes(48 - len(b))


def welcome_accepted(version, caps, session_id, c2s, s2c, max_message):
    b = b"SHMLNKOK" + struct.pack("<HH4xQQIIQ", version, 0, caps, session_id, c2s, s2c, max_message)
    return b + bytes(56 - len(b))


def welcome_refused(code, text):
    b = b"SHMLNKOK" + struct.pack("<HHI", 0, code, len(text))
    return b + bytes(56 - len(b)) + text


def report(sessions, header_len=96, record_len=96):
    head = b"SHMLNKIR" + struct.pack("<HHHHII", 1, header_len, record_len, 0, len(sessions), 4242)
    head += struct.pack("<QQQQQQQII Q", 1000, 5, 3, 0, 77, 1, 1 << 20, 1, 0, 131072)
    head += bytes(header_len - len(head))
    return head + b"".join(s + bytes(record_len - len(s)) for s in sessions)


def session(sid, transport, ring, fill):
    return (struct.pack("<QIIBB6x", sid, 5150, 1000, transport, 0)
            + struct.pack("<QQQQQ", 61000, 10, 10, 640, 640)
            + struct.pack("<IIII", ring, fill, ring, 0) + struct.pack("<QQ", 0, 0))


def record(payload, tag=TAG_DATA):
    pad = (-len(payload)) % 8
    return struct.pack("<II", len(payload), tag) + payload + bytes(pad)


def ring_area(placed):
    """A 256-byte data area with byte strings placed at offsets."""
    area = bytearray(256)
    for off, b in placed:
        area[off:off + len(b)] = b
    return bytes(area)


def consumer(head, tail, area, ops=b""):
    # mode 1: tail given as is.
    return struct.pack("<QQB", head, tail, 1) + area + ops


def producer(tail, head, ops=b""):
    # mode 1: head given as is.
    return struct.pack("<QQB", tail, head, 1) + ops


def push(payload, split=0):
    return bytes([0, len(payload), split]) + payload


def desc(slot, generation, offset, length, version=1, flags=0):
    return struct.pack("<HHIQQQ", version, flags, slot, generation, offset, length)


def desc_input(max_message, slots, body):
    """slots: (generation, len) per slot, None for a free slot."""
    b = struct.pack("<BQ", len(slots), max_message)
    for s in slots:
        b += struct.pack("<BQQ", 0, 0, 0) if s is None else struct.pack("<BQQ", 1, *s)
    return b + body


def rel(slot, generation, offset):
    return struct.pack("<IIQQ", slot, 0, generation, offset)


# Slot 0 free, slot 1 (64 KiB) at generation 7, slot 2 (4 KiB) at generation 1.
DESC_TABLE = [None, (7, 65536), (1, 4096)]


def slhq(method, target, protocol, remote, headers, body):
    def put(b):
        return struct.pack("<I", len(b)) + b
    out = b"SLHQ" + struct.pack("<I", len(headers))
    for f in (method, target, protocol, remote):
        out += put(f)
    for n, v in headers:
        out += put(n) + put(v)
    return out + put(body)


def slhr(status, headers, body):
    def put(b):
        return struct.pack("<I", len(b)) + b
    out = b"SLHR" + struct.pack("<II", status, len(headers))
    for n, v in headers:
        out += put(n) + put(v)
    return out + put(body)


def line(op, line_id=0, c2s=0, s2c=0, value=0, limit=0):
    return struct.pack("<IIQIIQII", op, 0, line_id, c2s, s2c, value, limit, 0)


SEEDS = {
    "descriptor": {
        "valid": desc_input(1 << 20, DESC_TABLE, desc(1, 7, 4096, 8192)),
        "exact_fit": desc_input(4096, DESC_TABLE, desc(2, 1, 0, 4096)),
        "zero_length_at_end": desc_input(0, DESC_TABLE, desc(1, 7, 65536, 0)),
        "past_end": desc_input(1 << 20, DESC_TABLE, desc(2, 1, 4096, 8)),
        "stale_generation": desc_input(1 << 20, DESC_TABLE, desc(1, 6, 0, 8)),
        "free_slot": desc_input(1 << 20, DESC_TABLE, desc(0, 0, 0, 8)),
        "unknown_slot": desc_input(1 << 20, DESC_TABLE, desc(3, 0, 0, 8)),
        "over_max_message": desc_input(1000, DESC_TABLE, desc(1, 7, 0, 1001)),
        "overflow": desc_input(2**64 - 1, [(0, 2**64 - 1)], desc(0, 0, 2**64 - 8, 16)),
        "misaligned": desc_input(1 << 20, DESC_TABLE, desc(1, 7, 4097, 8)),
        "bad_version_flags": desc_input(1 << 20, DESC_TABLE, desc(1, 7, 0, 8, version=2, flags=1)),
        "short_body": desc_input(1 << 20, DESC_TABLE, desc(1, 7, 0, 8)[:31]),
    },
    "frame_header": {
        "request": frame(5, REQUEST, 0, 1, 5),
        "response_more": frame(3, RESPONSE, MORE, 2, 10),
        "error": frame(8, ERROR, 0, 3, 8),
        "one_way": frame(0, ONE_WAY, 0, 4, 0),
        "descriptor": frame(24, DESCRIPTOR, 0, 5, 24),
        "goodbye": frame(0, GOODBYE, 0, 0, 0),
        "big_ids": frame(0xFFFFFFFF, REQUEST, MORE, 2**64 - 1, 2**64 - 1),
    },
    "frame_sequence": {
        "two_chunks": struct.pack("<I", 1024)
        + frame(3, REQUEST, MORE, 7, 5) + b"abc"
        + frame(2, REQUEST, 0, 7, 5) + b"de",
        "message_then_goodbye": struct.pack("<I", 64)
        + frame(4, RESPONSE, 0, 9, 4) + b"pong"
        + frame(0, GOODBYE, 0, 0, 0),
        "interleaved": struct.pack("<I", 64)
        + frame(2, REQUEST, MORE, 1, 4) + b"ab"
        + frame(2, REQUEST, 0, 2, 4) + b"cd"
        + frame(1, ONE_WAY, 0, 3, 1) + b"x",
        "over_limit": struct.pack("<I", 4) + frame(8, REQUEST, 0, 1, 8) + b"12345678",
        "short_then_next": struct.pack("<I", 64)
        + frame(1, REQUEST, MORE, 1, 4) + b"a"
        + frame(1, REQUEST, 0, 1, 4) + b"b"
        + frame(3, ERROR, 0, 2, 3) + b"err",
    },
    "handshake_hello": {
        "shm": hello(1, 1, 1, 3, 65536, 65536, 1 << 20),
        "stream": hello(1, 3, 2, 1, 0, 0, 1 << 16),
    },
    "handshake_welcome": {
        "accepted": welcome_accepted(1, 3, 42, 65536, 65536, 1 << 20),
        "refused_text": welcome_refused(1, b"uid 1001 not allowed"),
        "refused_version": welcome_refused(2, b"no common protocol version: client speaks 2..=3, server speaks 1..=1"),
        "refused_other_empty": welcome_refused(77, b""),
        "refused_bad_utf8": welcome_refused(6, b"out of \xff\xfe memory"),
    },
    "ring_consumer": {
        "empty": consumer(0, 0, bytes(256)),
        # Two records at the start of the buffer, then pops.
        "two_records": consumer(
            0, 32, ring_area([(0, record(b"hello") + record(b"world!!"))]),
            bytes([0, 0, 5, 0, 0, 0, 0, 0, 0])),
        # A record at 200, a pad filling 216..256, then a record at 0.
        "wrap_pad": consumer(
            200, 304,
            ring_area([(200, record(b"abc")), (216, struct.pack("<II", 32, TAG_PAD)),
                       (0, record(b"x" * 40))])),
        # Records published one by one, with the sleep protocol in between.
        "publish_then_pop": consumer(
            0, 0, ring_area([(0, record(b"one") + record(b"two") + record(b"three"))]),
            bytes([5, 1, 2, 0, 0, 0, 1, 2, 0, 1, 2, 1, 2, 0, 0, 5, 0, 0, 0, 5])),
        # Counters near 2**64 (positions still modulo the capacity).
        "high_counters": consumer(
            2**64 - 256, 2**64 - 256 + 32, ring_area([(0, record(b"hello") + record(b"world!!"))])),
    },
    # First byte: buffers lent (4, 8, 16, 32 KiB: slots 0.., generations 1..).
    "release": {
        "two_lent": bytes([2]) + rel(0, 1, 0) + rel(1, 2, 0),
        "unknown": bytes([1]) + rel(7, 1, 0),
        "twice": bytes([1]) + rel(0, 1, 0) + rel(0, 1, 0),
        "short": bytes([3]) + bytes(23),
        "notice": bytes([0]) + struct.pack("<IIQ", 0, 1, 1),
    },
    # First byte: reads before the rest (% 8), then their lengths, then the bytes.
    "http_request": {
        "get": bytes([0]) + b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
        "post_length_in_pieces": bytes([2, 10, 40]) + b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        "chunked": bytes([1, 60]) + b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x=y\r\n \r\n0\r\nT: 1\r\n\r\n",
        "http10_keep_alive": bytes([0]) + b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "both_framings": bytes([0]) + b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
        "too_large": bytes([0]) + b"POST / HTTP/1.1\r\nContent-Length: 99999\r\n\r\n",
        "partial": bytes([0]) + b"GET / HTTP/1.1\r\nHo",
    },
    # First byte: 0 request, 1 response, 2 handed-down value; then the bytes.
    "http_wire": {
        "request": bytes([0]) + slhq(b"GET", b"/a", b"HTTP/1.1", b"1.2.3.4:5", [(b"host", b"h")], b""),
        "request_body": bytes([0]) + slhq(b"POST", b"/p", b"HTTP/1.0", b"[::1]:9", [], b"\x00\xff"),
        "response": bytes([1]) + slhr(200, [(b"content-type", b"text/plain")], b"hi"),
        "response_empty": bytes([1]) + slhr(404, [], b""),
        "handed": bytes([2]) + b"listen=3,4 counters=5:1 access=6 max_body=8388608 max_header=65536 header_timeout_ms=10000 max_connections=10000 queue_timeout_ms=10000",
        "handed_bad": bytes([2]) + b"listen=3 colour=blue",
    },
    # First byte: even a request target; odd a size (8 bytes LE, >> 8), then
    # Range, If-Range, If-None-Match, If-Modified-Since separated by NULs.
    "http_files": {
        "path": bytes([0]) + b"/css/site.css?v=1",
        "encoded_traversal": bytes([0]) + b"/a/%2e%2e%2f%2E%2E/etc/passwd",
        "hidden": bytes([0]) + b"/.git/config",
        "range": bytes([1]) + (102400 << 8).to_bytes(8, "little") + b"bytes=100-199",
        "suffix_with_if_range": bytes([1]) + (1000 << 8).to_bytes(8, "little") + b"bytes=-10\0\"6553f100-3e8\"",
        "not_modified": bytes([1]) + (1000 << 8).to_bytes(8, "little") + b"\0\0*",
        "since": bytes([1]) + (5 << 8).to_bytes(8, "little") + b"\0\0\0Tue, 14 Nov 2023 22:13:20 GMT",
    },
    # First byte: descriptors with the frame (% 4); then the 40-byte body.
    "line_body": {
        "grant": bytes([2]) + line(2, 3, 65536, 65536, 1 << 20, 1000),
        "ask": bytes([0]) + line(1),
        "deny": bytes([0]) + line(3),
        "revoke": bytes([0]) + line(4, 3),
        "returned": bytes([0]) + line(5, 3, value=1000),
        "grant_without_fds": bytes([0]) + line(2, 3, 65536, 65536, 1 << 20, 1000),
        "short": bytes([0]) + line(1)[:39],
    },
    # First byte: the decoder (% 5); then its bytes.
    "handover": {
        "ask": bytes([0]) + b"SLHOASK\0" + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + bytes(4),
        "offer": bytes([1]) + b"SLHOOFFR" + (1).to_bytes(2, "little") + (2).to_bytes(2, "little")
        + (1).to_bytes(4, "little") + (9).to_bytes(8, "little") + bytes(8),
        "listener": bytes([2, 1, 0, 0, 0]) + (15).to_bytes(4, "little") + b"shm:/run/a.sock",
        "session": bytes([3]) + (7).to_bytes(8, "little") + (0x237).to_bytes(8, "little")
        + (1 << 20).to_bytes(8, "little") + (1 << 20).to_bytes(4, "little") + (1 << 20).to_bytes(4, "little")
        + (1).to_bytes(4, "little") + (3).to_bytes(4, "little") + bytes(4) + (41).to_bytes(4, "little")
        + (3).to_bytes(4, "little") + bytes(4),
        "stream_session": bytes([3]) + (8).to_bytes(8, "little") + (0x11).to_bytes(8, "little")
        + (1 << 20).to_bytes(8, "little") + bytes(8)
        + (2).to_bytes(4, "little") + (1).to_bytes(4, "little") + (1).to_bytes(2, "little") + bytes(2)
        + bytes(8) + (30).to_bytes(4, "little"),
        "refusal": bytes([4]) + b"SLHONO\0\0" + (9).to_bytes(4, "little") + bytes(4) + b"not today",
    },
    # The 16-byte record: "SLFD", count, call id.
    "fd_record": {
        "two_of_call_4": b"SLFD" + (2).to_bytes(4, "little") + (4).to_bytes(8, "little"),
        "short": b"SLFD" + (1).to_bytes(4, "little"),
        "other_magic": b"SLFX" + (1).to_bytes(4, "little") + (9).to_bytes(8, "little"),
    },
    # The whole report: header, then records.
    "inspect_report": {
        "two_sessions": report([session(11, 1, 65536, 64), session(9, 3, 0, 0)]),
        "none": report([]),
        "longer_parts": report([session(3, 2, 0, 0)], header_len=100, record_len=104),
        "fill_above_ring": report([session(4, 1, 4096, 8192)]),
        "short": report([])[:50],
    },
    "ring_producer": {
        "fresh": producer(0, 0, push(b"hello", 2) + push(b"x" * 100, 50) + push(b"")),
        # Near the end of the buffer: the second push needs a pad.
        "wrap_pad": producer(200, 200, push(b"abc") + push(b"y" * 40, 7) + bytes([2, 7]) + push(b"z" * 8)),
        # Fill up, then the consumer frees space, then push again.
        "full_then_freed": producer(
            0, 0, push(b"a" * 120) + push(b"b" * 120) + push(b"c") + bytes([2, 16]) + push(b"d" * 8)
            + bytes([4, 8, 5, 100, 6, 1]) + push(b"e")),
        "high_counters": producer(2**64 - 512, 2**64 - 512, push(b"hello") + push(b"world")),
    },
}


def main():
    targets = sys.argv[1:] or list(SEEDS)
    unknown = [t for t in targets if t not in SEEDS]
    if unknown:
        sys.exit(f"gen_corpus: unknown targets {unknown}; known: {list(SEEDS)}")
    for target in targets:
        d = os.path.join(CORPUS, target)
        os.makedirs(d, exist_ok=True)
        for name, data in SEEDS[target].items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
    n = sum(len(SEEDS[t]) for t in targets)
    print(f"wrote {n} seeds under {CORPUS}")


if __name__ == "__main__":
    main()
