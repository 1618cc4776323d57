// SPDX-License-Identifier: GPL-2.0

//! BTH opcodes and what each one implies (IBTA 9.2.1, table 35).
//!
//! An opcode is a transport (bits 7..5) and an operation (bits 4..0). The
//! operation fixes the extended headers that follow the BTH, whether a payload
//! may follow them and where the packet sits in its message; the datagram
//! transport adds a DETH. Reliable datagram, CNP and the manufacturer-specific
//! opcodes are not supported, as in the C driver.

use core::fmt;

/// Length of the BTH in bytes.
pub const BTH_LEN: usize = 12;

/// The transport service of an opcode (bits 7..5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transport {
    /// Reliable connection.
    Rc = 0x00,
    /// Unreliable connection.
    Uc = 0x20,
    /// Unreliable datagram.
    Ud = 0x60,
}

impl Transport {
    /// Returns the transport of the opcode byte `raw`, if supported.
    pub const fn of_opcode_byte(raw: u8) -> Option<Self> {
        match raw & 0xe0 {
            0x00 => Some(Self::Rc),
            0x20 => Some(Self::Uc),
            0x60 => Some(Self::Ud),
            _ => None,
        }
    }
}

/// The type of a queue pair, as far as the wire is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// General services interface (QP1), carried as unreliable datagram.
    Gsi,
}

impl QpType {
    /// Converts an `enum ib_qp_type` value (`IB_QPT_GSI` = 1 to `IB_QPT_UD` = 4).
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            1 => Some(Self::Gsi),
            2 => Some(Self::Rc),
            3 => Some(Self::Uc),
            4 => Some(Self::Ud),
            _ => None,
        }
    }

    /// Returns the transport whose opcodes this QP type sends and accepts.
    pub const fn transport(self) -> Transport {
        match self {
            Self::Rc => Transport::Rc,
            Self::Uc => Transport::Uc,
            Self::Ud | Self::Gsi => Transport::Ud,
        }
    }
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet.
    Only,
}

impl Position {
    /// Returns true for `First` and `Only`, the packets that start a message.
    pub const fn is_start(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// Returns true for `Last` and `Only`, the packets that end a message.
    pub const fn is_end(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// The kind of message an operation belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// SEND, with or without immediate data or invalidate.
    Send,
    /// RDMA WRITE, with or without immediate data.
    RdmaWrite,
    /// RDMA READ request.
    RdmaRead,
    /// RDMA READ response.
    ReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Response to an atomic request.
    AtomicAcknowledge,
    /// COMPARE SWAP or FETCH ADD.
    Atomic,
    /// FLUSH.
    Flush,
    /// ATOMIC WRITE.
    AtomicWrite,
}

/// A set of extended transport headers, kept in wire order.
///
/// The bits are in the order the headers follow the BTH, so the headers before
/// one are the set bits below it. No opcode carries both ImmDt and IETH, so one
/// order serves them all.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtHeaders(u8);

impl ExtHeaders {
    /// No extended header.
    pub const NONE: Self = Self(0);
    /// Datagram extended transport header, 8 bytes.
    pub const DETH: Self = Self(1 << 0);
    /// Flush extended transport header, 4 bytes.
    pub const FETH: Self = Self(1 << 1);
    /// RDMA extended transport header, 16 bytes.
    pub const RETH: Self = Self(1 << 2);
    /// Atomic extended transport header, 28 bytes.
    pub const ATOMIC_ETH: Self = Self(1 << 3);
    /// ACK extended transport header, 4 bytes.
    pub const AETH: Self = Self(1 << 4);
    /// Atomic acknowledge extended transport header, 8 bytes.
    pub const ATOMIC_ACK_ETH: Self = Self(1 << 5);
    /// Immediate data, 4 bytes.
    pub const IMM_DT: Self = Self(1 << 6);
    /// Invalidate extended transport header, 4 bytes.
    pub const IETH: Self = Self(1 << 7);

    /// Returns the union of two sets.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Returns true if every header of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Returns the total length of the headers, in bytes.
    pub const fn len(self) -> usize {
        Self::bytes(self.0)
    }

    /// Returns true if the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Returns the offset of header `one` from the start of the BTH, if present.
    ///
    /// `one` must be a single header; for a set of several, `None` is returned.
    pub const fn offset_of(self, one: Self) -> Option<usize> {
        if one.0.count_ones() != 1 || !self.contains(one) {
            return None;
        }
        let before = self.0 & one.0.wrapping_sub(1);
        Some(BTH_LEN.wrapping_add(Self::bytes(before)))
    }

    const fn bytes(bits: u8) -> usize {
        // Header lengths in wire order; the sum is at most 76, so no overflow.
        const LENS: [(u8, usize); 8] = [
            (ExtHeaders::DETH.0, 8),
            (ExtHeaders::FETH.0, 4),
            (ExtHeaders::RETH.0, 16),
            (ExtHeaders::ATOMIC_ETH.0, 28),
            (ExtHeaders::AETH.0, 4),
            (ExtHeaders::ATOMIC_ACK_ETH.0, 8),
            (ExtHeaders::IMM_DT.0, 4),
            (ExtHeaders::IETH.0, 4),
        ];
        let mut total = 0usize;
        let mut rest: &[(u8, usize)] = &LENS;
        while let [(bit, len), tail @ ..] = rest {
            if bits & *bit != 0 {
                total = total.wrapping_add(*len);
            }
            rest = tail;
        }
        total
    }
}

impl fmt::Debug for ExtHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = [
            "DETH",
            "FETH",
            "RETH",
            "AtomicETH",
            "AETH",
            "AtomicAckETH",
            "ImmDt",
            "IETH",
        ];
        let mut set = f.debug_set();
        for (bit, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                set.entry(name);
            }
        }
        set.finish()
    }
}

/// The operation of an opcode (bits 4..0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Operation {
    /// SEND First.
    SendFirst = 0x00,
    /// SEND Middle.
    SendMiddle = 0x01,
    /// SEND Last.
    SendLast = 0x02,
    /// SEND Last with Immediate.
    SendLastWithImmediate = 0x03,
    /// SEND Only.
    SendOnly = 0x04,
    /// SEND Only with Immediate.
    SendOnlyWithImmediate = 0x05,
    /// RDMA WRITE First.
    RdmaWriteFirst = 0x06,
    /// RDMA WRITE Middle.
    RdmaWriteMiddle = 0x07,
    /// RDMA WRITE Last.
    RdmaWriteLast = 0x08,
    /// RDMA WRITE Last with Immediate.
    RdmaWriteLastWithImmediate = 0x09,
    /// RDMA WRITE Only.
    RdmaWriteOnly = 0x0a,
    /// RDMA WRITE Only with Immediate.
    RdmaWriteOnlyWithImmediate = 0x0b,
    /// RDMA READ Request.
    RdmaReadRequest = 0x0c,
    /// RDMA READ response First.
    RdmaReadResponseFirst = 0x0d,
    /// RDMA READ response Middle.
    RdmaReadResponseMiddle = 0x0e,
    /// RDMA READ response Last.
    RdmaReadResponseLast = 0x0f,
    /// RDMA READ response Only.
    RdmaReadResponseOnly = 0x10,
    /// Acknowledge (ACK or NAK).
    Acknowledge = 0x11,
    /// ATOMIC Acknowledge.
    AtomicAcknowledge = 0x12,
    /// CmpSwap.
    CompareSwap = 0x13,
    /// FetchAdd.
    FetchAdd = 0x14,
    /// SEND Last with Invalidate.
    SendLastWithInvalidate = 0x16,
    /// SEND Only with Invalidate.
    SendOnlyWithInvalidate = 0x17,
    /// FLUSH.
    Flush = 0x1c,
    /// ATOMIC WRITE.
    AtomicWrite = 0x1d,
}

impl Operation {
    /// Returns the operation of the opcode byte `raw`, if supported.
    pub const fn of_opcode_byte(raw: u8) -> Option<Self> {
        Some(match raw & 0x1f {
            0x00 => Self::SendFirst,
            0x01 => Self::SendMiddle,
            0x02 => Self::SendLast,
            0x03 => Self::SendLastWithImmediate,
            0x04 => Self::SendOnly,
            0x05 => Self::SendOnlyWithImmediate,
            0x06 => Self::RdmaWriteFirst,
            0x07 => Self::RdmaWriteMiddle,
            0x08 => Self::RdmaWriteLast,
            0x09 => Self::RdmaWriteLastWithImmediate,
            0x0a => Self::RdmaWriteOnly,
            0x0b => Self::RdmaWriteOnlyWithImmediate,
            0x0c => Self::RdmaReadRequest,
            0x0d => Self::RdmaReadResponseFirst,
            0x0e => Self::RdmaReadResponseMiddle,
            0x0f => Self::RdmaReadResponseLast,
            0x10 => Self::RdmaReadResponseOnly,
            0x11 => Self::Acknowledge,
            0x12 => Self::AtomicAcknowledge,
            0x13 => Self::CompareSwap,
            0x14 => Self::FetchAdd,
            0x16 => Self::SendLastWithInvalidate,
            0x17 => Self::SendOnlyWithInvalidate,
            0x1c => Self::Flush,
            0x1d => Self::AtomicWrite,
            _ => return None,
        })
    }

    /// Returns true if `transport` may carry this operation.
    ///
    /// RC carries all; UC carries SEND and RDMA WRITE without invalidate; UD
    /// carries only SEND Only, with or without immediate data.
    pub const fn allowed_on(self, transport: Transport) -> bool {
        match transport {
            Transport::Rc => true,
            Transport::Uc => (self as u8) <= (Self::RdmaWriteOnlyWithImmediate as u8),
            Transport::Ud => matches!(self, Self::SendOnly | Self::SendOnlyWithImmediate),
        }
    }

    /// Returns the class of message the operation belongs to.
    pub const fn class(self) -> OpClass {
        match self {
            Self::SendFirst
            | Self::SendMiddle
            | Self::SendLast
            | Self::SendLastWithImmediate
            | Self::SendOnly
            | Self::SendOnlyWithImmediate
            | Self::SendLastWithInvalidate
            | Self::SendOnlyWithInvalidate => OpClass::Send,
            Self::RdmaWriteFirst
            | Self::RdmaWriteMiddle
            | Self::RdmaWriteLast
            | Self::RdmaWriteLastWithImmediate
            | Self::RdmaWriteOnly
            | Self::RdmaWriteOnlyWithImmediate => OpClass::RdmaWrite,
            Self::RdmaReadRequest => OpClass::RdmaRead,
            Self::RdmaReadResponseFirst
            | Self::RdmaReadResponseMiddle
            | Self::RdmaReadResponseLast
            | Self::RdmaReadResponseOnly => OpClass::ReadResponse,
            Self::Acknowledge => OpClass::Acknowledge,
            Self::AtomicAcknowledge => OpClass::AtomicAcknowledge,
            Self::CompareSwap | Self::FetchAdd => OpClass::Atomic,
            Self::Flush => OpClass::Flush,
            Self::AtomicWrite => OpClass::AtomicWrite,
        }
    }

    /// Returns where a packet of this operation sits in its message.
    pub const fn position(self) -> Position {
        match self {
            Self::SendFirst | Self::RdmaWriteFirst | Self::RdmaReadResponseFirst => Position::First,
            Self::SendMiddle | Self::RdmaWriteMiddle | Self::RdmaReadResponseMiddle => {
                Position::Middle
            }
            Self::SendLast
            | Self::SendLastWithImmediate
            | Self::SendLastWithInvalidate
            | Self::RdmaWriteLast
            | Self::RdmaWriteLastWithImmediate
            | Self::RdmaReadResponseLast => Position::Last,
            _ => Position::Only,
        }
    }

    /// Returns the extended headers that follow the BTH on a connected transport.
    pub const fn ext_headers(self) -> ExtHeaders {
        match self {
            Self::SendLastWithImmediate
            | Self::SendOnlyWithImmediate
            | Self::RdmaWriteLastWithImmediate => ExtHeaders::IMM_DT,
            Self::RdmaWriteFirst
            | Self::RdmaWriteOnly
            | Self::RdmaReadRequest
            | Self::AtomicWrite => ExtHeaders::RETH,
            Self::RdmaWriteOnlyWithImmediate => ExtHeaders::RETH.with(ExtHeaders::IMM_DT),
            Self::RdmaReadResponseFirst
            | Self::RdmaReadResponseLast
            | Self::RdmaReadResponseOnly
            | Self::Acknowledge => ExtHeaders::AETH,
            Self::AtomicAcknowledge => ExtHeaders::AETH.with(ExtHeaders::ATOMIC_ACK_ETH),
            Self::CompareSwap | Self::FetchAdd => ExtHeaders::ATOMIC_ETH,
            Self::SendLastWithInvalidate | Self::SendOnlyWithInvalidate => ExtHeaders::IETH,
            Self::Flush => ExtHeaders::FETH.with(ExtHeaders::RETH),
            Self::SendFirst
            | Self::SendMiddle
            | Self::SendLast
            | Self::SendOnly
            | Self::RdmaWriteMiddle
            | Self::RdmaWriteLast
            | Self::RdmaReadResponseMiddle => ExtHeaders::NONE,
        }
    }

    /// Returns true if a payload may follow the headers.
    pub const fn has_payload(self) -> bool {
        !matches!(
            self,
            Self::RdmaReadRequest
                | Self::Acknowledge
                | Self::AtomicAcknowledge
                | Self::CompareSwap
                | Self::FetchAdd
                | Self::Flush
        )
    }

    /// Returns true for requests (sent by a requester to a responder).
    pub const fn is_request(self) -> bool {
        !matches!(
            self.class(),
            OpClass::ReadResponse | OpClass::Acknowledge | OpClass::AtomicAcknowledge
        )
    }

    /// Returns true if the packet carries immediate data.
    pub const fn has_immediate(self) -> bool {
        self.ext_headers().contains(ExtHeaders::IMM_DT)
    }

    /// Returns true if the packet carries an R_Key to invalidate.
    pub const fn has_invalidate(self) -> bool {
        self.ext_headers().contains(ExtHeaders::IETH)
    }

    /// Returns true if the packet completes a receive WQE at the responder
    /// (the C driver's `RXE_COMP_MASK`).
    pub const fn consumes_recv_wqe_at_end(self) -> bool {
        match self.class() {
            OpClass::Send => self.position().is_end(),
            OpClass::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }
}

/// A supported BTH opcode.
///
/// # Invariants
///
/// The transport and operation bits decode to a [`Transport`] and an
/// [`Operation`] allowed on it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Opcode(u8);

impl Opcode {
    /// RC SEND First.
    pub const RC_SEND_FIRST: Self = Self(0x00);
    /// RC SEND Middle.
    pub const RC_SEND_MIDDLE: Self = Self(0x01);
    /// RC SEND Last.
    pub const RC_SEND_LAST: Self = Self(0x02);
    /// RC SEND Last with Immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Self = Self(0x03);
    /// RC SEND Only.
    pub const RC_SEND_ONLY: Self = Self(0x04);
    /// RC SEND Only with Immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x05);
    /// RC RDMA WRITE First.
    pub const RC_RDMA_WRITE_FIRST: Self = Self(0x06);
    /// RC RDMA WRITE Middle.
    pub const RC_RDMA_WRITE_MIDDLE: Self = Self(0x07);
    /// RC RDMA WRITE Last.
    pub const RC_RDMA_WRITE_LAST: Self = Self(0x08);
    /// RC RDMA WRITE Last with Immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Self = Self(0x09);
    /// RC RDMA WRITE Only.
    pub const RC_RDMA_WRITE_ONLY: Self = Self(0x0a);
    /// RC RDMA WRITE Only with Immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Self = Self(0x0b);
    /// RC RDMA READ Request.
    pub const RC_RDMA_READ_REQUEST: Self = Self(0x0c);
    /// RC RDMA READ response First.
    pub const RC_RDMA_READ_RESPONSE_FIRST: Self = Self(0x0d);
    /// RC RDMA READ response Middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Self = Self(0x0e);
    /// RC RDMA READ response Last.
    pub const RC_RDMA_READ_RESPONSE_LAST: Self = Self(0x0f);
    /// RC RDMA READ response Only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: Self = Self(0x10);
    /// RC Acknowledge.
    pub const RC_ACKNOWLEDGE: Self = Self(0x11);
    /// RC ATOMIC Acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: Self = Self(0x12);
    /// RC CmpSwap.
    pub const RC_COMPARE_SWAP: Self = Self(0x13);
    /// RC FetchAdd.
    pub const RC_FETCH_ADD: Self = Self(0x14);
    /// RC SEND Last with Invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: Self = Self(0x16);
    /// RC SEND Only with Invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Self = Self(0x17);
    /// RC FLUSH.
    pub const RC_FLUSH: Self = Self(0x1c);
    /// RC ATOMIC WRITE.
    pub const RC_ATOMIC_WRITE: Self = Self(0x1d);
    /// UC SEND First.
    pub const UC_SEND_FIRST: Self = Self(0x20);
    /// UC SEND Middle.
    pub const UC_SEND_MIDDLE: Self = Self(0x21);
    /// UC SEND Last.
    pub const UC_SEND_LAST: Self = Self(0x22);
    /// UC SEND Last with Immediate.
    pub const UC_SEND_LAST_WITH_IMMEDIATE: Self = Self(0x23);
    /// UC SEND Only.
    pub const UC_SEND_ONLY: Self = Self(0x24);
    /// UC SEND Only with Immediate.
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x25);
    /// UC RDMA WRITE First.
    pub const UC_RDMA_WRITE_FIRST: Self = Self(0x26);
    /// UC RDMA WRITE Middle.
    pub const UC_RDMA_WRITE_MIDDLE: Self = Self(0x27);
    /// UC RDMA WRITE Last.
    pub const UC_RDMA_WRITE_LAST: Self = Self(0x28);
    /// UC RDMA WRITE Last with Immediate.
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Self = Self(0x29);
    /// UC RDMA WRITE Only.
    pub const UC_RDMA_WRITE_ONLY: Self = Self(0x2a);
    /// UC RDMA WRITE Only with Immediate.
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Self = Self(0x2b);
    /// UD SEND Only.
    pub const UD_SEND_ONLY: Self = Self(0x64);
    /// UD SEND Only with Immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x65);

    /// Decodes an opcode byte, or returns `None` if it is not supported.
    pub const fn from_u8(raw: u8) -> Option<Self> {
        if OpcodeInfo::of(raw).supported {
            // INVARIANT: the table marks exactly the bytes `OpcodeInfo::new` accepts, whose
            // transport and operation are valid and allowed together.
            Some(Self(raw))
        } else {
            None
        }
    }

    /// Combines a transport and an operation, if the transport allows it.
    pub const fn new(transport: Transport, operation: Operation) -> Option<Self> {
        if operation.allowed_on(transport) {
            // INVARIANT: both parts are valid and allowed together.
            Some(Self(transport as u8 | operation as u8))
        } else {
            None
        }
    }

    /// Returns the opcode byte.
    pub const fn raw(self) -> u8 {
        self.0
    }

    /// Returns the transport.
    pub const fn transport(self) -> Transport {
        OpcodeInfo::of(self.0).transport
    }

    /// Returns the operation.
    pub const fn operation(self) -> Operation {
        OpcodeInfo::of(self.0).operation
    }

    /// Returns the extended headers that follow the BTH, DETH first on UD.
    pub const fn ext_headers(self) -> ExtHeaders {
        OpcodeInfo::of(self.0).ext_headers
    }

    /// Returns the length of BTH and extended headers: the payload offset.
    pub const fn header_len(self) -> usize {
        OpcodeInfo::of(self.0).header_len as usize
    }

    /// Returns true if a payload may follow the headers.
    pub const fn has_payload(self) -> bool {
        OpcodeInfo::of(self.0).has_payload
    }

    /// Returns where a packet with this opcode sits in its message.
    pub const fn position(self) -> Position {
        OpcodeInfo::of(self.0).position
    }

    /// Returns the class of message.
    pub const fn class(self) -> OpClass {
        OpcodeInfo::of(self.0).class
    }

    /// Returns true for requests, false for responses.
    pub const fn is_request(self) -> bool {
        OpcodeInfo::of(self.0).is_request
    }

    /// Returns true if a QP of type `qp_type` may receive or send this opcode.
    pub const fn allowed_for(self, qp_type: QpType) -> bool {
        self.transport() as u8 == qp_type.transport() as u8
    }

    /// Returns every supported opcode, in increasing order.
    pub fn all() -> impl Iterator<Item = Self> {
        (0u8..=255).filter_map(Self::from_u8)
    }
}

/// What an opcode byte implies, worked out at compile time from the definitions above.
///
/// The packet path asks an opcode for its headers, class and position several times per
/// packet; a table entry (as the C driver's `rxe_opcode[]`) answers each with one load
/// instead of a chain of matches.
#[derive(Clone, Copy)]
struct OpcodeInfo {
    /// The byte is a supported opcode; the other fields are meaningful only then.
    supported: bool,
    transport: Transport,
    operation: Operation,
    ext_headers: ExtHeaders,
    /// BTH and extended headers, at most 12 + 76 bytes.
    header_len: u8,
    has_payload: bool,
    position: Position,
    class: OpClass,
    is_request: bool,
}

impl OpcodeInfo {
    /// The entry of a byte that is not a supported opcode.
    const UNSUPPORTED: Self = Self {
        supported: false,
        transport: Transport::Rc,
        operation: Operation::Acknowledge,
        ext_headers: ExtHeaders::NONE,
        header_len: BTH_LEN as u8,
        has_payload: false,
        position: Position::Only,
        class: OpClass::Acknowledge,
        is_request: false,
    };

    /// Works out the entry of the opcode byte `raw`.
    const fn new(raw: u8) -> Self {
        let (transport, operation) = match (
            Transport::of_opcode_byte(raw),
            Operation::of_opcode_byte(raw),
        ) {
            (Some(t), Some(op)) if op.allowed_on(t) => (t, op),
            _ => return Self::UNSUPPORTED,
        };
        let ext_headers = match transport {
            Transport::Ud => operation.ext_headers().with(ExtHeaders::DETH),
            Transport::Rc | Transport::Uc => operation.ext_headers(),
        };
        Self {
            supported: true,
            transport,
            operation,
            ext_headers,
            // At most 12 + 76: fits.
            header_len: BTH_LEN.wrapping_add(ext_headers.len()) as u8,
            has_payload: operation.has_payload(),
            position: operation.position(),
            class: operation.class(),
            is_request: operation.is_request(),
        }
    }

    /// Returns the entry of the opcode byte `raw`.
    #[allow(
        clippy::indexing_slicing,
        reason = "a byte indexes a table of 256 entries"
    )]
    const fn of(raw: u8) -> &'static Self {
        &OPCODE_INFO[raw as usize]
    }
}

/// [`OpcodeInfo`] of every byte.
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    reason = "a compile-time loop over the 256 entries"
)]
static OPCODE_INFO: [OpcodeInfo; 256] = {
    let mut table = [OpcodeInfo::UNSUPPORTED; 256];
    let mut raw = 0;
    while raw < table.len() {
        table[raw] = OpcodeInfo::new(raw as u8);
        raw += 1;
    }
    table
};

/// The longest headers, BTH and extended headers, of a supported opcode (an atomic request's:
/// 40 bytes), worked out from the table's rules at compile time.
#[allow(
    clippy::arithmetic_side_effects,
    reason = "a compile-time loop over the 256 opcode bytes"
)]
pub const MAX_HEADER_LEN: usize = {
    let mut max = 0;
    let mut raw = 0;
    while raw < 256 {
        let len = OpcodeInfo::new(raw as u8).header_len as usize;
        if len > max {
            max = len;
        }
        raw += 1;
    }
    max
};

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}_{:?}", self.transport(), self.operation())
    }
}

impl TryFrom<u8> for Opcode {
    type Error = u8;

    fn try_from(raw: u8) -> Result<Self, u8> {
        Self::from_u8(raw).ok_or(raw)
    }
}
