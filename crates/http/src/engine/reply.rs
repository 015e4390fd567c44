//! Responses written into a connection's output: the application's encoded
//! answer ([`crate::wire::ResponseView`], read in place, checked as it is
//! written), or one of the server's own (413, 503, ...). The server frames
//! every body itself (`content-length`) and sets `date` and `connection`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::files::{FileReply, Handoff};
use crate::wire::ResponseView;

/// Headers an application may not set: the server frames the body itself,
/// and hop-by-hop headers belong to the server's connection.
const FRAMING: [&str; 5] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
];

/// How a response is sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terms {
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (the request's).
    pub(super) version: u8,
    /// A `HEAD` request: the head only.
    pub(super) head_only: bool,
    /// The connection closes after it (`connection: close`).
    pub(super) close: bool,
}

/// What was written: the status and the body's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Written {
    pub(super) status: u16,
    pub(super) body: usize,
}

/// The reason phrase of `status` ("" for a status HTTP names none for).
pub(super) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        422 => "Unprocessable Entity",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A token (RFC 9110 `tchar`): what a header name is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A header value HTTP can carry: visible bytes, spaces and tabs, obs-text;
/// no control bytes (CR, LF, NUL among them).
fn is_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

fn status_line(out: &mut Vec<u8>, version: u8, status: u16) {
    out.extend_from_slice(if version == 0 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Whether a response of `status` has no body.
fn bodiless(status: u16) -> bool {
    status == 204 || status == 304 || (100..200).contains(&status)
}

/// The end of a head: framing, date, connection, blank line; then the body
/// unless the request was `HEAD` or the status has none.
fn finish(out: &mut Vec<u8>, t: Terms, status: u16, body: &[u8], date: &[u8]) {
    end_head(out, t, status, body.len() as u64, date);
    if !t.head_only && !bodiless(status) {
        out.extend_from_slice(body);
    }
}

/// The end of a head for a body of `len` bytes.
fn end_head(out: &mut Vec<u8>, t: Terms, status: u16, len: u64, date: &[u8]) {
    if !bodiless(status) {
        out.extend_from_slice(b"content-length: ");
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(digits.format(len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if t.close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if t.version == 0 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes the response an application answered (`answer`, encoded) to
/// `out`. An answer that is not a valid encoded response, or carries a
/// header or a status HTTP cannot (a 1xx), writes nothing and returns why
/// (the caller answers 502).
pub(super) fn answer(
    out: &mut Vec<u8>,
    answer: &[u8],
    t: Terms,
    date: &[u8],
) -> Result<Written, String> {
    let r =
        ResponseView::parse(answer).map_err(|e| format!("the worker's answer is unusable: {e}"))?;
    // A 1xx is no final status.
    if r.status < 200 {
        return Err(format!("the worker answered status {}", r.status));
    }
    let start = out.len();
    status_line(out, t.version, r.status);
    if let Err(e) = app_headers(out, &r, |_| true) {
        out.truncate(start);
        return Err(e);
    }
    finish(out, t, r.status, r.body, date);
    Ok(Written {
        status: r.status,
        body: r.body.len(),
    })
}

/// Writes the headers of an application's answer `r` that `keep` keeps,
/// checked (framing and hop-by-hop headers dropped).
fn app_headers(
    out: &mut Vec<u8>,
    r: &ResponseView<'_>,
    keep: impl Fn(&str) -> bool,
) -> Result<(), String> {
    for (name, value) in r.headers() {
        if FRAMING.iter().any(|f| f.eq_ignore_ascii_case(name)) || !keep(name) {
            continue;
        }
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!(
                "the worker answered an invalid header name {name:?}"
            ));
        }
        if !is_value(value) {
            return Err(format!(
                "the worker answered an invalid value for header {name:?}"
            ));
        }
        out.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    Ok(())
}

/// How a streamed response's body travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Streamed {
    /// In chunks (HTTP/1.1).
    Chunked,
    /// Until the connection closes (HTTP/1.0).
    UntilClose,
    /// Not at all: a `HEAD` request, or a status without a body (what the
    /// application writes is dropped).
    Nothing,
}

/// Writes the head of a response whose body the application streams (its
/// length unknown): the answer `r`'s status and headers, then
/// `transfer-encoding: chunked` (HTTP/1.1) or `connection: close` (1.0).
/// Its body, if any, is the caller's first piece.
pub(super) fn stream_head(
    out: &mut Vec<u8>,
    r: &ResponseView<'_>,
    t: Terms,
    date: &[u8],
) -> Result<Streamed, String> {
    if r.status < 200 {
        return Err(format!("the worker answered status {}", r.status));
    }
    let start = out.len();
    status_line(out, t.version, r.status);
    if let Err(e) = app_headers(out, r, |_| true) {
        out.truncate(start);
        return Err(e);
    }
    let how = if bodiless(r.status) {
        Streamed::Nothing
    } else if t.version == 0 {
        Streamed::UntilClose
    } else {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        if t.head_only {
            Streamed::Nothing
        } else {
            Streamed::Chunked
        }
    };
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if t.close || how == Streamed::UntilClose {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(if t.head_only { Streamed::Nothing } else { how })
}

/// Appends `data` as one piece of a streamed body.
pub(super) fn stream_piece(out: &mut Vec<u8>, how: Streamed, data: &[u8]) {
    match how {
        Streamed::Nothing => {}
        _ if data.is_empty() => {} // an empty chunk would end the body
        Streamed::UntilClose => out.extend_from_slice(data),
        Streamed::Chunked => {
            out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends the end of a streamed body.
pub(super) fn stream_end(out: &mut Vec<u8>, how: Streamed) {
    if how == Streamed::Chunked {
        out.extend_from_slice(b"0\r\n\r\n");
    }
}

/// Writes the head of a response made from a file (its bytes follow by
/// `sendfile`): the file's own (`f`), or the one an application named in
/// `X-Sendfile` (`app`: its answer, whose status stands unless it is 200,
/// whose headers stand, and which gets the file's headers it did not set).
pub(super) fn file_head(
    out: &mut Vec<u8>,
    f: &FileReply,
    app: Option<&ResponseView<'_>>,
    t: Terms,
    date: &[u8],
) -> Result<Written, String> {
    let start = out.len();
    let status = match app {
        Some(r) if r.status != 200 => r.status,
        _ => f.status,
    };
    status_line(out, t.version, status);
    if let Some(r) = app {
        if let Err(e) = app_headers(out, r, |n| Handoff::of(n).is_none()) {
            out.truncate(start);
            return Err(e);
        }
    }
    for (name, value) in &f.headers {
        if app.is_some_and(|r| r.headers().any(|(n, _)| n.eq_ignore_ascii_case(name))) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    end_head(out, t, status, f.len, date);
    Ok(Written {
        status,
        body: f.len as usize,
    })
}

/// Writes a response of the server's own: `status` with its reason as a
/// plain-text body (`text`), or an empty body (a head it could not parse,
/// as hyper answers those).
pub(super) fn plain(out: &mut Vec<u8>, status: u16, text: bool, t: Terms, date: &[u8]) -> Written {
    status_line(out, t.version, status);
    let body = if text {
        out.extend_from_slice(b"content-type: text/plain; charset=UTF-8\r\n");
        format!("{status} {}\n", reason(status))
    } else {
        String::new()
    };
    finish(out, t, status, body.as_bytes(), date);
    Written {
        status,
        body: body.len(),
    }
}

/// `HTTP/1.1 100 Continue`: the client may send the body it announced.
pub(super) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The `date` header's value, made again once a second.
#[derive(Debug)]
pub(super) struct DateCache {
    value: Vec<u8>,
    /// Coarse-clock milliseconds at which it is next made.
    next: u64,
}

impl DateCache {
    pub(super) fn new() -> DateCache {
        DateCache {
            value: Vec::new(),
            next: 0,
        }
    }

    /// The value at `now_ms` (coarse clock).
    pub(super) fn at(&mut self, now_ms: u64) -> &[u8] {
        if now_ms >= self.next {
            let wall = SystemTime::now();
            self.value = httpdate::fmt_http_date(wall).into_bytes();
            let into = wall
                .duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO)
                .subsec_millis();
            self.next = now_ms + u64::from(1000 - into.min(999));
        }
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Response;

    const KEEP: Terms = Terms {
        version: 1,
        head_only: false,
        close: false,
    };

    fn enc(r: Response) -> Vec<u8> {
        let mut out = Vec::new();
        r.encode_into(&mut out);
        out
    }

    #[test]
    fn an_answer_is_framed_by_the_server() {
        let r = Response::new(200, "hi")
            .header("Content-Type", "text/plain")
            .header("Content-Length", "999")
            .header("Connection", "upgrade")
            .header("X-A", "1");
        let mut out = Vec::new();
        let w = answer(&mut out, &enc(r), KEEP, b"D").expect("valid");
        assert_eq!(
            w,
            Written {
                status: 200,
                body: 2
            }
        );
        assert_eq!(
            String::from_utf8(out).expect("text"),
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-a: 1\r\ncontent-length: 2\r\ndate: D\r\n\r\nhi"
        );
        let mut out = Vec::new();
        let t = Terms {
            version: 0,
            head_only: true,
            close: false,
        };
        answer(&mut out, &enc(Response::new(404, "gone")), t, b"D").expect("valid");
        assert_eq!(
            String::from_utf8(out).expect("text"),
            "HTTP/1.0 404 Not Found\r\ncontent-length: 4\r\ndate: D\r\nconnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn unusable_answers_write_nothing() {
        for (r, why) in [
            (enc(Response::new(101, "")), "status 101"),
            (
                enc(Response::new(200, "").header("x-bad", "a\r\nb")),
                "invalid value",
            ),
            (
                enc(Response::new(200, "").header("bad name", "v")),
                "invalid header name",
            ),
            (b"garbage".to_vec(), "unusable"),
        ] {
            let mut out = b"kept".to_vec();
            let e = answer(&mut out, &r, KEEP, b"D").expect_err(why);
            assert!(e.contains(why), "{e}");
            assert_eq!(out, b"kept");
        }
    }

    #[test]
    fn plain_responses_and_bodiless_statuses() {
        let mut out = Vec::new();
        let t = Terms {
            close: true,
            ..KEEP
        };
        assert_eq!(plain(&mut out, 413, true, t, b"D").body, 22);
        assert!(String::from_utf8_lossy(&out)
            .ends_with("connection: close\r\n\r\n413 Payload Too Large\n"));
        let mut out = Vec::new();
        answer(&mut out, &enc(Response::new(204, "ignored")), KEEP, b"D").expect("valid");
        assert_eq!(
            String::from_utf8(out).expect("text"),
            "HTTP/1.1 204 No Content\r\ndate: D\r\n\r\n"
        );
        assert!(DateCache::new().at(5).ends_with(b" GMT"));
    }
}
