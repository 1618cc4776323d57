// SPDX-License-Identifier: GPL-2.0

//! The engine: each queue pair's transport runs in its own work item, in one context at a
//! time; different queue pairs run at the same time on different CPUs.
//!
//! A queue pair is scheduled (its `run` work item queued on an unbound workqueue: for a kernel
//! consumer's queue pair, the RDMA core's, which has a rescuer, as NVMe over RDMA waits for it
//! from its own reclaim workqueues; see [`QpShared::work_queue`]) when
//! something waits in its [`Inbox`]: packets (from the wire, queued in softirq after an RCU
//! lookup, or from another queue pair of this device), new send WQEs (the doorbell), or a
//! timer that fired. A user doorbell runs its own queue pair in the system call, for up to
//! [`DOORBELL_RUNS`] runs (a datagram queue pair, up to [`DRAIN_RUNS`] runs, until its send
//! queue is empty: its WQEs name address handles that user space may destroy next); the work
//! item does the rest, up to [`WORK_RUNS`] busy runs in a row per wake-up. A packet from the wire for a
//! connected queue pair (RC, UC) is handled in the softirq it arrived in, for up to
//! [`INLINE_RUNS`] runs, when no other context runs that queue pair (as the C driver's
//! responder and completer run inline); otherwise the work item
//! handles it; a SEND or WRITE of a one-way stream always goes to the work item
//! ([`Transport::take_turn`]), and a stream of a user queue pair's READ or atomic requests,
//! or of their answers, is taken at the end of the softirq's round, all of it in one run, by
//! the `receive` work item on the BH workqueue ([`RECEIVE`]). A run in softirq sends responses only: the requests an
//! acknowledgement lets go wait for the work item, or for a doorbell that waits for that run
//! ([`QpShared::kick`]), so that a queue pair's requests never leave
//! from softirq, where a later one sent from another CPU could overtake them
//! ([`Transport::hold_requests`]). Nor does it take new send WQEs: their doorbell, which
//! follows them, runs the queue pair (or waits for the run in softirq to end), and a work
//! item woken for them would find nothing left to do. A run touches no other queue pair's transport: packets for
//! another queue pair of this device go to its inbox before the run unlocks its own, in the
//! order they were sent, and a run in process context then runs that queue pair, one level
//! deep ([`Context::Nested`]).
//!
//! A run holds the queue pair's transport spinlock and sleeps nowhere: it allocates with
//! `GFP_ATOMIC` and reaches memory regions under the RCU read lock.

use crate::{
    ah::AhTable,
    buffers::{
        BufferPool,
        RunBuffers, //
    },
    mr::{
        MrShared,
        MrTable, //
    },
    mw::MwTable,
    odp::FaultRequest,
    qp::{
        QpShared,
        QpTable, //
    },
    roce::{
        headers::{
            Bth,
            Reth, //
        },
        io::TimerId,
        opcode::{
            OpClass,
            Opcode,
            Position, //
        },
        packet::Packet as RocePacket,
        qp::TransportState,
        wqe::Remote,
    },
    rx::DropReason,
    stats::Counters,
    transport::{
        with_io,
        with_io_budget,
        Env,
        Io,
        Mem,
        Packet,
        PacketQueue,
        Roce,
        Transport,
        SQ_WINDOW, //
    },
};
use core::sync::atomic::{
    AtomicU64,
    Ordering::Relaxed, //
};
use kernel::{
    bottom_half::BottomHalvesDisabled,
    net::device::NetDevice,
    new_spinlock_irq,
    prelude::*,
    processor::cpu_relax,
    rdma::{
        self,
        qp::attr::QpType as IbQpType,
        trace, //
    },
    revocable::Revocable,
    sched::single_task_running,
    sync::{
        aref::ARef,
        rcu,
        Arc,
        ArcBorrow,
        SpinLockIrq, //
    },
    time::{
        delay::fsleep,
        jiffies_64,
        msecs_to_jiffies,
        Delta,
        Instant,
        Monotonic,
        NSEC_PER_JIFFY, //
    },
    workqueue::{
        self,
        Queue,
        WorkItem, //
    },
};
use zerocopy::FromBytes;

impl QpShared {
    /// Returns the workqueue of this queue pair's runs and timer.
    ///
    /// A kernel consumer's queue pair runs on the RDMA core's unbound queue, which has a
    /// rescuer: nvme-rdma destroys its queue pairs from its own reclaim workqueues, and
    /// destroying one flushes its work, which must then be on a reclaim queue too (the
    /// workqueue code warns otherwise, and under memory pressure it could deadlock). A user
    /// queue pair is destroyed by a system call, the unregistration of its device or a move of
    /// the device to another namespace (on the namespaces' workqueue, a legacy one that the
    /// workqueue code does not check), never from reclaim, and runs on the system's unbound
    /// queue: the core's queue is also
    /// high-priority, and on it user queue pairs lost much of their 64-byte message rate with
    /// four queue pairs over a veth (`make bench --baseline`, plain kernel, 2 vCPUs, median of
    /// 3 in one boot, core's queue against the system's: `ib_send_bw -s 64 -q 4` 22.2 and
    /// 43.2 kmsg/s, `ib_write_bw -s 64 -q 4` 50.8 and 69.0; the other figures within their
    /// spread). Before the core has allocated its queue (never, once a device exists), both
    /// use the system's.
    pub(crate) fn work_queue(&self) -> &'static Queue {
        if self.user {
            return workqueue::system_dfl();
        }
        rdma::comp_unbound_queue().unwrap_or_else(workqueue::system_dfl)
    }
}

/// Packets one run of a queue pair may emit from its send queue; it runs again after.
const SEND_BUDGET: usize = 64;

/// How long destroying a queue pair waits for its socket buffers in flight
/// ([`QpShared::wait_in_flight`]), in milliseconds: 64 packets of 4 KiB drain at 2 Mbit/s.
const IN_FLIGHT_WAIT_MS: u32 = 1000;

/// The work item of a queue pair's run (the timer is the other, [`QpShared`]'s default).
pub(crate) const RUN: u64 = 1;

/// The work item that runs a queue pair on the packets a round of the network's softirq
/// brought ([`QpShared::receive`]), after that round, on the BH workqueue.
pub(crate) const RECEIVE: u64 = 3;

/// The longest RDMA READ whose request the end of a softirq round answers: at the smallest
/// path MTU (256 bytes) its response is at most [`SEND_BUDGET`] packets, which a run in
/// softirq sends whole ([`Transport::response_exceeds`]).
const ROUND_READ_MAX: u32 = SEND_BUDGET as u32 * 256;

/// Runs a received packet may do in the caller's context, one after the other while
/// something waits; then the work item takes over.
const INLINE_RUNS: usize = 2;

/// Runs a doorbell may do in the system call, as [`INLINE_RUNS`].
///
/// In a ping-pong over a veth, the doorbell's first run sends the request, whose transmit
/// runs the peer's receive in this CPU's softirq; its acknowledgement comes in for the second
/// run, and the peer's answer often during that one, for a third. Left to the work item, the
/// answer waits for a worker to preempt one of the two busy-polling processes.
const DOORBELL_RUNS: usize = 4;

/// Where a run happens: a run in softirq leaves its requests to the work item
/// ([`Transport::hold_requests`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// A system call, the work item, `destroy_qp`.
    Process,
    /// Process context, after the run of the queue pair that sent it a packet of this device
    /// ([`Receivers::run`]): its own packets for this device go to the run still going of
    /// the queue pair they are for, or to its work item.
    Nested,
    /// The receive softirq of the UDP tunnel.
    Softirq,
}

/// Runs the work item does one after the other while something waits; then it queues itself
/// again, behind the workqueue's other work. A wait for the next WQE that brings one
/// ([`QpShared::linger`]) starts the count again.
const WORK_RUNS: usize = 8;

/// Runs `destroy_qp` ([`QpShared::drain`]) or a datagram queue pair's doorbell
/// ([`QpShared::send_posted`]) may do to send what the send queue holds.
const DRAIN_RUNS: usize = 256;

/// What waits for a queue pair's run.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Packets for the queue pair, oldest first; beyond its bound, they are dropped (and
    /// counted).
    packets: PacketQueue,
    /// An empty queue with the capacity a run gave back: the next run swaps it in for
    /// `packets`, so queueing a packet allocates only when more wait than ever before.
    spare: PacketQueue,
    /// New send WQEs, or a send run that ran out of budget.
    kicked: bool,
    /// The queue pair's timer fired.
    due: bool,
    /// The queue pair is being destroyed: nothing is queued or scheduled any more.
    dying: bool,
    /// A run is in progress: it looks at the inbox again before it ends, so what is queued
    /// meanwhile needs no work item (in softirq, a packet for the queue pair whose doorbell
    /// the interrupted system call runs: the acknowledgement of what it just sent).
    running: bool,
    /// The run in progress is in softirq: a doorbell waits for it rather than leave its
    /// requests to the work item ([`QpShared::kick`]).
    in_softirq: bool,
    /// Doorbells waiting for the run in softirq: the requests it holds back go from them, so
    /// it schedules no work item for those.
    doorbells_waiting: u32,
    /// A READ request longer than [`ROUND_READ_MAX`] waits: its response may not fit a run in
    /// softirq, so the run at the round's end leaves everything to the work item, which a
    /// READ response goes from whole ([`Transport::response_exceeds`]). The next run that
    /// takes the packets clears it.
    long_read: bool,
    /// The run at the end of the softirq's round ([`RECEIVE`]) is queued: a packet for it
    /// needs no reference taken to queue it again. Cleared as that run starts.
    receive_queued: bool,
    /// A range a run found not present, for the fault work ([`crate::odp`]).
    pub(crate) fault: Option<FaultRequest>,
    /// A range whose fault failed: the next access to it fails ([`crate::odp`]).
    pub(crate) fault_failed: Option<FaultRequest>,
}

impl Inbox {
    /// Returns whether the queue pair is being destroyed.
    pub(crate) fn is_dying(&self) -> bool {
        self.dying
    }

    /// Notes work for a run that sends.
    pub(crate) fn kick(&mut self) {
        self.kicked = true;
    }

    /// Returns whether a run in process context is in progress: it takes new send WQEs and
    /// packets, and before it ends it looks at the inbox again ([`QpShared::finish_run`]) and
    /// runs again or schedules, so what is noted meanwhile needs no work item queued.
    fn sending_run(&self) -> bool {
        self.running && !self.in_softirq
    }

    /// Returns whether something waits for a run in `ctx`: packets, the timer, or new send
    /// WQEs, which a run in softirq leaves to their doorbell ([`QpShared::kick`]).
    fn waiting(&self, ctx: Context) -> bool {
        !self.packets.is_empty() || self.due || (self.kicked && ctx != Context::Softirq)
    }
}

/// What a queue pair's runs share with the rest of the device.
#[pin_data]
pub(crate) struct Engine {
    qps: Arc<QpTable>,
    mrs: Arc<MrTable>,
    mws: Arc<MwTable>,
    ahs: Arc<AhTable>,
    counters: Arc<Counters>,
    /// The netdevice the device's packets leave through, until it unregisters
    /// ([`Engine::release_netdev`]).
    #[pin]
    ndev: Revocable<ARef<NetDevice>>,
    mac: [u8; 6],
    /// The 64-bit jiffies counter when the engine was made: the transports' clock starts there.
    origin: u64,
    /// The last queue pair serial handed out ([`Engine::next_qp_serial`]).
    qp_serials: AtomicU64,
    /// Serialises atomic operations (a read and a write of the target) across queue pairs.
    #[pin]
    atomics: SpinLockIrq<()>,
    /// Idle buffers of packets between queue pairs of the device.
    #[pin]
    buffers: BufferPool,
}

impl Engine {
    /// Creates the engine of a device with these tables.
    pub(crate) fn new(
        qps: Arc<QpTable>,
        mrs: Arc<MrTable>,
        mws: Arc<MwTable>,
        ahs: Arc<AhTable>,
        counters: Arc<Counters>,
        ndev: ARef<NetDevice>,
        mac: [u8; 6],
    ) -> Result<Arc<Self>> {
        let buffers = BufferPool::new()?;
        Arc::pin_init(
            pin_init!(Self {
                qps,
                mrs,
                mws,
                ahs,
                counters,
                ndev <- Revocable::new(ndev),
                mac,
                origin: jiffies_64(),
                qp_serials: AtomicU64::new(0),
                atomics <- new_spinlock_irq!(()),
                buffers <- buffers,
            }),
            GFP_KERNEL,
        )
    }

    /// Returns a number no other queue pair of the device had or will have: unlike a QP
    /// number, which comes round again, it names one queue pair for good.
    pub(crate) fn next_qp_serial(&self) -> u64 {
        self.qp_serials.fetch_add(1, Relaxed) + 1
    }

    /// Returns the memory region whose key is `key`, if it is registered (process context).
    pub(crate) fn region(&self, key: u32) -> Option<Arc<MrShared>> {
        self.mrs.get(key >> 8).filter(|mr| mr.key() == key)
    }

    /// Nanoseconds since the engine was made, in whole jiffies: the transports' clock.
    ///
    /// Their timers are delayed work, which counts in jiffies, so a finer clock would buy
    /// nothing; and the jiffies counter is a memory read, where a clock device read may be
    /// an emulated device access (a VM whose TSC was found unstable reads the HPET), once or
    /// more per run.
    fn now(&self) -> u64 {
        jiffies_64()
            .wrapping_sub(self.origin)
            .saturating_mul(NSEC_PER_JIFFY)
    }

    /// Drops the device's references on its netdevice, which is unregistering: it goes
    /// without waiting for the device, whose packets to other hosts are then lost (counted
    /// as failed sends). Waits for the runs that use it.
    pub(crate) fn release_netdev(&self) {
        self.ndev.revoke();
    }

    /// Runs `f` on the netdevice, if it has not unregistered (not sleeping).
    pub(crate) fn with_netdev<R>(&self, f: impl FnOnce(&NetDevice) -> R) -> Option<R> {
        self.ndev.try_access_with(|ndev| f(ndev))
    }

    /// Returns what a run of `qp` needs; under `rcu`, the netdevice stays while the run (which
    /// holds the transport's spinlock and does not sleep) uses it.
    fn env<'a>(&'a self, qp: &'a Arc<QpShared>, rcu: &'a rcu::Guard) -> Env<'a> {
        Env {
            shared: qp,
            mrs: &self.mrs,
            mws: &self.mws,
            ahs: &self.ahs,
            counters: &self.counters,
            ndev: self.ndev.try_access_with_guard(rcu).map(|ndev| &**ndev),
            own_mac: self.mac,
            atomics: &self.atomics,
            buffers: &self.buffers,
            now: self.now(),
            rcu,
        }
    }

    /// Hands `packet` to `f` with the queue pair `qpn`, borrowed under the RCU read lock, or
    /// fails with `ENOENT` if there is none.
    fn to_qp(
        &self,
        qpn: u32,
        packet: Packet,
        f: impl FnOnce(ArcBorrow<'_, QpShared>, Packet) -> Result<(), (Error, Packet)>,
    ) -> Result<(), (Error, Packet)> {
        // Held over `f`: the table's reference, dropped only after a grace period once the
        // queue pair is destroyed, outlives the one borrowed here.
        let rcu = rcu::read_lock();
        match self.qps.load(qpn, &rcu) {
            Some(qp) => f(qp, packet),
            None => Err((ENOENT, packet)),
        }
    }

    /// Queues `packet`, which arrived from the wire, for the queue pair `qpn` and runs that
    /// queue pair here if it is connected and nothing else runs it (softirq); otherwise
    /// schedules it.
    ///
    /// Fails with `ENOENT` if there is no such queue pair, or as [`QpShared::enqueue`], and
    /// hands the packet back.
    pub(crate) fn receive_wire(&self, qpn: u32, packet: Packet) -> Result<(), (Error, Packet)> {
        self.to_qp(qpn, packet, QpShared::deliver_and_run)
    }

    /// Queues the packets a run emitted for this device to their queue pairs, and notes those
    /// in `to` (or schedules them, past [`RECEIVERS`]) to run once the run is over.
    ///
    /// Called with the sender's transport locked: its packets are queued in the order it sent
    /// them, before any later run of the sender can queue more (a receiver run nested in
    /// another context may let it send again).
    fn queue_local(&self, from: &QpShared, out: &mut KVec<Packet>, to: &mut Receivers) {
        for pkt in out.drain_all() {
            let qpn = match pkt.parse() {
                Ok(p) => p.dest_qpn(),
                Err(_) => {
                    // Built here, so never seen; counted as a transmit that failed.
                    self.counters.inc(crate::stats::Counter::SendErr);
                    continue;
                }
            };
            let queued = self.to_qp(qpn, pkt, |qp, pkt| {
                QpShared::enqueue(qp, pkt, Then::Queue)?;
                to.note(qp);
                Ok(())
            });
            if let Err((e, pkt)) = queued {
                // A queue pair that is gone, or one that cannot keep up: lost as on a
                // congested link (the requester retries), and counted as the receiving side
                // of a wire counts it, as a drop with its reason; the packet was sent.
                let why = DropReason::not_taken(e);
                why.report(&self.counters, from.dev_index, qpn);
                pkt.drop_with(why.skb_reason());
            }
        }
    }

    /// Fails every reliable connection of the device to another host, as its netdevice has
    /// unregistered.
    ///
    /// Nothing they send can arrive any more; their consumers learn of it now, the queue pairs
    /// in ERR and their WQEs flushed, not at their next transmit ([`fail_if_netdev_gone`],
    /// which catches a connection that gets its transport later). Connections within the
    /// device (loopback) go on until the device's unregistration destroys them, as under the
    /// C driver. Process context.
    pub(crate) fn fail_connections(&self) {
        let mut next = 0;
        while let Some((n, qp)) = self.qps.find_from(next) {
            if qp.qp_type == IbQpType::Rc && self.fail_where(&qp, |t| !t.path().is_local(&self.mac))
            {
                qp.enter_error();
            }
            let Some(after) = n.checked_add(1) else {
                break;
            };
            next = after;
        }
    }

    /// Puts the transport of `qp` in the error state: every WQE it holds completes with a
    /// flush error (`modify_qp` to ERR).
    pub(crate) fn fail(&self, qp: &Arc<QpShared>) {
        self.fail_where(qp, |_| true);
    }

    /// Fails the transport of `qp` as [`Engine::fail`] does if it has one for which `which`
    /// holds; returns whether it did.
    fn fail_where(&self, qp: &Arc<QpShared>, which: impl FnOnce(&Transport) -> bool) -> bool {
        let mut guard = qp.transport.lock();
        let Some(t) = (*guard).as_mut() else {
            return false;
        };
        if !which(t) {
            return false;
        }
        let rcu = rcu::read_lock();
        let env = self.env(qp, &rcu);
        let (mut tx, mut out) = (RunBuffers::default(), KVec::new());
        with_io(t, &env, &mut tx, &mut out, |roce, _mem, io| roce.fail(io));
        tx.give_back(&self.buffers);
        qp.note_psns(Some(t));
        let mut receivers = Receivers::default();
        self.queue_local(qp, &mut out, &mut receivers);
        drop_unallocated(out);
        drop(guard);
        receivers.run(Context::Nested);
        true
    }

    /// Sets the timer of `qp` for the earliest deadline of its transport, unless it is set
    /// for that one already.
    fn note_timers(&self, qp: &Arc<QpShared>, t: &mut Transport) {
        let early = t.early_deadline();
        let early = Iterator::chain(early.into_iter(), t.tx_retry_at);
        let Some(deadline) = Iterator::chain(t.timers.iter().flatten().copied(), early).min()
        else {
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

    /// Runs the expired timers of `qp`; returns whether the transport failed.
    fn run_timers(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        let now = self.now();
        // The timer is not pending any more: whatever is left must set it again.
        t.armed = None;
        // What a local drop stopped goes again in this run's sending.
        if t.tx_retry_at.is_some_and(|d| d <= now) {
            t.tx_retry_at = None;
        }
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
            let rcu = rcu::read_lock();
            let env = self.env(qp, &rcu);
            failed |= with_io(t, &env, tx, out, |roce, mem, io| {
                roce.on_timer(id, mem, io);
                fail_if_netdev_gone(qp, roce, io);
                roce.state() == TransportState::Error
            });
        }
        failed
    }

    /// Hands new send WQEs of `qp` to its transport and lets it send, within
    /// [`SEND_BUDGET`] packets.
    fn send(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> SendRun {
        // Draining (SQD), the requester finishes what it took, and takes nothing new.
        let draining = qp.is_draining();
        if !qp.can_send() && !draining {
            return SendRun::default();
        }
        let rcu = rcu::read_lock();
        let env = self.env(qp, &rcu);
        let mut next = t.sq_read;
        // On loopback a READ's chain stays in the doorbell's context: the receiver runs nested
        // there, with no softirq or CPU to hand over to ([`QpShared::linger`]).
        let wire = !t.path().is_local(&env.own_mac);
        // A run in softirq takes no new WQE: their doorbell runs the queue pair in process
        // context ([`QpShared::kick`]); taken and held here, they would wake the work item for
        // nothing. But WQEs a full window stopped have had their doorbell: the acknowledgement
        // that makes room takes them, and holds them for the work item.
        let take_new = (!t.holds_requests() || t.sq_stalled) && !draining;
        let mut bad = None;
        let budget = Some(SEND_BUDGET);
        let ((failed, outstanding), ran_dry) =
            with_io_budget(t, &env, tx, out, budget, None, |roce, mem, io| {
                // A datagram or UC message completes once sent, which makes room in the window
                // again: a post list longer than the window goes on here, within the budget, as
                // no acknowledgement will come to run the queue pair for the rest. A round that
                // completes nothing ends it, so the rounds are bounded as well.
                for _ in 0..SEND_BUDGET {
                    while take_new && roce.requester.outstanding() < SQ_WINDOW {
                        let Some(wr) = mem.next_send_wr(next) else {
                            break;
                        };
                        let index = next;
                        next = qp.next_sq_index(next);
                        // Taken: a doorbell for it needs no run ([`QpShared::kick`]).
                        qp.next_sq.store(next, Relaxed);
                        let posted = match wr {
                            // A datagram's address handle must exist and be in the QP's domain.
                            Ok(wr) if !self.ah_usable(qp, &wr.remote) => false,
                            Ok(wr) => {
                                qp.asks
                                    .store(wire && wr.opcode.is_read_or_atomic(), Relaxed);
                                roce.post_send(wr, mem, io).is_ok()
                            }
                            Err(()) => false,
                        };
                        if !posted {
                            // A malformed WQE: what came before it is flushed, it completes with
                            // a local QP operation error, and the QP goes to ERR.
                            roce.fail(io);
                            qp.note_bad_wqe(index);
                            bad = Some(index);
                            break;
                        }
                    }
                    let waiting = roce.requester.outstanding();
                    roce.run(mem, io);
                    fail_if_netdev_gone(qp, roce, io);
                    if bad.is_some()
                        || io.ran_dry()
                        || roce.state() == TransportState::Error
                        || roce.requester.outstanding() >= waiting
                    {
                        break;
                    }
                }
                (
                    roce.state() == TransportState::Error,
                    roce.requester.outstanding(),
                )
            });
        if take_new {
            t.sq_stalled = outstanding >= SQ_WINDOW;
        }
        if draining && outstanding == 0 {
            qp.end_drain();
        }
        if next != t.sq_read {
            t.note_turn();
        }
        // `qp.next_sq` followed each WQE as it was taken.
        t.sq_read = next;
        SendRun {
            failed,
            ran_dry,
            bad,
        }
    }

    /// Returns whether a UD send to `remote` may use its address handle from `qp`.
    fn ah_usable(&self, qp: &QpShared, remote: &Remote) -> bool {
        match remote {
            Remote::Ud { ah_num, .. } => self.ahs.get(*ah_num).is_some_and(|av| av.pd() == qp.pd),
            _ => true,
        }
    }

    /// Sends the rest of an interrupted READ response of `qp`, within [`SEND_BUDGET`] packets;
    /// returns whether the transport failed.
    fn resume_response(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        self.step(qp, t, tx, out, |roce, mem, io| {
            roce.resume_response(mem, io)
        })
    }

    /// Ends a run's batch of received packets: sends the one ACK that covers them all (the
    /// responder coalesces them); returns whether the transport failed.
    fn end_batch(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        self.step(qp, t, tx, out, |roce, _mem, io| roce.end_of_batch(io))
    }

    /// Runs `f` on the transport of `qp`, letting it emit at most [`SEND_BUDGET`] packets;
    /// returns whether the transport failed.
    fn step(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
        f: impl FnOnce(&mut Roce, &mut Mem<'_>, &mut Io<'_>),
    ) -> bool {
        let rcu = rcu::read_lock();
        let env = self.env(qp, &rcu);
        let budget = Some(SEND_BUDGET);
        let (failed, _) = with_io_budget(t, &env, tx, out, budget, None, |roce, mem, io| {
            f(roce, mem, io);
            roce.state() == TransportState::Error
        });
        failed
    }

    /// Hands one packet to the transport of `qp`, letting it emit at most [`SEND_BUDGET`]
    /// packets (a READ response then waits for the next run); returns whether the transport
    /// failed.
    fn receive(
        &self,
        qp: &Arc<QpShared>,
        t: &mut Transport,
        packet: &Packet,
        pkt: &RocePacket<'_>,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        // A datagram's receive buffer starts with its GRH.
        let grh = match qp.qp_type {
            IbQpType::Ud | IbQpType::Gsi => packet.grh(),
            _ => None,
        };
        self.counters
            .add(crate::stats::Counter::RcvdBytes, packet.len() as u64);
        if trace::recv_enabled() {
            trace::recv(
                &trace::PacketFields {
                    dev: qp.dev_index,
                    qpn: qp.number(),
                    dest_qpn: pkt.dest_qpn(),
                    opcode: pkt.opcode().raw(),
                    psn: pkt.psn().get(),
                    len: packet.len() as u32,
                },
                pkt.head().len() as u32,
            );
        }
        let rcu = rcu::read_lock();
        let env = self.env(qp, &rcu);
        let budget = Some(SEND_BUDGET);
        with_io_budget(t, &env, tx, out, budget, grh, |roce, mem, io| {
            roce.receive(pkt, mem, io);
            roce.state() == TransportState::Error
        })
        .0
    }
}

/// What a packet from the wire is, as far as where its queue pair runs depends on it.
#[derive(Clone, Copy)]
enum Arrival {
    /// A SEND or RDMA WRITE request; whether it is the last packet of its message.
    Stream(bool),
    /// An RDMA READ request for this many bytes (only RC has READs: the RETH follows the BTH).
    Read(u32),
    /// A packet of an RDMA READ response of more than one packet (first, middle or last).
    ReadResponsePart,
    /// An atomic request (COMPARE SWAP, FETCH ADD).
    Atomic,
    /// The answer to a READ or an atomic request in one packet (READ response only, atomic
    /// acknowledgement).
    Answer,
    /// Anything else: an acknowledgement or NAK, a FLUSH or ATOMIC WRITE request.
    Other,
}

impl Arrival {
    /// Classifies a packet by the opcode in its first bytes `bytes` (and a READ by its RETH).
    fn of(bytes: &[u8]) -> Self {
        let Some(op) = bytes.first().and_then(|&b| Opcode::from_u8(b)) else {
            return Self::Other;
        };
        if !op.is_request() {
            return match op.class() {
                OpClass::ReadResponse if op.position() != Position::Only => Self::ReadResponsePart,
                OpClass::ReadResponse | OpClass::AtomicAcknowledge => Self::Answer,
                _ => Self::Other,
            };
        }
        match op.class() {
            OpClass::Send | OpClass::RdmaWrite => Self::Stream(op.position().is_end()),
            OpClass::RdmaRead => Bth::ref_from_prefix(bytes)
                .ok()
                .and_then(|(_, rest)| Reth::ref_from_prefix(rest).ok())
                .map_or(Self::Other, |(reth, _)| Self::Read(reth.dma_len())),
            OpClass::Atomic => Self::Atomic,
            _ => Self::Other,
        }
    }
}

/// Fails a reliable connection whose requester sent a packet that found no netdevice: it
/// unregistered and the device is going, so nothing the queue pair sends will arrive. Its WQEs
/// complete with a flush error now, as the C driver's QP fails at its first failed transmit,
/// instead of after the retry count ran out (seconds, at a ULP's timeouts), and its consumer
/// learns of the removal at once. (The connections there when the netdevice unregistered were
/// failed then, by [`Engine::fail_connections`]; this catches one that got its transport
/// later.) A transmit that fails while the netdevice is there (no route, no memory) stays a
/// loss the requester retries.
fn fail_if_netdev_gone(qp: &QpShared, roce: &mut Roce, io: &mut Io<'_>) {
    if io.netdev_gone() && qp.qp_type == IbQpType::Rc && roce.state() != TransportState::Error {
        roce.fail(io);
    }
}

/// Drops `v`, without the allocator call the kernel's vector makes on drop even when it never
/// allocated (several per run on the packet path otherwise).
pub(crate) fn drop_unallocated<T>(v: KVec<T>) {
    if v.capacity() == 0 && v.is_empty() {
        // No allocation and no element: nothing to free or drop.
        core::mem::forget(v);
    }
}

/// How a send run ended.
#[derive(Default)]
struct SendRun {
    /// The transport went to the error state.
    failed: bool,
    /// The budget ran out with more to send.
    ran_dry: bool,
    /// A malformed WQE at this index stopped it.
    bad: Option<u32>,
}

impl WorkItem<RUN> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        // What came in meanwhile (on veth, the acknowledgement of what the run just sent,
        // received in the softirq its transmit raised) is handled here rather than by queueing
        // the work item again: a worker that is running needs no wake-up. Runs in a row
        // that left work count against [`WORK_RUNS`], from zero after each wait for the next
        // WQE that brought something ([`QpShared::linger`]); every run against
        // [`LINGER_RUNS`].
        let mut busy = 0;
        for _ in 0..LINGER_RUNS {
            // What the run sends to a veth (or the loopback netdevice) is received in the
            // softirq its transmit raises on this CPU: with bottom halves off it is received
            // in one pass once the run is over, so the peer's queue pair gets the run's
            // packets together and is woken once for them, not once for each.
            let bh = BottomHalvesDisabled::disable();
            let mut guard = this.transport.lock();
            let end = this.run_once(&mut guard, Context::Process);
            drop(guard);
            drop(bh);
            let linger = this.may_linger();
            if this.finish_run(end, Context::Process, linger) {
                busy += 1;
                if busy == WORK_RUNS {
                    break;
                }
            } else if linger && this.linger() {
                // A new round trip of a ping-pong.
                busy = 0;
            } else {
                return;
            }
        }
        // Other work items of the workqueue get their turn.
        Self::schedule(this.as_arc_borrow());
    }
}

/// Runs the work item does before it queues itself again when it waits for the next WQE
/// between them ([`QpShared::linger`]): each is a round trip of a ping-pong. Queued again, it would wake a
/// second worker onto the CPU (an unbound workqueue has no concurrency management), and the
/// next wait would not start while that worker is runnable there.
const LINGER_RUNS: usize = 256;

/// How long the worker of a queue pair that asks (READs, atomics) waits for the next WQE,
/// doorbell or packet before it sleeps, in microseconds ([`QpShared::linger`]).
const LINGER_US: i64 = 30;

impl QpShared {
    /// Waits up to [`LINGER_US`] for the next WQE, doorbell or packet, if the queue pair's
    /// last request was a READ or an atomic (a user's: a kernel consumer posts from its own
    /// contexts); returns whether something came, for another run.
    ///
    /// The peer's kernel answers such a request, and the consumer posts the next one as
    /// soon as it polls the completion, a few microseconds after this run made it. A worker
    /// that is still running sees that WQE in the ring as soon as it is published, and runs
    /// for it before its doorbell's system call, where a sleeping one would first be woken on
    /// its CPU. The C driver's chain of work items gets the same effect from one worker
    /// looping over them. Marked running in process context meanwhile (from the end of the
    /// run, [`QpShared::finish_run`], to the next run, if one follows), so that the doorbell
    /// leaves its WQEs to this worker ([`QpShared::kick`]). The CPU it spins on is the one the consumer does not
    /// poll on, idle otherwise: the peer of a READ is passive.
    fn linger(&self) -> bool {
        // Not preempted while marked running, which would leave the doorbells it takes
        // waiting for the worker's next turn on its CPU. Bounded: a task woken on this CPU
        // meanwhile, or a softirq raised on it, waits [`LINGER_US`] at most.
        let _bh = BottomHalvesDisabled::disable();
        // A CPU another task waits for (the consumer's, say) is not held.
        let mut over = !single_task_running();
        let start = Instant::<Monotonic>::now();
        loop {
            // User space publishes a WQE in the ring (the producer index, stored with release)
            // before the system call that rings its doorbell: for one the requester has not
            // taken, the next run starts now and takes it, as the C driver's requester loop
            // takes what it finds in the ring, and its doorbell then finds it taken
            // ([`QpShared::kick`]). Once per producer index: a WQE a run did not take waits
            // for its doorbell, not for another run.
            let posted = self.sq_untaken(self.linger_seen.load(Relaxed));
            if let Some(p) = posted {
                self.linger_seen.store(p, Relaxed);
            }
            let mut inbox = self.inbox.lock();
            if posted.is_some() {
                inbox.kicked = true;
            }
            let waiting = inbox.waiting(Context::Process) && !inbox.dying;
            if waiting {
                // Still marked running: the run that follows at once takes what a doorbell
                // notes meanwhile.
                return true;
            }
            // A run that failed the queue pair (ERR) ends the wait too.
            if over || inbox.dying || !self.can_send() {
                // Unless a run in softirq took the mark over meanwhile: its own end clears it.
                if !inbox.in_softirq {
                    inbox.running = false;
                }
                return false;
            }
            // A run in softirq that ended meanwhile cleared the mark: taken again.
            if !inbox.running {
                inbox.running = true;
                inbox.in_softirq = false;
            }
            drop(inbox);
            for _ in 0..16 {
                cpu_relax();
            }
            over = start.elapsed() > Delta::from_micros(LINGER_US);
        }
    }

    /// Returns whether the worker is to wait for the next WQE once its run ends
    /// ([`QpShared::linger`]): the last request of this user queue pair was a READ or an
    /// atomic to a peer on the wire, and at most one WQE is outstanding.
    ///
    /// A stream (more than one WQE outstanding) waits for its answers, not for a doorbell.
    fn may_linger(&self) -> bool {
        self.user
            && self.can_send()
            && self.asks.load(Relaxed)
            && !self.many_outstanding.load(Relaxed)
    }
}

impl WorkItem<RECEIVE> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        // In softirq, after the round that queued the packets: they are taken in one run, not
        // one run each as they came. A READ response that would not fit a run, or one being
        // sent, goes to the work item.
        let long_read = {
            let mut inbox = this.inbox.lock();
            inbox.receive_queued = false;
            inbox.long_read
        };
        if long_read {
            Self::schedule(this.as_arc_borrow());
            return;
        }
        this.run_here_if(Context::Softirq, false, |t| {
            !t.response_exceeds(None, SEND_BUDGET)
        });
    }
}

/// What queueing a packet for a queue pair schedules ([`QpShared::enqueue`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Nothing: the caller runs or schedules the queue pair itself.
    Queue,
    /// The run in process context that new send WQEs or held requests wait for, if it is
    /// not in progress; otherwise the caller runs the queue pair here. With `long_read`, a
    /// READ request whose response may not fit a run in softirq: [`Inbox::long_read`].
    Inline { long_read: bool },
    /// As [`Then::Inline`], and the work item if no run is in progress.
    WorkItem,
    /// As [`Then::Inline`], or else the run at the end of the softirq's round ([`RECEIVE`])
    /// if no run is in progress.
    RoundEnd,
}

/// What a run leaves to do once the transport is unlocked.
struct RunEnd {
    /// Something is left for another run.
    more: bool,
    /// The transport failed: the queue pair goes to ERR.
    failed: bool,
    /// A malformed send WQE at this index to complete.
    bad: Option<u32>,
    /// The queue pairs this run's loopback packets were queued for ([`Engine::queue_local`]).
    receivers: Receivers,
    /// Requests wait for the work item or a waiting doorbell (a run in softirq).
    held_requests: bool,
    /// The run's packets, handled and freed: the vector goes back to the inbox as its spare.
    batch: PacketQueue,
}

/// How many queue pairs a run notes to run after it ([`Receivers`]); the rest are scheduled.
const RECEIVERS: usize = 2;

/// The queue pairs of this device a run queued packets for ([`Engine::queue_local`]).
#[derive(Default)]
struct Receivers {
    qps: [Option<Arc<QpShared>>; RECEIVERS],
}

impl Receivers {
    /// Notes `qp`, unless noted already; schedules it if there is no room left.
    fn note(&mut self, qp: ArcBorrow<'_, QpShared>) {
        let mut free = None;
        for slot in self.qps.iter_mut() {
            match slot {
                Some(q) if q.number() == qp.number() => return,
                Some(_) => {}
                None => {
                    free.get_or_insert(slot);
                }
            }
        }
        match free {
            Some(slot) => *slot = Some(qp.into()),
            None => QpShared::schedule_unless_running(qp),
        }
    }

    /// Runs the queue pairs noted, here (nested, once the sender's transport is unlocked)
    /// from a run in [`Context::Process`], or schedules those that are not running.
    ///
    /// On loopback both ends of a connection are this device's: running the receiver here,
    /// as the wire's softirq does, spares a work item's wake-up per batch, which waits for a
    /// CPU when two busy-polling processes hold both. One level only: what the receiver sends
    /// back is not run here, so a call is bounded.
    ///
    /// A queue pair that is running is not scheduled: its run looks at its inbox again
    /// before it ends ([`QpShared::finish_run`]). The acknowledgement a nested receiver sends
    /// back goes to the sender whose run called this one, and that run handles it next
    /// rather than waking the work item for it (two context switches per message on
    /// loopback).
    fn run(self, ctx: Context) {
        // Most runs queue nothing locally (every run over the wire).
        if self.qps.iter().all(Option::is_none) {
            return;
        }
        for qp in self.qps.into_iter().flatten() {
            if ctx == Context::Process {
                qp.run_here_if(Context::Nested, false, |_| true);
            } else {
                QpShared::schedule_unless_running(qp.as_arc_borrow());
            }
        }
    }
}

impl QpShared {
    /// Schedules a run of `this` on its workqueue ([`QpShared::work_queue`]), unless it is
    /// being destroyed.
    pub(crate) fn schedule(this: ArcBorrow<'_, Self>) {
        Self::schedule_locked(this, &this.inbox.lock());
    }

    /// Schedules a run of `this`, as [`QpShared::schedule`], with its inbox locked (`inbox`):
    /// what the caller noted there and the scheduling take one lock.
    fn schedule_locked(this: ArcBorrow<'_, Self>, inbox: &Inbox) {
        // Under the lock `destroy` sets `dying` under: once it is set, nothing is queued.
        if !inbox.dying {
            // Already queued is fine: that run will see what was just added. The clone that
            // comes back is not the last reference: the caller holds one.
            let _ = this.work_queue().enqueue::<Arc<Self>, RUN>(Arc::from(this));
        }
    }

    /// Queues a packet from the wire for this queue pair and, if it is connected and no other
    /// context runs it, runs it here (softirq, [`INLINE_RUNS`] runs at most); otherwise
    /// schedules it.
    ///
    /// A datagram queue pair is always scheduled: its sends look up address handles, whose
    /// table is locked in process context only.
    pub(crate) fn deliver_and_run(
        this: ArcBorrow<'_, Self>,
        packet: Packet,
    ) -> Result<(), (Error, Packet)> {
        let arrival = Arrival::of(packet.head());
        let stream = matches!(arrival, Arrival::Stream(_));
        let connected = matches!(this.qp_type, IbQpType::Rc | IbQpType::Uc);
        // The packets of a READ response longer than one go to the work item, as a one-way
        // stream does: on a veth this softirq runs on the responder's CPU, which sent them,
        // and placing them here as well left the other CPU idle. A READ of one packet
        // (`ib_read_lat -s 2`) is still completed here.
        let to_work_item = connected && matches!(arrival, Arrival::ReadResponsePart);
        // A stream of READ or atomic requests (an answer to one is still in flight) and of
        // their one-packet answers (more than one WQE outstanding) is taken at the end of the
        // softirq's round, in one run for what came in it, not in one run each. A ping-pong's
        // packets still run here: the BH work item would cost each a few microseconds. Only a
        // user's queue pair: a kernel consumer's may be destroyed from a reclaim workqueue
        // (nvme-rdma's), which may not wait for work on the BH workqueue (it cannot reclaim).
        let round_end = connected
            && this.user
            && match arrival {
                Arrival::Read(len) => len <= ROUND_READ_MAX && this.in_flight.count() > 0,
                Arrival::Atomic => this.in_flight.count() > 0,
                Arrival::Answer => this.many_outstanding.load(Relaxed),
                _ => false,
            };
        let read_len = match arrival {
            Arrival::Read(len) => Some(len),
            _ => None,
        };
        let then = if !connected || stream {
            Then::Queue
        } else if to_work_item {
            Then::WorkItem
        } else if round_end {
            Then::RoundEnd
        } else {
            // Not for a run at the round's end, if one is queued.
            Then::Inline {
                long_read: read_len.is_some_and(|len| len > ROUND_READ_MAX),
            }
        };
        let kicked = Self::enqueue(this, packet, then)?;
        if connected {
            match arrival {
                // A SEND or WRITE that does not come in turn is part of a one-way stream: the
                // work item answers it, on the other CPU, in batches.
                Arrival::Stream(ends) => {
                    let this: Arc<Self> = this.into();
                    this.run_here_if(Context::Softirq, false, |t| t.take_turn(ends));
                }
                // An acknowledgement or a response while requests wait for the run in process
                // context (a stream of them, held by the last such run here or posted): that
                // run takes it with the others, and sends what it lets go. Run here it would
                // only complete, and hold the requests again: a run per packet. `enqueue`
                // scheduled it.
                _ if kicked => {}
                // `enqueue` scheduled it, or the run at the round's end, unless a run was in
                // progress.
                Arrival::ReadResponsePart => {}
                _ if round_end => {}
                // A READ response goes from one context: whole from here, or all of it from
                // the work item ([`Transport::response_exceeds`]).
                _ => {
                    let this: Arc<Self> = this.into();
                    this.run_here_if(Context::Softirq, false, |t| {
                        !t.response_exceeds(read_len, SEND_BUDGET)
                    });
                }
            }
        } else {
            Self::schedule(this);
        }
        Ok(())
    }

    /// Runs the queue pair in the caller's context, up to [`INLINE_RUNS`] times (a doorbell,
    /// [`DOORBELL_RUNS`]) while something waits, if no other context runs it (or, with `wait`,
    /// once the one that runs it is done) and `here` agrees (asked before the first run, given
    /// the transport); otherwise leaves it to the run in progress or schedules it.
    ///
    /// A caller that passes `wait` has counted itself in [`Inbox::doorbells_waiting`] (only
    /// [`QpShared::kick`] does): a run in softirq that holds back requests leaves them to it.
    /// A doorbell ([`Context::Process`]) that finds the lock taken by anything but a run in
    /// process context counts itself there and waits too.
    fn run_here_if(
        self: &Arc<Self>,
        ctx: Context,
        mut wait: bool,
        here: impl FnOnce(&mut Transport) -> bool,
    ) {
        let mut here = Some(here);
        let runs = if ctx == Context::Process {
            DOORBELL_RUNS
        } else {
            INLINE_RUNS
        };
        for _ in 0..runs {
            let guard = if core::mem::take(&mut wait) {
                let guard = self.transport.lock();
                let mut inbox = self.inbox.lock();
                inbox.doorbells_waiting = inbox.doorbells_waiting.saturating_sub(1);
                drop(inbox);
                Some(guard)
            } else {
                self.transport.try_lock()
            };
            let mut guard = match guard {
                Some(guard) => guard,
                None if ctx == Context::Process => {
                    let mut inbox = self.inbox.lock();
                    if inbox.running && !inbox.in_softirq {
                        // A run in process context: it sees the doorbell's note before it ends.
                        return;
                    }
                    // A run in softirq takes no new WQE: this doorbell waits for it and runs
                    // the queue pair itself (as `kick` does when it finds one). Between two
                    // runs, or before a run marks itself running, it waits for the lock too.
                    inbox.doorbells_waiting = inbox.doorbells_waiting.saturating_add(1);
                    drop(inbox);
                    let guard = self.transport.lock();
                    let mut inbox = self.inbox.lock();
                    inbox.doorbells_waiting = inbox.doorbells_waiting.saturating_sub(1);
                    drop(inbox);
                    guard
                }
                None => {
                    Self::schedule_unless_running(self.as_arc_borrow());
                    return;
                }
            };
            let go_on = match (guard.as_deref_mut(), here.take()) {
                (Some(t), Some(here)) => here(t),
                // A READ response is not resumed in softirq: the work item sends the rest
                // ([`Transport::response_exceeds`]).
                (Some(t), None) => ctx != Context::Softirq || !t.is_sending_response(),
                (None, _) => true,
            };
            if !go_on {
                drop(guard);
                Self::schedule(self.as_arc_borrow());
                return;
            }
            let end = self.run_once(&mut guard, ctx);
            drop(guard);
            let held_requests = end.held_requests;
            // Held requests are noted as `kicked`, which `finish_run` does not count for a
            // run in softirq: they are looked at first.
            let again = self.finish_run(end, ctx, false);
            if held_requests {
                // The requests go from the work item, or from a doorbell waiting for this run
                // (which then finds them noted): another run here would hold them again.
                let inbox = self.inbox.lock();
                if inbox.doorbells_waiting > 0 {
                    return;
                }
                drop(inbox);
                break;
            }
            if !again {
                return;
            }
        }
        Self::schedule(self.as_arc_borrow());
    }

    /// Schedules a run of `this` unless a run is in progress, which looks at the inbox again
    /// before it ends ([`QpShared::finish_run`]).
    ///
    /// A doorbell's note is the exception: a run in softirq does not act on it. It is there,
    /// and no doorbell waits for that run, when the doorbell found a run in process context
    /// in progress and left its WQEs to it, and a run in softirq took over the lock before
    /// that run could run again.
    fn schedule_unless_running(this: ArcBorrow<'_, Self>) {
        let inbox = this.inbox.lock();
        let orphaned = inbox.in_softirq && inbox.kicked && inbox.doorbells_waiting == 0;
        if !inbox.dying && (!inbox.running || orphaned) {
            // As in `schedule`.
            let _ = this.work_queue().enqueue::<Arc<Self>, RUN>(Arc::from(this));
        }
    }

    /// Queues a packet for this queue pair (any context) and schedules what `then` says, under
    /// one hold of the inbox's lock.
    ///
    /// Fails with `ESRCH` if the queue pair is being destroyed, or as [`PacketQueue::push`],
    /// and hands the packet back.
    ///
    /// Returns whether new send WQEs or held requests wait for a run in process context,
    /// which is then scheduled or in progress (but for [`Then::Queue`]).
    fn enqueue(
        this: ArcBorrow<'_, Self>,
        packet: Packet,
        then: Then,
    ) -> Result<bool, (Error, Packet)> {
        let mut inbox = this.inbox.lock();
        if inbox.dying {
            return Err((ESRCH, packet));
        }
        inbox.packets.push(packet)?;
        let waiting_sends = then != Then::Queue && inbox.kicked && !inbox.sending_run();
        match then {
            _ if waiting_sends => Self::schedule_locked(this, &inbox),
            Then::WorkItem if !inbox.running => Self::schedule_locked(this, &inbox),
            Then::RoundEnd if !inbox.kicked && !inbox.running && !inbox.receive_queued => {
                inbox.receive_queued = true;
                // Not queued already (noted under this lock, cleared as it starts).
                let _ = workqueue::system_bh().enqueue::<Arc<Self>, RECEIVE>(Arc::from(this));
            }
            Then::Inline { long_read: true } => inbox.long_read = true,
            _ => {}
        }
        Ok(inbox.kicked)
    }

    /// Notes new send WQEs and schedules a run for them (any context, interrupts off
    /// included: a kernel consumer's post).
    pub(crate) fn kick_later(this: ArcBorrow<'_, Self>) {
        let mut inbox = this.inbox.lock();
        inbox.kicked = true;
        if !inbox.sending_run() {
            Self::schedule_locked(this, &inbox);
        }
    }

    /// Notes that the timer fired and schedules a run.
    pub(crate) fn timer_fired(self: &Arc<Self>) {
        let mut inbox = self.inbox.lock();
        inbox.due = true;
        Self::schedule_locked(self.as_arc_borrow(), &inbox);
    }

    /// Processes the send queue of a connected queue pair (RC, UC) now, in the caller's
    /// (process) context, if the consumer polled a completion since the last doorbell
    /// ([`QpShared::polled_since_doorbell`]), the requester has at most one WQE outstanding
    /// ([`Transport::few_outstanding`]) and no run in process context is in progress
    /// elsewhere; otherwise the run in progress or the work item does it.
    ///
    /// A doorbell on an idle queue pair runs it in the system call, which saves a context
    /// switch on the way to the wire (latency), and then what came back meanwhile
    /// ([`DOORBELL_RUNS`]): bounded. Of other queue pairs' work it does only the
    /// receive of this device's packets it sent ([`Receivers::run`]). Under load the work item
    /// runs it, while the caller goes on posting and polling on its own CPU.
    ///
    /// A run in softirq on another CPU (the acknowledgement of the last request, as often as
    /// not) is waited for, whether it was seen here or found holding the lock: it takes no new
    /// WQE and sends no request ([`Transport::hold_requests`]), and leaving them to the work
    /// item costs a wake-up per message. It is bounded.
    ///
    /// A doorbell whose WQEs a run took already (a worker waiting for them saw them in the
    /// ring, [`QpShared::linger`], or any run that took them first) does nothing.
    ///
    /// A datagram queue pair instead sends what was posted before the doorbell returns,
    /// waiting for a run in progress ([`QpShared::send_posted`]).
    pub(crate) fn kick(self: &Arc<Self>) {
        if !matches!(self.qp_type, IbQpType::Rc | IbQpType::Uc) {
            self.send_posted();
            return;
        }
        let polled = self.polled_since_doorbell();
        // Everything posted before this doorbell was taken already: by the worker waiting for
        // it, which saw the WQEs in the ring first ([`QpShared::linger`]), or by another run.
        if self.sq_untaken(u32::MAX).is_none() {
            return;
        }
        if !polled {
            Self::kick_later(self.as_arc_borrow());
            return;
        }
        let wait = {
            let mut inbox = self.inbox.lock();
            inbox.kicked = true;
            // A run in process context (the work item's, or its worker waiting for this
            // doorbell, [`QpShared::linger`]) sees the note before it ends.
            if inbox.sending_run() {
                return;
            }
            // A READ or atomic goes from the work item, whose worker waits for the next one
            // ([`QpShared::linger`]), on the CPU the caller is not polling on.
            if self.user && !inbox.running && self.asks.load(Relaxed) && self.next_asks() {
                Self::schedule_locked(self.as_arc_borrow(), &inbox);
                return;
            }
            let wait = inbox.running && inbox.in_softirq;
            if wait {
                inbox.doorbells_waiting = inbox.doorbells_waiting.saturating_add(1);
            }
            wait
        };
        self.run_here_if(Context::Process, wait, |t| t.few_outstanding());
    }

    /// Runs a datagram queue pair here until its send queue is empty, after the run in
    /// progress elsewhere, if any, ends (process context).
    ///
    /// A UD send WQE names its address handle by number, looked up when the datagram is sent,
    /// and user space may destroy the handle as soon as the post returns: mckey's sender does,
    /// right before its queue pair. Left to the work item, whose run may be busy with received
    /// datagrams, such a send would fail for want of its handle. A datagram is not held back
    /// by its peer: this sends up to [`DRAIN_RUNS`] runs of [`SEND_BUDGET`] packets, and
    /// leaves the rest of a deeper post list to the work item.
    fn send_posted(self: &Arc<Self>) {
        if self.run_until_sent(Context::Process) {
            // Received datagrams, or a send queue deeper than the bound: the work item's.
            Self::schedule(self.as_arc_borrow());
        }
    }

    /// Runs the queue pair here, in process context, until a run leaves nothing more to send
    /// ([`RunEnd::more`]) or [`DRAIN_RUNS`] runs are done; returns whether something waits.
    ///
    /// Each run ends as `ctx` says ([`QpShared::finish_run`]).
    fn run_until_sent(self: &Arc<Self>, ctx: Context) -> bool {
        for _ in 0..DRAIN_RUNS {
            self.inbox.lock().kicked = true;
            let mut guard = self.transport.lock();
            let end = self.run_once(&mut guard, Context::Process);
            drop(guard);
            let more = end.more;
            let waiting = self.finish_run(end, ctx, false);
            if !more {
                return waiting;
            }
        }
        true
    }

    /// One run: received packets, expired timers, then the send queue.
    fn run_once(self: &Arc<Self>, transport: &mut Option<KBox<Transport>>, ctx: Context) -> RunEnd {
        let (mut packets, kicked, due, dying) = {
            let mut inbox = self.inbox.lock();
            inbox.running = true;
            inbox.in_softirq = ctx == Context::Softirq;
            inbox.long_read = false;
            let spare = core::mem::take(&mut inbox.spare);
            (
                core::mem::replace(&mut inbox.packets, spare),
                // A doorbell's new WQEs are for a run in process context: a run in softirq
                // leaves the note for it.
                ctx != Context::Softirq && core::mem::take(&mut inbox.kicked),
                core::mem::take(&mut inbox.due),
                inbox.dying,
            )
        };
        let mut end = RunEnd {
            more: false,
            failed: false,
            bad: None,
            receivers: Receivers::default(),
            held_requests: false,
            batch: PacketQueue::default(),
        };
        // Reset or going: what waited is dropped, as by a port that is down.
        let Some(t) = transport.as_mut() else {
            // RESET and INIT have no transport yet: not in a state to receive.
            let why = if dying {
                DropReason::Purge
            } else {
                DropReason::QpState
            };
            for pkt in packets.drain_all() {
                self.dropped(why, pkt);
            }
            core::mem::replace(&mut end.batch, packets).drop_unallocated();
            return end;
        };
        let engine = &*self.engine;
        t.hold_requests(ctx == Context::Softirq);
        t.tx_waiting = false;
        // A run in process context is bounded in time: the work item's runs with bottom halves
        // off, whose packets wait until it ends, most of all. A run in softirq sends a READ
        // response whole or not at all ([`Transport::response_exceeds`]).
        t.bound_run(ctx != Context::Softirq);
        // Packets for queue pairs of this device, queued to them before the transport is
        // unlocked; the vector keeps its capacity from run to run, as do the buffers.
        let mut out = core::mem::take(&mut t.out);
        let mut tx = core::mem::take(&mut t.tx);
        // Packets first: an acknowledgement that waits here pushes back the retransmit
        // deadline of a timer that fired meanwhile, which then finds nothing due. Run before
        // it, the timer would resend what the acknowledgement covers.
        let arrived = !packets.is_empty();
        let mut backlog = core::mem::take(&mut t.backlog);
        let mut received = false;
        if self.can_receive() {
            // Held back packets first, then the new ones, in order.
            for pkt in Iterator::chain(backlog.drain_all(), packets.drain_all()) {
                received = true;
                end.failed |= self.take_packet(t, pkt, true, &mut tx, &mut out);
            }
            // Early requests whose gap did not fill in time: a packet was lost after all.
            if t.early_deadline().is_some_and(|d| d <= engine.now()) {
                received = true;
                end.failed |= self.release_early(t, &mut tx, &mut out);
            }
            // Only a pending ACK makes the end of the batch send anything: a READ's or an
            // atomic's answer went out with it (`flush_ack` before any response).
            if received && t.ack_pending() {
                end.failed |= engine.end_batch(self, t, &mut tx, &mut out);
            }
        } else {
            // Not in a state to receive (INIT, or ERR): as C's `check_type_state`. Early
            // requests held before go too, or their deadline would keep setting the timer.
            for pkt in Iterator::chain(backlog.drain_all(), packets.drain_all()) {
                self.dropped(DropReason::QpState, pkt);
            }
            while let Some(pkt) = t.take_first_early() {
                self.dropped(DropReason::QpState, pkt);
            }
        }
        if t.is_sending_response() {
            // Answers go out even from a QP that may not send requests yet (RTR).
            end.failed |= engine.resume_response(self, t, &mut tx, &mut out);
        }
        if due {
            end.failed |= engine.run_timers(self, t, &mut tx, &mut out);
        }
        // Acknowledgements free room in the send window: the ring is fed after packets too.
        if kicked || due || arrived {
            let s = engine.send(self, t, &mut tx, &mut out);
            end.failed |= s.failed;
            end.bad = s.bad;
            if s.ran_dry {
                self.inbox.lock().kicked = true;
                end.more = true;
            }
        }
        // The rest of the response, and what waits behind it, in the next run.
        // Not while it waits for its socket buffers to drain: that wakes it.
        end.more |= (t.is_sending_response() || !t.backlog.is_empty()) && !t.tx_waiting;
        if t.hold_requests(false) {
            self.inbox.lock().kicked = true;
            end.held_requests = true;
        }
        t.bound_run(false);
        self.note_psns(Some(t));
        engine.note_timers(self, t);
        engine.queue_local(self, &mut out, &mut end.receivers);
        drop_unallocated(core::mem::replace(&mut t.out, out));
        // The run's buffers past a few go to the device's pool; what was left in their place
        // was never allocated, and its drop would still call the allocator.
        tx.trim(&engine.buffers);
        core::mem::replace(&mut t.tx, tx).drop_unallocated();
        core::mem::replace(&mut end.batch, packets).drop_unallocated();
        // Taken above and drained: held packets went back into `t.backlog`. If none did, the
        // drained queue keeps its capacity for the next run.
        if t.backlog.is_empty() {
            core::mem::swap(&mut t.backlog, &mut backlog);
        }
        backlog.drop_unallocated();
        end
    }

    /// Handles a packet a run received: holds it back behind a READ response being sent,
    /// holds it while it is an early request and `hold` allows, or hands it to the transport,
    /// followed by the early requests it was the gap for. Returns whether the transport failed.
    ///
    /// None is handled while a READ response waits for transmit buffers (requests must not
    /// overtake it), but a duplicate READ: the requester asks again for what it misses.
    fn take_packet(
        self: &Arc<Self>,
        t: &mut Transport,
        mut pkt: Packet,
        mut hold: bool,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        let engine = &*self.engine;
        let mut failed = false;
        loop {
            if (t.is_sending_response() || !t.backlog.is_empty()) && !t.replaces_response(&pkt) {
                self.to_backlog(t, pkt);
                return failed;
            }
            // Parsed once here, for the holder and for the transport (the ICRC was checked
            // when the packet came).
            let Ok(parsed) = pkt.parse() else {
                tx.consume(&engine.buffers, pkt);
                return failed;
            };
            let early = if hold { t.early_psn(&parsed) } else { None };
            if let Some(psn) = early {
                match t.hold_early(psn, pkt, engine.now()) {
                    Ok(()) => return failed,
                    Err(p) => {
                        // No room, or a second copy (the requester resent): the gap is a loss
                        // after all. What is held goes first, as it came first; one of them
                        // may start a READ response, which this one must not overtake: checked
                        // again.
                        pkt = p;
                        hold = false;
                        failed |= self.release_early(t, tx, out);
                        continue;
                    }
                }
            }
            failed |= engine.receive(self, t, &pkt, &parsed, tx, out);
            tx.consume(&engine.buffers, pkt);
            // The gap may have closed: the early requests held behind it follow, in turn.
            match t.take_in_turn() {
                Some(next) => {
                    pkt = next;
                    hold = false;
                }
                None => return failed,
            }
        }
    }

    /// Queues `pkt` behind the READ response being sent; if the backlog refuses it (full, or
    /// no memory), it is dropped and counted, as by a full inbox: the requester retries.
    fn to_backlog(&self, t: &mut Transport, pkt: Packet) {
        if let Err((e, pkt)) = t.backlog.push(pkt) {
            self.dropped(DropReason::not_taken(e), pkt);
        }
    }

    /// Hands every early request held to the transport, in PSN order: the first one after
    /// the gap gets the sequence error NAK, as it would have without holding. Returns whether
    /// the transport failed.
    fn release_early(
        self: &Arc<Self>,
        t: &mut Transport,
        tx: &mut RunBuffers,
        out: &mut KVec<Packet>,
    ) -> bool {
        let mut failed = false;
        while let Some(pkt) = t.take_first_early() {
            failed |= self.take_packet(t, pkt, false, tx, out);
        }
        failed
    }

    /// Completes a run once the transport is unlocked; returns whether the queue pair must
    /// run again (something is left or waits).
    ///
    /// With `linger`, a run that leaves nothing to do stays marked running for the wait that
    /// follows ([`QpShared::linger`]): a doorbell in between leaves its WQEs to the worker
    /// rather than queue the work item again, which on an unbound workqueue (no concurrency
    /// management) wakes an idle worker, a second task on the CPU the wait is for.
    fn finish_run(self: &Arc<Self>, mut end: RunEnd, ctx: Context, linger: bool) -> bool {
        if end.bad.is_some() {
            self.complete_bad_wqe();
        }
        if end.failed || end.bad.is_some() {
            self.enter_error();
        }
        end.receivers.run(ctx);
        let waiting = {
            let mut inbox = self.inbox.lock();
            if inbox.spare.capacity() < end.batch.capacity() {
                // The old spare is freed after the unlock, with `end`.
                core::mem::swap(&mut inbox.spare, &mut end.batch);
            }
            // What was queued while the run went on is seen here, under the same lock: the
            // caller runs again or schedules.
            let waiting = inbox.waiting(ctx);
            inbox.running = linger && !waiting && !end.more;
            inbox.in_softirq = false;
            (
                waiting,
                // Not once `stop` has flushed the fault work.
                inbox.fault.is_some() && !inbox.dying,
            )
        };
        let (waiting, fault) = waiting;
        if fault {
            Self::queue_fault(self);
        }
        end.batch.drop_unallocated();
        end.more || waiting
    }

    /// Sends what the send queue still holds, as far as the transport can without its peer,
    /// before the queue pair goes (process context).
    ///
    /// A datagram posted before `destroy_qp` is not lost for want of a run: mckey's sender
    /// destroys its queue pair as soon as its sends are posted, while the work item may still
    /// hold them. The C driver drains its tasks the same way. Bounded by [`DRAIN_RUNS`] runs
    /// of [`SEND_BUDGET`] packets; a reliable connection stops at its full window. Sending
    /// that waits for its socket buffers in flight to drain, or after a local drop, goes on
    /// once they do, for up to [`IN_FLIGHT_WAIT_MS`].
    pub(crate) fn drain(self: &Arc<Self>) {
        for _ in 0..IN_FLIGHT_WAIT_MS / 10 {
            // What came in meanwhile is dropped by `stop`: only the send queue matters here.
            let _ = self.run_until_sent(Context::Nested);
            if !self.transport.lock().as_ref().is_some_and(|t| t.tx_waiting) {
                return;
            }
            fsleep(Delta::from_millis(10));
        }
    }

    /// Stops scheduling for good, waits for the timer, the runs and the fault work, and drops
    /// what waits: when this returns, no work item of the queue pair is queued or running,
    /// and none will be.
    ///
    /// The transport must be gone already (`None`): only a run with a transport sets the timer.
    pub(crate) fn stop(&self) {
        {
            let mut inbox = self.inbox.lock();
            inbox.dying = true;
            inbox.fault = None;
            inbox.fault_failed = None;
        }
        // A pending timer runs now and schedules nothing.
        self.timer.flush();
        self.receive.flush();
        self.run.flush();
        // After the run: no run queues it any more.
        self.fault_work.flush();
        let mut packets = core::mem::take(&mut self.inbox.lock().packets);
        for pkt in packets.drain_all() {
            self.dropped(DropReason::Purge, pkt);
        }
    }

    /// Waits, for up to [`IN_FLIGHT_WAIT_MS`], until none of the queue pair's socket buffers is
    /// in flight (process context).
    ///
    /// Each holds a reference on the queue pair: waited for, its last reference goes in
    /// `destroy_qp` rather than in a buffer's destructor (softirq, usually), where its rings'
    /// memory is freed later. A queue that holds them longer (a link stopped) is not waited
    /// for: its last buffer frees the queue pair.
    pub(crate) fn wait_in_flight(&self) {
        for _ in 0..IN_FLIGHT_WAIT_MS / 10 {
            if self.in_flight.count() == 0 {
                return;
            }
            fsleep(Delta::from_millis(10));
        }
    }

    /// Drops the transport `old`, taken from this queue pair (reset or destroy), and the packets
    /// it held, counted as purged.
    pub(crate) fn retire_transport(&self, old: Option<KBox<Transport>>) {
        // What the connection's accesses left for the fault work is not the next one's.
        {
            let mut inbox = self.inbox.lock();
            inbox.fault = None;
            inbox.fault_failed = None;
        }
        let Some(mut t) = old else {
            return;
        };
        for pkt in t.backlog.drain_all() {
            self.dropped(DropReason::Purge, pkt);
        }
        while let Some(pkt) = t.take_first_early() {
            self.dropped(DropReason::Purge, pkt);
        }
    }

    /// Drops `pkt`, which came for this queue pair, for `why`: counted and traced.
    fn dropped(&self, why: DropReason, pkt: Packet) {
        why.report(&self.engine.counters, self.dev_index, self.number());
        pkt.drop_with(why.skb_reason());
    }
}
