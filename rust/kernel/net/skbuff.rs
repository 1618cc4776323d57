// SPDX-License-Identifier: GPL-2.0

//! Socket buffers.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::{
    alloc::Flags,
    append::Append,
    bindings,
    error::to_result,
    prelude::*, //
};
use core::ptr::NonNull;

/// An owned socket buffer (`struct sk_buff`).
///
/// Dropping it frees the buffer (`kfree_skb`, counted as a drop).
///
/// # Invariants
///
/// `self.0` points to a valid `sk_buff` that this object owns. If its network header offset is
/// set, every byte from the network header to the end of the linear data is initialised (as in
/// any buffer the network stack received).
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: An owned `sk_buff` can be handed to and freed from any thread.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of a socket buffer.
    ///
    /// # Safety
    ///
    /// `skb` must be a valid socket buffer whose ownership the caller transfers, and whose bytes
    /// from its network header (if set) to the end of its linear data are initialised, as in
    /// any buffer the network stack received.
    pub unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: The caller transfers ownership of a valid buffer.
        Self(skb)
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the length of the data, linear and paged.
    pub fn len(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Returns whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the length of the linear part.
    pub fn headlen(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { bindings::skb_headlen(self.as_raw()) }
    }

    /// Frees the buffer as consumed, not dropped (`consume_skb`).
    pub fn consume(self) {
        let skb = self.as_raw();
        core::mem::forget(self);
        // SAFETY: We owned the buffer and give it up here.
        unsafe { bindings::skb_consume(skb) };
    }

    /// Makes the data linear (`skb_linearize`): the paged part, if any, moves into the head,
    /// which may be reallocated (`GFP_ATOMIC`).
    pub fn linearize(&mut self) -> Result {
        // SAFETY: The buffer is valid and owned; linearising keeps the header offsets and the
        // contents, so the type invariant holds after it.
        to_result(unsafe { bindings::skb_linearize(self.as_raw()) })
    }

    /// Returns a second buffer over the same data (`skb_clone`): a multicast datagram goes to
    /// each receiver without a copy of its bytes.
    ///
    /// Neither buffer writes the shared data: the network stack copies a cloned buffer's data
    /// before it changes it (as [`SkBuff::linearize`] does).
    pub fn try_clone(&self, flags: Flags) -> Result<Self> {
        // SAFETY: The buffer is valid and owned; `skb_clone` only reads it and takes a
        // reference on its data.
        let skb = unsafe { bindings::skb_clone(self.as_raw(), flags.as_raw()) };
        // INVARIANT: A clone is a new buffer that we own, with the original's header offsets
        // over the same data, so the same bytes are initialised.
        NonNull::new(skb).map(Self).ok_or(ENOMEM)
    }

    /// Returns the linear part of the data (the first [`SkBuff::headlen`] bytes).
    pub fn data(&self) -> &[u8] {
        let skb = self.as_raw();
        // SAFETY: The buffer is valid and owned; its linear data is `headlen` initialised
        // bytes at `data`, which nothing changes while `self` is borrowed (a clone's holders
        // only read shared data).
        unsafe { core::slice::from_raw_parts((*skb).data, bindings::skb_headlen(skb) as usize) }
    }

    /// Returns the bytes from the network header to the start of the data, if the network
    /// header is set and lies before the data (a received datagram: the IP header, and any
    /// header after it that was pulled).
    pub fn network_header(&self) -> Option<&[u8]> {
        let skb = self.as_raw();
        // SAFETY: The buffer is valid and owned.
        let off = unsafe { bindings::skb_network_offset(skb) };
        if off >= 0 {
            return None;
        }
        let len = off.unsigned_abs() as usize;
        // SAFETY: The network header is `len` bytes before `data`, inside the head (offsets are
        // from `head`, so it cannot start before it), and those bytes are initialised by the
        // type invariant.
        Some(unsafe { core::slice::from_raw_parts((*skb).data.sub(len), len) })
    }

    /// Returns the device pointer of the buffer (`skb->dev`), null if none.
    ///
    /// The buffer holds no reference on its device: whoever dereferences the pointer must know
    /// the device alive by other means (e.g. [`EncapRecv::recv`] gets the device of a
    /// received buffer as a reference valid for the call).
    ///
    /// [`EncapRecv::recv`]: crate::net::udp_tunnel::EncapRecv::recv
    pub(crate) fn dev_ptr(&self) -> *mut bindings::net_device {
        // SAFETY: The buffer is valid and owned.
        unsafe {
            (*self.as_raw())
                .__bindgen_anon_1
                .__bindgen_anon_1
                .__bindgen_anon_1
                .dev
        }
    }
}

/// Why a received buffer is dropped (`enum skb_drop_reason`): what the `skb:kfree_skb`
/// tracepoint and drop monitors report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkbDropReason {
    /// No reason given (`SKB_DROP_REASON_NOT_SPECIFIED`).
    NotSpecified,
    /// Nothing to deliver it to (`SKB_DROP_REASON_NO_SOCKET`).
    NoSocket,
    /// The receiver's queue is full (`SKB_DROP_REASON_SOCKET_RCVBUFF`).
    SocketRcvbuff,
    /// Shorter than its headers say (`SKB_DROP_REASON_PKT_TOO_SMALL`).
    PktTooSmall,
    /// Not addressed to this host (`SKB_DROP_REASON_OTHERHOST`).
    OtherHost,
    /// A protocol or header this receiver does not handle (`SKB_DROP_REASON_UNHANDLED_PROTO`).
    UnhandledProto,
    /// A checksum mismatch (`SKB_DROP_REASON_SKB_CSUM`).
    SkbCsum,
    /// No memory (`SKB_DROP_REASON_NOMEM`).
    NoMem,
    /// Purged from a queue that went away (`SKB_DROP_REASON_QUEUE_PURGE`).
    QueuePurge,
}

impl SkbDropReason {
    fn as_raw(self) -> bindings::skb_drop_reason {
        match self {
            Self::NotSpecified => bindings::skb_drop_reason_SKB_DROP_REASON_NOT_SPECIFIED,
            Self::NoSocket => bindings::skb_drop_reason_SKB_DROP_REASON_NO_SOCKET,
            Self::SocketRcvbuff => bindings::skb_drop_reason_SKB_DROP_REASON_SOCKET_RCVBUFF,
            Self::PktTooSmall => bindings::skb_drop_reason_SKB_DROP_REASON_PKT_TOO_SMALL,
            Self::OtherHost => bindings::skb_drop_reason_SKB_DROP_REASON_OTHERHOST,
            Self::UnhandledProto => bindings::skb_drop_reason_SKB_DROP_REASON_UNHANDLED_PROTO,
            Self::SkbCsum => bindings::skb_drop_reason_SKB_DROP_REASON_SKB_CSUM,
            Self::NoMem => bindings::skb_drop_reason_SKB_DROP_REASON_NOMEM,
            Self::QueuePurge => bindings::skb_drop_reason_SKB_DROP_REASON_QUEUE_PURGE,
        }
    }
}

impl SkBuff {
    /// Frees the buffer as dropped for `reason` (`kfree_skb_reason`).
    pub fn drop_with_reason(self, reason: SkbDropReason) {
        let skb = self.as_raw();
        core::mem::forget(self);
        // SAFETY: We owned the buffer and give it up here; a null socket is allowed (as
        // `kfree_skb_reason` passes).
        unsafe { bindings::sk_skb_reason_drop(core::ptr::null(), skb, reason.as_raw()) };
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the buffer.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}

/// A socket buffer built here to be sent: linear, not cloned, and writable.
///
/// # Invariants
///
/// `self.0` points to a valid `sk_buff` that this object owns, that was allocated by
/// [`TxSkb::alloc`] and is referenced by nothing else; it has no paged data, and every byte
/// from `data` to `tail` is initialised. Its network and transport headers, once set, point at
/// or after `data`.
pub struct TxSkb(NonNull<bindings::sk_buff>);

// SAFETY: An owned `sk_buff` can be handed to and freed from any thread.
unsafe impl Send for TxSkb {}

impl TxSkb {
    /// Allocates a buffer with `headroom` bytes for headers to push and room for `len` bytes of
    /// data to put.
    pub fn alloc(headroom: u32, len: u32, flags: Flags) -> Result<Self> {
        let size = headroom.checked_add(len).ok_or(EINVAL)?;
        // SAFETY: No preconditions.
        let skb = unsafe { bindings::alloc_skb(size, flags.as_raw()) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: A new linear buffer has at least `size` bytes of tail room.
        unsafe { bindings::skb_reserve(skb.as_ptr(), headroom as i32) };
        // INVARIANT: A new buffer is ours, linear and empty; its header offsets are unset.
        Ok(Self(skb))
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the length of the data.
    pub fn len(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Returns whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Prepends `bytes` to the data; fails with `EINVAL` if there is not enough head room.
    pub fn push_slice(&mut self, bytes: &[u8]) -> Result {
        // SAFETY: The buffer is valid and owned.
        let room = unsafe { bindings::skb_headroom(self.as_raw()) };
        if (room as usize) < bytes.len() {
            return Err(EINVAL);
        }
        // SAFETY: There is head room for `bytes.len()` bytes (checked); the new first bytes
        // are then initialised from `bytes`, which cannot overlap a buffer we own.
        unsafe {
            let dst = bindings::skb_push(self.as_raw(), bytes.len() as u32).cast::<u8>();
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
        }
        Ok(())
    }

    /// Returns the data.
    pub fn data(&self) -> &[u8] {
        let skb = self.as_raw();
        // SAFETY: By the type invariant the buffer is linear and its `len` bytes at `data` are
        // initialised; `&self` keeps them from being written meanwhile.
        unsafe { core::slice::from_raw_parts((*skb).data, (*skb).len as usize) }
    }

    /// Returns the data, for writing.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let skb = self.as_raw();
        // SAFETY: By the type invariant the buffer is linear, not shared, and its `len` bytes
        // at `data` are initialised; `&mut self` makes this the only access.
        unsafe { core::slice::from_raw_parts_mut((*skb).data, (*skb).len as usize) }
    }

    /// Sets the network header at the start of the data.
    pub fn reset_network_header(&mut self) {
        // SAFETY: The buffer is valid and owned.
        // INVARIANT: The header is at `data`.
        unsafe { bindings::skb_reset_network_header(self.as_raw()) };
    }

    /// Sets the transport header at the start of the data.
    pub fn reset_transport_header(&mut self) {
        // SAFETY: The buffer is valid and owned.
        // INVARIANT: The header is at `data`.
        unsafe { bindings::skb_reset_transport_header(self.as_raw()) };
    }

    /// Returns the bytes from the network header to the end of the data, or `None` if the
    /// network header is not set.
    pub fn network_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let skb = self.as_raw();
        // SAFETY: The buffer is valid and owned.
        let off = unsafe { bindings::skb_network_offset(skb) };
        let off = usize::try_from(off).ok()?;
        // A buffer fresh from `alloc` has its network header at `head`, before the data: the
        // offset is then negative, which is "not set" here. `data_mut` checks the range.
        self.data_mut().get_mut(off..)
    }
}

/// A packet is built by appending to its buffer's tail room, each byte written once.
impl Append for TxSkb {
    fn room(&self) -> usize {
        // SAFETY: The buffer is valid and owned.
        let room = unsafe { bindings::skb_tailroom(self.as_raw()) };
        usize::try_from(room).unwrap_or(0)
    }

    unsafe fn append_raw(&mut self, src: *const u8, len: usize) -> Result {
        if self.room() < len {
            return Err(EINVAL);
        }
        let n = u32::try_from(len).map_err(|_| EINVAL)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: There is tail room for `len` bytes (checked), so `skb_put` extends the data
        // over them without failing; `src` is readable for `len` bytes that do not overlap
        // that tail room (the function's contract).
        // INVARIANT: The copy initialises every byte up to the new `tail`.
        unsafe {
            let dst = bindings::skb_put(self.as_raw(), n).cast::<u8>();
            core::ptr::copy_nonoverlapping(src, dst, len);
        }
        Ok(())
    }
}

impl Drop for TxSkb {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the buffer.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}
