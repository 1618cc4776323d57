// SPDX-License-Identifier: GPL-2.0

//! The C driver's packets decode, verify, re-encode to the same bytes, and
//! fail the check after any one-bit change.

mod common;

use std::collections::BTreeMap;

use common::{
    frames,
    ip_header,
    Frame, //
};
use rxe_roce::roce::icrc::UdpHeader;
use rxe_roce::roce::opcode::{
    OpClass,
    QpType,
    Transport, //
};
use rxe_roce::roce::packet::{
    parse,
    Packet,
    PacketBuilder,
    ParseError, //
};
use rxe_roce::roce::{
    aeth::Syndrome,
    mtu::IbMtu, //
};
use rxe_roce::HostCrc32;
use zerocopy::FromBytes;

#[test]
fn capture_has_700_packets_of_the_expected_opcodes() {
    let frames = frames();
    assert_eq!(frames.len(), 700);
    let mut by_opcode = BTreeMap::new();
    for f in &frames {
        *by_opcode.entry(f.payload[0]).or_insert(0u32) += 1;
    }
    let opcodes: Vec<u8> = by_opcode.keys().copied().collect();
    assert_eq!(
        opcodes,
        [0, 1, 2, 6, 7, 8, 12, 13, 14, 15, 17, 32, 33, 34, 100]
    );
}

#[test]
fn every_packet_decodes_and_its_icrc_verifies() {
    for f in frames() {
        let pkt = parse(&f.payload, f.ip_header(), f.udp_header(), &HostCrc32)
            .unwrap_or_else(|e| panic!("frame {}: {e:?}", f.index));
        let qp_type = match pkt.opcode().transport() {
            Transport::Rc => QpType::Rc,
            Transport::Uc => QpType::Uc,
            Transport::Ud => QpType::Ud,
        };
        // The capture used a 1024-byte path MTU.
        pkt.check_qp(qp_type, IbMtu::Mtu1024)
            .unwrap_or_else(|e| panic!("frame {}: {e:?}", f.index));
        let bth = pkt.bth();
        assert_eq!(bth.pkey(), 0xffff);
        assert_eq!(bth.transport_version(), 0);
        assert!(!bth.fecn() && !bth.becn());
        assert_ne!(bth.dest_qpn(), 0);
        match pkt.opcode().class() {
            OpClass::Acknowledge | OpClass::ReadResponse => {
                if let Some(aeth) = pkt.aeth() {
                    assert_eq!(
                        aeth.syndrome(),
                        Ok(Syndrome::ACK_UNLIMITED),
                        "frame {}",
                        f.index
                    );
                }
            }
            OpClass::RdmaWrite | OpClass::RdmaRead if pkt.opcode().position().is_start() => {
                assert!(pkt.reth().is_some());
            }
            _ => {}
        }
        if pkt.opcode().transport() == Transport::Ud {
            let deth = pkt.deth().unwrap();
            assert_ne!(deth.src_qpn(), 0);
        }
        // The message sizes of the capture make every padded payload 4096
        // bytes or less per packet, all multiples of four but the pingpongs'.
        assert_eq!(
            pkt.payload().len() + usize::from(pkt.pad_count()) + pkt.opcode().header_len() + 4,
            f.payload.len()
        );
    }
}

/// Builds `pkt` again through the typed setters and returns the bytes.
fn reencode(pkt: &Packet<'_>, f: &Frame) -> Vec<u8> {
    let mut buf = vec![0xa5u8; f.payload.len() + 64];
    let mut b = PacketBuilder::new(&mut buf, pkt.opcode(), pkt.payload().len()).unwrap();
    let src = pkt.bth();
    let dst = b.bth_mut();
    dst.set_solicited(src.solicited());
    dst.set_mig_req(src.mig_req());
    dst.set_transport_version(src.transport_version());
    dst.set_pkey(src.pkey());
    dst.set_fecn(src.fecn());
    dst.set_becn(src.becn());
    dst.set_dest_qpn(src.dest_qpn());
    dst.set_ack_req(src.ack_req());
    dst.set_psn(src.psn());
    if let Some(s) = pkt.deth() {
        let d = b.deth_mut().unwrap();
        d.set_qkey(s.qkey());
        d.set_src_qpn(s.src_qpn());
    }
    if let Some(s) = pkt.reth() {
        let d = b.reth_mut().unwrap();
        d.set_va(s.va());
        d.set_rkey(s.rkey());
        d.set_dma_len(s.dma_len());
    }
    if let Some(s) = pkt.aeth() {
        let d = b.aeth_mut().unwrap();
        d.set_syndrome(s.syndrome().unwrap());
        d.set_msn(s.msn());
    }
    if let Some(s) = pkt.atomic_eth() {
        let d = b.atomic_eth_mut().unwrap();
        d.set_va(s.va());
        d.set_rkey(s.rkey());
        d.set_swap_add(s.swap_add());
        d.set_compare(s.compare());
    }
    if let Some(s) = pkt.atomic_ack_eth() {
        b.atomic_ack_eth_mut().unwrap().set_orig(s.orig());
    }
    if let Some(s) = pkt.imm_dt() {
        b.imm_dt_mut().unwrap().set_imm(s.imm());
    }
    if let Some(s) = pkt.ieth() {
        b.ieth_mut().unwrap().set_rkey(s.rkey());
    }
    if let Some(s) = pkt.feth() {
        b.feth_mut()
            .unwrap()
            .set(s.placement_type(), s.selectivity_level());
    }
    assert!(pkt.payload().copy_to(b.payload_mut()));
    let len = b.finish(&HostCrc32, f.ip_header(), f.udp_header());
    buf.truncate(len);
    buf
}

#[test]
fn reencoding_a_decoded_packet_gives_the_same_bytes() {
    for f in frames() {
        let pkt = Packet::parse(&f.payload).unwrap();
        assert_eq!(reencode(&pkt, &f), f.payload, "frame {}", f.index);
    }
}

/// Returns true if the one-bit change at `byte`, `bit` of `f` is caught.
fn caught(f: &Frame, part: usize, byte: usize, bit: u8) -> bool {
    let mut ip = f.ip.clone();
    let mut udp = f.udp;
    let mut payload = f.payload.clone();
    match part {
        0 => ip[byte] ^= 1 << bit,
        1 => udp[byte] ^= 1 << bit,
        _ => payload[byte] ^= 1 << bit,
    }
    let udp = UdpHeader::ref_from_bytes(&udp).unwrap();
    let ok = parse(&payload, ip_header(&ip), udp, &HostCrc32)
        .and_then(|p| {
            let qp_type = match p.opcode().transport() {
                Transport::Rc => QpType::Rc,
                Transport::Uc => QpType::Uc,
                Transport::Ud => QpType::Ud,
            };
            p.check_qp(qp_type, IbMtu::Mtu1024)
        })
        .is_ok();
    !ok
}

/// Returns true for the bits the ICRC leaves out on purpose.
fn masked(f: &Frame, part: usize, byte: usize) -> bool {
    match (part, f.ip.len()) {
        // IPv4 TOS, TTL, header checksum.
        (0, 20) => matches!(byte, 1 | 8 | 10 | 11),
        // IPv6 traffic class and flow label (all but the version nibble, which
        // the caller skips separately) and hop limit.
        (0, _) => matches!(byte, 1..=3 | 7),
        // UDP checksum.
        (1, _) => matches!(byte, 6 | 7),
        // BTH FECN, BECN and reserved bits.
        _ => byte == 4,
    }
}

#[test]
fn any_one_bit_change_fails_validation() {
    let mut checked = 0u64;
    for f in frames() {
        let parts = [f.ip.len(), f.udp.len(), f.payload.len()];
        for (part, &len) in parts.iter().enumerate() {
            for byte in 0..len {
                if masked(&f, part, byte) {
                    continue;
                }
                for bit in 0..8 {
                    assert!(
                        caught(&f, part, byte, bit),
                        "frame {} part {part} byte {byte} bit {bit} not caught",
                        f.index
                    );
                    checked += 1;
                }
            }
        }
    }
    eprintln!("{checked} one-bit changes caught");
    assert!(checked > 500_000, "{checked}");
}

#[test]
fn masked_fields_do_not_change_the_icrc() {
    for f in frames().iter().step_by(7) {
        for (part, byte) in [
            (0usize, 1usize),
            (0, 8),
            (0, 10),
            (0, 11),
            (1, 6),
            (1, 7),
            (2, 4),
        ] {
            let mut ip = f.ip.clone();
            let mut udp = f.udp;
            let mut payload = f.payload.clone();
            match part {
                0 => ip[byte] ^= 0x5a,
                1 => udp[byte] ^= 0x5a,
                _ => payload[byte] ^= 0xc0,
            }
            let udp = UdpHeader::ref_from_bytes(&udp).unwrap();
            let pkt = Packet::parse(&payload).unwrap();
            assert_eq!(
                pkt.verify_icrc(&HostCrc32, ip_header(&ip), udp),
                Ok(()),
                "frame {} part {part} byte {byte}",
                f.index
            );
        }
    }
}

#[test]
fn wrong_qp_type_and_mtu_are_rejected() {
    for f in frames() {
        let pkt = Packet::parse(&f.payload).unwrap();
        let other = match pkt.opcode().transport() {
            Transport::Rc => QpType::Uc,
            Transport::Uc | Transport::Ud => QpType::Rc,
        };
        assert_eq!(
            pkt.check_qp(other, IbMtu::Mtu1024),
            Err(ParseError::QpTypeMismatch)
        );
        if pkt.payload().len() > 512 {
            let own = match pkt.opcode().transport() {
                Transport::Rc => QpType::Rc,
                Transport::Uc => QpType::Uc,
                Transport::Ud => QpType::Ud,
            };
            assert_eq!(
                pkt.check_qp(own, IbMtu::Mtu512),
                Err(ParseError::PayloadOverMtu)
            );
        }
    }
}
