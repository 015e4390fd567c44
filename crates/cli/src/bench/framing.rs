//! The `baseline-unix` wire format: a 4-byte little-endian length, then the
//! bytes. Written with one `writev` where the socket takes it all, read
//! through a buffer so that a small frame costs one `read`.

use std::io::{self, IoSlice, Read, Write};

/// Largest frame accepted (the bench never sends more than a few MiB).
const MAX_FRAME: usize = 1 << 30;

/// Writes one frame: header and body without copying them together.
pub(crate) fn write_frame(mut w: impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let hdr = len.to_le_bytes();
    let total = hdr.len() + body.len();
    let mut done = 0;
    while done < total {
        let n = if done < hdr.len() {
            w.write_vectored(&[IoSlice::new(&hdr[done..]), IoSlice::new(body)])?
        } else {
            w.write(&body[done - hdr.len()..])?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

/// Reads frames through one reusable buffer.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl FrameReader {
    /// A reader whose buffer starts at `capacity` bytes (it grows as needed).
    pub(crate) fn new(capacity: usize) -> Self {
        FrameReader {
            buf: vec![0; capacity.max(64 << 10)],
            start: 0,
            end: 0,
        }
    }

    /// The next frame's body; `None` on end of stream between frames.
    pub(crate) fn next(&mut self, mut r: impl Read) -> io::Result<Option<&[u8]>> {
        if !self.fill(&mut r, 4)? {
            return Ok(None);
        }
        let h = &self.buf[self.start..self.start + 4];
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame of {len} bytes is too large"),
            ));
        }
        if !self.fill(&mut r, 4 + len)? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let body = self.start + 4..self.start + 4 + len;
        self.start = body.end;
        Ok(Some(&self.buf[body]))
    }

    /// Makes `n` bytes available from `start`; false on end of stream before
    /// any of them arrived.
    fn fill(&mut self, r: &mut impl Read, n: usize) -> io::Result<bool> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        while self.end < n {
            match r.read(&mut self.buf[self.end..]) {
                Ok(0) if self.end == 0 => return Ok(false),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"hello").expect("write");
        write_frame(&mut wire, b"").expect("write");
        write_frame(&mut wire, &[7u8; 100_000]).expect("write");
        let mut r = FrameReader::new(16);
        let mut src = &wire[..];
        assert_eq!(r.next(&mut src).expect("1"), Some(&b"hello"[..]));
        assert_eq!(r.next(&mut src).expect("2"), Some(&b""[..]));
        assert_eq!(r.next(&mut src).expect("3").map(<[u8]>::len), Some(100_000));
        assert_eq!(r.next(&mut src).expect("eof"), None);
    }

    #[test]
    fn truncated_frame_is_an_error() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"hello").expect("write");
        wire.truncate(6);
        let mut r = FrameReader::new(16);
        assert!(r.next(&wire[..]).is_err());
    }
}
