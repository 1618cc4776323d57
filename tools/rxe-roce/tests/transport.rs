// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the transport arithmetic: sequence numbers, AETH syndromes,
//! timers, retry counters, MTU and segmentation.

use std::cmp::Ordering;

use rxe_roce::roce::aeth::{
    CreditCount,
    NakCode,
    ReservedSyndrome,
    Syndrome, //
};
use rxe_roce::roce::icrc::{
    IpHeader,
    Ipv4Header,
    UdpHeader, //
};
use rxe_roce::roce::mtu::{
    ib_mtu_for_netdev_mtu,
    IbMtu, //
};
use rxe_roce::roce::opcode::{
    ExtHeaders,
    Opcode,
    Position,
    QpType,
    Transport, //
};
use rxe_roce::roce::packet::{
    packet_len,
    parse,
    PacketBuilder, //
};
use rxe_roce::roce::psn::{
    Msn,
    Psn,
    Ssn,
    SEQ24_MASK, //
};
use rxe_roce::roce::segment::{
    packets_for,
    MessageKind,
    Segment,
    SegmentError,
    Segmenter,
    MAX_MESSAGE_LEN, //
};
use rxe_roce::roce::timer::{
    AckTimeout,
    RetryCounter,
    RnrTimer, //
};
use rxe_roce::HostCrc32;
use zerocopy::FromZeros;

/// The C driver's `psn_compare()`.
fn c_psn_compare(a: u32, b: u32) -> i32 {
    (a.wrapping_sub(b) << 8) as i32
}

#[test]
fn psn_wraps_at_24_bits() {
    assert_eq!(Psn::MAX.get(), 0xff_ffff);
    assert_eq!(Psn::MAX.next(), Psn::ZERO);
    assert_eq!(Psn::ZERO.prev(), Psn::MAX);
    assert_eq!(Psn::new(0x1ff_ffff), Psn::MAX);
    assert_eq!(Psn::new(0xff_fff0).add(0x20), Psn::new(0x10));
    assert_eq!(Psn::new(0x10).sub(0x20), Psn::new(0xff_fff0));
    assert_eq!(Psn::new(5).add(u32::MAX), Psn::new(4));
    assert_eq!(Psn::new(0x10).distance_from(Psn::new(0xff_fff0)), 0x20);
    assert_eq!(Psn::new(0xff_fff0).distance_from(Psn::new(0x10)), 0xff_ffe0);
    assert_eq!(Psn::ZERO.distance_from(Psn::ZERO), 0);
}

#[test]
fn psn_serial_order_across_the_wrap() {
    assert_eq!(Psn::ZERO.serial_cmp(Psn::MAX), Ordering::Greater);
    assert_eq!(Psn::MAX.serial_cmp(Psn::ZERO), Ordering::Less);
    assert!(Psn::MAX.is_before(Psn::ZERO));
    assert!(Psn::new(3).is_after(Psn::new(0xff_fffd)));
    assert_eq!(Psn::new(7).serial_cmp(Psn::new(7)), Ordering::Equal);
    // Half the space apart is ambiguous; both ways compare as "before", like C.
    let a = Psn::new(0);
    let b = Psn::new(0x80_0000);
    assert!(a.is_before(b));
    assert!(b.is_before(a));
    // Just under half: a clear order.
    let c = Psn::new(0x7f_ffff);
    assert!(a.is_before(c) && c.is_after(a));
    // Agreement with the C function on a spread of pairs.
    let mut x = 0x1234_5678u32;
    for _ in 0..100_000 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let (p, q) = (x & SEQ24_MASK, x.rotate_left(11) & SEQ24_MASK);
        let c = c_psn_compare(p, q).cmp(&0);
        assert_eq!(Psn::new(p).serial_cmp(Psn::new(q)), c, "{p:#x} {q:#x}");
    }
    for (p, q) in [
        (0, SEQ24_MASK),
        (SEQ24_MASK, 0),
        (1, 0x80_0001),
        (0x80_0001, 1),
    ] {
        let c = c_psn_compare(p, q).cmp(&0);
        assert_eq!(Psn::new(p).serial_cmp(Psn::new(q)), c);
    }
}

#[test]
fn psn_window_across_the_wrap() {
    let start = Psn::new(0xff_fffe);
    assert!(start.in_window(start, 1));
    assert!(Psn::ZERO.in_window(start, 3));
    assert!(!Psn::new(1).in_window(start, 3));
    assert!(!Psn::new(0xff_fffd).in_window(start, 3));
    assert!(!start.in_window(start, 0));
}

#[test]
fn msn_and_ssn_wrap_like_psn() {
    assert_eq!(Msn::MAX.next(), Msn::ZERO);
    assert_eq!(Ssn::MAX.next(), Ssn::ZERO);
    assert!(Msn::new(0xff_ffff).is_before(Msn::new(2)));
    assert_eq!(Ssn::new(1).distance_from(Ssn::MAX), 2);
    assert_eq!(Msn::default(), Msn::ZERO);
}

#[test]
fn syndromes_round_trip_and_reserved_ones_are_refused() {
    let mut decoded = 0;
    for raw in 0..=255u8 {
        match Syndrome::decode(raw) {
            Ok(s) => {
                decoded += 1;
                assert_eq!(s.encode(), raw);
                assert_eq!(s.is_ack(), raw & 0xe0 == 0);
            }
            Err(ReservedSyndrome(r)) => {
                assert_eq!(r, raw);
                let kind = raw & 0xe0;
                assert!(kind == 0x40 || kind >= 0x80 || (kind == 0x60 && raw & 0x1f > 4));
            }
        }
    }
    // 32 ACK + 32 RNR NAK + 5 NAK codes.
    assert_eq!(decoded, 69);
    assert_eq!(Syndrome::ACK_UNLIMITED.encode(), 0x1f);
    assert_eq!(Syndrome::Nak(NakCode::PsnSequenceError).encode(), 0x60);
    assert_eq!(Syndrome::Nak(NakCode::InvalidRequest).encode(), 0x61);
    assert_eq!(Syndrome::Nak(NakCode::RemoteAccessError).encode(), 0x62);
    assert_eq!(
        Syndrome::Nak(NakCode::RemoteOperationalError).encode(),
        0x63
    );
    assert_eq!(Syndrome::Nak(NakCode::InvalidRdRequest).encode(), 0x64);
    assert_eq!(
        Syndrome::decode(0x2e),
        Ok(Syndrome::RnrNak(RnrTimer::new(14).unwrap()))
    );
}

#[test]
fn credit_counts_follow_the_ibta_table() {
    assert_eq!(CreditCount::UNLIMITED.credits(), None);
    assert_eq!(CreditCount::from_bits(0).credits(), Some(0));
    assert_eq!(CreditCount::from_bits(4).credits(), Some(4));
    assert_eq!(CreditCount::from_bits(5).credits(), Some(6));
    assert_eq!(CreditCount::from_bits(20).credits(), Some(1024));
    assert_eq!(CreditCount::from_bits(30).credits(), Some(32768));
    assert_eq!(CreditCount::from_bits(0xff), CreditCount::UNLIMITED);
    assert_eq!(CreditCount::at_most(0).code(), 0);
    assert_eq!(CreditCount::at_most(5).code(), 4);
    assert_eq!(CreditCount::at_most(6).code(), 5);
    assert_eq!(CreditCount::at_most(1000).code(), 19);
    assert_eq!(CreditCount::at_most(u32::MAX).code(), 30);
    // Codes are increasing, so at_most is the inverse on table values.
    for code in 0..31u8 {
        let c = CreditCount::from_bits(code);
        assert_eq!(CreditCount::at_most(c.credits().unwrap()), c);
    }
}

#[test]
fn ack_timeout_is_4096_ns_times_two_to_the_n() {
    assert_eq!(AckTimeout::new(0).unwrap().nanos(), None);
    assert_eq!(AckTimeout::new(1).unwrap().nanos(), Some(8192));
    assert_eq!(AckTimeout::new(14).unwrap().nanos(), Some(67_108_864));
    assert_eq!(AckTimeout::new(31).unwrap().nanos(), Some(4096u64 << 31));
    assert_eq!(AckTimeout::new(32), None);
    assert_eq!(AckTimeout::new(18).unwrap().exponent(), 18);
    for n in 1..=31u8 {
        let ns = AckTimeout::new(n).unwrap().nanos().unwrap();
        assert_eq!(ns as f64, 4.096e3 * 2f64.powi(i32::from(n)));
    }
}

#[test]
fn rnr_timer_table() {
    let us = |c| RnrTimer::new(c).unwrap().micros();
    assert_eq!(us(0), 655_360);
    assert_eq!(us(1), 10);
    assert_eq!(us(12), 640);
    assert_eq!(us(14), 1280);
    assert_eq!(us(25), 61_440);
    assert_eq!(us(31), 491_520);
    assert_eq!(RnrTimer::new(32), None);
    assert_eq!(RnrTimer::from_bits(0x3f).code(), 31);
    // Strictly increasing from code 1 to 31.
    for c in 2..32 {
        assert!(us(c) > us(c - 1));
    }
    assert_eq!(RnrTimer::at_least_micros(0).code(), 1);
    assert_eq!(RnrTimer::at_least_micros(100).code(), 7);
    assert_eq!(RnrTimer::at_least_micros(120).code(), 7);
    assert_eq!(RnrTimer::at_least_micros(491_520).code(), 31);
    assert_eq!(RnrTimer::at_least_micros(491_521).code(), 0);
}

#[test]
fn retry_counters() {
    let mut t = RetryCounter::transport(7).unwrap();
    for _ in 0..7 {
        assert!(t.try_consume());
    }
    assert!(!t.try_consume());
    assert_eq!(t.remaining(), Some(0));
    t.reset();
    assert_eq!(t.remaining(), Some(7));

    let mut r = RetryCounter::rnr(7).unwrap();
    assert!(r.is_infinite());
    for _ in 0..1000 {
        assert!(r.try_consume());
    }
    assert_eq!(r.remaining(), None);

    let mut r = RetryCounter::rnr(2).unwrap();
    assert!(!r.is_infinite());
    assert!(r.try_consume() && r.try_consume());
    assert!(!r.try_consume());

    let mut z = RetryCounter::transport(0).unwrap();
    assert!(!z.try_consume());
    assert_eq!(RetryCounter::transport(8), None);
    assert_eq!(RetryCounter::rnr(8), None);
}

#[test]
fn ib_mtu() {
    for (raw, bytes) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
        let mtu = IbMtu::from_raw(raw).unwrap();
        assert_eq!(mtu.raw(), raw);
        assert_eq!(mtu.bytes(), bytes);
        assert_eq!(IbMtu::floor_of(bytes), Some(mtu));
        assert_eq!(IbMtu::floor_of(bytes + 1), Some(mtu));
    }
    assert_eq!(IbMtu::from_raw(0), None);
    assert_eq!(IbMtu::from_raw(6), None);
    assert_eq!(IbMtu::floor_of(255), None);
    assert!(IbMtu::Mtu256 < IbMtu::Mtu4096);
}

#[test]
fn ib_mtu_for_netdev_mtu_leaves_80_bytes() {
    let cases = [
        (0, 256),
        (100, 256),
        (335, 256),
        (336, 256),
        (591, 256),
        (592, 512),
        (1103, 512),
        (1104, 1024),
        (1500, 1024),
        (2127, 1024),
        (2128, 2048),
        (4175, 2048),
        (4176, 4096),
        (9000, 4096),
        (u32::MAX, 4096),
    ];
    for (netdev, ib) in cases {
        assert_eq!(
            ib_mtu_for_netdev_mtu(netdev).bytes(),
            ib,
            "netdev MTU {netdev}"
        );
    }
}

fn collect(t: Transport, k: MessageKind, total: u32, mtu: IbMtu) -> Vec<Segment> {
    Segmenter::new(t, k, total, mtu).unwrap().collect()
}

fn opcodes(s: &[Segment]) -> Vec<Opcode> {
    s.iter().map(|s| s.opcode).collect()
}

#[test]
fn segmentation_of_sends_and_writes() {
    use MessageKind::*;
    let m = IbMtu::Mtu1024;
    let s = collect(Transport::Rc, Send, 0, m);
    assert_eq!(opcodes(&s), [Opcode::RC_SEND_ONLY]);
    assert_eq!((s[0].offset, s[0].len, s[0].pad_count()), (0, 0, 0));
    let s = collect(Transport::Rc, Send, 1024, m);
    assert_eq!(opcodes(&s), [Opcode::RC_SEND_ONLY]);
    let s = collect(Transport::Rc, Send, 1025, m);
    assert_eq!(opcodes(&s), [Opcode::RC_SEND_FIRST, Opcode::RC_SEND_LAST]);
    assert_eq!((s[1].offset, s[1].len, s[1].pad_count()), (1024, 1, 3));
    let s = collect(Transport::Rc, Send, 4096, m);
    assert_eq!(
        opcodes(&s),
        [
            Opcode::RC_SEND_FIRST,
            Opcode::RC_SEND_MIDDLE,
            Opcode::RC_SEND_MIDDLE,
            Opcode::RC_SEND_LAST
        ]
    );
    let s = collect(Transport::Uc, SendWithImm, 2000, m);
    assert_eq!(
        opcodes(&s),
        [Opcode::UC_SEND_FIRST, Opcode::UC_SEND_LAST_WITH_IMMEDIATE]
    );
    let s = collect(Transport::Rc, SendWithInv, 3000, m);
    assert_eq!(
        opcodes(&s),
        [
            Opcode::RC_SEND_FIRST,
            Opcode::RC_SEND_MIDDLE,
            Opcode::RC_SEND_LAST_WITH_INVALIDATE
        ]
    );
    let s = collect(Transport::Rc, SendWithInv, 10, m);
    assert_eq!(opcodes(&s), [Opcode::RC_SEND_ONLY_WITH_INVALIDATE]);

    // RETH on the first packet of a write only; immediate on the last.
    let s = collect(Transport::Rc, RdmaWriteWithImm, 3000, m);
    assert_eq!(
        opcodes(&s),
        [
            Opcode::RC_RDMA_WRITE_FIRST,
            Opcode::RC_RDMA_WRITE_MIDDLE,
            Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE
        ]
    );
    assert_eq!(
        s.iter().map(Segment::has_reth).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert_eq!(
        s.iter().map(Segment::is_last).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(s[2].len, 3000 - 2048);
    let s = collect(Transport::Uc, RdmaWriteWithImm, 7, m);
    assert_eq!(opcodes(&s), [Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE]);
    assert!(s[0].has_reth());
    let s = collect(Transport::Uc, RdmaWrite, 0, m);
    assert_eq!(opcodes(&s), [Opcode::UC_RDMA_WRITE_ONLY]);

    // UD: single packet up to the MTU.
    let s = collect(Transport::Ud, SendWithImm, 1024, m);
    assert_eq!(opcodes(&s), [Opcode::UD_SEND_ONLY_WITH_IMMEDIATE]);
}

#[test]
fn segmentation_of_reads_and_atomics() {
    use MessageKind::*;
    let m = IbMtu::Mtu1024;
    let seg = Segmenter::new(Transport::Rc, RdmaRead, 5000, m).unwrap();
    assert_eq!(seg.packet_count(), 1);
    assert_eq!(seg.psn_count(), 5);
    let s: Vec<_> = seg.collect();
    assert_eq!(opcodes(&s), [Opcode::RC_RDMA_READ_REQUEST]);
    assert_eq!(s[0].len, 0);
    assert!(s[0].has_reth());
    let seg = Segmenter::new(Transport::Rc, RdmaRead, 0, m).unwrap();
    assert_eq!(seg.psn_count(), 1);

    let s = collect(Transport::Rc, ReadResponse, 5000, m);
    assert_eq!(
        opcodes(&s),
        [
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            Opcode::RC_RDMA_READ_RESPONSE_LAST
        ]
    );
    assert_eq!(s[4].len, 5000 - 4096);
    let s = collect(Transport::Rc, ReadResponse, 1, m);
    assert_eq!(opcodes(&s), [Opcode::RC_RDMA_READ_RESPONSE_ONLY]);

    for (kind, op) in [
        (CompareSwap, Opcode::RC_COMPARE_SWAP),
        (FetchAdd, Opcode::RC_FETCH_ADD),
        (Flush, Opcode::RC_FLUSH),
    ] {
        let seg = Segmenter::new(Transport::Rc, kind, 8, m).unwrap();
        assert_eq!((seg.packet_count(), seg.psn_count()), (1, 1));
        let s: Vec<_> = seg.collect();
        assert_eq!(opcodes(&s), [op]);
        assert_eq!(s[0].len, 0);
    }
    let s = collect(Transport::Rc, AtomicWrite, 8, m);
    assert_eq!(opcodes(&s), [Opcode::RC_ATOMIC_WRITE]);
    assert_eq!((s[0].len, s[0].pad_count()), (8, 0));
}

#[test]
fn segmentation_errors() {
    use MessageKind::*;
    let m = IbMtu::Mtu1024;
    let err = |t, k, n| Segmenter::new(t, k, n, m).err();
    assert_eq!(
        err(Transport::Uc, RdmaRead, 1),
        Some(SegmentError::NotAllowed)
    );
    assert_eq!(
        err(Transport::Uc, SendWithInv, 1),
        Some(SegmentError::NotAllowed)
    );
    assert_eq!(
        err(Transport::Uc, CompareSwap, 8),
        Some(SegmentError::NotAllowed)
    );
    assert_eq!(
        err(Transport::Ud, RdmaWrite, 1),
        Some(SegmentError::NotAllowed)
    );
    assert_eq!(err(Transport::Ud, Send, 1025), Some(SegmentError::TooLong));
    assert_eq!(
        err(Transport::Rc, Send, MAX_MESSAGE_LEN + 1),
        Some(SegmentError::TooLong)
    );
    assert_eq!(
        err(Transport::Rc, AtomicWrite, 4),
        Some(SegmentError::BadAtomicWriteLength)
    );
    let seg = Segmenter::new(Transport::Rc, RdmaWrite, MAX_MESSAGE_LEN, IbMtu::Mtu4096).unwrap();
    assert_eq!(seg.packet_count(), 1 << 19);
    let last = seg.last().unwrap();
    assert_eq!(last.opcode, Opcode::RC_RDMA_WRITE_LAST);
    assert_eq!(
        (last.index, last.offset, last.len),
        ((1 << 19) - 1, MAX_MESSAGE_LEN - 4096, 4096)
    );
}

#[test]
fn segmentation_resumes_mid_message() {
    let mut seg = Segmenter::new(Transport::Rc, MessageKind::Send, 4000, IbMtu::Mtu1024).unwrap();
    seg.seek(2);
    assert_eq!(seg.size_hint(), (2, Some(2)));
    let s: Vec<_> = seg.clone().collect();
    assert_eq!(opcodes(&s), [Opcode::RC_SEND_MIDDLE, Opcode::RC_SEND_LAST]);
    assert_eq!((s[0].index, s[0].offset), (2, 2048));
    seg.seek(99);
    assert_eq!(seg.next(), None);
}

#[test]
fn segments_cover_the_message_and_build_valid_packets() {
    let mut x = 0x9e37_79b9u32;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let kinds = [
        (Transport::Rc, MessageKind::Send, QpType::Rc),
        (Transport::Rc, MessageKind::RdmaWriteWithImm, QpType::Rc),
        (Transport::Rc, MessageKind::ReadResponse, QpType::Rc),
        (Transport::Uc, MessageKind::SendWithImm, QpType::Uc),
        (Transport::Uc, MessageKind::RdmaWrite, QpType::Uc),
        (Transport::Ud, MessageKind::Send, QpType::Ud),
    ];
    let mut ip = Ipv4Header::new_zeroed();
    ip.version_ihl = 0x45;
    let mut udp = UdpHeader::new_zeroed();
    let mut buf = vec![0u8; 4096 + 64];
    for _ in 0..3000 {
        let (t, kind, qp_type) = kinds[(rand() % kinds.len() as u32) as usize];
        let mtu = IbMtu::from_raw(1 + rand() % 5).unwrap();
        let total = if t == Transport::Ud {
            rand() % (mtu.bytes() + 1)
        } else {
            match rand() % 4 {
                0 => rand() % 16,
                1 => mtu.bytes() * (1 + rand() % 4),
                _ => rand() % 20_000,
            }
        };
        let seg = Segmenter::new(t, kind, total, mtu).unwrap();
        assert_eq!(seg.packet_count(), packets_for(total, mtu.bytes()));
        let segs: Vec<_> = seg.collect();
        let mut next_offset = 0;
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(s.index as usize, i);
            assert_eq!(s.offset, next_offset);
            next_offset += s.len;
            let pos = s.opcode.position();
            assert_eq!(pos.is_start(), i == 0);
            assert_eq!(pos.is_end(), i == segs.len() - 1);
            if pos == Position::First || pos == Position::Middle {
                assert_eq!(s.len, mtu.bytes());
            }
            assert_eq!(
                s.has_reth(),
                s.opcode.ext_headers().contains(ExtHeaders::RETH)
            );
            // The packet this segment describes is one the receiver accepts.
            let len = packet_len(s.opcode, s.len as usize).unwrap();
            ip.total_len.set((28 + len) as u16);
            udp.len.set((8 + len) as u16);
            let b = PacketBuilder::new(&mut buf, s.opcode, s.len as usize).unwrap();
            assert_eq!(b.len(), len);
            b.finish(&HostCrc32, IpHeader::V4(&ip), &udp);
            let pkt = parse(&buf[..len], IpHeader::V4(&ip), &udp, &HostCrc32).unwrap();
            assert_eq!(pkt.pad_count(), s.pad_count());
            pkt.check_qp(qp_type, mtu)
                .unwrap_or_else(|e| panic!("{kind:?} {total} at {mtu:?}: {s:?}: {e:?}"));
        }
        assert_eq!(next_offset, total);
    }
}
