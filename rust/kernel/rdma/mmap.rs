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
    prelude::*,
    rdma::{
        driver::Driver,
        object::UContext, //
    },
    sync::Arc,
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

/// The allocation behind an [`MmapEntry`]: the core's entry and what it maps.
#[repr(C)]
struct EntryInner {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    buf: Arc<UserBuffer>,
    mapped: AtomicBool,
}

/// A buffer offered to one user context for mapping, at an offset the core chose.
///
/// The process may map it once (as the rxe provider does), with a mapping no larger than the
/// buffer. Dropping the handle withdraws the offer; the memory lives on while mapped.
///
/// # Invariants
///
/// `inner` was inserted with `rdma_user_mmap_entry_insert` and this handle owns the driver's
/// reference on it.
pub struct MmapEntry {
    inner: NonNull<EntryInner>,
}

// SAFETY: The entry is managed by the core under its own locks; the handle only removes it.
unsafe impl Send for MmapEntry {}
// SAFETY: `&MmapEntry` only reads immutable fields.
unsafe impl Sync for MmapEntry {}

impl MmapEntry {
    /// Offers `buf` for mapping in `ctx`.
    pub fn new<T: Driver>(ctx: &UContext<T>, buf: Arc<UserBuffer>) -> Result<Self> {
        let len = buf.len();
        let inner = KBox::new(
            EntryInner {
                entry: Opaque::zeroed(),
                buf,
                mapped: AtomicBool::new(false),
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
        // INVARIANT: Inserted; we own the driver's reference.
        Ok(Self { inner })
    }

    /// Returns the offset user space passes to `mmap`.
    pub fn offset(&self) -> u64 {
        // SAFETY: The entry is valid while this handle exists; `start_pgoff` is fixed at insert.
        let pgoff = unsafe { (*(*self.inner.as_ptr()).entry.get()).start_pgoff };
        (pgoff as u64) << bindings::PAGE_SHIFT
    }

    /// Returns the length of the buffer offered.
    pub fn len(&self) -> usize {
        // SAFETY: The entry is valid while this handle exists.
        unsafe { (*self.inner.as_ptr()).buf.len() }
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
        // SAFETY: By the type invariant we own the driver's reference, which this consumes.
        unsafe { bindings::rdma_user_mmap_entry_remove((*self.inner.as_ptr()).entry.get()) };
    }
}
