// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        udata::UData, //
    },
};

core_object!(
    /// A protection domain (`struct ib_pd`).
    Pd,
    ib_pd,
    Pd
);

/// The verbs of a protection domain, implemented by the driver's data for one.
#[vtable]
pub trait PdOps: Send + Sync + Sized {
    /// The driver whose domains these are.
    type Driver: Driver<Pd = Self>;

    /// Creates the driver's data for a new protection domain.
    ///
    /// The core drops it when the domain is destroyed, after every object in it.
    fn alloc(_dev: &Device<Self::Driver>, _udata: &mut UData<'_, Self::Driver>) -> Result<Self> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The `alloc_pd` op.
///
/// # Safety
///
/// `ibpd` is a domain the core allocated with `size_ib_pd` of driver `T` (zeroed past the C
/// part) with `device` set, not yet visible to anyone; `udata` is null (a kernel caller) or
/// the call's udata, valid for the call.
pub(crate) unsafe extern "C" fn alloc_pd<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device and the udata.
    let (dev, mut udata) = unsafe { (Pd::<T>::device_of(ibpd), UData::from_raw(udata)) };
    match T::Pd::alloc(dev, &mut udata) {
        Ok(data) => {
            // SAFETY: The container's data field is valid for writes and uninitialised.
            unsafe { Pd::<T>::data_ptr(ibpd).write(data) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `dealloc_pd` op.
///
/// # Safety
///
/// `ibpd` is a domain of driver `T` for which [`alloc_pd`] succeeded; the core calls this
/// once, after the last object in the domain is destroyed, and frees the memory after.
pub(crate) unsafe extern "C" fn dealloc_pd<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the data is initialised and used no more.
    unsafe { core::ptr::drop_in_place(Pd::<T>::data_ptr(ibpd)) };
    0
}
