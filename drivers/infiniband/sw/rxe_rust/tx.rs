// SPDX-License-Identifier: GPL-2.0

//! Transmit on the wire: a packet the protocol core built goes out in UDP and IP headers,
//! with its ICRC, through the netdevice's namespace's routes.

use crate::{
    icrc::KernelCrc32,
    roce::{
        icrc::{
            compute,
            IpHeader,
            Ipv4Header,
            Ipv6Header,
            UdpHeader, //
            ICRC_LEN,
            IPPROTO_UDP,
        },
        io::TxBuffer,
        responder::GRH_LEN,
    },
};
use kernel::{
    append::Append,
    net::{device::NetDevice, route::Dst, skbuff::TxSkb},
    prelude::*,
    rdma::{
        ah::AhAttr,
        cq::NetworkType,
        udp_sport,
        ROCE_V2_UDP_DPORT, //
    },
};
use zerocopy::{
    byteorder::network_endian::U16,
    FromBytes,
    IntoBytes, //
};

/// IPv4's "don't fragment" flag, in the flags and fragment offset field.
const IP_DF: u16 = 0x4000;

/// Where the packets of a queue pair or an address handle go: the global route of an
/// address vector, with the source GID the core resolved for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Path {
    /// Source GID: an IPv6 address, or an IPv4-mapped one.
    pub(crate) sgid: [u8; 16],
    /// Destination GID.
    pub(crate) dgid: [u8; 16],
    /// Destination MAC: our own means this device (loopback).
    pub(crate) dmac: [u8; 6],
    /// IPv4 TOS or IPv6 traffic class.
    pub(crate) traffic_class: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub(crate) hop_limit: u8,
    /// IPv6 flow label; it also picks the UDP source port.
    pub(crate) flow_label: u32,
}

impl Path {
    /// Returns whether the path leads to this device (`own_mac` is its MAC): its packets
    /// never reach a netdevice (loopback).
    pub(crate) fn is_local(&self, own_mac: &[u8; 6]) -> bool {
        self.dmac == *own_mac
    }

    /// Returns the path of an address vector the core lends, or `None` without a global
    /// route.
    ///
    /// The core resolves a source GID for every RoCE vector it passes to a driver; without one,
    /// the stack picks the source address and the ICRC covers zeros.
    pub(crate) fn from_ah_attr(attr: &AhAttr) -> Option<Self> {
        if !attr.has_grh() {
            return None;
        }
        let grh = attr.global_route();
        Some(Self {
            sgid: attr.sgid().unwrap_or_default(),
            dgid: grh.dgid,
            dmac: attr.roce_dmac().unwrap_or_default(),
            traffic_class: grh.traffic_class,
            hop_limit: grh.hop_limit,
            flow_label: grh.flow_label,
        })
    }
}

/// Returns the IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn ipv4_of(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, addr) = gid.split_at(12);
    if prefix != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        return None;
    }
    addr.try_into().ok()
}

/// The route a queue pair used last.
pub(crate) struct CachedRoute {
    /// The path it leads along.
    path: Path,
    /// Whether it is the queue pair's own path: the transport forgets the route when that
    /// path changes, so a connected packet need not compare the paths.
    connected: bool,
    dst: Dst,
}

/// The route a queue pair used last, if any.
pub(crate) type RouteCache = Option<CachedRoute>;

/// Returns the route for `path` out of `ndev` (`connected`: the queue pair's own path, and
/// `v4` its IPv4 addresses, if it has them): the cached one while it holds, else a new one,
/// which replaces it.
fn route<'a>(
    cache: &'a mut RouteCache,
    ndev: &NetDevice,
    path: &Path,
    connected: bool,
    v4: Option<([u8; 4], [u8; 4])>,
) -> Result<&'a Dst> {
    if cache
        .as_ref()
        .is_some_and(|c| ((connected && c.connected) || c.path == *path) && c.dst.is_valid())
    {
        return cache.as_ref().map(|c| &c.dst).ok_or(EINVAL);
    }
    *cache = None;
    let net = ndev.net().ok_or(ENODEV)?;
    let dst = match v4 {
        Some((s, d)) => Dst::output_v4(&net, ndev.ifindex(), s, d)?,
        None => Dst::output_v6(
            &net,
            ndev.ifindex(),
            &path.sgid,
            &path.dgid,
            path.flow_label,
        )?,
    };
    Ok(&cache
        .insert(CachedRoute {
            path: *path,
            connected,
            dst,
        })
        .dst)
}

/// Head room a packet's buffer leaves for the link-layer, IP and UDP headers: an IPv6
/// header, the longer of the two, whichever the path turns out to need.
fn headroom(ndev: &NetDevice) -> u32 {
    ndev.ll_reserved_space()
        + (core::mem::size_of::<Ipv6Header>() + core::mem::size_of::<UdpHeader>()) as u32
}

/// Allocates the buffer of a `len`-byte packet for another host, empty, for the protocol core
/// to append the packet to and [`send`] to send it: the packet is written into the buffer the
/// netdevice sends, each byte once.
///
/// Errors: `ENOMEM` if no buffer was left, `EINVAL` if `len` does not fit one.
pub(crate) fn alloc(ndev: &NetDevice, len: usize) -> Result<TxSkb> {
    TxSkb::alloc(headroom(ndev), u32::try_from(len)?, GFP_ATOMIC)
}

/// The buffer a packet is built in, appended to (the protocol core's `Output::Buffer`).
pub(crate) enum TxBuf {
    /// For another host: the socket buffer it leaves in ([`alloc`]).
    Skb(TxSkb),
    /// For a queue pair of this device, or for nowhere (no socket buffer could be had): a
    /// vector with room for the packet, after the GRH for a datagram.
    Local(KVec<u8>),
}

impl TxBuf {
    /// Returns the buffer as something bytes are appended to.
    pub(crate) fn as_append(&mut self) -> &mut dyn Append {
        match self {
            Self::Skb(skb) => skb,
            Self::Local(v) => v,
        }
    }
}

impl TxBuffer for TxBuf {
    fn put(&mut self, bytes: &[u8]) {
        // A packet that does not fit is found short when it is sent, and not sent.
        let _ = self.as_append().append(bytes);
    }
}

/// Sends the packet in `skb` (a UDP payload from its BTH to its ICRC, whose four bytes are
/// filled in here; the buffer from [`alloc`]) from queue pair `lqpn` along `path` (its own if
/// `connected`), out of `ndev`, by the route in `cache` if it still holds.
///
/// Errors: `ENODEV` if the netdevice has left its namespace, a routing error if there is no
/// route, `ENOBUFS` if the packet was dropped locally, `EINVAL` if the buffer holds no
/// packet or lacks head room.
pub(crate) fn send(
    ndev: &NetDevice,
    cache: &mut RouteCache,
    path: &Path,
    connected: bool,
    lqpn: u32,
    mut skb: TxSkb,
) -> Result {
    let packet = skb.data_mut();
    let len = packet.len();
    if len < 12 + ICRC_LEN {
        return Err(EINVAL);
    }
    // The destination QP number is in the BTH, bytes 5 to 7.
    let rqpn = u32::from_be_bytes([0, packet[5], packet[6], packet[7]]);
    let sport = udp_sport(path.flow_label, lqpn, rqpn);
    let v4 = ipv4_of(&path.sgid).zip(ipv4_of(&path.dgid));
    let dst = route(cache, ndev, path, connected, v4)?;
    let ip_len = if v4.is_some() {
        core::mem::size_of::<Ipv4Header>()
    } else {
        core::mem::size_of::<Ipv6Header>()
    };
    let udp_len = u16::try_from(core::mem::size_of::<UdpHeader>() + len).map_err(|_| EINVAL)?;
    let udp = UdpHeader {
        source: U16::new(sport),
        dest: U16::new(ROCE_V2_UDP_DPORT),
        len: U16::new(udp_len),
        check: U16::new(0),
    };
    skb.push_slice(udp.as_bytes())?;
    skb.reset_transport_header();
    match ip_header(path, v4, udp_len) {
        IpHeaderImage::V4(ip) => {
            skb.push_slice(ip.as_bytes())?;
            skb.reset_network_header();
            // The ICRC covers the identification: it must be final first.
            dst.select_ipv4_ident(&mut skb)?;
        }
        IpHeaderImage::V6(ip) => {
            skb.push_slice(ip.as_bytes())?;
            skb.reset_network_header();
        }
    }
    fill_icrc(skb.data_mut(), ip_len)?;
    dst.send(skb)
}

/// The IP header of a datagram along a path.
enum IpHeaderImage {
    V4(Ipv4Header),
    V6(Ipv6Header),
}

/// Returns the IP header of a datagram of `udp_len` UDP bytes along `path`, whose IPv4
/// addresses are `v4` if it has them (IPv4 with a zero identification and checksum, which the
/// stack fills in).
fn ip_header(path: &Path, v4: Option<([u8; 4], [u8; 4])>, udp_len: u16) -> IpHeaderImage {
    match v4 {
        Some((saddr, daddr)) => IpHeaderImage::V4(Ipv4Header {
            version_ihl: 0x45,
            tos: path.traffic_class,
            total_len: U16::new(udp_len.saturating_add(core::mem::size_of::<Ipv4Header>() as u16)),
            id: U16::new(0),
            frag_off: U16::new(IP_DF),
            ttl: path.hop_limit,
            protocol: IPPROTO_UDP,
            check: U16::new(0),
            saddr,
            daddr,
        }),
        None => {
            let tc = path.traffic_class;
            let fl = path.flow_label & 0xf_ffff;
            IpHeaderImage::V6(Ipv6Header {
                version_class_flow: [
                    0x60 | (tc >> 4),
                    (tc << 4) | (fl >> 16) as u8,
                    (fl >> 8) as u8,
                    fl as u8,
                ],
                payload_len: U16::new(udp_len),
                next_header: IPPROTO_UDP,
                hop_limit: path.hop_limit,
                saddr: path.sgid,
                daddr: path.dgid,
            })
        }
    }
}

/// Returns what a UD receive buffer starts with for a packet of `len` bytes (BTH to ICRC)
/// along `path`: its IP header as a 40-byte GRH (an IPv4 header after 20 zero bytes), as the
/// packet would have had on the wire.
pub(crate) fn grh_of(path: &Path, len: usize) -> [u8; GRH_LEN] {
    let udp_len = u16::try_from(core::mem::size_of::<UdpHeader>() + len).unwrap_or(u16::MAX);
    let mut grh = [0u8; GRH_LEN];
    let ip = ip_header(path, ipv4_of(&path.sgid).zip(ipv4_of(&path.dgid)), udp_len);
    let (at, bytes) = match &ip {
        IpHeaderImage::V4(ip) => (GRH_LEN - core::mem::size_of::<Ipv4Header>(), ip.as_bytes()),
        IpHeaderImage::V6(ip) => (0, ip.as_bytes()),
    };
    if let Some(d) = grh.get_mut(at..at + bytes.len()) {
        d.copy_from_slice(bytes);
    }
    grh
}

/// Returns the GRH a UD receive buffer starts with for a datagram whose IP header (no
/// options, or IPv6 without extensions) is `nh`, or `None` for another header.
pub(crate) fn grh_from_network_header(nh: &[u8]) -> Option<[u8; GRH_LEN]> {
    let mut grh = [0u8; GRH_LEN];
    let at = match (nh.first()? >> 4, nh.len()) {
        (4, 20) => GRH_LEN - 20,
        (6, 40) => 0,
        _ => return None,
    };
    grh.get_mut(at..)?.copy_from_slice(nh);
    Some(grh)
}

/// Returns the network header type of the GRH `grh` (see [`grh_of`]).
pub(crate) fn network_type_of(grh: &[u8; GRH_LEN]) -> NetworkType {
    if grh[0] >> 4 == 6 {
        NetworkType::Ipv6
    } else {
        NetworkType::Ipv4
    }
}

/// Computes the ICRC of the datagram `bytes` (IP header of `ip_len` bytes, UDP header,
/// packet) into its last four bytes.
fn fill_icrc(bytes: &mut [u8], ip_len: usize) -> Result {
    let (headers, packet) = bytes
        .split_at_mut_checked(ip_len + core::mem::size_of::<UdpHeader>())
        .ok_or(EINVAL)?;
    let (ip, udp) = headers.split_at(ip_len);
    let udp = UdpHeader::ref_from_bytes(udp).map_err(|_| EINVAL)?;
    let ip = if ip_len == core::mem::size_of::<Ipv4Header>() {
        IpHeader::V4(Ipv4Header::ref_from_bytes(ip).map_err(|_| EINVAL)?)
    } else {
        IpHeader::V6(Ipv6Header::ref_from_bytes(ip).map_err(|_| EINVAL)?)
    };
    let covered = packet.len().checked_sub(ICRC_LEN).ok_or(EINVAL)?;
    let (covered, icrc) = packet.split_at_mut(covered);
    let crc = compute(&KernelCrc32, ip, udp, covered).ok_or(EINVAL)?;
    icrc.copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

#[kunit_tests(rdma_rxe_rust_tx)]
mod tests {
    use core::sync::atomic::{
        AtomicU32,
        Ordering::SeqCst, //
    };
    use kernel::{
        net::skbuff::{
            impl_has_in_flight,
            InFlight,
            TxOwner,
            TxSkb, //
        },
        prelude::*,
        sync::{
            Arc,
            ArcBorrow, //
        },
    };

    /// A sender that counts how often it was told to resume.
    struct Sender {
        in_flight: InFlight<Sender>,
        resumed: AtomicU32,
    }

    impl_has_in_flight! {
        impl HasInFlight<Sender> for Sender { self.in_flight }
    }

    impl TxOwner for Sender {
        fn resume(this: ArcBorrow<'_, Self>) {
            this.resumed.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn buffers_are_counted_until_freed_and_a_waiting_sender_resumes_once() -> Result {
        let sender = Arc::new(
            Sender {
                in_flight: InFlight::new(&crate::THIS_MODULE, 2),
                resumed: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )?;
        let mut skbs = KVec::new();
        for _ in 0..4 {
            let mut skb = TxSkb::alloc(0, 16, GFP_KERNEL)?;
            skb.count_in(sender.as_arc_borrow())?;
            skbs.push(skb, GFP_KERNEL)?;
        }
        assert_eq!(sender.in_flight.count(), 4);
        // A buffer is counted once.
        if let Some(skb) = skbs.get_mut(0) {
            assert!(skb.count_in(sender.as_arc_borrow()) == Err(EBUSY));
        }
        assert_eq!(sender.in_flight.count(), 4);
        assert!(!sender.in_flight.must_wait(5));
        assert!(sender.in_flight.must_wait(4));
        // Freed, sent or not: 3 and 2 are not below the mark of 2, 1 is.
        let mut expected = [(3, 0), (2, 0), (1, 1), (0, 1)].into_iter();
        while let Some(skb) = skbs.pop() {
            drop(skb);
            let (count, resumed) = expected.next().unwrap_or((u32::MAX, u32::MAX));
            assert_eq!(sender.in_flight.count(), count);
            assert_eq!(sender.resumed.load(SeqCst), resumed);
        }
        // Not waiting: freeing below the mark tells nobody.
        let mut skb = TxSkb::alloc(0, 16, GFP_KERNEL)?;
        skb.count_in(sender.as_arc_borrow())?;
        drop(skb);
        assert_eq!(sender.resumed.load(SeqCst), 1);
        // Every buffer's reference on the sender went with it.
        assert!(Arc::into_unique_or_drop(sender).is_some());
        Ok(())
    }
}
