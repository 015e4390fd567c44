//! A request body as it arrives: `Content-Length` bytes, or chunks
//! (`Transfer-Encoding: chunked`, sizes read by httparse, extensions and
//! trailers skipped) joined; appended to the encoded request, under the
//! body limit.

/// Where a body is: a step, and the bytes left in it (for `Length` and
/// `Data`). A struct, not an enum with data in some variants: every byte
/// of it is always written, which valgrind (the PHP extension's memcheck
/// test) needs to see, as optimized code compares the count whatever the
/// step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Body {
    pub(super) step: Step,
    left: u64,
}

/// The steps of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// `left` bytes still to come.
    Length,
    /// Chunked: the next chunk's size line.
    Size,
    /// Chunked: `left` bytes of the current chunk still to come.
    Data,
    /// Chunked: the line end after a chunk's data.
    DataEnd,
    /// Chunked: trailers, up to the blank line.
    Trailers,
    /// All of it.
    Done,
}

impl Body {
    /// `Content-Length` bytes.
    pub(crate) fn length(n: u64) -> Body {
        Body {
            step: Step::Length,
            left: n,
        }
    }

    /// A chunked body.
    pub(crate) fn chunked() -> Body {
        Body::at(Step::Size)
    }

    /// No body.
    pub(crate) fn none() -> Body {
        Body::at(Step::Done)
    }

    fn at(step: Step) -> Body {
        Body { step, left: 0 }
    }

    /// The whole body is taken.
    pub(crate) fn done(&self) -> bool {
        self.step == Step::Done
    }
}

/// Why a body cannot be taken: over the limit (413), or broken framing (400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Broken {
    TooLarge,
    Framing,
}

/// Takes what `buf` holds of the body into `out` (the body so far has
/// `*taken` bytes; at most `max`), moving `state` on; returns the bytes of
/// `buf` consumed. Stops at the body's end (`Step::Done`) or when `buf`
/// runs out. Trailers longer than `max_trailers` are broken framing.
pub(crate) fn take(
    state: &mut Body,
    buf: &[u8],
    out: &mut Vec<u8>,
    taken: &mut u64,
    max: u64,
    max_trailers: usize,
) -> Result<usize, Broken> {
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        match state.step {
            Step::Done => return Ok(at),
            Step::Length | Step::Data if state.left == 0 => {
                *state = Body::at(if state.step == Step::Length {
                    Step::Done
                } else {
                    Step::DataEnd
                });
            }
            Step::Length | Step::Data => {
                let n = rest
                    .len()
                    .min(usize::try_from(state.left).unwrap_or(usize::MAX));
                if n == 0 {
                    return Ok(at);
                }
                out.extend_from_slice(&rest[..n]);
                *taken += n as u64;
                at += n;
                state.left -= n as u64;
            }
            Step::Size => match httparse::parse_chunk_size(rest) {
                Ok(httparse::Status::Complete((used, size))) => {
                    if taken.saturating_add(size) > max {
                        return Err(Broken::TooLarge);
                    }
                    at += used;
                    *state = if size == 0 {
                        Body::at(Step::Trailers)
                    } else {
                        Body {
                            step: Step::Data,
                            left: size,
                        }
                    };
                }
                Ok(httparse::Status::Partial) if rest.len() > 1024 => return Err(Broken::Framing),
                Ok(httparse::Status::Partial) => return Ok(at),
                Err(_) => return Err(Broken::Framing),
            },
            Step::DataEnd => {
                if rest.len() < 2 {
                    return Ok(at);
                }
                if &rest[..2] != b"\r\n" {
                    return Err(Broken::Framing);
                }
                at += 2;
                *state = Body::chunked();
            }
            Step::Trailers => {
                // No trailer: the blank line at once; else lines up to one.
                if rest.starts_with(b"\r\n") {
                    at += 2;
                    *state = Body::none();
                } else if let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
                    at += end + 4;
                    *state = Body::none();
                } else if rest.len() > max_trailers {
                    return Err(Broken::Framing);
                } else {
                    return Ok(at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(state: Body, pieces: &[&[u8]], max: u64) -> Result<(Vec<u8>, usize), Broken> {
        let (mut s, mut out, mut taken, mut buf, mut used) = (state, Vec::new(), 0, Vec::new(), 0);
        for p in pieces {
            buf.extend_from_slice(p);
            let n = take(&mut s, &buf[used..], &mut out, &mut taken, max, 8192)?;
            used += n;
        }
        assert!(s.done(), "ended");
        assert_eq!(taken, out.len() as u64);
        Ok((out, buf.len() - used))
    }

    #[test]
    fn chunks_join_in_pieces_and_leave_what_follows() {
        let (body, left) = all(
            Body::chunked(),
            &[
                b"5\r\nhel",
                b"lo\r\n1;ext=yes\r\n \r\n",
                b"5\r\nworld\r\n0\r\n",
                b"\r\nGET /next",
            ],
            100,
        )
        .expect("valid");
        assert_eq!(body, b"hello world");
        assert_eq!(left, b"GET /next".len());
        let (body, _) =
            all(Body::chunked(), &[b"3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"], 100).expect("trailers");
        assert_eq!(body, b"abc");
        let (body, left) = all(Body::length(4), &[b"ab", b"cdEXTRA"], 100).expect("length");
        assert_eq!((body.as_slice(), left), (&b"abcd"[..], 5));
    }

    #[test]
    fn broken_and_oversized_bodies() {
        assert_eq!(
            all(Body::chunked(), &[b"zz\r\n"], 100),
            Err(Broken::Framing)
        );
        assert_eq!(
            all(Body::chunked(), &[b"3\r\nabcX\r\n"], 100),
            Err(Broken::Framing)
        );
        assert_eq!(
            all(Body::chunked(), &[b"258\r\n"], 100),
            Err(Broken::TooLarge)
        );
        assert_eq!(
            all(
                Body::chunked(),
                &[b"40\r\n", &[b'a'; 64], b"\r\n40\r\n"],
                100
            ),
            Err(Broken::TooLarge)
        );
    }
}
