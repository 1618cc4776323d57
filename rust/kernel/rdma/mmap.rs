// SPDX-License-Identifier: GPL-2.0

//! Memory shared with user space: buffers the kernel and a process both access, and the mmap
//! entries (`struct rdma_user_mmap_entry`) through which a process maps them.
//!
//! Everything a process writes into a [`UserBuffer`] is untrusted and may change at any time:
//! the accessors copy values out once and never hand out references to the shared bytes.

use crate::{
    bindings,
    error::to_result,
    mm::virt::VmaNew,
    new_mutex,
    prelude::*,
    rdma::{
        driver::Driver,
        ucontext::UContext, //
    },
    sync::{
        Arc,
        Mutex, //
    },
    types::Opaque, //
};
use core::{
    ptr::NonNull,
    sync::atomic::{
        AtomicBool,
        AtomicU64,
        Ordering, //
    },
};

/// A zeroed, page-aligned `vmalloc_user` buffer that user space may map.
///
/// The kernel accesses it only through atomic operations on its aligned 64-bit words, the
/// same size everywhere: the copies ([`UserBuffer::read`], [`UserBuffer::write`]) and the
/// index accessors ([`UserBuffer::load_acquire`], [`UserBuffer::store_release`]) alike. Two
/// kernel threads may then race on the same bytes (any safe caller may) without undefined
/// behaviour: atomics of one size may race, and a part of a word is written by a
/// compare-exchange of the whole word. Towards user space, these are the plain loads and
/// stores of the kernel's `READ_ONCE()`/`WRITE_ONCE()`, which the kernel relies on for
/// memory another agent writes concurrently; a race yields unspecified bytes, never undefined
/// behaviour. Word accesses cost an eighth of byte accesses on the packet path (every WQE
/// and completion goes through them).
///
/// # Invariants
///
/// `ptr` points to `len` bytes from `vmalloc_user`, owned by `self`; `len` is a multiple of
/// the page size.
pub struct UserBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The buffer is plain memory; all access goes through raw-pointer copies and atomics.
unsafe impl Send for UserBuffer {}
// SAFETY: See `Send`; concurrent accesses are atomics or copies of untrusted bytes.
unsafe impl Sync for UserBuffer {}

impl UserBuffer {
    /// Allocates a zeroed buffer of at least `len` bytes (rounded up to whole pages).
    pub fn new(len: usize) -> Result<Arc<Self>> {
        let page = bindings::PAGE_SIZE;
        let len = len.checked_next_multiple_of(page).ok_or(ENOMEM)?;
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: FFI call; `vmalloc_user` returns zeroed memory or null.
        let ptr = unsafe { bindings::vmalloc_user_noprof(len as c_ulong) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` holds `len` bytes, a multiple of the page size.
        // If the `Arc` cannot be allocated, the buffer is dropped with it, which frees it.
        Ok(Arc::new(Self { ptr, len }, GFP_KERNEL)?)
    }

    /// Returns the length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the buffer is empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks that `offset..offset + len` is within the buffer; returns the end.
    #[inline]
    fn checked(&self, offset: usize, len: usize) -> Result<usize> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        Ok(end)
    }

    /// Returns the aligned 64-bit word at word index `i`, which must be below `len / 8`.
    #[inline]
    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < self.len / 8);
        // SAFETY: `i < len / 8` (every caller derives `i` from a checked byte range), so the
        // word is in bounds; vmalloc memory is page aligned, so it is 8-aligned. By the type
        // invariant the buffer lives as long as `self`, and the kernel accesses it only through
        // these atomic words (see the type's documentation).
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().cast::<u64>().add(i)) }
    }

    /// Replaces the bytes of word `i` that `mask` selects with those of `bits`.
    ///
    /// A compare-exchange of the whole word keeps the other bytes as another thread wrote
    /// them. It is tried a bounded number of times: user space can write the word in a loop
    /// (on load-linked/store-conditional machines any store to the line fails it), and the
    /// kernel must not spin on it. Then the word is stored whole, with the other bytes as
    /// last read: a racing writer of those bytes may lose its write, which is its own
    /// business (user space) or a caller's bug (kernel), and never undefined behaviour.
    #[inline]
    fn merge(&self, i: usize, mask: u64, bits: u64, order: Ordering) {
        const TRIES: usize = 4;
        let w = self.word(i);
        let mut old = w.load(Ordering::Relaxed);
        for _ in 0..TRIES {
            let new = (old & !mask) | (bits & mask);
            match w.compare_exchange_weak(old, new, order, Ordering::Relaxed) {
                Ok(_) => return,
                Err(x) => old = x,
            }
        }
        w.store((old & !mask) | (bits & mask), order);
    }

    /// Returns the word index and the bit shift of the `u32` at `offset`, 4-aligned.
    #[inline]
    fn u32_at(&self, offset: usize) -> Result<(usize, u32)> {
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        self.checked(offset, 4)?;
        let shift = if cfg!(target_endian = "little") {
            (offset % 8) * 8
        } else {
            (4 - offset % 8) * 8
        };
        Ok((offset / 8, shift as u32))
    }

    /// Reads the `u32` at `offset` with acquire ordering.
    #[inline]
    pub fn load_acquire(&self, offset: usize) -> Result<u32> {
        let (i, shift) = self.u32_at(offset)?;
        Ok((self.word(i).load(Ordering::Acquire) >> shift) as u32)
    }

    /// Writes the `u32` at `offset` with release ordering.
    #[inline]
    pub fn store_release(&self, offset: usize, value: u32) -> Result {
        let (i, shift) = self.u32_at(offset)?;
        let mask = u64::from(u32::MAX) << shift;
        self.merge(i, mask, u64::from(value) << shift, Ordering::Release);
        Ok(())
    }

    /// Copies `src` into the buffer at `offset`.
    ///
    /// User space may read or write the same bytes at the same time: it then sees some mix of
    /// old and new bytes, which is its own business.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        self.checked(offset, src.len())?;
        let (head, body, tail) = split_words(offset, src.len());
        let (src_head, rest) = src.split_at(head);
        let (src_body, src_tail) = rest.split_at(body);
        self.write_part(offset, src_head);
        let first = offset.div_ceil(8);
        for (k, chunk) in src_body.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            self.word(first + k)
                .store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        if tail > 0 {
            self.write_part(offset + head + body, src_tail);
        }
        Ok(())
    }

    /// Writes `src` (at most to the end of its word) at `offset`, merging it into its word.
    fn write_part(&self, offset: usize, src: &[u8]) {
        let at = offset % 8;
        let n = src.len().min(8 - at);
        if n == 0 {
            return;
        }
        let (mut bytes, mut mask) = ([0u8; 8], [0u8; 8]);
        bytes[at..at + n].copy_from_slice(&src[..n]);
        mask[at..at + n].fill(0xff);
        self.merge(
            offset / 8,
            u64::from_ne_bytes(mask),
            u64::from_ne_bytes(bytes),
            Ordering::Relaxed,
        );
    }

    /// Copies bytes at `offset` of the buffer into `dst` (a snapshot of untrusted data).
    ///
    /// User space may write the bytes meanwhile: the snapshot may then mix old and new bytes,
    /// and callers check what they read.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.checked(offset, dst.len())?;
        let (head, body, tail) = split_words(offset, dst.len());
        let (dst_head, rest) = dst.split_at_mut(head);
        let (dst_body, dst_tail) = rest.split_at_mut(body);
        self.read_part(offset, dst_head);
        let first = offset.div_ceil(8);
        for (k, chunk) in dst_body.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&self.word(first + k).load(Ordering::Relaxed).to_ne_bytes());
        }
        if tail > 0 {
            self.read_part(offset + head + body, dst_tail);
        }
        Ok(())
    }

    /// Reads `dst.len()` bytes (at most to the end of the word) at `offset`.
    fn read_part(&self, offset: usize, dst: &mut [u8]) {
        let at = offset % 8;
        let n = dst.len().min(8 - at);
        if n == 0 {
            return;
        }
        let bytes = self.word(offset / 8).load(Ordering::Relaxed).to_ne_bytes();
        dst[..n].copy_from_slice(&bytes[at..at + n]);
    }

    /// Maps the whole buffer into `vma`, which must not be larger.
    fn map(&self, vma: &VmaNew) -> Result {
        // SAFETY: The buffer is from `vmalloc_user`; `vma` is being set up for this mapping, and
        // `remap_vmalloc_range` checks that it fits.
        to_result(unsafe {
            bindings::remap_vmalloc_range(vma.as_ptr(), self.ptr.as_ptr().cast(), 0)
        })
    }
}

/// Splits `len` bytes at `offset` into the bytes before the first word boundary, the whole
/// words, and the bytes after the last whole word.
fn split_words(offset: usize, len: usize) -> (usize, usize, usize) {
    let head = ((8 - offset % 8) % 8).min(len);
    let body = (len - head) / 8 * 8;
    (head, body, len - head - body)
}

impl Drop for UserBuffer {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the allocation. Pages still mapped by a process
        // stay alive through the mapping's own page references.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// A pointer to the allocation of an entry whose driver reference is not given back yet.
struct EntryPtr(NonNull<EntryInner>);

// SAFETY: The pointer is only used to give back the driver's reference, which may be done
// from any thread.
unsafe impl Send for EntryPtr {}

/// What an [`MmapEntry`] shares with the allocation of its entry: who gives back the driver's
/// reference on the core's entry (`rdma_user_mmap_entry_remove`).
///
/// Two may: the handle when it is dropped, and the user context when it goes
/// ([`MmapEntry::withdraw_all`]), whichever comes first. The other finds `None`.
///
/// # Invariants
///
/// While `entry` is `Some`, the entry is inserted in a live user context and the driver's
/// reference on it is not given back (so the allocation is alive).
#[pin_data]
struct Link {
    #[pin]
    entry: Mutex<Option<EntryPtr>>,
}

impl Link {
    /// Gives back the driver's reference, unless that was done already.
    fn withdraw(&self) {
        let mut guard = self.entry.lock();
        if let Some(p) = guard.take() {
            // SAFETY: By the type invariant the entry is inserted in a live context and the
            // driver's reference, which this consumes, is still ours. The lock is held, so the
            // context's teardown cannot give it back at the same time.
            unsafe { bindings::rdma_user_mmap_entry_remove((*p.0.as_ptr()).entry.get()) };
        }
    }
}

/// The allocation behind an [`MmapEntry`]: the core's entry and what it maps.
#[repr(C)]
struct EntryInner {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    buf: Arc<UserBuffer>,
    mapped: AtomicBool,
    link: Arc<Link>,
}

/// A buffer offered to one user context for mapping, at an offset the core chose.
///
/// The process may map it once (as the rxe provider does), with a mapping no larger than the
/// buffer. Dropping the handle withdraws the offer; the memory lives on while mapped.
///
/// The handle may outlive the user context (a queue's state that the driver's worker still
/// holds when the process dies): the context withdraws every offer left when it goes
/// (`dealloc_ucontext`), and a handle dropped later touches neither the entry nor the
/// context.
///
/// # Invariants
///
/// `link` is shared with the allocation of an entry that was inserted with
/// `rdma_user_mmap_entry_insert`; `offset` and `len` are that entry's.
pub struct MmapEntry {
    link: Arc<Link>,
    offset: u64,
    len: usize,
}

impl MmapEntry {
    /// Offers `buf` for mapping in `ctx`.
    pub fn new<T: Driver>(ctx: &UContext<T>, buf: Arc<UserBuffer>) -> Result<Self> {
        let len = buf.len();
        let link = Arc::pin_init(
            pin_init!(Link {
                entry <- new_mutex!(None, "rdma::mmap::Link::entry"),
            }),
            GFP_KERNEL,
        )?;
        let inner = KBox::new(
            EntryInner {
                entry: Opaque::zeroed(),
                buf,
                mapped: AtomicBool::new(false),
                link: link.clone(),
            },
            GFP_KERNEL,
        )?;
        let inner = NonNull::from(KBox::leak(inner));
        // SAFETY: `inner` is a valid, zeroed entry; the context is alive. On success the core
        // holds the entry until `rdma_user_mmap_entry_remove` and the last put.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(ctx.as_raw(), (*inner.as_ptr()).entry.get(), len)
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: The core did not take the entry; we still own the box.
            drop(unsafe { KBox::from_raw(inner.as_ptr()) });
            return Err(e);
        }
        // SAFETY: The entry is inserted and ours; `start_pgoff` is fixed at insert.
        let pgoff = unsafe { (*(*inner.as_ptr()).entry.get()).start_pgoff };
        // INVARIANT: Inserted in `ctx`, which is alive (we are in one of its verbs, before its
        // teardown can start), and the driver's reference is ours.
        *link.entry.lock() = Some(EntryPtr(inner));
        // INVARIANT: `link` is the entry's; these are its offset and length.
        Ok(Self {
            link,
            offset: (pgoff as u64) << bindings::PAGE_SHIFT,
            len,
        })
    }

    /// Returns the offset user space passes to `mmap`.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Returns the length of the buffer offered.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the buffer offered is empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maps the entry the core finds for `vma` in `ctx`, once.
    ///
    /// # Safety
    ///
    /// `ctx` and `vma` must be the arguments of the core's `mmap` op.
    pub(crate) unsafe fn mmap(
        ctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> Result {
        // SAFETY: Valid per the function's contract.
        let entry = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
        if entry.is_null() {
            pr_debug!("mmap of an offset that was not offered, or of the wrong size\n");
            return Err(EINVAL);
        }
        // SAFETY: Every entry of a context of ours is the first field of an `EntryInner`.
        let inner = unsafe { &*entry.cast::<EntryInner>() };
        let ret = if inner.mapped.swap(true, Ordering::AcqRel) {
            pr_debug!("mmap of an offset that is mapped already\n");
            Err(EINVAL)
        } else {
            // SAFETY: `vma` is being set up by this `mmap` call.
            inner.buf.map(unsafe { VmaNew::from_raw(vma) })
        };
        // SAFETY: Drops the reference `rdma_user_mmap_entry_get` took.
        unsafe { bindings::rdma_user_mmap_entry_put(entry) };
        ret
    }

    /// Withdraws every offer still made in `ctx`, which is going: no entry is left behind,
    /// and handles dropped later do nothing.
    ///
    /// # Safety
    ///
    /// `ctx` must be a user context of a device whose entries are all made by
    /// [`MmapEntry::new`], in the core's `dealloc_ucontext` op (before it frees the context).
    pub(crate) unsafe fn withdraw_all(ctx: *mut bindings::ib_ucontext) {
        let mut index: c_ulong = 0;
        loop {
            // SAFETY: The context is alive; `xa_find` takes the RCU read lock itself. The
            // pointer found is only a hint where the next entry starts.
            let found = unsafe {
                bindings::xa_find(
                    &raw mut (*ctx).mmap_xa,
                    &mut index,
                    c_ulong::MAX,
                    bindings::XA_PRESENT,
                )
            };
            if found.is_null() {
                break;
            }
            // SAFETY: The context is alive; on success this takes a reference on the entry
            // that starts at `index`, keeping it alive until the put below.
            let entry = unsafe { bindings::rdma_user_mmap_entry_get_pgoff(ctx, index) };
            if entry.is_null() {
                // Not the start of an entry, or one being removed already.
                match index.checked_add(1) {
                    Some(i) => index = i,
                    None => break,
                }
                continue;
            }
            // SAFETY: We hold a reference; every entry of the context is the first field of an
            // `EntryInner` (the caller's contract). `start_pgoff` and `npages` are fixed.
            let (inner, next) = unsafe {
                (
                    &*entry.cast::<EntryInner>(),
                    (*entry).start_pgoff.checked_add((*entry).npages),
                )
            };
            inner.link.withdraw();
            // SAFETY: Drops the reference taken above.
            unsafe { bindings::rdma_user_mmap_entry_put(entry) };
            match next {
                Some(i) => index = i,
                None => break,
            }
        }
    }

    /// Frees an entry whose last reference is gone.
    ///
    /// # Safety
    ///
    /// `entry` must be the argument of the core's `mmap_free` op.
    pub(crate) unsafe fn free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: The entry was leaked from a `KBox<EntryInner>` in `new` and the core is done
        // with it.
        drop(unsafe { KBox::from_raw(entry.cast::<EntryInner>()) });
    }
}

impl Drop for MmapEntry {
    fn drop(&mut self) {
        // Gives back the driver's reference, unless the context went first and did.
        self.link.withdraw();
    }
}

#[macros::kunit_tests(rust_kernel_rdma_user_buffer)]
mod tests {
    use super::*;

    /// Copies at every offset and length around word boundaries read back what was written
    /// and leave the bytes around them alone.
    #[test]
    fn copies_at_any_offset() -> Result {
        let buf = UserBuffer::new(64)?;
        for off in 0..20usize {
            for len in 0..20usize {
                buf.write(0, &[0xa5; 48])?;
                let mut src = KVec::with_capacity(len, GFP_KERNEL)?;
                for i in 0..len {
                    src.push((off * 31 + i) as u8, GFP_KERNEL)?;
                }
                buf.write(off, &src)?;
                let mut all = [0u8; 48];
                buf.read(0, &mut all)?;
                for (i, b) in all.iter().enumerate() {
                    let want = if i >= off && i < off + len {
                        src[i - off]
                    } else {
                        0xa5
                    };
                    assert_eq!(*b, want);
                }
                let mut back = KVec::from_elem(0u8, len, GFP_KERNEL)?;
                buf.read(off, &mut back)?;
                assert_eq!(&back[..], &src[..]);
            }
        }
        Ok(())
    }

    /// The index accessors read and write their own four bytes only.
    #[test]
    fn indices_are_their_own_bytes() -> Result {
        let buf = UserBuffer::new(64)?;
        buf.write(0, &[0x11; 16])?;
        buf.store_release(4, 0xdead_beef)?;
        buf.store_release(8, 7)?;
        assert_eq!(buf.load_acquire(0)?, 0x1111_1111);
        assert_eq!(buf.load_acquire(4)?, 0xdead_beef);
        assert_eq!(buf.load_acquire(8)?, 7);
        assert_eq!(buf.load_acquire(12)?, 0x1111_1111);
        let mut b = [0u8; 4];
        buf.read(4, &mut b)?;
        assert_eq!(u32::from_ne_bytes(b), 0xdead_beef);
        assert_eq!(buf.load_acquire(2), Err(EINVAL));
        Ok(())
    }

    /// Ranges past the end are refused, and nothing is written.
    #[test]
    fn out_of_range_is_refused() -> Result {
        let buf = UserBuffer::new(1)?;
        let len = buf.len();
        assert_eq!(buf.write(len - 2, &[1, 2, 3]), Err(EINVAL));
        assert_eq!(buf.read(len, &mut [0u8; 1]), Err(EINVAL));
        assert_eq!(buf.store_release(len - 2, 1), Err(EINVAL));
        assert_eq!(buf.write(usize::MAX, &[1]), Err(EINVAL));
        let mut last = [9u8; 2];
        buf.read(len - 2, &mut last)?;
        assert_eq!(last, [0, 0]);
        Ok(())
    }
}
