// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC of RoCEv2 packets (IBTA annex A17.3.3).
//!
//! The ICRC is a CRC-32 over a pseudo header, the BTH and everything after it
//! up to the ICRC itself. The pseudo header stands in for the InfiniBand LRH
//! and GRH: eight bytes of ones for the LRH (folded into [`ICRC_SEED`]), then
//! the IP and UDP headers with the fields that routers may change masked to
//! ones: IPv4 TOS, TTL and header checksum, IPv6 traffic class, flow label
//! and hop limit, and the UDP checksum. The BTH byte that holds FECN, BECN and
//! reserved bits is masked to ones too. The result is inverted and sent least
//! significant byte first, exactly as `rxe_icrc.c` produces it.
//!
//! The CRC-32 itself is supplied by the caller through [`Crc32`], so the
//! kernel can use its own `crc32_le()` and the host a library.

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{
    FromBytes,
    IntoBytes, //
};
use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout,
    Unaligned, //
};

use super::headers::Bth;

/// Length of the ICRC at the end of every packet.
pub const ICRC_LEN: usize = 4;

/// The IP protocol number of UDP, which carries RoCEv2.
pub const IPPROTO_UDP: u8 = 17;

/// CRC-32 register after eight bytes of ones (the masked LRH) from `0xffffffff`.
pub const ICRC_SEED: u32 = 0xdebb_20e3;

/// The CRC-32 primitive: the kernel's `crc32_le()` semantics.
///
/// It is the reflected CRC-32 of IEEE 802.3 (polynomial `0xedb88320`) that
/// continues from register value `seed`, with no inversion on entry or exit:
/// the standard CRC-32 of `data` is `!crc32_le(!0, data)`.
pub trait Crc32 {
    /// Continues the CRC register `seed` over `data`.
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32;
}

impl<C: Crc32 + ?Sized> Crc32 for &C {
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        (**self).crc32_le(seed, data)
    }
}

/// IPv4 header without options (20 bytes).
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Ipv4Header {
    /// Version (7..4) and header length in words (3..0).
    pub version_ihl: u8,
    /// Type of service (DSCP and ECN).
    pub tos: u8,
    /// Total length.
    pub total_len: U16,
    /// Identification.
    pub id: U16,
    /// Flags and fragment offset.
    pub frag_off: U16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol (17 for UDP).
    pub protocol: u8,
    /// Header checksum.
    pub check: U16,
    /// Source address.
    pub saddr: [u8; 4],
    /// Destination address.
    pub daddr: [u8; 4],
}

/// IPv6 header (40 bytes).
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Ipv6Header {
    /// Version (4 bits), traffic class (8 bits) and flow label (20 bits).
    pub version_class_flow: [u8; 4],
    /// Payload length.
    pub payload_len: U16,
    /// Next header (17 for UDP).
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub saddr: [u8; 16],
    /// Destination address.
    pub daddr: [u8; 16],
}

/// UDP header (8 bytes).
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct UdpHeader {
    /// Source port.
    pub source: U16,
    /// Destination port, 4791 for RoCEv2.
    pub dest: U16,
    /// Length of UDP header and payload.
    pub len: U16,
    /// Checksum.
    pub check: U16,
}

impl UdpHeader {
    /// The IANA port of RoCEv2.
    pub const ROCE_V2_PORT: u16 = 4791;
}

/// The network header a packet travelled (or will travel) in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHeader<'a> {
    /// IPv4 without options.
    V4(&'a Ipv4Header),
    /// IPv6 without extension headers.
    V6(&'a Ipv6Header),
}

/// The pseudo header for IPv4: masked IPv4, UDP and BTH headers.
#[derive(IntoBytes, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct PseudoV4 {
    ip: Ipv4Header,
    udp: UdpHeader,
    bth: Bth,
}

/// The pseudo header for IPv6: masked IPv6, UDP and BTH headers.
#[derive(IntoBytes, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct PseudoV6 {
    ip: Ipv6Header,
    udp: UdpHeader,
    bth: Bth,
}

/// Computes the ICRC of a packet.
///
/// `packet` runs from the first byte of the BTH to the last byte before the
/// ICRC (the UDP payload without its last four bytes). The IP and UDP headers
/// must already hold their final lengths. Returns `None` if `packet` is
/// shorter than a BTH. The value is sent as `icrc.to_le_bytes()`.
pub fn compute<C: Crc32 + ?Sized>(
    crc: &C,
    ip: IpHeader<'_>,
    udp: &UdpHeader,
    packet: &[u8],
) -> Option<u32> {
    let (bth, rest) = Bth::ref_from_prefix(packet).ok()?;
    Some(compute_parts(crc, ip, udp, bth, rest))
}

/// The most bytes after the BTH that [`compute_parts`] copies behind the pseudo header, so
/// that the CRC of a short packet is one call rather than two.
///
/// The kernel's `crc32_le()` enters and leaves an FPU section for each call of 16 bytes or
/// more, which costs more than copying this many bytes: an ACK, a READ request or response
/// of a few bytes, an atomic and its acknowledgement, a 64-byte SEND or WRITE each take one.
pub const JOINED_REST_MAX: usize = 128;

/// Computes the ICRC of a packet given as its BTH and the bytes after it.
///
/// `rest` runs from the end of the BTH to the last byte before the ICRC.
pub fn compute_parts<C: Crc32 + ?Sized>(
    crc: &C,
    ip: IpHeader<'_>,
    udp: &UdpHeader,
    bth: &Bth,
    rest: &[u8],
) -> u32 {
    let joined = compute_filled(crc, ip, udp, bth, rest.len(), |dst| {
        dst.copy_from_slice(rest);
        true
    });
    joined.unwrap_or_else(|| !crc.crc32_le(start(crc, ip, udp, bth), rest))
}

/// Computes the ICRC of a short packet in one CRC call: `fill` writes the `rest_len` bytes
/// after the BTH (up to the ICRC) behind the pseudo header.
///
/// Returns `None` if `rest_len` is above [`JOINED_REST_MAX`] or `fill` fails.
pub fn compute_filled<C: Crc32 + ?Sized>(
    crc: &C,
    ip: IpHeader<'_>,
    udp: &UdpHeader,
    bth: &Bth,
    rest_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Option<u32> {
    if rest_len > JOINED_REST_MAX {
        return None;
    }
    let mut joined = [0u8; core::mem::size_of::<PseudoV6>() + JOINED_REST_MAX];
    let reg = with_pseudo(ip, udp, bth, |pseudo| {
        let len = pseudo.len().checked_add(rest_len)?;
        joined.get_mut(..pseudo.len())?.copy_from_slice(pseudo);
        if !fill(joined.get_mut(pseudo.len()..len)?) {
            return None;
        }
        Some(crc.crc32_le(ICRC_SEED, joined.get(..len)?))
    })?;
    Some(!reg)
}

/// Returns the CRC register after the pseudo header of a packet with this BTH.
///
/// The ICRC is then the complement of the register carried on over the bytes after the BTH,
/// up to the ICRC, in as many pieces as they come in.
pub fn start<C: Crc32 + ?Sized>(crc: &C, ip: IpHeader<'_>, udp: &UdpHeader, bth: &Bth) -> u32 {
    with_pseudo(ip, udp, bth, |pseudo| crc.crc32_le(ICRC_SEED, pseudo))
}

/// Calls `f` with the pseudo header of a packet with this BTH (without the LRH's ones, which
/// [`ICRC_SEED`] stands for).
fn with_pseudo<R>(ip: IpHeader<'_>, udp: &UdpHeader, bth: &Bth, f: impl FnOnce(&[u8]) -> R) -> R {
    let bth = bth.masked_for_icrc();
    let mut udp = *udp;
    udp.check = U16::new(0xffff);
    match ip {
        IpHeader::V4(ip) => {
            let mut ip = *ip;
            ip.tos = 0xff;
            ip.ttl = 0xff;
            ip.check = U16::new(0xffff);
            f(PseudoV4 { ip, udp, bth }.as_bytes())
        }
        IpHeader::V6(ip) => {
            let mut ip = *ip;
            // Keep the version nibble; mask traffic class and flow label.
            let [version, _, _, _] = ip.version_class_flow;
            ip.version_class_flow = [version | 0x0f, 0xff, 0xff, 0xff];
            ip.hop_limit = 0xff;
            f(PseudoV6 { ip, udp, bth }.as_bytes())
        }
    }
}
