// SPDX-License-Identifier: GPL-2.0

//! Memory access for the transport: local buffers of WQEs and remote keys.
//!
//! The state machines never touch memory themselves. They ask a
//! [`MemoryAccess`] to copy between packets and the buffers of a WQE (named
//! by the caller's slot, the caller resolving its scatter/gather list and
//! L_Keys, with [`for_each_chunk`] as a helper), or to the range named by an
//! R_Key and a virtual address, with the access rights the operation needs.

use super::io::TxBuffer;
use super::packet::Payload;
use super::wqe::Sge;

/// Access rights, the bits of `enum ib_access_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access(u32);

impl Access {
    /// No access.
    pub const NONE: Self = Self(0);
    /// Local write (`IB_ACCESS_LOCAL_WRITE`).
    pub const LOCAL_WRITE: Self = Self(1 << 0);
    /// Remote write (`IB_ACCESS_REMOTE_WRITE`).
    pub const REMOTE_WRITE: Self = Self(1 << 1);
    /// Remote read (`IB_ACCESS_REMOTE_READ`).
    pub const REMOTE_READ: Self = Self(1 << 2);
    /// Remote atomic (`IB_ACCESS_REMOTE_ATOMIC`).
    pub const REMOTE_ATOMIC: Self = Self(1 << 3);
    /// Memory windows may be bound to the region (`IB_ACCESS_MW_BIND`).
    pub const MW_BIND: Self = Self(1 << 4);
    /// Addresses count from the start of the region or window (`IB_ACCESS_ZERO_BASED`).
    pub const ZERO_BASED: Self = Self(1 << 5);
    /// Flush to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
    pub const FLUSH_GLOBAL: Self = Self(1 << 8);
    /// Flush to persistence (`IB_ACCESS_FLUSH_PERSISTENT`).
    pub const FLUSH_PERSISTENT: Self = Self(1 << 9);

    /// Creates a set from raw `ib_access_flags` bits.
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// Returns the raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Returns the right a FLUSH of `placement_type` (1 global, 2 persistent) needs.
    pub const fn for_flush(placement_type: u8) -> Self {
        if placement_type == 2 {
            Self::FLUSH_PERSISTENT
        } else {
            Self::FLUSH_GLOBAL
        }
    }

    /// Returns the union of two sets.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Returns true if every right of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Why a memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessError {
    /// The key names no valid region or window, or was invalidated.
    InvalidKey,
    /// The region does not grant the access.
    AccessDenied,
    /// The range is not inside the region.
    OutOfRange,
    /// The buffers of the WQE are shorter than the transfer.
    TooShort,
    /// An atomic at an address not aligned to eight bytes.
    Misaligned,
    /// The key, range and rights are valid but a page of the range is not present now
    /// (on-demand paging): the operation is asked again once the driver has faulted it in.
    NotPresent,
}

/// A WQE whose local buffers are read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WqeRef {
    /// The send WQE in the caller's slot: its SGEs with their L_Keys, or its inline data.
    Send(u32),
    /// The receive WQE in the caller's slot.
    Recv(u32),
}

/// An atomic operation on eight bytes of remote memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Write `swap` if the value equals `compare`.
    CompareSwap {
        /// The value expected.
        compare: u64,
        /// The value written if it matched.
        swap: u64,
    },
    /// Add `add`, wrapping.
    FetchAdd {
        /// The addend.
        add: u64,
    },
    /// Write eight bytes at once (ATOMIC WRITE), as they came on the wire.
    Write {
        /// The bytes to write.
        value: [u8; 8],
    },
}

impl AtomicOp {
    /// Returns the right the operation needs on the remote region.
    pub const fn access(self) -> Access {
        match self {
            Self::Write { .. } => Access::REMOTE_WRITE,
            _ => Access::REMOTE_ATOMIC,
        }
    }

    /// Returns what the eight bytes holding `orig` hold after the operation.
    pub fn apply(self, orig: u64) -> u64 {
        match self {
            Self::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            Self::FetchAdd { add } => orig.wrapping_add(add),
            Self::Write { value } => u64::from_ne_bytes(value),
        }
    }
}

/// Memory as the transport sees it.
///
/// Every method checks keys, ranges and rights; a failure becomes a NAK or an
/// error completion, never a partial success that is reported as a success.
///
/// [`AccessError::NotPresent`] is no failure: the transport stops without a trace so that the
/// same request or packet is carried out again, byte for byte, once the driver has faulted the
/// page in. Any method but `invalidate`, `register` and `bind_mw` may return it, `check_remote`
/// too (the check of an on-demand paging region includes presence, so that a request is
/// refused before it starts rather than in its middle); an atomic that returns it has not been
/// carried out. What the callers do with it:
/// - the responder (RC) answers the request with an RNR NAK, as RNICs do for a page fault,
///   keeping its receive WQE and expected PSN; the requester retries after the RNR timer. A
///   READ response that meets it stops silently and the requester's retry is answered from
///   the responder resource;
/// - the responder (UC, UD) drops the packet as lost, keeping its receive WQE for the next
///   message;
/// - the requester sends nothing, as when it has no transmit buffer, and resumes at its next
///   run: for the payload of a request it gathers, and for the buffers the response of a READ
///   or atomic will be placed in ([`MemoryAccess::check_local`], asked before the request
///   goes out, so that the response is not dropped);
/// - the completer drops the READ response or atomic acknowledge as lost (a page taken away
///   after the requester's check); loss recovery asks for it again.
pub trait MemoryAccess {
    /// The buffer packets are built in: [`super::io::Output::Buffer`] of the same caller.
    type Buffer: TxBuffer + ?Sized;

    /// Appends to `dst` the `len` bytes from offset `offset` of the local data of `wqe`.
    ///
    /// On an error, what was appended is not sent.
    fn gather(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut Self::Buffer,
    ) -> Result<(), AccessError>;

    /// Copies `src` to offset `offset` of the local buffers of `wqe` (local write).
    fn scatter(&mut self, wqe: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError>;

    /// Copies a received packet's `payload`, piece by piece, to offset `offset` of the local
    /// buffers of `wqe`.
    ///
    /// A piece that cannot be read is [`AccessError::NotPresent`]: the packet is dropped as
    /// if lost, and sent again.
    fn scatter_payload(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        payload: Payload<'_>,
    ) -> Result<(), AccessError> {
        payload.for_each_piece(AccessError::NotPresent, |at, piece| {
            let at = u32::try_from(at)
                .ok()
                .and_then(|at| offset.checked_add(at))
                .ok_or(AccessError::TooShort)?;
            self.scatter(wqe, at, piece)
        })
    }

    /// Checks that the local buffers of `wqe` from byte `offset` for `len` bytes may be written
    /// now: the response of a READ or atomic is placed there.
    ///
    /// A driver with on-demand paging answers [`AccessError::NotPresent`] for a page not
    /// present or not writable, and faults it in; the default answers that they may, always.
    fn check_local(&mut self, wqe: WqeRef, offset: u32, len: u32) -> Result<(), AccessError> {
        let _ = (wqe, offset, len);
        Ok(())
    }

    /// Checks that `rkey` grants `access` to `len` bytes at `va`.
    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        access: Access,
    ) -> Result<(), AccessError>;

    /// Appends to `dst` the `len` bytes at `va` of the range of `rkey` (remote read).
    ///
    /// On an error, what was appended is not sent.
    fn read_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        dst: &mut Self::Buffer,
    ) -> Result<(), AccessError>;

    /// Copies into the range of `rkey` at `va` (remote write).
    fn write_remote(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), AccessError>;

    /// Copies a received packet's `payload`, piece by piece, into the range of `rkey` at `va`
    /// (remote write); a piece that cannot be read is [`AccessError::NotPresent`].
    fn write_remote_payload(
        &mut self,
        rkey: u32,
        va: u64,
        payload: Payload<'_>,
    ) -> Result<(), AccessError> {
        payload.for_each_piece(AccessError::NotPresent, |at, piece| {
            let at = u64::try_from(at).map_err(|_| AccessError::OutOfRange)?;
            self.write_remote(rkey, va.wrapping_add(at), piece)
        })
    }

    /// Carries out an atomic on the eight bytes at `va`; returns the value before.
    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError>;

    /// Makes `len` bytes at `va` globally visible or persistent (FLUSH).
    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        placement_type: u8,
    ) -> Result<(), AccessError>;

    /// Invalidates `rkey` (SEND with invalidate, local invalidate).
    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError>;

    /// Registers the fast-registration region `mr_key` names, over the pages mapped into
    /// it, as `reg` describes (a registration work request). The default refuses.
    fn register(&mut self, reg: &Registration) -> Result<(), AccessError> {
        let _ = reg;
        Err(AccessError::InvalidKey)
    }

    /// Binds the memory window `bind` names to part of a region, or unbinds it (a length of
    /// zero), for the queue pair that posted the request. The default refuses.
    fn bind_mw(&mut self, bind: &MwBind) -> Result<(), AccessError> {
        let _ = bind;
        Err(AccessError::InvalidKey)
    }
}

/// What a memory window bind request asks for (`struct rxe_send_wr`'s `mw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MwBind {
    /// The first address of the window (an offset into the region, if zero based).
    pub addr: u64,
    /// Its length in bytes; zero unbinds the window.
    pub length: u64,
    /// The L_Key of the region the window lies in.
    pub mr_lkey: u32,
    /// The window's R_Key when the request was posted: its index names the window.
    pub mw_rkey: u32,
    /// The window's new R_Key: its low eight bits are the new key byte.
    pub rkey: u32,
    /// The access rights the window grants (`IB_ACCESS_*`).
    pub access: u32,
}

/// What a registration work request sets on a fast-registration region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The region's key when the request was posted: its index names the region.
    pub mr_key: u32,
    /// The region's new L_Key and R_Key.
    pub key: u32,
    /// The new access rights (`IB_ACCESS_*`).
    pub access: u32,
    /// The first address of the region.
    pub iova: u64,
    /// Its length in bytes.
    pub length: u64,
}

/// Walks the part of a scatter/gather list that holds bytes `offset..offset + len`.
///
/// Calls `f(sge, addr, range)` for each piece: the element, the virtual
/// address of the piece in it, and the range of the transfer buffer that
/// maps there. Returns [`AccessError::TooShort`] if the list ends first.
pub fn for_each_chunk<F>(sges: &[Sge], offset: u32, len: usize, mut f: F) -> Result<(), AccessError>
where
    F: FnMut(&Sge, u64, core::ops::Range<usize>) -> Result<(), AccessError>,
{
    let mut skip = u64::from(offset);
    let mut done = 0usize;
    for sge in sges {
        if done >= len {
            break;
        }
        let sge_len = u64::from(sge.length());
        if skip >= sge_len {
            skip = skip.wrapping_sub(sge_len);
            continue;
        }
        let avail = usize::try_from(sge_len.wrapping_sub(skip)).unwrap_or(usize::MAX);
        let n = avail.min(len.wrapping_sub(done));
        let addr = sge
            .addr()
            .checked_add(skip)
            .ok_or(AccessError::OutOfRange)?;
        let end = done.checked_add(n).ok_or(AccessError::TooShort)?;
        f(sge, addr, done..end)?;
        done = end;
        skip = 0;
    }
    if done >= len {
        Ok(())
    } else {
        Err(AccessError::TooShort)
    }
}
