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
        Consumer,
        MmInfo,
        Offer,
        Producer,
        Ring, //
    },
    Rxe, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        cq::{
            Cq,
            CqInitAttr,
            CqNotifyFlags,
            CqOps,
            NewCq,
            WcFlags,
            WcOpcode,
            WcSink,
            WcStatus,
            WorkCompletion,
            WC_SIZE, //
        },
        device::Device,
        event::{
            CqEvent,
            CqHandle,
            QpHandle, //
        },
        ucontext::UContext,
        udata::UData, //
    },
    sync::{
        Arc,
        SpinLockIrq, //
    },
    uapi,
};
use zerocopy_derive::{
    FromBytes,
    Immutable,
    KnownLayout, //
};

/// The size of one completion in the ring: `struct rxe_cqe`, the union of the kernel's and
/// the user ABI's work completion.
pub(crate) const CQE_SIZE: usize = {
    let k = WC_SIZE;
    let u = core::mem::size_of::<uapi::ib_uverbs_wc>();
    if k > u {
        k
    } else {
        u
    }
};

/// A completion as it sits in the ring: `struct ib_uverbs_wc` (what the provider reads),
/// followed by the fields only kernel consumers get.
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Clone, Copy, Default)]
#[repr(C)]
struct Cqe {
    wr_id: u64,
    status: u32,
    opcode: u32,
    vendor_err: u32,
    byte_len: u32,
    ex: u32,
    qp_num: u32,
    src_qp: u32,
    wc_flags: u32,
    pkey_index: u16,
    slid: u16,
    sl: u8,
    dlid_path_bits: u8,
    port_num: u8,
    reserved: u8,
    smac: [u8; 6],
    vlan_id: u16,
    network_hdr_type: u8,
    pad: [u8; 7],
}

const _: () = assert!(
    core::mem::size_of::<uapi::ib_uverbs_wc>() == 48
        && core::mem::offset_of!(Cqe, smac) == 48
        && core::mem::size_of::<Cqe>() <= CQE_SIZE
);

/// Converts between the ring's completions and the core's, field by field.
macro_rules! cqe_fields {
    ($($f:ident),* $(,)?) => {
        impl From<&WorkCompletion> for Cqe {
            fn from(c: &WorkCompletion) -> Self {
                Self {
                    $($f: c.$f,)*
                    status: c.status.raw(),
                    opcode: c.opcode.raw(),
                    wc_flags: c.wc_flags.bits(),
                    ..Default::default()
                }
            }
        }

        impl From<&Cqe> for WorkCompletion {
            fn from(c: &Cqe) -> Self {
                Self {
                    $($f: c.$f,)*
                    // Only the kernel writes a kernel queue's ring, with known values.
                    status: WcStatus::from_raw(c.status).unwrap_or(WcStatus::GeneralErr),
                    opcode: WcOpcode::from_raw(c.opcode).unwrap_or_default(),
                    wc_flags: WcFlags::from_bits_retain(c.wc_flags),
                }
            }
        }
    };
}

cqe_fields!(
    wr_id,
    vendor_err,
    byte_len,
    ex,
    qp_num,
    src_qp,
    pkey_index,
    sl,
    port_num,
    smac,
    vlan_id,
    network_hdr_type,
);

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

/// The consuming side of a kernel queue, which `poll_cq` reads for the kernel consumer.
struct KernelReader {
    consumer: Consumer,
    /// The queue pair of each slot's completion, filled as completions are added: a kernel
    /// completion names its queue pair by pointer, which the ring cannot hold.
    qps: KVec<Option<QpHandle>>,
}

/// The state a completion queue's lock protects.
struct CqInner {
    ring: CqRing,
    /// Armed notification: `IB_CQ_SOLICITED` and/or `IB_CQ_NEXT_COMP`.
    notify: CqNotifyFlags,
    /// For a kernel queue, the consumer's side.
    reader: Option<KernelReader>,
}

/// A completion queue as its queue pairs share it.
///
/// The lock disables interrupts: kernel consumers may poll from softirq context.
#[pin_data]
pub(crate) struct CqCore {
    #[pin]
    inner: SpinLockIrq<CqInner>,
    handle: CqHandle,
}

/// A completion queue.
pub(crate) struct RxeCq {
    core: Arc<CqCore>,
    _count: ObjectCount,
}

impl Drop for RxeCq {
    fn drop(&mut self) {
        // Withdrawn here, in `destroy_cq`: the queue pairs that still hold the ring may drop
        // it in softirq ([`Offer::take`]).
        let offer = self.core.inner.lock().ring.offer.take();
        drop(offer);
    }
}

/// Checks a requested number of completions against the device's limit.
fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > param::MAX_CQE {
        pr_debug!("cqe {} out of 1..={}\n", cqe, param::MAX_CQE);
        return Err(EINVAL);
    }
    Ok(())
}

#[vtable]
impl CqOps for RxeCq {
    type Driver = Rxe;

    fn create(
        dev: &Device<Rxe>,
        attr: &CqInitAttr,
        handle: CqHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewCq<impl PinInit<Self, Error>>> {
        Self::new(dev, attr, handle, udata)
    }

    fn resize(cq: &Cq<Rxe>, cqe: u32, udata: &mut UData<'_, Rxe>) -> Result<u32> {
        cq.resize(cqe, udata)
    }

    fn req_notify(cq: &Cq<Rxe>, flags: CqNotifyFlags) -> Result<bool> {
        cq.req_notify(flags)
    }

    fn poll(cq: &Cq<Rxe>, wc: &mut WcSink<'_>) -> Result {
        cq.poll(wc)
    }

    fn peek(cq: &Cq<Rxe>, max: u32) -> u32 {
        cq.peek(max)
    }
}

impl RxeCq {
    /// Creates a completion queue on `dev` for at least `attr.cqe` completions.
    fn new(
        dev: &Device<Rxe>,
        attr: &CqInitAttr,
        handle: CqHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewCq<impl PinInit<Self, Error>>> {
        let ctx = udata.ucontext();
        if ctx.is_some() && udata.outlen() < core::mem::size_of::<CqResp>() {
            pr_debug!("create_cq response too small ({})\n", udata.outlen());
            return Err(EINVAL);
        }
        if attr.flags != 0 {
            return Err(EOPNOTSUPP);
        }
        check_cqe(attr.cqe)?;
        let count = dev.cqs.take()?;
        let ring = CqRing::new(attr.cqe, ctx)?;
        let reader = if ctx.is_none() {
            let slots = ring.producer.ring().geometry().mask as usize + 1;
            let mut qps = KVec::with_capacity(slots, GFP_KERNEL)?;
            for _ in 0..slots {
                qps.push(None, GFP_KERNEL)?;
            }
            Some(KernelReader {
                consumer: Consumer::new(ring.producer.ring()),
                qps,
            })
        } else {
            None
        };
        udata.respond(&ring.response())?;
        let cqe = ring.capacity();
        let core = Arc::pin_init(
            try_pin_init!(CqCore {
                inner <- new_spinlock_irq!(CqInner {
                    ring,
                    notify: CqNotifyFlags::empty(),
                    reader,
                }),
                handle,
            }),
            GFP_KERNEL,
        )?;
        Ok(NewCq {
            init: try_init!(Self {
                core,
                _count: count,
            }),
            cqe,
        })
    }

    /// Returns the part of the queue its queue pairs share.
    pub(crate) fn core(&self) -> &Arc<CqCore> {
        &self.core
    }

    /// Resizes the queue to hold at least `cqe` completions, keeping those not yet polled.
    fn resize(&self, cqe: u32, udata: &mut UData<'_, Rxe>) -> Result<u32> {
        check_cqe(cqe)?;
        let ctx = udata.ucontext().ok_or(EINVAL)?;
        if udata.outlen() < core::mem::size_of::<CqResp>() {
            return Err(EINVAL);
        }
        let mut ring = CqRing::new(cqe, Some(ctx))?;
        let resp = ring.response();
        let mut scratch = [0u8; CQE_SIZE];
        {
            let mut inner = self.core.inner.lock();
            if inner.reader.is_some() {
                // Kernel queues are not resized (the core offers resize to user space only).
                return Err(EOPNOTSUPP);
            }
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
        let cap = self.core.inner.lock().ring.capacity();
        drop(ring);
        udata.respond(&resp)?;
        Ok(cap)
    }

    /// Arms the notification; returns whether completions already wait when asked to report
    /// missed events.
    fn req_notify(&self, flags: CqNotifyFlags) -> Result<bool> {
        let mut inner = self.core.inner.lock();
        inner.notify |= flags & CqNotifyFlags::ARM_MASK;
        let report = flags.contains(CqNotifyFlags::REPORT_MISSED_EVENTS);
        Ok(report && inner.ring.producer.count()? > 0)
    }

    /// Moves completions of a kernel queue into `out`, until it is full or the queue empty.
    fn poll(&self, out: &mut WcSink<'_>) -> Result {
        let mut inner = self.core.inner.lock();
        let reader = inner.reader.as_mut().ok_or(EINVAL)?;
        let mut cqe = Cqe::default();
        while !out.is_full() {
            let slot = reader.consumer.index() as usize;
            if !reader.consumer.pop(cqe.as_mut_bytes())? {
                break;
            }
            let qp = reader.qps.get_mut(slot).and_then(Option::take);
            out.push(&WorkCompletion::from(&cqe), qp.as_ref())?;
        }
        Ok(())
    }

    /// Returns how many completions (at most `max`) wait in a kernel queue.
    fn peek(&self, max: u32) -> u32 {
        let inner = self.core.inner.lock();
        inner.ring.producer.count().unwrap_or(0).min(max)
    }
}

impl CqCore {
    /// Returns where the consumer stands: it moves when completions are polled (user space
    /// publishes it in the ring; a kernel queue's is ours).
    pub(crate) fn consumer_index(&self) -> u32 {
        let inner = self.inner.lock();
        match &inner.reader {
            Some(reader) => reader.consumer.index(),
            None => inner.ring.producer.consumer().unwrap_or(0),
        }
    }

    /// Adds a completion of the queue pair `qp`, and calls the owner's handler if the armed
    /// notification asks for it (any completion, or a `solicited` one).
    ///
    /// A full queue is an overrun: the owner gets `IB_EVENT_CQ_ERR` and the completion is
    /// lost, as on hardware; `EBUSY` tells the caller.
    pub(crate) fn post(&self, wc: &WorkCompletion, qp: &QpHandle, solicited: bool) -> Result {
        let cqe = Cqe::from(wc);
        let fire = {
            let mut inner = self.inner.lock();
            let slot = inner.ring.producer.index() as usize;
            match inner.ring.producer.push(cqe.as_bytes()) {
                Ok(()) => (),
                Err(e) if e == ENOSPC => {
                    drop(inner);
                    pr_warn!("completion queue overrun\n");
                    self.handle.event(CqEvent::Error);
                    return Err(EBUSY);
                }
                Err(e) => return Err(e),
            }
            if let Some(entry) = inner.reader.as_mut().and_then(|r| r.qps.get_mut(slot)) {
                *entry = Some(qp.clone());
            }
            let armed = inner.notify;
            let fire = armed.contains(CqNotifyFlags::NEXT_COMP)
                || (solicited && armed.contains(CqNotifyFlags::SOLICITED));
            if fire {
                inner.notify = CqNotifyFlags::empty();
            }
            fire
        };
        // Outside the queue's lock: the handler may poll or re-arm.
        if fire {
            self.handle.notify();
        }
        Ok(())
    }
}
