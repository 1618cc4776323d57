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
        AtomicU32,
        AtomicU8,
        Ordering, //
    },
};

/// A zeroed, page-aligned `vmalloc_user` buffer that user space may map.
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
        Arc::new(Self { ptr, len }, GFP_KERNEL).map_err(|_| {
            // The allocation of the `Arc` failed: free the buffer ourselves.
            // SAFETY: `ptr` came from `vmalloc_user` and is not used after this.
            unsafe { bindings::vfree(ptr.as_ptr().cast()) };
            ENOMEM
        })
    }

    /// Returns the length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the buffer is empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn checked(&self, offset: usize, len: usize) -> Result<*mut u8> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `offset` is within the allocation.
        Ok(unsafe { self.ptr.as_ptr().add(offset) })
    }

    fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32> {
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.checked(offset, 4)?;
        // SAFETY: `p` is 4-aligned (vmalloc memory is page aligned) and in bounds; every access
        // of these bytes from the kernel is atomic, and user space may only race with them.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// Reads the `u32` at `offset` with acquire ordering.
    pub fn load_acquire(&self, offset: usize) -> Result<u32> {
        Ok(self.atomic_u32(offset)?.load(Ordering::Acquire))
    }

    /// Writes the `u32` at `offset` with release ordering.
    pub fn store_release(&self, offset: usize, value: u32) -> Result {
        self.atomic_u32(offset)?.store(value, Ordering::Release);
        Ok(())
    }

    /// Copies `src` into the buffer at `offset`.
    ///
    /// User space may read or write the same bytes at the same time: it then sees some mix of
    /// old and new bytes, which is its own business.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        let p = self.checked(offset, src.len())?;
        // SAFETY: `p` is valid for writes of `src.len()` bytes (in bounds of the allocation); a
        // kernel slice cannot overlap the buffer (no reference to it is ever made), and the
        // kernel accesses the buffer only atomically (these copies and the index accessors).
        unsafe { racy_copy(src.as_ptr(), p, src.len(), true) };
        Ok(())
    }

    /// Copies bytes at `offset` of the buffer into `dst` (a snapshot of untrusted data).
    ///
    /// User space may write the bytes meanwhile: the snapshot may then mix old and new bytes,
    /// and callers check what they read.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let p = self.checked(offset, dst.len())?;
        // SAFETY: `p` is valid for reads of `dst.len()` bytes (in bounds of the allocation); a
        // kernel slice cannot overlap the buffer (no reference to it is ever made), and the
        // kernel accesses the buffer only atomically (these copies and the index accessors).
        unsafe { racy_copy(p, dst.as_mut_ptr(), dst.len(), false) };
        Ok(())
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

/// Copies `len` bytes from `src` to `dst`, one of which is memory user space accesses
/// concurrently.
///
/// A plain copy (`copy_nonoverlapping`, or a slice over the shared bytes) racing with another
/// access is a data race, undefined behaviour in Rust's memory model. Here every access to the
/// buffer is a relaxed atomic byte access: atomics may race with each other (another kernel
/// thread copying the same bytes), and towards user space they compile to the plain byte
/// loads and stores of the kernel's `READ_ONCE()`/`WRITE_ONCE()`, which the kernel relies on
/// for memory another agent writes concurrently. A race then yields unspecified bytes (the
/// copy is not atomic as a whole), never undefined behaviour. Byte accesses only, so that two
/// copies never race with accesses of different sizes; the ring indices, the only other
/// accesses, are 32-bit atomics of their own words ([`UserBuffer::load_acquire`]).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and the ranges must not
/// overlap. The side in the buffer may be accessed concurrently only atomically (by the kernel)
/// or by user space; the other side must not be accessed concurrently.
unsafe fn racy_copy(src: *const u8, dst: *mut u8, len: usize, to_buffer: bool) {
    for i in 0..len {
        // SAFETY: `i < len`: in bounds of both ranges, which the caller guarantees valid;
        // `AtomicU8` has the size and alignment of `u8`; the buffer side is only accessed
        // atomically (or by user space) and the private side not concurrently.
        unsafe {
            let (s, d) = (src.add(i), dst.add(i));
            if to_buffer {
                AtomicU8::from_ptr(d).store(s.read(), Ordering::Relaxed);
            } else {
                d.write(AtomicU8::from_ptr(s.cast_mut()).load(Ordering::Relaxed));
            }
        }
    }
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
