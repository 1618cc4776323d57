// SPDX-License-Identifier: GPL-2.0

//! Receive from the wire: a RoCEv2 datagram from the UDP socket is checked (headers, ICRC,
//! destination) and queued to its queue pair, found under the RCU read lock.
//!
//! Runs in softirq context (the UDP tunnel's `encap_rcv`): nothing here sleeps.

use crate::{
    icrc::KernelCrc32,
    param,
    roce::{
        icrc::{
            IpHeader,
            Ipv4Header,
            Ipv6Header,
            UdpHeader,
            IPPROTO_UDP, //
        },
        packet::parse,
    },
    tx::ipv4_of,
    Rxe, //
};
use kernel::{
    net::skbuff::SkBuff,
    prelude::*,
    rdma::device::Device, //
};
use zerocopy::FromBytes;

/// Why a received datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// Its paged data could not be made linear.
    NoMemory,
    /// No IPv4 header without options or IPv6 header without extensions before it.
    NetworkHeader,
    /// The UDP header is missing or its length disagrees with the datagram's.
    UdpLength,
    /// The RoCEv2 packet is malformed or its ICRC is wrong.
    Packet,
    /// It is not addressed to one of the port's GIDs.
    NotOurs,
    /// No queue pair has its destination QP number.
    NoQp,
    /// Its queue pair is being destroyed, or too many packets wait for it.
    Busy,
}

/// Returns the destination of the network header `nh` as a GID, and the header.
fn network(nh: &[u8]) -> Option<([u8; 16], IpHeader<'_>)> {
    match nh.first()? >> 4 {
        4 => {
            let ip = Ipv4Header::ref_from_bytes(nh).ok()?;
            if ip.version_ihl != 0x45 || ip.protocol != IPPROTO_UDP {
                return None;
            }
            let mut gid = [0u8; 16];
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(&ip.daddr);
            Some((gid, IpHeader::V4(ip)))
        }
        6 => {
            let ip = Ipv6Header::ref_from_bytes(nh).ok()?;
            if ip.next_header != IPPROTO_UDP {
                return None;
            }
            Some((ip.daddr, IpHeader::V6(ip)))
        }
        _ => None,
    }
}

/// Checks the datagram `skb` that arrived for `dev` and queues its packet to its queue pair.
pub(crate) fn receive(dev: &Device<Rxe>, mut skb: SkBuff) -> Result<(), DropReason> {
    skb.linearize().map_err(|_| DropReason::NoMemory)?;
    let nh = skb.network_header().ok_or(DropReason::NetworkHeader)?;
    let (dgid, ip) = network(nh).ok_or(DropReason::NetworkHeader)?;
    let data = skb.data();
    let (udp, payload) = UdpHeader::ref_from_prefix(data).map_err(|_| DropReason::UdpLength)?;
    if usize::from(udp.len.get()) != data.len() {
        return Err(DropReason::UdpLength);
    }
    let pkt = parse(payload, ip, udp, &KernelCrc32).map_err(|_| DropReason::Packet)?;
    // Multicast groups are not joined on the wire yet: only the port's own addresses.
    if ipv4_of(&dgid).is_none() && dgid[0] == 0xff {
        return Err(DropReason::NotOurs);
    }
    if !dev.has_roce_v2_gid(param::PORT, &dgid) {
        return Err(DropReason::NotOurs);
    }
    let mut p = KVec::new();
    p.extend_from_slice(pkt.as_bytes(), GFP_ATOMIC)
        .map_err(|_| DropReason::NoMemory)?;
    let qpn = pkt.dest_qpn();
    skb.consume();
    dev.engine.deliver(qpn, p).map_err(|e| {
        if e == ENOENT {
            DropReason::NoQp
        } else {
            DropReason::Busy
        }
    })
}
