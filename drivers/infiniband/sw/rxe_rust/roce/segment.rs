// SPDX-License-Identifier: GPL-2.0

//! Segmentation of a message into packets at the path MTU (IBTA 9.4, 9.7.4).
//!
//! A message of `n` bytes goes out as `max(1, ceil(n / mtu))` packets: one
//! Only packet, or a First, any number of Middle and a Last packet. Every
//! packet but the last carries exactly one MTU. The RETH goes on the first
//! packet of an RDMA WRITE (First or Only), immediate data and invalidate on
//! the last. An RDMA READ request is a single packet but reserves one PSN per
//! response packet; atomics, FLUSH and ATOMIC WRITE are single packets.

use super::mtu::IbMtu;
use super::opcode::{
    ExtHeaders,
    Opcode,
    Operation,
    Transport, //
};
use super::packet::pad_for;

/// The largest message, 2^31 bytes (`max_msg_sz` of the C driver).
pub const MAX_MESSAGE_LEN: u32 = 1 << 31;

/// The kind of message to segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm,
    /// SEND with invalidate (RC only).
    SendWithInv,
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate data.
    RdmaWriteWithImm,
    /// RDMA READ request (RC only); the length is that of the data to read.
    RdmaRead,
    /// RDMA READ response, sent by the responder (RC only).
    ReadResponse,
    /// CmpSwap (RC only).
    CompareSwap,
    /// FetchAdd (RC only).
    FetchAdd,
    /// FLUSH (RC only); the length goes in the RETH, not in a payload.
    Flush,
    /// ATOMIC WRITE of eight bytes (RC only).
    AtomicWrite,
}

impl MessageKind {
    /// Returns the operations for the First, Middle, Last and Only packets.
    const fn operations(self) -> [Operation; 4] {
        match self {
            Self::Send => [
                Operation::SendFirst,
                Operation::SendMiddle,
                Operation::SendLast,
                Operation::SendOnly,
            ],
            Self::SendWithImm => [
                Operation::SendFirst,
                Operation::SendMiddle,
                Operation::SendLastWithImmediate,
                Operation::SendOnlyWithImmediate,
            ],
            Self::SendWithInv => [
                Operation::SendFirst,
                Operation::SendMiddle,
                Operation::SendLastWithInvalidate,
                Operation::SendOnlyWithInvalidate,
            ],
            Self::RdmaWrite => [
                Operation::RdmaWriteFirst,
                Operation::RdmaWriteMiddle,
                Operation::RdmaWriteLast,
                Operation::RdmaWriteOnly,
            ],
            Self::RdmaWriteWithImm => [
                Operation::RdmaWriteFirst,
                Operation::RdmaWriteMiddle,
                Operation::RdmaWriteLastWithImmediate,
                Operation::RdmaWriteOnlyWithImmediate,
            ],
            Self::ReadResponse => [
                Operation::RdmaReadResponseFirst,
                Operation::RdmaReadResponseMiddle,
                Operation::RdmaReadResponseLast,
                Operation::RdmaReadResponseOnly,
            ],
            Self::RdmaRead => [Operation::RdmaReadRequest; 4],
            Self::CompareSwap => [Operation::CompareSwap; 4],
            Self::FetchAdd => [Operation::FetchAdd; 4],
            Self::Flush => [Operation::Flush; 4],
            Self::AtomicWrite => [Operation::AtomicWrite; 4],
        }
    }

    /// Returns true if the message is split into payload-carrying packets.
    const fn is_segmented(self) -> bool {
        matches!(
            self,
            Self::Send
                | Self::SendWithImm
                | Self::SendWithInv
                | Self::RdmaWrite
                | Self::RdmaWriteWithImm
                | Self::ReadResponse
        )
    }
}

/// Why a message cannot be segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentError {
    /// The transport does not carry this kind of message.
    NotAllowed,
    /// Longer than [`MAX_MESSAGE_LEN`], or than one MTU on UD.
    TooLong,
    /// An ATOMIC WRITE whose length is not eight bytes.
    BadAtomicWriteLength,
}

/// One packet of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The opcode of the packet.
    pub opcode: Opcode,
    /// Index of the packet in the message; its PSN is the first PSN plus this.
    pub index: u32,
    /// Offset of the payload in the message.
    pub offset: u32,
    /// Payload length.
    pub len: u32,
}

impl Segment {
    /// Returns the pad count of the packet.
    pub fn pad_count(&self) -> u8 {
        pad_for(usize::try_from(self.len).unwrap_or(0))
    }

    /// Returns true if the packet carries a RETH.
    pub fn has_reth(&self) -> bool {
        self.opcode.ext_headers().contains(ExtHeaders::RETH)
    }

    /// Returns true if the packet ends the message.
    pub fn is_last(&self) -> bool {
        self.opcode.position().is_end()
    }
}

/// Splits one message into packets; an iterator of [`Segment`]s.
///
/// # Invariants
///
/// `count >= 1`, `mtu > 0`, `total <= MAX_MESSAGE_LEN` and `next <= count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segmenter {
    transport: Transport,
    kind: MessageKind,
    total: u32,
    mtu: u32,
    count: u32,
    next: u32,
}

impl Segmenter {
    /// Prepares to segment a message of `total` bytes at path MTU `mtu`.
    pub fn new(
        transport: Transport,
        kind: MessageKind,
        total: u32,
        mtu: IbMtu,
    ) -> Result<Self, SegmentError> {
        let [_, _, _, only] = kind.operations();
        if Opcode::new(transport, only).is_none() {
            return Err(SegmentError::NotAllowed);
        }
        if total > MAX_MESSAGE_LEN {
            return Err(SegmentError::TooLong);
        }
        let mtu = mtu.bytes();
        if transport == Transport::Ud && total > mtu {
            return Err(SegmentError::TooLong);
        }
        if kind == MessageKind::AtomicWrite && total != 8 {
            return Err(SegmentError::BadAtomicWriteLength);
        }
        let count = if kind.is_segmented() {
            packets_for(total, mtu)
        } else {
            1
        };
        // INVARIANT: count >= 1, mtu >= 256, total checked, next == 0.
        Ok(Self {
            transport,
            kind,
            total,
            mtu,
            count,
            next: 0,
        })
    }

    /// Returns the number of packets of the message.
    pub fn packet_count(&self) -> u32 {
        self.count
    }

    /// Returns the number of PSNs the message uses.
    ///
    /// This is the packet count, except for an RDMA READ request, which
    /// reserves one PSN for every response packet.
    pub fn psn_count(&self) -> u32 {
        if self.kind == MessageKind::RdmaRead {
            packets_for(self.total, self.mtu)
        } else {
            self.count
        }
    }

    /// Restarts at packet `index`, as a retry from the middle of a message does.
    ///
    /// An index past the end leaves nothing to send.
    pub fn seek(&mut self, index: u32) {
        // INVARIANT: clamped to `count`.
        self.next = index.min(self.count);
    }

    fn segment(&self, index: u32) -> Option<Segment> {
        if index >= self.count {
            return None;
        }
        let [first, middle, last, only] = self.kind.operations();
        let last_index = self.count.saturating_sub(1);
        let operation = match (index == 0, index == last_index) {
            (true, true) => only,
            (true, false) => first,
            (false, true) => last,
            (false, false) => middle,
        };
        let opcode = Opcode::new(self.transport, operation)?;
        let (offset, len) = if self.kind.is_segmented() {
            let offset = index.checked_mul(self.mtu)?;
            (offset, self.total.checked_sub(offset)?.min(self.mtu))
        } else if self.kind == MessageKind::AtomicWrite {
            (0, self.total)
        } else {
            (0, 0)
        };
        Some(Segment {
            opcode,
            index,
            offset,
            len,
        })
    }
}

impl Iterator for Segmenter {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        let segment = self.segment(self.next)?;
        self.next = self.next.saturating_add(1);
        Some(segment)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.count.saturating_sub(self.next)).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

/// Returns `max(1, ceil(total / mtu))`, the packets a message of `total` bytes needs.
///
/// A zero `mtu` counts as one byte.
pub fn packets_for(total: u32, mtu: u32) -> u32 {
    total.div_ceil(mtu.max(1)).max(1)
}
