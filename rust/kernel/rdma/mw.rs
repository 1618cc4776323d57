// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        pd::Pd,
        udata::UData, //
    },
};

core_object!(
    /// A memory window (`struct ib_mw`).
    Mw,
    ib_mw,
    Mw
);

c_enum! {
    /// The type of a memory window (`enum ib_mw_type`).
    pub enum MwType: u32 {
        /// Type 1: bound by the `bind_mw` verb, to a domain.
        Type1 = bindings::ib_mw_type_IB_MW_TYPE_1,
        /// Type 2: bound by a work request, to a queue pair.
        Type2 = bindings::ib_mw_type_IB_MW_TYPE_2,
    }
}

/// A new memory window's data, as [`MwOps::alloc`] returns it.
pub struct NewMw<D> {
    /// The driver's data.
    pub data: D,
    /// The window's R_Key.
    pub rkey: u32,
}

/// The verbs of a memory window, implemented by the driver's data for one.
#[vtable]
pub trait MwOps: Send + Sync + Sized {
    /// The driver whose windows these are.
    type Driver: Driver<Mw = Self>;

    /// Creates the driver's data of a memory window of type `mw_type` in domain `pd`.
    fn alloc(
        _dev: &Device<Self::Driver>,
        _pd: &Pd<Self::Driver>,
        _mw_type: MwType,
        _udata: &mut UData<'_, Self::Driver>,
    ) -> Result<NewMw<Self>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The `alloc_mw` op.
///
/// # Safety
///
/// `ibmw` is a window the core allocated with `size_ib_mw` of driver `T` (zeroed past the C
/// part) with `device`, `pd` and `type` set, not yet visible to anyone; `udata` is the call's
/// udata.
pub(crate) unsafe extern "C" fn alloc_mw<T: Driver>(
    ibmw: *mut bindings::ib_mw,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device, the domain (a domain
    // of driver `T`, which the core holds for the call), the type and the udata.
    let (dev, pd, mw_type, mut udata) = unsafe {
        (
            Mw::<T>::device_of(ibmw),
            Pd::<T>::from_raw((*ibmw).pd),
            (*ibmw).type_,
            UData::from_raw(udata),
        )
    };
    let Some(mw_type) = MwType::from_raw(mw_type) else {
        return EINVAL.to_errno();
    };
    match T::Mw::alloc(dev, pd, mw_type, &mut udata) {
        Ok(new) => {
            // SAFETY: The container's data field is valid for writes and uninitialised; the
            // window is not visible to anyone yet.
            unsafe {
                Mw::<T>::data_ptr(ibmw).write(new.data);
                (*ibmw).rkey = new.rkey;
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `dealloc_mw` op.
///
/// # Safety
///
/// `ibmw` is a window of driver `T` for which [`alloc_mw`] succeeded; the core calls this
/// once and frees the memory after.
pub(crate) unsafe extern "C" fn dealloc_mw<T: Driver>(ibmw: *mut bindings::ib_mw) -> c_int {
    // SAFETY: The caller guarantees the data is initialised and used no more.
    unsafe { core::ptr::drop_in_place(Mw::<T>::data_ptr(ibmw)) };
    0
}
