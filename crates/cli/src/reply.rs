//! What the echo server answers, shared by `echo` (to build responses) and
//! `bench` (to know and check what each response must be).

use crate::parse::Ratio;

/// The shape of an echo response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyShape {
    /// The first ⌈R × len⌉ bytes of the request.
    Ratio(Ratio),
    /// Exactly N bytes: the request repeated or truncated to N bytes; N zero
    /// bytes when the request is empty.
    Fixed(usize),
    /// [`DIGEST_LEN`] bytes that depend on the request's length and on its
    /// first and last 4 KiB (so the server touches both ends of a request
    /// however large), as Flow-IPC's own benchmark answers: the same small
    /// reply for every path of `shmlink bench --paths`.
    Digest,
}

/// Length of a [`ReplyShape::Digest`] response.
pub(crate) const DIGEST_LEN: usize = 64;
/// Bytes hashed at each end of the request.
const DIGEST_SPAN: usize = 4096;

/// A hash of `data` cheap enough to stay out of the figure it serves:
/// four independent lanes of 8-byte words (multiply, rotate), folded
/// together with the tail bytes. A byte-at-a-time hash (FNV-1a) costs ~10 µs
/// for the 8 KiB a digest reads, which used to be most of a lent call's
/// measured round trip; this costs well under 1 µs. Not a cryptographic
/// hash: it only has to notice wrong bytes, lengths and ends.
fn lanes_hash(data: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes = [K, K ^ 1, K ^ 2, K ^ 3];
    let mut blocks = data.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    let tail = blocks.remainder().iter().fold(data.len() as u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(K)
    });
    lanes
        .iter()
        .fold(tail, |h, &l| (h ^ l).wrapping_mul(K).rotate_left(31))
}

/// The digest response to `request`: its length, the hashes of its first
/// and last 4 KiB, then zeros.
fn digest(request: &[u8]) -> [u8; DIGEST_LEN] {
    let n = request.len();
    let mut d = [0u8; DIGEST_LEN];
    d[0..8].copy_from_slice(&(n as u64).to_le_bytes());
    d[8..16].copy_from_slice(&lanes_hash(&request[..n.min(DIGEST_SPAN)]).to_le_bytes());
    d[16..24].copy_from_slice(&lanes_hash(&request[n.saturating_sub(DIGEST_SPAN)..]).to_le_bytes());
    d
}

impl Default for ReplyShape {
    fn default() -> Self {
        ReplyShape::Ratio(Ratio::EIGHTH)
    }
}

impl ReplyShape {
    /// From the `--reply-ratio` / `--reply-size` options (clap makes them
    /// mutually exclusive).
    pub(crate) fn from_options(ratio: Option<Ratio>, size: Option<usize>, digest: bool) -> Self {
        match (size, ratio) {
            _ if digest => ReplyShape::Digest,
            (Some(n), _) => ReplyShape::Fixed(n),
            (None, Some(r)) => ReplyShape::Ratio(r),
            (None, None) => ReplyShape::default(),
        }
    }

    /// Length of the response to a request of `len` bytes.
    pub(crate) fn len_for(self, len: usize) -> usize {
        match self {
            ReplyShape::Ratio(r) => r.ceil_of(len),
            ReplyShape::Fixed(n) => n,
            ReplyShape::Digest => DIGEST_LEN,
        }
    }

    /// Appends the response to `request` to `out`.
    pub(crate) fn fill(self, request: &[u8], out: &mut Vec<u8>) {
        if self == ReplyShape::Digest {
            out.extend_from_slice(&digest(request));
            return;
        }
        let n = self.len_for(request.len());
        if let Some(head) = request.get(..n) {
            // The common shape (a ratio of at most 1): one copy.
            out.extend_from_slice(head);
            return;
        }
        if request.is_empty() {
            out.resize(out.len() + n, 0);
            return;
        }
        out.reserve(n);
        let mut left = n;
        while left > 0 {
            let take = left.min(request.len());
            out.extend_from_slice(&request[..take]);
            left -= take;
        }
    }

    /// Whether `response` is exactly the response to `request`, without
    /// building the expected bytes.
    pub(crate) fn matches(self, request: &[u8], response: &[u8]) -> bool {
        if self == ReplyShape::Digest {
            return response == digest(request);
        }
        if response.len() != self.len_for(request.len()) {
            return false;
        }
        if request.is_empty() {
            return response.iter().all(|&b| b == 0);
        }
        response
            .chunks(request.len())
            .all(|chunk| chunk == &request[..chunk.len()])
    }

    /// Command-line options that make `shmlink echo` answer this way.
    pub(crate) fn to_args(self) -> Vec<String> {
        match self {
            ReplyShape::Ratio(r) => vec!["--reply-ratio".into(), r.to_string()],
            ReplyShape::Fixed(n) => vec!["--reply-size".into(), n.to_string()],
            ReplyShape::Digest => vec!["--reply-digest".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::ratio;

    #[test]
    fn ratio_takes_a_prefix() {
        let shape = ReplyShape::default();
        let req: Vec<u8> = (0..65).collect();
        let mut out = Vec::new();
        shape.fill(&req, &mut out);
        assert_eq!(out, &req[..9]);
        assert!(shape.matches(&req, &out));
        assert!(!shape.matches(&req, &req[1..10]));
    }

    #[test]
    fn fixed_repeats_truncates_and_zero_fills() {
        let shape = ReplyShape::Fixed(5);
        let mut out = Vec::new();
        shape.fill(b"ab", &mut out);
        assert_eq!(out, b"ababa");
        assert!(shape.matches(b"ab", b"ababa"));
        out.clear();
        shape.fill(b"abcdefgh", &mut out);
        assert_eq!(out, b"abcde");
        out.clear();
        shape.fill(b"", &mut out);
        assert_eq!(out, [0; 5]);
        assert!(shape.matches(b"", &[0; 5]));
    }

    #[test]
    fn digest_reads_both_ends() {
        let shape = ReplyShape::Digest;
        let mut big = vec![1u8; 10_000];
        let mut out = Vec::new();
        shape.fill(&big, &mut out);
        assert_eq!(out.len(), DIGEST_LEN);
        assert!(shape.matches(&big, &out));
        big[9_999] = 2;
        assert!(!shape.matches(&big, &out), "the last 4 KiB count");
        big[9_999] = 1;
        big[0] = 2;
        assert!(!shape.matches(&big, &out), "the first 4 KiB count");
        assert!(!shape.matches(&big[..9_000], &out), "the length counts");
        assert_eq!(shape.to_args(), ["--reply-digest"]);
    }

    #[test]
    fn ratio_round_trips_through_args() {
        let r = ratio("0.3").expect("ratio");
        let args = ReplyShape::Ratio(r).to_args();
        assert_eq!(args, ["--reply-ratio", "0.3"]);
        assert_eq!(ratio(&args[1]), Ok(r));
    }
}
