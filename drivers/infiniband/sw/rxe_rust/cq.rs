// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! The kernel produces completions into a shared ring ([`Producer`]); user space polls it
//! without a system call. A user queue's ring is offered for `mmap` at creation and resize
//! (`struct mminfo` in the response), exactly as the rxe provider expects.

use crate::{
    device::ObjectCount,
    param,
    queue::{
        MmInfo,
        Offer,
        Producer,
        Ring, //
    },
    Rxe, //
};
use kernel::{
    bindings,
    new_spinlock,
    prelude::*,
    rdma::{
        code,
        device::Device,
        driver::CqInitAttr,
        object::UContext,
        udata::UData, //
    },
    sync::SpinLock, //
};
use zerocopy_derive::Immutable;

/// The size of one completion in the ring: `struct rxe_cqe`, the union of the kernel's and
/// the user ABI's work completion.
pub(crate) const CQE_SIZE: usize = {
    let k = core::mem::size_of::<bindings::ib_wc>();
    let u = core::mem::size_of::<bindings::ib_uverbs_wc>();
    if k > u {
        k
    } else {
        u
    }
};

/// The driver response of `create_cq` and `resize_cq` (`struct rxe_create_cq_resp`,
/// `struct rxe_resize_cq_resp`).
#[derive(IntoBytes, Immutable, Clone, Copy)]
#[repr(C)]
struct CqResp {
    mi: MmInfo,
}

/// The ring of a queue and, for a user queue, the offer to map it.
struct CqRing {
    producer: Producer,
    offer: Offer,
}

impl CqRing {
    /// Creates a ring for at least `cqe` completions, offered to `ctx` if any.
    fn new(cqe: u32, ctx: Option<&UContext<Rxe>>) -> Result<Self> {
        let ring = Ring::new(cqe, CQE_SIZE)?;
        let offer = Offer::new(&ring, ctx)?;
        Ok(Self {
            producer: Producer::new(ring),
            offer,
        })
    }

    fn capacity(&self) -> u32 {
        self.producer.ring().geometry().capacity()
    }

    fn response(&self) -> CqResp {
        CqResp {
            mi: self.offer.mminfo,
        }
    }
}

/// The state a completion queue's lock protects.
struct CqInner {
    ring: CqRing,
    /// Armed notification: `IB_CQ_SOLICITED` and/or `IB_CQ_NEXT_COMP`.
    notify: u32,
}

/// A completion queue.
#[pin_data]
pub(crate) struct Cq {
    #[pin]
    inner: SpinLock<CqInner>,
    _count: ObjectCount,
}

/// Checks a requested number of completions against the device's limit.
fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > param::MAX_CQE {
        pr_debug!("cqe {} out of 1..={}\n", cqe, param::MAX_CQE);
        return Err(EINVAL);
    }
    Ok(())
}

impl Cq {
    /// Creates a completion queue on `dev` for at least `attr.cqe` completions.
    pub(crate) fn new(
        dev: &Device<Rxe>,
        attr: &CqInitAttr,
        udata: &mut UData<'_>,
    ) -> Result<(impl PinInit<Self, Error>, u32)> {
        let ctx = udata.ucontext::<Rxe>();
        if ctx.is_some() && udata.outlen() < core::mem::size_of::<CqResp>() {
            pr_debug!("create_cq response too small ({})\n", udata.outlen());
            return Err(EINVAL);
        }
        if attr.flags != 0 {
            return Err(code::eopnotsupp());
        }
        check_cqe(attr.cqe)?;
        let count = dev.cqs.take()?;
        let ring = CqRing::new(attr.cqe, ctx)?;
        udata.respond(&ring.response())?;
        let cqe = ring.capacity();
        Ok((
            try_pin_init!(Self {
                inner <- new_spinlock!(CqInner { ring, notify: 0 }),
                _count: count,
            }),
            cqe,
        ))
    }

    /// Resizes the queue to hold at least `cqe` completions, keeping those not yet polled.
    pub(crate) fn resize(&self, cqe: u32, udata: &mut UData<'_>) -> Result<u32> {
        check_cqe(cqe)?;
        let ctx = udata.ucontext::<Rxe>().ok_or(EINVAL)?;
        if udata.outlen() < core::mem::size_of::<CqResp>() {
            return Err(EINVAL);
        }
        let mut ring = CqRing::new(cqe, Some(ctx))?;
        let resp = ring.response();
        let mut scratch = [0u8; CQE_SIZE];
        {
            let mut inner = self.inner.lock();
            if inner.ring.producer.count()? > ring.capacity() {
                pr_debug!(
                    "resize to {} below the {} completions queued\n",
                    cqe,
                    inner.ring.producer.count()?
                );
                return Err(EINVAL);
            }
            inner
                .ring
                .producer
                .move_into(&mut ring.producer, &mut scratch)?;
            core::mem::swap(&mut inner.ring, &mut ring);
        }
        // The old ring (now in `ring`) is freed outside the lock.
        let cap = self.inner.lock().ring.capacity();
        drop(ring);
        udata.respond(&resp)?;
        Ok(cap)
    }

    /// Arms the notification; returns whether completions already wait when asked to report
    /// missed events.
    pub(crate) fn req_notify(&self, flags: u32) -> Result<bool> {
        let mut inner = self.inner.lock();
        inner.notify |= flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
        let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
        Ok(report && inner.ring.producer.count()? > 0)
    }
}
