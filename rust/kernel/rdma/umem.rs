// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for device access (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use crate::{
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
    },
};
use core::ptr::NonNull;

/// A range of a process's memory, pinned and mapped for the device until dropped.
///
/// # Invariants
///
/// `self.0` came from `ib_umem_get_*` and is owned by us.
pub struct Umem(NonNull<bindings::ib_umem>);

// SAFETY: A umem may be released from any thread.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads fields fixed at creation.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes at user address `addr` of the calling process, for `access`
    /// (`IB_ACCESS_*`; writable access pins the pages for writing).
    ///
    /// Fails with `EFAULT` for memory the process has not mapped.
    pub fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
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
        // INVARIANT: A successful `ib_umem_get_*` returns an owned umem.
        Ok(Self(NonNull::new(umem).ok_or(ENOMEM)?))
    }

    /// Returns the length of the range in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: The umem is valid; `length` is fixed at creation.
        unsafe { (*self.0.as_ptr()).length }
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
        unsafe { (*self.0.as_ptr()).writable() != 0 }
    }

    /// Checks that the region's rights may change to `access` (`IB_ACCESS_*`) under
    /// `flags` (`IB_MR_REREG_*`) while keeping these pages (`ib_umem_check_rereg`).
    ///
    /// Fails with `EACCES` if a writable access is asked for pages pinned read-only.
    pub fn check_rereg(&self, flags: ReregFlags, access: AccessFlags) -> Result {
        // SAFETY: The umem is valid; the call only reads it.
        to_result(unsafe {
            bindings::ib_umem_check_rereg(
                self.0.as_ptr(),
                flags.bits() as c_int,
                access.bits() as c_int,
            )
        })
    }

    /// Copies `dst.len()` bytes from byte `offset` of the range into `dst`.
    ///
    /// Fails with `EINVAL` (copying nothing) unless the whole span is inside the range.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.for_each_piece(offset, dst.len(), |va, range| {
            let Some(d) = dst.get_mut(range) else {
                return;
            };
            // SAFETY: `va` maps `d.len()` bytes of a pinned page of the range (the callback's
            // contract); `d` is ours.
            unsafe { core::ptr::copy_nonoverlapping(va, d.as_mut_ptr(), d.len()) };
        })
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
            let Some(s) = src.get(range) else {
                return;
            };
            // SAFETY: `va` maps `s.len()` bytes of a pinned page of the range (the callback's
            // contract).
            unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), va, s.len()) };
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
        let umem = self.0.as_ptr();
        // SAFETY: The umem is valid; its scatterlist lists the pinned pages of the range, the
        // first starting at the page of `address` (`ib_umem_offset`).
        let (mut sg, nents, first) = unsafe {
            let sgt = &(*umem).sgt_append.sgt;
            (
                sgt.sgl,
                sgt.orig_nents,
                (*umem).address & (crate::page::PAGE_SIZE - 1),
            )
        };
        // Position in the scatterlist's bytes.
        let mut skip = first.checked_add(offset).ok_or(EINVAL)?;
        let mut done = 0usize;
        let mut n = 0;
        while done < len && !sg.is_null() && n < nents {
            // SAFETY: `sg` is an entry of the umem's table (at most `orig_nents` of them).
            let (page, sg_off, sg_len) = unsafe {
                (
                    bindings::sg_page(sg),
                    (*sg).offset as usize,
                    (*sg).length as usize,
                )
            };
            if skip >= sg_len {
                skip -= sg_len;
            } else {
                let mut pos = sg_off + skip;
                let mut left = sg_len - skip;
                while left > 0 && done < len {
                    let in_page = pos % crate::page::PAGE_SIZE;
                    let chunk = (crate::page::PAGE_SIZE - in_page).min(left).min(len - done);
                    // SAFETY: The entry's pages are contiguous `struct page`s of pinned memory;
                    // the one holding byte `pos` of the entry is mapped for the copy and
                    // unmapped right after.
                    unsafe {
                        let p = page.add(pos / crate::page::PAGE_SIZE);
                        let va = bindings::kmap_local_page(p).cast::<u8>();
                        f(va.add(in_page), done..done + chunk);
                        bindings::kunmap_local(va.cast());
                    }
                    done += chunk;
                    pos += chunk;
                    left -= chunk;
                }
                skip = 0;
            }
            // SAFETY: `sg` is a valid entry; `sg_next` follows chained tables.
            sg = unsafe { bindings::sg_next(sg) };
            n += 1;
        }
        if done == len {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}
