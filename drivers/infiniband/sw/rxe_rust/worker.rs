// SPDX-License-Identifier: GPL-2.0

//! The device's worker: all protocol processing, in process context, one queue pair at a time.
//!
//! A user doorbell (process context) processes right away unless a run is in progress; the work
//! item does the rest (timers that fired, a doorbell that found the worker busy). A run feeds
//! send WQEs to the transports, delivers packets (loopback: the destination is this device) and
//! runs expired timers. One run at a time per device serialises its queue pairs' transports.
//!
//! Each queue pair has its own timer (a delayed work item in [`QpShared`], set to the earliest
//! deadline of its transport): when it fires, the queue pair is queued here as due.

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
        with_io_budget,
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
    impl_has_work,
    net::device::NetDevice,
    new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{
        aref::ARef,
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
        Work,
        WorkItem, //
    },
};

/// Packets one queue pair's send run may emit; it runs again once they are delivered.
const SEND_BUDGET: usize = 64;

/// Rounds of a run (each delivers what the one before emitted) before it yields: the rest
/// goes to the work item, queued again behind other work.
const ROUNDS: usize = 16;

/// Packets from the wire that may wait for the worker; beyond, they are dropped.
const MAX_PENDING_PACKETS: usize = 4096;

/// What waits for the worker.
#[derive(Default)]
struct Pending {
    /// Queue pairs whose send queue has new WQEs.
    kicked: KVec<u32>,
    /// Packets for this device.
    packets: KVec<Packet>,
    /// Queue pairs whose timer fired.
    due: KVec<u32>,
}

/// The worker of one device.
#[pin_data]
pub(crate) struct Worker {
    #[pin]
    work: Work<Worker>,
    #[pin]
    pending: SpinLockIrq<Pending>,
    /// Held while processing: one run at a time, so transports run one at a time.
    #[pin]
    runner: Mutex<()>,
    qps: Arc<QpTable>,
    mrs: Arc<MrTable>,
    ahs: Arc<AhTable>,
    counters: Arc<Counters>,
    /// The netdevice the device's packets leave through.
    ndev: ARef<NetDevice>,
    mac: [u8; 6],
    origin: Instant<Monotonic>,
    /// Set when the device goes, under the `pending` lock: nothing is queued after that.
    dying: AtomicBool,
}

impl_has_work! {
    impl HasWork<Self> for Worker { self.work }
}

impl WorkItem for Worker {
    type Pointer = Arc<Worker>;

    fn run(this: Arc<Worker>) {
        let guard = this.runner.lock();
        let more = this.process();
        drop(guard);
        if more {
            this.schedule();
        }
    }
}

impl Worker {
    /// Creates the worker of a device with these tables.
    pub(crate) fn new(
        qps: Arc<QpTable>,
        mrs: Arc<MrTable>,
        ahs: Arc<AhTable>,
        counters: Arc<Counters>,
        ndev: ARef<NetDevice>,
        mac: [u8; 6],
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("rdma_rxe_rust::Worker::work"),
                pending <- new_spinlock_irq!(Pending::default()),
                runner <- new_mutex!(()),
                qps,
                mrs,
                ahs,
                counters,
                ndev,
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
                let more = self.process();
                drop(guard);
                // The caller's system call does one run; the work item does the rest.
                if more {
                    self.schedule();
                }
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
    /// this returns, the work item is neither queued nor running, and will not be.
    ///
    /// The queue pairs' timers are gone by then: each `destroy_qp` flushes its own, and the
    /// core destroys every queue pair before it frees the device.
    pub(crate) fn stop(&self) {
        // The item is queued only under this lock, after checking `dying`: a run in progress
        // can no longer queue it once this is set.
        {
            let _guard = self.pending.lock();
            self.dying.store(true, Relaxed);
        }
        self.work.flush();
    }

    /// Queues a packet that arrived from the wire for a run (any context).
    ///
    /// Fails with `ENOBUFS` if too many packets wait already, or `ENOMEM`: the packet is lost,
    /// as on a congested link.
    pub(crate) fn deliver(self: &Arc<Self>, packet: Packet) -> Result {
        {
            let mut p = self.pending.lock();
            if p.packets.len() >= MAX_PENDING_PACKETS {
                return Err(ENOBUFS);
            }
            p.packets.push(packet, GFP_ATOMIC)?;
        }
        self.schedule();
        Ok(())
    }

    /// Queues the queue pair `qpn`, whose timer fired, for a run.
    ///
    /// Fails with `ENOMEM` if it cannot be queued: the caller sets its timer again.
    pub(crate) fn timer_fired(self: &Arc<Self>, qpn: u32) -> Result {
        {
            let mut p = self.pending.lock();
            if !p.due.contains(&qpn) {
                p.due.push(qpn, GFP_ATOMIC)?;
            }
        }
        self.schedule();
        Ok(())
    }

    /// Sets the timer of `qp` for the earliest deadline of its transport, unless it is set
    /// for that one already.
    fn note_timers(&self, qp: &Arc<QpShared>, t: &mut Transport) {
        let Some(deadline) = t.timers.iter().flatten().copied().min() else {
            return;
        };
        // Only an earlier deadline moves the timer: a later one (a retransmit deadline pushed
        // back by each acknowledgement) waits for the pending timer, which finds nothing due
        // and sets itself again. That keeps timer reprogramming off the per-packet path.
        if t.armed.is_some_and(|a| a <= deadline) {
            return;
        }
        t.armed = Some(deadline);
        let ms = deadline.saturating_sub(self.now()).div_ceil(1_000_000);
        let delay = msecs_to_jiffies(u32::try_from(ms).unwrap_or(u32::MAX)).max(1);
        qp.arm_timer(delay);
    }

    /// Runs the expired timers of the queue pairs in `due` (their timer fired).
    fn run_timers(&self, due: &[u32], tx: &mut KVec<u8>, out: &mut KVec<Packet>) {
        let now = self.now();
        for qpn in due.iter() {
            let Some(qp) = self.qps.get(*qpn) else {
                continue;
            };
            let mut guard = qp.transport.lock();
            let Some(t) = (*guard).as_mut() else {
                continue;
            };
            // The timer is not pending any more: whatever is left must set it again.
            t.armed = None;
            let due: [bool; 2] = [
                t.timers[0].is_some_and(|d| d <= now),
                t.timers[1].is_some_and(|d| d <= now),
            ];
            let mut failed = false;
            for (i, id) in [TimerId::Retransmit, TimerId::RnrRetry]
                .into_iter()
                .enumerate()
            {
                if !due[i] {
                    continue;
                }
                t.timers[i] = None;
                let env = self.env(&qp);
                failed |= with_io(t, &env, tx, out, |roce, mem, io| {
                    roce.on_timer(id, mem, io);
                    roce.state() == TransportState::Error
                });
            }
            self.note_timers(&qp, t);
            drop(guard);
            if failed {
                qp.enter_error();
            }
        }
    }

    fn env<'a>(&'a self, qp: &'a QpShared) -> Env<'a> {
        Env {
            shared: qp,
            mrs: &self.mrs,
            ahs: &self.ahs,
            counters: &self.counters,
            ndev: &self.ndev,
            own_mac: self.mac,
            now: self.now(),
        }
    }

    /// Processes for at most [`ROUNDS`] rounds; returns whether work is left.
    fn process(&self) -> bool {
        let mut tx = KVec::new();
        for _ in 0..ROUNDS {
            let (kicked, packets, due) = {
                let mut p = self.pending.lock();
                (
                    core::mem::take(&mut p.kicked),
                    core::mem::take(&mut p.packets),
                    core::mem::take(&mut p.due),
                )
            };
            if kicked.is_empty() && packets.is_empty() && due.is_empty() {
                return false;
            }
            let mut out = KVec::new();
            // Packets first: an acknowledgement that waits here pushes back the retransmit
            // deadline of a timer that fired meanwhile, which then finds nothing due. Run
            // before it, the timer would resend what the acknowledgement covers.
            let mut ready = kicked;
            for pkt in packets.iter() {
                if let Some(qpn) = self.receive(pkt, &mut tx, &mut out) {
                    // Acknowledgements free room in the send window: feed what waits in the
                    // ring.
                    if !ready.contains(&qpn) {
                        let _ = ready.push(qpn, GFP_KERNEL);
                    }
                }
            }
            self.run_timers(&due, &mut tx, &mut out);
            for qpn in ready.iter() {
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
                    // Lost as on a congested link (the requester retries), but counted.
                    self.counters.inc(Counter::SendErr);
                }
            }
        }
        let p = self.pending.lock();
        !(p.kicked.is_empty() && p.packets.is_empty() && p.due.is_empty())
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
    fn send(&self, qp: &Arc<QpShared>, tx: &mut KVec<u8>, out: &mut KVec<Packet>) {
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
        let budget = Some(SEND_BUDGET);
        let (failed, ran_dry) = with_io_budget(t, &env, tx, out, budget, |roce, mem, io| {
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
        if ran_dry {
            // More to send once what it emitted is delivered: its next round.
            let mut p = self.pending.lock();
            let qpn = qp.number();
            if !p.kicked.contains(&qpn) {
                let _ = p.kicked.push(qpn, GFP_ATOMIC);
            }
        }
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
