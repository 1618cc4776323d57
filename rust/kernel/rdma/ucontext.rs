// SPDX-License-Identifier: GPL-2.0

//! User contexts: one per open of the device by a process (`struct ib_ucontext`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        mmap::MmapEntry,
        udata::UData, //
    },
};

core_object!(
    /// A user context (`struct ib_ucontext`): one per open of the device by a process.
    UContext,
    ib_ucontext,
    UContext
);

/// The verbs of a user context, implemented by the driver's data for one.
pub trait UContextOps: Send + Sync + Sized {
    /// The driver whose contexts these are.
    type Driver: Driver<UContext = Self>;

    /// Creates the driver's data for a new user context.
    fn alloc(dev: &Device<Self::Driver>, udata: &mut UData<'_, Self::Driver>) -> Result<Self>;
}

/// The `alloc_ucontext` op.
///
/// # Safety
///
/// `ibuc` is a context the core allocated with `size_ib_ucontext` of driver `T` (zeroed past
/// the C part) with `device` set, not yet visible to anyone; `udata` is null or the call's
/// udata, valid for the call.
pub(crate) unsafe extern "C" fn alloc_ucontext<T: Driver>(
    ibuc: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device and the udata.
    let (dev, mut udata) = unsafe { (UContext::<T>::device_of(ibuc), UData::from_raw(udata)) };
    match T::UContext::alloc(dev, &mut udata) {
        Ok(data) => {
            // SAFETY: The container's data field is valid for writes and uninitialised.
            unsafe { UContext::<T>::data_ptr(ibuc).write(data) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `dealloc_ucontext` op.
///
/// # Safety
///
/// `ibuc` is a context of driver `T` for which [`alloc_ucontext`] succeeded; the core calls
/// this once, after every object of the context is destroyed and the last system call on it
/// returned, and frees the memory after.
pub(crate) unsafe extern "C" fn dealloc_ucontext<T: Driver>(ibuc: *mut bindings::ib_ucontext) {
    // Offers that outlive their queue's destroy op (state the driver's worker still holds)
    // are withdrawn now: the core checks that none is left, and frees the context next.
    // SAFETY: This is `dealloc_ucontext` of a context of driver `T`, whose entries are all
    // made by `MmapEntry::new` (the only way this abstraction inserts one).
    unsafe { MmapEntry::withdraw_all(ibuc) };
    // SAFETY: The caller guarantees the data is initialised and used no more.
    unsafe { core::ptr::drop_in_place(UContext::<T>::data_ptr(ibuc)) };
}

/// The `disassociate_ucontext` op: a context whose device goes while a process still holds
/// it open.
///
/// With this op the RDMA core does not wait for the processes that opened a device before it
/// unregisters it (and does not pin the driver's module while they do): it destroys their
/// objects with the driver's own destroy ops, queues `IB_EVENT_DEVICE_FATAL` to each and
/// fails their later calls but destroys with `EIO`; then it calls this and
/// `dealloc_ucontext`. A device then goes whenever its link, netdevice or module goes, without
/// waiting for user space. Nothing is left to do here: every mapping a process has of a
/// device of this abstraction is of `vmalloc_user` pages ([`MmapEntry::mmap`]), which
/// `remap_vmalloc_range` inserts with page references of the mapping's own, so they outlive
/// the buffer's `vfree`; the core's `vm_ops` on such a mapping find no mapping data of theirs
/// and do nothing, and its file keeps only the core's module. A process that keeps them after
/// its device went sees memory the kernel no longer uses.
pub(crate) extern "C" fn disassociate_ucontext(_ibuc: *mut bindings::ib_ucontext) {}

/// The `mmap` op.
///
/// # Safety
///
/// `ibuc` is a live context of a device of this abstraction, and `vma` the area a process of it maps through
/// the device file, with the mm's lock held, for the call.
pub(crate) unsafe extern "C" fn mmap(
    ibuc: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: The caller guarantees these are the arguments of the core's `mmap` op.
    match unsafe { MmapEntry::mmap(ibuc, vma) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `mmap_free` op.
///
/// # Safety
///
/// `entry` is an entry of a context of a device of this abstraction whose last reference (the context's
/// table's or a mapping's) is gone; the core calls this once for it.
pub(crate) unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: The caller guarantees this is the argument of the core's `mmap_free` op.
    unsafe { MmapEntry::free(entry) };
}
