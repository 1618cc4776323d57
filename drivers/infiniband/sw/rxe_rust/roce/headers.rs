// SPDX-License-Identifier: GPL-2.0

//! Typed views of the InfiniBand transport headers (IBTA 9.2, 9.3).
//!
//! Each type has the exact wire layout, alignment 1 and network byte order,
//! so it can be borrowed straight from a packet buffer with zerocopy
//! (`Bth::ref_from_prefix(bytes)`), read through accessors and written in
//! place through setters. Reserved bits are ignored on read and written as
//! zero by the setters.

use zerocopy::byteorder::network_endian::{
    U16,
    U32,
    U64, //
};
use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout,
    Unaligned, //
};

use super::aeth::{
    ReservedSyndrome,
    Syndrome, //
};
use super::opcode::Opcode;
use super::psn::{
    Msn,
    Psn,
    SEQ24_MASK, //
};

/// Returns `word` with the bits of `mask` set or cleared.
const fn with_bits(word: u32, mask: u32, on: bool) -> u32 {
    if on {
        word | mask
    } else {
        word & !mask
    }
}

/// Base Transport Header, the 12 bytes that start every RoCEv2 UDP payload.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Bth {
    /// OpCode.
    opcode: u8,
    /// SE (bit 7), MigReq (bit 6), PadCnt (bits 5..4), TVer (bits 3..0).
    flags: u8,
    /// Partition key.
    pkey: U16,
    /// FECN (bit 31), BECN (bit 30), reserved (29..24), DestQP (23..0).
    qpn: U32,
    /// AckReq (bit 31), reserved (30..24), PSN (23..0).
    apsn: U32,
}

impl Bth {
    const SE: u8 = 0x80;
    const MIG: u8 = 0x40;
    const PAD_SHIFT: u8 = 4;
    const PAD: u8 = 0x30;
    const TVER: u8 = 0x0f;
    const FECN: u32 = 1 << 31;
    const BECN: u32 = 1 << 30;
    const ACK_REQ: u32 = 1 << 31;

    /// The default (full member) partition key.
    pub const DEFAULT_PKEY: u16 = 0xffff;

    /// The destination QP number that addresses a multicast group.
    pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

    /// Returns the opcode byte as received; see [`Opcode::from_u8`].
    pub fn opcode_raw(&self) -> u8 {
        self.opcode
    }

    /// Sets the opcode.
    pub fn set_opcode(&mut self, opcode: Opcode) {
        self.opcode = opcode.raw();
    }

    /// Returns the Solicited Event bit.
    pub fn solicited(&self) -> bool {
        self.flags & Self::SE != 0
    }

    /// Sets the Solicited Event bit.
    pub fn set_solicited(&mut self, on: bool) {
        self.flags = if on {
            self.flags | Self::SE
        } else {
            self.flags & !Self::SE
        };
    }

    /// Returns the MigReq bit.
    pub fn mig_req(&self) -> bool {
        self.flags & Self::MIG != 0
    }

    /// Sets the MigReq bit.
    pub fn set_mig_req(&mut self, on: bool) {
        self.flags = if on {
            self.flags | Self::MIG
        } else {
            self.flags & !Self::MIG
        };
    }

    /// Returns the pad count: bytes (0 to 3) between payload and ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.flags & Self::PAD) >> Self::PAD_SHIFT
    }

    /// Sets the pad count from the low two bits of `pad`.
    pub fn set_pad_count(&mut self, pad: u8) {
        self.flags = (self.flags & !Self::PAD) | ((pad << Self::PAD_SHIFT) & Self::PAD);
    }

    /// Returns the transport header version; only 0 is defined.
    pub fn transport_version(&self) -> u8 {
        self.flags & Self::TVER
    }

    /// Sets the transport header version from the low four bits of `tver`.
    pub fn set_transport_version(&mut self, tver: u8) {
        self.flags = (self.flags & !Self::TVER) | (tver & Self::TVER);
    }

    /// Returns the partition key.
    pub fn pkey(&self) -> u16 {
        self.pkey.get()
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        self.pkey.set(pkey);
    }

    /// Returns the Forward Explicit Congestion Notification bit.
    pub fn fecn(&self) -> bool {
        self.qpn.get() & Self::FECN != 0
    }

    /// Sets the Forward Explicit Congestion Notification bit.
    pub fn set_fecn(&mut self, on: bool) {
        self.qpn.set(with_bits(self.qpn.get(), Self::FECN, on));
    }

    /// Returns the Backward Explicit Congestion Notification bit.
    pub fn becn(&self) -> bool {
        self.qpn.get() & Self::BECN != 0
    }

    /// Sets the Backward Explicit Congestion Notification bit.
    pub fn set_becn(&mut self, on: bool) {
        self.qpn.set(with_bits(self.qpn.get(), Self::BECN, on));
    }

    /// Returns the 24-bit destination QP number.
    pub fn dest_qpn(&self) -> u32 {
        self.qpn.get() & SEQ24_MASK
    }

    /// Sets the destination QP number from the low 24 bits of `qpn`.
    pub fn set_dest_qpn(&mut self, qpn: u32) {
        self.qpn
            .set((self.qpn.get() & !SEQ24_MASK) | (qpn & SEQ24_MASK));
    }

    /// Returns the AckReq bit: the requester asks for an acknowledgement.
    pub fn ack_req(&self) -> bool {
        self.apsn.get() & Self::ACK_REQ != 0
    }

    /// Sets the AckReq bit.
    pub fn set_ack_req(&mut self, on: bool) {
        self.apsn.set(with_bits(self.apsn.get(), Self::ACK_REQ, on));
    }

    /// Returns the packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(self.apsn.get())
    }

    /// Sets the packet sequence number.
    pub fn set_psn(&mut self, psn: Psn) {
        self.apsn.set((self.apsn.get() & !SEQ24_MASK) | psn.get());
    }

    /// Returns a copy with the byte of FECN, BECN and reserved bits set to ones.
    ///
    /// The ICRC covers the BTH in this form, so that switches may set FECN and
    /// BECN; the C driver masks the whole byte (`qpn |= ~BTH_QPN_MASK`).
    pub(super) fn masked_for_icrc(&self) -> Self {
        let mut bth = *self;
        bth.qpn.set(bth.qpn.get() | !SEQ24_MASK);
        bth
    }

    /// Sets every field: a BTH as a requester or responder sends it.
    ///
    /// Transport version, MigReq, FECN, BECN and reserved bits become zero.
    pub fn init(&mut self, opcode: Opcode, fields: BthFields) {
        self.opcode = opcode.raw();
        self.flags = 0;
        self.set_solicited(fields.solicited);
        self.set_pad_count(fields.pad_count);
        self.pkey.set(fields.pkey);
        self.qpn.set(fields.dest_qpn & SEQ24_MASK);
        self.apsn
            .set(with_bits(fields.psn.get(), Self::ACK_REQ, fields.ack_req));
    }
}

/// The BTH fields a sender chooses, for [`Bth::init`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BthFields {
    /// Solicited Event.
    pub solicited: bool,
    /// Pad count (0 to 3).
    pub pad_count: u8,
    /// Partition key, usually [`Bth::DEFAULT_PKEY`].
    pub pkey: u16,
    /// Destination QP number (24 bits).
    pub dest_qpn: u32,
    /// AckReq.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

/// Datagram Extended Transport Header, on every UD packet.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Deth {
    qkey: U32,
    /// Reserved (31..24), SrcQP (23..0).
    sqp: U32,
}

impl Deth {
    /// The well-known Q_Key of QP1 (`GSI_QKEY`).
    pub const GSI_QKEY: u32 = 0x8001_0000;

    /// Returns the queue key.
    pub fn qkey(&self) -> u32 {
        self.qkey.get()
    }

    /// Sets the queue key.
    pub fn set_qkey(&mut self, qkey: u32) {
        self.qkey.set(qkey);
    }

    /// Returns the 24-bit source QP number.
    pub fn src_qpn(&self) -> u32 {
        self.sqp.get() & SEQ24_MASK
    }

    /// Sets the source QP number from the low 24 bits of `qpn`.
    pub fn set_src_qpn(&mut self, qpn: u32) {
        self.sqp.set(qpn & SEQ24_MASK);
    }
}

/// RDMA Extended Transport Header: the remote buffer of a write, read or flush.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Reth {
    va: U64,
    rkey: U32,
    len: U32,
}

impl Reth {
    /// Returns the virtual address.
    pub fn va(&self) -> u64 {
        self.va.get()
    }

    /// Sets the virtual address.
    pub fn set_va(&mut self, va: u64) {
        self.va.set(va);
    }

    /// Returns the remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey.get()
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.rkey.set(rkey);
    }

    /// Returns the DMA length: the length of the whole message.
    pub fn dma_len(&self) -> u32 {
        self.len.get()
    }

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, len: u32) {
        self.len.set(len);
    }
}

/// ACK Extended Transport Header: syndrome and MSN of a response.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Aeth {
    /// Syndrome (31..24), MSN (23..0).
    smsn: U32,
}

impl Aeth {
    /// Returns the raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.smsn.get().to_be_bytes()[0]
    }

    /// Returns the decoded syndrome.
    pub fn syndrome(&self) -> Result<Syndrome, ReservedSyndrome> {
        Syndrome::decode(self.syndrome_raw())
    }

    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, syndrome: Syndrome) {
        self.set_syndrome_raw(syndrome.encode());
    }

    /// Sets the raw syndrome byte.
    pub fn set_syndrome_raw(&mut self, raw: u8) {
        self.smsn
            .set((u32::from(raw) << 24) | (self.smsn.get() & SEQ24_MASK));
    }

    /// Returns the message sequence number.
    pub fn msn(&self) -> Msn {
        Msn::new(self.smsn.get())
    }

    /// Sets the message sequence number.
    pub fn set_msn(&mut self, msn: Msn) {
        self.smsn.set((self.smsn.get() & !SEQ24_MASK) | msn.get());
    }
}

/// Atomic Extended Transport Header of CmpSwap and FetchAdd requests.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct AtomicEth {
    va: U64,
    rkey: U32,
    swap_add: U64,
    compare: U64,
}

impl AtomicEth {
    /// Returns the virtual address of the 8-byte target.
    pub fn va(&self) -> u64 {
        self.va.get()
    }

    /// Sets the virtual address.
    pub fn set_va(&mut self, va: u64) {
        self.va.set(va);
    }

    /// Returns the remote key.
    pub fn rkey(&self) -> u32 {
        self.rkey.get()
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.rkey.set(rkey);
    }

    /// Returns the swap value (CmpSwap) or the addend (FetchAdd).
    pub fn swap_add(&self) -> u64 {
        self.swap_add.get()
    }

    /// Sets the swap value or addend.
    pub fn set_swap_add(&mut self, value: u64) {
        self.swap_add.set(value);
    }

    /// Returns the compare value (CmpSwap only).
    pub fn compare(&self) -> u64 {
        self.compare.get()
    }

    /// Sets the compare value.
    pub fn set_compare(&mut self, value: u64) {
        self.compare.set(value);
    }
}

/// Atomic Acknowledge Extended Transport Header: the value before the atomic.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct AtomicAckEth {
    orig: U64,
}

impl AtomicAckEth {
    /// Returns the original remote data.
    pub fn orig(&self) -> u64 {
        self.orig.get()
    }

    /// Sets the original remote data.
    pub fn set_orig(&mut self, value: u64) {
        self.orig.set(value);
    }
}

/// Immediate Data Extended Transport Header.
///
/// The value is opaque to the transport; the verbs carry it as `__be32`, so
/// [`ImmDt::imm`] gives the four wire bytes read in network order.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct ImmDt {
    imm: U32,
}

impl ImmDt {
    /// Returns the immediate data.
    pub fn imm(&self) -> u32 {
        self.imm.get()
    }

    /// Sets the immediate data.
    pub fn set_imm(&mut self, imm: u32) {
        self.imm.set(imm);
    }
}

/// Invalidate Extended Transport Header: the R_Key a SEND with invalidate kills.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Ieth {
    rkey: U32,
}

impl Ieth {
    /// Returns the remote key to invalidate.
    pub fn rkey(&self) -> u32 {
        self.rkey.get()
    }

    /// Sets the remote key to invalidate.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.rkey.set(rkey);
    }
}

/// Flush Extended Transport Header: what a FLUSH makes persistent or visible.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Feth {
    /// Reserved (31..6), SEL (5..4), PLT (3..0).
    bits: U32,
}

impl Feth {
    const PLT: u32 = 0x0f;
    const SEL: u32 = 0x30;
    const SEL_SHIFT: u32 = 4;

    /// Returns the placement type (bits 3..0): 1 global visibility, 2 persistence.
    pub fn placement_type(&self) -> u8 {
        (self.bits.get() & Self::PLT).to_be_bytes()[3]
    }

    /// Returns the selectivity level (bits 5..4): 0 memory region, 1 whole memory.
    pub fn selectivity_level(&self) -> u8 {
        ((self.bits.get() & Self::SEL) >> Self::SEL_SHIFT).to_be_bytes()[3]
    }

    /// Sets the placement type and selectivity level; other bits become zero.
    pub fn set(&mut self, placement_type: u8, selectivity_level: u8) {
        let plt = u32::from(placement_type) & Self::PLT;
        let sel = (u32::from(selectivity_level) << Self::SEL_SHIFT) & Self::SEL;
        self.bits.set(plt | sel);
    }
}
