// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`): one per open of the device by a user process.

use crate::{
    bindings,
    rdma::{
        device::Device,
        driver::Driver, //
    },
    types::Opaque, //
};
use core::ops::Deref;

/// A user context of driver `T`: the core's `struct ib_ucontext` followed by the driver's data.
///
/// The core allocates it with the size of `Self` (`size_ib_ucontext`), calls `alloc_ucontext`,
/// which initialises `data`, and `dealloc_ucontext`, which drops it, before freeing it.
///
/// # Invariants
///
/// `ibuc` is at offset 0; `data` is initialised between `alloc_ucontext` returning success and
/// `dealloc_ucontext`, the only window in which a `&UContext<T>` is handed out.
#[repr(C)]
pub struct UContext<T: Driver> {
    ibuc: Opaque<bindings::ib_ucontext>,
    data: T::UContext,
}

impl<T: Driver> Deref for UContext<T> {
    type Target = T::UContext;

    fn deref(&self) -> &T::UContext {
        &self.data
    }
}

impl<T: Driver> UContext<T> {
    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.ibuc.get()
    }

    /// Returns the device this context belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: A context never outlives its device, which is of driver `T` since the core
        // sized this context from `T`'s ops.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a context of driver `T` whose data is initialised for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_ucontext) -> &'a Self {
        // SAFETY: `ibuc` is the first field of the `repr(C)` container.
        unsafe { &*ptr.cast() }
    }

    /// Returns a pointer to the data field of the context at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to an allocation of the size of `Self`.
    pub(crate) unsafe fn data_ptr(ptr: *mut bindings::ib_ucontext) -> *mut T::UContext {
        // SAFETY: The caller guarantees the allocation covers `Self`.
        unsafe { &raw mut (*ptr.cast::<Self>()).data }
    }
}
