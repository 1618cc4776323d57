// SPDX-License-Identifier: GPL-2.0

//! Parsing, validating and building RoCEv2 packets (the UDP payload).
//!
//! A packet is the BTH, the extended headers its opcode calls for, the
//! payload, zero to three pad bytes and the 4-byte ICRC. Receiving is done in
//! the order of the C driver's `rxe_rcv()`:
//!
//! 1. [`Packet::parse`] checks what the packet alone can tell: length,
//!    opcode, transport version, pad count, header and payload lengths.
//! 2. The caller looks up the destination QP from [`Packet::bth`], then
//!    [`Packet::check_qp`] checks the opcode against the QP type and the
//!    payload against the path MTU.
//! 3. [`Packet::verify_icrc`] checks the ICRC against the IP and UDP headers.
//!
//! [`parse`] does steps 1 and 3 at once. Sending goes the other way: a
//! [`PacketBuilder`] lays out the headers in a caller-provided buffer, the
//! caller fills them and the payload, and [`PacketBuilder::finish`] writes
//! the pad and ICRC.

use zerocopy::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout, //
};

use super::headers::{
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
use super::icrc::{
    self,
    Crc32,
    IpHeader,
    UdpHeader,
    ICRC_LEN, //
};
use super::mtu::IbMtu;
use super::opcode::{
    ExtHeaders,
    OpClass,
    Opcode,
    Position,
    QpType,
    BTH_LEN, //
};
use super::psn::Psn;

/// Why a received packet was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than its BTH, headers, pad and ICRC.
    Truncated,
    /// An opcode this driver does not implement (RD, CNP, reserved).
    UnknownOpcode(u8),
    /// A transport header version other than 0.
    TransportVersion(u8),
    /// A pad count that the opcode or the packet length does not allow.
    PadCount,
    /// A length the opcode does not allow.
    ///
    /// Payload and pad not a multiple of four bytes, a payload on an opcode
    /// without one, an ATOMIC WRITE payload other than eight bytes, a first or
    /// middle packet not exactly one path MTU, or an empty last packet.
    LengthNotAllowed,
    /// A payload larger than the path MTU.
    PayloadOverMtu,
    /// An opcode of another transport than the QP's.
    QpTypeMismatch,
    /// The ICRC does not match the packet.
    IcrcMismatch,
}

/// The bytes of a received packet past its linear part: the pages of a socket buffer.
///
/// The packet's bytes need not be in one slice: the headers must be, and the payload, pad and
/// ICRC may continue here, read in pieces ([`Packet::parse_paged`]).
pub trait Fragments {
    /// Calls `f` with the bytes `offset..offset + len`, in order, in one or more pieces.
    ///
    /// Returns false, having stopped, if `f` returned false or the bytes are not all there.
    fn read(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> bool;
}

/// Where a packet continues past its linear part: byte `i` of the packet is byte `base + i`
/// of `src`.
#[derive(Clone, Copy)]
struct Tail<'a> {
    src: &'a dyn Fragments,
    base: usize,
}

impl core::fmt::Debug for Tail<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tail").field("base", &self.base).finish()
    }
}

/// A received packet whose structure has been checked.
///
/// # Invariants
///
/// The packet is `len` bytes: the headers of `opcode`, then `payload_len` bytes of payload,
/// `pad` pad bytes and the ICRC, and nothing else. `head` is its first bytes and holds at
/// least the headers; `tail` holds the rest, and is `None` when `head` is the whole packet.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    head: &'a [u8],
    tail: Option<Tail<'a>>,
    len: usize,
    bth: &'a Bth,
    opcode: Opcode,
    payload_len: usize,
    pad: u8,
}

impl<'a> Packet<'a> {
    /// Parses the UDP payload `bytes` and checks its structure.
    ///
    /// `bytes` must be exactly the UDP payload (UDP length minus eight), so
    /// that the ICRC is its last four bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ParseError> {
        Self::parse_parts(bytes, None, bytes.len())
    }

    /// Parses a UDP payload of `len` bytes that starts with `head` and continues in `src`,
    /// whose byte `base + i` is byte `i` of the payload, and checks its structure.
    ///
    /// `head` must hold the packet's headers: at least [`MAX_HEADER_LEN`] bytes, or the whole
    /// packet. Nothing past the headers is read here.
    ///
    /// [`MAX_HEADER_LEN`]: super::opcode::MAX_HEADER_LEN
    pub fn parse_paged(
        head: &'a [u8],
        src: &'a dyn Fragments,
        base: usize,
        len: usize,
    ) -> Result<Self, ParseError> {
        Self::parse_parts(head, Some(Tail { src, base }), len)
    }

    fn parse_parts(head: &'a [u8], tail: Option<Tail<'a>>, len: usize) -> Result<Self, ParseError> {
        let (bth, _) = Bth::ref_from_prefix(head).map_err(|_| ParseError::Truncated)?;
        let raw = bth.opcode_raw();
        let opcode = Opcode::from_u8(raw).ok_or(ParseError::UnknownOpcode(raw))?;
        let tver = bth.transport_version();
        if tver != 0 {
            return Err(ParseError::TransportVersion(tver));
        }
        // Payload and pad together, between the headers and the ICRC.
        let data_len = len
            .checked_sub(opcode.header_len())
            .and_then(|n| n.checked_sub(ICRC_LEN))
            .ok_or(ParseError::Truncated)?;
        // The headers are read from `head` alone, and what is past it from `tail`.
        let tail = match tail {
            _ if head.len() == len => None,
            Some(t) if head.len() >= opcode.header_len() && head.len() < len => Some(t),
            _ => return Err(ParseError::Truncated),
        };
        let pad = bth.pad_count();
        if data_len % 4 != 0 {
            return Err(ParseError::LengthNotAllowed);
        }
        if !opcode.has_payload() {
            if pad != 0 {
                return Err(ParseError::PadCount);
            }
            if data_len != 0 {
                return Err(ParseError::LengthNotAllowed);
            }
        }
        // Only the end of a message may be padded: first and middle packets
        // carry a whole path MTU, a multiple of four.
        if pad != 0 && !opcode.position().is_end() {
            return Err(ParseError::PadCount);
        }
        let payload_len = data_len
            .checked_sub(usize::from(pad))
            .ok_or(ParseError::PadCount)?;
        if opcode.class() == OpClass::AtomicWrite && payload_len != 8 {
            return Err(ParseError::LengthNotAllowed);
        }
        // INVARIANT: header_len + payload_len + pad + ICRC_LEN == len; `head` is all of it,
        // or holds the headers and `tail` the rest.
        Ok(Self {
            head,
            tail,
            len,
            bth,
            opcode,
            payload_len,
            pad,
        })
    }

    /// Calls `f` with the packet's bytes `offset..offset + len`, in order, in one or more
    /// pieces; returns false, having stopped, if `f` returned false or the range is outside.
    fn read(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        let Some(end) = offset.checked_add(len).filter(|&end| end <= self.len) else {
            return false;
        };
        let head_end = end.min(self.head.len());
        if let Some(piece) = self.head.get(offset..head_end) {
            if !piece.is_empty() && !f(piece) {
                return false;
            }
        }
        let from = offset.max(self.head.len());
        if from >= end {
            return true;
        }
        match (self.tail, from.checked_add(self.tail.map_or(0, |t| t.base))) {
            (Some(t), Some(at)) => t.src.read(at, end.saturating_sub(from), f),
            _ => false,
        }
    }

    /// Copies the packet's bytes from `offset` into `dst`, which they must fill.
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> bool {
        let mut rest = &mut *dst;
        self.read(offset, rest.len(), &mut |piece| {
            match core::mem::take(&mut rest).split_at_mut_checked(piece.len()) {
                Some((d, after)) => {
                    // Not `copy_from_slice`: its length check's panic is one more exit, which
                    // objtool does not know by this compiler's name for it.
                    for (to, from) in d.iter_mut().zip(piece) {
                        *to = *from;
                    }
                    rest = after;
                    true
                }
                None => false,
            }
        })
    }

    /// Checks that a QP of type `qp_type` with path MTU `mtu` may accept the packet.
    ///
    /// The MTU rules apply to every packet with a payload: no payload over the
    /// MTU, first and middle packets exactly one MTU, last packets not empty.
    pub fn check_qp(&self, qp_type: QpType, mtu: IbMtu) -> Result<(), ParseError> {
        if !self.opcode.allowed_for(qp_type) {
            return Err(ParseError::QpTypeMismatch);
        }
        if !self.opcode.has_payload() {
            return Ok(());
        }
        let mtu = usize::try_from(mtu.bytes()).unwrap_or(usize::MAX);
        if self.payload_len > mtu {
            return Err(ParseError::PayloadOverMtu);
        }
        let ok = match self.opcode.position() {
            Position::First | Position::Middle => self.payload_len == mtu,
            Position::Last => self.payload_len != 0,
            Position::Only => true,
        };
        if ok {
            Ok(())
        } else {
            Err(ParseError::LengthNotAllowed)
        }
    }

    /// Checks the ICRC against the network and UDP headers of the packet.
    pub fn verify_icrc<C: Crc32 + ?Sized>(
        &self,
        crc: &C,
        ip: IpHeader<'_>,
        udp: &UdpHeader,
    ) -> Result<(), ParseError> {
        let covered_len = self.len.saturating_sub(ICRC_LEN);
        let rest_len = covered_len.saturating_sub(BTH_LEN);
        let icrc = if rest_len <= icrc::JOINED_REST_MAX {
            // A short packet: its bytes after the BTH copied behind the pseudo header, one CRC
            // call (icrc::JOINED_REST_MAX says why).
            icrc::compute_filled(crc, ip, udp, self.bth, rest_len, |dst| {
                self.read_into(BTH_LEN, dst)
            })
            .ok_or(ParseError::Truncated)?
        } else {
            let mut reg = icrc::start(crc, ip, udp, self.bth);
            if !self.read(BTH_LEN, rest_len, &mut |piece| {
                reg = crc.crc32_le(reg, piece);
                true
            }) {
                return Err(ParseError::Truncated);
            }
            !reg
        };
        let mut wire = [0u8; ICRC_LEN];
        if !self.read_into(covered_len, &mut wire) {
            return Err(ParseError::Truncated);
        }
        if wire == icrc.to_le_bytes() {
            Ok(())
        } else {
            Err(ParseError::IcrcMismatch)
        }
    }

    /// Returns the opcode.
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// Returns the BTH.
    pub fn bth(&self) -> &'a Bth {
        self.bth
    }

    /// Returns the PSN from the BTH.
    pub fn psn(&self) -> Psn {
        self.bth().psn()
    }

    /// Returns the destination QP number from the BTH.
    pub fn dest_qpn(&self) -> u32 {
        self.bth().dest_qpn()
    }

    /// Returns the pad count.
    pub fn pad_count(&self) -> u8 {
        self.pad
    }

    /// Returns the packet's length, BTH to ICRC.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns false: a packet has at least a BTH.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Returns the packet's first bytes, in one slice: its headers, and for a packet not
    /// parsed in pieces, all of it.
    pub fn head(&self) -> &'a [u8] {
        self.head
    }

    /// Returns the payload, without pad.
    pub fn payload(&self) -> Payload<'a> {
        Payload {
            packet: *self,
            start: self.opcode.header_len(),
            len: self.payload_len,
        }
    }

    /// Returns the ICRC as carried in the packet.
    pub fn icrc(&self) -> u32 {
        let mut b = [0u8; ICRC_LEN];
        if self.read_into(self.len.saturating_sub(ICRC_LEN), &mut b) {
            u32::from_le_bytes(b)
        } else {
            0
        }
    }

    fn ext<T: FromBytes + KnownLayout + Immutable>(&self, which: ExtHeaders) -> Option<&'a T> {
        let offset = self.opcode.ext_headers().offset_of(which)?;
        let (hdr, _) = T::ref_from_prefix(self.head.get(offset..)?).ok()?;
        Some(hdr)
    }

    /// Returns the DETH (UD opcodes).
    pub fn deth(&self) -> Option<&'a Deth> {
        self.ext(ExtHeaders::DETH)
    }

    /// Returns the RETH (first RDMA WRITE, RDMA READ request, FLUSH, ATOMIC WRITE).
    pub fn reth(&self) -> Option<&'a Reth> {
        self.ext(ExtHeaders::RETH)
    }

    /// Returns the AETH (acknowledges and read responses other than middle).
    pub fn aeth(&self) -> Option<&'a Aeth> {
        self.ext(ExtHeaders::AETH)
    }

    /// Returns the AtomicETH (CmpSwap and FetchAdd).
    pub fn atomic_eth(&self) -> Option<&'a AtomicEth> {
        self.ext(ExtHeaders::ATOMIC_ETH)
    }

    /// Returns the AtomicAckETH (atomic acknowledge).
    pub fn atomic_ack_eth(&self) -> Option<&'a AtomicAckEth> {
        self.ext(ExtHeaders::ATOMIC_ACK_ETH)
    }

    /// Returns the ImmDt (opcodes with immediate data).
    pub fn imm_dt(&self) -> Option<&'a ImmDt> {
        self.ext(ExtHeaders::IMM_DT)
    }

    /// Returns the IETH (SEND with invalidate).
    pub fn ieth(&self) -> Option<&'a Ieth> {
        self.ext(ExtHeaders::IETH)
    }

    /// Returns the FETH (FLUSH).
    pub fn feth(&self) -> Option<&'a Feth> {
        self.ext(ExtHeaders::FETH)
    }
}

/// The payload of a received packet, in one slice or in pieces.
///
/// # Invariants
///
/// `start..start + len` lies within `packet`.
#[derive(Clone, Copy, Debug)]
pub struct Payload<'a> {
    packet: Packet<'a>,
    start: usize,
    len: usize,
}

impl<'a> Payload<'a> {
    /// Returns the length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns true if there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns the payload as one slice, if it is in the packet's linear part.
    pub fn as_slice(&self) -> Option<&'a [u8]> {
        self.packet
            .head
            .get(self.start..self.start.checked_add(self.len)?)
    }

    /// Calls `f` with each piece of the payload and its offset in the payload, in order.
    ///
    /// Returns the first error `f` returns, or `missing` if a piece could not be read.
    pub fn for_each_piece<E>(
        &self,
        missing: E,
        mut f: impl FnMut(usize, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(all) = self.as_slice() {
            return f(0, all);
        }
        let mut offset = 0usize;
        let mut failed = None;
        let whole = self
            .packet
            .read(self.start, self.len, &mut |piece| match f(offset, piece) {
                Ok(()) => {
                    offset = offset.saturating_add(piece.len());
                    true
                }
                Err(e) => {
                    failed = Some(e);
                    false
                }
            });
        match failed {
            Some(e) => Err(e),
            None if whole => Ok(()),
            None => Err(missing),
        }
    }

    /// Copies the payload into `dst`, which must be as long; returns false if it is not.
    pub fn copy_to(&self, dst: &mut [u8]) -> bool {
        dst.len() == self.len && self.packet.read_into(self.start, dst)
    }
}

/// Parses a UDP payload, checks its structure and verifies its ICRC.
///
/// This is [`Packet::parse`] followed by [`Packet::verify_icrc`]; the QP
/// checks of [`Packet::check_qp`] remain for the caller.
pub fn parse<'a, C: Crc32 + ?Sized>(
    udp_payload: &'a [u8],
    ip: IpHeader<'_>,
    udp: &UdpHeader,
    crc: &C,
) -> Result<Packet<'a>, ParseError> {
    let pkt = Packet::parse(udp_payload)?;
    pkt.verify_icrc(crc, ip, udp)?;
    Ok(pkt)
}

/// Returns the UDP payload length of a packet with `opcode` and `payload_len`
/// bytes of payload, or `None` on overflow.
pub fn packet_len(opcode: Opcode, payload_len: usize) -> Option<usize> {
    opcode
        .header_len()
        .checked_add(payload_len)?
        .checked_add(usize::from(pad_for(payload_len)))?
        .checked_add(ICRC_LEN)
}

/// Returns the pad count for a payload of `payload_len` bytes.
pub fn pad_for(payload_len: usize) -> u8 {
    // Two's complement negation modulo 4, as `(-payload) & 3` in the C driver.
    (payload_len.wrapping_neg() & 3).to_le_bytes()[0]
}

/// Why a packet could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuildError {
    /// The buffer is smaller than [`packet_len`].
    BufferTooSmall,
    /// A payload on an opcode that has none, or a length that overflows.
    LengthNotAllowed,
}

/// Writes a packet in place into a caller-provided buffer.
///
/// [`PacketBuilder::new`] zeroes the headers and sets the opcode, the pad
/// count and the default P_Key in the BTH. The caller then sets the remaining BTH fields and the extended
/// headers through the `*_mut` accessors and copies the payload into
/// [`PacketBuilder::payload_mut`]; [`PacketBuilder::finish`] computes the ICRC
/// once the IP and UDP headers hold their final lengths.
///
/// [`PacketBuilder::headers`] lays out the headers only, for a caller that appends the
/// payload, pad and ICRC itself.
///
/// # Invariants
///
/// `bth` and `rest` are the two parts of a buffer of exactly
/// [`packet_len`]`(opcode, payload_len)` bytes, or of exactly `opcode.header_len()` bytes.
#[derive(Debug)]
pub struct PacketBuilder<'a> {
    bth: &'a mut Bth,
    rest: &'a mut [u8],
    opcode: Opcode,
    payload_len: usize,
}

impl<'a> PacketBuilder<'a> {
    /// Lays out a packet at the start of `buf`.
    pub fn new(buf: &'a mut [u8], opcode: Opcode, payload_len: usize) -> Result<Self, BuildError> {
        let len = packet_len(opcode, payload_len).ok_or(BuildError::LengthNotAllowed)?;
        Self::lay_out(buf, len, opcode, payload_len)
    }

    /// Lays out the headers (BTH and extended headers) of a packet with `payload_len` bytes of
    /// payload at the start of `buf`; [`PacketBuilder::payload_mut`] is then empty.
    pub fn headers(
        buf: &'a mut [u8],
        opcode: Opcode,
        payload_len: usize,
    ) -> Result<Self, BuildError> {
        packet_len(opcode, payload_len).ok_or(BuildError::LengthNotAllowed)?;
        Self::lay_out(buf, opcode.header_len(), opcode, payload_len)
    }

    /// Lays out the first `len` bytes of `buf`: the packet, or its headers.
    fn lay_out(
        buf: &'a mut [u8],
        len: usize,
        opcode: Opcode,
        payload_len: usize,
    ) -> Result<Self, BuildError> {
        if payload_len != 0 && !opcode.has_payload() {
            return Err(BuildError::LengthNotAllowed);
        }
        let buf = buf.get_mut(..len).ok_or(BuildError::BufferTooSmall)?;
        let (bth, rest) = Bth::mut_from_prefix(buf).map_err(|_| BuildError::BufferTooSmall)?;
        let ext_len = opcode.ext_headers().len();
        if let Some(ext) = rest.get_mut(..ext_len) {
            ext.fill(0);
        }
        bth.init(
            opcode,
            BthFields {
                solicited: false,
                pad_count: pad_for(payload_len),
                pkey: Bth::DEFAULT_PKEY,
                dest_qpn: 0,
                ack_req: false,
                psn: Psn::ZERO,
            },
        );
        // INVARIANT: `buf` was cut to the packet's or the headers' length and split.
        Ok(Self {
            bth,
            rest,
            opcode,
            payload_len,
        })
    }

    /// Returns the length of what was laid out: the packet, BTH to ICRC, or its headers.
    pub fn len(&self) -> usize {
        BTH_LEN.saturating_add(self.rest.len())
    }

    /// Returns false: what was laid out always has at least a BTH.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Returns the opcode.
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// Returns the BTH for writing.
    ///
    /// Keep the opcode and pad count that [`PacketBuilder::new`] set.
    pub fn bth_mut(&mut self) -> &mut Bth {
        self.bth
    }

    fn ext_mut<T: FromBytes + IntoBytes + KnownLayout>(
        &mut self,
        which: ExtHeaders,
    ) -> Option<&mut T> {
        let offset = self
            .opcode
            .ext_headers()
            .offset_of(which)?
            .checked_sub(BTH_LEN)?;
        let (hdr, _) = T::mut_from_prefix(self.rest.get_mut(offset..)?).ok()?;
        Some(hdr)
    }

    /// Returns the DETH for writing, if the opcode has one.
    pub fn deth_mut(&mut self) -> Option<&mut Deth> {
        self.ext_mut(ExtHeaders::DETH)
    }

    /// Returns the RETH for writing, if the opcode has one.
    pub fn reth_mut(&mut self) -> Option<&mut Reth> {
        self.ext_mut(ExtHeaders::RETH)
    }

    /// Returns the AETH for writing, if the opcode has one.
    pub fn aeth_mut(&mut self) -> Option<&mut Aeth> {
        self.ext_mut(ExtHeaders::AETH)
    }

    /// Returns the AtomicETH for writing, if the opcode has one.
    pub fn atomic_eth_mut(&mut self) -> Option<&mut AtomicEth> {
        self.ext_mut(ExtHeaders::ATOMIC_ETH)
    }

    /// Returns the AtomicAckETH for writing, if the opcode has one.
    pub fn atomic_ack_eth_mut(&mut self) -> Option<&mut AtomicAckEth> {
        self.ext_mut(ExtHeaders::ATOMIC_ACK_ETH)
    }

    /// Returns the ImmDt for writing, if the opcode has one.
    pub fn imm_dt_mut(&mut self) -> Option<&mut ImmDt> {
        self.ext_mut(ExtHeaders::IMM_DT)
    }

    /// Returns the IETH for writing, if the opcode has one.
    pub fn ieth_mut(&mut self) -> Option<&mut Ieth> {
        self.ext_mut(ExtHeaders::IETH)
    }

    /// Returns the FETH for writing, if the opcode has one.
    pub fn feth_mut(&mut self) -> Option<&mut Feth> {
        self.ext_mut(ExtHeaders::FETH)
    }

    /// Returns the payload area for writing.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.opcode.ext_headers().len();
        let end = start.saturating_add(self.payload_len);
        match self.rest.get_mut(start..end) {
            Some(payload) => payload,
            None => &mut [],
        }
    }

    /// Writes the pad bytes (zero) and the ICRC; returns the packet length.
    ///
    /// The packet is then the first that many bytes of the buffer given to
    /// [`PacketBuilder::new`]. A builder of [`PacketBuilder::headers`] has no room for them:
    /// it writes nothing and returns the headers' length.
    pub fn finish<C: Crc32 + ?Sized>(self, crc: &C, ip: IpHeader<'_>, udp: &UdpHeader) -> usize {
        let len = self.len();
        if packet_len(self.opcode, self.payload_len) != Some(len) {
            return len;
        }
        let covered_len = self.rest.len().saturating_sub(ICRC_LEN);
        let pad_start = self
            .opcode
            .ext_headers()
            .len()
            .saturating_add(self.payload_len);
        if let Some(pad) = self.rest.get_mut(pad_start..covered_len) {
            pad.fill(0);
        }
        if let Some((covered, tail)) = self.rest.split_at_mut_checked(covered_len) {
            let value = icrc::compute_parts(crc, ip, udp, self.bth, covered);
            if let Some(dst) = tail.get_mut(..ICRC_LEN) {
                dst.copy_from_slice(&value.to_le_bytes());
            }
        }
        len
    }
}
