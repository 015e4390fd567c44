//! The binary encoding a request travels in from the front to a worker, and
//! the response in from the worker back (docs/protocol.md, "HTTP calls").
//!
//! Every string is a `u32` little-endian length and that many bytes; every
//! decoder bounds-checks each length against what is left and refuses
//! trailing bytes, so a hostile peer's bytes give an error, never a panic.

use std::fmt;

/// First four bytes of an encoded request: `SLHQ`.
pub const REQUEST_MAGIC: [u8; 4] = *b"SLHQ";
/// First four bytes of an encoded response: `SLHR`.
pub const RESPONSE_MAGIC: [u8; 4] = *b"SLHR";

/// Why bytes are not a valid encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);
crate::le::text_error!(WireError);

/// An HTTP request as the worker receives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target as sent: path and query (`/a/b?x=1`).
    pub target: String,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub protocol: String,
    /// The client's address, `IP:PORT`.
    pub remote: String,
    /// Header names (lower case) and values, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The whole body (chunked bodies already joined).
    pub body: Vec<u8>,
}

/// The header of an encoded request whose body the server spooled to a
/// file (docs/protocol.md, "Bodies spooled to a file"): its value is a path
/// the worker opens for reading (`/proc/PID/fd/FD`), and the encoded body
/// is empty. The server drops this header from what a client sends.
pub const BODY_FILE_HEADER: &str = "x-shmlink-body-file";

/// An HTTP response as the worker answers it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    /// Status code, 100..=999.
    pub status: u16,
    /// Header names and values, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Appends `s` as a length-prefixed string.
fn put(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

/// Writes the start of an encoded request: the magic, a header count of 0,
/// then method, target, protocol and remote address. Headers follow with
/// [`push_header`] (each counted as it is written), then the body between
/// [`begin_body`] and [`set_body_len`]. A server that parses the head
/// first and reads the body later writes the request this way, in place.
#[inline]
pub fn begin_request(
    out: &mut Vec<u8>,
    method: &[u8],
    target: &[u8],
    protocol: &[u8],
    remote: &[u8],
) {
    out.clear();
    out.extend_from_slice(&REQUEST_MAGIC);
    out.extend_from_slice(&[0; 4]);
    put(out, method);
    put(out, target);
    put(out, protocol);
    put(out, remote);
}

/// Counts one more header in the request [`begin_request`] started.
#[inline]
fn count_header(out: &mut [u8]) {
    let count = u32::from_le_bytes([out[4], out[5], out[6], out[7]]).saturating_add(1);
    out[4..8].copy_from_slice(&count.to_le_bytes());
}

/// Appends a header to the request [`begin_request`] started, its name as
/// given.
#[inline]
pub fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    put(out, name);
    put(out, value);
    count_header(out);
}

/// Appends a header to the request [`begin_request`] started, its name in
/// lower case (names travel in lower case; an HTTP parser gives them as
/// the client sent them).
#[inline]
pub fn push_header_lowercase(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend(name.iter().map(u8::to_ascii_lowercase));
    put(out, value);
    count_header(out);
}

/// Starts the body after the headers: writes a length of 0 and returns
/// where it lies, for [`set_body_len`]; the body's bytes are appended
/// after it.
#[inline]
pub fn begin_body(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

/// Writes the length of the body whose length lies at `length_at`.
#[inline]
pub fn set_body_len(out: &mut [u8], length_at: usize, len: u64) {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    out[length_at..length_at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Replaces the body begun at `length_at` by a [`BODY_FILE_HEADER`]
/// header naming `path` (where the server spooled the body) and an empty
/// body.
pub fn name_body_file(out: &mut Vec<u8>, length_at: usize, path: &[u8]) {
    out.truncate(length_at);
    push_header(out, BODY_FILE_HEADER.as_bytes(), path);
    begin_body(out);
}

/// Encodes a request from its parts (without building a [`Request`]).
pub fn encode_request<'h>(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    protocol: &str,
    remote: &str,
    headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
    body: &[u8],
) {
    begin_request(
        out,
        method.as_bytes(),
        target.as_bytes(),
        protocol.as_bytes(),
        remote.as_bytes(),
    );
    for (name, value) in headers {
        push_header(out, name.as_bytes(), value);
    }
    let at = begin_body(out);
    out.extend_from_slice(body);
    set_body_len(out, at, body.len() as u64);
}

impl Request {
    /// The encoding of this request.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(
            &mut out,
            &self.method,
            &self.target,
            &self.protocol,
            &self.remote,
            self.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
            &self.body,
        );
        out
    }

    /// Decodes a request.
    ///
    /// # Errors
    /// Wrong magic, a length past the end, text that is not UTF-8, trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Request, WireError> {
        let mut r = Reader::after_magic(bytes, &REQUEST_MAGIC, "request")?;
        let count = r.u32("header count")?;
        let method = r.text("method")?;
        let target = r.text("target")?;
        let protocol = r.text("protocol")?;
        let remote = r.text("remote address")?;
        let headers = r.headers(count)?;
        let body = r.bytes("body")?.to_vec();
        r.end()?;
        Ok(Request {
            method,
            target,
            protocol,
            remote,
            headers,
            body,
        })
    }

    /// Whether `bytes` start like an encoded request (the worker's test for
    /// "this call came from the HTTP front").
    pub fn is_encoded(bytes: &[u8]) -> bool {
        bytes.starts_with(&REQUEST_MAGIC)
    }
}

impl Response {
    /// A response with a status and a body, no headers.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Response {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// Appends the encoding of this response to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&RESPONSE_MAGIC);
        out.extend_from_slice(&u32::from(self.status).to_le_bytes());
        out.extend_from_slice(&(self.headers.len() as u32).to_le_bytes());
        for (name, value) in &self.headers {
            put(out, name.as_bytes());
            put(out, value);
        }
        put(out, &self.body);
    }

    /// Decodes a response; the status must be 100..=999.
    ///
    /// # Errors
    /// As [`ResponseView::parse`].
    pub fn decode(bytes: &[u8]) -> Result<Response, WireError> {
        let v = ResponseView::parse(bytes)?;
        Ok(Response {
            status: v.status,
            headers: v
                .headers()
                .map(|(n, value)| (n.to_string(), value.to_vec()))
                .collect(),
            body: v.body.to_vec(),
        })
    }
}

/// An encoded response read in place: every length checked once by
/// [`ResponseView::parse`], nothing copied (the front and the workers build
/// the HTTP response straight from it).
#[derive(Debug, Clone, Copy)]
pub struct ResponseView<'a> {
    /// Status code, 100..=999.
    pub status: u16,
    count: u32,
    /// The encoded headers (`count` name and value pairs).
    headers: &'a [u8],
    /// The body.
    pub body: &'a [u8],
}

impl<'a> ResponseView<'a> {
    /// Checks an encoded response.
    ///
    /// # Errors
    /// Wrong magic, a status out of range, a length past the end, a header
    /// name that is not UTF-8, trailing bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<ResponseView<'a>, WireError> {
        let mut r = Reader::after_magic(bytes, &RESPONSE_MAGIC, "response")?;
        let status = r.u32("status")?;
        if !(100..=999).contains(&status) {
            return Err(WireError(format!(
                "status {status} is not between 100 and 999"
            )));
        }
        let count = r.u32("header count")?;
        r.fits(count)?;
        let start = r.rest;
        for _ in 0..count {
            r.str("header name")?;
            r.bytes("header value")?;
        }
        let headers = &start[..start.len() - r.rest.len()];
        let body = r.bytes("body")?;
        r.end()?;
        Ok(ResponseView {
            status: status as u16,
            count,
            headers,
            body,
        })
    }

    /// The headers, names and values, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let mut r = Reader {
            rest: self.headers,
            what: "response",
        };
        // Checked by `parse`: every read succeeds.
        (0..self.count)
            .map_while(move |_| Some((r.str("header name").ok()?, r.bytes("header value").ok()?)))
    }
}

/// A bounds-checked reader over encoded bytes.
struct Reader<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn after_magic(
        bytes: &'a [u8],
        magic: &[u8; 4],
        what: &'static str,
    ) -> Result<Reader<'a>, WireError> {
        match bytes.strip_prefix(magic.as_slice()) {
            Some(rest) => Ok(Reader { rest, what }),
            None => Err(WireError(format!(
                "an encoded HTTP {what} starts with {:?}, this does not",
                Magic(magic)
            ))),
        }
    }

    fn u32(&mut self, field: &str) -> Result<u32, WireError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<4>() else {
            return Err(self.short(field, 4));
        };
        self.rest = rest;
        Ok(u32::from_le_bytes(*head))
    }

    fn bytes(&mut self, field: &str) -> Result<&'a [u8], WireError> {
        let len = self.u32(field)? as usize;
        if len > self.rest.len() {
            return Err(self.short(field, len));
        }
        let (s, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(s)
    }

    fn str(&mut self, field: &str) -> Result<&'a str, WireError> {
        let b = self.bytes(field)?;
        std::str::from_utf8(b)
            .map_err(|_| WireError(format!("HTTP {}: {field} is not UTF-8", self.what)))
    }

    fn text(&mut self, field: &str) -> Result<String, WireError> {
        self.str(field).map(str::to_string)
    }

    /// Refuses a count of headers that cannot fit in what is left: each
    /// takes at least 8 bytes, so a larger count is a lie, refused before
    /// anything is allocated for it.
    fn fits(&self, count: u32) -> Result<(), WireError> {
        if count as usize > self.rest.len() / 8 {
            return Err(WireError(format!(
                "HTTP {}: {count} headers cannot fit in the {} bytes left",
                self.what,
                self.rest.len()
            )));
        }
        Ok(())
    }

    fn headers(&mut self, count: u32) -> Result<Vec<(String, Vec<u8>)>, WireError> {
        self.fits(count)?;
        let mut headers = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let name = self.text("header name")?;
            let value = self.bytes("header value")?.to_vec();
            headers.push((name, value));
        }
        Ok(headers)
    }

    fn end(&self) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(WireError(format!(
                "HTTP {}: {} bytes after the body",
                self.what,
                self.rest.len()
            )))
        }
    }

    fn short(&self, field: &str, need: usize) -> WireError {
        WireError(format!(
            "HTTP {}: {field} needs {need} bytes, {} left",
            self.what,
            self.rest.len()
        ))
    }
}

/// Shows a magic as text.
struct Magic<'a>(&'a [u8; 4]);

impl fmt::Debug for Magic<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", String::from_utf8_lossy(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Request {
        Request {
            method: "POST".into(),
            target: "/a?x=1".into(),
            protocol: "HTTP/1.1".into(),
            remote: "127.0.0.1:5000".into(),
            headers: vec![("host".into(), b"h".to_vec()), ("x".into(), vec![0xff])],
            body: b"body".to_vec(),
        }
    }

    #[test]
    fn request_round_trips() {
        let r = sample();
        assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        assert!(Request::is_encoded(&r.encode()));
    }

    #[test]
    fn response_round_trips() {
        let r = Response::new(404, "gone").header("content-type", "text/plain");
        let mut out = Vec::new();
        r.encode_into(&mut out);
        assert_eq!(Response::decode(&out).unwrap(), r);
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(Request::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let e = Request::decode(&longer).unwrap_err();
        assert!(e.0.contains("1 bytes after the body"), "{e}");
    }

    #[test]
    fn a_lying_header_count_is_refused_before_allocating() {
        let mut bytes = sample().encode();
        bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = Request::decode(&bytes).unwrap_err();
        assert!(e.0.contains("4294967295 headers cannot fit"), "{e}");
    }

    #[test]
    fn a_status_out_of_range_is_refused() {
        for status in [0u16, 99, 1000] {
            let mut out = Vec::new();
            Response::new(status, "").encode_into(&mut out);
            assert!(Response::decode(&out).is_err(), "{status}");
        }
    }

    #[test]
    fn a_wrong_magic_is_named() {
        let e = Response::decode(b"echo:xyz").unwrap_err();
        assert!(e.0.contains("starts with \"SLHR\", this does not"), "{e}");
    }

    #[test]
    fn a_request_written_in_steps_decodes_and_can_name_a_spooled_body() {
        let mut out = Vec::new();
        begin_request(&mut out, b"POST", b"/up", b"HTTP/1.1", b"1.2.3.4:5");
        push_header_lowercase(&mut out, b"Content-Type", b"text/plain");
        let at = begin_body(&mut out);
        out.extend_from_slice(b"hello");
        set_body_len(&mut out, at, 5);
        let r = Request::decode(&out).expect("decodes");
        assert_eq!(
            r.headers,
            vec![("content-type".into(), b"text/plain".to_vec())]
        );
        assert_eq!(r.body, b"hello");

        name_body_file(&mut out, at, b"/proc/1/fd/7");
        let r = Request::decode(&out).expect("decodes");
        assert_eq!(r.headers.len(), 2);
        assert_eq!(
            r.headers[1],
            (BODY_FILE_HEADER.into(), b"/proc/1/fd/7".to_vec())
        );
        assert!(r.body.is_empty());
    }
}
