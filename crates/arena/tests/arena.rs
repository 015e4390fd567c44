//! The arena between an owner and its peer in one process: loans filled in
//! place, lent, read through views and released; limits, reuse and
//! eviction; and every lie a peer's descriptor or release can tell.

use shmlink_arena::{ArenaError, Key, Owner, Peer, LARGE_ROUND, SMALL_SEGMENT};

const MIB: u64 = 1 << 20;

/// Maps every segment the owner made or retired since the last call.
fn sync(owner: &Owner, peer: &mut Peer) {
    for s in owner.take_new_segments() {
        peer.register(s.slot, s.generation, s.fd).expect("register");
    }
    for (slot, generation) in owner.take_retired() {
        peer.retire(slot, generation).expect("retire");
    }
}

fn protocol(e: ArenaError, needle: &str) {
    match e {
        ArenaError::Protocol(m) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        e => panic!("expected a protocol error with {needle:?}, got {e}"),
    }
}

#[test]
fn a_loan_is_filled_lent_read_in_place_and_released() {
    let owner = Owner::new(64 * MIB);
    let mut peer = Peer::new(64 * MIB);
    for len in [1usize, 4096, 100_000, (3 * MIB) as usize] {
        let mut loan = owner.loan(len).expect("loan");
        assert_eq!(loan.len(), len);
        for (i, b) in loan.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let key = owner.lend(loan);
        sync(&owner, &mut peer);
        let view = peer.view(key, len as u64).expect("view");
        assert!(view.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(view.to_vec().len(), len);
        assert_eq!(owner.lent_count(), 1);
        drop(view);
        let released = peer.take_releases();
        assert_eq!(released, vec![key]);
        owner.release(key).expect("release");
        assert_eq!(owner.lent_count(), 0);
        protocol(owner.release(key).expect_err("twice"), "released twice");
    }
}

#[test]
fn buffers_come_back_for_reuse() {
    let owner = Owner::new(64 * MIB);
    let first = owner.loan(70_000).expect("loan").key();
    // Dropped unsent: the same buffer again.
    assert_eq!(owner.loan(70_000).expect("loan").key(), first);
    // Lent and released: again.
    let key = owner.lend(owner.loan(70_000).expect("loan"));
    owner.release(key).expect("release");
    assert_eq!(owner.loan(70_000).expect("loan").key(), first);
    // A class fills its segment, then gets another one.
    let per_segment = (SMALL_SEGMENT / (128 << 10)) as usize;
    let loans: Vec<_> = (0..=per_segment)
        .map(|_| owner.loan(100_000).expect("loan"))
        .collect();
    let slots: std::collections::BTreeSet<u32> = loans.iter().map(|l| l.key().slot).collect();
    assert_eq!(slots.len(), 2, "one more loan than a segment holds");
    // Large extents are kept and reused.
    let big = owner.loan((5 * MIB) as usize).expect("large").key();
    assert_eq!(owner.loan((5 * MIB) as usize).expect("large").key(), big);
    // 70,000 and 100,000 bytes share the 128 KiB class: two segments, one extent.
    assert_eq!(owner.take_new_segments().len(), 3);
}

#[test]
fn the_limit_holds_and_kept_extents_make_room() {
    let owner = Owner::new(12 * MIB);
    let mut peer = Peer::new(64 * MIB);
    let a = owner.lend(owner.loan((5 * MIB) as usize).expect("first"));
    let _b = owner.loan((5 * MIB) as usize).expect("second");
    sync(&owner, &mut peer);
    match owner.loan((5 * MIB) as usize).expect_err("third") {
        ArenaError::Full {
            len, mapped, max, ..
        } => {
            assert_eq!((len, mapped, max), (5 * MIB, 12 * MIB, 12 * MIB))
        }
        e => panic!("expected Full, got {e}"),
    }
    owner.release(a).expect("release");
    // A small loan needs a new 4 MiB segment: the kept extent is unmapped.
    let small = owner.loan(4096).expect("small after eviction");
    assert_eq!(owner.mapped_bytes(), 6 * MIB + SMALL_SEGMENT);
    let retired = owner.take_retired();
    assert_eq!(retired.len(), 1);
    sync(&owner, &mut peer);
    let _ = small;
    assert_eq!(peer.mapped_bytes(), 6 * MIB + SMALL_SEGMENT);
    let _ = LARGE_ROUND;
}

#[test]
fn lying_descriptors_are_refused() {
    let owner = Owner::new(64 * MIB);
    let mut peer = Peer::new(64 * MIB);
    let key = owner.lend(owner.loan(8192).expect("loan"));
    let other = owner.lend(owner.loan(8192).expect("loan"));
    sync(&owner, &mut peer);
    let with = |f: fn(&mut Key)| {
        let mut k = key;
        f(&mut k);
        k
    };
    protocol(
        peer.view(with(|k| k.slot = 9), 10).expect_err("slot"),
        "no segment",
    );
    protocol(
        peer.view(with(|k| k.generation += 1), 10)
            .expect_err("generation"),
        "holds generation",
    );
    protocol(
        peer.view(with(|k| k.offset = SMALL_SEGMENT - 8), 16)
            .expect_err("past the end"),
        "not inside",
    );
    protocol(
        peer.view(with(|k| k.offset = u64::MAX - 7), 16)
            .expect_err("overflow"),
        "not inside",
    );
    protocol(peer.view(key, 0).expect_err("empty"), "not inside");
    let held = peer.view(key, 8192).expect("view");
    protocol(peer.view(key, 10).expect_err("same buffer"), "overlaps");
    protocol(
        peer.view(with(|k| k.offset += 4096), 10)
            .expect_err("inside a held one"),
        "overlaps",
    );
    // Starting before a held buffer and reaching into it.
    let second = peer.view(other, 8192).expect("the other buffer");
    drop(held);
    protocol(
        peer.view(key, 8192 + 16).expect_err("runs into the other"),
        "overlaps",
    );
    drop(second);
    assert_eq!(peer.take_releases().len(), 2);
    // Releases the owner never lent.
    protocol(
        owner
            .release(with(|k| k.offset += 8))
            .expect_err("never lent"),
        "no buffer is lent",
    );
    protocol(
        owner
            .release(with(|k| k.generation += 1))
            .expect_err("another generation"),
        "no buffer is lent",
    );
}

#[test]
fn segments_that_are_not_arena_segments_are_refused() {
    let mut peer = Peer::new(8 * MIB);
    // Sealed against resizing only: the peer could still map it writable.
    let fd = shmlink_sys::memfd::create_sealed("plain", 4096).expect("memfd");
    protocol(peer.register(0, 1, fd).expect_err("plain"), "not sealed");
    let (sock, _) = std::os::unix::net::UnixStream::pair().expect("pair");
    protocol(
        peer.register(0, 1, sock.into()).expect_err("a socket"),
        "not a sealable memfd",
    );
    let owner = Owner::new(64 * MIB);
    let _l = owner.loan((9 * MIB) as usize).expect("loan");
    let s = owner.take_new_segments().pop().expect("segment");
    protocol(
        peer.register(s.slot, s.generation, s.fd)
            .expect_err("over the limit"),
        "over the limit",
    );
    let owner = Owner::new(64 * MIB);
    let _l = owner.loan(10).expect("loan");
    let s = owner.take_new_segments().pop().expect("segment");
    let dup = s.fd.try_clone().expect("dup");
    peer.register(s.slot, s.generation, s.fd).expect("register");
    protocol(
        peer.register(s.slot, s.generation, dup)
            .expect_err("same generation"),
        "not newer",
    );
    protocol(
        peer.register(
            5000,
            1,
            shmlink_sys::memfd::create_sealed("x", 4096).expect("m"),
        )
        .expect_err("slot"),
        "beyond the limit",
    );
    protocol(
        peer.retire(3, 1).expect_err("nothing there"),
        "no such segment",
    );
}

#[test]
fn a_view_outlives_its_segment_retiring() {
    let owner = Owner::new(64 * MIB);
    let mut peer = Peer::new(64 * MIB);
    let mut loan = owner.loan(5000).expect("loan");
    loan[..5].copy_from_slice(b"still");
    let key = owner.lend(loan);
    sync(&owner, &mut peer);
    let view = peer.view(key, 5).expect("view");
    peer.retire(key.slot, key.generation).expect("retire");
    assert_eq!(&*view, b"still");
    assert_eq!(peer.mapped_bytes(), 0);
}
