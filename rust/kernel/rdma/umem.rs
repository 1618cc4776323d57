// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for device access (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use crate::{
    bindings,
    error::from_err_ptr,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver, //
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
    pub fn get<T: Driver>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
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
                access as c_int,
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
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem.
        unsafe { bindings::ib_umem_release(self.0.as_ptr()) };
    }
}
