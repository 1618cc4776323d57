// SPDX-License-Identifier: GPL-2.0

//! Decoding work queue entries from untrusted shared memory.
//!
//! User space writes send and receive WQEs into rings it shares with the
//! kernel, in the layouts `struct rxe_send_wqe` and `struct rxe_recv_wqe` of
//! `include/uapi/rdma/rdma_user_rxe.h` (native byte order). The caller first
//! copies one ring slot into memory user space cannot reach, then decodes the
//! copy here, once, into validated values. Anything invalid is an error the
//! caller turns into an error completion; nothing here can panic.

use zerocopy::byteorder::native_endian::{
    U16,
    U32,
    U64, //
};
use zerocopy::{
    FromBytes,
    IntoBytes as _, //
};
use zerocopy_derive::{
    FromBytes,
    Immutable,
    IntoBytes,
    KnownLayout,
    Unaligned, //
};

use super::io::WcOpcode;
use super::memory::{
    MwBind,
    Registration, //
};
use super::opcode::QpType;
use super::segment::{
    MessageKind,
    MAX_MESSAGE_LEN, //
};

/// A scatter/gather element, `struct rxe_sge`.
#[derive(
    FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, PartialEq, Eq,
)]
#[repr(C)]
pub struct Sge {
    addr: U64,
    length: U32,
    lkey: U32,
}

impl Sge {
    /// Creates an element, in the ring's byte order.
    pub fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Self {
            addr: U64::new(addr),
            length: U32::new(length),
            lkey: U32::new(lkey),
        }
    }

    /// Returns the virtual address of the buffer.
    pub fn addr(&self) -> u64 {
        self.addr.get()
    }

    /// Returns the length of the buffer.
    pub fn length(&self) -> u32 {
        self.length.get()
    }

    /// Returns the local key of the memory region holding the buffer.
    pub fn lkey(&self) -> u32 {
        self.lkey.get()
    }
}

/// `struct rxe_dma_info` without its flexible array (24 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawDmaInfo {
    length: U32,
    resid: U32,
    cur_sge: U32,
    num_sge: U32,
    sge_offset: U32,
    reserved: U32,
}

/// Where a send WQE (`struct rxe_send_wqe`) holds its opcode, a native-endian `u32`.
pub const SEND_WQE_OPCODE_OFFSET: usize = core::mem::offset_of!(RawSendWqe, opcode);

/// `struct rxe_send_wqe` up to its flexible array (208 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawSendWqe {
    wr_id: U64,
    reserved: U32,
    opcode: U32,
    send_flags: U32,
    /// `imm_data` (`__be32`) or `invalidate_rkey`.
    ex: [u8; 4],
    /// The `wr` union; see the `Raw*Wr` views.
    wr: [u8; 120],
    status: U32,
    state: U32,
    iova: U64,
    mask: U32,
    first_psn: U32,
    last_psn: U32,
    ack_length: U32,
    ssn: U32,
    has_rd_atomic: U32,
    dma: RawDmaInfo,
}

/// `struct rxe_recv_wqe` up to its flexible array (40 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawRecvWqe {
    wr_id: U64,
    reserved: U32,
    padding: U32,
    dma: RawDmaInfo,
}

/// The `rdma` member of the `wr` union.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawRdmaWr {
    remote_addr: U64,
    rkey: U32,
    reserved: U32,
}

/// The `atomic` member of the `wr` union.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawAtomicWr {
    remote_addr: U64,
    compare_add: U64,
    swap: U64,
    rkey: U32,
    reserved: U32,
}

/// The `flush` member of the `wr` union.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawFlushWr {
    remote_addr: U64,
    length: U32,
    rkey: U32,
    placement_type: u8,
    selectivity_level: u8,
}

/// The `ud` member of the `wr` union, up to its legacy address vector.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawUdWr {
    remote_qpn: U32,
    remote_qkey: U32,
    pkey_index: U16,
    reserved: U16,
    ah_num: U32,
}

/// The registration request of a kernel queue pair's ring, in the `wr` union: the C driver
/// keeps a pointer to the region there, this driver its key (and the range, which the region
/// holds in C).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawRegWr {
    mr_key: U32,
    key: U32,
    access: U32,
    reserved: U32,
    iova: U64,
    length: U64,
}

/// The `mw` member of the `wr` union.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RawMwWr {
    addr: U64,
    length: U64,
    mr_lkey: U32,
    mw_rkey: U32,
    rkey: U32,
    access: U32,
}

// The layouts of rdma_user_rxe.h, which rdma-core shares byte for byte.
const _: () = assert!(core::mem::size_of::<RawSendWqe>() == SEND_WQE_HEADER_LEN);
const _: () = assert!(core::mem::size_of::<RawRecvWqe>() == RECV_WQE_HEADER_LEN);
const _: () = assert!(core::mem::size_of::<Sge>() == 16);

/// Bytes of a send WQE before its SGEs or inline data.
pub const SEND_WQE_HEADER_LEN: usize = 208;

/// Bytes of a receive WQE before its SGEs.
pub const RECV_WQE_HEADER_LEN: usize = 40;

/// A work request opcode, `enum ib_uverbs_wr_opcode`, that this driver implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WrOpcode {
    /// RDMA WRITE.
    RdmaWrite = 0,
    /// RDMA WRITE with immediate data.
    RdmaWriteWithImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate data.
    SendWithImm = 3,
    /// RDMA READ.
    RdmaRead = 4,
    /// Atomic compare and swap.
    AtomicCmpAndSwp = 5,
    /// Atomic fetch and add.
    AtomicFetchAndAdd = 6,
    /// Local invalidate of a memory region or window.
    LocalInv = 7,
    /// Bind a memory window.
    BindMw = 8,
    /// SEND with invalidate.
    SendWithInv = 9,
    /// FLUSH.
    Flush = 14,
    /// ATOMIC WRITE.
    AtomicWrite = 15,
    /// Fast registration of a memory region (`IB_WR_REG_MR`): kernel queue pairs only, whose
    /// rings user space never sees.
    RegMr = 0x20,
}

impl WrOpcode {
    /// Returns the opcode of the completion of a request with this opcode.
    pub const fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::RdmaRead => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
            Self::RegMr => WcOpcode::RegMr,
            Self::BindMw => WcOpcode::BindMw,
            Self::Flush => WcOpcode::Flush,
            Self::AtomicWrite => WcOpcode::AtomicWrite,
        }
    }

    /// Decodes an opcode; TSO, READ with invalidate and masked atomics are refused.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            7 => Self::LocalInv,
            8 => Self::BindMw,
            9 => Self::SendWithInv,
            14 => Self::Flush,
            15 => Self::AtomicWrite,
            0x20 => Self::RegMr,
            _ => return None,
        })
    }

    /// Returns true for RDMA READ and the atomics that answer with data: the responder's
    /// kernel answers them, without its consumer.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            Self::RdmaRead | Self::AtomicCmpAndSwp | Self::AtomicFetchAndAdd
        )
    }

    /// Returns true if a QP of type `qp_type` may post this opcode.
    ///
    /// As the C driver's `rxe_wr_opcode_info`, except that SEND with
    /// invalidate is RC only: UC and UD have no wire opcode for it.
    pub const fn allowed_on(self, qp_type: QpType) -> bool {
        match self {
            Self::Send | Self::SendWithImm => true,
            Self::RdmaWrite | Self::RdmaWriteWithImm | Self::BindMw => {
                matches!(qp_type, QpType::Rc | QpType::Uc)
            }
            Self::RdmaRead
            | Self::AtomicCmpAndSwp
            | Self::AtomicFetchAndAdd
            | Self::LocalInv
            | Self::RegMr
            | Self::SendWithInv
            | Self::Flush
            | Self::AtomicWrite => matches!(qp_type, QpType::Rc),
        }
    }

    /// Returns true if the data may be carried inline in the WQE.
    pub const fn allows_inline(self) -> bool {
        matches!(
            self,
            Self::Send
                | Self::SendWithImm
                | Self::SendWithInv
                | Self::RdmaWrite
                | Self::RdmaWriteWithImm
        )
    }

    /// Returns the message this opcode sends, or `None` for local operations.
    pub const fn message_kind(self) -> Option<MessageKind> {
        Some(match self {
            Self::RdmaWrite => MessageKind::RdmaWrite,
            Self::RdmaWriteWithImm => MessageKind::RdmaWriteWithImm,
            Self::Send => MessageKind::Send,
            Self::SendWithImm => MessageKind::SendWithImm,
            Self::SendWithInv => MessageKind::SendWithInv,
            Self::RdmaRead => MessageKind::RdmaRead,
            Self::AtomicCmpAndSwp => MessageKind::CompareSwap,
            Self::AtomicFetchAndAdd => MessageKind::FetchAdd,
            Self::Flush => MessageKind::Flush,
            Self::AtomicWrite => MessageKind::AtomicWrite,
            Self::LocalInv | Self::BindMw | Self::RegMr => return None,
        })
    }
}

/// The `send_flags` of a send WQE (`IB_SEND_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SendFlags(u32);

impl SendFlags {
    /// Wait for earlier reads and atomics to complete.
    pub const FENCE: u32 = 1 << 0;
    /// Generate a completion even on a QP that signals selectively.
    pub const SIGNALED: u32 = 1 << 1;
    /// Set the solicited event bit on the last packet.
    pub const SOLICITED: u32 = 1 << 2;
    /// The data is inline in the WQE.
    pub const INLINE: u32 = 1 << 3;
    /// Checksum offload (UD over IPoIB; accepted and ignored).
    pub const IP_CSUM: u32 = 1 << 4;

    /// Creates the flags from raw `send_flags` bits.
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// Returns the raw flags.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Returns true if every bit of `flag` is set.
    pub const fn contains(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// What a send WQE does at the remote end, by opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Remote {
    /// SEND on a connected QP: the responder chooses the buffer.
    None,
    /// RDMA WRITE, RDMA READ or ATOMIC WRITE: remote buffer.
    Rdma {
        /// Remote virtual address.
        addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// CmpSwap or FetchAdd at an 8-byte aligned address.
    Atomic {
        /// Remote virtual address.
        addr: u64,
        /// Remote key.
        rkey: u32,
        /// Compare value (CmpSwap) or addend (FetchAdd).
        compare_add: u64,
        /// Swap value (CmpSwap).
        swap: u64,
    },
    /// SEND on a UD QP: destination QP and address handle.
    Ud {
        /// Destination QP number (24 bits).
        remote_qpn: u32,
        /// Destination Q_Key.
        remote_qkey: u32,
        /// Address handle number, not zero; the caller looks it up.
        ah_num: u32,
    },
    /// FLUSH of a remote range.
    Flush {
        /// Remote virtual address.
        addr: u64,
        /// Length of the range.
        length: u32,
        /// Remote key.
        rkey: u32,
        /// Placement type for the FETH.
        placement_type: u8,
        /// Selectivity level for the FETH.
        selectivity_level: u8,
    },
    /// Fast registration of a memory region.
    RegMr(Registration),
    /// Local invalidate of `rkey`.
    LocalInv {
        /// The key to invalidate.
        rkey: u32,
    },
    /// Bind (or, with a length of zero, unbind) a memory window.
    BindMw(MwBind),
}

/// Where the local data of a WQE is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeData<'a> {
    /// Scatter/gather elements.
    Sges(&'a [Sge]),
    /// Data carried in the WQE: inline data, or the eight bytes of an ATOMIC WRITE.
    Inline(&'a [u8]),
}

/// A validated send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe<'a> {
    /// The caller's work request ID.
    pub wr_id: u64,
    /// The opcode, allowed on the QP type.
    pub opcode: WrOpcode,
    /// The send flags.
    pub flags: SendFlags,
    /// Immediate data, for the "with immediate" opcodes, in network order.
    pub imm_data: Option<u32>,
    /// The remote key to invalidate, for SEND with invalidate.
    pub invalidate_rkey: Option<u32>,
    /// The remote side of the operation.
    pub remote: Remote,
    /// The local data.
    pub data: WqeData<'a>,
    /// Total length of the local data, at most 2^31.
    pub length: u32,
}

/// A validated receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWqe<'a> {
    /// The caller's work request ID.
    pub wr_id: u64,
    /// Buffers to receive into.
    pub sges: &'a [Sge],
    /// Their total length.
    pub length: u32,
}

/// The limits of a send queue, fixed when the QP was created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendQueueLimits {
    /// The QP type.
    pub qp_type: QpType,
    /// `max_send_sge` of the QP.
    pub max_sge: u32,
    /// `max_inline_data` of the QP.
    pub max_inline: u32,
    /// A kernel consumer's queue, which may hold registration requests: user space's
    /// may not (the rxe ABI has no such opcode).
    pub kernel: bool,
}

/// Why a WQE was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WqeError {
    /// The slot is shorter than the WQE it claims to hold.
    Truncated,
    /// An opcode this driver does not implement.
    UnknownOpcode(u32),
    /// An opcode the QP type does not allow.
    OpcodeNotAllowed,
    /// More SGEs than the queue was created with.
    TooManySges,
    /// Total length over 2^31 bytes, or overflowing.
    TooLong,
    /// Inline data on an opcode that takes none.
    InlineNotAllowed,
    /// More inline data than the queue was created with.
    InlineTooLong,
    /// An atomic whose local buffer is not eight bytes.
    BadAtomicLength,
    /// An atomic at an address not aligned to eight bytes.
    MisalignedAtomic,
    /// A UD send without an address handle.
    MissingAddressHandle,
}

/// Returns the sum of the SGE lengths, or `None` above [`MAX_MESSAGE_LEN`].
fn total_length(sges: &[Sge]) -> Option<u32> {
    sges.iter()
        .try_fold(0u32, |acc, sge| acc.checked_add(sge.length()))
        .filter(|&n| n <= MAX_MESSAGE_LEN)
}

/// Returns the view `T` of the start of the `wr` union.
fn wr_view<T: FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
    wr: &[u8; 120],
) -> Result<&T, WqeError> {
    T::ref_from_prefix(wr)
        .map(|(view, _)| view)
        .map_err(|_| WqeError::Truncated)
}

/// The bytes of a send queue slot [`copy_send_wqe`] copies first: the fixed part and one SGE,
/// all of most WQEs.
const SEND_WQE_FIRST_COPY: usize = SEND_WQE_HEADER_LEN + core::mem::size_of::<Sge>();

/// Copies the send WQE of a slot of `slot_len` bytes into `buf`, as far as decoding it needs:
/// the slot's first bytes up to the fixed part and one SGE, then, if the WQE is longer, the
/// rest of its inline data or SGEs ([`send_wqe_len`]). `read(offset, dst)` copies the slot's
/// bytes from `offset` on into `dst`. Returns how many bytes of `buf` hold the WQE.
///
/// Decoding what it leaves in `buf` gives what decoding the whole slot gives. Copying a slot
/// costs per byte (user space may write it meanwhile) and per call of `read`: a WQE of one
/// SGE, or of at most 16 bytes of inline data, is one call.
pub fn copy_send_wqe<E>(
    buf: &mut [u8],
    slot_len: usize,
    mut read: impl FnMut(usize, &mut [u8]) -> Result<(), E>,
) -> Result<usize, E> {
    let slot_len = slot_len.min(buf.len());
    let first = slot_len.min(SEND_WQE_FIRST_COPY);
    if let Some(part) = buf.get_mut(..first) {
        read(0, part)?;
    }
    let Some(header) = buf
        .get(..SEND_WQE_HEADER_LEN)
        .filter(|_| slot_len >= SEND_WQE_HEADER_LEN)
    else {
        // Not even a fixed part: all there is, which fails to decode.
        return Ok(slot_len);
    };
    let len = send_wqe_len(header, slot_len);
    if let Some(rest) = buf.get_mut(first..len).filter(|rest| !rest.is_empty()) {
        read(first, rest)?;
    }
    Ok(len)
}

/// Returns how many bytes of a send queue slot of `slot_len` bytes the WQE that starts with
/// `header` occupies: the fixed part, then its inline data or its SGEs.
///
/// A reader copies only these bytes out of the ring. What it returns is not checked here:
/// [`decode_send_wqe`] checks the copy (and fails on one that is too short). With less than
/// a fixed part, or with counts beyond the slot, the whole slot is used.
pub fn send_wqe_len(header: &[u8], slot_len: usize) -> usize {
    let Ok((raw, _)) = RawSendWqe::ref_from_prefix(header) else {
        return slot_len;
    };
    let inline = raw.opcode.get() == WrOpcode::AtomicWrite as u32
        || SendFlags(raw.send_flags.get()).contains(SendFlags::INLINE);
    let data = if inline {
        usize::try_from(raw.dma.length.get()).unwrap_or(usize::MAX)
    } else {
        usize::try_from(raw.dma.num_sge.get())
            .unwrap_or(usize::MAX)
            .saturating_mul(core::mem::size_of::<Sge>())
    };
    // An ATOMIC WRITE carries 8 bytes whatever its length says.
    let data = data.max(8);
    SEND_WQE_HEADER_LEN.saturating_add(data).min(slot_len)
}

/// Decodes the send WQE in `slot`, a private copy of one send queue element.
pub fn decode_send_wqe<'a>(
    slot: &'a [u8],
    limits: &SendQueueLimits,
) -> Result<SendWqe<'a>, WqeError> {
    let (raw, tail) = RawSendWqe::ref_from_prefix(slot).map_err(|_| WqeError::Truncated)?;
    let opcode = WrOpcode::from_raw(raw.opcode.get())
        .filter(|&o| o != WrOpcode::RegMr || limits.kernel)
        .ok_or(WqeError::UnknownOpcode(raw.opcode.get()))?;
    if !opcode.allowed_on(limits.qp_type) {
        return Err(WqeError::OpcodeNotAllowed);
    }
    let flags = SendFlags(raw.send_flags.get());
    let is_ud = matches!(limits.qp_type, QpType::Ud | QpType::Gsi);

    let data = if opcode == WrOpcode::AtomicWrite {
        WqeData::Inline(tail.get(..8).ok_or(WqeError::Truncated)?)
    } else if flags.contains(SendFlags::INLINE) {
        if !opcode.allows_inline() {
            return Err(WqeError::InlineNotAllowed);
        }
        let len = raw.dma.length.get();
        if len > limits.max_inline {
            return Err(WqeError::InlineTooLong);
        }
        let len = usize::try_from(len).map_err(|_| WqeError::InlineTooLong)?;
        WqeData::Inline(tail.get(..len).ok_or(WqeError::Truncated)?)
    } else if matches!(
        opcode,
        WrOpcode::LocalInv | WrOpcode::BindMw | WrOpcode::RegMr
    ) {
        WqeData::Sges(&[])
    } else {
        let num_sge = raw.dma.num_sge.get();
        if num_sge > limits.max_sge {
            return Err(WqeError::TooManySges);
        }
        let num_sge = usize::try_from(num_sge).map_err(|_| WqeError::TooManySges)?;
        let (sges, _) =
            <[Sge]>::ref_from_prefix_with_elems(tail, num_sge).map_err(|_| WqeError::Truncated)?;
        WqeData::Sges(sges)
    };
    let length = match data {
        WqeData::Sges(sges) => total_length(sges).ok_or(WqeError::TooLong)?,
        WqeData::Inline(bytes) => u32::try_from(bytes.len()).map_err(|_| WqeError::TooLong)?,
    };

    let ex = u32::from_be_bytes(raw.ex);
    let imm_data = match opcode {
        WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm => Some(ex),
        _ => None,
    };
    let invalidate_rkey = match opcode {
        // Not `__be32`: a plain `__u32` in the ring's byte order.
        WrOpcode::SendWithInv => Some(u32::from_ne_bytes(raw.ex)),
        _ => None,
    };

    let remote = match opcode {
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv if is_ud => {
            let ud: &RawUdWr = wr_view(&raw.wr)?;
            let ah_num = ud.ah_num.get();
            if ah_num == 0 {
                return Err(WqeError::MissingAddressHandle);
            }
            Remote::Ud {
                remote_qpn: ud.remote_qpn.get() & 0x00ff_ffff,
                remote_qkey: ud.remote_qkey.get(),
                ah_num,
            }
        }
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => Remote::None,
        WrOpcode::RdmaWrite
        | WrOpcode::RdmaWriteWithImm
        | WrOpcode::RdmaRead
        | WrOpcode::AtomicWrite => {
            let rdma: &RawRdmaWr = wr_view(&raw.wr)?;
            Remote::Rdma {
                addr: rdma.remote_addr.get(),
                rkey: rdma.rkey.get(),
            }
        }
        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
            let atomic: &RawAtomicWr = wr_view(&raw.wr)?;
            if length != 8 {
                return Err(WqeError::BadAtomicLength);
            }
            let addr = atomic.remote_addr.get();
            if addr & 7 != 0 {
                return Err(WqeError::MisalignedAtomic);
            }
            Remote::Atomic {
                addr,
                rkey: atomic.rkey.get(),
                compare_add: atomic.compare_add.get(),
                swap: atomic.swap.get(),
            }
        }
        WrOpcode::Flush => {
            let flush: &RawFlushWr = wr_view(&raw.wr)?;
            Remote::Flush {
                addr: flush.remote_addr.get(),
                length: flush.length.get(),
                rkey: flush.rkey.get(),
                placement_type: flush.placement_type,
                selectivity_level: flush.selectivity_level,
            }
        }
        WrOpcode::RegMr => {
            let reg: &RawRegWr = wr_view(&raw.wr)?;
            Remote::RegMr(Registration {
                mr_key: reg.mr_key.get(),
                key: reg.key.get(),
                access: reg.access.get(),
                iova: reg.iova.get(),
                length: reg.length.get(),
            })
        }
        WrOpcode::LocalInv => Remote::LocalInv {
            rkey: u32::from_ne_bytes(raw.ex),
        },
        WrOpcode::BindMw => {
            let mw: &RawMwWr = wr_view(&raw.wr)?;
            Remote::BindMw(MwBind {
                addr: mw.addr.get(),
                length: mw.length.get(),
                mr_lkey: mw.mr_lkey.get(),
                mw_rkey: mw.mw_rkey.get(),
                rkey: mw.rkey.get(),
                access: mw.access.get(),
            })
        }
    };

    Ok(SendWqe {
        wr_id: raw.wr_id.get(),
        opcode,
        flags,
        imm_data,
        invalidate_rkey,
        remote,
        data,
        length,
    })
}

/// Copies the view `v` to the start of the `wr` union `wr`.
fn put_wr<T: zerocopy::IntoBytes + zerocopy::Immutable>(
    wr: &mut [u8; 120],
    v: &T,
) -> Result<(), WqeError> {
    let bytes = v.as_bytes();
    wr.get_mut(..bytes.len())
        .ok_or(WqeError::Truncated)?
        .copy_from_slice(bytes);
    Ok(())
}

/// Writes the send WQE `wqe` into `slot`, as a kernel consumer posts it; returns the number of
/// bytes written.
///
/// The inverse of [`decode_send_wqe`]: the bytes written decode to `wqe` again. The caller
/// checks `wqe` against the queue's limits; the run that takes the WQE checks it again.
pub fn encode_send_wqe(slot: &mut [u8], wqe: &SendWqe<'_>) -> Result<usize, WqeError> {
    let (num_sge, dma_length, tail) = match wqe.data {
        WqeData::Sges(sges) => (
            u32::try_from(sges.len()).map_err(|_| WqeError::TooManySges)?,
            total_length(sges).ok_or(WqeError::TooLong)?,
            sges.as_bytes(),
        ),
        WqeData::Inline(bytes) => (
            0,
            u32::try_from(bytes.len()).map_err(|_| WqeError::TooLong)?,
            bytes,
        ),
    };
    let len = SEND_WQE_HEADER_LEN
        .checked_add(tail.len())
        .ok_or(WqeError::Truncated)?;
    let slot = slot.get_mut(..len).ok_or(WqeError::Truncated)?;
    let (head, rest) = slot.split_at_mut(SEND_WQE_HEADER_LEN);

    // `ex`: immediate data in network order, an R_Key in the ring's (native) order.
    let ex = match (wqe.imm_data, wqe.invalidate_rkey, wqe.remote) {
        (Some(imm), _, _) => imm.to_be_bytes(),
        (None, Some(rkey), _) | (None, None, Remote::LocalInv { rkey }) => rkey.to_ne_bytes(),
        _ => [0; 4],
    };
    let mut wr = [0u8; 120];
    match wqe.remote {
        Remote::None | Remote::LocalInv { .. } => (),
        Remote::RegMr(reg) => put_wr(
            &mut wr,
            &RawRegWr {
                mr_key: U32::new(reg.mr_key),
                key: U32::new(reg.key),
                access: U32::new(reg.access),
                reserved: U32::new(0),
                iova: U64::new(reg.iova),
                length: U64::new(reg.length),
            },
        )?,
        Remote::Rdma { addr, rkey } => put_wr(
            &mut wr,
            &RawRdmaWr {
                remote_addr: U64::new(addr),
                rkey: U32::new(rkey),
                reserved: U32::new(0),
            },
        )?,
        Remote::Atomic {
            addr,
            rkey,
            compare_add,
            swap,
        } => put_wr(
            &mut wr,
            &RawAtomicWr {
                remote_addr: U64::new(addr),
                compare_add: U64::new(compare_add),
                swap: U64::new(swap),
                rkey: U32::new(rkey),
                reserved: U32::new(0),
            },
        )?,
        Remote::Ud {
            remote_qpn,
            remote_qkey,
            ah_num,
        } => put_wr(
            &mut wr,
            &RawUdWr {
                remote_qpn: U32::new(remote_qpn),
                remote_qkey: U32::new(remote_qkey),
                pkey_index: U16::new(0),
                reserved: U16::new(0),
                ah_num: U32::new(ah_num),
            },
        )?,
        Remote::Flush {
            addr,
            length,
            rkey,
            placement_type,
            selectivity_level,
        } => put_wr(
            &mut wr,
            &RawFlushWr {
                remote_addr: U64::new(addr),
                length: U32::new(length),
                rkey: U32::new(rkey),
                placement_type,
                selectivity_level,
            },
        )?,
        Remote::BindMw(b) => put_wr(
            &mut wr,
            &RawMwWr {
                addr: U64::new(b.addr),
                length: U64::new(b.length),
                mr_lkey: U32::new(b.mr_lkey),
                mw_rkey: U32::new(b.mw_rkey),
                rkey: U32::new(b.rkey),
                access: U32::new(b.access),
            },
        )?,
    }
    let raw = RawSendWqe {
        wr_id: U64::new(wqe.wr_id),
        reserved: U32::new(0),
        opcode: U32::new(wqe.opcode as u32),
        send_flags: U32::new(wqe.flags.bits()),
        ex,
        wr,
        status: U32::new(0),
        state: U32::new(0),
        iova: U64::new(0),
        mask: U32::new(0),
        first_psn: U32::new(0),
        last_psn: U32::new(0),
        ack_length: U32::new(0),
        ssn: U32::new(0),
        has_rd_atomic: U32::new(0),
        dma: RawDmaInfo {
            length: U32::new(dma_length),
            resid: U32::new(dma_length),
            cur_sge: U32::new(0),
            num_sge: U32::new(num_sge),
            sge_offset: U32::new(0),
            reserved: U32::new(0),
        },
    };
    head.copy_from_slice(raw.as_bytes());
    rest.copy_from_slice(tail);
    Ok(len)
}

/// Decodes the receive WQE in `slot`, a private copy of one receive queue element.
pub fn decode_recv_wqe(slot: &[u8], max_sge: u32) -> Result<RecvWqe<'_>, WqeError> {
    let (raw, tail) = RawRecvWqe::ref_from_prefix(slot).map_err(|_| WqeError::Truncated)?;
    let num_sge = raw.dma.num_sge.get();
    if num_sge > max_sge {
        return Err(WqeError::TooManySges);
    }
    let num_sge = usize::try_from(num_sge).map_err(|_| WqeError::TooManySges)?;
    let (sges, _) =
        <[Sge]>::ref_from_prefix_with_elems(tail, num_sge).map_err(|_| WqeError::Truncated)?;
    Ok(RecvWqe {
        wr_id: raw.wr_id.get(),
        sges,
        length: total_length(sges).ok_or(WqeError::TooLong)?,
    })
}

/// Writes a receive WQE for `wr_id` and `sges` into `slot`, as a kernel consumer posts it.
///
/// Checks what the C driver's `post_one_recv` checks: at most `max_sge` elements and a total
/// length of at most 2^31 bytes. Returns the number of bytes written.
pub fn encode_recv_wqe(
    slot: &mut [u8],
    wr_id: u64,
    sges: &[Sge],
    max_sge: u32,
) -> Result<usize, WqeError> {
    let num_sge = u32::try_from(sges.len()).map_err(|_| WqeError::TooManySges)?;
    if num_sge > max_sge {
        return Err(WqeError::TooManySges);
    }
    let length = total_length(sges).ok_or(WqeError::TooLong)?;
    let len = RECV_WQE_HEADER_LEN
        .checked_add(core::mem::size_of_val(sges))
        .ok_or(WqeError::Truncated)?;
    let slot = slot.get_mut(..len).ok_or(WqeError::Truncated)?;
    let (head, tail) = slot.split_at_mut(RECV_WQE_HEADER_LEN);
    let raw = RawRecvWqe {
        wr_id: U64::new(wr_id),
        reserved: U32::new(0),
        padding: U32::new(0),
        dma: RawDmaInfo {
            length: U32::new(length),
            resid: U32::new(length),
            cur_sge: U32::new(0),
            num_sge: U32::new(num_sge),
            sge_offset: U32::new(0),
            reserved: U32::new(0),
        },
    };
    head.copy_from_slice(raw.as_bytes());
    tail.copy_from_slice(sges.as_bytes());
    Ok(len)
}

/// Returns the work request ID and raw opcode of the send WQE in `slot`, unvalidated: what a
/// flush reports for a request it never executes.
pub fn send_wqe_id(slot: &[u8]) -> Result<(u64, u32), WqeError> {
    let (raw, _) = RawSendWqe::ref_from_prefix(slot).map_err(|_| WqeError::Truncated)?;
    Ok((raw.wr_id.get(), raw.opcode.get()))
}

/// Returns the work request ID of the receive WQE in `slot`, unvalidated.
pub fn recv_wqe_id(slot: &[u8]) -> Result<u64, WqeError> {
    let (raw, _) = RawRecvWqe::ref_from_prefix(slot).map_err(|_| WqeError::Truncated)?;
    Ok(raw.wr_id.get())
}
