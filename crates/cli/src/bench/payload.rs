//! Request payloads: pseudo-random but deterministic bytes, generated before
//! any timing starts.

/// A few distinct payloads of one size, used in turn.
#[derive(Debug)]
pub(crate) struct Payloads {
    bufs: Vec<Vec<u8>>,
}

/// At most this many bytes of payloads per size.
const MAX_TOTAL: usize = 16 << 20;

impl Payloads {
    /// Between 2 and 16 payloads of `size` bytes, the same on every run.
    pub(crate) fn new(size: usize) -> Self {
        let count = (MAX_TOTAL / size.max(1)).clamp(2, 16);
        let mut state = 0x5348_4d4c_494e_4b00 ^ size as u64;
        let bufs = (0..count)
            .map(|_| {
                let mut buf = Vec::with_capacity(size + 8);
                while buf.len() < size {
                    buf.extend_from_slice(&splitmix64(&mut state).to_le_bytes());
                }
                buf.truncate(size);
                buf
            })
            .collect();
        Payloads { bufs }
    }

    /// The payload for call number `i`.
    pub(crate) fn get(&self, i: u64) -> &[u8] {
        &self.bufs[(i % self.bufs.len() as u64) as usize]
    }

    /// Size of every payload.
    pub(crate) fn size(&self) -> usize {
        self.bufs[0].len()
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_distinct() {
        let a = Payloads::new(64);
        let b = Payloads::new(64);
        assert_eq!(a.get(0), b.get(0));
        assert_ne!(a.get(0), a.get(1));
        assert_eq!(a.size(), 64);
        assert_eq!(Payloads::new(0).size(), 0);
        assert_eq!(Payloads::new(1 << 20).bufs.len(), 16);
    }
}
