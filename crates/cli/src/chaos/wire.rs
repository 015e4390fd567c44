//! The chaos calls: each request carries its client, its sequence number and
//! a checksum of its payload; the echo server returns it whole, so a reply
//! that answers another call or arrives damaged is told apart from a good one.

/// Header bytes before the payload.
pub(crate) const HEADER: usize = 24;
const MAGIC: u32 = 0x5348_4b43; // "SHKC"

/// FNV-1a over `bytes`.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A request of `len` payload bytes for call `seq` of `client`.
pub(crate) fn request(client: u32, seq: u64, len: usize, rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + len);
    v.extend_from_slice(&MAGIC.to_le_bytes());
    v.extend_from_slice(&client.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&[0; 8]);
    v.extend((0..len).map(|_| rng.u8(..)));
    let sum = checksum(&v[HEADER..]);
    v[16..24].copy_from_slice(&sum.to_le_bytes());
    v
}

/// What a reply turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The request, back intact.
    Good,
    /// An intact reply to another call (client, sequence number).
    OtherCall(u32, u64),
    /// Damaged: wrong length, header or checksum.
    Damaged(String),
}

fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

/// Judges `reply` against the `request` it should answer.
pub(crate) fn verify(request: &[u8], reply: &[u8]) -> Verdict {
    if reply == request {
        return Verdict::Good;
    }
    let parsed = (|| {
        let magic = u32::from_le_bytes(field(reply, 0)?);
        let client = u32::from_le_bytes(field(reply, 4)?);
        let seq = u64::from_le_bytes(field(reply, 8)?);
        let sum = u64::from_le_bytes(field(reply, 16)?);
        (magic == MAGIC && checksum(&reply[HEADER..]) == sum).then_some((client, seq))
    })();
    match parsed {
        Some((client, seq)) if reply.get(4..16) != request.get(4..16) => {
            Verdict::OtherCall(client, seq)
        }
        _ => Verdict::Damaged(format!(
            "{} bytes back for a request of {} bytes",
            reply.len(),
            request.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_other_and_damaged_replies_are_told_apart() {
        let mut rng = fastrand::Rng::with_seed(7);
        let a = request(1, 10, 100, &mut rng);
        let b = request(1, 11, 100, &mut rng);
        assert_eq!(verify(&a, &a), Verdict::Good);
        assert_eq!(verify(&a, &b), Verdict::OtherCall(1, 11));
        let mut bad = a.clone();
        bad[HEADER + 3] ^= 1;
        assert!(matches!(verify(&a, &bad), Verdict::Damaged(_)));
        assert!(matches!(verify(&a, &a[..50]), Verdict::Damaged(_)));
        assert!(matches!(verify(&a, &[]), Verdict::Damaged(_)));
    }
}
