// SPDX-License-Identifier: GPL-2.0

//! Socket buffers.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::{
    alloc::Flags,
    append::Append,
    bindings,
    error::to_result,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    ThisModule, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{
        AtomicBool,
        AtomicU32,
        Ordering::SeqCst, //
    },
};

/// An owned socket buffer (`struct sk_buff`).
///
/// Dropping it frees the buffer (`kfree_skb`, counted as a drop).
///
/// # Invariants
///
/// `self.0` points to a valid `sk_buff` that this object owns. If its network header offset is
/// set, every byte from the network header to the end of the linear data is initialised, and
/// so is every byte of its paged data (as in any buffer the network stack received).
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: An owned `sk_buff` can be handed to and freed from any thread.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of a socket buffer.
    ///
    /// # Safety
    ///
    /// `skb` must be a valid socket buffer whose ownership the caller transfers, and whose bytes
    /// from its network header (if set) to the end of its linear data, and in its paged data,
    /// are initialised, as in any buffer the network stack received.
    pub unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: The caller transfers ownership of a valid buffer.
        Self(skb)
    }

    /// Returns the raw pointer.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the length of the data, linear and paged.
    #[inline]
    pub fn len(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Returns whether the buffer holds no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the length of the linear part.
    #[inline]
    pub fn headlen(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { headlen(self.as_raw()) }
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

    /// Makes sure the first `len` bytes of the data are in the linear part (`pskb_may_pull`):
    /// as many bytes as are missing move there from the paged part, and the head may be
    /// reallocated (`GFP_ATOMIC`).
    ///
    /// Fails with `EINVAL` if the buffer holds fewer than `len` bytes, and with `ENOMEM` if the
    /// head could not grow.
    pub fn may_pull(&mut self, len: u32) -> Result {
        if len > self.len() {
            return Err(EINVAL);
        }
        // SAFETY: The buffer is valid and owned; pulling keeps the header offsets and the
        // contents, and the bytes it moves into the head were initialised, so the type
        // invariant holds after it.
        if unsafe { bindings::pskb_may_pull(self.as_raw(), len) } {
            Ok(())
        } else {
            Err(ENOMEM)
        }
    }

    /// Returns whether a fragment's page may be written by someone else while the buffer lives
    /// (`skb_has_shared_frag`: pages a sender spliced in, with `sendfile` or `vmsplice`).
    ///
    /// Such a buffer's paged data is not read in place ([`SkBuff::read_pieces`] refuses it);
    /// [`SkBuff::linearize`] makes a private copy.
    pub fn has_shared_frag(&self) -> bool {
        // SAFETY: The buffer is valid and owned.
        unsafe { bindings::skb_has_shared_frag(self.as_raw()) }
    }

    /// Calls `f` with the data bytes `offset..offset + len`, linear and paged, in order, in one
    /// or more pieces (`skb_seq_read`), without copying them.
    ///
    /// Returns false, having stopped, if `f` returned false, the range is outside the data, or
    /// part of it cannot be read in place: device memory, or pages someone else may write
    /// meanwhile ([`SkBuff::has_shared_frag`]). A fragment stays mapped while `f` reads it,
    /// with `kmap_atomic`: `f` must not sleep.
    pub fn read_pieces(&self, offset: u32, len: u32, mut f: impl FnMut(&[u8]) -> bool) -> bool {
        if offset.checked_add(len).is_none_or(|end| end > self.len()) {
            return false;
        }
        // A shared page could change under the slice given to `f`: a data race.
        if self.has_shared_frag() {
            return false;
        }
        let mut reader = SeqReader {
            state: bindings::skb_seq_state::default(),
        };
        // SAFETY: The buffer is valid and owned, `offset + len` is within its data, and
        // `reader.state` is ours for the walk; dropping `reader` unmaps what the walk mapped.
        unsafe {
            bindings::skb_prepare_seq_read(self.as_raw(), offset, offset + len, &mut reader.state)
        };
        let mut consumed = 0;
        while consumed < len {
            let mut data: *const u8 = core::ptr::null();
            // SAFETY: `reader.state` was prepared for this buffer, which `self` keeps alive and
            // unchanged (it is borrowed) for the whole walk.
            let n = unsafe { bindings::skb_seq_read(consumed, &mut data, &mut reader.state) };
            if n == 0 || data.is_null() {
                return false;
            }
            // A piece may run past the range: its end is the end of the head or fragment.
            let n = n.min(len - consumed);
            // SAFETY: `skb_seq_read` returned at least `n` bytes at `data`, initialised by the
            // type invariant and mapped until the next call on `reader.state` or its end; `f`
            // cannot keep the slice past this call. Nothing writes them meanwhile: the head and
            // fragments of an owned buffer change only through it (a clone's holders only read
            // shared data), and no fragment is shared with a writer outside (checked above).
            let piece = unsafe { core::slice::from_raw_parts(data, n as usize) };
            if !f(piece) {
                return false;
            }
            consumed += n;
        }
        true
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
    #[inline]
    pub fn data(&self) -> &[u8] {
        let skb = self.as_raw();
        // SAFETY: The buffer is valid and owned; its linear data is `headlen` initialised
        // bytes at `data`, which nothing changes while `self` is borrowed (a clone's holders
        // only read shared data).
        unsafe { core::slice::from_raw_parts((*skb).data, headlen(skb) as usize) }
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
    #[inline]
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

/// A walk over a buffer's data in pieces ([`SkBuff::read_pieces`]).
///
/// # Invariants
///
/// `state` is zeroed, or was prepared for a buffer that outlives the walk.
struct SeqReader {
    state: bindings::skb_seq_state,
}

impl Drop for SeqReader {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `state` is zeroed (no fragment mapped, nothing to do)
        // or belongs to a walk over a live buffer; this unmaps its fragment, if one is mapped.
        unsafe { bindings::skb_abort_seq_read(&mut self.state) };
    }
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
/// or after `data`. Its destructor is unset, or [`in_flight_destructor`] with a
/// `destructor_arg` that [`TxSkb::count_in`] set.
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
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the length of the data.
    #[inline]
    pub fn len(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Returns whether the buffer holds no data.
    #[inline]
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
    #[inline]
    pub fn data(&self) -> &[u8] {
        let skb = self.as_raw();
        // SAFETY: By the type invariant the buffer is linear and its `len` bytes at `data` are
        // initialised; `&self` keeps them from being written meanwhile.
        unsafe { core::slice::from_raw_parts((*skb).data, (*skb).len as usize) }
    }

    /// Returns the data, for writing.
    #[inline]
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

    /// Counts the buffer in the [`InFlight`] of `owner` until it is freed, wherever that
    /// happens (sent, queued and dropped, or never sent).
    ///
    /// The buffer holds a reference on `owner`, and one on the module that made the count
    /// ([`InFlight::new`]), until then: its destructor, the kernel's code, releases them.
    ///
    /// Fails with `EBUSY` if the buffer is counted already, or `ENODEV` if the module is being
    /// removed (the buffer is then not counted).
    pub fn count_in<T>(&mut self, owner: ArcBorrow<'_, T>) -> Result
    where
        T: TxOwner + HasInFlight<T>,
    {
        let skb = self.as_raw();
        // SAFETY: The buffer is valid and owned.
        if unsafe { bindings::skb_has_destructor(skb) } {
            return Err(EBUSY);
        }
        let owner = Arc::from(owner);
        let raw = Arc::into_raw(owner);
        // SAFETY: `raw` points to a valid `T`, which the reference just taken keeps alive.
        let head = unsafe { T::raw_get_in_flight(raw) }.cast::<InFlightHead>();
        // SAFETY: `head` points to the `InFlight<T>` field of that `T`: its head, first in a
        // `repr(C)` struct.
        let head_ref = unsafe { &*head };
        // SAFETY: A module pointer from a `ThisModule` (or null, for code built in) is valid.
        if !unsafe { bindings::try_module_get(head_ref.module) } {
            // SAFETY: `raw` came from `Arc::into_raw` above and is not used again.
            drop(unsafe { Arc::from_raw(raw) });
            return Err(ENODEV);
        }
        head_ref.count.fetch_add(1, SeqCst);
        // SAFETY: The buffer is valid and owned, with no destructor (checked). Its destructor
        // gets `head`, which stays valid until then: the buffer owns the reference on `T` and on
        // its module taken above, which the destructor releases.
        // INVARIANT: The destructor is `in_flight_destructor`, with its argument set here.
        unsafe {
            bindings::skb_set_destructor(skb, Some(in_flight_destructor), head.cast_mut().cast())
        };
        Ok(())
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

/// What [`in_flight_destructor`] finds through a counted buffer's `destructor_arg`: the same
/// for every owner type.
#[repr(C)]
struct InFlightHead {
    /// Releases the buffer's reference on its owner: `release::<T>`, module code.
    release: unsafe fn(*const InFlightHead),
    /// The module whose code `release` and the owner's are, or null if built in.
    module: *mut bindings::module,
    /// Buffers counted and not yet freed.
    count: AtomicU32,
    /// The owner waits for the count to fall below `resume_below` ([`InFlight::must_wait`]).
    waiting: AtomicBool,
    /// The count below which a waiting owner is told ([`TxOwner::resume`]).
    resume_below: u32,
}

/// A count of the socket buffers of one sender (`T`, which embeds it) that are in flight:
/// counted by [`TxSkb::count_in`] and not yet freed, wherever they wait (a queueing
/// discipline, a device's ring).
///
/// A sender that sends only while [`InFlight::must_wait`] says it may keeps its buffers in
/// flight bounded; [`TxOwner::resume`] tells it when they have drained.
///
/// # Invariants
///
/// `head.release` is `release::<T>`, and `head.module` the module that made the count.
#[repr(C)]
pub struct InFlight<T> {
    head: InFlightHead,
    _owner: PhantomData<fn(T)>,
}

// SAFETY: The head's fields are atomics, or set once when it is made; the module pointer is
// only passed to the module reference count's functions.
unsafe impl<T> Send for InFlight<T> {}
// SAFETY: As above.
unsafe impl<T> Sync for InFlight<T> {}

impl<T: TxOwner + HasInFlight<T>> InFlight<T> {
    /// Returns a count with none in flight, for buffers of `T` whose code is `module`'s: a
    /// module is not removed while a buffer it counted exists.
    ///
    /// A waiting owner is told when fewer than `resume_below` are in flight.
    pub fn new(module: &'static ThisModule, resume_below: u32) -> Self {
        // INVARIANT: Made for `T`, by `module`.
        Self {
            head: InFlightHead {
                release: release::<T>,
                module: module.as_ptr(),
                count: AtomicU32::new(0),
                waiting: AtomicBool::new(false),
                resume_below,
            },
            _owner: PhantomData,
        }
    }
}

impl<T> InFlight<T> {
    /// Returns how many buffers are in flight.
    pub fn count(&self) -> u32 {
        self.head.count.load(SeqCst)
    }

    /// Returns whether the owner must wait before it sends more, with `limit` in flight or more;
    /// if so, [`TxOwner::resume`] is called once fewer than the count's `resume_below` are.
    pub fn must_wait(&self, limit: u32) -> bool {
        let head = &self.head;
        if head.count.load(SeqCst) < limit {
            return false;
        }
        head.waiting.store(true, SeqCst);
        // The last buffer may have gone between the load and the store, seeing no waiter:
        // looked at again after the store, which a later destructor sees.
        if head.count.load(SeqCst) < head.resume_below && head.waiting.swap(false, SeqCst) {
            return false;
        }
        true
    }
}

/// A sender whose socket buffers are counted in an [`InFlight`] it embeds.
///
/// `'static`: a counted buffer holds a reference on its owner for as long as it lives, which
/// may be longer than anything its owner could borrow. A buffer may hold the last reference:
/// the owner's `Drop` then runs in the buffer's destructor, in any context but hard interrupt,
/// and must not sleep.
pub trait TxOwner: Send + Sync + Sized + 'static {
    /// Called, once, when fewer buffers than the count's `resume_below` are in flight after
    /// [`InFlight::must_wait`] said to wait: from a buffer's destructor, in any context but
    /// hard interrupt, maybe inside the owner's own sending (a buffer dropped on its way out),
    /// with whatever locks it holds there. Must not sleep.
    ///
    /// Work it queues may run after the module's reference is given back: the owner waits for
    /// such work before its module goes, as for any work item of its own.
    fn resume(this: ArcBorrow<'_, Self>);
}

/// Declares that a type embeds an [`InFlight<T>`].
///
/// Implement it with [`impl_has_in_flight!`].
///
/// # Safety
///
/// `raw_get_in_flight` and `in_flight_container_of` must return valid pointers and be
/// inverses of each other, as [`crate::workqueue::HasWork`]'s methods.
pub unsafe trait HasInFlight<T> {
    /// Returns a pointer to the [`InFlight<T>`] field.
    ///
    /// # Safety
    ///
    /// `ptr` must point at a valid `Self`.
    unsafe fn raw_get_in_flight(ptr: *const Self) -> *const InFlight<T>;

    /// Returns a pointer to the struct containing the [`InFlight<T>`] field.
    ///
    /// # Safety
    ///
    /// `ptr` must point at the [`InFlight<T>`] field of a `Self`.
    unsafe fn in_flight_container_of(ptr: *const InFlight<T>) -> *const Self;
}

/// Implements [`HasInFlight`] for a type from the name of its [`InFlight`] field.
#[macro_export]
macro_rules! impl_has_in_flight {
    (impl HasInFlight<$t:ty> for $self:ty { self.$field:ident }) => {
        // SAFETY: `raw_get_in_flight` compiles only if the field has the right type, and
        // `container_of!` inverts it.
        unsafe impl $crate::net::skbuff::HasInFlight<$t> for $self {
            #[inline]
            unsafe fn raw_get_in_flight(
                ptr: *const Self,
            ) -> *const $crate::net::skbuff::InFlight<$t> {
                // SAFETY: The caller promises that `ptr` points at a valid `Self`.
                unsafe { ::core::ptr::addr_of!((*ptr).$field) }
            }

            #[inline]
            unsafe fn in_flight_container_of(
                ptr: *const $crate::net::skbuff::InFlight<$t>,
            ) -> *const Self {
                // SAFETY: The caller promises that `ptr` points at the field of a `Self`.
                unsafe { $crate::container_of!(ptr.cast_mut(), Self, $field) }.cast_const()
            }
        }
    };
}
pub use impl_has_in_flight;

/// Releases the reference on its owner that a counted buffer held: the buffer is freed.
///
/// # Safety
///
/// `head` must be the head of the [`InFlight<T>`] field of a `T` that the caller owns one
/// reference on, from [`TxSkb::count_in`], which this gives up.
unsafe fn release<T: TxOwner + HasInFlight<T>>(head: *const InFlightHead) {
    let in_flight = head.cast::<InFlight<T>>();
    // SAFETY: `in_flight` is the field of a `T` kept by the reference the caller gives up
    // here, from `Arc::into_raw` in `count_in`.
    let owner = unsafe { Arc::from_raw(T::in_flight_container_of(in_flight)) };
    // SAFETY: As above: the `T` is alive while `owner` is.
    let head = unsafe { &*head };
    let left = head.count.fetch_sub(1, SeqCst).wrapping_sub(1);
    // A load first: the read-modify-write only when someone waits, seldom.
    if left < head.resume_below && head.waiting.load(SeqCst) && head.waiting.swap(false, SeqCst) {
        T::resume(owner.as_arc_borrow());
    }
}

/// Returns the length of the linear part of `skb`: `skb_headlen()`, computed here rather than
/// through a helper call, since the packet path asks for it several times per packet.
///
/// # Safety
///
/// `skb` must point to a valid buffer that nothing changes during the call.
#[inline]
unsafe fn headlen(skb: *const bindings::sk_buff) -> u32 {
    // SAFETY: The caller guarantees that `skb` is valid. As in `skb_headlen()`, `data_len`
    // (the paged part) is never above `len`; `wrapping_sub` keeps this free of a panic path.
    unsafe { (*skb).len.wrapping_sub((*skb).data_len) }
}

/// The destructor of a buffer counted in an [`InFlight`]: the kernel's code, not a module's,
/// so that it may run after the module that counted it has gone to its last reference.
///
/// # Safety
///
/// `skb` must be a buffer whose destructor [`TxSkb::count_in`] set, being freed.
unsafe extern "C" fn in_flight_destructor(skb: *mut bindings::sk_buff) {
    // SAFETY: `count_in` set the argument to the head of a count that the buffer's references
    // keep valid until this returns.
    let head = unsafe { bindings::skb_destructor_arg(skb) }.cast::<InFlightHead>();
    // SAFETY: As above. Read before `release`, which may free the count.
    let (release, module) = unsafe { ((*head).release, (*head).module) };
    // SAFETY: By the type invariant of `InFlight`, `release` is `release::<T>` for the owner
    // type the count was made for, and the buffer's reference on it is given up here, once.
    unsafe { release(head) };
    // SAFETY: `count_in` took this reference on the module; `release`, the module's code, has
    // returned.
    unsafe { bindings::module_put(module) };
}
