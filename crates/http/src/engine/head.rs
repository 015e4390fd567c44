//! A request head: parsed by httparse in the connection's buffer, checked
//! against HTTP/1.1's framing rules and the limits, and encoded at once as
//! the start of the request the application receives ([`crate::wire`]).

use crate::files::Conditions;
use crate::wire::{self, BODY_FILE_HEADER};

/// Headers a head may carry; more is a 431, as hyper answers.
pub(super) const MAX_HEADERS: usize = 100;

/// How the body of a request is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (no `Content-Length`, or zero).
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the head says about the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// The head's length in the buffer (up to and with its blank line).
    pub(crate) len: usize,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub(super) version: u8,
    pub(crate) framing: Framing,
    /// The client may keep the connection after the response.
    pub(super) keep_alive: bool,
    /// `Expect: 100-continue`, which HTTP/1.1 answers before the body.
    pub(super) expects_continue: bool,
    /// A `HEAD` request: the response goes without its body.
    pub(super) head_only: bool,
    /// `CONNECT`: a proxy's tunnel, nothing a worker answers.
    pub(super) connect: bool,
    /// A `GET` or a `HEAD`: one a file may answer.
    pub(super) fetch: bool,
    /// The headers that make it conditional or partial, when it has one.
    pub(super) conditions: Option<Box<Conditions>>,
    /// `METHOD TARGET`, for the log of a fault and the access log.
    pub(super) line: String,
}

impl Head {
    /// The request target.
    pub(super) fn target(&self) -> &str {
        self.line.split_once(' ').map_or("", |(_, t)| t)
    }
}

/// Why a head is refused: the status to answer (400, 431). The reason,
/// given where it is refused, is not kept: malformed requests from the
/// network are not worth a log line each.
pub(crate) type Refused = u16;

fn refused(status: u16, _why: impl Into<String>) -> Refused {
    status
}

/// Parses the head at the start of `buf`: `Ok(None)` when it is not
/// complete yet (the caller refuses one past the head limit); the head,
/// with the encoded request's start written into `encoded` (everything but
/// the body, whose length and bytes the caller appends).
pub(crate) fn parse(
    buf: &[u8],
    remote: &str,
    encoded: &mut Vec<u8>,
) -> Result<Option<Head>, Refused> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refused(431, format!("more than {MAX_HEADERS} headers")))
        }
        Err(e) => return Err(refused(400, format!("a malformed head: {e}"))),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(refused(400, "an incomplete request line"));
    };
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut encodings = false;
    let (mut close, mut keep) = (false, false);
    let mut expects_continue = false;
    let mut conditions = None;
    for h in req.headers.iter() {
        let v = h.value;
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(v)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| refused(400, "a Content-Length that is not a number"))?;
            if length.is_some_and(|l| l != n) {
                return Err(refused(400, "two different Content-Length values"));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encodings = true;
            // The last coding must be chunked: no other framing is known.
            let last = v.rsplit(|b| *b == b',').next().unwrap_or(b"");
            chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in v.split(|b| *b == b',') {
                let t = token.trim_ascii();
                close |= t.eq_ignore_ascii_case(b"close");
                keep |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if h.name.eq_ignore_ascii_case("expect") {
            expects_continue = v.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        } else {
            Conditions::take(&mut conditions, h.name, v);
        }
    }
    let framing = match (encodings, length) {
        // Both: a request that two servers could frame two ways (request
        // smuggling); refused rather than guessed.
        (true, Some(_)) => return Err(refused(400, "both Transfer-Encoding and Content-Length")),
        (true, None) if version == 0 => {
            return Err(refused(400, "Transfer-Encoding in an HTTP/1.0 request"))
        }
        (true, None) if !chunked => {
            return Err(refused(
                400,
                "a Transfer-Encoding that does not end in chunked",
            ))
        }
        (true, None) => Framing::Chunked,
        (false, Some(0) | None) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
    };
    let protocol: &[u8] = if version == 0 {
        b"HTTP/1.0"
    } else {
        b"HTTP/1.1"
    };
    wire::begin_request(
        encoded,
        method.as_bytes(),
        target.as_bytes(),
        protocol,
        remote.as_bytes(),
    );
    // Only the server names a spooled body: a client's header of that name
    // is dropped.
    let ours = |name: &str| name.eq_ignore_ascii_case(BODY_FILE_HEADER);
    for h in req.headers.iter().filter(|h| !ours(h.name)) {
        wire::push_header_lowercase(encoded, h.name.as_bytes(), h.value);
    }
    Ok(Some(Head {
        len,
        version,
        framing,
        keep_alive: !close && (version == 1 || keep),
        expects_continue: expects_continue && version == 1 && framing != Framing::None,
        head_only: method == "HEAD",
        fetch: method == "GET" || method == "HEAD",
        conditions,
        connect: method == "CONNECT",
        line: {
            let mut l = String::with_capacity(method.len() + target.len() + 1);
            l.push_str(method);
            l.push(' ');
            l.push_str(target);
            l
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Request;

    fn head(bytes: &[u8]) -> Result<Option<(Head, Vec<u8>)>, Refused> {
        let mut enc = Vec::new();
        parse(bytes, "1.2.3.4:5", &mut enc).map(|h| h.map(|h| (h, enc)))
    }

    #[test]
    fn a_head_encodes_as_the_front_did() {
        let raw = b"POST /a?x=1 HTTP/1.1\r\nHost: h\r\nX-Up: V\r\nContent-Length: 3\r\n\r\nabc";
        let (h, mut enc) = head(raw).expect("valid").expect("complete");
        assert_eq!(h.len, raw.len() - 3);
        assert_eq!(h.framing, Framing::Length(3));
        assert!(h.keep_alive && !h.expects_continue && !h.head_only);
        assert_eq!(h.line, "POST /a?x=1");
        let at = wire::begin_body(&mut enc);
        enc.extend_from_slice(b"abc");
        wire::set_body_len(&mut enc, at, 3);
        let r = Request::decode(&enc).expect("decodes");
        assert_eq!(
            (r.method.as_str(), r.target.as_str(), r.protocol.as_str()),
            ("POST", "/a?x=1", "HTTP/1.1")
        );
        assert_eq!(r.remote, "1.2.3.4:5");
        assert_eq!(r.headers[1], ("x-up".to_string(), b"V".to_vec()));
        assert_eq!(r.body, b"abc");
    }

    #[test]
    fn framing_and_connection_rules() {
        let h = |s: &str| head(s.as_bytes()).expect("valid").expect("complete").0;
        assert!(!h("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(h("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!h("GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n").keep_alive);
        assert_eq!(
            h("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").framing,
            Framing::Chunked
        );
        assert!(
            h("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
                .expects_continue
        );
        assert!(
            !h("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expects_continue,
            "no body"
        );
        assert!(h("HEAD / HTTP/1.1\r\n\r\n").head_only);
        let g = h("GET /a?b HTTP/1.1\r\nRange: bytes=0-1\r\nIf-None-Match: \"e\"\r\n\r\n");
        assert!(g.fetch && g.target() == "/a?b");
        let c = g.conditions.expect("conditional");
        assert_eq!(c.range.as_deref(), Some("bytes=0-1"));
        assert_eq!(c.if_none_match.as_deref(), Some("\"e\""));
        assert!(h("GET / HTTP/1.1\r\nHost: x\r\n\r\n").conditions.is_none());
        assert!(!h("POST / HTTP/1.1\r\n\r\n").fetch);
        assert!(h("CONNECT a:443 HTTP/1.1\r\n\r\n").connect);
        assert_eq!(
            h("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").framing,
            Framing::Length(5)
        );
        assert!(head(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .expect("partial")
            .is_none());
    }

    #[test]
    fn refused_heads_name_their_status() {
        let status = |s: &[u8]| head(s).expect_err("refused");
        assert_eq!(status(b"GARBAGE\r\n\r\n"), 400);
        assert_eq!(status(b"GET /a b HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/9.9\r\n\r\n"), 400);
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        let many: String = (0..150).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(
            status(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            431
        );
    }
}
