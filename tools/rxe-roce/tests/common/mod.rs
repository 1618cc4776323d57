// SPDX-License-Identifier: GPL-2.0

//! Reading the captured RoCEv2 packets of the C driver.

#![allow(dead_code)]

use rxe_roce::roce::icrc::{
    IpHeader,
    Ipv4Header,
    Ipv6Header,
    UdpHeader, //
};
use zerocopy::FromBytes;

/// Packets captured from the C `rdma_rxe` driver (see testdata/README.md).
pub(crate) const PCAP: &[u8] = include_bytes!("../../testdata/c-rxe-roce-v4.pcap");

/// One captured RoCEv2 packet with its framing split off.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// Index in the capture, from 0.
    pub(crate) index: usize,
    /// IPv4 (20 bytes) or IPv6 (40 bytes) header.
    pub(crate) ip: Vec<u8>,
    /// UDP header.
    pub(crate) udp: [u8; 8],
    /// UDP payload: BTH to ICRC.
    pub(crate) payload: Vec<u8>,
}

impl Frame {
    /// Returns the typed IP header.
    pub(crate) fn ip_header(&self) -> IpHeader<'_> {
        ip_header(&self.ip)
    }

    /// Returns the typed UDP header.
    pub(crate) fn udp_header(&self) -> &UdpHeader {
        UdpHeader::ref_from_bytes(&self.udp).unwrap()
    }
}

/// Returns the typed view of a 20-byte IPv4 or 40-byte IPv6 header.
pub(crate) fn ip_header(ip: &[u8]) -> IpHeader<'_> {
    match ip.len() {
        20 => IpHeader::V4(Ipv4Header::ref_from_bytes(ip).unwrap()),
        40 => IpHeader::V6(Ipv6Header::ref_from_bytes(ip).unwrap()),
        n => panic!("bad IP header length {n}"),
    }
}

/// Returns every RoCEv2 packet of the capture, Ethernet framing stripped.
pub(crate) fn frames() -> Vec<Frame> {
    let (_, capture) = pcap_parser::parse_pcap(PCAP).expect("pcap parses");
    assert_eq!(capture.header.network, pcap_parser::Linktype::ETHERNET);
    capture
        .blocks
        .iter()
        .enumerate()
        .map(|(index, block)| split(index, block.data))
        .collect()
}

fn split(index: usize, eth: &[u8]) -> Frame {
    let ethertype = u16::from_be_bytes([eth[12], eth[13]]);
    let l3 = &eth[14..];
    let (ip_len, proto) = match ethertype {
        0x0800 => {
            assert_eq!(l3[0], 0x45, "frame {index}: IPv4 without options");
            (20, l3[9])
        }
        0x86dd => (40, l3[6]),
        t => panic!("frame {index}: ethertype {t:#x}"),
    };
    assert_eq!(proto, 17, "frame {index}: UDP");
    let ip = l3[..ip_len].to_vec();
    let udp: [u8; 8] = l3[ip_len..ip_len + 8].try_into().unwrap();
    assert_eq!(
        u16::from_be_bytes([udp[2], udp[3]]),
        UdpHeader::ROCE_V2_PORT
    );
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let payload = l3[ip_len + 8..ip_len + udp_len].to_vec();
    Frame {
        index,
        ip,
        udp,
        payload,
    }
}
