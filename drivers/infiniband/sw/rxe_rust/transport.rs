// SPDX-License-Identifier: GPL-2.0

//! The transport of a queue pair: the protocol core's requester, completer and responder
//! (`roce::qp::QpTransport`), fed from the rings and wired to memory regions, completion queues and
//! the engine.
//!
//! Only the queue pair's runs ([`crate::engine`]) and `modify_qp` touch a transport, under its
//! spinlock, in process context or in the receive softirq: nothing here sleeps. Memory is
//! allocated with `GFP_ATOMIC` (the transmit buffer and the packet queues keep their capacity,
//! so that is rare), and memory regions are borrowed under the RCU read lock: `dereg_mr` waits
//! for a grace period before it frees one, so no run drops the last reference to pinned pages.

use crate::{
    ah::AhTable,
    buffers::{
        BufferPool,
        RunBuffers, //
    },
    engine::drop_unallocated,
    mr::{
        MrShared,
        MrTable, //
    },
    mw::{
        is_window_key,
        MwTable, //
    },
    odp, param,
    qp::{
        QpShared,
        MAX_SEND_WQE, //
    },
    roce::{
        headers::Bth,
        icrc::UdpHeader,
        io::{
            AsyncEvent,
            Clock,
            Completion,
            Counter as RoceCounter,
            Destination,
            Instant,
            Output,
            RecvSlot,
            RetransmitCause,
            TimerId,
            TraceEvent,
            WorkQueue, //
        },
        memory::{
            for_each_chunk,
            Access,
            AccessError,
            AtomicOp,
            MemoryAccess,
            MwBind,
            Registration,
            WqeRef, //
        },
        mtu::IbMtu,
        opcode::QpType,
        packet::{
            Fragments,
            Packet as RocePacket,
            ParseError,
            Payload, //
        },
        psn::Psn,
        qp::{
            QpConfig, //
            QpTransport,
        },
        reorder::Held,
        requester::SendWr,
        responder::{
            Resource,
            GRH_LEN, //
        },
        timer::{
            AckTimeout,
            RnrTimer, //
        },
        wqe::{
            decode_recv_wqe,
            decode_send_wqe,
            SendQueueLimits,
            SendWqe,
            Sge,
            WqeData, //
        },
    },
    rx::DropReason,
    stats::{
        Counter,
        Counters, //
    },
    tx::{
        self,
        Path,
        RouteCache,
        TxBuf, //
    },
};
use core::cell::RefCell;
use kernel::{
    append::{
        Append,
        SliceAppender, //
    },
    net::{
        device::NetDevice,
        skbuff::{
            SkBuff,
            SkbDropReason, //
        },
    },
    prelude::*,
    rdma::{
        cq::{
            WcFlags,
            WcOpcode,
            WcStatus,
            WorkCompletion, //
        },
        event::QpEvent,
        qp::attr::{
            QpAttrCopy,
            QpType as IbQpType, //
        },
        trace, //
    },
    sync::{
        rcu,
        Arc,
        SpinLockIrq, //
    },
    time::{
        jiffies_64,
        NSEC_PER_JIFFY, //
    },
};
use zerocopy::FromBytes;

/// Send WQEs the transport keeps outstanding at once; the rest wait in the ring.
pub(crate) const SQ_WINDOW: usize = 32;

/// Early requests a queue pair may hold ([`crate::roce::reorder`]); one more releases them.
const EARLY_REQUESTS: usize = 8;

/// How long the oldest early request waits for the gap before it to fill: enough for a packet
/// in another CPU's backlog, short against the requester's retransmit timeout. The device's
/// clock counts whole jiffies, so this is one to two jiffies.
const EARLY_HOLD_NANOS: u64 = 1_000_000;

/// How long a run in process context goes on sending, counted from the run's start (it sends
/// at least one packet).
///
/// The work item runs with bottom halves off: what it sends to a veth is received only once
/// the run ends, while the peer's local ACK timer runs. On the debug kernel a packet takes
/// about a millisecond to send and as long to receive, and a READ response of 64 packets sent
/// in one run reached the requester after its 67 ms timeout (perftest's default; the C driver
/// receives each packet as it sends it). Elsewhere a run of 64 packets takes well under this,
/// which is `net_rx_action`'s bound too (`netdev_budget_usecs`). The clock counts whole
/// jiffies ([`RUN_JIFFIES`]): at least this long, and at most the jiffies that cover it plus
/// one (with HZ=250, two jiffies: 4 to 8 ms).
const RUN_NANOS: u64 = 2_000_000;

/// Jiffies a run bounded by [`RUN_NANOS`] may see go by.
const RUN_JIFFIES: u64 = RUN_NANOS.div_ceil(NSEC_PER_JIFFY) + 1;

/// RDMA READ and atomic responses the responder keeps for duplicate requests: one for each it
/// may have outstanding ([`param::MAX_QP_RD_ATOM`]).
const RESPONDER_RESOURCES: usize = 128;
const _: () = assert!(RESPONDER_RESOURCES == param::MAX_QP_RD_ATOM as usize);

/// The protocol core's transport of a queue pair, as this driver sizes it.
///
/// The responder's resources are in a vector allocated once at its full size when the
/// transport is built: 128 of them would not fit in a stack frame with the rest of the state.
pub(crate) type Roce = QpTransport<SQ_WINDOW, KVec<Option<Resource>>>;

// The protocol state is built on the stack of `modify_qp` before it moves to the heap: keep it
// small.
const _: () = assert!(core::mem::size_of::<Roce>() <= 4096);

/// The largest receive WQE.
const MAX_RECV_WQE: usize = param::RECV_WQE_SIZE + param::MAX_SGE as usize * param::SGE_SIZE;

// The scratch space holds either kind.
const _: () = assert!(MAX_RECV_WQE <= MAX_SEND_WQE);

/// Space a run copies work queue entries into to decode them: reused, never zero-filled (a
/// decoder reads only the bytes just copied in).
pub(crate) struct ScratchBuf {
    bytes: [u8; MAX_SEND_WQE],
    /// The send queue slot whose WQE `bytes` holds, and the WQE's length: the requester
    /// gathers the payload of the WQE it just took without copying it out of the ring again.
    /// A slot is written again only after its WQE retired, and a new WQE there is taken
    /// (and copied here) before its payload is gathered.
    send: Option<(u32, usize)>,
    /// The buffer of each READ and atomic WQE in flight that has a single SGE, by slot modulo
    /// [`SQ_WINDOW`]: its response is placed without copying and decoding the WQE again. An
    /// entry is replaced whenever a WQE is taken in its place, so one that names a slot is
    /// that slot's WQE in flight; two WQEs in flight that share an entry leave the older one
    /// to a copy.
    replies: [Option<(u32, Sge)>; SQ_WINDOW],
}

impl ScratchBuf {
    /// Returns the entry of `slot` in [`ScratchBuf::replies`].
    fn reply_entry(&mut self, slot: u32) -> Option<&mut Option<(u32, Sge)>> {
        self.replies.get_mut(slot as usize % SQ_WINDOW)
    }
}

type Scratch = RefCell<ScratchBuf>;

/// A receive WQE the responder took out of the ring, copied (user space may reuse the slot).
struct TakenRecv {
    slot: u32,
    sges: KVec<Sge>,
}

/// Receive SGE lists kept for reuse, at most: a received message allocates none.
const SPARE_SGE_LISTS: usize = 8;

/// Receive WQEs taken and not completed yet.
#[derive(Default)]
struct Taken {
    list: KVec<TakenRecv>,
    next: u32,
    /// Empty SGE lists of completed receive WQEs, for the next ones.
    spare: KVec<KVec<Sge>>,
}

/// The transport of one queue pair.
pub(crate) struct Transport {
    qp: KBox<Roce>,
    /// The next send queue slot to hand to the requester.
    pub(crate) sq_read: u32,
    /// The last run that took send WQEs stopped at a full window: more may wait in the ring,
    /// their doorbell spent, for the acknowledgement that makes room.
    pub(crate) sq_stalled: bool,
    taken: RefCell<Taken>,
    /// Where the connected peer is (RC, UC): its MAC decides loopback. Changed only through
    /// [`Transport::set_path`], which forgets `route`'s connected entry.
    path: Path,
    /// The route the last packet to another host took.
    route: RouteCache,
    /// Armed timers: deadlines in nanoseconds of the device's clock.
    pub(crate) timers: [Option<u64>; 2],
    /// The deadline the queue pair's timer is set for, if any.
    pub(crate) armed: Option<u64>,
    /// Packets held back while a READ response waits for transmit buffers.
    pub(crate) backlog: PacketQueue,
    /// Requests that came early, held until those before them come ([`crate::roce::reorder`]).
    early: Held<Packet, EARLY_REQUESTS>,
    /// The requester took new WQEs since the last message of SENDs or WRITEs came: the next
    /// one comes in turn, as in a ping-pong, not in a one-way stream.
    in_turn: bool,
    /// Requests wait for a run in process context (see [`Transport::hold_requests`]).
    hold_requests: bool,
    /// A request waited because of [`Transport::hold_requests`].
    held_request: bool,
    /// The run stopped sending for want of room among the socket buffers in flight
    /// ([`QpShared::in_flight`]), or after a packet was dropped on its way out: the queue pair
    /// runs again once they drain or at `tx_retry_at`, not before.
    pub(crate) tx_waiting: bool,
    /// When the queue pair sends again what a local drop stopped (nanoseconds of the device's
    /// clock).
    pub(crate) tx_retry_at: Option<u64>,
    /// The jiffy the run began, if its sending is bounded in time ([`Transport::bound_run`]).
    run_from: Option<u64>,
    /// The buffers a run builds packets in that go nowhere or to this device; a run borrows
    /// them.
    pub(crate) tx: RunBuffers,
    /// The vector a run collects its packets for queue pairs of this device in, empty; a run
    /// borrows it.
    pub(crate) out: KVec<Packet>,
    scratch: Scratch,
}

/// Returns the protocol core's queue pair type.
pub(crate) fn roce_type(qp_type: IbQpType) -> QpType {
    match qp_type {
        IbQpType::Rc => QpType::Rc,
        IbQpType::Uc => QpType::Uc,
        IbQpType::Gsi => QpType::Gsi,
        _ => QpType::Ud,
    }
}

/// Builds the protocol core's configuration from the attributes `modify_qp` kept.
fn config(
    qp_type: IbQpType,
    qpn: u32,
    sq_sig_all: bool,
    srq: bool,
    attr: &QpAttrCopy,
    port_mtu: IbMtu,
) -> QpConfig {
    let a = attr.get();
    let qp_type = roce_type(qp_type);
    let mtu = match qp_type {
        // Datagrams go by the port's MTU.
        QpType::Ud | QpType::Gsi => port_mtu,
        _ => IbMtu::from_raw(a.path_mtu).unwrap_or(IbMtu::Mtu256),
    };
    QpConfig {
        qp_type,
        qpn,
        dest_qpn: a.dest_qp_num,
        pkey: param::DEFAULT_PKEY,
        qkey: a.qkey,
        mtu,
        sq_psn: Psn::new(a.sq_psn),
        rq_psn: Psn::new(a.rq_psn),
        retry_cnt: a.retry_cnt.min(7),
        rnr_retry: a.rnr_retry.min(7),
        min_rnr_timer: RnrTimer::from_bits(a.min_rnr_timer),
        ack_timeout: AckTimeout::new(a.timeout)
            .or(AckTimeout::new(14))
            .unwrap_or_else(|| unreachable!()),
        max_rd_atomic: a.max_rd_atomic,
        access: Access::from_bits(a.qp_access_flags as u32),
        sq_sig_all,
        srq,
    }
}

impl Transport {
    /// Sets where the connected peer is, and forgets the route to the old one.
    pub(crate) fn set_path(&mut self, path: Path) {
        self.path = path;
        self.route = None;
    }

    /// Creates the transport of a queue pair entering RTR.
    pub(crate) fn new(
        qp: &QpShared,
        sq_sig_all: bool,
        attr: &QpAttrCopy,
        port_mtu: IbMtu,
        sq_read: u32,
        path: Path,
    ) -> Result<KBox<Self>> {
        let cfg = config(
            qp.qp_type,
            qp.number(),
            sq_sig_all,
            qp.has_srq(),
            attr,
            port_mtu,
        );
        let resources = KVec::from_elem(None, RESPONDER_RESOURCES, GFP_KERNEL)?;
        let qp = KBox::new(
            QpTransport::new(&cfg, resources).map_err(|_| EINVAL)?,
            GFP_KERNEL,
        )?;
        Ok(KBox::new(
            Self {
                qp,
                sq_read,
                sq_stalled: false,
                taken: RefCell::new(Taken::default()),
                path,
                route: None,
                timers: [None, None],
                armed: None,
                backlog: PacketQueue::default(),
                early: Held::new(),
                in_turn: false,
                hold_requests: false,
                held_request: false,
                tx_waiting: false,
                tx_retry_at: None,
                run_from: None,
                tx: RunBuffers::default(),
                out: KVec::new(),
                scratch: RefCell::new(ScratchBuf {
                    bytes: [0; MAX_SEND_WQE],
                    send: None,
                    replies: [None; SQ_WINDOW],
                }),
            },
            GFP_KERNEL,
        )?)
    }

    /// Returns whether the requester has at most one send WQE outstanding: a doorbell then runs
    /// the queue pair itself ([`QpShared::kick`]).
    ///
    /// One, not none: in a ping-pong the peer's answer can overtake its acknowledgement of the
    /// last request (sent from its softirq, which queues it behind the softirq's other work,
    /// while the answer goes from a system call), so the next request is posted before that
    /// acknowledgement is in.
    pub(crate) fn few_outstanding(&self) -> bool {
        self.qp.requester.outstanding() <= 1
    }

    /// Makes the requester leave its requests to a run in process context (`hold`), or lets
    /// it send them again; returns whether a request waited since the last call.
    ///
    /// A run in softirq sends responses only. On a veth, what it sends waits in this CPU's
    /// backlog until the softirq ends, while what a process context sends is received on its
    /// own CPU as soon as bottom halves are on again (within a doorbell's transmit call, at
    /// the end of a work item's run): a request sent from softirq could be overtaken by the
    /// next one, sent by the work item on another CPU, and the responder would take the gap
    /// for a loss. The C driver's requester, too, runs in process context only.
    pub(crate) fn hold_requests(&mut self, hold: bool) -> bool {
        self.hold_requests = hold;
        core::mem::take(&mut self.held_request)
    }

    /// Bounds the sending of the run that begins in time ([`RUN_NANOS`]) with `true`; lifts
    /// the bound with `false`, when the run ends.
    pub(crate) fn bound_run(&mut self, bound: bool) {
        self.run_from = bound.then(jiffies_64);
    }

    /// Returns whether requests are held ([`Transport::hold_requests`]): the run takes no new
    /// send WQE either, which its doorbell's run in process context takes.
    pub(crate) fn holds_requests(&self) -> bool {
        self.hold_requests
    }

    /// Notes that the requester took new WQEs: the next SEND or WRITE that comes is in turn.
    pub(crate) fn note_turn(&mut self) {
        self.in_turn = true;
    }

    /// Returns whether a packet of a SEND or WRITE comes in turn (see [`Transport::note_turn`]);
    /// the last packet of its message (`ends`) uses the turn up.
    pub(crate) fn take_turn(&mut self, ends: bool) -> bool {
        let in_turn = self.in_turn;
        if ends {
            self.in_turn = false;
        }
        in_turn
    }

    /// Returns the queue pair's PSNs now.
    pub(crate) fn psns(&self) -> Psns {
        Psns {
            rq: self.qp.expected_psn().get(),
            sq: self.qp.send_psn().get(),
        }
    }

    /// Returns the path of the connected peer.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Returns whether a coalesced ACK waits for the end of the run's batch of received
    /// packets.
    pub(crate) fn ack_pending(&self) -> bool {
        self.qp.ack_pending()
    }

    /// Returns whether a READ response waits for transmit buffers: received packets wait
    /// in [`Transport::backlog`] until it is sent.
    pub(crate) fn is_sending_response(&self) -> bool {
        self.qp.is_sending_response()
    }

    /// Returns whether the run in softirq of an RDMA READ request for `read_len` bytes (or of
    /// any packet, with `None`) would send a READ response
    /// in part only, or resume one: the work item then sends it all.
    ///
    /// On a veth, what a softirq sends waits in this CPU's backlog until the softirq ends (see
    /// [`Transport::hold_requests`]): the rest of a response, sent by the work item on another
    /// CPU, overtook the part sent from softirq, and each such gap cost the requester a retry (`ib_read_bw -s 1M` over a veth,
    /// 2 vCPUs: `completer_retry_err` 58 and `duplicate_request` 540 in 1,000 READs; none
    /// with one vCPU). The C driver sends every READ response from its work item.
    pub(crate) fn response_exceeds(&self, read_len: Option<u32>, budget: usize) -> bool {
        self.is_sending_response()
            || read_len.is_some_and(|len| {
                usize::try_from(self.qp.read_response_packets(len)).unwrap_or(usize::MAX) > budget
            })
    }

    /// Returns true if `packet` goes before the READ response that waits: a
    /// duplicate READ request (the requester asks again for what it misses).
    pub(crate) fn replaces_response(&self, packet: &Packet) -> bool {
        packet
            .parse()
            .is_ok_and(|pkt| self.qp.replaces_response(&pkt))
    }

    /// Returns the PSN of `pkt` if it is a request that came early
    /// ([`QpTransport::is_early_request`]), to hold with [`Transport::hold_early`].
    pub(crate) fn early_psn(&self, pkt: &RocePacket<'_>) -> Option<Psn> {
        self.qp.is_early_request(pkt).then(|| pkt.psn())
    }

    /// Holds `pkt`, an early request with PSN `psn` ([`Transport::early_psn`]), at `now`; hands
    /// it back if the holder is full or holds that PSN already.
    pub(crate) fn hold_early(&mut self, psn: Psn, pkt: Packet, now: u64) -> Result<(), Packet> {
        self.early
            .hold(psn, self.qp.expected_psn(), pkt, Instant(now))
    }

    /// Takes the held request the responder expects now, if there is one.
    pub(crate) fn take_in_turn(&mut self) -> Option<Packet> {
        self.early.take(self.qp.expected_psn())
    }

    /// Takes the held request that comes first, to release them all in order.
    pub(crate) fn take_first_early(&mut self) -> Option<Packet> {
        self.early.take_first(self.qp.expected_psn())
    }

    /// Returns when the early requests held are released if their gap has not filled, in
    /// nanoseconds of the device's clock.
    pub(crate) fn early_deadline(&self) -> Option<u64> {
        self.early.deadline(EARLY_HOLD_NANOS).map(|d| d.0)
    }

    /// Starts the requester with the attributes of a queue pair entering RTS.
    pub(crate) fn start(
        &mut self,
        qp: &QpShared,
        sq_sig_all: bool,
        attr: &QpAttrCopy,
        port_mtu: IbMtu,
    ) -> Result {
        let cfg = config(
            qp.qp_type,
            qp.number(),
            sq_sig_all,
            qp.has_srq(),
            attr,
            port_mtu,
        );
        // The ring starts anew: no slot's copy holds.
        let scratch = self.scratch.get_mut();
        scratch.send = None;
        scratch.replies = [None; SQ_WINDOW];
        self.qp.restart_requester(&cfg).map_err(|_| EINVAL)
    }
}

/// What the transport of a queue pair reaches while it runs.
pub(crate) struct Env<'a> {
    /// The queue pair.
    pub(crate) shared: &'a Arc<QpShared>,
    /// The device's memory regions.
    pub(crate) mrs: &'a MrTable,
    /// The device's memory windows.
    pub(crate) mws: &'a MwTable,
    /// The device's address handles.
    pub(crate) ahs: &'a AhTable,
    /// The device's counters.
    pub(crate) counters: &'a Counters,
    /// The netdevice packets to other hosts leave through; `None` once it unregistered.
    pub(crate) ndev: Option<&'a NetDevice>,
    /// The netdevice's MAC: a destination with it is this device (loopback).
    pub(crate) own_mac: [u8; 6],
    /// Serialises atomic operations across the device's queue pairs.
    pub(crate) atomics: &'a SpinLockIrq<()>,
    /// The device's idle buffers of packets between its queue pairs.
    pub(crate) buffers: &'a BufferPool,
    /// The current time, in nanoseconds of the device's clock.
    pub(crate) now: u64,
    /// The RCU read-side section the run's step is in: the netdevice above and the regions,
    /// windows and handles a step looks up are borrowed under it.
    pub(crate) rcu: &'a rcu::Guard,
}

/// A packet on its way to a queue pair of this device, BTH to ICRC.
pub(crate) enum Packet {
    /// From another queue pair of this device (loopback): a copy.
    Local(KVec<u8>),
    /// From a datagram queue pair of this device (loopback): the GRH its receiver gets
    /// ([`GRH_LEN`] bytes, as [`tx::grh_of`] builds it), then a copy of the packet.
    LocalDatagram(KVec<u8>),
    /// From the wire: the datagram itself, its data the UDP header and the packet, whose
    /// structure and ICRC were checked. The headers are in its linear part; the rest may be
    /// in its pages ([`rx`](crate::rx) does not linearise it).
    Wire(SkBuff),
}

impl Packet {
    /// Returns the packet's first bytes in one slice, from the BTH: all its headers, and for a
    /// packet from this device, all of it.
    pub(crate) fn head(&self) -> &[u8] {
        match self {
            Self::Local(v) => v,
            Self::LocalDatagram(v) => v.get(GRH_LEN..).unwrap_or(&[]),
            Self::Wire(skb) => skb.data().get(UDP_HEADER_LEN..).unwrap_or(&[]),
        }
    }

    /// Returns the packet's length, BTH to ICRC.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Wire(skb) => (skb.len() as usize).saturating_sub(UDP_HEADER_LEN),
            _ => self.head().len(),
        }
    }

    /// Parses the packet, its headers from its linear part and the rest from its pages.
    pub(crate) fn parse(&self) -> Result<RocePacket<'_>, ParseError> {
        match self {
            Self::Wire(skb) if skb.headlen() < skb.len() => {
                RocePacket::parse_paged(self.head(), skb, UDP_HEADER_LEN, self.len())
            }
            _ => RocePacket::parse(self.head()),
        }
    }

    /// Returns the GRH a UD receive buffer gets for the packet: its IP header as it came.
    pub(crate) fn grh(&self) -> Option<[u8; GRH_LEN]> {
        match self {
            Self::Local(_) => None,
            Self::LocalDatagram(v) => v.get(..GRH_LEN)?.try_into().ok(),
            Self::Wire(skb) => tx::grh_from_network_header(skb.network_header()?),
        }
    }

    /// Returns the buffer of a packet from a queue pair of this device, or the packet itself.
    pub(crate) fn into_local(self) -> Result<KVec<u8>, Self> {
        match self {
            Self::Local(v) | Self::LocalDatagram(v) => Ok(v),
            Self::Wire(_) => Err(self),
        }
    }

    /// Frees the packet once handled: a datagram is consumed, not counted as dropped.
    pub(crate) fn consume(self) {
        match self {
            Self::Local(_) | Self::LocalDatagram(_) => (),
            Self::Wire(skb) => skb.consume(),
        }
    }

    /// Frees the packet unhandled: a datagram is dropped for `reason`.
    pub(crate) fn drop_with(self, reason: SkbDropReason) {
        match self {
            Self::Local(_) | Self::LocalDatagram(_) => (),
            Self::Wire(skb) => skb.drop_with_reason(reason),
        }
    }
}

/// A received datagram's pages, read in place: its payload goes from there to the memory it
/// is placed in, with no copy in between.
impl Fragments for SkBuff {
    fn read(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        match (u32::try_from(offset), u32::try_from(len)) {
            (Ok(offset), Ok(len)) => self.read_pieces(offset, len, f),
            _ => false,
        }
    }
}

// What a requester asks for at most fits in its queue: the READ responses of one request and
// a window of other responses, so that a lossless wire loses none of them.
const _: () = assert!(
    (crate::roce::requester::MAX_READ_RESPONSES + crate::roce::requester::MAX_UNACKED_PSNS)
        as usize
        <= PacketQueue::MAX
);

/// Packets waiting for a queue pair, oldest first: in its inbox for its next run, or held
/// back while a READ response it sends waits for transmit buffers.
///
/// # Invariants
///
/// It holds at most [`PacketQueue::MAX`] packets.
#[derive(Default)]
pub(crate) struct PacketQueue(KVec<Packet>);

impl PacketQueue {
    /// The most packets a queue holds. A peer that keeps to its window sends at most
    /// [`MAX_UNACKED_PSNS`] requests unacknowledged, and the queue pair's own requester gets at
    /// most as many responses: with retries on top, far fewer than this wait. A peer that
    /// ignores its window, or forges packets, gets no more memory than this.
    ///
    /// [`MAX_UNACKED_PSNS`]: crate::roce::requester::MAX_UNACKED_PSNS
    pub(crate) const MAX: usize = 1024;

    /// Queues `pkt` after those queued.
    ///
    /// Fails with `ENOBUFS` if [`PacketQueue::MAX`] are queued already, or `ENOMEM`, and hands
    /// the packet back.
    pub(crate) fn push(&mut self, pkt: Packet) -> Result<(), (Error, Packet)> {
        let v = &mut self.0;
        if v.len() >= Self::MAX {
            return Err((ENOBUFS, pkt));
        }
        // Room is there nearly always (the vector keeps its capacity from run to run):
        // `reserve` is out of line.
        if v.len() == v.capacity() && v.reserve(1, GFP_ATOMIC).is_err() {
            return Err((ENOMEM, pkt));
        }
        // INVARIANT: fewer than `MAX` were queued, so at most `MAX` are.
        v.push_within_capacity(pkt).map_err(|e| (ENOMEM, e.0))
    }

    /// Returns whether no packet is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Returns how many packets the queue has room for without allocating.
    pub(crate) fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Takes every packet queued, oldest first.
    pub(crate) fn drain_all(&mut self) -> impl Iterator<Item = Packet> + '_ {
        self.0.drain_all()
    }

    /// Drops the queue, without the allocator call of a vector that never allocated.
    pub(crate) fn drop_unallocated(self) {
        drop_unallocated(self.0);
    }
}

/// The UDP header's length, before the packet in a datagram's data.
pub(crate) const UDP_HEADER_LEN: usize = core::mem::size_of::<UdpHeader>();

/// A queue pair's PSNs, as `query_qp` reports them.
#[derive(Clone, Copy)]
pub(crate) struct Psns {
    /// The PSN of the next request the responder expects.
    pub(crate) rq: u32,
    /// The PSN of the next packet the requester sends: a retry's, while it goes back.
    pub(crate) sq: u32,
}

/// Runs `f` on the transport's protocol state with its memory and output.
pub(crate) fn with_io<R>(
    t: &mut Transport,
    env: &Env<'_>,
    tx: &mut RunBuffers,
    out: &mut KVec<Packet>,
    f: impl FnOnce(&mut Roce, &mut Mem<'_>, &mut Io<'_>) -> R,
) -> R {
    with_io_budget(t, env, tx, out, None, None, f).0
}

/// Runs `f` as [`with_io`] does, letting it emit at most `budget` packets (no limit with
/// `None`), for a received packet whose GRH is `grh`; returns its result and whether it ran
/// out of budget.
///
/// A requester whose transmit buffers ran dry stops and resumes at its next run: the caller
/// runs the queue pair again once the packets out are delivered, so the packets in flight stay
/// bounded whatever the message sizes.
pub(crate) fn with_io_budget<R>(
    t: &mut Transport,
    env: &Env<'_>,
    tx: &mut RunBuffers,
    out: &mut KVec<Packet>,
    budget: Option<usize>,
    grh: Option<[u8; GRH_LEN]>,
    f: impl FnOnce(&mut Roce, &mut Mem<'_>, &mut Io<'_>) -> R,
) -> (R, bool) {
    let Transport {
        qp,
        taken,
        path,
        route,
        timers,
        scratch,
        hold_requests,
        held_request,
        tx_waiting,
        tx_retry_at,
        run_from,
        ..
    } = t;
    let (taken, scratch) = (&*taken, &*scratch);
    let mut mem = Mem {
        env,
        taken,
        scratch,
        limits: env.shared.send_limits(),
    };
    let mut io = Io {
        env,
        taken,
        scratch,
        path: &*path,
        route,
        timers,
        tx,
        buf: None,
        discard: false,
        path_now: None,
        out,
        budget,
        ran_dry: false,
        grh,
        hold_requests: *hold_requests,
        held_request,
        tx_waiting,
        tx_retry_at,
        run_from: *run_from,
        sent: false,
        netdev_gone: false,
    };
    let r = f(qp, &mut mem, &mut io);
    // A packet left unsent (its payload could not be read) gives the transmit buffer back.
    io.drop_buffer();
    (r, io.ran_dry)
}

/// Memory as the transport of one queue pair sees it.
pub(crate) struct Mem<'a> {
    env: &'a Env<'a>,
    taken: &'a RefCell<Taken>,
    scratch: &'a Scratch,
    limits: SendQueueLimits,
}

impl Mem<'_> {
    /// Calls `f` with the region of `key`, borrowed under the RCU read lock.
    fn with_region<R>(
        &self,
        key: u32,
        f: impl FnOnce(&MrShared) -> Result<R, AccessError>,
    ) -> Result<R, AccessError> {
        let rcu = self.env.rcu;
        let mr = self
            .env
            .mrs
            .load(key >> 8, rcu)
            .ok_or(AccessError::InvalidKey)?;
        f(&mr)
    }

    /// Calls `f` with the region `rkey` names, directly or through a memory window, and the
    /// offset there of `len` bytes at `va`, once the key grants `need` on them.
    ///
    /// A window is checked first (its range, rights and owner), then the part of its region
    /// it names, which needs no rights of its own: the bind checked them (IBA C10-74).
    fn with_remote<R>(
        &self,
        rkey: u32,
        va: u64,
        len: usize,
        need: Access,
        f: impl FnOnce(&MrShared, u64) -> Result<R, AccessError>,
    ) -> Result<R, AccessError> {
        let pd = self.env.shared.pd;
        if !is_window_key(rkey) {
            return self.with_region(rkey, |mr| f(mr, mr.check(rkey, pd, va, len, need)?));
        }
        let rcu = self.env.rcu;
        let mw = self
            .env
            .mws
            .load(rkey >> 8, rcu)
            .ok_or(AccessError::InvalidKey)?;
        let (mr_key, mr_va) = mw.check(rkey, pd, self.env.shared.serial, va, len, need)?;
        let mr = self
            .env
            .mrs
            .load(mr_key >> 8, rcu)
            .ok_or(AccessError::InvalidKey)?;
        let off = mr.check(mr_key, pd, mr_va, len, Access::NONE)?;
        f(&mr, off)
    }

    /// Appends to `dst` the `len` bytes at `va` of the region `key` grants `need` on.
    fn read(
        &self,
        key: u32,
        va: u64,
        len: usize,
        dst: &mut dyn Append,
        need: Access,
    ) -> Result<(), AccessError> {
        self.with_region(key, |mr| {
            let off = mr.check(key, self.env.shared.pd, va, len, need)?;
            self.read_at(mr, off, len, dst)
        })
    }

    /// Writes `src` at `va` of the region `key` grants `need` on.
    fn write(&self, key: u32, va: u64, src: &[u8], need: Access) -> Result<(), AccessError> {
        self.with_region(key, |mr| {
            let off = mr.check(key, self.env.shared.pd, va, src.len(), need)?;
            self.write_at(mr, off, src)
        })
    }

    /// Appends to `dst` the `len` bytes at byte `off` of `mr` (checked), noting a page not
    /// present for the fault work.
    fn read_at(
        &self,
        mr: &MrShared,
        off: u64,
        len: usize,
        dst: &mut dyn Append,
    ) -> Result<(), AccessError> {
        match mr.read(off, len, dst) {
            Err(AccessError::NotPresent) => Err(odp::note(self.env.shared, mr, off, len, false)),
            r => r,
        }
    }

    /// Writes `src` at byte `off` of `mr` (checked), noting a page not present for the
    /// fault work.
    fn write_at(&self, mr: &MrShared, off: u64, src: &[u8]) -> Result<(), AccessError> {
        match mr.write(off, src) {
            Err(AccessError::NotPresent) => {
                Err(odp::note(self.env.shared, mr, off, src.len(), true))
            }
            r => r,
        }
    }

    /// Checks that the first bytes of a request's `len` at byte `off` of `mr` are present,
    /// and writable if `write`, noting them for the fault work if not: a request is refused
    /// before it starts rather than at its first packet (the rest, met later, is refused
    /// there).
    fn check_present(
        &self,
        mr: &MrShared,
        off: u64,
        len: usize,
        write: bool,
    ) -> Result<(), AccessError> {
        if mr.is_present(off, odp::request_span(len), write) {
            Ok(())
        } else {
            Err(odp::note_request(self.env.shared, mr, off, len, write))
        }
    }
}

impl Mem<'_> {
    /// Decodes the send WQE in `slot`, copied into `scratch` unless it holds it already.
    ///
    /// User space may rewrite a slot at any time: what is decoded is the copy, checked again.
    fn send_wqe<'b>(
        &self,
        slot: u32,
        scratch: &'b mut ScratchBuf,
    ) -> Result<SendWqe<'b>, AccessError> {
        let n = match scratch.send {
            Some((held, n)) if held == slot => n,
            _ => {
                scratch.send = None;
                let n = self
                    .env
                    .shared
                    .read_send_wqe(slot, &mut scratch.bytes)
                    .map_err(|_| AccessError::TooShort)?;
                scratch.send = Some((slot, n));
                n
            }
        };
        let bytes = scratch.bytes.get(..n).ok_or(AccessError::TooShort)?;
        decode_send_wqe(bytes, &self.limits).map_err(|_| AccessError::TooShort)
    }

    /// Calls `f` with the buffers the response of the READ or atomic in send queue `slot` is
    /// placed in.
    fn with_reply_sges<R>(
        &self,
        slot: u32,
        f: impl FnOnce(&[Sge]) -> Result<R, AccessError>,
    ) -> Result<R, AccessError> {
        let mut buf = self
            .scratch
            .try_borrow_mut()
            .map_err(|_| AccessError::TooShort)?;
        if let Some(Some((s, sge))) = buf.reply_entry(slot).copied() {
            if s == slot {
                drop(buf);
                return f(core::slice::from_ref(&sge));
            }
        }
        match self.send_wqe(slot, &mut buf)?.data {
            WqeData::Sges(sges) => f(sges),
            WqeData::Inline(_) => Err(AccessError::AccessDenied),
        }
    }

    /// Reads and checks the send WQE at `index` of the queue pair, if one was posted there.
    pub(crate) fn next_send_wr(&self, index: u32) -> Option<core::result::Result<SendWr, ()>> {
        // Not borrowed elsewhere while the requester takes WQEs: `None` (try again at the
        // next run) if it were.
        let mut scratch = self.scratch.try_borrow_mut().ok()?;
        let scratch = &mut *scratch;
        // Nothing posted leaves the copy of the last WQE taken, whose response may come next.
        let (n, wr) = self.env.shared.next_send_wr(index, &mut scratch.bytes)?;
        scratch.send = wr.is_ok().then_some((index, n));
        let reply = match &wr {
            Ok((wr, Some(sge))) if wr.is_read_or_atomic() => Some((index, *sge)),
            _ => None,
        };
        if let Some(entry) = scratch.reply_entry(index) {
            *entry = reply;
        }
        Some(wr.map(|(wr, _)| wr))
    }
}

impl MemoryAccess for Mem<'_> {
    type Buffer = TxBuf;

    fn gather(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut TxBuf,
    ) -> Result<(), AccessError> {
        let dst = dst.as_append();
        let WqeRef::Send(slot) = wqe else {
            return Err(AccessError::AccessDenied);
        };
        let mut buf = self
            .scratch
            .try_borrow_mut()
            .map_err(|_| AccessError::TooShort)?;
        let wqe = self.send_wqe(slot, &mut buf)?;
        match wqe.data {
            WqeData::Inline(data) => {
                let start = offset as usize;
                let src = data
                    .get(start..start.saturating_add(len))
                    .ok_or(AccessError::TooShort)?;
                dst.append(src).map_err(|_| AccessError::TooShort)
            }
            WqeData::Sges(sges) => for_each_chunk(sges, offset, len, |sge, addr, r| {
                self.read(sge.lkey(), addr, r.len(), dst, Access::NONE)
            }),
        }
    }

    fn scatter(&mut self, wqe: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError> {
        let write = |sges: &[Sge]| {
            for_each_chunk(sges, offset, src.len(), |sge, addr, r| {
                let s = src.get(r).ok_or(AccessError::TooShort)?;
                self.write(sge.lkey(), addr, s, Access::LOCAL_WRITE)
            })
        };
        match wqe {
            // RDMA READ response data and the original value of an atomic.
            WqeRef::Send(slot) => self.with_reply_sges(slot, write),
            WqeRef::Recv(slot) => {
                let taken = self
                    .taken
                    .try_borrow()
                    .map_err(|_| AccessError::InvalidKey)?;
                let t = taken
                    .list
                    .iter()
                    .find(|t| t.slot == slot)
                    .ok_or(AccessError::InvalidKey)?;
                write(&t.sges)
            }
        }
    }

    fn check_local(&mut self, wqe: WqeRef, offset: u32, len: u32) -> Result<(), AccessError> {
        // Only a page of an on-demand region can be missing; the requester leaves every
        // other error to the placement of the response (`response_buffers_present`).
        let WqeRef::Send(slot) = wqe else {
            return Ok(());
        };
        if !crate::mr::any_on_demand() {
            return Ok(());
        }
        // As for a request's remote range, the first bytes only: the rest is met later.
        let len = odp::request_span(len as usize);
        self.with_reply_sges(slot, |sges| {
            for_each_chunk(sges, offset, len, |sge, addr, r| {
                let key = sge.lkey();
                self.with_region(key, |mr| {
                    let off =
                        mr.check(key, self.env.shared.pd, addr, r.len(), Access::LOCAL_WRITE)?;
                    self.check_present(mr, off, r.len(), true)
                })
            })
        })
    }

    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        access: Access,
    ) -> Result<(), AccessError> {
        let write = access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC);
        self.with_remote(rkey, va, len as usize, access, |mr, off| {
            self.check_present(mr, off, len as usize, write)
        })
    }

    fn read_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        dst: &mut TxBuf,
    ) -> Result<(), AccessError> {
        let dst = dst.as_append();
        self.with_remote(rkey, va, len, Access::REMOTE_READ, |mr, off| {
            self.read_at(mr, off, len, dst)
        })
    }

    fn write_remote(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), AccessError> {
        self.with_remote(rkey, va, src.len(), Access::REMOTE_WRITE, |mr, off| {
            self.write_at(mr, off, src)
        })
    }

    fn write_remote_payload(
        &mut self,
        rkey: u32,
        va: u64,
        payload: Payload<'_>,
    ) -> Result<(), AccessError> {
        if let Some(src) = payload.as_slice() {
            return self.write_remote(rkey, va, src);
        }
        // In pieces: one lookup for all of them, and the pages asked for first, so that a
        // page not present drops the packet before any of it is written.
        let len = payload.len();
        self.with_remote(rkey, va, len, Access::REMOTE_WRITE, |mr, off| {
            if !mr.is_present(off, len, true) {
                return Err(odp::note(self.env.shared, mr, off, len, true));
            }
            payload.for_each_piece(AccessError::NotPresent, |at, piece| {
                self.write_at(mr, off.wrapping_add(at as u64), piece)
            })
        })
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        if va & 7 != 0 {
            return Err(AccessError::Misaligned);
        }
        let need = op.access();
        // Queue pairs run in parallel: another atomic operation on the same target must not
        // come between the read and the write (writes and reads may, as on hardware).
        let _atomics = self.env.atomics.lock();
        self.with_remote(rkey, va, 8, need, |mr, off| {
            // Eight aligned bytes lie in one page. Should it go between the read and the
            // write, the write fails whole: nothing changed, and the request is retried.
            self.check_present(mr, off, 8, true)?;
            let mut b = [0u8; 8];
            self.read_at(mr, off, 8, &mut SliceAppender::new(&mut b))?;
            let orig = u64::from_ne_bytes(b);
            self.write_at(mr, off, &op.apply(orig).to_ne_bytes())?;
            Ok(orig)
        })
    }

    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        placement_type: u8,
    ) -> Result<(), AccessError> {
        let need = Access::for_flush(placement_type);
        // Copies through the CPU are visible at once; nothing is cached on the way, and a
        // page not present holds nothing the device wrote.
        self.with_remote(rkey, va, len as usize, need, |_, _| Ok(()))
    }

    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        if !is_window_key(rkey) {
            return self.with_region(rkey, |mr| mr.invalidate(rkey));
        }
        let rcu = self.env.rcu;
        self.env
            .mws
            .load(rkey >> 8, rcu)
            .ok_or(AccessError::InvalidKey)?
            .invalidate(rkey, self.env.shared.pd, self.env.mrs, rcu)
    }

    fn register(&mut self, reg: &Registration) -> Result<(), AccessError> {
        self.with_region(reg.mr_key, |mr| mr.register(self.env.shared.pd, reg))
    }

    fn bind_mw(&mut self, bind: &MwBind) -> Result<(), AccessError> {
        if !is_window_key(bind.mw_rkey) {
            return Err(AccessError::InvalidKey);
        }
        let rcu = self.env.rcu;
        let env = self.env;
        env.mws
            .load(bind.mw_rkey >> 8, rcu)
            .ok_or(AccessError::InvalidKey)?
            .bind(bind, env.shared.pd, env.shared.serial, env.mrs, rcu)
    }
}

/// Time, timers and output of the transport of one queue pair.
pub(crate) struct Io<'a> {
    env: &'a Env<'a>,
    taken: &'a RefCell<Taken>,
    scratch: &'a Scratch,
    path: &'a Path,
    route: &'a mut RouteCache,
    timers: &'a mut [Option<u64>; 2],
    /// The buffers of packets that go nowhere or to this device, kept from run to run.
    tx: &'a mut RunBuffers,
    /// The buffer of the packet being built.
    buf: Option<TxBuf>,
    /// The packet being built goes nowhere: its skb could not be allocated.
    discard: bool,
    /// The path of the packet being built, looked up once for its buffer and its
    /// transmission (`None`: its address handle is gone).
    path_now: Option<PathNow>,
    out: &'a mut KVec<Packet>,
    /// Packets this call may still emit (`None`: no limit).
    budget: Option<usize>,
    /// Whether a buffer was refused because the budget was spent.
    ran_dry: bool,
    /// The GRH of the packet being received, for a datagram queue pair.
    grh: Option<[u8; GRH_LEN]>,
    /// Requests wait for a run in process context ([`Transport::hold_requests`]).
    hold_requests: bool,
    /// Set when a request waited because of `hold_requests`.
    held_request: &'a mut bool,
    /// Set when sending stopped for want of room among the socket buffers in flight, or
    /// after a local drop.
    tx_waiting: &'a mut bool,
    /// When to send again what a local drop stopped ([`Io::retry_later`]).
    tx_retry_at: &'a mut Option<u64>,
    /// The jiffy the run began, if its sending is bounded in time ([`Transport::bound_run`]).
    run_from: Option<u64>,
    /// This call sent a packet.
    sent: bool,
    /// A packet for another host found no netdevice: it unregistered.
    netdev_gone: bool,
}

impl Io<'_> {
    /// Returns whether a packet was refused because the budget was spent.
    pub(crate) fn ran_dry(&self) -> bool {
        self.ran_dry
    }

    /// Returns whether a packet for another host was lost for want of a netdevice (it
    /// unregistered, and the device is going): no packet of this queue pair will reach its
    /// peer again.
    pub(crate) fn netdev_gone(&self) -> bool {
        self.netdev_gone
    }
}

fn timer_index(t: TimerId) -> usize {
    match t {
        TimerId::Retransmit => 0,
        TimerId::RnrRetry => 1,
    }
}

impl Clock for Io<'_> {
    fn now(&self) -> Instant {
        Instant(self.env.now)
    }

    fn arm(&mut self, timer: TimerId, deadline: Instant) {
        if let Some(t) = self.timers.get_mut(timer_index(timer)) {
            *t = Some(deadline.0);
        }
    }

    fn cancel(&mut self, timer: TimerId) {
        if let Some(t) = self.timers.get_mut(timer_index(timer)) {
            *t = None;
        }
    }
}

/// The path of the packet being built: the queue pair's own, or a copy of its address
/// handle's, which user space may destroy meanwhile.
#[derive(Clone, Copy)]
enum PathNow {
    /// The queue pair's path ([`Io::path`]): nothing copied per packet.
    Connected,
    /// The path of an address handle, as it was when the packet's buffer was taken.
    AddressHandle(Path),
}

impl<'a> Io<'a> {
    /// Returns the path of a packet to `dest`, or `None` if its address handle is gone.
    fn path_of(&self, dest: Destination) -> Option<PathNow> {
        match dest {
            Destination::Connected => Some(PathNow::Connected),
            Destination::AddressHandle(n) => self
                .env
                .ahs
                .get(n)
                .map(|av| PathNow::AddressHandle(*av.path())),
        }
    }

    /// Returns the path `now` stands for.
    fn resolve<'b>(path: &'a Path, now: &'b PathNow) -> &'b Path
    where
        'a: 'b,
    {
        match now {
            PathNow::Connected => path,
            PathNow::AddressHandle(p) => p,
        }
    }
}

impl Io<'_> {
    /// Drops the buffer of the packet built last, if it was not sent; a vector is kept for
    /// the next packet.
    fn drop_buffer(&mut self) {
        // Called for every packet and at the end of every run: most of the time there is none.
        if self.buf.is_none() {
            return;
        }
        let buf = self.buf.take();
        match (buf, core::mem::take(&mut self.discard)) {
            (Some(TxBuf::Local(v)), true) => self.tx.discard = v,
            (Some(TxBuf::Local(v)), false) => self.tx.recycle(self.env.buffers, v),
            _ => {}
        }
    }
}

impl Io<'_> {
    /// Returns whether the queue pair has as many socket buffers in flight as it may send:
    /// its requests and READ responses then wait until they drain ([`TxOwner::resume`] runs
    /// it again), so that a slow link holds a bounded number, not a full queue that drops.
    ///
    /// [`TxOwner::resume`]: kernel::net::skbuff::TxOwner::resume
    fn must_wait_for_skbs(&mut self) -> bool {
        // A run in softirq sends a READ response whole or not at all
        // ([`Transport::response_exceeds`]): stopped part-way, its rest would leave from the
        // work item, on another CPU, perhaps ahead of what this one sent. It sends no request.
        if self.hold_requests {
            return false;
        }
        let wait = self
            .env
            .shared
            .in_flight
            .must_wait(param::MAX_SKBS_IN_FLIGHT);
        *self.tx_waiting |= wait;
        wait
    }

    /// Makes the run stop sending and the queue pair run again a jiffy from now, after a
    /// packet was dropped on its way out of this host (a full queue): its sender sends it
    /// again then, from where it stopped, so that nothing is lost, UC and UD included.
    fn retry_later(&mut self) {
        *self.tx_waiting = true;
        *self.tx_retry_at = Some(self.env.now.saturating_add(NSEC_PER_JIFFY));
    }
}

impl Output for Io<'_> {
    type Buffer = TxBuf;

    fn tx_buffer(&mut self, len: usize, dest: Destination) -> Option<&mut TxBuf> {
        if self.budget == Some(0) {
            self.ran_dry = true;
            return None;
        }
        self.drop_buffer();
        self.path_now = self.path_of(dest);
        // A packet for another host is built in the skb it leaves in; one for a queue pair of
        // this device in the vector queued to it, after the GRH a datagram's receiver gets.
        // Either is appended to, each byte written once.
        let grh_len = match dest {
            Destination::AddressHandle(_) => GRH_LEN,
            Destination::Connected => 0,
        };
        match self
            .path_now
            .as_ref()
            .map(|now| Self::resolve(self.path, now))
        {
            Some(path) if !path.is_local(&self.env.own_mac) => {
                match self
                    .env
                    .ndev
                    .map_or(Err(ENODEV), |ndev| tx::alloc(ndev, len))
                {
                    Ok(skb) => return Some(self.buf.insert(TxBuf::Skb(skb))),
                    // No buffer (or no netdevice any more): the packet is built in the
                    // transmit buffer and discarded, lost as on a congested link but
                    // counted, as a failed send is (the requester of a reliable connection
                    // retries). Refusing the buffer instead would stop the requester with
                    // nothing to wake it.
                    Err(_) => {
                        self.env.counters.inc(Counter::SendErr);
                        self.netdev_gone |= self.env.ndev.is_none();
                    }
                }
            }
            Some(path) => {
                if let Ok(mut v) = self.tx.take(self.env.buffers, grh_len + len) {
                    if grh_len > 0 {
                        let _ = v.append(&tx::grh_of(path, len));
                    }
                    return Some(self.buf.insert(TxBuf::Local(v)));
                }
                // No memory: discarded as above.
                self.env.counters.inc(Counter::SendErr);
            }
            // The address handle is gone: built and discarded, counted when it is sent.
            None => {}
        }
        let discard = &mut self.tx.discard;
        discard.clear();
        if discard.reserve(len, GFP_ATOMIC).is_err() {
            // Not even room to build it and drop it: the sender stops here and goes on a jiffy
            // from now, as after a local drop. Stopped with nothing to wake it, a queue pair
            // with nothing in flight would wait for good (a UC or UD send, a first request).
            self.retry_later();
            return None;
        }
        self.discard = true;
        Some(self.buf.insert(TxBuf::Local(core::mem::take(discard))))
    }

    fn may_send_request(&mut self) -> bool {
        if self.hold_requests {
            *self.held_request = true;
            return false;
        }
        !self.must_wait_for_skbs()
    }

    fn may_continue(&mut self) -> bool {
        let late = self.sent
            && self
                .run_from
                .is_some_and(|from| jiffies_64().wrapping_sub(from) >= RUN_JIFFIES);
        // Stopped like a run out of budget: the caller runs the queue pair again.
        self.ran_dry |= late;
        !late && !self.must_wait_for_skbs()
    }

    fn transmit(&mut self, len: usize, dest: Destination) -> bool {
        if let Some(b) = &mut self.budget {
            *b = b.saturating_sub(1);
        }
        self.sent = true;
        if self.discard {
            // Counted when its buffer could not be allocated, or below if it had no path.
            if self.path_now.take().is_none() {
                self.env.counters.inc(Counter::SendErr);
            }
            self.drop_buffer();
            return true;
        }
        let buf = self.buf.take();
        let Some(now) = self.path_now.take() else {
            self.env.counters.inc(Counter::SendErr);
            return true;
        };
        let path = Self::resolve(self.path, &now);
        match buf {
            Some(TxBuf::Skb(mut skb)) => {
                // Another host. Dropped on its way out of this host (a full queue): counted,
                // and sent again from where the sender stopped ([`Io::retry_later`]). Any other
                // failure: lost as on a congested link (the requester of a reliable connection
                // retries), but counted. Traced once sent, from its BTH read before the buffer
                // goes.
                let fields = trace::xmit_enabled()
                    .then(|| xmit_fields(self.env.shared, skb.data()))
                    .flatten();
                let lqpn = self.env.shared.number();
                let connected = matches!(now, PathNow::Connected);
                // Counted until freed; uncounted only while the module is being removed.
                let _ = skb.count_in(self.env.shared.as_arc_borrow());
                let sent = match (skb.len() as usize == len, self.env.ndev) {
                    (true, Some(ndev)) => tx::send(ndev, self.route, path, connected, lqpn, skb),
                    (_, None) => Err(ENODEV),
                    (false, _) => Err(EINVAL),
                };
                match sent {
                    Ok(()) => {
                        self.env.counters.add(Counter::SentBytes, len as u64);
                        if let Some(f) = &fields {
                            trace::xmit(f);
                        }
                    }
                    Err(e) => {
                        self.env.counters.inc(Counter::SendErr);
                        if e == ENOBUFS {
                            self.retry_later();
                            return false;
                        }
                    }
                }
            }
            Some(TxBuf::Local(v)) => {
                let datagram = matches!(dest, Destination::AddressHandle(_));
                let grh_len = if datagram { GRH_LEN } else { 0 };
                let fields = trace::xmit_enabled()
                    .then(|| v.get(grh_len..))
                    .flatten()
                    .and_then(|b| xmit_fields(self.env.shared, b));
                let whole = v.len() == grh_len + len;
                let packet = if datagram {
                    Packet::LocalDatagram(v)
                } else {
                    Packet::Local(v)
                };
                if whole && self.out.push(packet, GFP_ATOMIC).is_ok() {
                    self.env.counters.add(Counter::SentBytes, len as u64);
                    if let Some(f) = &fields {
                        trace::xmit(f);
                    }
                } else {
                    // Lost as on a congested link (the transport retries), but counted.
                    self.env.counters.inc(Counter::SendErr);
                }
            }
            None => self.env.counters.inc(Counter::SendErr),
        }
        true
    }

    fn complete(&mut self, c: Completion) {
        let shared = self.env.shared;
        let mut flags = WcFlags::empty();
        let mut ex = 0;
        if let Some(imm) = c.imm_data {
            flags |= WcFlags::WITH_IMM;
            // `imm_data` is `__be32`: the bytes as they were on the wire.
            ex = imm.to_be();
        }
        if let Some(rkey) = c.invalidated_rkey {
            flags |= WcFlags::WITH_INVALIDATE;
            ex = rkey;
        }
        let mut network_hdr_type = 0;
        if c.grh {
            flags |= WcFlags::GRH;
            if let Some(grh) = &self.grh {
                flags |= WcFlags::WITH_NETWORK_HDR_TYPE;
                network_hdr_type = tx::network_type_of(grh).raw() as u8;
            }
        }
        let wc = WorkCompletion {
            wr_id: c.wr_id,
            // The protocol core's values are the IBTA's, which the kernel's enumerations use.
            status: WcStatus::from_raw(c.status as u32).unwrap_or(WcStatus::GeneralErr),
            opcode: WcOpcode::from_raw(c.opcode as u32).unwrap_or_default(),
            byte_len: c.byte_len,
            ex,
            qp_num: shared.number(),
            src_qp: c.src_qpn,
            wc_flags: flags,
            port_num: param::PORT as u8,
            network_hdr_type,
            ..Default::default()
        };
        let posted = match c.queue {
            WorkQueue::Send => shared.post_completion(&wc, false, false),
            WorkQueue::Recv => {
                // Not borrowed elsewhere while a completion is made.
                if let Ok(mut taken) = self.taken.try_borrow_mut() {
                    if let Some(i) = taken.list.iter().position(|t| t.slot == c.slot) {
                        if let Ok(mut done) = taken.list.remove(i) {
                            done.sges.clear();
                            if taken.spare.len() < SPARE_SGE_LISTS {
                                // On no memory the list is just freed.
                                let _ = taken.spare.push(done.sges, GFP_ATOMIC);
                            }
                        }
                    }
                }
                // As the C driver: receives that completed, not flushed or failed ones.
                if wc.status == WcStatus::Success {
                    self.env.counters.inc(Counter::RdmaRecvs);
                }
                shared.post_completion(&wc, true, c.solicited)
            }
        };
        // An overrun was reported to the CQ's owner; the completion is lost, as on hardware.
        let _ = posted;
    }

    fn async_event(&mut self, event: AsyncEvent) {
        let e = match event {
            AsyncEvent::Fatal => QpEvent::Fatal,
            AsyncEvent::RequestError => QpEvent::RequestError,
            AsyncEvent::AccessError => QpEvent::AccessError,
        };
        self.env.shared.handle().event(e);
    }

    fn take_recv(&mut self) -> Option<RecvSlot> {
        // Neither is borrowed elsewhere while a receive WQE is taken; if one were, the WQE stays
        // in the ring.
        let mut taken = self.taken.try_borrow_mut().ok()?;
        let mut scratch = self.scratch.try_borrow_mut().ok()?;
        // A receive WQE takes the place of the send WQE it held.
        scratch.send = None;
        let buf = &mut scratch.bytes;
        // Memory first: a WQE out of the ring must not be lost to a failed allocation.
        let max_sge = self.env.shared.rq_max_sge();
        let mut sges = taken.spare.pop().unwrap_or_else(KVec::new);
        if taken.list.reserve(1, GFP_ATOMIC).is_err()
            || sges.reserve(max_sge as usize, GFP_ATOMIC).is_err()
        {
            return None;
        }
        let (wr_id, length) = {
            let n = self.env.shared.rq_slot_size().min(MAX_RECV_WQE);
            let buf = buf.get_mut(..n)?;
            if !self.env.shared.pop_rq(buf) {
                return None;
            }
            match decode_recv_wqe(buf, max_sge) {
                // Within the capacity reserved: `decode_recv_wqe` checked the count.
                Ok(w) if sges.extend_from_slice(w.sges, GFP_ATOMIC).is_ok() => (w.wr_id, w.length),
                // A malformed WQE receives nothing: an empty list fails every scatter.
                _ => (0, 0),
            }
        };
        let slot = taken.next;
        taken.next = slot.wrapping_add(1);
        // Room was reserved above.
        taken
            .list
            .push_within_capacity(TakenRecv { slot, sges })
            .ok()?;
        Some(RecvSlot {
            wr_id,
            slot,
            length,
        })
    }

    fn grh(&self) -> Option<&[u8; GRH_LEN]> {
        self.grh.as_ref()
    }

    fn retired(&mut self, slot: u32) {
        self.env.shared.release_sq(slot.wrapping_add(1));
        self.env.counters.inc(Counter::RdmaSends);
    }

    fn count(&mut self, counter: RoceCounter) {
        let c = match counter {
            RoceCounter::SentPackets => Counter::SentPkts,
            RoceCounter::ReceivedPackets => Counter::RcvdPkts,
            RoceCounter::DuplicateRequest => Counter::DuplicateRequest,
            RoceCounter::OutOfSequence => Counter::OutOfSeqRequest,
            RoceCounter::SequenceErrorNak => Counter::RcvdSeqErr,
            RoceCounter::RnrNakSent => Counter::SendRnrErr,
            RoceCounter::RnrNakReceived => Counter::RcvdRnrErr,
            RoceCounter::Retry => Counter::CompleterRetryErr,
            RoceCounter::RetryExceeded => Counter::RetryExceededErr,
            RoceCounter::RnrRetryExceeded => Counter::RetryRnrExceededErr,
            RoceCounter::DroppedPackets => {
                // A drop like the receive path's: counted and traced with its reason.
                let shared = self.env.shared;
                DropReason::Transport.report(self.env.counters, shared.dev_index, shared.number());
                return;
            }
            RoceCounter::TailProbe => Counter::TailProbe,
            _ => return,
        };
        self.env.counters.inc(c);
    }

    fn trace(&mut self, event: TraceEvent) {
        let (dev, qpn) = (self.env.shared.dev_index, self.env.shared.number());
        match event {
            TraceEvent::Retransmit { psn, cause } => {
                let cause = match cause {
                    RetransmitCause::Nak => trace::RetransmitCause::Nak,
                    RetransmitCause::Timeout => trace::RetransmitCause::Timeout,
                    RetransmitCause::Reorder => trace::RetransmitCause::Reorder,
                    RetransmitCause::TailProbe => trace::RetransmitCause::TailProbe,
                    RetransmitCause::Rnr => trace::RetransmitCause::Rnr,
                };
                trace::retransmit(dev, qpn, psn.get(), cause)
            }
            TraceEvent::RnrNakSent { psn, timer } => {
                trace::rnr_nak(dev, qpn, psn.get(), timer.code(), true)
            }
            TraceEvent::RnrNakReceived { psn, timer } => {
                trace::rnr_nak(dev, qpn, psn.get(), timer.code(), false)
            }
        }
    }
}

/// Returns the fields the transmit tracepoint reports for the packet `bytes` (BTH to ICRC)
/// that `qp` sent; gathered only while the event is on ([`trace::xmit_enabled`]).
fn xmit_fields(qp: &QpShared, bytes: &[u8]) -> Option<trace::PacketFields> {
    let (bth, _) = Bth::ref_from_prefix(bytes).ok()?;
    Some(trace::PacketFields {
        dev: qp.dev_index,
        qpn: qp.number(),
        dest_qpn: bth.dest_qpn(),
        opcode: bth.opcode_raw(),
        psn: bth.psn().get(),
        // A packet is at most an IB MTU and its headers.
        len: bytes.len() as u32,
    })
}

#[kunit_tests(rdma_rxe_rust_transport)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_queue_holds_at_most_its_bound_and_gives_back_what_it_refuses() {
        let mut q = PacketQueue::default();
        assert!(q.is_empty());
        for i in 0..PacketQueue::MAX {
            let mut v = KVec::new();
            assert!(v.push(i as u8, GFP_KERNEL).is_ok());
            assert!(q.push(Packet::Local(v)).is_ok());
        }
        let mut v = KVec::new();
        assert!(v.push(0xab, GFP_KERNEL).is_ok());
        let refused = q.push(Packet::Local(v));
        assert!(matches!(&refused, Err((e, p)) if *e == ENOBUFS && p.head() == [0xab]));
        // Oldest first, every one.
        let mut n = 0;
        for (i, p) in q.drain_all().enumerate() {
            assert_eq!(p.head(), &[i as u8]);
            n += 1;
        }
        assert_eq!(n, PacketQueue::MAX);
        assert!(q.is_empty());
    }
}
