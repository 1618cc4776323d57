// SPDX-License-Identifier: GPL-2.0

//! Tests of the holder of early requests (`roce::reorder`).

use rxe_roce::roce::io::Instant;
use rxe_roce::roce::psn::Psn;
use rxe_roce::roce::reorder::{
    Held,
    MAX_GAP, //
};

fn psn(n: u32) -> Psn {
    Psn::new(n)
}

#[test]
fn holds_early_requests_and_gives_them_back_in_turn() {
    let mut h: Held<u32, 4> = Held::new();
    let t = Instant(100);
    assert_eq!(h.hold(psn(12), psn(10), 12, t), Ok(()));
    assert_eq!(h.hold(psn(11), psn(10), 11, t), Ok(()));
    assert_eq!(h.len(), 2);
    assert_eq!(h.take(psn(10)), None);
    assert_eq!(h.take(psn(11)), Some(11));
    assert_eq!(h.take(psn(12)), Some(12));
    assert!(h.is_empty());
}

#[test]
fn refuses_what_is_not_early_a_duplicate_and_beyond_capacity() {
    let mut h: Held<u32, 2> = Held::new();
    let t = Instant(0);
    // Expected, old, or too far ahead.
    assert_eq!(h.hold(psn(10), psn(10), 1, t), Err(1));
    assert_eq!(h.hold(psn(9), psn(10), 2, t), Err(2));
    assert_eq!(h.hold(psn(10 + MAX_GAP + 1), psn(10), 3, t), Err(3));
    assert_eq!(h.hold(psn(10 + MAX_GAP), psn(10), 4, t), Ok(()));
    // A second copy of a held PSN: the first stays.
    assert_eq!(h.hold(psn(10 + MAX_GAP), psn(10), 5, t), Err(5));
    assert_eq!(h.hold(psn(11), psn(10), 6, t), Ok(()));
    assert!(h.is_full());
    assert_eq!(h.hold(psn(12), psn(10), 7, t), Err(7));
    assert_eq!(h.take(psn(10 + MAX_GAP)), Some(4));
}

#[test]
fn early_across_the_wrap_of_the_psn_space() {
    let mut h: Held<u32, 2> = Held::new();
    let epsn = Psn::MAX;
    assert_eq!(h.hold(psn(1), epsn, 1, Instant(0)), Ok(()));
    assert_eq!(h.hold(psn(0), epsn, 0, Instant(0)), Ok(()));
    assert_eq!(h.take_first(epsn), Some(0));
    assert_eq!(h.take_first(epsn), Some(1));
    assert_eq!(h.take_first(epsn), None);
}

#[test]
fn releases_in_psn_order_whatever_the_arrival_order() {
    let mut h: Held<u32, 8> = Held::new();
    for (i, p) in [15u32, 12, 17, 11].into_iter().enumerate() {
        assert_eq!(h.hold(psn(p), psn(10), p, Instant(i as u64)), Ok(()));
    }
    let order: [Option<u32>; 5] = core::array::from_fn(|_| h.take_first(psn(10)));
    assert_eq!(order, [Some(11), Some(12), Some(15), Some(17), None]);
}

#[test]
fn deadline_follows_the_oldest_request_held() {
    let mut h: Held<u32, 4> = Held::new();
    assert_eq!(h.deadline(50), None);
    assert_eq!(h.hold(psn(12), psn(10), 12, Instant(1_000)), Ok(()));
    assert_eq!(h.hold(psn(13), psn(10), 13, Instant(2_000)), Ok(()));
    assert_eq!(h.deadline(50), Some(Instant(1_050)));
    assert_eq!(h.take(psn(12)), Some(12));
    assert_eq!(h.deadline(50), Some(Instant(2_050)));
}

/// The holder's count of what it holds (kept so that an empty holder costs no scan) agrees with
/// a model over a long pseudo-random sequence of holds and takes.
#[test]
fn the_count_of_held_requests_follows_every_hold_and_take() {
    let mut h: Held<u32, 4> = Held::new();
    let mut model: Vec<u32> = Vec::new();
    let epsn = 1000;
    let mut x: u32 = 0x1234_5678;
    for step in 0..20_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let p = epsn + 1 + x % 8;
        match (x >> 8) % 4 {
            0 | 1 => {
                let ok = h
                    .hold(psn(p), psn(epsn), p, Instant(u64::from(step)))
                    .is_ok();
                let fits = !model.contains(&p) && model.len() < 4;
                assert_eq!(ok, fits);
                if ok {
                    model.push(p);
                }
            }
            2 => {
                let got = h.take(psn(p));
                let want = model.iter().position(|&m| m == p).map(|i| model.remove(i));
                assert_eq!(got, want);
            }
            _ => {
                let got = h.take_first(psn(epsn));
                let want = model.iter().copied().min();
                if let Some(w) = want {
                    model.retain(|&m| m != w);
                }
                assert_eq!(got, want);
            }
        }
        assert_eq!(h.len(), model.len());
        assert_eq!(h.is_empty(), model.is_empty());
        assert_eq!(h.is_full(), model.len() == 4);
        assert_eq!(h.deadline(5).is_some(), !model.is_empty());
    }
}
