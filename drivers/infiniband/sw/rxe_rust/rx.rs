// SPDX-License-Identifier: GPL-2.0

//! Receive from the wire: a RoCEv2 datagram from the UDP socket is checked (headers, ICRC,
//! destination) and queued to its queue pair, found under the RCU read lock, which handles it
//! right there when it is connected and no other context runs it ([`crate::engine`]).
//!
//! Runs in softirq context (the UDP tunnel's `encap_rcv`): nothing here sleeps.

use crate::{
    icrc::KernelCrc32,
    mcast,
    param,
    roce::{
        headers::Bth,
        icrc::{
            IpHeader,
            Ipv4Header,
            Ipv6Header,
            UdpHeader,
            IPPROTO_UDP, //
        },
        opcode::MAX_HEADER_LEN,
        packet::{
            Packet as RocePacket,
            ParseError, //
        },
    },
    stats::{
        Counter,
        Counters, //
    },
    transport::{
        Packet,
        UDP_HEADER_LEN, //
    },
    Rxe, //
};
use kernel::{
    net::skbuff::{
        SkBuff,
        SkbDropReason, //
    },
    prelude::*,
    rdma::{
        device::Device,
        trace, //
    },
};
use zerocopy::FromBytes;

/// The bytes a datagram must have in its linear part: the UDP header and the longest headers
/// of a RoCEv2 packet.
const HEADERS_LEN: u32 = (UDP_HEADER_LEN + MAX_HEADER_LEN) as u32;

/// The QP number a drop is traced with when the datagram's was not read (the multicast QPN).
const NO_QPN: u32 = Bth::MULTICAST_QPN;

/// Why a received datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// Its headers could not be made linear, or no memory to hold it.
    NoMemory,
    /// No IPv4 header without options or IPv6 header without extensions before it.
    NetworkHeader,
    /// The UDP header is missing or its length disagrees with the datagram's.
    UdpLength,
    /// The RoCEv2 packet is shorter than its headers, pad and ICRC.
    Truncated,
    /// The RoCEv2 packet is malformed otherwise.
    Packet,
    /// The ICRC is wrong.
    Icrc,
    /// It is not addressed to one of the port's GIDs or multicast groups.
    NotOurs,
    /// No queue pair has its destination QP number.
    NoQp,
    /// Its queue pair is being destroyed.
    QpGone,
    /// Too many packets wait for its queue pair.
    Busy,
    /// Its queue pair is not in a state that receives (RESET, INIT, ERR).
    QpState,
    /// Its queue pair was reset or destroyed while the datagram waited for it.
    Purge,
    /// Its queue pair's transport refused it (a payload past the MTU, an opcode the type does
    /// not have, a response to nothing outstanding); the transport frees it.
    Transport,
}

impl DropReason {
    /// Returns the reason's name, as the `rxe_rust:rxe_rust_drop` tracepoint reports it.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Self::NoMemory => c"no_memory",
            Self::NetworkHeader => c"network_header",
            Self::UdpLength => c"udp_length",
            Self::Truncated => c"truncated",
            Self::Packet => c"malformed",
            Self::Icrc => c"icrc",
            Self::NotOurs => c"not_ours",
            Self::NoQp => c"no_qp",
            Self::QpGone => c"qp_gone",
            Self::Busy => c"busy",
            Self::QpState => c"qp_state",
            Self::Purge => c"purge",
            Self::Transport => c"transport",
        }
    }

    /// Returns the reason a queue pair `qpn` did not take a datagram for, from the error
    /// [`crate::engine::Engine::receive_wire`] or [`crate::engine::QpShared::enqueue`] gave.
    pub(crate) fn not_taken(e: Error) -> Self {
        match e {
            e if e == ENOENT => Self::NoQp,
            e if e == ESRCH => Self::QpGone,
            e if e == ENOMEM => Self::NoMemory,
            _ => Self::Busy,
        }
    }

    /// Returns the optional port counter of drops for this reason.
    fn counter(self) -> Counter {
        match self {
            Self::NoMemory => Counter::DropNoMemory,
            Self::NetworkHeader => Counter::DropNetworkHeader,
            Self::UdpLength => Counter::DropUdpLength,
            Self::Truncated => Counter::DropTruncated,
            Self::Packet => Counter::DropMalformed,
            Self::Icrc => Counter::DropIcrc,
            Self::NotOurs => Counter::DropNotOurs,
            Self::NoQp => Counter::DropNoQp,
            Self::QpGone => Counter::DropQpGone,
            Self::Busy => Counter::DropBusy,
            Self::QpState => Counter::DropQpState,
            Self::Purge => Counter::DropPurge,
            Self::Transport => Counter::DropTransport,
        }
    }

    /// Reports a datagram for the queue pair `qpn` of the device `dev_index` as dropped for
    /// this reason: counted in `counters` and traced.
    pub(crate) fn report(self, counters: &Counters, dev_index: u32, qpn: u32) {
        counters.inc(self.counter());
        trace::rx_drop(dev_index, qpn, self.name());
    }

    /// Returns the network stack's reason, which the `skb:kfree_skb` tracepoint reports.
    pub(crate) fn skb_reason(self) -> SkbDropReason {
        match self {
            Self::NoMemory => SkbDropReason::NoMem,
            Self::NetworkHeader | Self::Packet => SkbDropReason::UnhandledProto,
            Self::UdpLength | Self::Truncated => SkbDropReason::PktTooSmall,
            Self::Icrc => SkbDropReason::SkbCsum,
            Self::NotOurs => SkbDropReason::OtherHost,
            Self::NoQp | Self::QpGone => SkbDropReason::NoSocket,
            Self::Busy => SkbDropReason::SocketRcvbuff,
            Self::QpState => SkbDropReason::NotSpecified,
            Self::Purge => SkbDropReason::QueuePurge,
            Self::Transport => SkbDropReason::NotSpecified,
        }
    }
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

/// Where a datagram that passed the checks goes.
enum Destination {
    /// The queue pair with this number.
    Qp(u32),
    /// Each queue pair attached to the multicast group with this GID.
    Group([u8; 16]),
}

/// Checks the datagram `skb` that arrived for `dev` and queues it to its queue pair, or to
/// every queue pair of its multicast group.
///
/// A datagram that is dropped is freed with its reason, which is also returned. When a
/// group's queue pairs take it, the first failure to deliver to one of them is returned.
pub(crate) fn receive(dev: &Device<Rxe>, mut skb: SkBuff) -> Result<(), DropReason> {
    let dest = match check(dev, &mut skb) {
        Ok(dest) => dest,
        Err(why) => {
            why.report(&dev.counters, dev.index(), NO_QPN);
            skb.drop_with_reason(why.skb_reason());
            return Err(why);
        }
    };
    let members = match dest {
        Destination::Qp(qpn) => return deliver(dev, qpn, skb),
        Destination::Group(mgid) => mcast::members(dev, &mgid),
    };
    let Some((&last, others)) = members.as_ref().and_then(|m| m.qpns().split_last()) else {
        DropReason::NotOurs.report(&dev.counters, dev.index(), Bth::MULTICAST_QPN);
        skb.drop_with_reason(DropReason::NotOurs.skb_reason());
        return Err(DropReason::NotOurs);
    };
    let mut result = Ok(());
    for &qpn in others {
        // A clone shares the bytes: each queue pair gets the datagram without a copy.
        let delivered = match skb.try_clone(GFP_ATOMIC) {
            Ok(clone) => deliver(dev, qpn, clone),
            Err(_) => {
                DropReason::NoMemory.report(&dev.counters, dev.index(), qpn);
                Err(DropReason::NoMemory)
            }
        };
        result = result.and(delivered);
    }
    deliver(dev, last, skb).and(result)
}

/// Queues `skb` to the queue pair `qpn` of `dev`; a datagram it does not take is freed with
/// the reason, which is also returned.
fn deliver(dev: &Device<Rxe>, qpn: u32, skb: SkBuff) -> Result<(), DropReason> {
    // The datagram itself goes to the queue pair: no copy.
    dev.engine
        .receive_wire(qpn, Packet::Wire(skb))
        .map_err(|(e, packet)| {
            let why = DropReason::not_taken(e);
            why.report(&dev.counters, dev.index(), qpn);
            packet.drop_with(why.skb_reason());
            why
        })
}

/// Checks the datagram `skb` for `dev`; returns where it goes.
fn check(dev: &Device<Rxe>, skb: &mut SkBuff) -> Result<Destination, DropReason> {
    // The headers must be in the linear part; the payload may stay in the pages, read in
    // place for the ICRC and copied from there into memory once.
    let headers = skb.len().min(HEADERS_LEN);
    skb.may_pull(headers).map_err(|_| DropReason::NoMemory)?;
    // Pages a local sender spliced in (`sendfile`) may change under us: the ICRC checked now
    // would not be of the bytes placed later. Those are copied, as the stack does before it
    // checksums them (`skb_has_shared_frag` in `net/core/dev.c`).
    if skb.has_shared_frag() {
        skb.linearize().map_err(|_| DropReason::NoMemory)?;
    }
    let skb: &SkBuff = skb;
    let nh = skb.network_header().ok_or(DropReason::NetworkHeader)?;
    let (dgid, ip) = network(nh).ok_or(DropReason::NetworkHeader)?;
    let (udp, head) = UdpHeader::ref_from_prefix(skb.data()).map_err(|_| DropReason::UdpLength)?;
    if u32::from(udp.len.get()) != skb.len() {
        return Err(DropReason::UdpLength);
    }
    let len = head.len() + (skb.len() - skb.headlen()) as usize;
    let pkt = if head.len() == len {
        RocePacket::parse(head)
    } else {
        RocePacket::parse_paged(head, skb, UDP_HEADER_LEN, len)
    };
    let pkt = pkt
        .and_then(|pkt| pkt.verify_icrc(&KernelCrc32, ip, udp).map(|()| pkt))
        .map_err(|e| match e {
            ParseError::IcrcMismatch => DropReason::Icrc,
            ParseError::Truncated => DropReason::Truncated,
            _ => DropReason::Packet,
        })?;
    if mcast::is_multicast(&dgid) {
        // A multicast datagram carries the multicast QP number; the groups' queue pairs are
        // UD, whose responder checks the rest (DETH, Q_Key, opcode).
        if pkt.dest_qpn() != Bth::MULTICAST_QPN {
            return Err(DropReason::Packet);
        }
        return Ok(Destination::Group(dgid));
    }
    if !dev.has_roce_v2_gid(param::PORT, &dgid) {
        return Err(DropReason::NotOurs);
    }
    Ok(Destination::Qp(pkt.dest_qpn()))
}
