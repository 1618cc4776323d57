// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the packet parser: any UDP payload parses to a packet or an error,
//! every accessor of a parsed packet is safe, building what was parsed
//! gives back the same bytes, and the packet parsed in pieces (a socket
//! buffer's pages) is the same packet.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rxe_roce::roce::icrc::{
    IpHeader,
    Ipv4Header,
    UdpHeader, //
};
use rxe_roce::roce::mtu::IbMtu;
use rxe_roce::roce::opcode::{
    QpType,
    MAX_HEADER_LEN, //
};
use rxe_roce::roce::packet::{
    self,
    Packet,
    PacketBuilder, //
};
use rxe_roce::{
    HostCrc32,
    Pieces, //
};
use zerocopy::byteorder::network_endian::U16;
use zerocopy::FromZeros;

fn headers(len: usize) -> (Ipv4Header, UdpHeader) {
    let mut ip = Ipv4Header::new_zeroed();
    ip.version_ihl = 0x45;
    ip.protocol = 17;
    ip.total_len = U16::new((28 + len) as u16);
    let mut udp = UdpHeader::new_zeroed();
    udp.dest = U16::new(UdpHeader::ROCE_V2_PORT);
    udp.len = U16::new((8 + len) as u16);
    (ip, udp)
}

fuzz_target!(|data: &[u8]| {
    let (ip, udp) = headers(data.len());
    let crc = HostCrc32;
    let full = packet::parse(data, IpHeader::V4(&ip), &udp, &crc);
    // The same bytes with the linear part cut after the headers (and a few bytes more), the
    // rest in pieces of 1 to 13 bytes.
    let cut = (MAX_HEADER_LEN + data.len() % 5).min(data.len());
    let pieces = Pieces {
        bytes: data,
        step: 1 + data.len() % 13,
    };
    let paged = Packet::parse_paged(&data[..cut], &pieces, 0, data.len());
    let Ok(pkt) = Packet::parse(data) else {
        assert!(full.is_err());
        assert_eq!(paged.map(|_| ()), Packet::parse(data).map(|_| ()));
        return;
    };
    let paged = paged.expect("parses whole, so in pieces");
    assert_eq!(
        paged.verify_icrc(&crc, IpHeader::V4(&ip), &udp),
        pkt.verify_icrc(&crc, IpHeader::V4(&ip), &udp)
    );
    assert_eq!(paged.icrc(), pkt.icrc());
    assert_eq!(paged.len(), pkt.len());
    let mut copied = vec![0u8; paged.payload().len()];
    assert!(paged.payload().copy_to(&mut copied));
    assert_eq!(Some(&copied[..]), pkt.payload().as_slice());
    for t in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi] {
        for m in [IbMtu::Mtu256, IbMtu::Mtu1024, IbMtu::Mtu4096] {
            let _ = pkt.check_qp(t, m);
        }
    }
    let _ = (pkt.psn(), pkt.dest_qpn(), pkt.icrc(), pkt.pad_count());
    let _ = (pkt.deth(), pkt.reth(), pkt.aeth().map(|a| a.syndrome()));
    let _ = (pkt.atomic_eth(), pkt.atomic_ack_eth(), pkt.imm_dt());
    let _ = (
        pkt.ieth(),
        pkt.feth()
            .map(|f| (f.placement_type(), f.selectivity_level())),
    );
    // Rebuild through the typed headers: the same bytes, pad and ICRC made anew.
    let opcode = pkt.opcode();
    let payload = pkt.payload().as_slice().expect("a packet parsed whole is one slice");
    let mut buf = vec![0u8; data.len()];
    let mut b = PacketBuilder::new(&mut buf, opcode, payload.len()).expect("parsed, so buildable");
    *b.bth_mut() = *pkt.bth();
    if let (Some(h), Some(d)) = (pkt.deth(), b.deth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.reth(), b.reth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.aeth(), b.aeth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.atomic_eth(), b.atomic_eth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.atomic_ack_eth(), b.atomic_ack_eth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.imm_dt(), b.imm_dt_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.ieth(), b.ieth_mut()) {
        *d = *h;
    }
    if let (Some(h), Some(d)) = (pkt.feth(), b.feth_mut()) {
        *d = *h;
    }
    b.payload_mut().copy_from_slice(payload);
    let n = b.finish(&crc, IpHeader::V4(&ip), &udp);
    assert_eq!(n, data.len());
    let body = opcode.header_len() + payload.len();
    assert_eq!(&buf[..body], &data[..body]);
    let pad_zero = data[body..n - 4].iter().all(|&x| x == 0);
    if full.is_ok() && pad_zero {
        assert_eq!(&buf[..n], data);
    }
    if full.is_err() && pad_zero {
        assert_ne!(&buf[n - 4..n], &data[n - 4..]);
    }
});
