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
        pd::Pd,
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

impl<T: Driver> Srq<T> {
    /// Returns whether the shared receive queue is in protection domain `pd`.
    pub fn is_in(&self, pd: &Pd<T>) -> bool {
        // SAFETY: `self` is live (type invariant); the core sets `pd` before the create op and
        // never changes it.
        let own = unsafe { (*self.as_raw()).pd };
        core::ptr::eq(own, pd.as_raw())
    }
}

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
    /// Reads the fields `mask` selects of the caller's attributes; the others are 0.
    ///
    /// # Safety
    ///
    /// `a` must be valid for reads of the fields `mask` selects, which must be initialised
    /// (callers of `modify_srq` set only those).
    unsafe fn read_masked(a: *const bindings::ib_srq_attr, mask: SrqAttrMask) -> Self {
        let mut r = Self::default();
        // SAFETY: The caller guarantees the selected fields; no other field is read.
        unsafe {
            if mask.contains(SrqAttrMask::MAX_WR) {
                r.max_wr = (&raw const (*a).max_wr).read();
            }
            if mask.contains(SrqAttrMask::LIMIT) {
                r.srq_limit = (&raw const (*a).srq_limit).read();
            }
        }
        r
    }

    /// Writes every field into the caller's attributes, reading nothing.
    ///
    /// # Safety
    ///
    /// `a` must be valid for writes (it may be uninitialised).
    unsafe fn write_to(self, a: *mut bindings::ib_srq_attr) {
        // SAFETY: The caller guarantees validity for writes; whole fields are written.
        unsafe {
            (&raw mut (*a).max_wr).write(self.max_wr);
            (&raw mut (*a).max_sge).write(self.max_sge);
            (&raw mut (*a).srq_limit).write(self.srq_limit);
        }
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

    /// Resizes the queue or arms its limit, as `mask` selects (the other fields of `attr`
    /// are 0: the caller did not set them).
    fn modify(
        _srq: &Srq<Self::Driver>,
        _attr: &SrqAttr,
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
    // SAFETY: The caller guarantees the container's layout, the device, the attributes
    // (callers of `ib_create_srq` set all three numbers) and the udata.
    let (dev, srq_type, mut attr, mut udata) = unsafe {
        (
            Srq::<T>::device_of(ibsrq),
            (*init).srq_type,
            SrqAttr::read_masked(&raw const (*init).attr, SrqAttrMask::ALL),
            UData::from_bundle(udata),
        )
    };
    // `read_masked` reads `max_wr` and `srq_limit`; creation also gives `max_sge`.
    // SAFETY: As above.
    attr.max_sge = unsafe { (&raw const (*init).attr.max_sge).read() };
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
            unsafe { attr.write_to(&raw mut (*init).attr) };
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
/// `ibsrq` is a live queue of driver `T`; `attr` is valid for reads for the call, with the
/// fields `mask` selects initialised (uverbs sets only those); `udata` is null or the
/// `driver_udata` of the call's bundle.
pub(crate) unsafe extern "C" fn modify_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> c_int {
    let mask = SrqAttrMask::from_bits_retain(mask);
    // SAFETY: The caller guarantees the queue is live, the selected attributes and the udata.
    let (srq, a, mut udata) = unsafe {
        (
            Srq::<T>::from_raw(ibsrq),
            SrqAttr::read_masked(attr, mask),
            UData::from_bundle(udata),
        )
    };
    // Nothing is written back: no caller reads the attributes after `modify_srq`.
    match T::Srq::modify(srq, &a, mask, &mut udata) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `query_srq` op.
///
/// # Safety
///
/// `ibsrq` is a live queue of driver `T`; `attr` is valid for writes for the call, and may be
/// uninitialised (uverbs passes a stack variable).
pub(crate) unsafe extern "C" fn query_srq<T: Driver>(
    ibsrq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    // SAFETY: The caller guarantees the queue is live.
    match T::Srq::query(unsafe { Srq::<T>::from_raw(ibsrq) }) {
        Ok(a) => {
            // SAFETY: The caller guarantees `attr` valid for writes; nothing is read.
            unsafe { a.write_to(attr) };
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
