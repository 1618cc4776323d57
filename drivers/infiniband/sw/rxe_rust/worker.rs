// SPDX-License-Identifier: GPL-2.0

//! The device's worker: all protocol processing, in process context, one queue pair at a time.
//!
//! A user doorbell (process context) processes right away unless a run is in progress; the work
//! item does the rest (timers, a doorbell that found the worker busy). A run feeds send WQEs to
//! the transports, delivers packets (loopback: the destination is this device) and runs expired
//! timers. One run at a time per device serialises its queue pairs' transports.

use crate::{
    ah::AhTable,
    mr::MrTable,
    qp::{
        QpShared,
        QpTable, //
    },
    roce::{
        io::TimerId,
        packet::Packet as RocePacket,
        qp::TransportState,
        wqe::Remote, //
    },
    stats::{
        Counter,
        Counters, //
    },
    transport::{
        with_io,
        Env,
        Packet,
        Transport, //
    },
};
use core::sync::atomic::{
    AtomicBool,
    Ordering::Relaxed, //
};
use kernel::{
    impl_has_work, new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{
        Arc,
        Mutex,
        SpinLockIrq, //
    },
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
    workqueue::{
        self,
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork,
        Work,
        WorkItem, //
    },
};

/// What waits for the worker.
#[derive(Default)]
struct Pending {
    /// Queue pairs whose send queue has new WQEs.
    kicked: KVec<u32>,
    /// Packets for this device.
    packets: KVec<Packet>,
    /// Queue pairs with an armed timer.
    timed: KVec<u32>,
}

/// The worker of one device.
#[pin_data]
pub(crate) struct Worker {
    #[pin]
    work: Work<Worker>,
    /// Wakes the worker when the earliest timer of a queue pair expires.
    #[pin]
    tick: DelayedWork<Worker, 1>,
    #[pin]
    pending: SpinLockIrq<Pending>,
    /// Held while processing: one run at a time, so transports run one at a time.
    #[pin]
    runner: Mutex<()>,
    qps: Arc<QpTable>,
    mrs: Arc<MrTable>,
    ahs: Arc<AhTable>,
    counters: Arc<Counters>,
    mac: [u8; 6],
    origin: Instant<Monotonic>,
    /// Set when the device goes, under the `pending` lock: nothing is queued after that.
    dying: AtomicBool,
}

impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 1> for Worker { self.tick }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        let guard = this.runner.lock();
        this.process();
        drop(guard);
        this.arm_tick();
    }
}

impl WorkItem<1> for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        // All processing stays in the main work item, which never runs twice at once.
        this.schedule();
    }
}

impl Worker {
    /// Creates the worker of a device with these tables.
    pub(crate) fn new(
        qps: Arc<QpTable>,
        mrs: Arc<MrTable>,
        ahs: Arc<AhTable>,
        counters: Arc<Counters>,
        mac: [u8; 6],
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("rdma_rxe_rust::Worker::work"),
                tick <- new_delayed_work!("rdma_rxe_rust::Worker::tick"),
                pending <- new_spinlock_irq!(Pending::default()),
                runner <- new_mutex!(()),
                qps,
                mrs,
                ahs,
                counters,
                mac,
                origin: Instant::now(),
                dying: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Nanoseconds since the worker was made: the transports' clock.
    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(0)
    }

    /// Processes the send queue of QP `qpn` now, in the caller's (process) context, unless
    /// a run is in progress elsewhere: then the work item does it.
    ///
    /// Running in the doorbell's context makes a loopback send complete before `post_send`
    /// returns, as with the C driver, and saves a context switch.
    pub(crate) fn kick(self: &Arc<Self>, qpn: u32) -> Result {
        self.pending.lock().kicked.push(qpn, GFP_ATOMIC)?;
        match self.runner.try_lock() {
            Some(guard) => {
                self.process();
                drop(guard);
                self.arm_tick();
            }
            // The running one may have looked at the queue already: queue the work item.
            None => self.schedule(),
        }
        Ok(())
    }

    fn schedule(self: &Arc<Self>) {
        // Under the lock `stop` sets `dying` under: once it is set, nothing is queued.
        let _guard = self.pending.lock();
        if !self.dying.load(Relaxed) {
            // Already queued is fine: that run will see what was just added.
            let _ = workqueue::system_dfl().enqueue::<Arc<Self>, 0>(self.clone());
        }
    }

    /// Stops the worker for good and waits for a run in progress (the device goes): when
    /// this returns, neither work item is queued or running, and none will be.
    pub(crate) fn stop(&self) {
        // Both items are queued only under this lock, after checking `dying`: a run or a tick
        // in progress can no longer queue the other (or itself) once this is set.
        {
            let _guard = self.pending.lock();
            self.dying.store(true, Relaxed);
        }
        // A pending tick runs now (and queues nothing); a running one finishes. Then the
        // main item, queued or running, finishes. Neither can be queued again meanwhile.
        self.tick.flush();
        self.work.flush();
    }

    /// Schedules the tick for the earliest armed timer of any queue pair.
    fn arm_tick(self: &Arc<Self>) {
        let timed = core::mem::take(&mut self.pending.lock().timed);
        let mut earliest: Option<u64> = None;
        let mut still = KVec::new();
        for qpn in timed.iter() {
            let Some(qp) = self.qps.get(*qpn) else {
                continue;
            };
            let deadline = (*qp.transport.lock())
                .as_ref()
                .and_then(|t| t.timers.iter().flatten().copied().min());
            if let Some(d) = deadline {
                earliest = Some(earliest.map_or(d, |e| e.min(d)));
                let _ = still.push(*qpn, GFP_KERNEL);
            }
        }
        {
            let mut p = self.pending.lock();
            for qpn in still {
                if !p.timed.contains(&qpn) {
                    let _ = p.timed.push(qpn, GFP_ATOMIC);
                }
            }
        }
        let Some(deadline) = earliest else {
            return;
        };
        let ms = deadline.saturating_sub(self.now()).div_ceil(1_000_000);
        let delay = msecs_to_jiffies(u32::try_from(ms).unwrap_or(u32::MAX)).max(1);
        // Under the lock `stop` sets `dying` under (see `schedule`).
        let _guard = self.pending.lock();
        if self.dying.load(Relaxed) {
            return;
        }
        // Already pending: that tick comes first or soon enough (it re-arms).
        let _ = workqueue::system_dfl().enqueue_delayed::<Arc<Self>, 1>(self.clone(), delay);
    }

    /// Notes that `qp` has armed timers, for the tick.
    fn note_timers(&self, qp: &QpShared, t: &Transport) {
        if t.timers.iter().all(Option::is_none) {
            return;
        }
        let qpn = qp.number();
        let mut p = self.pending.lock();
        if !p.timed.contains(&qpn) {
            let _ = p.timed.push(qpn, GFP_ATOMIC);
        }
    }

    /// Runs the expired timers of the queue pairs that armed one; returns whether any ran.
    fn run_timers(&self, tx: &mut KVec<u8>, out: &mut KVec<Packet>) -> bool {
        let timed = {
            let p = self.pending.lock();
            let mut v = KVec::new();
            if v.extend_from_slice(&p.timed, GFP_ATOMIC).is_err() {
                return false;
            }
            v
        };
        let now = self.now();
        let mut ran = false;
        for qpn in timed.iter() {
            let Some(qp) = self.qps.get(*qpn) else {
                continue;
            };
            let mut guard = qp.transport.lock();
            let Some(t) = (*guard).as_mut() else {
                continue;
            };
            let due: [bool; 2] = [
                t.timers[0].is_some_and(|d| d <= now),
                t.timers[1].is_some_and(|d| d <= now),
            ];
            for (i, id) in [TimerId::Retransmit, TimerId::RnrRetry]
                .into_iter()
                .enumerate()
            {
                if !due[i] {
                    continue;
                }
                t.timers[i] = None;
                ran = true;
                let env = self.env(&qp);
                let failed = with_io(t, &env, tx, out, |roce, mem, io| {
                    roce.on_timer(id, mem, io);
                    roce.state() == TransportState::Error
                });
                if failed {
                    qp.enter_error();
                }
            }
        }
        ran
    }

    fn env<'a>(&'a self, qp: &'a QpShared) -> Env<'a> {
        Env {
            shared: qp,
            mrs: &self.mrs,
            ahs: &self.ahs,
            counters: &self.counters,
            own_mac: self.mac,
            now: self.now(),
        }
    }

    /// Processes until nothing waits.
    fn process(&self) {
        let mut tx = KVec::new();
        let mut timers_checked = false;
        loop {
            let (kicked, packets) = {
                let mut p = self.pending.lock();
                (
                    core::mem::take(&mut p.kicked),
                    core::mem::take(&mut p.packets),
                )
            };
            let mut out = KVec::new();
            if kicked.is_empty() && packets.is_empty() {
                if timers_checked || !self.run_timers(&mut tx, &mut out) {
                    break;
                }
                timers_checked = true;
            }
            for qpn in kicked.iter() {
                if let Some(qp) = self.qps.get(*qpn) {
                    self.send(&qp, &mut tx, &mut out);
                }
            }
            let mut touched = KVec::new();
            for pkt in packets.iter() {
                if let Some(qpn) = self.receive(pkt, &mut tx, &mut out) {
                    if !touched.contains(&qpn) {
                        let _ = touched.push(qpn, GFP_KERNEL);
                    }
                }
            }
            // Acknowledgements free room in the send window: feed what waits in the rings.
            for qpn in touched.iter() {
                if let Some(qp) = self.qps.get(*qpn) {
                    self.send(&qp, &mut tx, &mut out);
                }
            }
            if out.is_empty() {
                continue;
            }
            let mut p = self.pending.lock();
            for pkt in out {
                if p.packets.push(pkt, GFP_ATOMIC).is_err() {
                    // Lost as on a congested link; the requester retries.
                    break;
                }
            }
        }
    }

    /// Puts the transport of `qp` in the error state: every WQE it holds completes with a
    /// flush error (`modify_qp` to ERR).
    pub(crate) fn fail(&self, qp: &QpShared) {
        let mut guard = qp.transport.lock();
        let Some(t) = (*guard).as_mut() else {
            return;
        };
        let env = self.env(qp);
        let (mut tx, mut out) = (KVec::new(), KVec::new());
        with_io(t, &env, &mut tx, &mut out, |roce, _mem, io| roce.fail(io));
    }

    /// Hands the new send WQEs of `qp` to its transport.
    fn send(&self, qp: &QpShared, tx: &mut KVec<u8>, out: &mut KVec<Packet>) {
        let mut guard = qp.transport.lock();
        let Some(t) = (*guard).as_mut() else {
            return;
        };
        if !qp.can_send() {
            return;
        }
        let env = self.env(qp);
        let mut next = t.sq_read;
        let mut bad = None;
        let failed = with_io(t, &env, tx, out, |roce, mem, io| {
            while roce.requester.outstanding() < crate::transport::SQ_WINDOW {
                let Some(wr) = qp.next_send_wr(next) else {
                    break;
                };
                let index = next;
                next = qp.next_sq_index(next);
                let posted = match wr {
                    // A datagram's address handle must exist and be in the QP's domain.
                    Ok(wr) if !self.ah_usable(qp, &wr.remote) => false,
                    Ok(wr) => roce.post_send(wr, mem, io).is_ok(),
                    Err(()) => false,
                };
                if !posted {
                    // A malformed WQE: what came before it is flushed, it completes with a
                    // local QP operation error, and the QP goes to ERR.
                    roce.fail(io);
                    bad = Some(index);
                    break;
                }
            }
            roce.run(mem, io);
            roce.state() == TransportState::Error
        });
        t.sq_read = next;
        self.note_timers(qp, t);
        if let Some(index) = bad {
            qp.complete_bad_wqe(index);
        }
        if failed || bad.is_some() {
            qp.enter_error();
        }
    }

    /// Returns whether a UD send to `remote` may use its address handle from `qp`.
    fn ah_usable(&self, qp: &QpShared, remote: &Remote) -> bool {
        match remote {
            Remote::Ud { ah_num, .. } => self.ahs.get(*ah_num).is_some_and(|av| av.pd() == qp.pd),
            _ => true,
        }
    }

    /// Delivers one packet to its queue pair; returns the queue pair's number.
    fn receive(&self, bytes: &[u8], tx: &mut KVec<u8>, out: &mut KVec<Packet>) -> Option<u32> {
        let pkt = RocePacket::parse(bytes).ok()?;
        self.counters.add(Counter::RcvdBytes, bytes.len() as u64);
        let qp = self.qps.get(pkt.dest_qpn())?;
        if !qp.can_receive() {
            return None;
        }
        let mut guard = qp.transport.lock();
        let t = (*guard).as_mut()?;
        let env = self.env(&qp);
        let failed = with_io(t, &env, tx, out, |roce, mem, io| {
            roce.receive(&pkt, mem, io);
            roce.end_of_batch(io);
            roce.state() == TransportState::Error
        });
        self.note_timers(&qp, t);
        drop(guard);
        if failed {
            qp.enter_error();
        }
        Some(qp.number())
    }
}
