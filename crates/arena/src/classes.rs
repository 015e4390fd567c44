//! Buffer sizes: power-of-two classes carved from shared segments for
//! small buffers, extents of their own for large ones.

/// Smallest buffer (one page).
pub const MIN_CLASS: u64 = 4096;
/// Largest buffer carved from a shared segment; larger ones are extents.
pub const SMALL_MAX: u64 = 1 << 20;
/// Size of a segment carved into buffers of one small class.
pub const SMALL_SEGMENT: u64 = 4 << 20;
/// Large extents are rounded up to a multiple of this.
pub const LARGE_ROUND: u64 = 2 << 20;

/// Index of the small classes (0 for 4 KiB ... 8 for 1 MiB).
pub(crate) const SMALL_CLASSES: usize = 9;

/// The small class of a buffer of `len` bytes, `None` when it is large.
pub(crate) fn small_class(len: u64) -> Option<usize> {
    if len > SMALL_MAX {
        return None;
    }
    let size = len.max(MIN_CLASS).next_power_of_two();
    Some((size.trailing_zeros() - MIN_CLASS.trailing_zeros()) as usize)
}

/// Buffer size of small class `c`.
pub(crate) fn class_size(c: usize) -> u64 {
    MIN_CLASS << c
}

/// Segment size of a large extent of `len` bytes.
pub(crate) fn extent_size(len: u64) -> u64 {
    len.div_ceil(LARGE_ROUND).max(1) * LARGE_ROUND
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_small_size() {
        assert_eq!(small_class(0), Some(0));
        assert_eq!(small_class(4096), Some(0));
        assert_eq!(small_class(4097), Some(1));
        assert_eq!(small_class(SMALL_MAX), Some(SMALL_CLASSES - 1));
        assert_eq!(small_class(SMALL_MAX + 1), None);
        for len in [1, 4095, 4096, 5000, 65536, 65537, 1 << 20] {
            let c = small_class(len).expect("small");
            assert!(class_size(c) >= len && class_size(c) < 2 * len.max(MIN_CLASS));
        }
        assert_eq!(extent_size(SMALL_MAX + 1), LARGE_ROUND);
        assert_eq!(extent_size(1 << 30), 1 << 30);
        assert_eq!(extent_size((1 << 30) + 1), (1 << 30) + LARGE_ROUND);
    }
}
