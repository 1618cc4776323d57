// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation with the rxe queue layout, the IB state machine and attributes.
//!
//! A user queue pair's send and receive queues are rings user space produces into and the
//! kernel consumes ([`Consumer`]); both are offered for `mmap` in the create response
//! (`struct rxe_create_qp_resp`, receive queue first). A queue pair on a shared receive queue
//! has no receive queue of its own.

use crate::{
    cq::CqCore,
    device::ObjectCount,
    engine::{
        Engine,
        Inbox,
        RECEIVE,
        RUN, //
    },
    index::{
        Index,
        IndexTable, //
    },
    mcast,
    odp::FAULT,
    param,
    queue::{
        Consumer,
        MmInfo,
        Offer,
        Producer,
        Ring,
        SlotReader, //
    },
    roce::{
        memory::Registration,
        mtu::{
            ib_mtu_for_netdev_mtu,
            IbMtu, //
        },
        opcode::QpType,
        requester::SendWr as RoceSendWr,
        wqe::{
            copy_send_wqe,
            decode_send_wqe,
            encode_recv_wqe,
            encode_send_wqe,
            recv_wqe_id,
            send_wqe_id,
            Remote,
            SendFlags as RoceSendFlags,
            SendQueueLimits,
            SendWqe,
            Sge,
            WqeData,
            WrOpcode,
            SEND_WQE_OPCODE_OFFSET, //
        },
    },
    srq::SrqCore,
    transport::{
        roce_type,
        Psns,
        Transport, //
    },
    tx::Path,
    Rxe, //
};
use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    AtomicU64,
    Ordering::AcqRel,
    Ordering::Acquire,
    Ordering::Relaxed,
    Ordering::Release, //
};
use kernel::{
    net::skbuff::{
        impl_has_in_flight,
        InFlight,
        TxOwner, //
    },
    new_mutex,
    new_spinlock,
    new_spinlock_irq, //
    prelude::*,
    rdma::{
        ah::AhAttr,
        cq::{
            WcStatus,
            WorkCompletion, //
        },
        device::Device,
        event::{
            QpEvent,
            QpHandle, //
        },
        mr::AccessFlags,
        pd::Pd,
        qp::{
            attr::{
                modify_qp_is_ok,
                QpAttr,
                QpAttrCopy,
                QpAttrFields,
                QpAttrMask,
                QpCap,
                QpInitAttr,
                QpInitInfo,
                QpReport,
                QpState,
                QpType as IbQpType,
                QP1_QKEY, //
            },
            NewQp,
            Qp,
            QpOps, //
        },
        trace,
        ucontext::UContext,
        udata::UData,
        wr::{
            RecvWr,
            SendFlags,
            SendWr,
            SendWrDetail,
            WrOpcode as IbWrOpcode, //
        },
    },
    sync::{
        Arc,
        ArcBorrow,
        Mutex,
        SpinLock,
        SpinLockIrq, //
    },
    time::Jiffies,
    workqueue::{
        impl_has_delayed_work,
        impl_has_work,
        new_delayed_work,
        new_work,
        DelayedWork,
        Work,
        WorkItem, //
    },
    xarray::RcuXArray,
};
use zerocopy_derive::Immutable;

/// Size of an SGE, as a `u32` like the capabilities it multiplies.
const SGE_SIZE: u32 = param::SGE_SIZE as u32;

/// The QP number of the general services interface (QP1).
const GSI_QPN: u32 = 1;

/// The driver response of `create_qp` (`struct rxe_create_qp_resp`).
#[derive(IntoBytes, Immutable, Clone, Copy)]
#[repr(C)]
struct CreateQpResp {
    rq_mi: MmInfo,
    sq_mi: MmInfo,
}

/// [`QpShared::bad_wqe`] when no malformed send WQE waits to be completed.
const NO_BAD_WQE: u32 = u32::MAX;

/// A queue pair as its data path shares it: what posting, flushing and (next) the
/// requester, responder and completer need, found by QP number.
///
/// Its locks disable interrupts: kernel consumers may post from softirq context.
#[pin_data]
pub(crate) struct QpShared {
    /// The queue pair type.
    pub(crate) qp_type: IbQpType,
    /// The QP number, set once the number is allocated.
    qpn: AtomicU32,
    /// This queue pair's serial, which no other queue pair of the device has: a type 2
    /// memory window is bound to it.
    pub(crate) serial: u64,
    /// The device's index, which tracepoints name it by.
    pub(crate) dev_index: u32,
    /// The `enum ib_qp_state`; changed under the owner's state mutex, read without it.
    state: AtomicU32,
    /// Whether the send queue drains in SQD ([`SQ_DRAINING`], [`SQ_DRAINING_NOTIFY`]) or not
    /// (zero): set by `modify_qp` to SQD, cleared by the run that finds nothing outstanding.
    sq_drain: AtomicU32,
    /// The index of a malformed send WQE that a run found ([`NO_BAD_WQE`]: none): whoever
    /// takes it ([`QpShared::complete_bad_wqe`]) completes it with the error that caused it,
    /// before the rest of the send queue is flushed.
    bad_wqe: AtomicU32,
    /// Where the consumers of the send and receive completion queues stood at the last
    /// doorbell ([`QpShared::polled_since_doorbell`]).
    doorbell_mark: AtomicU64,
    /// The transport's PSNs when it started or its last run ended ([`QpShared::note_psns`]),
    /// [`NO_PSNS`] without a transport.
    ///
    /// `query_qp` reads them here, not under the transport's lock: a query does not wait for
    /// a run (which may send for milliseconds), nor a run for a query.
    psns: AtomicU64,
    /// Whether the requester had more than one WQE outstanding when the last run ended
    /// ([`QpShared::note_psns`]): its answers come as a stream.
    pub(crate) many_outstanding: AtomicBool,
    /// Whether the last WQE the requester took was an RDMA READ or an atomic for a peer on
    /// the wire: its answer comes from the peer's kernel, not its consumer
    /// ([`QpShared::linger`]).
    pub(crate) asks: AtomicBool,
    /// The send queue slot the requester takes its next WQE from: set at RTR and as each WQE
    /// is taken ([`QpShared::next_asks`], [`QpShared::sq_untaken`]).
    pub(crate) next_sq: AtomicU32,
    /// The producer index of the send queue a waiting worker last ran for, without a doorbell
    /// ([`QpShared::linger`]); `u32::MAX` (never a slot index) before the first.
    pub(crate) linger_seen: AtomicU32,
    /// Whether user space produces the work requests (through the mapped rings).
    pub(crate) user: bool,
    /// The protection domain (its address: an identity, never dereferenced).
    pub(crate) pd: usize,
    handle: QpHandle,
    /// The send queue's layout, slots and producer index, which a run reads without the
    /// queue's lock (only the consumer's index, which `release_sq` moves, needs it). The send
    /// queue's ring is never replaced.
    sq_reader: SlotReader,
    /// What a send WQE may hold, fixed at creation: read without the queue's lock.
    sq_limits: SendQueueLimits,
    send_cq: Arc<CqCore>,
    recv_cq: Arc<CqCore>,
    /// The shared receive queue it receives through, if any.
    srq: Option<Arc<SrqCore>>,
    /// The slot size and SGE count of its receive queue or SRQ, fixed at creation (an SRQ's
    /// resize keeps its slot size): read on every receive without the queue's lock.
    rq_shape: (usize, u32),
    #[pin]
    sq: SpinLockIrq<WorkQueue>,
    /// `None` on a shared receive queue.
    #[pin]
    rq: SpinLockIrq<Option<WorkQueue>>,
    /// The transport, from RTR to RESET.
    ///
    /// A spinlock, not a mutex: the receive path runs the queue pair in softirq when it can
    /// take it (`try_lock`, which never waits, so process context may hold it with softirqs
    /// enabled). Nothing under it sleeps.
    #[pin]
    pub(crate) transport: SpinLock<Option<KBox<Transport>>>,
    /// Fires at the earliest deadline of the transport's timers: each queue pair has its own,
    /// so a far deadline of one never delays another's.
    #[pin]
    pub(crate) timer: DelayedWork<QpShared>,
    /// The queue pair's run ([`crate::engine`]): one at a time, on an unbound workqueue
    /// ([`QpShared::work_queue`]).
    #[pin]
    pub(crate) run: Work<QpShared, RUN>,
    /// The run of the packets that came in a round of the network's softirq, at its end
    /// ([`crate::engine`]): on the BH workqueue, in softirq (a user's queue pair only).
    #[pin]
    pub(crate) receive: Work<QpShared, RECEIVE>,
    /// Faults in what a run found not present ([`crate::odp`]), in process context.
    #[pin]
    pub(crate) fault_work: Work<QpShared, FAULT>,
    /// What waits for the run.
    #[pin]
    pub(crate) inbox: SpinLockIrq<Inbox>,
    /// What the runs share with the device.
    pub(crate) engine: Arc<Engine>,
    /// The queue pair's socket buffers sent to other hosts and not yet freed: at most
    /// [`param::MAX_SKBS_IN_FLIGHT`] before its senders wait.
    pub(crate) in_flight: InFlight<QpShared>,
}

impl_has_in_flight! {
    impl HasInFlight<QpShared> for QpShared { self.in_flight }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for QpShared { self.timer }
}

impl_has_work! {
    impl HasWork<Self, RUN> for QpShared { self.run }
}

impl_has_work! {
    impl HasWork<Self, FAULT> for QpShared { self.fault_work }
}

impl_has_work! {
    impl HasWork<Self, RECEIVE> for QpShared { self.receive }
}

impl TxOwner for QpShared {
    fn resume(this: ArcBorrow<'_, Self>) {
        // Its buffers drained: the run sends what waited ([`Transport::tx_waiting`]).
        QpShared::kick_later(this);
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        this.timer_fired();
    }
}

/// The device's QP numbers: QP1 and the cyclic range from 16, read under RCU by the receive
/// path.
pub(crate) type QpTable = IndexTable<QpShared, RcuXArray<Arc<QpShared>>>;

/// Creates the device's QP number table.
pub(crate) fn new_qp_table() -> Result<Arc<QpTable>> {
    QpTable::new(
        param::MIN_QP_INDEX as u32,
        (param::MIN_QP_INDEX + param::MAX_QP) as u32,
    )
}

/// One work queue (send or receive) of a queue pair.
struct WorkQueue {
    consumer: Consumer,
    /// The producing side of a kernel consumer's queue; user space produces otherwise.
    producer: Option<Producer>,
    max_wr: u32,
    max_sge: u32,
    max_inline: u32,
}

impl WorkQueue {
    fn new(
        max_wr: u32,
        max_sge: u32,
        max_inline: u32,
        wqe_size: usize,
        ctx: Option<&UContext<Rxe>>,
    ) -> Result<(Self, Offer)> {
        let ring = Ring::new(max_wr, wqe_size)?;
        let cap = ring.geometry().capacity();
        // The offer stays with the queue pair's owner (`RxeQp`), not in the shared state: it is
        // withdrawn when `destroy_qp` drops the queue pair, whoever still holds the rest.
        let offer = Offer::new(&ring, ctx)?;
        let consumer = Consumer::new(&ring);
        let producer = ctx.is_none().then(|| Producer::new(ring));
        Ok((
            Self {
                consumer,
                producer,
                max_wr: cap,
                max_sge,
                max_inline,
            },
            offer,
        ))
    }

    /// Forgets every queued request, without completions (a queue pair reset).
    fn discard(&mut self) {
        let mut b = [0u8; 0];
        while let Ok(true) = self.consumer.pop(&mut b) {}
    }
}

/// A send WQE taken out of the ring: the request and, if it names a single SGE, that SGE;
/// `Err` if it is malformed.
pub(crate) type TakenSendWr = core::result::Result<(RoceSendWr, Option<Sge>), ()>;

/// The largest send WQE: the header and the largest inline data or SGE list.
pub(crate) const MAX_SEND_WQE: usize = param::SEND_WQE_SIZE + param::MAX_INLINE_DATA as usize;

/// The largest receive WQE a kernel consumer can post.
const MAX_RECV_WQE: usize = param::RECV_WQE_SIZE + param::MAX_SGE as usize * param::SGE_SIZE;

/// [`QpShared::psns`] without a transport.
const NO_PSNS: u64 = u64::MAX;

impl QpShared {
    /// Publishes the PSNs of the transport `t` for `query_qp`, or that there is none.
    pub(crate) fn note_psns(&self, t: Option<&Transport>) {
        let v = t.map_or(NO_PSNS, |t| {
            let p = t.psns();
            (u64::from(p.rq) << 32) | u64::from(p.sq)
        });
        self.psns.store(v, Relaxed);
        self.many_outstanding
            .store(t.is_some_and(|t| !t.few_outstanding()), Relaxed);
    }

    /// Returns the PSNs published last, if there is a transport.
    fn published_psns(&self) -> Option<Psns> {
        let v = self.psns.load(Relaxed);
        // A PSN has 24 bits: a published pair is never `NO_PSNS`.
        (v != NO_PSNS).then_some(Psns {
            rq: (v >> 32) as u32,
            sq: v as u32,
        })
    }

    /// Sets the timer to fire in `delay`, replacing the deadline of a pending one.
    pub(crate) fn arm_timer(self: &Arc<Self>, delay: Jiffies) {
        // A pending timer keeps the reference it was set with: the clone comes back, dropped.
        let _ = self.work_queue().mod_delayed(self.clone(), delay);
    }

    /// Returns the state.
    fn state(&self) -> QpState {
        // Only `QpState` values are stored.
        QpState::from_raw(self.state.load(Acquire)).unwrap_or(QpState::Err)
    }

    /// Notes the malformed send WQE at `index`, for [`QpShared::complete_bad_wqe`]; called by
    /// the run that found it, with the transport locked.
    pub(crate) fn note_bad_wqe(&self, index: u32) {
        self.bad_wqe.store(index, Release);
    }

    /// Completes the malformed send WQE noted by [`QpShared::note_bad_wqe`], if no one did
    /// yet, with `IB_WC_LOC_QP_OP_ERR`, and frees its slot (the queue pair then goes to the
    /// error state).
    ///
    /// The run that found it calls this once it has unlocked the transport, and so does the
    /// flush of the send queue first: another context's run, seeing the transport failed, may
    /// flush the queue before, which completed the WQE with a flush error and then completed
    /// it a second time here (`rxe_rust_traffic`, a UD send through another PD's address
    /// handle, one `make test` in about ten).
    pub(crate) fn complete_bad_wqe(&self) {
        let index = self.bad_wqe.swap(NO_BAD_WQE, AcqRel);
        if index == NO_BAD_WQE {
            return;
        }
        let mut b = [0u8; param::SEND_WQE_SIZE];
        let wr_id = match self.read_sq(index, &mut b) {
            Ok(()) => send_wqe_id(&b).map_or(0, |(id, _)| id),
            Err(_) => 0,
        };
        let wc = WorkCompletion {
            status: WcStatus::LocQpOpErr,
            ..self.flushed(wr_id)
        };
        let _ = self.post_completion(&wc, false, false);
        self.release_sq(self.next_sq_index(index));
    }

    /// Moves the queue pair to the error state because its transport failed (retries
    /// exhausted, a NAK, a bad WQE): what it did not hold yet is flushed too.
    pub(crate) fn enter_error(&self) {
        let err = QpState::Err as u32;
        if self.state.swap(err, AcqRel) != err {
            self.flush();
        }
    }

    /// Posts a kernel consumer's receive request (as `post_one_recv` of the C driver).
    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        // User space posts through its mapped ring; a kernel post would race with it.
        if self.user || self.state() == QpState::Reset {
            return Err(EINVAL);
        }
        {
            let mut guard = self.rq.lock();
            let rq = (*guard).as_mut().ok_or(EINVAL)?;
            let max_sge = rq.max_sge;
            let producer = rq.producer.as_mut().ok_or(EINVAL)?;
            if producer.is_full()? {
                return Err(ENOMEM);
            }
            let mut sges = [Sge::new(0, 0, 0); param::MAX_SGE as usize];
            let sges = sges.get_mut(..wr.sges.len()).ok_or(EINVAL)?;
            for (dst, src) in sges.iter_mut().zip(wr.sges) {
                *dst = Sge::new(src.addr(), src.length(), src.lkey());
            }
            let mut slot = [0u8; MAX_RECV_WQE];
            let len = encode_recv_wqe(&mut slot, wr.wr_id, sges, max_sge).map_err(|e| {
                pr_debug!("receive request refused: {:?}\n", e);
                EINVAL
            })?;
            producer.push(slot.get(..len).ok_or(EINVAL)?)?;
        }
        // A queue pair in error completes what is posted at once, with a flush status.
        if self.state() == QpState::Err {
            self.flush();
        }
        Ok(())
    }

    /// Returns the transport's view of the queue pair type.
    fn roce_type(&self) -> QpType {
        roce_type(self.qp_type)
    }

    /// Returns the QP number.
    pub(crate) fn number(&self) -> u32 {
        self.qpn.load(Relaxed)
    }

    /// Posts `wc` to the completion queue of the send queue, or of the receive queue if
    /// `recv`, and traces it; fails as [`CqCore::post`].
    pub(crate) fn post_completion(
        &self,
        wc: &WorkCompletion,
        recv: bool,
        solicited: bool,
    ) -> Result {
        trace::complete(self.dev_index, wc, recv);
        let cq = if recv { &self.recv_cq } else { &self.send_cq };
        cq.post(wc, &self.handle, solicited)
    }

    /// Returns whether the consumer polled one of this queue pair's completion queues since
    /// the last doorbell, and notes where they stand now.
    ///
    /// A doorbell after a poll is a request in a ping-pong, where running the queue pair in
    /// the system call saves a wake-up on the way to the wire; doorbells back to back are a
    /// stream, which the work item sends on another CPU while the caller goes on posting.
    pub(crate) fn polled_since_doorbell(&self) -> bool {
        let send = self.send_cq.consumer_index();
        // One completion queue for both (as perftest has): one lock and one read of its ring.
        let recv = if Arc::ptr_eq(&self.send_cq, &self.recv_cq) {
            send
        } else {
            self.recv_cq.consumer_index()
        };
        let mark = (u64::from(send) << 32) | u64::from(recv);
        self.doorbell_mark.swap(mark, Relaxed) != mark
    }

    /// Returns the handle events go through.
    pub(crate) fn handle(&self) -> &QpHandle {
        &self.handle
    }

    /// Returns whether the requester may send (RTS).
    pub(crate) fn can_send(&self) -> bool {
        self.state() == QpState::Rts
    }

    /// Returns whether the send queue drains (SQD, until what the requester took is done):
    /// the requester finishes what it holds but takes no new WQE.
    pub(crate) fn is_draining(&self) -> bool {
        self.state() == QpState::Sqd && self.sq_drain.load(Acquire) != 0
    }

    /// Ends the drain of the send queue, with `IB_EVENT_SQ_DRAINED` if the consumer asked
    /// for it (`en_sqd_async_notify`).
    pub(crate) fn end_drain(&self) {
        if self.sq_drain.swap(0, AcqRel) == SQ_DRAINING_NOTIFY {
            self.handle.event(QpEvent::SqDrained);
        }
    }

    /// Returns whether the responder takes packets (RTR to SQE).
    pub(crate) fn can_receive(&self) -> bool {
        (QpState::Rtr..=QpState::Sqe).contains(&self.state())
    }

    /// Returns the limits send WQEs are checked against.
    pub(crate) fn send_limits(&self) -> SendQueueLimits {
        self.sq_limits
    }

    /// Copies the start of send queue slot `slot` into `dst`.
    pub(crate) fn read_sq(&self, slot: u32, dst: &mut [u8]) -> Result {
        self.sq.lock().consumer.read_slot(slot, dst)
    }

    /// Copies the send WQE in slot `slot` into `buf`, as far as decoding it needs
    /// ([`copy_send_wqe`]); returns how many bytes of `buf` hold it.
    ///
    /// Copying the ring is per byte (user space may write it meanwhile): past the fixed part
    /// and one SGE, only what the WQE occupies is copied.
    pub(crate) fn read_send_wqe(&self, slot: u32, buf: &mut [u8; MAX_SEND_WQE]) -> Result<usize> {
        let ring = &self.sq_reader;
        copy_send_wqe(buf, ring.geometry().slot_size(), |offset, dst| {
            ring.read_slot_at(slot, offset, dst)
        })
    }

    /// Returns the send queue's producer index if user space published a WQE the requester
    /// has not taken ([`QpShared::next_sq`]) and the index is not `seen`.
    pub(crate) fn sq_untaken(&self, seen: u32) -> Option<u32> {
        let index = self.next_sq.load(Relaxed) & self.sq_reader.geometry().mask;
        self.sq_reader
            .producer()
            .ok()
            .filter(|&p| p != index && p != seen)
    }

    /// Returns whether user space produced a send WQE in slot `index` (not if the producer
    /// index cannot be read).
    fn sq_produced(&self, index: u32) -> bool {
        let ring = &self.sq_reader;
        ring.producer()
            .is_ok_and(|p| p != index & ring.geometry().mask)
    }

    /// Returns whether the WQE user space produced in the slot the requester takes next is an
    /// RDMA READ or an atomic ([`QpShared::kick`]).
    ///
    /// A peek at one field of a ring user space writes: a wrong answer only changes where the
    /// doorbell's run happens; the run reads and checks the WQE as always.
    pub(crate) fn next_asks(&self) -> bool {
        let index = self.next_sq.load(Relaxed);
        let mut raw = [0u8; 4];
        self.sq_produced(index)
            && self
                .sq_reader
                .read_slot_at(index, SEND_WQE_OPCODE_OFFSET, &mut raw)
                .is_ok()
            && WrOpcode::from_raw(u32::from_ne_bytes(raw)).is_some_and(|op| op.is_read_or_atomic())
    }

    /// Returns the send queue slot after `index`.
    pub(crate) fn next_sq_index(&self, index: u32) -> u32 {
        self.sq_reader.geometry().next(index)
    }

    /// Frees the send queue slots before `index`: their WQEs are done.
    pub(crate) fn release_sq(&self, index: u32) {
        let _ = self.sq.lock().consumer.release_to(index);
    }

    /// Reads and checks the send WQE at `index`, if user space produced one there; returns
    /// how many bytes of `buf` (scratch space, whatever it holds) the copy takes, the request,
    /// and its local buffer if it is a single SGE.
    ///
    /// `None` leaves `buf` untouched; a WQE that cannot be copied is malformed.
    pub(crate) fn next_send_wr(
        &self,
        index: u32,
        buf: &mut [u8; MAX_SEND_WQE],
    ) -> Option<(usize, TakenSendWr)> {
        let limits = self.sq_limits;
        if !self.sq_produced(index) {
            return None;
        }
        let Ok(n) = self.read_send_wqe(index, buf) else {
            return Some((0, Err(())));
        };
        let wr = buf
            .get(..n)
            .ok_or(())
            .and_then(|b| decode_send_wqe(b, &limits).map_err(|_| ()))
            .map(|w| {
                let sge = match w.data {
                    WqeData::Sges([sge]) => Some(*sge),
                    _ => None,
                };
                (RoceSendWr::from_wqe(&w, index), sge)
            });
        Some((n, wr))
    }

    /// Returns the size of a receive queue slot (its own queue's or its SRQ's).
    pub(crate) fn rq_slot_size(&self) -> usize {
        self.rq_shape.0
    }

    /// Returns the SGEs a receive WQE may have.
    pub(crate) fn rq_max_sge(&self) -> u32 {
        self.rq_shape.1
    }

    /// Returns whether receive WQEs come from a shared receive queue.
    pub(crate) fn has_srq(&self) -> bool {
        self.srq.is_some()
    }

    /// Takes the next receive WQE into `dst`; `false` if there is none.
    pub(crate) fn pop_rq(&self, dst: &mut [u8]) -> bool {
        if let Some(srq) = &self.srq {
            return srq.take(dst);
        }
        match &mut *self.rq.lock() {
            Some(rq) => matches!(rq.consumer.pop(dst), Ok(true)),
            None => false,
        }
    }

    /// Checks a kernel consumer's send request as the C driver's `validate_send_wr` does.
    fn check_send(&self, wr: &SendWr<'_, Rxe>) -> Result {
        let (max_sge, max_inline) = {
            let sq = self.sq.lock();
            (sq.max_sge, sq.max_inline)
        };
        if wr.opcode == IbWrOpcode::RegMr {
            if self.qp_type != IbQpType::Rc {
                return Err(EINVAL);
            }
        } else {
            let op = WrOpcode::from_raw(wr.opcode.raw())
                .filter(|o| o.allowed_on(self.roce_type()))
                .ok_or_else(|| {
                    pr_debug!("WR opcode {:?} not allowed on this QP\n", wr.opcode);
                    EINVAL
                })?;
            let length: u64 = wr.sges.iter().map(|s| u64::from(s.length())).sum();
            let too_many = wr.sges.len() > max_sge as usize;
            let too_long = length > u64::from(param::PORT_MAX_MSG_SZ);
            let bad_atomic = match wr.detail {
                SendWrDetail::Atomic { remote_addr, .. } => length != 8 || remote_addr & 7 != 0,
                _ => false,
            };
            let inline = wr.send_flags.contains(SendFlags::INLINE);
            let bad_inline = inline && (!op.allows_inline() || length > u64::from(max_inline));
            if too_many || too_long || bad_atomic || bad_inline {
                pr_debug!("send WR refused (sges, length, atomic or inline)\n");
                return Err(EINVAL);
            }
        }
        Ok(())
    }

    /// Posts a kernel consumer's send request: its WQE goes into the send queue, which a run
    /// of the queue pair's work item then takes (any context: nothing here sleeps).
    ///
    /// In the error state it completes at once with `IB_WC_WR_FLUSH_ERR` (what `ib_drain_sq`
    /// relies on). Fails with `ENOMEM` if the send queue is full. Inline data is copied into
    /// the WQE here.
    pub(crate) fn post_send(this: ArcBorrow<'_, Self>, wr: &SendWr<'_, Rxe>) -> Result {
        let state = this.state();
        // As the C driver (C10-97.2.1 for receives): not before RTS. User space posts through
        // its ring and the doorbell.
        if state < QpState::Rts || this.user {
            return Err(EINVAL);
        }
        this.check_send(wr)?;
        if state == QpState::Err {
            return this.post_completion(&this.flushed(wr.wr_id), false, false);
        }
        let mut sges = [Sge::new(0, 0, 0); param::MAX_SGE as usize];
        let mut inline = [0u8; param::MAX_INLINE_DATA as usize];
        let data = if wr.send_flags.contains(SendFlags::INLINE) {
            // Copied now: the consumer may reuse its buffers once the post returns.
            let n = wr.copy_inline(&mut inline)?;
            WqeData::Inline(inline.get(..n).ok_or(EINVAL)?)
        } else {
            let sges = sges.get_mut(..wr.sges.len()).ok_or(EINVAL)?;
            for (dst, src) in sges.iter_mut().zip(wr.sges) {
                *dst = Sge::new(src.addr(), src.length(), src.lkey());
            }
            WqeData::Sges(sges)
        };
        let wqe = kernel_wqe(wr, data)?;
        {
            let mut slot = [0u8; MAX_SEND_WQE];
            let len = encode_send_wqe(&mut slot, &wqe).map_err(|e| {
                pr_debug!("send request refused: {:?}\n", e);
                EINVAL
            })?;
            let mut sq = this.sq.lock();
            let producer = sq.producer.as_mut().ok_or(EINVAL)?;
            if producer.is_full()? {
                return Err(ENOMEM);
            }
            producer.push(slot.get(..len).ok_or(EINVAL)?)?;
        }
        // The consumer may hold its own spinlocks, interrupts off: the work item runs it.
        Self::kick_later(this);
        Ok(())
    }

    /// Completes every queued request with `IB_WC_WR_FLUSH_ERR` (a queue pair in error).
    ///
    /// One request at a time: the completion handler runs without the queue's lock held, so
    /// it may post again. If a completion queue overflows (its owner gets `IB_EVENT_CQ_ERR`),
    /// the rest of that queue is dropped without completions, as the C driver does. A queue
    /// pair on a shared receive queue reports `IB_EVENT_QP_LAST_WQE_REACHED` instead: no
    /// further receive WQE will be taken for it.
    fn flush(&self) {
        let mut complete = true;
        loop {
            let mut b = [0u8; param::RECV_WQE_SIZE];
            let popped = match &mut *self.rq.lock() {
                Some(rq) => rq.consumer.pop(&mut b),
                None => {
                    self.handle.event(QpEvent::LastWqeReached);
                    Ok(false)
                }
            };
            if !matches!(popped, Ok(true)) {
                break;
            }
            if complete {
                let wc = self.flushed(recv_wqe_id(&b).unwrap_or(0));
                complete = self.post_completion(&wc, true, false).is_ok();
            }
        }
        // The malformed WQE that failed the queue pair, if any, is the oldest left.
        self.complete_bad_wqe();
        let mut complete = true;
        loop {
            let mut b = [0u8; param::SEND_WQE_SIZE];
            if !matches!(self.sq.lock().consumer.pop(&mut b), Ok(true)) {
                break;
            }
            if complete {
                let (wr_id, _) = send_wqe_id(&b).unwrap_or((0, 0));
                let wc = self.flushed(wr_id);
                complete = self.post_completion(&wc, false, false).is_ok();
            }
        }
    }

    /// The completion of a flushed request: as the C driver's, only the id, the status and
    /// the QP (the opcode of an error completion is undefined; it reports 0).
    fn flushed(&self, wr_id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status: WcStatus::WrFlushErr,
            qp_num: self.qpn.load(Relaxed),
            ..Default::default()
        }
    }

    /// Forgets every queued request without completing it (a queue pair reset).
    fn discard(&self) {
        self.bad_wqe.store(NO_BAD_WQE, Release);
        self.sq.lock().discard();
        if let Some(rq) = &mut *self.rq.lock() {
            rq.discard();
        }
    }
}

/// Describes a kernel consumer's send request `wr`, checked by `check_send`, with its
/// data (buffers, or the inline bytes), as a send WQE.
fn kernel_wqe<'a>(wr: &SendWr<'_, Rxe>, data: WqeData<'a>) -> Result<SendWqe<'a>> {
    let opcode = match wr.opcode {
        IbWrOpcode::RegMr => WrOpcode::RegMr,
        o => WrOpcode::from_raw(o.raw()).ok_or(EINVAL)?,
    };
    let length = match data {
        WqeData::Sges(sges) => sges
            .iter()
            .try_fold(0u32, |n, s| n.checked_add(s.length()))
            .ok_or(EINVAL)?,
        WqeData::Inline(bytes) => u32::try_from(bytes.len()).map_err(|_| EINVAL)?,
    };
    // `ex` holds the immediate data as it goes on the wire (big-endian in memory), or a key.
    let imm_data = matches!(opcode, WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm)
        .then(|| u32::from_be_bytes(wr.ex.to_ne_bytes()));
    let invalidate_rkey = (opcode == WrOpcode::SendWithInv).then_some(wr.ex);
    let remote = match (&wr.detail, opcode) {
        (_, WrOpcode::LocalInv) => Remote::LocalInv { rkey: wr.ex },
        (SendWrDetail::Rdma { remote_addr, rkey }, _) => Remote::Rdma {
            addr: *remote_addr,
            rkey: *rkey,
        },
        (
            SendWrDetail::Atomic {
                remote_addr,
                compare_add,
                swap,
                rkey,
            },
            _,
        ) => Remote::Atomic {
            addr: *remote_addr,
            rkey: *rkey,
            compare_add: *compare_add,
            swap: *swap,
        },
        (
            SendWrDetail::Ud {
                ah,
                remote_qpn,
                remote_qkey,
            },
            _,
        ) => Remote::Ud {
            remote_qpn: *remote_qpn & 0x00ff_ffff,
            remote_qkey: *remote_qkey,
            ah_num: ah.number(),
        },
        (SendWrDetail::None, _) => Remote::None,
        (SendWrDetail::Reg { mr, key, access }, _) => Remote::RegMr(Registration {
            mr_key: mr.key(),
            key: *key,
            access: access.bits(),
            iova: mr.iova(),
            length: mr.length(),
        }),
    };
    Ok(SendWqe {
        wr_id: wr.wr_id,
        opcode,
        flags: RoceSendFlags::from_bits(wr.send_flags.bits()),
        imm_data,
        invalidate_rkey,
        remote,
        data,
        length,
    })
}

/// The attributes `modify_qp` sets and `query_qp` reports.
struct KeptAttr {
    attr: QpAttrCopy,
    /// Where the packets go, from the last primary address vector (RC, UC).
    path: Path,
}

/// A queue pair.
#[pin_data]
pub(crate) struct RxeQp {
    shared: Arc<QpShared>,
    sq_sig_all: bool,
    max_send: (u32, u32, u32),
    max_recv: Option<(u32, u32)>,
    #[pin]
    state: Mutex<KeptAttr>,
    qpn: Index<QpShared, RcuXArray<Arc<QpShared>>>,
    /// The rings offered to user space for mapping (send, receive).
    _offers: (Offer, Option<Offer>),
    _count: ObjectCount,
}

/// Checks requested capabilities against the device's limits (as `rxe_qp_chk_cap`).
fn check_cap(cap: &QpCap, has_srq: bool) -> Result {
    let ok = cap.max_send_wr <= param::MAX_QP_WR as u32
        && cap.max_send_sge <= param::MAX_SGE as u32
        && (has_srq
            || (cap.max_recv_wr <= param::MAX_QP_WR as u32
                && cap.max_recv_sge <= param::MAX_SGE as u32))
        && cap.max_inline_data <= param::MAX_INLINE_DATA as u32;
    if ok {
        Ok(())
    } else {
        pr_debug!("QP capabilities over the device's limits\n");
        Err(EINVAL)
    }
}

#[vtable]
impl QpOps for RxeQp {
    type Driver = Rxe;

    fn create(
        dev: &Device<Rxe>,
        pd: &Pd<Rxe>,
        init: &mut QpInitAttr,
        handle: QpHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewQp<impl PinInit<Self, Error>>> {
        Self::new(dev, pd, init, handle, udata)
    }

    fn modify(qp: &Qp<Rxe>, attr: &QpAttr<'_>, _udata: &mut UData<'_, Rxe>) -> Result {
        let dev = qp.device();
        // A netdevice that unregistered sends nothing any more: the smallest MTU will do for
        // what is left (a modify to the error state, as a kernel consumer's drain makes).
        let port_mtu = dev
            .engine
            .with_netdev(|ndev| ib_mtu_for_netdev_mtu(ndev.mtu()))
            .unwrap_or(IbMtu::Mtu256);
        qp.modify(attr, &dev.engine, port_mtu)
    }

    fn query(qp: &Qp<Rxe>, _mask: QpAttrMask) -> Result<QpReport> {
        Ok(qp.query())
    }

    fn destroy(qp: &Qp<Rxe>) {
        qp.destroy()
    }

    fn attach_mcast(qp: &Qp<Rxe>, mgid: &[u8; 16]) -> Result {
        mcast::attach(qp.device(), qp, mgid)
    }

    fn detach_mcast(qp: &Qp<Rxe>, mgid: &[u8; 16]) -> Result {
        mcast::detach(qp.device(), qp, mgid)
    }

    fn post_send(qp: &Qp<Rxe>, wr: &SendWr<'_, Rxe>) -> Result {
        QpShared::post_send(qp.shared.as_arc_borrow(), wr)
    }

    fn post_send_doorbell(qp: &Qp<Rxe>) -> Result {
        qp.doorbell()
    }

    fn post_recv(qp: &Qp<Rxe>, wr: &RecvWr<'_>) -> Result {
        qp.shared.post_recv(wr)
    }
}

impl RxeQp {
    /// Creates a queue pair on `dev` as `init` describes; returns it with its number.
    fn new(
        dev: &Device<Rxe>,
        pd: &Pd<Rxe>,
        init: &mut QpInitAttr,
        handle: QpHandle,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewQp<impl PinInit<Self, Error>>> {
        let ctx = if udata.is_user() {
            if udata.inlen() != 0 {
                pr_debug!("create_qp with driver input\n");
                return Err(EINVAL);
            }
            if udata.outlen() < core::mem::size_of::<CreateQpResp>() {
                pr_debug!("create_qp response too small ({})\n", udata.outlen());
                return Err(EINVAL);
            }
            udata.ucontext()
        } else {
            None
        };
        if init.create_flags() != 0 {
            return Err(EOPNOTSUPP);
        }
        let qp_type = match init.qp_type() {
            Some(t @ (IbQpType::Gsi | IbQpType::Rc | IbQpType::Uc | IbQpType::Ud)) => t,
            _ => return Err(EOPNOTSUPP),
        };
        let gsi = qp_type == IbQpType::Gsi;
        if !init.has_cqs() {
            pr_debug!("create_qp without a completion queue\n");
            return Err(EINVAL);
        }
        let has_srq = init.has_srq();
        check_cap(&init.cap(), has_srq)?;
        if gsi && init.port_num() != param::PORT {
            return Err(EINVAL);
        }

        let user = ctx.is_some();
        let send_cq = init.send_cq(dev).ok_or(EINVAL)?.core().clone();
        let recv_cq = init.recv_cq(dev).ok_or(EINVAL)?.core().clone();
        let srq = if init.has_srq() {
            let srq = init.srq(dev).ok_or(EINVAL)?;
            // A queue pair and its shared receive queue are of one domain, as the IBA asks
            // (the C driver does not check).
            if !srq.is_in(pd) {
                pr_debug!("create_qp on an SRQ of another PD\n");
                return Err(EINVAL);
            }
            Some(srq.core().clone())
        } else {
            None
        };
        let count = dev.qps.take()?;

        // Send queue: a WQE holds its SGEs or its inline data, whichever is larger.
        let cap = init.cap();
        let data = (cap.max_send_sge * SGE_SIZE).max(cap.max_inline_data);
        let (sq, sq_offer) = WorkQueue::new(
            cap.max_send_wr,
            data / SGE_SIZE,
            data,
            param::SEND_WQE_SIZE + data as usize,
            ctx,
        )?;
        let (rq, rq_offer) = if has_srq {
            (None, None)
        } else {
            let (rq, offer) = WorkQueue::new(
                cap.max_recv_wr,
                cap.max_recv_sge,
                0,
                param::RECV_WQE_SIZE + (cap.max_recv_sge * SGE_SIZE) as usize,
                ctx,
            )?;
            (Some(rq), Some(offer))
        };
        if ctx.is_some() {
            udata.respond(&CreateQpResp {
                rq_mi: rq_offer.as_ref().map_or(MmInfo::default(), |o| o.mminfo),
                sq_mi: sq_offer.mminfo,
            })?;
        }

        // The capabilities really given, which may exceed those asked for.
        let mut given = cap;
        given.max_send_wr = sq.max_wr;
        given.max_send_sge = sq.max_sge;
        given.max_inline_data = sq.max_inline;
        if let Some(rq) = &rq {
            given.max_recv_wr = rq.max_wr;
        }
        init.set_cap(given);
        let max_send = (sq.max_wr, sq.max_sge, sq.max_inline);
        let sq_reader = sq.consumer.reader();
        let sq_limits = SendQueueLimits {
            qp_type: roce_type(qp_type),
            max_sge: sq.max_sge,
            max_inline: sq.max_inline,
            kernel: !user,
        };
        let max_recv = rq.as_ref().map(|rq| (rq.max_wr, rq.max_sge));
        let rq_shape = match (&rq, &srq) {
            (Some(rq), _) => (rq.consumer.geometry().slot_size(), rq.max_sge),
            (None, Some(srq)) => (srq.slot_size(), srq.max_sge()),
            (None, None) => (0, 0),
        };

        let shared = Arc::pin_init(
            try_pin_init!(QpShared {
                qp_type,
                qpn: AtomicU32::new(0),
                serial: dev.engine.next_qp_serial(),
                dev_index: dev.index(),
                state: AtomicU32::new(QpState::Reset as u32),
                sq_drain: AtomicU32::new(0),
                bad_wqe: AtomicU32::new(NO_BAD_WQE),
                doorbell_mark: AtomicU64::new(0),
                psns: AtomicU64::new(NO_PSNS),
                many_outstanding: AtomicBool::new(false),
                asks: AtomicBool::new(false),
                next_sq: AtomicU32::new(0),
                linger_seen: AtomicU32::new(u32::MAX),
                user,
                pd: pd.as_raw() as usize,
                handle,
                sq_reader,
                sq_limits,
                send_cq,
                recv_cq,
                srq,
                rq_shape,
                sq <- new_spinlock_irq!(sq),
                rq <- new_spinlock_irq!(rq),
                transport <- new_spinlock!(None),
                timer <- new_delayed_work!("rdma_rxe_rust::QpShared::timer"),
                run <- new_work!("rdma_rxe_rust::QpShared::run"),
                receive <- new_work!("rdma_rxe_rust::QpShared::receive"),
                fault_work <- new_work!("rdma_rxe_rust::QpShared::fault_work"),
                in_flight: InFlight::new(&crate::THIS_MODULE, param::SKBS_IN_FLIGHT_RESUME),
                inbox <- new_spinlock_irq!(Inbox::default()),
                engine: dev.engine.clone(),
            }),
            GFP_KERNEL,
        )?;
        let qpn = if gsi {
            dev.qp_table.insert_at(GSI_QPN, shared.clone())?
        } else {
            dev.qp_table.insert(shared.clone(), GFP_KERNEL)?
        };
        shared.qpn.store(qpn.get(), Relaxed);

        let mut attr = QpAttrCopy::default();
        attr.update(|a| {
            a.qp_state = QpState::Reset as u32;
            a.cur_qp_state = QpState::Reset as u32;
            a.path_mtu = IbMtu::Mtu256.raw();
            a.port_num = param::PORT;
            if gsi {
                a.qkey = QP1_QKEY;
            }
        });
        let number = qpn.get();
        let sq_sig_all = init.sq_sig_all();
        Ok(NewQp {
            init: try_pin_init!(Self {
                shared,
                sq_sig_all,
                max_send,
                max_recv,
                state <- new_mutex!(KeptAttr {
                    attr,
                    path: Path::default(),
                }),
                qpn,
                _offers: (sq_offer, rq_offer),
                _count: count,
            }),
            qpn: number,
        })
    }

    /// Applies `attr` (the attributes in its mask), after checking the transition and every
    /// value.
    fn modify(&self, attr: &QpAttr<'_>, engine: &Engine, port_mtu: IbMtu) -> Result {
        let mask = attr.mask();
        if !mask.is_standard() {
            return Err(EOPNOTSUPP);
        }
        let bad_state = || {
            pr_debug!("QP state out of range\n");
            EINVAL
        };
        let mut st = self.state.lock();
        let cur = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state().ok_or_else(bad_state)?
        } else {
            self.shared.state()
        };
        let next = if mask.contains(QpAttrMask::STATE) {
            attr.qp_state().ok_or_else(bad_state)?
        } else {
            cur
        };
        let qp_type = self.shared.qp_type;
        if !modify_qp_is_ok(cur, next, qp_type, mask) {
            pr_debug!(
                "illegal QP transition {:?} -> {:?} with mask {:#x}\n",
                cur,
                next,
                mask.bits()
            );
            return Err(EINVAL);
        }
        // As `rxe_qp_chk_attr`: out of SQD only once drained, or to ERR.
        if cur == QpState::Sqd
            && !matches!(next, QpState::Sqd | QpState::Err)
            && self.shared.sq_drain.load(Acquire) != 0
        {
            pr_debug!("QP leaves SQD while its send queue drains\n");
            return Err(EINVAL);
        }
        check_attr(attr, qp_type)?;
        st.attr.update(|dst| apply(dst, attr));
        // The source GID is lent for this call only: keep the path now.
        if let Some(path) = attr.ah_attr().and_then(Path::from_ah_attr) {
            st.path = path;
            if let Some(t) = (*self.shared.transport.lock()).as_mut() {
                t.set_path(path);
            }
        }
        let shared = &self.shared;
        if next != cur {
            match next {
                QpState::Rtr => {
                    let sq_read = shared.sq.lock().consumer.index();
                    // Where the requester takes its next WQE, for the doorbell's look at the
                    // ring ([`QpShared::kick`]).
                    shared.next_sq.store(sq_read, Relaxed);
                    let t = Transport::new(
                        shared,
                        self.sq_sig_all,
                        &st.attr,
                        port_mtu,
                        sq_read,
                        st.path,
                    )?;
                    shared.note_psns(Some(&t));
                    *shared.transport.lock() = Some(t);
                }
                QpState::Rts if cur == QpState::Rtr => {
                    if let Some(t) = (*shared.transport.lock()).as_mut() {
                        t.start(shared, self.sq_sig_all, &st.attr, port_mtu)?;
                        shared.note_psns(Some(t));
                    }
                }
                _ => (),
            }
        }
        if next == QpState::Sqd && cur == QpState::Rts {
            let drain = if st.attr.get().en_sqd_async_notify != 0 {
                SQ_DRAINING_NOTIFY
            } else {
                SQ_DRAINING
            };
            shared.sq_drain.store(drain, Release);
        } else if next != QpState::Sqd {
            shared.sq_drain.store(0, Release);
        }
        shared.state.store(next as u32, Release);
        if next == QpState::Sqd && cur == QpState::Rts {
            // A run ends the drain once nothing is outstanding, which may be at once.
            QpShared::kick_later(shared.as_arc_borrow());
        }
        if next == QpState::Err {
            // What the transport holds first, then what is still in the rings.
            engine.fail(shared);
            shared.flush();
        } else if next == QpState::Reset {
            // Dropped after the unlock.
            let old = shared.transport.lock().take();
            shared.note_psns(None);
            shared.retire_transport(old);
            shared.discard();
        } else if next == QpState::Rts && cur != QpState::Rts {
            // WQEs posted while the queue pair could not send (SQD; a user post before RTS,
            // whose doorbell failed) have had their doorbell: a run takes them now.
            QpShared::kick_later(shared.as_arc_borrow());
        }
        Ok(())
    }

    /// Rings the send doorbell of a user queue pair: runs it here ([`QpShared::kick`]).
    fn doorbell(&self) -> Result {
        let shared = &self.shared;
        if !shared.user || shared.state() < QpState::Rts {
            return Err(EINVAL);
        }
        if shared.state() == QpState::Err {
            shared.flush();
            return Ok(());
        }
        shared.kick();
        Ok(())
    }

    /// Returns the QP number.
    pub(crate) fn number(&self) -> u32 {
        self.qpn.get()
    }

    /// Stops the transport: when `destroy_qp` returns, nothing runs it any more.
    ///
    /// A queue pair attached to a multicast group never gets here: the core counts the
    /// attachments in its use count and refuses the destroy first (IBA o10-2.2.3).
    fn destroy(&self) {
        self.shared.drain();
        // Waits for a run that is using it; dropped after the unlock.
        let old = self.shared.transport.lock().take();
        self.shared.retire_transport(old);
        // Only a run with the transport sets the timer: a pending one fires now and schedules
        // nothing. The number leaves the table (after a grace period) when `RxeQp` drops.
        self.shared.stop();
        self.shared.wait_in_flight();
    }

    /// Reports the attributes and the creation parameters.
    fn query(&self) -> QpReport {
        let mut attr = self.state.lock().attr;
        // The transport may have moved the queue pair to ERR since the last modify.
        let state = self.shared.state() as u32;
        let (max_send_wr, max_send_sge, max_inline_data) = self.max_send;
        let (max_recv_wr, max_recv_sge) = self.max_recv.unwrap_or((0, 0));
        let cap = QpCap {
            max_send_wr,
            max_send_sge,
            max_inline_data,
            max_recv_wr,
            max_recv_sge,
            max_rdma_ctxs: 0,
        };
        let draining = self.shared.is_draining();
        // The PSNs now, not those of the last modify, as `rxe_qp_to_attr` reports them.
        let psns = self.shared.published_psns();
        attr.update(|a| {
            a.qp_state = state;
            a.cur_qp_state = state;
            a.cap = cap.into();
            a.sq_draining = u8::from(draining);
            if let Some(p) = psns {
                a.rq_psn = p.rq;
                a.sq_psn = p.sq;
            }
        });
        QpReport {
            attr,
            init: QpInitInfo {
                qp_type: self.shared.qp_type,
                port_num: param::PORT,
                cap,
                sq_sig_all: self.sq_sig_all,
            },
        }
    }
}

/// [`QpShared::sq_drain`]: the send queue drains, and its end is not reported.
const SQ_DRAINING: u32 = 1;
/// [`QpShared::sq_drain`]: the send queue drains, and its end is reported as an event.
const SQ_DRAINING_NOTIFY: u32 = 2;

/// Checks the values of a modify request (as `rxe_qp_chk_attr`).
fn check_attr(attr: &QpAttr<'_>, qp_type: IbQpType) -> Result {
    let bad = attr.port_num().is_some_and(|p| p != param::PORT)
        || attr.cap().is_some_and(|c| check_cap(&c, false).is_err())
        || attr.qp_access_flags().is_some_and(|a| {
            !matches!(qp_type, IbQpType::Rc | IbQpType::Uc)
                || !AccessFlags::from_bits_retain(a as u32)
                    .difference(param::ACCESS_SUPPORTED_QP)
                    .is_empty()
        })
        || attr.ah_attr().is_some_and(|ah| check_av(ah).is_err())
        || attr.alt_ah_attr().is_some_and(|ah| check_av(ah).is_err())
        || attr.alt_port_num().is_some_and(|p| p != param::PORT)
        || attr.alt_timeout().is_some_and(|t| t > 31)
        || attr.path_mtu().is_some_and(|m| m > IbMtu::Mtu4096.raw())
        || attr
            .max_rd_atomic()
            .is_some_and(|n| u32::from(n) > param::MAX_QP_INIT_RD_ATOM as u32)
        // The responder keeps a response for each READ or atomic it takes outstanding.
        || attr
            .max_dest_rd_atomic()
            .is_some_and(|n| u32::from(n) > param::MAX_QP_RD_ATOM as u32)
        || attr.timeout().is_some_and(|t| t > 31);
    if bad {
        pr_debug!("bad QP attributes (mask {:#x})\n", attr.mask().bits());
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks an address vector: RoCE needs a global route with a valid source GID index.
fn check_av(ah: &AhAttr) -> Result {
    if !ah.has_grh() {
        return Err(EINVAL);
    }
    if u32::from(ah.global_route().sgid_index) >= param::PORT_GID_TBL_LEN as u32 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Copies the attributes of `src`'s mask (as `rxe_qp_from_attr`).
fn apply(dst: &mut QpAttrFields, src: &QpAttr<'_>) {
    if let Some(s) = src.cur_qp_state() {
        dst.cur_qp_state = s as u32;
    }
    if let Some(s) = src.qp_state() {
        dst.qp_state = s as u32;
        dst.cur_qp_state = s as u32;
    }
    if let Some(n) = src.max_rd_atomic() {
        dst.max_rd_atomic = round_atomic(n);
    }
    if let Some(n) = src.max_dest_rd_atomic() {
        dst.max_dest_rd_atomic = round_atomic(n);
    }
    if let Some(v) = src.en_sqd_async_notify() {
        dst.en_sqd_async_notify = v;
    }
    if let Some(v) = src.qp_access_flags() {
        dst.qp_access_flags = v;
    }
    if let Some(v) = src.pkey_index() {
        dst.pkey_index = v;
    }
    if let Some(v) = src.port_num() {
        dst.port_num = v;
    }
    if let Some(v) = src.qkey() {
        dst.qkey = v;
    }
    if let Some(ah) = src.ah_attr() {
        dst.ah_attr = ah.to_raw();
    }
    if let Some(ah) = src.alt_ah_attr() {
        dst.alt_ah_attr = ah.to_raw();
    }
    if let Some(v) = src.alt_port_num() {
        dst.alt_port_num = v;
    }
    if let Some(v) = src.alt_pkey_index() {
        dst.alt_pkey_index = v;
    }
    if let Some(v) = src.alt_timeout() {
        dst.alt_timeout = v;
    }
    if let Some(v) = src.path_mtu() {
        dst.path_mtu = v;
    }
    if let Some(v) = src.timeout() {
        dst.timeout = v;
    }
    if let Some(v) = src.retry_cnt() {
        dst.retry_cnt = v;
    }
    if let Some(v) = src.rnr_retry() {
        dst.rnr_retry = v;
    }
    if let Some(v) = src.rq_psn() {
        dst.rq_psn = v & 0x00ff_ffff;
    }
    if let Some(v) = src.min_rnr_timer() {
        dst.min_rnr_timer = v;
    }
    if let Some(v) = src.sq_psn() {
        dst.sq_psn = v & 0x00ff_ffff;
    }
    if let Some(v) = src.path_mig_state() {
        dst.path_mig_state = v;
    }
    if let Some(v) = src.dest_qp_num() {
        dst.dest_qp_num = v;
    }
}

/// Rounds a read/atomic depth up to a power of two, as the C driver stores it.
fn round_atomic(n: u8) -> u8 {
    if n == 0 {
        0
    } else {
        n.checked_next_power_of_two().unwrap_or(128)
    }
}

#[kunit_tests(rdma_rxe_rust_qp)]
mod tests {
    use super::*;
    use IbQpType::{
        Rc as RC,
        Ud as UD, //
    };
    use QpState::{
        Err as ERR,
        Init as INIT,
        Reset as RESET,
        Rtr as RTR,
        Rts as RTS, //
    };

    const ACCESS: QpAttrMask = QpAttrMask::ACCESS_FLAGS;
    const AV: QpAttrMask = QpAttrMask::AV;
    const DEST_QPN: QpAttrMask = QpAttrMask::DEST_QPN;
    const MAX_DEST_RD_ATOMIC: QpAttrMask = QpAttrMask::MAX_DEST_RD_ATOMIC;
    const MAX_RD_ATOMIC: QpAttrMask = QpAttrMask::MAX_QP_RD_ATOMIC;
    const MIN_RNR_TIMER: QpAttrMask = QpAttrMask::MIN_RNR_TIMER;
    const PATH_MTU: QpAttrMask = QpAttrMask::PATH_MTU;
    const PKEY: QpAttrMask = QpAttrMask::PKEY_INDEX;
    const PORT: QpAttrMask = QpAttrMask::PORT;
    const QKEY: QpAttrMask = QpAttrMask::QKEY;
    const RETRY_CNT: QpAttrMask = QpAttrMask::RETRY_CNT;
    const RNR_RETRY: QpAttrMask = QpAttrMask::RNR_RETRY;
    const RQ_PSN: QpAttrMask = QpAttrMask::RQ_PSN;
    const SQ_PSN: QpAttrMask = QpAttrMask::SQ_PSN;
    const STATE: QpAttrMask = QpAttrMask::STATE;
    const TIMEOUT: QpAttrMask = QpAttrMask::TIMEOUT;

    #[test]
    fn rc_path_to_rts_needs_the_ibta_attributes() {
        assert!(modify_qp_is_ok(
            RESET,
            INIT,
            RC,
            STATE | PKEY | PORT | ACCESS
        ));
        assert!(!modify_qp_is_ok(RESET, INIT, RC, STATE | PKEY | PORT));
        let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
        assert!(modify_qp_is_ok(INIT, RTR, RC, rtr));
        assert!(!modify_qp_is_ok(INIT, RTR, RC, rtr & !AV));
        let rts = STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_RD_ATOMIC;
        assert!(modify_qp_is_ok(RTR, RTS, RC, rts));
        // QKEY is not an RC attribute.
        assert!(!modify_qp_is_ok(RTR, RTS, RC, rts | QKEY));
    }

    #[test]
    fn illegal_transitions_are_refused() {
        assert!(!modify_qp_is_ok(RESET, RTR, RC, STATE));
        assert!(!modify_qp_is_ok(RESET, RTS, UD, STATE));
        assert!(!modify_qp_is_ok(INIT, RTS, RC, STATE | SQ_PSN));
        // Any state may go to error or reset.
        assert!(modify_qp_is_ok(RTS, ERR, RC, STATE));
        assert!(modify_qp_is_ok(RTR, RESET, UD, STATE));
    }

    #[test]
    fn ud_needs_qkey_not_access_flags() {
        assert!(modify_qp_is_ok(RESET, INIT, UD, STATE | PKEY | PORT | QKEY));
        assert!(!modify_qp_is_ok(
            RESET,
            INIT,
            UD,
            STATE | PKEY | PORT | ACCESS
        ));
    }

    #[test]
    fn read_atomic_depths_round_up_to_powers_of_two() {
        assert_eq!(round_atomic(0), 0);
        assert_eq!(round_atomic(1), 1);
        assert_eq!(round_atomic(3), 4);
        assert_eq!(round_atomic(128), 128);
        assert_eq!(round_atomic(200), 128);
    }
}
