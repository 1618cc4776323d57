// SPDX-License-Identifier: GPL-2.0

//! Micro-benchmark: parse and ICRC check per packet against a bare CRC-32.
//!
//! Run with `cargo bench --bench parse_icrc`. For each payload size it builds
//! one RC SEND Only packet over IPv4, then times `packet::parse` (structure
//! and ICRC) and `crc32fast::hash` over the same UDP payload, the bound the
//! ICRC check cannot beat. It prints nanoseconds per packet and GB/s of UDP
//! payload. This is a benchmark, not a test: nothing is asserted.

mod common;

use std::hint::black_box;
use std::time::Duration;

use rxe_roce::roce::icrc::{
    IpHeader,
    Ipv4Header,
    UdpHeader, //
};
use rxe_roce::roce::opcode::Opcode;
use rxe_roce::roce::packet::{
    packet_len,
    parse,
    PacketBuilder, //
};
use rxe_roce::HostCrc32;
use zerocopy::FromZeros;

/// Runs `f` in batches of 1,000 until `budget` has passed; returns ns per call.
fn time(budget: Duration, f: impl FnMut()) -> f64 {
    common::ns_per_call(budget, 1000, f)
}

fn main() {
    let budget = Duration::from_millis(500);
    println!(
        "{:>8} {:>8} | {:>12} {:>8} | {:>12} {:>8}",
        "payload", "packet", "parse+icrc", "GB/s", "bare crc32", "GB/s"
    );
    for payload in [64usize, 1024, 4096] {
        let len = packet_len(Opcode::RC_SEND_ONLY, payload).unwrap();
        let mut ip = Ipv4Header::new_zeroed();
        ip.version_ihl = 0x45;
        ip.ttl = 64;
        ip.protocol = 17;
        ip.total_len.set((28 + len) as u16);
        ip.saddr = [198, 18, 0, 1];
        ip.daddr = [198, 18, 0, 2];
        let mut udp = UdpHeader::new_zeroed();
        udp.source.set(0xc000);
        udp.dest.set(UdpHeader::ROCE_V2_PORT);
        udp.len.set((8 + len) as u16);
        let mut buf = vec![0u8; len];
        let mut b = PacketBuilder::new(&mut buf, Opcode::RC_SEND_ONLY, payload).unwrap();
        b.bth_mut().set_dest_qpn(0x11);
        for (i, byte) in b.payload_mut().iter_mut().enumerate() {
            *byte = i as u8;
        }
        b.finish(&HostCrc32, IpHeader::V4(&ip), &udp);

        let parse_ns = time(budget, || {
            let pkt = parse(black_box(&buf), IpHeader::V4(&ip), &udp, &HostCrc32);
            black_box(pkt.is_ok());
        });
        let crc_ns = time(budget, || {
            black_box(crc32fast::hash(black_box(&buf)));
        });
        let gbps = |ns: f64| len as f64 / ns;
        println!(
            "{payload:>8} {len:>8} | {parse_ns:>9.1} ns {:>8.2} | {crc_ns:>9.1} ns {:>8.2}",
            gbps(parse_ns),
            gbps(crc_ns)
        );
    }
}
