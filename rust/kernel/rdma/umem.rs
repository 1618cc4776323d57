// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for device access (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use crate::page::PAGE_SIZE;
use crate::{
    alloc::KVVec,
    append::Append,
    bindings,
    error::{
        from_err_ptr,
        to_result, //
    },
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        mr::{
            AccessFlags,
            ReregFlags, //
        },
        udata::UData,
    },
};
use core::ptr::NonNull;

/// A range of a process's memory, pinned and mapped for the device until dropped.
///
/// Copies find their pages in an array built at pinning, so the cost of reaching a byte
/// does not grow with the region's size (walking the scatterlist from its start would).
///
/// # Invariants
///
/// `umem` came from `ib_umem_get_*` and is owned by us. `pages` lists, in order, the pinned
/// pages of its scatterlist (page `i` holds bytes `i * PAGE_SIZE..` of the range counted
/// from the start of the first page); they stay pinned until `umem` is released. `first` is
/// the offset of the range's first byte in the first page, and `first + len` fits `pages`.
pub struct Umem {
    umem: NonNull<bindings::ib_umem>,
    pages: KVVec<NonNull<bindings::page>>,
    first: usize,
}

// SAFETY: A umem may be released from any thread; the page pointers name pinned pages, which
// any thread may map.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads fields fixed at creation and maps pinned pages for a copy; the
// bytes copied are plain data (see `write`).
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes at user address `addr` of the calling process, for `access`
    /// (`IB_ACCESS_*`; writable access pins the pages for writing).
    ///
    /// Fails with `EFAULT` for memory the process has not mapped.
    ///
    /// `udata` is the udata of the verb being served: only a uverbs system call has a
    /// process whose memory may be pinned (`ib_umem_get` uses `current->mm`, which a kernel
    /// thread lacks); other callers fail with `EINVAL`.
    pub fn get<T: Driver>(
        dev: &Device<T>,
        udata: &UData<'_, T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        if !udata.is_uverbs_call() {
            return Err(EINVAL);
        }
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The device is valid; a null bundle makes the core use `addr` in the
        // current process.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(
                dev.as_raw(),
                core::ptr::null(),
                0,
                addr as u64,
                len,
                access.bits() as c_int,
            )
        })?;
        let umem = NonNull::new(umem).ok_or(ENOMEM)?;
        // Released on failure from here on.
        let owned = Released(umem);
        // SAFETY: `umem` is valid: `address` and `length` are fixed at creation.
        let (first, len) = unsafe {
            let u = umem.as_ptr();
            ((*u).address as usize & (PAGE_SIZE - 1), (*u).length)
        };
        let npages = first.checked_add(len).ok_or(EINVAL)?.div_ceil(PAGE_SIZE);
        let mut pages = KVVec::with_capacity(npages, GFP_KERNEL)?;
        // SAFETY: The umem is valid; its table lists `orig_nents` entries.
        let (mut sg, nents) = unsafe {
            let sgt = &(*umem.as_ptr()).sgt_append.sgt;
            (sgt.sgl, sgt.orig_nents)
        };
        let mut n = 0;
        while !sg.is_null() && n < nents && pages.len() < npages {
            // SAFETY: `sg` is an entry of the umem's table (at most `orig_nents` of them).
            let (page, off, len) = unsafe {
                (
                    bindings::sg_page(sg),
                    (*sg).offset as usize,
                    (*sg).length as usize,
                )
            };
            // `ib_umem_get` builds its table from whole pages; anything else is not a umem
            // this indexing understands.
            if off != 0 || len % PAGE_SIZE != 0 || page.is_null() {
                return Err(EINVAL);
            }
            for k in 0..len / PAGE_SIZE {
                if pages.len() == npages {
                    break;
                }
                // SAFETY: The entry's `len / PAGE_SIZE` pages are contiguous `struct page`s.
                let p = unsafe { page.add(k) };
                pages
                    .push_within_capacity(NonNull::new(p).ok_or(EINVAL)?)
                    .map_err(|_| EINVAL)?;
            }
            // SAFETY: `sg` is a valid entry; `sg_next` follows chained tables.
            sg = unsafe { bindings::sg_next(sg) };
            n += 1;
        }
        if pages.len() != npages {
            return Err(EINVAL);
        }
        // INVARIANT: A successful `ib_umem_get_*` returns an owned umem; `pages` lists its
        // pages in order, `npages` of them, which covers `first + len` bytes.
        Ok(Self {
            umem: owned.into_inner(),
            pages,
            first,
        })
    }

    /// Returns the length of the range in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        // SAFETY: The umem is valid; `length` is fixed at creation.
        unsafe { (*self.umem.as_ptr()).length }
    }

    /// Returns whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns whether the pages were pinned for writing (`ib_umem->writable`).
    ///
    /// Only then may the device write into them: the process may have mapped them read-only
    /// (a file it cannot write, say).
    pub fn is_writable(&self) -> bool {
        // SAFETY: The umem is valid; `writable` is fixed at creation.
        unsafe { (*self.umem.as_ptr()).writable() != 0 }
    }

    /// Checks that the region's rights may change to `access` (`IB_ACCESS_*`) under
    /// `flags` (`IB_MR_REREG_*`) while keeping these pages (`ib_umem_check_rereg`).
    ///
    /// Fails with `EACCES` if a writable access is asked for pages pinned read-only.
    pub fn check_rereg(&self, flags: ReregFlags, access: AccessFlags) -> Result {
        // SAFETY: The umem is valid; the call only reads it.
        to_result(unsafe {
            bindings::ib_umem_check_rereg(
                self.umem.as_ptr(),
                flags.bits() as c_int,
                access.bits() as c_int,
            )
        })
    }

    /// Appends to `dst` the `len` bytes from byte `offset` of the range.
    ///
    /// Fails with `EINVAL` (appending nothing) unless the whole span is inside the range and
    /// fits in `dst`. The process may write the same memory at the same time: its bytes are
    /// plain data.
    pub fn read_to(&self, offset: usize, len: usize, dst: &mut (impl Append + ?Sized)) -> Result {
        if dst.room() < len {
            return Err(EINVAL);
        }
        let mut appended = Ok(());
        self.for_each_piece(offset, len, |va, range| {
            // SAFETY: `va` maps the piece's bytes of a pinned page of the range (the
            // callback's contract), a page of the process's, which no buffer of the kernel's
            // lies in.
            let r = unsafe { dst.append_raw(va, range.len()) };
            // It fits, as the whole span does (checked), unless `dst` miscounts its room.
            appended = appended.and(r);
        })?;
        appended
    }

    /// Copies `src` to byte `offset` of the range.
    ///
    /// Fails with `EINVAL` (copying nothing) unless the whole span is inside the range, and
    /// with `EACCES` if the pages were not pinned for writing ([`Umem::is_writable`]). The
    /// process may access the same memory at the same time: its bytes are plain data.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        if !self.is_writable() {
            return Err(EACCES);
        }
        self.for_each_piece(offset, src.len(), |va, range| {
            // SAFETY: `va` maps the piece's bytes of a pinned page of the range (the
            // callback's contract).
            unsafe { piece_from(src, va, range) }
        })
    }

    /// Calls `f(va, range)` for each piece of bytes `offset..offset + len` of the range that
    /// lies in one page: `va` is that page's bytes, mapped for the call only, and `range`
    /// the piece's place in the span.
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(*mut u8, core::ops::Range<usize>),
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        // Position in the bytes of the pages; fits, as `first + len` does (type invariant).
        let mut pos = self.first + offset;
        let mut done = 0usize;
        while done < len {
            let in_page = pos % PAGE_SIZE;
            let chunk = (PAGE_SIZE - in_page).min(len - done);
            let page = *self.pages.get(pos / PAGE_SIZE).ok_or(EINVAL)?;
            // SAFETY: `page` is a pinned page of the range (type invariant), mapped for the
            // call and unmapped right after; `chunk` bytes from `in_page` are inside it.
            unsafe {
                let va = bindings::kmap_local_page(page.as_ptr()).cast::<u8>();
                f(va.add(in_page), done..done + chunk);
                bindings::kunmap_local(va.cast());
            }
            done += chunk;
            pos += chunk;
        }
        Ok(())
    }
}

/// Copies the bytes at `range` of `src` to a piece of a span, mapped at `va`; nothing if
/// `range` is not inside `src`.
///
/// # Safety
///
/// `va` is valid for writes of `range.len()` bytes that `src` does not overlap, and they are
/// plain data that nothing else relies on (user memory the device may write).
pub(super) unsafe fn piece_from(src: &[u8], va: *mut u8, range: core::ops::Range<usize>) {
    if let Some(s) = src.get(range) {
        // SAFETY: `va` is writable for `s.len()` bytes (the function's contract).
        unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), va, s.len()) };
    }
}

/// A umem released when dropped, while [`Umem::get`] builds its page array.
struct Released(NonNull<bindings::ib_umem>);

impl Released {
    fn into_inner(self) -> NonNull<bindings::ib_umem> {
        let p = self.0;
        core::mem::forget(self);
        p
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        // SAFETY: `Umem::get` owns the umem until it hands it to the `Umem`.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}
