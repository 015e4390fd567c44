//! A raw HTTP/1.1 client for the tests: requests written as bytes,
//! responses parsed by hand (status line, headers, a body framed by
//! `content-length` or chunks), every read with a deadline.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long anything expected to happen soon may take (the machine may be
/// busy): a deadline, never an expected time.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A response as read off the wire.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) version: String,
    pub(crate) status: u16,
    /// Names in lower case.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client connection.
pub(crate) struct Conn {
    pub(crate) s: TcpStream,
    /// Bytes received and not yet parsed.
    pub(crate) buf: Vec<u8>,
}

impl Conn {
    pub(crate) fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect to the front");
        s.set_read_timeout(Some(DEADLINE)).expect("read timeout");
        s.set_nodelay(true).expect("nodelay");
        Conn { s, buf: Vec::new() }
    }

    pub(crate) fn local(&self) -> SocketAddr {
        self.s.local_addr().expect("local address")
    }

    pub(crate) fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.s.write_all(bytes.as_ref()).expect("write the request");
    }

    /// Reads more; the count read (0: closed).
    pub(crate) fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 << 10];
        let n = self.s.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads until `n` bytes are buffered.
    pub(crate) fn need(&mut self, n: usize) -> io::Result<()> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("closed with {} of {n} bytes", self.buf.len()),
                ));
            }
        }
        Ok(())
    }

    /// Reads up to the next CRLF; the line without it.
    pub(crate) fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed mid-line",
                ));
            }
        }
    }

    /// Reads one response: `Ok(None)` if the server closed the connection
    /// before its first byte.
    pub(crate) fn try_response(&mut self) -> io::Result<Option<Resp>> {
        self.read_response(false)
    }

    /// Reads the response to a HEAD request (no body, whatever its length).
    pub(crate) fn head_response(&mut self) -> Resp {
        self.read_response(true)
            .expect("reading a response")
            .expect("a response, not a closed connection")
    }

    pub(crate) fn read_response(&mut self, to_head: bool) -> io::Result<Option<Resp>> {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.fill()? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("closed mid-head: {:?}", String::from_utf8_lossy(&self.buf)),
                ));
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("a UTF-8 head");
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or("");
        let mut parts = first.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {first:?}"));
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').expect("a header line");
                (n.to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        let mut r = Resp {
            version,
            status,
            headers,
            body: Vec::new(),
        };
        if to_head || (100..200).contains(&status) {
            // No body.
        } else if r.header("transfer-encoding") == Some("chunked") {
            loop {
                let size = self.line()?;
                let size = size.split(';').next().unwrap_or("").trim();
                let n = usize::from_str_radix(size, 16).expect("a chunk size");
                if n == 0 {
                    // Trailers up to the blank line.
                    while !self.line()?.is_empty() {}
                    break;
                }
                self.need(n + 2)?;
                r.body.extend_from_slice(&self.buf[..n]);
                self.buf.drain(..n + 2);
            }
        } else if let Some(n) = r.header("content-length") {
            let n: usize = n.parse().expect("a content length");
            self.need(n)?;
            r.body = self.buf.drain(..n).collect();
        } else if status != 204 && status != 304 {
            // No length: the body runs to the end of the connection.
            while self.fill()? > 0 {}
            r.body = std::mem::take(&mut self.buf);
        }
        Ok(Some(r))
    }

    pub(crate) fn response(&mut self) -> Resp {
        self.try_response()
            .expect("reading a response")
            .expect("a response, not a closed connection")
    }

    /// Waits until the server closes the connection (end of stream or
    /// reset); how long it took. Bytes received meanwhile stay in `buf`.
    pub(crate) fn wait_closed(&mut self) -> Duration {
        let t0 = Instant::now();
        loop {
            match self.fill() {
                Ok(0) => return t0.elapsed(),
                Ok(_) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    panic!("the server did not close the connection within {DEADLINE:?}")
                }
                Err(_) => return t0.elapsed(), // reset
            }
        }
    }
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub(crate) fn get(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n")
}
