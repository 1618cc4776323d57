// SPDX-License-Identifier: GPL-2.0

//! User memory registered for on-demand paging (`struct ib_umem_odp`).
//!
//! C header: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h)
//!
//! Nothing is pinned: the process keeps its memory, the kernel may move, swap out or free its
//! pages, and an MMU notifier tells the umem before it does. A software device copies with the
//! CPU from any context, the packet path's softirqs included, so this keeps its own table of
//! the pages present, under a spinlock that the notifier takes before a page may go: a copy
//! either finds a page and uses it under the lock, or finds none and reports it, and the
//! caller faults the range in later, from process context ([`OdpUmem::fault`]).

use crate::page::PAGE_SIZE;
use crate::{
    alloc::flags::__GFP_NOWARN,
    append::Append,
    bindings,
    error::from_err_ptr,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        mr::AccessFlags,
        udata::UData,
        umem::piece_from, //
    },
    sync::{
        Mutex,
        SpinLockIrq, //
    },
};
use core::ptr::NonNull;

/// A shadow entry's bit: the process's mapping of the page is writable.
const WRITABLE: usize = 1;
/// A shadow entry's bit: the device wrote into the page (marked dirty when it goes).
const DIRTY: usize = 2;
/// A shadow entry's flag bits; the rest is the `struct page` pointer (aligned to far more).
const FLAGS: usize = WRITABLE | DIRTY;

/// The `HMM_PFN_VALID` bit of an entry of the umem's pfn list.
const HMM_PFN_VALID: c_ulong = 1 << (c_ulong::BITS - 1);
/// The `HMM_PFN_WRITE` bit of an entry of the umem's pfn list.
const HMM_PFN_WRITE: c_ulong = 1 << (c_ulong::BITS - 2);

/// The pages of an ODP umem that the device may use now.
///
/// # Invariants
///
/// A non-zero entry `i` of `pages` is the `struct page` pointer, plus [`FLAGS`], of the page
/// mapped at the umem's page `i` when a fault last found it, and no invalidation of that page
/// has completed since: the notifier clears the entry, under the lock, before it returns and
/// the page may be freed. `pages` has one entry per page of the umem and never grows.
#[pin_data]
struct Shadow {
    #[pin]
    pages: SpinLockIrq<KVVec<usize>>,
    /// Serialises [`OdpUmem::fault`]: the core's `ib_umem_odp_map_dma_and_lock` fills the pfn
    /// list outside `umem_mutex`, so two faults on one umem could race on it.
    #[pin]
    faults: Mutex<()>,
}

/// A range of a process's memory, registered for on-demand paging, until dropped.
///
/// Dropping it sleeps (it takes the core's `umem_mutex` and removes the notifier): only in
/// process context.
///
/// # Invariants
///
/// `odp` came from `ib_umem_odp_get` with [`NOTIFIER_OPS`], is not implicit, uses pages of
/// `PAGE_SIZE`, and is owned by us; its `private` points to `shadow`, which lives until `odp`
/// is released (releasing removes the notifier, waiting for a running callback). `start` is
/// `ib_umem_start`, `first` the offset of the range's first byte from it, `len` its length.
pub struct OdpUmem {
    odp: NonNull<bindings::ib_umem_odp>,
    shadow: Pin<KBox<Shadow>>,
    start: usize,
    first: usize,
    len: usize,
}

// SAFETY: The umem may be released from any thread; its state is reached through the core's
// mutex and the shadow's lock.
unsafe impl Send for OdpUmem {}
// SAFETY: `&OdpUmem` reads fields fixed at creation, copies under the shadow's lock, and
// faults under its own mutex and the core's `umem_mutex`.
unsafe impl Sync for OdpUmem {}

/// The notifier of every [`OdpUmem`].
static NOTIFIER_OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
    invalidate_start: None,
    invalidate_finish: None,
};

/// Forgets the pages of `range` (the kernel is about to unmap them) that `mni`'s umem has.
///
/// # Safety
///
/// Called by the MMU notifier code for the notifier of an [`OdpUmem`].
unsafe extern "C" fn invalidate(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: c_ulong,
) -> bool {
    // SAFETY: The notifier code passes a valid range.
    if !unsafe { bindings::mmu_notifier_range_blockable(range) } {
        // The core's umem_mutex may sleep; the caller (the OOM reaper) skips this range.
        return false;
    }
    // SAFETY: `mni` is the `notifier` field of an `ib_umem_odp` (the function's contract).
    let odp = unsafe { crate::container_of!(mni, bindings::ib_umem_odp, notifier) };
    // SAFETY: `odp` is valid while its notifier is registered; `umem_mutex` was initialised by
    // `ib_umem_odp_get`.
    unsafe {
        bindings::mutex_lock(&raw mut (*odp).umem_mutex);
        bindings::mmu_interval_set_seq(mni, cur_seq);
        clear(odp, (*range).start, (*range).end);
        bindings::ib_umem_odp_unmap_dma_pages(odp, (*range).start as u64, (*range).end as u64);
        bindings::mutex_unlock(&raw mut (*odp).umem_mutex);
    }
    true
}

/// Entries [`OdpUmem::fault`] records per hold of the shadow's lock.
const FAULT_BATCH: usize = 256;

/// Pages marked dirty per batch by [`clear`], outside the shadow's lock.
const DIRTY_BATCH: usize = 32;

/// Clears the shadow entries of the pages of `odp` in user addresses `from..to`, then marks
/// those the device wrote dirty.
///
/// # Safety
///
/// `odp` is the umem of an [`OdpUmem`], and the caller holds its `umem_mutex`.
unsafe fn clear(odp: *mut bindings::ib_umem_odp, from: usize, to: usize) {
    // SAFETY: `odp` is valid and its `umem_mutex` held (the function's contract).
    let shadow = unsafe { (*odp).private.cast::<Shadow>() };
    if shadow.is_null() {
        // An invalidation between `ib_umem_odp_get` and `OdpUmem::get` setting `private`:
        // nothing was recorded yet.
        return;
    }
    // SAFETY: A non-null `private` is the shadow, alive while the umem is.
    let shadow = unsafe { &*shadow };
    // SAFETY: `odp` is valid; the interval is fixed at creation (`last` is inclusive).
    let (start, end) = unsafe {
        let t = &(*odp).notifier.interval_tree;
        (t.start, t.last + 1)
    };
    let from = from.max(start);
    let to = to.min(end);
    if from >= to {
        return;
    }
    let mut i = (from - start) / PAGE_SIZE;
    let last = (to - start).div_ceil(PAGE_SIZE);
    while i < last {
        let mut batch = [core::ptr::null_mut::<bindings::page>(); DIRTY_BATCH];
        let mut n = 0;
        {
            let mut pages = shadow.pages.lock();
            while i < last && n < DIRTY_BATCH {
                let Some(e) = pages.get_mut(i) else {
                    i = last;
                    break;
                };
                let entry = core::mem::replace(e, 0);
                if entry & DIRTY != 0 {
                    batch[n] = (entry & !FLAGS) as *mut bindings::page;
                    n += 1;
                }
                i += 1;
            }
        }
        // Outside the spinlock: dirtying a file's folio takes locks that are not softirq-safe
        // and may enable interrupts (`__mark_inode_dirty`).
        for &page in &batch[..n] {
            // SAFETY: The page was mapped in the range when its entry was cleared, and stays
            // so while `umem_mutex` is held: an invalidation of it cannot complete before (the
            // notifier takes the mutex), nor can the mm free it before the invalidation ends.
            unsafe { bindings::set_page_dirty(page) };
        }
    }
}

impl OdpUmem {
    /// Registers `len` bytes at user address `addr` of the calling process for on-demand
    /// paging with `access` (`IB_ACCESS_*`, with `ON_DEMAND`), and takes note of the pages
    /// present now without faulting any in.
    ///
    /// Fails with `EINVAL` outside a uverbs system call (the umem follows `current->mm`) or for
    /// an implicit range (address 0, length `u64::MAX`), and with `EOPNOTSUPP` for
    /// `HUGETLB`.
    pub fn get<T: Driver>(
        dev: &Device<T>,
        udata: &UData<'_, T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        if !udata.is_uverbs_call() || !access.contains(AccessFlags::ON_DEMAND) {
            return Err(EINVAL);
        }
        if access.contains(AccessFlags::HUGETLB) {
            return Err(EOPNOTSUPP);
        }
        if addr == 0 && len == u64::MAX {
            return Err(EINVAL);
        }
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let first = addr % PAGE_SIZE;
        let npages = first
            .checked_add(len)
            .ok_or(EINVAL)?
            .div_ceil(PAGE_SIZE)
            .max(1);
        // Allocated before the umem: nothing allocates under `umem_mutex`, which the notifier
        // takes in reclaim.
        // No warning for a size user space chose: the core's own table of the range is
        // allocated so too.
        let mut entries = KVVec::with_capacity(npages, GFP_KERNEL | __GFP_NOWARN)?;
        entries.resize(npages, 0, GFP_KERNEL | __GFP_NOWARN)?;
        let shadow = KBox::pin_init(
            try_pin_init!(Shadow {
                pages <- crate::new_spinlock_irq!(entries),
                faults <- crate::new_mutex!(()),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The device is valid; `NOTIFIER_OPS` is static.
        let odp = from_err_ptr(unsafe {
            bindings::ib_umem_odp_get(
                dev.as_raw(),
                addr as c_ulong,
                len,
                access.bits() as c_int,
                &NOTIFIER_OPS,
            )
        })?;
        let odp = NonNull::new(odp).ok_or(ENOMEM)?;
        // SAFETY: `odp` is a new umem: the interval is fixed; `private` is ours, set under
        // `umem_mutex` since the notifier may already run.
        let start = unsafe {
            let o = odp.as_ptr();
            bindings::mutex_lock(&raw mut (*o).umem_mutex);
            (*o).private = core::ptr::from_ref::<Shadow>(&*shadow).cast_mut().cast();
            bindings::mutex_unlock(&raw mut (*o).umem_mutex);
            (*o).notifier.interval_tree.start as usize
        };
        // INVARIANT: `odp` is ours, made with `NOTIFIER_OPS` and `PAGE_SIZE` pages (no
        // HUGETLB); the shadow has one entry per page, all empty.
        let this = Self {
            odp,
            shadow,
            start,
            first: addr - start,
            len,
        };
        // As the C driver: note what is present, fault nothing in.
        if len > 0 {
            this.fault(0, len, false, true)?;
        }
        Ok(this)
    }

    /// Returns the length of the range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns whether the process registered the range for writing (`ib_umem->writable`).
    pub fn is_writable(&self) -> bool {
        // SAFETY: The umem is valid; `writable` is fixed at creation.
        unsafe { (*self.odp.as_ptr()).umem.writable() != 0 }
    }

    /// Makes bytes `offset..offset + len` of the range present for the device, for writing
    /// if `write`: faults the pages in (unless `snapshot`, which only takes note of those
    /// present), then records them. May sleep.
    ///
    /// Fails with `EINVAL` outside the range, with `EACCES` for `write` on a range
    /// registered read-only, with the fault's error (`EFAULT` for memory the process has not
    /// mapped, `EPERM` for a write to memory it may not write), and with `EFAULT` if a page of
    /// the span is not present when the fault returns (it was invalidated at once): the
    /// caller may try again. Must not be called under a spinlock, `mmap_lock`, or from a
    /// reclaim workqueue.
    pub fn fault(&self, offset: usize, len: usize, write: bool, snapshot: bool) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len || len == 0 {
            return Err(EINVAL);
        }
        if write && !self.is_writable() {
            return Err(EACCES);
        }
        let va = self.start + self.first + offset;
        let _serial = self.shadow.faults.lock();
        let mask = if write { HMM_PFN_WRITE as u64 } else { 0 };
        let o = self.odp.as_ptr();
        // SAFETY: The umem is valid and `va..va + len` is inside it; on success the call
        // returns with `umem_mutex` held.
        let n = unsafe {
            bindings::ib_umem_odp_map_dma_and_lock(o, va as u64, len as u64, mask, !snapshot)
        };
        if n < 0 {
            return Err(Error::from_errno(n));
        }
        let from = (va - self.start) / PAGE_SIZE;
        let to = (va + len - self.start).div_ceil(PAGE_SIZE);
        let mut missing = false;
        let mut next = from;
        while next < to {
            // In batches: the lock keeps interrupts off, and a range may have millions of
            // pages. Nothing else changes the entries meanwhile: `umem_mutex` is held.
            let batch = next..to.min(next.saturating_add(FAULT_BATCH));
            next = batch.end;
            let mut pages = self.shadow.pages.lock();
            for i in batch {
                // SAFETY: `umem_mutex` is held and no invalidation ran since the fault's
                // sequence (the core checked it): the pfn list, one entry per page, holds
                // what the fault found; a valid entry names a mapped page.
                let pfn = unsafe { *(*o).map.pfn_list.add(i) };
                let Some(e) = pages.get_mut(i) else {
                    missing = true;
                    break;
                };
                if pfn & HMM_PFN_VALID == 0 {
                    missing = true;
                    continue;
                }
                // SAFETY: The entry is valid (above).
                let page = unsafe { bindings::hmm_pfn_to_page(pfn) } as usize;
                let w = if pfn & HMM_PFN_WRITE != 0 {
                    WRITABLE
                } else {
                    0
                };
                // INVARIANT: The page is mapped at page `i` now; the notifier clears the
                // entry under this lock before it goes. A write already recorded for the
                // same page stays recorded.
                let dirty = if *e & !FLAGS == page { *e & DIRTY } else { 0 };
                *e = page | w | dirty;
                if write && w == 0 {
                    missing = true;
                }
            }
        }
        // SAFETY: Held since the successful call above.
        unsafe { bindings::mutex_unlock(&raw mut (*o).umem_mutex) };
        if missing && !snapshot {
            return Err(EFAULT);
        }
        Ok(())
    }

    /// Returns whether every page of bytes `offset..offset + len` of the range is present,
    /// and writable if `write`: a copy of them now would find them. Does not sleep.
    ///
    /// A page may go right after this returns: the copy itself still checks.
    pub fn is_present(&self, offset: usize, len: usize, write: bool) -> bool {
        let Some(end) = offset.checked_add(len) else {
            return false;
        };
        if end > self.len {
            return false;
        }
        if len == 0 {
            return true;
        }
        let from = (self.first + offset) / PAGE_SIZE;
        let to = (self.first + end).div_ceil(PAGE_SIZE);
        let pages = self.shadow.pages.lock();
        pages.get(from..to).is_some_and(|span| {
            span.iter()
                .all(|&e| e != 0 && (!write || e & WRITABLE != 0))
        })
    }

    /// Appends to `dst` the `len` bytes from byte `offset` of the range, if their pages are
    /// present. Does not sleep.
    ///
    /// Fails with `EINVAL` outside the range or if the bytes do not fit in `dst` (appending
    /// nothing), and with `EAGAIN` if a page of the span is not present ([`OdpUmem::fault`]
    /// it in, then try again), having appended a prefix of the bytes. The process may write
    /// the same memory at the same time: its bytes are plain data.
    pub fn read_to(&self, offset: usize, len: usize, dst: &mut (impl Append + ?Sized)) -> Result {
        if dst.room() < len {
            return Err(EINVAL);
        }
        let mut appended = Ok(());
        self.for_each_piece(offset, len, false, |va, range| {
            // SAFETY: `va` maps the piece's bytes of a present page (the callback's contract),
            // a page of the process's, which no buffer of the kernel's lies in.
            let r = unsafe { dst.append_raw(va, range.len()) };
            // It fits, as the whole span does (checked), unless `dst` miscounts its room.
            appended = appended.and(r);
        })?;
        appended
    }

    /// Copies `src` to byte `offset` of the range, if its pages are present and writable.
    /// Does not sleep.
    ///
    /// Fails with `EINVAL` outside the range, with `EACCES` for a range registered
    /// read-only, and with `EAGAIN` if a page of the span is not present or not writable
    /// ([`OdpUmem::fault`] it in for writing, then try again); then a prefix may have been
    /// written. The process may access the same memory at the same time: its bytes are plain
    /// data.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        if !self.is_writable() {
            return Err(EACCES);
        }
        self.for_each_piece(offset, src.len(), true, |va, range| {
            // SAFETY: `va` maps the piece's bytes of a present, writable page (the callback's
            // contract).
            unsafe { piece_from(src, va, range) }
        })
    }

    /// Calls `f(va, range)`, under the shadow's lock, for each piece of bytes
    /// `offset..offset + len` of the range that lies in one page: `va` is that page's bytes,
    /// mapped for the call only, and `range` the piece's place in the span. With `write`,
    /// the pages must be writable, and are recorded as written.
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        write: bool,
        mut f: impl FnMut(*mut u8, core::ops::Range<usize>),
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // Position from the first page's start; fits, as the range does.
        let mut pos = self.first + offset;
        let mut done = 0usize;
        let mut pages = self.shadow.pages.lock();
        while done < len {
            let in_page = pos % PAGE_SIZE;
            let chunk = (PAGE_SIZE - in_page).min(len - done);
            let e = pages.get_mut(pos / PAGE_SIZE).ok_or(EINVAL)?;
            if *e == 0 || (write && *e & WRITABLE == 0) {
                return Err(EAGAIN);
            }
            if write {
                *e |= DIRTY;
            }
            let page = (*e & !FLAGS) as *mut bindings::page;
            // SAFETY: `page` is mapped in the range, and stays so while the lock is held
            // (type invariant of `Shadow`); it is mapped for the call and unmapped right
            // after; `chunk` bytes from `in_page` are inside it.
            unsafe {
                let va = bindings::kmap_local_page(page).cast::<u8>();
                f(va.add(in_page), done..done + chunk);
                bindings::kunmap_local(va.cast());
            }
            done += chunk;
            pos += chunk;
        }
        Ok(())
    }
}

impl Drop for OdpUmem {
    fn drop(&mut self) {
        let o = self.odp.as_ptr();
        // SAFETY: By the type invariant we own the umem and `private` is the shadow. The
        // pages written go dirty first; releasing removes the notifier, waiting for a
        // running callback, before the shadow is freed after this.
        unsafe {
            bindings::mutex_lock(&raw mut (*o).umem_mutex);
            clear(o, self.start, usize::MAX);
            bindings::mutex_unlock(&raw mut (*o).umem_mutex);
            bindings::ib_umem_odp_release(o);
        }
    }
}
