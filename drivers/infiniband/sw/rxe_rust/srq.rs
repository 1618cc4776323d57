// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: receive WQEs that several queue pairs take from.
//!
//! User space produces into the ring, the kernel consumes. Resizing follows the rxe ABI's
//! quirk: the new ring's `struct mminfo` goes to the user address given in the command
//! (`mmap_info_addr`), not into the response.

use crate::{
    device::ObjectCount,
    index::{
        Index,
        IndexTable, //
    },
    param::{
        self,
        RECV_WQE_SIZE,
        SGE_SIZE, //
    },
    queue::{
        Consumer,
        MmInfo,
        Offer,
        Producer,
        Ring, //
    },
    roce::wqe::{
        encode_recv_wqe,
        Sge, //
    },
    Rxe, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        device::Device,
        event::{
            SrqEvent,
            SrqHandle, //
        },
        srq::{
            Srq,
            SrqAttr,
            SrqAttrMask,
            SrqOps,
            SrqType, //
        },
        ucontext::UContext,
        udata::UData,
        wr::RecvWr, //
    },
    sync::{
        Arc,
        SpinLockIrq, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
};
use zerocopy_derive::Immutable;

/// The largest receive WQE of a shared receive queue.
const MAX_WQE_SIZE: usize = RECV_WQE_SIZE + SGE_SIZE * param::MAX_SRQ_SGE as usize;

/// The driver response of `create_srq` (`struct rxe_create_srq_resp`).
#[derive(IntoBytes, Immutable, Clone, Copy)]
#[repr(C)]
struct CreateSrqResp {
    mi: MmInfo,
    srq_num: u32,
    reserved: u32,
}

/// The driver command of `modify_srq` (`struct rxe_modify_srq_cmd`).
#[derive(FromBytes, IntoBytes, Clone, Copy)]
#[repr(C)]
struct ModifySrqCmd {
    mmap_info_addr: u64,
}

/// What the data path will need to find by SRQ number.
pub(crate) struct SrqShared;

/// The device's SRQ numbers.
pub(crate) type SrqTable = IndexTable<SrqShared>;

/// Creates the device's SRQ number table.
pub(crate) fn new_srq_table() -> Result<Arc<SrqTable>> {
    SrqTable::new(
        param::MIN_SRQ_INDEX as u32,
        (param::MIN_SRQ_INDEX + param::MAX_SRQ) as u32,
    )
}

/// The ring of a shared receive queue and, for a user queue, the offer to map it.
struct SrqRing {
    consumer: Consumer,
    /// The producing side of a kernel consumer's queue; user space produces otherwise.
    producer: Option<Producer>,
    offer: Offer,
}

impl SrqRing {
    fn new(max_wr: u32, max_sge: u32, ctx: Option<&UContext<Rxe>>) -> Result<(Self, Ring)> {
        let ring = Ring::new(max_wr, RECV_WQE_SIZE + SGE_SIZE * max_sge as usize)?;
        let offer = Offer::new(&ring, ctx)?;
        Ok((
            Self {
                consumer: Consumer::new(&ring),
                producer: None,
                offer,
            },
            ring,
        ))
    }

    fn capacity(&self) -> u32 {
        self.consumer.geometry().capacity()
    }
}

/// The state a shared receive queue's lock protects.
struct SrqInner {
    ring: SrqRing,
    /// Armed limit: an event fires when fewer WQEs than this remain (0: disarmed).
    limit: u32,
}

/// A shared receive queue as its queue pairs share it.
#[pin_data]
pub(crate) struct SrqCore {
    max_sge: u32,
    /// Disables interrupts: kernel consumers may post from softirq context.
    #[pin]
    inner: SpinLockIrq<SrqInner>,
    /// How the limit event reaches the owner.
    handle: SrqHandle,
}

/// A shared receive queue.
pub(crate) struct RxeSrq {
    core: Arc<SrqCore>,
    _num: Index<SrqShared>,
    _count: ObjectCount,
}

impl Drop for RxeSrq {
    fn drop(&mut self) {
        // Withdrawn here, in `destroy_srq`: the queue pairs that still hold the ring may drop
        // it in softirq ([`Offer::take`]).
        let offer = self.core.inner.lock().ring.offer.take();
        drop(offer);
    }
}

impl core::ops::Deref for RxeSrq {
    type Target = SrqCore;

    fn deref(&self) -> &SrqCore {
        &self.core
    }
}

/// Checks and adjusts a requested depth (as `rxe_srq_chk_init`).
fn check_max_wr(max_wr: u32) -> Result<u32> {
    if max_wr == 0 || max_wr > param::MAX_SRQ_WR as u32 {
        pr_debug!("SRQ max_wr {} out of 1..={}\n", max_wr, param::MAX_SRQ_WR);
        return Err(EINVAL);
    }
    Ok(max_wr)
}

#[vtable]
impl SrqOps for RxeSrq {
    type Driver = Rxe;

    fn create(
        dev: &Device<Rxe>,
        srq_type: SrqType,
        attr: &mut SrqAttr,
        handle: SrqHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<impl PinInit<Self, Error>> {
        Self::new(dev, srq_type, attr, handle, udata)
    }

    fn post_recv(srq: &Srq<Rxe>, wr: &RecvWr<'_>) -> Result {
        srq.core.post_recv(wr)
    }

    fn modify(
        srq: &Srq<Rxe>,
        attr: &SrqAttr,
        mask: SrqAttrMask,
        udata: &mut UData<'_, Rxe>,
    ) -> Result {
        srq.core.modify(attr, mask, udata)
    }

    fn query(srq: &Srq<Rxe>) -> Result<SrqAttr> {
        Ok(srq.core.query())
    }
}

impl RxeSrq {
    /// Returns the part its queue pairs share.
    pub(crate) fn core(&self) -> &Arc<SrqCore> {
        &self.core
    }

    /// Creates a shared receive queue on `dev`.
    fn new(
        dev: &Device<Rxe>,
        srq_type: SrqType,
        attr: &mut SrqAttr,
        handle: SrqHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<impl PinInit<Self, Error>> {
        let ctx = udata.ucontext();
        if udata.is_user() && udata.outlen() < core::mem::size_of::<CreateSrqResp>() {
            pr_debug!("create_srq response too small ({})\n", udata.outlen());
            return Err(EINVAL);
        }
        if srq_type != SrqType::Basic {
            return Err(EOPNOTSUPP);
        }
        let max_wr = check_max_wr(attr.max_wr)?;
        if attr.max_sge > param::MAX_SRQ_SGE as u32 {
            pr_debug!("SRQ max_sge {} over {}\n", attr.max_sge, param::MAX_SRQ_SGE);
            return Err(EINVAL);
        }
        let max_sge = attr.max_sge.max(1);

        let count = dev.srqs.take()?;
        let num = dev
            .srq_table
            .insert(Arc::new(SrqShared, GFP_KERNEL)?, GFP_KERNEL)?;
        let (mut ring, r) = SrqRing::new(max_wr, max_sge, ctx)?;
        if ctx.is_none() {
            ring.producer = Some(Producer::new(r));
        }
        udata.respond(&CreateSrqResp {
            mi: ring.offer.mminfo,
            srq_num: num.get(),
            reserved: 0,
        })?;
        attr.max_wr = ring.capacity();
        attr.max_sge = max_sge;
        let limit = attr.srq_limit;
        let core = Arc::pin_init(
            try_pin_init!(SrqCore {
                max_sge,
                inner <- new_spinlock_irq!(SrqInner { ring, limit }),
                handle,
            }),
            GFP_KERNEL,
        )?;
        Ok(try_init!(Self {
            core,
            _num: num,
            _count: count,
        }))
    }
}

impl SrqCore {
    /// Takes the next receive WQE into `dst` for a queue pair's responder; `false` if there
    /// is none.
    ///
    /// Fewer WQEs left than the armed limit fires `IB_EVENT_SRQ_LIMIT_REACHED` once and
    /// disarms it (IBA 10.2.9.4), as in the C driver.
    pub(crate) fn take(&self, dst: &mut [u8]) -> bool {
        let fire = {
            let mut inner = self.inner.lock();
            if !matches!(inner.ring.consumer.pop(dst), Ok(true)) {
                return false;
            }
            let left = inner.ring.consumer.count().unwrap_or(0);
            let fire = inner.limit != 0 && left < inner.limit;
            if fire {
                inner.limit = 0;
            }
            fire
        };
        if fire {
            self.handle.event(SrqEvent::LimitReached);
        }
        true
    }

    /// Returns the size of a slot (the largest WQE): fixed, as a resize keeps the SGE count
    /// (queue pairs keep it from their creation on).
    pub(crate) fn slot_size(&self) -> usize {
        self.inner.lock().ring.consumer.geometry().slot_size()
    }

    /// Returns the SGEs a WQE may have.
    pub(crate) fn max_sge(&self) -> u32 {
        self.max_sge
    }

    /// Resizes (`IB_SRQ_MAX_WR`) and/or arms the limit (`IB_SRQ_LIMIT`).
    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask, udata: &mut UData<'_, Rxe>) -> Result {
        let cmd = if udata.is_user() {
            if udata.inlen() < core::mem::size_of::<ModifySrqCmd>() {
                return Err(EINVAL);
            }
            Some(udata.read_in::<ModifySrqCmd>()?)
        } else {
            None
        };
        let resize = mask.contains(SrqAttrMask::MAX_WR);
        let arm = mask.contains(SrqAttrMask::LIMIT);
        if arm && attr.srq_limit > param::MAX_SRQ_WR as u32 {
            return Err(EINVAL);
        }

        if resize {
            let max_wr = check_max_wr(attr.max_wr)?;
            let limit = if arm {
                attr.srq_limit
            } else {
                self.inner.lock().limit
            };
            if limit != 0 && max_wr < limit {
                return Err(EINVAL);
            }
            let (mut ring, new) = SrqRing::new(max_wr, self.max_sge, udata.ucontext())?;
            if let Some(cmd) = cmd {
                // The rxe ABI: the new mminfo goes where the command points.
                let mi = ring.offer.mminfo;
                UserSlice::new(
                    UserPtr::from_addr(cmd.mmap_info_addr as usize),
                    core::mem::size_of::<MmInfo>(),
                )
                .writer()
                .write_slice(mi.as_bytes())?;
            }
            let mut scratch = [0u8; MAX_WQE_SIZE];
            let wqe = scratch
                .get_mut(..RECV_WQE_SIZE + SGE_SIZE * self.max_sge as usize)
                .ok_or(EINVAL)?;
            {
                let mut inner = self.inner.lock();
                ring.consumer = inner.ring.consumer.move_into(&new, wqe)?;
                if inner.ring.producer.is_some() {
                    ring.producer = Some(Producer::resume(new)?);
                }
                core::mem::swap(&mut inner.ring, &mut ring);
                if arm {
                    inner.limit = attr.srq_limit;
                }
            }
            // The old ring (now in `ring`) is freed outside the lock.
            drop(ring);
        } else if arm {
            let mut inner = self.inner.lock();
            if attr.srq_limit > inner.ring.capacity() {
                return Err(EINVAL);
            }
            inner.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// Posts a kernel consumer's receive request (as `rxe_post_srq_recv`).
    fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        let mut sges = [Sge::new(0, 0, 0); param::MAX_SRQ_SGE as usize];
        let sges = sges.get_mut(..wr.sges.len()).ok_or(EINVAL)?;
        for (dst, src) in sges.iter_mut().zip(wr.sges) {
            *dst = Sge::new(src.addr(), src.length(), src.lkey());
        }
        let mut slot = [0u8; MAX_WQE_SIZE];
        let len = encode_recv_wqe(&mut slot, wr.wr_id, sges, self.max_sge).map_err(|e| {
            pr_debug!("SRQ receive request refused: {:?}\n", e);
            EINVAL
        })?;
        let mut inner = self.inner.lock();
        // User space posts through its mapped ring; a kernel post would race with it.
        let producer = inner.ring.producer.as_mut().ok_or(EINVAL)?;
        if producer.is_full()? {
            return Err(ENOMEM);
        }
        producer.push(slot.get(..len).ok_or(EINVAL)?)
    }

    /// Reports depth, SGEs and the armed limit.
    fn query(&self) -> SrqAttr {
        let inner = self.inner.lock();
        SrqAttr {
            max_wr: inner.ring.capacity(),
            max_sge: self.max_sge,
            srq_limit: inner.limit,
        }
    }
}
