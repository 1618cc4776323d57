// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

pub mod attr;

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        event::QpHandle,
        pd::Pd,
        udata::UData,
        wr::{
            RecvWr,
            SendWr, //
        },
    },
};
use attr::{
    QpAttr,
    QpAttrMask,
    QpInitAttr,
    QpReport, //
};

core_object!(
    /// A queue pair (`struct ib_qp`).
    Qp,
    ib_qp,
    Qp,
    QpHandle
);

/// A new queue pair's data, as [`QpOps::create`] returns it.
pub struct NewQp<I> {
    /// The initialiser of the driver's data.
    pub init: I,
    /// The queue pair number.
    pub qpn: u32,
}

/// The verbs of a queue pair, implemented by the driver's data for one.
#[vtable]
pub trait QpOps: Send + Sync + Sized {
    /// The driver whose queue pairs these are.
    type Driver: Driver<Qp = Self>;

    /// Creates the driver's data of a queue pair as `init` describes, in `pd`.
    ///
    /// Writes the capabilities the queue pair really has into `init`.
    fn create(
        dev: &Device<Self::Driver>,
        pd: &Pd<Self::Driver>,
        init: &mut QpInitAttr,
        handle: QpHandle,
        udata: &mut UData<'_, Self::Driver>,
    ) -> Result<NewQp<impl PinInit<Self, Error>>>;

    /// Changes the attributes of a queue pair selected by the mask of `attr`.
    fn modify(
        qp: &Qp<Self::Driver>,
        attr: &QpAttr<'_>,
        udata: &mut UData<'_, Self::Driver>,
    ) -> Result;

    /// Reports the attributes (at least those in `mask`) and creation parameters.
    fn query(qp: &Qp<Self::Driver>, mask: QpAttrMask) -> Result<QpReport>;

    /// Stops the queue pair's work; the core then frees it.
    ///
    /// It cannot fail: the core also calls it when `create_qp` fails after the driver's part
    /// succeeded (its security setup), and frees the queue pair whatever it returns. What
    /// the core refuses itself (a queue pair still in use, attached to a multicast group) never
    /// reaches it.
    fn destroy(_qp: &Qp<Self::Driver>) {}

    /// Attaches a UD queue pair to the multicast group `mgid` (the core checked the type and
    /// that `mgid` is multicast; the LID is unused on RoCE).
    fn attach_mcast(_qp: &Qp<Self::Driver>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a queue pair from the multicast group `mgid`.
    fn detach_mcast(_qp: &Qp<Self::Driver>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts one send work request of a kernel consumer.
    fn post_send(_qp: &Qp<Self::Driver>, _wr: &SendWr<'_, Self::Driver>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Rings the send doorbell of a user queue pair (`post_send` with no work request): its
    /// process produced WQEs into the mapped send queue.
    fn post_send_doorbell(_qp: &Qp<Self::Driver>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts one receive work request of a kernel consumer.
    fn post_recv(_qp: &Qp<Self::Driver>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The `create_qp` op.
///
/// # Safety
///
/// `ibqp` is a queue pair the core allocated with `size_ib_qp` of driver `T` (zeroed past the
/// C part) with `device` and `pd` (a live domain of the same device) set, not yet visible to
/// anyone, and freed by the core only after [`destroy_qp`] or after this op fails; `init` is
/// valid for reads and writes for the call, its queues held by the core; `udata` is null or
/// the `driver_udata` of the call's bundle.
pub(crate) unsafe extern "C" fn create_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The core passes a queue pair allocated with `size_ib_qp` (our container)
    // whose `device` is set, its creation attributes (ours to update) and the call's
    // `driver_udata` or null.
    let (dev, pd, init, mut udata) = unsafe {
        (
            Qp::<T>::device_of(ibqp),
            // The core sets the domain, a live one of this device, before calling us.
            Pd::<T>::from_raw((*ibqp).pd),
            QpInitAttr::from_raw(init),
            UData::from_bundle(udata),
        )
    };
    // SAFETY: The core frees the queue pair only after `destroy_qp`, or after this op
    // fails, and both drop the handle.
    let handle = match unsafe { Qp::<T>::init_handle(ibqp) } {
        Ok(h) => h,
        Err(e) => return e.to_errno(),
    };
    let ret = T::Qp::create(dev, pd, init, handle, &mut udata).and_then(|new| {
        // SAFETY: The container's data field is valid for writes, uninitialised, and never
        // moves; the queue pair is not visible to anyone yet.
        unsafe {
            new.init.__pinned_init(Qp::<T>::data_ptr(ibqp))?;
            (*ibqp).qp_num = new.qpn;
        }
        Ok(())
    });
    match ret {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: `init_handle` succeeded; the core frees the object next.
            unsafe { Qp::<T>::drop_handle(ibqp) };
            e.to_errno()
        }
    }
}

/// The `modify_qp` op.
///
/// # Safety
///
/// `ibqp` is a live queue pair of driver `T`; `attr` is valid for reads for the call, with
/// the fields `mask` selects initialised (the address vectors whole, with the source GID
/// references the core holds for the call); `udata` is null or the call's udata.
pub(crate) unsafe extern "C" fn modify_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The core passes a live queue pair, the attributes (those in `mask` set, the
    // address vectors with the source GID references it holds for the call) and the call's
    // udata.
    let (qp, attr, mut udata) = unsafe {
        (
            Qp::<T>::from_raw(ibqp),
            QpAttr::from_raw(attr, mask as u32),
            UData::from_raw(udata),
        )
    };
    let Some(attr) = attr else {
        return EINVAL.to_errno();
    };
    match T::Qp::modify(qp, &attr, &mut udata) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `query_qp` op.
///
/// # Safety
///
/// `ibqp` is a live queue pair of driver `T`; `attr` and `init` are valid for writes for the
/// call and may be uninitialised (kernel callers' stack variables).
pub(crate) unsafe extern "C" fn query_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    // SAFETY: The core passes a live queue pair.
    let qp = unsafe { Qp::<T>::from_raw(ibqp) };
    let report = match T::Qp::query(qp, QpAttrMask::from_bits(mask as u32)) {
        Ok(r) => r,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: The core passes buffers to fill, which may be uninitialised (kernel callers'
    // stack variables): only whole fields are written, nothing is read.
    unsafe {
        report.attr.write_to(attr);
        report.init.write_to(init);
        // The creation attributes the core keeps: handler, context and the queues used
        // (set by the core at creation, pointers it owns).
        (&raw mut (*init).event_handler).write((*ibqp).event_handler);
        (&raw mut (*init).qp_context).write((*ibqp).qp_context);
        (&raw mut (*init).send_cq).write((*ibqp).send_cq);
        (&raw mut (*init).recv_cq).write((*ibqp).recv_cq);
        (&raw mut (*init).srq).write((*ibqp).srq);
    }
    0
}

/// The `destroy_qp` op.
///
/// # Safety
///
/// `ibqp` is a queue pair of driver `T` for which [`create_qp`] succeeded, not in use by
/// anything of the core's (its use count is zero); the core calls this once, from
/// `ib_destroy_qp_user` or from the error path of `create_qp` after a failed security setup,
/// and frees the memory after it returns, whatever it returns.
pub(crate) unsafe extern "C" fn destroy_qp<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `create_qp` succeeded for this queue pair, which is live for the call.
    T::Qp::destroy(unsafe { Qp::<T>::from_raw(ibqp) });
    // SAFETY: The core calls this once and frees the memory next. The handle goes first so
    // that nothing reaches the queue pair through it any more.
    unsafe {
        Qp::<T>::drop_handle(ibqp);
        core::ptr::drop_in_place(Qp::<T>::data_ptr(ibqp));
    }
    0
}

/// The `attach_mcast` op.
///
/// # Safety
///
/// `ibqp` is a live UD queue pair of driver `T` and `gid` a multicast GID, valid for the call.
pub(crate) unsafe extern "C" fn attach_mcast<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: The core passes a live queue pair and a GID; every GID is 16 raw bytes.
    let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
    match T::Qp::attach_mcast(qp, &mgid) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `detach_mcast` op.
///
/// # Safety
///
/// `ibqp` is a live queue pair of driver `T` and `gid` a GID, valid for the call.
pub(crate) unsafe extern "C" fn detach_mcast<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: The core passes a live queue pair and a GID; every GID is 16 raw bytes.
    let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
    match T::Qp::detach_mcast(qp, &mgid) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `post_send` op.
///
/// # Safety
///
/// `ibqp` is a live queue pair of driver `T`; `wr` is null (the doorbell of a user queue pair,
/// from uverbs) or a valid list of requests of a kernel consumer for the call, whose address
/// handles and regions are live; `bad_wr` is null or valid for writes. The op may run in any
/// context, interrupts off included.
pub(crate) unsafe extern "C" fn post_send<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: The core passes a live queue pair.
    let qp = unsafe { Qp::<T>::from_raw(ibqp) };
    if wr.is_null() {
        return match T::Qp::post_send_doorbell(qp) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
    }
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: The core passes a valid list of requests.
        let w = unsafe { &*cur };
        // SAFETY: `w` is a request of the list, `ibqp` live.
        let ret = unsafe { SendWr::<T>::from_raw(w, ibqp) }.and_then(|w| T::Qp::post_send(qp, &w));
        if let Err(e) = ret {
            if !bad_wr.is_null() {
                // SAFETY: The core passes a valid out pointer.
                unsafe { bad_wr.write(cur) };
            }
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}

/// The `post_recv` op.
///
/// # Safety
///
/// `ibqp` is a live queue pair of driver `T`; `wr` is a valid list of requests of a kernel
/// consumer for the call, and `bad_wr` null or valid for writes. The op may run in any
/// context, interrupts off included.
pub(crate) unsafe extern "C" fn post_recv<T: Driver>(
    ibqp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    if !T::Qp::HAS_POST_RECV {
        if !bad_wr.is_null() {
            // SAFETY: The core passes a valid out pointer.
            unsafe { bad_wr.write(wr) };
        }
        return EOPNOTSUPP.to_errno();
    }
    // SAFETY: The core passes a live queue pair, a list of requests and an out pointer.
    unsafe {
        let qp = Qp::<T>::from_raw(ibqp);
        RecvWr::post_list(wr, bad_wr, |w| T::Qp::post_recv(qp, w))
    }
}
