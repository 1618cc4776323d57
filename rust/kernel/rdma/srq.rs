// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        event::SrqHandle,
        udata::UData,
        wr::RecvWr, //
    },
};

core_object!(
    /// A shared receive queue (`struct ib_srq`).
    Srq,
    ib_srq,
    Srq,
    SrqHandle
);

c_enum! {
    /// The type of a shared receive queue (`enum ib_srq_type`).
    pub enum SrqType: u32 {
        /// A basic shared receive queue.
        Basic = bindings::ib_srq_type_IB_SRQT_BASIC,
        /// An XRC shared receive queue.
        Xrc = bindings::ib_srq_type_IB_SRQT_XRC,
        /// A tag-matching shared receive queue.
        Tm = bindings::ib_srq_type_IB_SRQT_TM,
    }
}

c_flags! {
    /// What `modify_srq` changes (`enum ib_srq_attr_mask`).
    pub struct SrqAttrMask: u32 {
        /// Resize to [`SrqAttr::max_wr`].
        const MAX_WR = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
        /// Arm the limit event at [`SrqAttr::srq_limit`].
        const LIMIT = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
    }
}

/// The attributes of a shared receive queue (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttr {
    /// The number of work requests it holds.
    pub max_wr: u32,
    /// The number of scatter entries per work request.
    pub max_sge: u32,
    /// The fill level below which the limit event fires (0: not armed).
    pub srq_limit: u32,
}

impl SrqAttr {
    fn from_c(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn to_c(self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// The verbs of a shared receive queue, implemented by the driver's data for one.
#[vtable]
pub trait SrqOps: Send + Sync + Sized {
    /// The driver whose queues these are.
    type Driver: Driver<Srq = Self>;

    /// Creates the driver's data of a shared receive queue of `srq_type`.
    ///
    /// Writes the capacity really given into `attr`, which the core reports.
    fn create(
        dev: &Device<Self::Driver>,
        srq_type: SrqType,
        attr: &mut SrqAttr,
        handle: SrqHandle,
        udata: &mut UData<'_, Self::Driver>,
    ) -> Result<impl PinInit<Self, Error>>;

    /// Posts one receive work request of a kernel consumer.
    fn post_recv(_srq: &Srq<Self::Driver>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resizes the queue or arms its limit, as `mask` selects; writes the new capacity into
    /// `attr` after a resize.
    fn modify(
        _srq: &Srq<Self::Driver>,
        _attr: &mut SrqAttr,
        _mask: SrqAttrMask,
        _udata: &mut UData<'_, Self::Driver>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the attributes of the queue.
    fn query(_srq: &Srq<Self::Driver>) -> Result<SrqAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The `create_srq` op.
///
/// # Safety
///
/// `ibsrq` is a queue the core allocated with `size_ib_srq` of driver `T` (zeroed past the C
/// part) with `device` set, not yet visible to anyone, and freed by the core only after
/// [`destroy_srq`] or after this op fails; `init` is valid for reads and writes for the call;
/// `udata` is null or the `driver_udata` of the call's bundle.
pub(crate) unsafe extern "C" fn create_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device, the attributes and
    // the udata.
    let (dev, srq_type, mut attr, mut udata) = unsafe {
        (
            Srq::<T>::device_of(ibsrq),
            (*init).srq_type,
            SrqAttr::from_c(&(*init).attr),
            UData::from_bundle(udata),
        )
    };
    let Some(srq_type) = SrqType::from_raw(srq_type) else {
        return EOPNOTSUPP.to_errno();
    };
    // SAFETY: The caller guarantees the core frees the queue only after `destroy_srq` or after
    // this op fails, and both drop the handle.
    let handle = match unsafe { Srq::<T>::init_handle(ibsrq) } {
        Ok(h) => h,
        Err(e) => return e.to_errno(),
    };
    let ret = T::Srq::create(dev, srq_type, &mut attr, handle, &mut udata).and_then(|data| {
        // SAFETY: The container's data field is valid for writes, uninitialised, and never
        // moves; the queue is not visible to anyone yet.
        unsafe { data.__pinned_init(Srq::<T>::data_ptr(ibsrq)) }
    });
    match ret {
        Ok(()) => {
            // SAFETY: The caller guarantees `init` valid for writes.
            attr.to_c(unsafe { &mut (*init).attr });
            0
        }
        Err(e) => {
            // SAFETY: `init_handle` succeeded; the core frees the object next.
            unsafe { Srq::<T>::drop_handle(ibsrq) };
            e.to_errno()
        }
    }
}

/// The `destroy_srq` op.
///
/// # Safety
///
/// `ibsrq` is a queue of driver `T` for which [`create_srq`] succeeded and that no queue pair
/// uses any more; the core calls this once and frees the memory after.
pub(crate) unsafe extern "C" fn destroy_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the handle and data are initialised and used no more by
    // the core. The handle goes first, so that no event reaches the queue through it.
    unsafe {
        Srq::<T>::drop_handle(ibsrq);
        core::ptr::drop_in_place(Srq::<T>::data_ptr(ibsrq));
    }
    0
}

/// The `modify_srq` op.
///
/// # Safety
///
/// `ibsrq` is a live queue of driver `T`; `attr` is valid for reads and writes for the call,
/// with the fields `mask` selects set; `udata` is null or the `driver_udata` of the call's
/// bundle.
pub(crate) unsafe extern "C" fn modify_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the queue is live, the attributes and the udata valid.
    let (srq, mut a, mut udata) = unsafe {
        (
            Srq::<T>::from_raw(ibsrq),
            SrqAttr::from_c(&*attr),
            UData::from_bundle(udata),
        )
    };
    match T::Srq::modify(srq, &mut a, SrqAttrMask::from_bits_retain(mask), &mut udata) {
        Ok(()) => {
            // SAFETY: The caller guarantees `attr` valid for writes.
            a.to_c(unsafe { &mut *attr });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `query_srq` op.
///
/// # Safety
///
/// `ibsrq` is a live queue of driver `T`; `attr` is valid for writes for the call.
pub(crate) unsafe extern "C" fn query_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    // SAFETY: The caller guarantees the queue is live.
    match T::Srq::query(unsafe { Srq::<T>::from_raw(ibsrq) }) {
        Ok(a) => {
            // SAFETY: The caller guarantees `attr` valid for writes; the fields written are
            // plain numbers, and `ib_query_srq` callers pass an initialised structure.
            a.to_c(unsafe { &mut *attr });
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `post_srq_recv` op.
///
/// # Safety
///
/// `ibsrq` is a live queue of driver `T`; `wr` is a valid list of requests of a kernel
/// consumer for the call, and `bad_wr` null or valid for writes. The op may run in any
/// context, interrupts off included.
pub(crate) unsafe extern "C" fn post_srq_recv<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    if !T::Srq::HAS_POST_RECV {
        if !bad_wr.is_null() {
            // SAFETY: The caller guarantees `bad_wr` valid for writes.
            unsafe { bad_wr.write(wr) };
        }
        return EOPNOTSUPP.to_errno();
    }
    // SAFETY: The caller guarantees the queue is live, the list and `bad_wr` valid.
    unsafe {
        let srq = Srq::<T>::from_raw(ibsrq);
        RecvWr::post_list(wr, bad_wr, |w| T::Srq::post_recv(srq, w))
    }
}
