// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the wire format: opcodes, headers, parse, build and ICRC.

use rxe_roce::roce::headers::{
    Aeth,
    AtomicAckEth,
    AtomicEth,
    Bth,
    BthFields,
    Deth,
    Feth,
    Ieth,
    ImmDt,
    Reth, //
};
use rxe_roce::roce::icrc::{
    self,
    Crc32,
    IpHeader,
    Ipv4Header,
    Ipv6Header,
    UdpHeader,
    ICRC_SEED, //
};
use rxe_roce::roce::mtu::IbMtu;
use rxe_roce::roce::opcode::{
    ExtHeaders,
    OpClass,
    Opcode,
    Operation,
    Position,
    QpType,
    Transport,
    MAX_HEADER_LEN, //
};
use rxe_roce::roce::packet::Fragments;
use rxe_roce::roce::packet::{
    packet_len,
    pad_for,
    parse,
    BuildError,
    Packet,
    PacketBuilder,
    ParseError, //
};
use rxe_roce::roce::psn::Psn;
use rxe_roce::{
    HostCrc32,
    Pieces, //
};
use zerocopy::{
    FromBytes,
    FromZeros,
    IntoBytes, //
};

/// Header length (BTH to payload) of every opcode in `rxe_opcode.c`.
const C_HEADER_LEN: &[(u8, usize)] = &[
    (0x00, 12),
    (0x01, 12),
    (0x02, 12),
    (0x03, 16),
    (0x04, 12),
    (0x05, 16),
    (0x06, 28),
    (0x07, 12),
    (0x08, 12),
    (0x09, 16),
    (0x0a, 28),
    (0x0b, 32),
    (0x0c, 28),
    (0x0d, 16),
    (0x0e, 12),
    (0x0f, 16),
    (0x10, 16),
    (0x11, 16),
    (0x12, 24),
    (0x13, 40),
    (0x14, 40),
    (0x16, 16),
    (0x17, 16),
    (0x1c, 32),
    (0x1d, 28),
    (0x20, 12),
    (0x21, 12),
    (0x22, 12),
    (0x23, 16),
    (0x24, 12),
    (0x25, 16),
    (0x26, 28),
    (0x27, 12),
    (0x28, 12),
    (0x29, 16),
    (0x2a, 28),
    (0x2b, 32),
    (0x64, 20),
    (0x65, 24),
];

#[test]
fn opcode_table_matches_the_c_driver() {
    let all: Vec<u8> = Opcode::all().map(Opcode::raw).collect();
    let expected: Vec<u8> = C_HEADER_LEN.iter().map(|&(op, _)| op).collect();
    assert_eq!(all, expected);
    for &(raw, len) in C_HEADER_LEN {
        let op = Opcode::from_u8(raw).unwrap();
        assert_eq!(op.raw(), raw);
        assert_eq!(op.header_len(), len, "{op:?}");
        assert_eq!(Opcode::new(op.transport(), op.operation()), Some(op));
        assert_eq!(Opcode::try_from(raw), Ok(op));
        // The C table's RXE_PAYLOAD_MASK.
        let no_payload = matches!(raw, 0x0c | 0x11 | 0x12 | 0x13 | 0x14 | 0x1c);
        assert_eq!(op.has_payload(), !no_payload, "{op:?}");
        // The opcode's table entry agrees with its operation's definitions.
        let o = op.operation();
        assert_eq!(op.class(), o.class(), "{op:?}");
        assert_eq!(op.position(), o.position(), "{op:?}");
        assert_eq!(op.is_request(), o.is_request(), "{op:?}");
        assert_eq!(op.has_payload(), o.has_payload(), "{op:?}");
        let deth = op.transport() == Transport::Ud;
        assert_eq!(op.ext_headers().contains(ExtHeaders::DETH), deth, "{op:?}");
        assert_eq!(op.ext_headers().len(), len - 12, "{op:?}");
    }
    for raw in 0..=255u8 {
        if !C_HEADER_LEN.iter().any(|&(op, _)| op == raw) {
            assert_eq!(Opcode::from_u8(raw), None, "{raw:#x}");
            assert_eq!(Opcode::try_from(raw), Err(raw));
        }
    }
}

#[test]
fn opcode_properties() {
    let op = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
    assert_eq!(op.transport(), Transport::Rc);
    assert_eq!(op.operation(), Operation::RdmaWriteOnlyWithImmediate);
    assert_eq!(op.position(), Position::Only);
    assert_eq!(op.class(), OpClass::RdmaWrite);
    assert!(op.is_request());
    assert!(op.operation().has_immediate());
    assert!(op.operation().consumes_recv_wqe_at_end());
    assert!(!Operation::RdmaWriteLast.consumes_recv_wqe_at_end());
    assert!(Operation::SendLast.consumes_recv_wqe_at_end());
    assert!(!Operation::SendMiddle.consumes_recv_wqe_at_end());
    assert!(Operation::SendOnlyWithInvalidate.has_invalidate());
    assert_eq!(format!("{op:?}"), "Rc_RdmaWriteOnlyWithImmediate");
    assert!(!Opcode::RC_ACKNOWLEDGE.is_request());
    assert!(!Opcode::RC_RDMA_READ_RESPONSE_MIDDLE.is_request());
    assert!(Opcode::RC_RDMA_READ_REQUEST.is_request());
    assert_eq!(
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE.position(),
        Position::Middle
    );
    assert_eq!(Opcode::UC_SEND_FIRST.position(), Position::First);
    assert_eq!(
        Opcode::RC_SEND_LAST_WITH_INVALIDATE.position(),
        Position::Last
    );
    assert!(Position::Only.is_start() && Position::Only.is_end());
    assert!(!Position::Middle.is_start() && !Position::Middle.is_end());
    // Transports.
    assert_eq!(Opcode::new(Transport::Uc, Operation::RdmaReadRequest), None);
    assert_eq!(
        Opcode::new(Transport::Uc, Operation::SendOnlyWithInvalidate),
        None
    );
    assert_eq!(Opcode::new(Transport::Ud, Operation::SendFirst), None);
    assert!(Opcode::UD_SEND_ONLY.allowed_for(QpType::Gsi));
    assert!(Opcode::UD_SEND_ONLY.allowed_for(QpType::Ud));
    assert!(!Opcode::UD_SEND_ONLY.allowed_for(QpType::Rc));
    assert!(!Opcode::UC_SEND_ONLY.allowed_for(QpType::Rc));
    assert_eq!(QpType::from_raw(2), Some(QpType::Rc));
    assert_eq!(QpType::from_raw(0), None);
}

#[test]
fn extended_header_offsets_follow_the_wire_order() {
    let off = |op: Opcode, h| op.ext_headers().offset_of(h);
    let op = Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
    assert_eq!(off(op, ExtHeaders::RETH), Some(12));
    assert_eq!(off(op, ExtHeaders::IMM_DT), Some(28));
    assert_eq!(off(op, ExtHeaders::AETH), None);
    assert_eq!(off(Opcode::RC_FLUSH, ExtHeaders::FETH), Some(12));
    assert_eq!(off(Opcode::RC_FLUSH, ExtHeaders::RETH), Some(16));
    assert_eq!(
        off(Opcode::RC_ATOMIC_ACKNOWLEDGE, ExtHeaders::AETH),
        Some(12)
    );
    assert_eq!(
        off(Opcode::RC_ATOMIC_ACKNOWLEDGE, ExtHeaders::ATOMIC_ACK_ETH),
        Some(16)
    );
    assert_eq!(
        off(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, ExtHeaders::DETH),
        Some(12)
    );
    assert_eq!(
        off(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, ExtHeaders::IMM_DT),
        Some(20)
    );
    assert_eq!(
        off(Opcode::RC_COMPARE_SWAP, ExtHeaders::ATOMIC_ETH),
        Some(12)
    );
    assert_eq!(
        off(Opcode::RC_SEND_ONLY_WITH_INVALIDATE, ExtHeaders::IETH),
        Some(12)
    );
    // Only single headers have an offset.
    let two = ExtHeaders::RETH.with(ExtHeaders::IMM_DT);
    assert_eq!(two.offset_of(two), None);
    assert_eq!(ExtHeaders::NONE.offset_of(ExtHeaders::NONE), None);
    assert!(ExtHeaders::NONE.is_empty());
    assert_eq!(format!("{two:?}"), r#"{"RETH", "ImmDt"}"#);
}

#[test]
fn header_sizes() {
    assert_eq!(size_of::<Bth>(), 12);
    assert_eq!(size_of::<Deth>(), 8);
    assert_eq!(size_of::<Reth>(), 16);
    assert_eq!(size_of::<Aeth>(), 4);
    assert_eq!(size_of::<AtomicEth>(), 28);
    assert_eq!(size_of::<AtomicAckEth>(), 8);
    assert_eq!(size_of::<ImmDt>(), 4);
    assert_eq!(size_of::<Ieth>(), 4);
    assert_eq!(size_of::<Feth>(), 4);
    assert_eq!(size_of::<Ipv4Header>(), 20);
    assert_eq!(size_of::<Ipv6Header>(), 40);
    assert_eq!(size_of::<UdpHeader>(), 8);
}

#[test]
fn bth_fields_sit_where_the_specification_puts_them() {
    let bytes = [
        0x0b, 0xe5, 0x12, 0x34, 0xc1, 0xab, 0xcd, 0xef, 0x80, 0x01, 0x02, 0x03,
    ];
    let bth = Bth::ref_from_bytes(&bytes).unwrap();
    assert_eq!(bth.opcode_raw(), 0x0b);
    assert!(bth.solicited());
    assert!(bth.mig_req());
    assert_eq!(bth.pad_count(), 2);
    assert_eq!(bth.transport_version(), 5);
    assert_eq!(bth.pkey(), 0x1234);
    assert!(bth.fecn());
    assert!(bth.becn());
    assert_eq!(bth.dest_qpn(), 0xabcdef);
    assert!(bth.ack_req());
    assert_eq!(bth.psn(), Psn::new(0x010203));

    let mut bth = Bth::new_zeroed();
    bth.set_opcode(Opcode::UD_SEND_ONLY);
    bth.set_solicited(true);
    bth.set_pad_count(3);
    bth.set_transport_version(0);
    bth.set_pkey(0xffff);
    bth.set_becn(true);
    bth.set_dest_qpn(0x1ff_0011);
    bth.set_ack_req(true);
    bth.set_psn(Psn::new(0xfffffe));
    assert_eq!(
        bth.as_bytes(),
        [0x64, 0xb0, 0xff, 0xff, 0x40, 0xff, 0x00, 0x11, 0x80, 0xff, 0xff, 0xfe]
    );
    bth.set_solicited(false);
    bth.set_becn(false);
    bth.set_ack_req(false);
    bth.set_mig_req(true);
    assert_eq!(bth.as_bytes()[1], 0x70);
    assert_eq!(bth.as_bytes()[4], 0x00);
    assert_eq!(bth.as_bytes()[8], 0x00);
    assert_eq!(bth.psn(), Psn::new(0xfffffe));

    let mut bth = Bth::new_zeroed();
    bth.init(
        Opcode::RC_SEND_ONLY,
        BthFields {
            solicited: true,
            pad_count: 1,
            pkey: Bth::DEFAULT_PKEY,
            dest_qpn: 0x11,
            ack_req: true,
            psn: Psn::new(7),
        },
    );
    assert_eq!(
        bth.as_bytes(),
        [0x04, 0x90, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 7]
    );
}

#[test]
fn extended_header_fields() {
    let mut deth = Deth::new_zeroed();
    deth.set_qkey(Deth::GSI_QKEY);
    deth.set_src_qpn(0xff00_0001);
    assert_eq!(deth.as_bytes(), [0x80, 0x01, 0, 0, 0, 0, 0, 1]);
    assert_eq!((deth.qkey(), deth.src_qpn()), (0x8001_0000, 1));

    let mut reth = Reth::new_zeroed();
    reth.set_va(0x0102_0304_0506_0708);
    reth.set_rkey(0x1122_3344);
    reth.set_dma_len(0x8000_0000);
    assert_eq!(
        reth.as_bytes(),
        [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x80, 0, 0, 0]
    );
    assert_eq!(reth.va(), 0x0102_0304_0506_0708);
    assert_eq!(reth.rkey(), 0x1122_3344);
    assert_eq!(reth.dma_len(), 0x8000_0000);

    let mut atomic = AtomicEth::new_zeroed();
    atomic.set_va(1);
    atomic.set_rkey(2);
    atomic.set_swap_add(3);
    atomic.set_compare(4);
    let b = atomic.as_bytes();
    assert_eq!((b[7], b[11], b[19], b[27]), (1, 2, 3, 4));
    assert_eq!(
        (
            atomic.va(),
            atomic.rkey(),
            atomic.swap_add(),
            atomic.compare()
        ),
        (1, 2, 3, 4)
    );

    let mut ack = AtomicAckEth::new_zeroed();
    ack.set_orig(u64::MAX - 1);
    assert_eq!(ack.orig(), u64::MAX - 1);
    assert_eq!(ack.as_bytes()[7], 0xfe);

    let mut imm = ImmDt::new_zeroed();
    imm.set_imm(0xdead_beef);
    assert_eq!(imm.as_bytes(), [0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(imm.imm(), 0xdead_beef);

    let mut ieth = Ieth::new_zeroed();
    ieth.set_rkey(0x0a0b_0c0d);
    assert_eq!(ieth.as_bytes(), [0x0a, 0x0b, 0x0c, 0x0d]);
    assert_eq!(ieth.rkey(), 0x0a0b_0c0d);

    let mut feth = Feth::new_zeroed();
    feth.set(2, 1);
    assert_eq!(feth.as_bytes(), [0, 0, 0, 0x12]);
    assert_eq!((feth.placement_type(), feth.selectivity_level()), (2, 1));
    feth.set(0xff, 0xff);
    assert_eq!(feth.as_bytes(), [0, 0, 0, 0x3f]);

    let mut aeth = Aeth::new_zeroed();
    aeth.set_syndrome_raw(0x60);
    aeth.set_msn(rxe_roce::roce::psn::Msn::new(0x0102_0304));
    assert_eq!(aeth.as_bytes(), [0x60, 0x02, 0x03, 0x04]);
    assert_eq!(aeth.syndrome_raw(), 0x60);
    assert_eq!(aeth.msn().get(), 0x020304);
}

fn ipv4(total_len: u16) -> Ipv4Header {
    let mut ip = Ipv4Header::new_zeroed();
    ip.version_ihl = 0x45;
    ip.tos = 0x02;
    ip.total_len.set(total_len);
    ip.id.set(0x1234);
    ip.frag_off.set(0x4000);
    ip.ttl = 64;
    ip.protocol = 17;
    ip.check.set(0xbeef);
    ip.saddr = [198, 18, 0, 1];
    ip.daddr = [198, 18, 0, 2];
    ip
}

fn ipv6(payload_len: u16) -> Ipv6Header {
    let mut ip = Ipv6Header::new_zeroed();
    ip.version_class_flow = [0x61, 0x23, 0x45, 0x67];
    ip.payload_len.set(payload_len);
    ip.next_header = 17;
    ip.hop_limit = 3;
    ip.saddr = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    ip.daddr = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    ip
}

fn udp(len: u16) -> UdpHeader {
    let mut udp = UdpHeader::new_zeroed();
    udp.source.set(0xc123);
    udp.dest.set(UdpHeader::ROCE_V2_PORT);
    udp.len.set(len);
    udp.check.set(0x7777);
    udp
}

/// The ICRC as the specification states it, with the standard CRC-32:
/// eight bytes of ones for the LRH, then the masked headers and the rest.
fn reference_icrc(ip: &[u8], udp: &[u8], packet: &[u8]) -> u32 {
    let mut bytes = vec![0xffu8; 8];
    let mut ip = ip.to_vec();
    if ip.len() == 20 {
        ip[1] = 0xff;
        ip[8] = 0xff;
        ip[10] = 0xff;
        ip[11] = 0xff;
    } else {
        ip[0] |= 0x0f;
        ip[1] = 0xff;
        ip[2] = 0xff;
        ip[3] = 0xff;
        ip[7] = 0xff;
    }
    bytes.extend_from_slice(&ip);
    let mut udp = udp.to_vec();
    udp[6] = 0xff;
    udp[7] = 0xff;
    bytes.extend_from_slice(&udp);
    let mut pkt = packet.to_vec();
    pkt[4] = 0xff;
    bytes.extend_from_slice(&pkt);
    crc32fast::hash(&bytes)
}

#[test]
fn icrc_seed_is_the_crc_of_a_masked_lrh() {
    assert_eq!(HostCrc32.crc32_le(0xffff_ffff, &[0xff; 8]), ICRC_SEED);
    // The kernel's crc32_le() convention: standard CRC-32 = !crc32_le(!0, data).
    assert_eq!(!HostCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
    // Continuing a register over a split gives the same as one pass.
    let a = HostCrc32.crc32_le(0x1234_5678, b"hello, world");
    let b = HostCrc32.crc32_le(HostCrc32.crc32_le(0x1234_5678, b"hello"), b", world");
    assert_eq!(a, b);
}

#[test]
fn icrc_matches_the_specification_over_ipv4_and_ipv6() {
    let mut packet = vec![0u8; 12 + 16 + 100];
    for (i, b) in packet.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    packet[0] = 0x0a;
    let len = (packet.len() + 4) as u16;
    let ip4 = ipv4(20 + 8 + len);
    let ip6 = ipv6(8 + len);
    let udp = udp(8 + len);
    let got4 = icrc::compute(&HostCrc32, IpHeader::V4(&ip4), &udp, &packet).unwrap();
    let got6 = icrc::compute(&HostCrc32, IpHeader::V6(&ip6), &udp, &packet).unwrap();
    assert_eq!(
        got4,
        reference_icrc(ip4.as_bytes(), udp.as_bytes(), &packet)
    );
    assert_eq!(
        got6,
        reference_icrc(ip6.as_bytes(), udp.as_bytes(), &packet)
    );
    assert_ne!(got4, got6);
    assert_eq!(
        icrc::compute(&HostCrc32, IpHeader::V4(&ip4), &udp, &packet[..11]),
        None
    );
}

/// Short packets take one CRC call over the pseudo header and their bytes after the BTH copied
/// behind it (`icrc::JOINED_REST_MAX`), longer ones two: either way the ICRC is the
/// specification's, the builder writes it, and a check over the linear bytes or over pieces
/// accepts it and refuses a flipped bit or a missing byte.
#[test]
fn icrc_is_the_same_either_side_of_the_joined_length() {
    let opcode = Opcode::RC_SEND_ONLY;
    let mut seen = (false, false);
    for payload_len in 0..=icrc::JOINED_REST_MAX + 9 {
        let len = packet_len(opcode, payload_len).unwrap();
        let rest = len - icrc::ICRC_LEN - opcode.header_len();
        let joined = rest <= icrc::JOINED_REST_MAX;
        if joined {
            seen.0 = true;
        } else {
            seen.1 = true;
        }
        let ip4 = ipv4((28 + len) as u16);
        let ip6 = ipv6((8 + len) as u16);
        let udp = udp((8 + len) as u16);
        for ip in [IpHeader::V4(&ip4), IpHeader::V6(&ip6)] {
            let ip_bytes = match ip {
                IpHeader::V4(h) => h.as_bytes(),
                IpHeader::V6(h) => h.as_bytes(),
            };
            let mut buf = vec![0u8; len];
            build(&mut buf, opcode, payload_len, ip, &udp);
            let covered = &buf[..len - icrc::ICRC_LEN];
            let reference = reference_icrc(ip_bytes, udp.as_bytes(), covered);
            assert_eq!(
                icrc::compute(&HostCrc32, ip, &udp, covered),
                Some(reference)
            );
            assert_eq!(
                buf[len - icrc::ICRC_LEN..],
                reference.to_le_bytes(),
                "{payload_len}"
            );
            let whole = Packet::parse(&buf).unwrap();
            assert_eq!(whole.verify_icrc(&HostCrc32, ip, &udp), Ok(()));
            for step in [1, 5, 64] {
                let pieces = Pieces { bytes: &buf, step };
                let pkt =
                    Packet::parse_paged(&buf[..opcode.header_len()], &pieces, 0, len).unwrap();
                assert_eq!(
                    pkt.verify_icrc(&HostCrc32, ip, &udp),
                    Ok(()),
                    "{payload_len}"
                );
            }
            // The last byte the ICRC covers, and the first after the BTH.
            for byte in [len - icrc::ICRC_LEN - 1, opcode.header_len()] {
                if byte < opcode.header_len() + rest {
                    let mut bad = buf.clone();
                    bad[byte] ^= 0x01;
                    let pkt = Packet::parse(&bad).unwrap();
                    assert_eq!(
                        pkt.verify_icrc(&HostCrc32, ip, &udp),
                        Err(ParseError::IcrcMismatch),
                        "{payload_len} byte {byte}"
                    );
                }
            }
            // A source that lost the packet's last bytes, or bytes the ICRC covers.
            for from in [len - 1, opcode.header_len() + rest / 2] {
                let lost = Short { bytes: &buf, from };
                let pkt = Packet::parse_paged(&buf[..opcode.header_len()], &lost, 0, len).unwrap();
                assert_eq!(
                    pkt.verify_icrc(&HostCrc32, ip, &udp),
                    Err(ParseError::Truncated),
                    "{payload_len} from {from}"
                );
            }
        }
    }
    assert_eq!(seen, (true, true));
}

/// Fills a packet of `opcode` with recognisable fields through the builder.
fn build(
    buf: &mut [u8],
    opcode: Opcode,
    payload_len: usize,
    ip: IpHeader<'_>,
    udp: &UdpHeader,
) -> usize {
    let mut b = PacketBuilder::new(buf, opcode, payload_len).unwrap();
    let bth = b.bth_mut();
    bth.set_pkey(0xffff);
    bth.set_dest_qpn(0x123456);
    bth.set_psn(Psn::new(0xfffffe));
    bth.set_ack_req(true);
    if let Some(h) = b.deth_mut() {
        h.set_qkey(0x1111_1111);
        h.set_src_qpn(0x22);
    }
    if let Some(h) = b.reth_mut() {
        h.set_va(0x3333);
        h.set_rkey(0x44);
        h.set_dma_len(5555);
    }
    if let Some(h) = b.aeth_mut() {
        h.set_syndrome_raw(0x1f);
        h.set_msn(rxe_roce::roce::psn::Msn::new(66));
    }
    if let Some(h) = b.atomic_eth_mut() {
        h.set_va(0x7777);
        h.set_rkey(0x88);
        h.set_swap_add(99);
        h.set_compare(1010);
    }
    if let Some(h) = b.atomic_ack_eth_mut() {
        h.set_orig(1111);
    }
    if let Some(h) = b.imm_dt_mut() {
        h.set_imm(0x1212_1212);
    }
    if let Some(h) = b.ieth_mut() {
        h.set_rkey(0x1313);
    }
    if let Some(h) = b.feth_mut() {
        h.set(1, 1);
    }
    for (i, byte) in b.payload_mut().iter_mut().enumerate() {
        *byte = i as u8 ^ 0x5a;
    }
    b.finish(&HostCrc32, ip, udp)
}

#[test]
fn every_opcode_builds_and_parses_back() {
    for opcode in Opcode::all() {
        let lens: &[usize] = if !opcode.has_payload() {
            &[0]
        } else if opcode.class() == OpClass::AtomicWrite {
            &[8]
        } else if opcode.position().is_end() {
            &[0, 1, 2, 3, 4, 5, 255, 256]
        } else {
            &[256]
        };
        for &payload_len in lens {
            let len = packet_len(opcode, payload_len).unwrap();
            let ip = ipv6((8 + len) as u16);
            let udp = udp((8 + len) as u16);
            let mut buf = vec![0xeeu8; len + 3];
            let written = build(&mut buf, opcode, payload_len, IpHeader::V6(&ip), &udp);
            assert_eq!(written, len);
            assert_eq!(buf[len], 0xee, "builder wrote past the packet");
            let pkt = parse(&buf[..len], IpHeader::V6(&ip), &udp, &HostCrc32)
                .unwrap_or_else(|e| panic!("{opcode:?} {payload_len}: {e:?}"));
            let qp_type = match opcode.transport() {
                Transport::Rc => QpType::Rc,
                Transport::Uc => QpType::Uc,
                Transport::Ud => QpType::Gsi,
            };
            // A last packet may be empty only when it is also first (Only).
            let expect_ok = !(opcode.position() == Position::Last && payload_len == 0);
            assert_eq!(
                pkt.check_qp(qp_type, IbMtu::Mtu256).is_ok(),
                expect_ok,
                "{opcode:?} {payload_len}"
            );
            assert_eq!(pkt.opcode(), opcode);
            assert_eq!(pkt.pad_count(), pad_for(payload_len));
            assert_eq!(pkt.psn(), Psn::new(0xfffffe));
            assert_eq!(pkt.dest_qpn(), 0x123456);
            assert!(pkt.bth().ack_req());
            assert_eq!(pkt.len(), len);
            assert_eq!(pkt.head().len(), len);
            assert_eq!(pkt.payload().len(), payload_len);
            assert!(pkt
                .payload()
                .as_slice()
                .unwrap()
                .iter()
                .enumerate()
                .all(|(i, &b)| b == i as u8 ^ 0x5a));
            let hdrs = opcode.ext_headers();
            assert_eq!(pkt.deth().is_some(), hdrs.contains(ExtHeaders::DETH));
            assert_eq!(pkt.reth().is_some(), hdrs.contains(ExtHeaders::RETH));
            assert_eq!(pkt.aeth().is_some(), hdrs.contains(ExtHeaders::AETH));
            assert_eq!(
                pkt.atomic_eth().is_some(),
                hdrs.contains(ExtHeaders::ATOMIC_ETH)
            );
            assert_eq!(
                pkt.atomic_ack_eth().is_some(),
                hdrs.contains(ExtHeaders::ATOMIC_ACK_ETH)
            );
            assert_eq!(pkt.imm_dt().is_some(), hdrs.contains(ExtHeaders::IMM_DT));
            assert_eq!(pkt.ieth().is_some(), hdrs.contains(ExtHeaders::IETH));
            assert_eq!(pkt.feth().is_some(), hdrs.contains(ExtHeaders::FETH));
            if let Some(h) = pkt.deth() {
                assert_eq!((h.qkey(), h.src_qpn()), (0x1111_1111, 0x22));
            }
            if let Some(h) = pkt.reth() {
                assert_eq!((h.va(), h.rkey(), h.dma_len()), (0x3333, 0x44, 5555));
            }
            if let Some(h) = pkt.aeth() {
                assert_eq!((h.syndrome_raw(), h.msn().get()), (0x1f, 66));
            }
            if let Some(h) = pkt.atomic_eth() {
                assert_eq!(
                    (h.va(), h.rkey(), h.swap_add(), h.compare()),
                    (0x7777, 0x88, 99, 1010)
                );
            }
            if let Some(h) = pkt.atomic_ack_eth() {
                assert_eq!(h.orig(), 1111);
            }
            if let Some(h) = pkt.imm_dt() {
                assert_eq!(h.imm(), 0x1212_1212);
            }
            if let Some(h) = pkt.ieth() {
                assert_eq!(h.rkey(), 0x1313);
            }
            if let Some(h) = pkt.feth() {
                assert_eq!((h.placement_type(), h.selectivity_level()), (1, 1));
            }
            assert_eq!(
                pkt.icrc(),
                reference_icrc(ip.as_bytes(), udp.as_bytes(), &buf[..len - 4])
            );
        }
    }
}

#[test]
fn builder_rejects_what_cannot_be_built() {
    let mut buf = [0u8; 64];
    assert_eq!(
        PacketBuilder::new(&mut buf, Opcode::RC_ACKNOWLEDGE, 4).err(),
        Some(BuildError::LengthNotAllowed)
    );
    assert_eq!(
        PacketBuilder::new(&mut buf, Opcode::RC_SEND_ONLY, 49).err(),
        Some(BuildError::BufferTooSmall)
    );
    assert!(PacketBuilder::new(&mut buf, Opcode::RC_SEND_ONLY, 48).is_ok());
    assert_eq!(
        PacketBuilder::new(&mut buf, Opcode::RC_SEND_ONLY, usize::MAX).err(),
        Some(BuildError::LengthNotAllowed)
    );
    let b = PacketBuilder::new(&mut buf, Opcode::RC_SEND_ONLY, 3).unwrap();
    assert_eq!(b.len(), 12 + 3 + 1 + 4);
    assert!(!b.is_empty());
    assert_eq!(b.opcode(), Opcode::RC_SEND_ONLY);
}

/// A valid RC SEND Only with `payload_len` bytes, as raw bytes.
fn raw_packet(opcode: Opcode, payload_len: usize) -> Vec<u8> {
    let len = packet_len(opcode, payload_len).unwrap();
    let mut buf = vec![0u8; len];
    let ip = ipv4((28 + len) as u16);
    let udp = udp((8 + len) as u16);
    build(&mut buf, opcode, payload_len, IpHeader::V4(&ip), &udp);
    buf
}

#[test]
fn parse_errors() {
    use ParseError::*;
    // Truncated: shorter than a BTH, or than the opcode's headers and ICRC.
    assert_eq!(Packet::parse(&[]).err(), Some(Truncated));
    assert_eq!(Packet::parse(&[0x04; 11]).err(), Some(Truncated));
    let mut p = raw_packet(Opcode::RC_RDMA_WRITE_FIRST, 256);
    assert!(Packet::parse(&p).is_ok());
    p.truncate(12 + 16 + 3);
    assert_eq!(Packet::parse(&p).err(), Some(Truncated));

    // Unknown opcodes: RD, CNP, resync, reserved, manufacturer.
    for raw in [0x40u8, 0x81, 0x15, 0x18, 0x1e, 0x2c, 0x60, 0x66, 0xe0, 0xff] {
        let mut p = raw_packet(Opcode::RC_SEND_ONLY, 0);
        p[0] = raw;
        assert_eq!(Packet::parse(&p).err(), Some(UnknownOpcode(raw)));
    }

    // Transport version.
    let mut p = raw_packet(Opcode::RC_SEND_ONLY, 0);
    p[1] |= 1;
    assert_eq!(Packet::parse(&p).err(), Some(TransportVersion(1)));

    // Pad count on an opcode without payload, on a first packet, or larger
    // than the data.
    let mut p = raw_packet(Opcode::RC_ACKNOWLEDGE, 0);
    p[1] |= 0x10;
    assert_eq!(Packet::parse(&p).err(), Some(PadCount));
    let mut p = raw_packet(Opcode::RC_SEND_FIRST, 256);
    p[1] |= 0x30;
    assert_eq!(Packet::parse(&p).err(), Some(PadCount));
    let mut p = raw_packet(Opcode::RC_SEND_ONLY, 0);
    p[1] |= 0x20;
    assert_eq!(Packet::parse(&p).err(), Some(PadCount));

    // Lengths: not a multiple of four, data on an opcode without payload,
    // ATOMIC WRITE other than eight bytes.
    let mut p = raw_packet(Opcode::RC_SEND_ONLY, 4);
    p.push(0);
    assert_eq!(Packet::parse(&p).err(), Some(LengthNotAllowed));
    let mut p = raw_packet(Opcode::RC_ACKNOWLEDGE, 0);
    p.extend_from_slice(&[0; 4]);
    assert_eq!(Packet::parse(&p).err(), Some(LengthNotAllowed));
    let mut p = raw_packet(Opcode::RC_ATOMIC_WRITE, 8);
    assert!(Packet::parse(&p).is_ok());
    p.extend_from_slice(&[0; 4]);
    assert_eq!(Packet::parse(&p).err(), Some(LengthNotAllowed));

    // MTU rules.
    let p = raw_packet(Opcode::RC_SEND_ONLY, 1024);
    let pkt = Packet::parse(&p).unwrap();
    assert_eq!(pkt.check_qp(QpType::Rc, IbMtu::Mtu1024), Ok(()));
    assert_eq!(pkt.check_qp(QpType::Rc, IbMtu::Mtu512), Err(PayloadOverMtu));
    let p = raw_packet(Opcode::RC_SEND_MIDDLE, 1020);
    let pkt = Packet::parse(&p).unwrap();
    assert_eq!(
        pkt.check_qp(QpType::Rc, IbMtu::Mtu1024),
        Err(LengthNotAllowed)
    );
    let p = raw_packet(Opcode::UC_RDMA_WRITE_LAST, 0);
    let pkt = Packet::parse(&p).unwrap();
    assert_eq!(
        pkt.check_qp(QpType::Uc, IbMtu::Mtu1024),
        Err(LengthNotAllowed)
    );
    let p = raw_packet(Opcode::UD_SEND_ONLY, 300);
    let pkt = Packet::parse(&p).unwrap();
    assert_eq!(pkt.check_qp(QpType::Ud, IbMtu::Mtu256), Err(PayloadOverMtu));
    assert_eq!(
        pkt.check_qp(QpType::Rc, IbMtu::Mtu4096),
        Err(QpTypeMismatch)
    );

    // ICRC.
    let ip = ipv4(28 + p.len() as u16);
    let u = udp(8 + p.len() as u16);
    assert!(parse(&p, IpHeader::V4(&ip), &u, &HostCrc32).is_ok());
    let mut q = p.clone();
    *q.last_mut().unwrap() ^= 0x80;
    assert_eq!(
        parse(&q, IpHeader::V4(&ip), &u, &HostCrc32).err(),
        Some(IcrcMismatch)
    );
    let other = ipv6(8 + p.len() as u16);
    assert_eq!(
        parse(&p, IpHeader::V6(&other), &u, &HostCrc32).err(),
        Some(IcrcMismatch)
    );
}

#[test]
fn parse_never_panics_on_arbitrary_bytes() {
    // A cheap deterministic fuzz; cargo-fuzz targets come later.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let ip = ipv4(100);
    let u = udp(80);
    for _ in 0..200_000 {
        let len = (next() % 96) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len > 1 && next() % 2 == 0 {
            // Mostly valid opcodes and version 0, to get deeper.
            bytes[0] = C_HEADER_LEN[(next() % C_HEADER_LEN.len() as u64) as usize].0;
            bytes[1] &= 0xf0;
        }
        if let Ok(pkt) = Packet::parse(&bytes) {
            let _ = pkt.check_qp(QpType::Rc, IbMtu::Mtu256);
            let _ = pkt.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &u);
            let _ = (
                pkt.payload(),
                pkt.icrc(),
                pkt.reth(),
                pkt.aeth(),
                pkt.deth(),
            );
            let _ = (
                pkt.atomic_eth(),
                pkt.atomic_ack_eth(),
                pkt.imm_dt(),
                pkt.ieth(),
                pkt.feth(),
            );
            assert_eq!(
                pkt.opcode().header_len() + pkt.payload().len() + usize::from(pkt.pad_count()) + 4,
                bytes.len()
            );
        }
    }
}

/// The stack buffer a packet's headers are built in holds those of every opcode: the longest
/// are an atomic request's, BTH and AtomicETH.
#[test]
fn max_header_len_bounds_every_opcode() {
    let lens: Vec<usize> = (0..=255u8)
        .filter_map(Opcode::from_u8)
        .map(|op| op.header_len())
        .collect();
    assert!(lens.len() >= 39, "{} opcodes", lens.len());
    assert_eq!(lens.iter().max(), Some(&MAX_HEADER_LEN));
    assert_eq!(MAX_HEADER_LEN, 12 + 28);
    assert_eq!(Opcode::RC_COMPARE_SWAP.header_len(), MAX_HEADER_LEN);
}

/// A source of fragments that has lost everything from byte `from` on.
struct Short<'a> {
    bytes: &'a [u8],
    from: usize,
}

impl Fragments for Short<'_> {
    fn read(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        match self.bytes.get(offset..offset + len) {
            Some(b) if offset + len <= self.from => f(b),
            _ => false,
        }
    }
}

#[test]
fn a_packet_in_pieces_is_the_same_packet() {
    for opcode in Opcode::all() {
        let payload_len = match opcode {
            o if !o.has_payload() => 0,
            o if o.class() == OpClass::AtomicWrite => 8,
            o if o.position().is_end() => 61,
            _ => 256,
        };
        let len = packet_len(opcode, payload_len).unwrap();
        let ip = ipv4((28 + len) as u16);
        let udp = udp((8 + len) as u16);
        let mut buf = vec![0u8; len];
        build(&mut buf, opcode, payload_len, IpHeader::V4(&ip), &udp);
        let whole = Packet::parse(&buf).unwrap();
        let mut expected = vec![0u8; payload_len];
        assert!(whole.payload().copy_to(&mut expected));
        for cut in opcode.header_len()..len {
            for step in [1, 3, 64] {
                let pieces = Pieces { bytes: &buf, step };
                let pkt = Packet::parse_paged(&buf[..cut], &pieces, 0, len)
                    .unwrap_or_else(|e| panic!("{opcode:?} cut {cut}: {e:?}"));
                assert_eq!(pkt.len(), len);
                assert_eq!(pkt.head().len(), cut);
                assert_eq!(pkt.icrc(), whole.icrc());
                assert_eq!(pkt.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &udp), Ok(()));
                let mut got = vec![0u8; payload_len];
                assert!(pkt.payload().copy_to(&mut got));
                assert_eq!(got, expected, "{opcode:?} cut {cut} step {step}");
                // Pieces come in order and at their offsets.
                let mut next = 0;
                let placed = pkt.payload().for_each_piece((), |at, piece| {
                    assert_eq!(at, next);
                    assert_eq!(piece, &expected[at..at + piece.len()]);
                    next += piece.len();
                    Ok(())
                });
                assert_eq!((placed, next), (Ok(()), payload_len));
                let in_head = cut >= opcode.header_len() + payload_len;
                assert_eq!(pkt.payload().as_slice().is_some(), in_head);
            }
        }
    }
}

#[test]
fn a_flipped_bit_in_a_fragment_fails_the_icrc() {
    let opcode = Opcode::RC_RDMA_WRITE_ONLY;
    let len = packet_len(opcode, 200).unwrap();
    let ip = ipv4((28 + len) as u16);
    let udp = udp((8 + len) as u16);
    let mut buf = vec![0u8; len];
    build(&mut buf, opcode, 200, IpHeader::V4(&ip), &udp);
    let cut = opcode.header_len() + 10;
    for byte in [cut, len - 20, len - 1] {
        let mut bad = buf.clone();
        bad[byte] ^= 0x10;
        let pieces = Pieces {
            bytes: &bad,
            step: 7,
        };
        let pkt = Packet::parse_paged(&bad[..cut], &pieces, 0, len).unwrap();
        assert_eq!(
            pkt.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &udp),
            Err(ParseError::IcrcMismatch),
            "byte {byte}"
        );
    }
}

#[test]
fn a_packet_in_pieces_is_refused_when_bytes_are_missing() {
    let opcode = Opcode::RC_RDMA_WRITE_FIRST;
    let len = packet_len(opcode, 256).unwrap();
    let ip = ipv4((28 + len) as u16);
    let udp = udp((8 + len) as u16);
    let mut buf = vec![0u8; len];
    build(&mut buf, opcode, 256, IpHeader::V4(&ip), &udp);
    let pieces = Pieces {
        bytes: &buf,
        step: 64,
    };
    // The headers must be in the linear part.
    let short_head = Packet::parse_paged(&buf[..opcode.header_len() - 1], &pieces, 0, len);
    assert_eq!(short_head.map(|_| ()), Err(ParseError::Truncated));
    // A linear part longer than the packet is not a packet.
    let long_head = Packet::parse_paged(&buf, &pieces, 0, len - 4);
    assert_eq!(long_head.map(|_| ()), Err(ParseError::Truncated));
    // The source is offset: byte i of the packet is byte base + i of the source.
    let mut shifted = vec![0xabu8; 5];
    shifted.extend_from_slice(&buf);
    let far = Pieces {
        bytes: &shifted,
        step: 100,
    };
    let pkt = Packet::parse_paged(&buf[..40], &far, 5, len).unwrap();
    assert_eq!(pkt.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &udp), Ok(()));
    // A source that has lost bytes: the ICRC cannot be checked, the payload not placed.
    let lost = Short {
        bytes: &buf,
        from: len - 100,
    };
    let pkt = Packet::parse_paged(&buf[..40], &lost, 0, len).unwrap();
    assert_eq!(
        pkt.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &udp),
        Err(ParseError::Truncated)
    );
    assert_eq!(
        pkt.payload().for_each_piece("missing", |_, _| Ok(())),
        Err("missing")
    );
    assert!(!pkt.payload().copy_to(&mut [0u8; 256]));
    assert_eq!(pkt.icrc(), 0);
}
