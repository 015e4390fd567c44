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
}

impl Default for ReplyShape {
    fn default() -> Self {
        ReplyShape::Ratio(Ratio::EIGHTH)
    }
}

impl ReplyShape {
    /// From the `--reply-ratio` / `--reply-size` options (clap makes them
    /// mutually exclusive).
    pub(crate) fn from_options(ratio: Option<Ratio>, size: Option<usize>) -> Self {
        match (size, ratio) {
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
        }
    }

    /// Appends the response to `request` to `out`.
    pub(crate) fn fill(self, request: &[u8], out: &mut Vec<u8>) {
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
    fn ratio_round_trips_through_args() {
        let r = ratio("0.3").expect("ratio");
        let args = ReplyShape::Ratio(r).to_args();
        assert_eq!(args, ["--reply-ratio", "0.3"]);
        assert_eq!(ratio(&args[1]), Ok(r));
    }
}
