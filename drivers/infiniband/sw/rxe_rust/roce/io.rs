// SPDX-License-Identifier: GPL-2.0

//! What the transport state machines ask of their caller: time, timers and output.
//!
//! The requester, completer and responder do no I/O themselves. They read the
//! clock and arm or cancel timers through [`Clock`], and hand packets,
//! completions, async events and counter updates to an [`Output`]. Memory is
//! reached through [`super::memory::MemoryAccess`]. In the kernel these are
//! skbs, `ib_cq`, `ib_event` and `hrtimer`s; on the host, a simulation.

use super::aeth::Syndrome;
use super::headers::BthFields;
use super::icrc::ICRC_LEN;
use super::memory::AccessError;
use super::opcode::{
    Opcode,
    MAX_HEADER_LEN, //
};
use super::packet::{
    packet_len,
    pad_for,
    PacketBuilder, //
};
use super::psn::{
    Msn,
    Psn, //
};
use super::responder::GRH_LEN;
use super::timer::RnrTimer;

/// A point in monotonic time, in nanoseconds from an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

impl Instant {
    /// Returns the instant `nanos` nanoseconds later, saturating.
    pub const fn after_nanos(self, nanos: u64) -> Self {
        Self(self.0.saturating_add(nanos))
    }
}

/// The timers of a QP; each is armed at most once at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerId {
    /// The local ACK timeout of the requester (retransmit timer).
    Retransmit,
    /// The delay after an RNR NAK before the requester retries.
    RnrRetry,
}

/// A monotonic clock and the QP's timers.
pub trait Clock {
    /// Returns the current time.
    fn now(&self) -> Instant;

    /// Arms `timer` to fire at `deadline`, replacing an earlier deadline.
    ///
    /// When it fires, the caller passes `timer` to the QP's `on_timer`.
    fn arm(&mut self, timer: TimerId, deadline: Instant);

    /// Cancels `timer` if it is armed.
    fn cancel(&mut self, timer: TimerId);
}

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Destination {
    /// The connected peer of an RC or UC QP (its address is QP state).
    Connected,
    /// A UD destination: the address handle the WQE named.
    AddressHandle(u32),
}

/// The work queue a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkQueue {
    /// The send queue: a send WQE of this QP.
    Send,
    /// The receive queue: a receive WQE taken through [`Output::take_recv`].
    Recv,
}

/// The status of a completion, the values of `enum ib_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    /// Success.
    Success = 0,
    /// Local length error: a message longer than the receive buffer.
    LocLenErr = 1,
    /// Local QP operation error: the WQE could not be carried out.
    LocQpOpErr = 2,
    /// Local protection error: an SGE failed its L_Key check.
    LocProtErr = 4,
    /// Flushed: the QP was in the error state.
    WrFlushErr = 5,
    /// Memory window bind error: the window, region or rights did not allow the bind.
    MwBindErr = 6,
    /// Bad response: a response the request did not call for.
    BadRespErr = 7,
    /// Remote invalid request: the responder NAKed with invalid request.
    RemInvReqErr = 9,
    /// Remote access error: the responder NAKed with remote access error.
    RemAccessErr = 10,
    /// Remote operational error: the responder NAKed with remote operational error.
    RemOpErr = 11,
    /// Transport retry counter exceeded.
    RetryExcErr = 12,
    /// RNR retry counter exceeded.
    RnrRetryExcErr = 13,
}

/// The opcode of a completion, the values of `enum ib_uverbs_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// SEND, with or without immediate or invalidate.
    Send = 0,
    /// RDMA WRITE, with or without immediate.
    RdmaWrite = 1,
    /// RDMA READ.
    RdmaRead = 2,
    /// Compare and swap.
    CompSwap = 3,
    /// Fetch and add.
    FetchAdd = 4,
    /// Bind memory window.
    BindMw = 5,
    /// Local invalidate.
    LocalInv = 6,
    /// Fast registration of a memory region.
    RegMr = 10,
    /// FLUSH.
    Flush = 8,
    /// ATOMIC WRITE.
    AtomicWrite = 9,
    /// A received SEND.
    Recv = 128,
    /// A received RDMA WRITE with immediate data.
    RecvRdmaWithImm = 129,
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The queue of the WQE.
    pub queue: WorkQueue,
    /// The caller's work request ID.
    pub wr_id: u64,
    /// The caller's slot of the WQE, as given when it was posted or taken.
    pub slot: u32,
    /// The status.
    pub status: WcStatus,
    /// The opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred (received bytes, for the receive queue).
    pub byte_len: u32,
    /// Immediate data of a received message, in network order.
    pub imm_data: Option<u32>,
    /// The R_Key a received SEND with invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The source QP of a UD receive.
    pub src_qpn: u32,
    /// A UD receive whose first 40 bytes are left for the caller's GRH.
    pub grh: bool,
    /// The solicited event bit of the received message.
    pub solicited: bool,
}

/// An affiliated asynchronous event, as in `enum ib_event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// `IB_EVENT_QP_FATAL`: an error that is neither of the two below.
    Fatal,
    /// `IB_EVENT_QP_REQ_ERR`: the responder found an invalid request.
    RequestError,
    /// `IB_EVENT_QP_ACCESS_ERR`: the responder found an access violation.
    AccessError,
}

/// Events worth counting, as the C driver's `rxe_hw_counters`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// A packet was sent.
    SentPackets,
    /// A packet was received and handled by the transport.
    ReceivedPackets,
    /// A packet was dropped by the transport (bad sequence, no buffer, bad key, a page not
    /// present).
    DroppedPackets,
    /// A duplicate request was received.
    DuplicateRequest,
    /// A request arrived ahead of the expected PSN.
    OutOfSequence,
    /// A PSN sequence error NAK was received.
    SequenceErrorNak,
    /// An RNR NAK was sent.
    RnrNakSent,
    /// An RNR NAK was received.
    RnrNakReceived,
    /// The requester went back to retransmit (timeout, NAK or implied NAK).
    Retry,
    /// The requester went back to retransmit before the local ACK timeout, without a
    /// retry: nothing was acknowledged for a while (see `Requester::probe`).
    TailProbe,
    /// The requester retried after an RNR NAK.
    RnrRetry,
    /// The transport retry count ran out.
    RetryExceeded,
    /// The RNR retry count ran out.
    RnrRetryExceeded,
    /// The requester made progress: an acknowledgement advanced.
    Progress,
}

/// An event worth tracing, with what the counters do not say (see [`Output::trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// The requester goes back to send again from `psn`.
    Retransmit {
        /// The first PSN sent again.
        psn: Psn,
        /// Why.
        cause: RetransmitCause,
    },
    /// The responder answers the request at `psn` with an RNR NAK carrying `timer`.
    RnrNakSent {
        /// The request's PSN.
        psn: Psn,
        /// The RNR timer the NAK carries.
        timer: RnrTimer,
    },
    /// The requester received an RNR NAK for `psn` carrying `timer`.
    RnrNakReceived {
        /// The NAK's PSN.
        psn: Psn,
        /// The RNR timer the NAK carries.
        timer: RnrTimer,
    },
}

/// Why a requester sends again what it sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetransmitCause {
    /// A NAK: a transport retry ([`Counter::Retry`]).
    Nak,
    /// The local ACK timeout expired: a transport retry ([`Counter::Retry`]).
    Timeout,
    /// The reorder window after an implied NAK ended without the missing response: a
    /// transport retry ([`Counter::Retry`]) of the gaps.
    Reorder,
    /// Nothing was acknowledged for a while: the last packet again, before the timeout and
    /// without a retry ([`Counter::TailProbe`]).
    TailProbe,
    /// The RNR timer expired: the request an RNR NAK refused ([`Counter::RnrRetry`]).
    Rnr,
}

/// A receive WQE handed to the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecvSlot {
    /// The caller's work request ID.
    pub wr_id: u64,
    /// The caller's slot; memory is reached as [`super::memory::WqeRef::Recv`].
    pub slot: u32,
    /// Total length of the buffers.
    pub length: u32,
}

/// A packet being built: bytes are appended to it in order.
///
/// Appending, rather than writing into a slice, lets the caller hand out memory that holds
/// nothing yet (a socket buffer's tail room) without clearing it first.
pub trait TxBuffer {
    /// Appends `bytes`.
    ///
    /// A buffer without room for them keeps what it has; [`Output::transmit`] then finds the
    /// packet short and does not send it.
    fn put(&mut self, bytes: &[u8]);
}

/// Everything the state machines produce, and the receive queue they consume.
pub trait Output {
    /// The buffer a packet is built in.
    type Buffer: TxBuffer + ?Sized;

    /// Returns an empty buffer with room for the `len` bytes of the next packet, to `dest`, or
    /// `None`.
    ///
    /// The packet is appended to it, every byte once and in order: the headers, the payload
    /// (by [`super::memory::MemoryAccess`], whose `Buffer` is this one), the pad and the ICRC.
    /// Knowing `dest`, the caller can hand out the buffer the packet leaves in, so that it is
    /// built in place and nothing in it is written twice.
    ///
    /// `None` means no buffer is available now: the requester stops and
    /// resumes at its next event, a responder drops the response (the
    /// requester will retry).
    fn tx_buffer(&mut self, len: usize, dest: Destination) -> Option<&mut Self::Buffer>;

    /// Returns whether the requester may send a request now; with `false` it stops, as when
    /// [`Output::tx_buffer`] returns `None`, and resumes at its next event.
    ///
    /// A context whose packets a later context's could overtake on their way (a softirq, on a
    /// veth) answers requests but leaves its own to that later context: a responder takes an
    /// early request as a loss.
    fn may_send_request(&mut self) -> bool {
        true
    }

    /// Returns whether a stream of packets (the requester's, or a READ response) may go on
    /// in this call; with `false` the sender stops as when [`Output::tx_buffer`] returns
    /// `None`, and resumes at its next event.
    ///
    /// Asked before every packet but the first of a READ response in one call, and before
    /// every request: a context that holds what it sends until it ends bounds it in time.
    fn may_continue(&mut self) -> bool {
        true
    }

    /// Sends the packet of `len` bytes just appended to the buffer last returned by
    /// [`Output::tx_buffer`].
    ///
    /// The bytes run from the BTH to the ICRC; pad and ICRC are zero. The
    /// caller adds the IP and UDP headers and writes the ICRC over them
    /// ([`super::icrc::compute`]) into the last four bytes. A buffer that does not hold
    /// `len` bytes (an append failed) is not sent.
    ///
    /// Returns `false` if the packet was dropped on its way out of this host, for now (a full
    /// queue): the sender then takes it as a buffer it did not get ([`Output::tx_buffer`]
    /// returning `None`), and sends it again at its next event: a requester resends it, a READ
    /// response resumes from it. `true` means it left, or was lost for good (counted by the
    /// caller), as on a wire.
    fn transmit(&mut self, len: usize, dest: Destination) -> bool;

    /// Reports a work completion.
    fn complete(&mut self, completion: Completion);

    /// Raises an affiliated asynchronous event.
    fn async_event(&mut self, event: AsyncEvent);

    /// Takes the next receive WQE, or returns `None` if the queue is empty.
    fn take_recv(&mut self) -> Option<RecvSlot>;

    /// Returns what the first 40 bytes of a UD receive buffer get for the packet being
    /// received: its GRH, for RoCEv2 its IP header (an IPv4 header in the last 20 bytes, after
    /// zeros). With `None` (the default) they are left as they were.
    fn grh(&self) -> Option<&[u8; GRH_LEN]> {
        None
    }

    /// A send WQE left the requester, completed or not: its slot may be reused.
    ///
    /// Called in order of posting, for signaled and unsignaled WQEs alike.
    fn retired(&mut self, slot: u32) {
        let _ = slot;
    }

    /// Counts an event; the default does nothing.
    fn count(&mut self, counter: Counter) {
        let _ = counter;
    }

    /// Reports an event to tracing; the default does nothing.
    fn trace(&mut self, event: TraceEvent) {
        let _ = event;
    }
}

/// The headers of a packet to send.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outgoing {
    pub(super) opcode: Opcode,
    pub(super) psn: Psn,
    pub(super) dest_qpn: u32,
    pub(super) pkey: u16,
    pub(super) ack_req: bool,
    pub(super) solicited: bool,
    /// Virtual address, R_Key, DMA length.
    pub(super) reth: Option<(u64, u32, u32)>,
    pub(super) imm: Option<u32>,
    pub(super) ieth: Option<u32>,
    /// Q_Key, source QPN.
    pub(super) deth: Option<(u32, u32)>,
    pub(super) aeth: Option<(Syndrome, Msn)>,
    /// Virtual address, R_Key, swap or add, compare.
    pub(super) atomic: Option<(u64, u32, u64, u64)>,
    pub(super) atomic_ack: Option<u64>,
    /// Placement type, selectivity level.
    pub(super) feth: Option<(u8, u8)>,
}

impl Outgoing {
    /// Returns headers with only the BTH fields set.
    pub(super) fn new(opcode: Opcode, psn: Psn, dest_qpn: u32, pkey: u16) -> Self {
        Self {
            opcode,
            psn,
            dest_qpn,
            pkey,
            ack_req: false,
            solicited: false,
            reth: None,
            imm: None,
            ieth: None,
            deth: None,
            aeth: None,
            atomic: None,
            atomic_ack: None,
            feth: None,
        }
    }
}

/// Why a packet was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TxError {
    /// [`Output::tx_buffer`] returned `None`, or [`Output::transmit`] `false`: the packet
    /// waits.
    NoBuffer,
    /// The opcode and length do not make a packet.
    Build,
    /// Filling the payload failed.
    Memory(AccessError),
}

/// Builds a packet with `payload_len` bytes appended by `fill` (not called without payload),
/// and sends it.
pub(super) fn transmit<O, F>(
    out: &mut O,
    hdr: &Outgoing,
    payload_len: usize,
    dest: Destination,
    fill: F,
) -> Result<(), TxError>
where
    O: Output + ?Sized,
    F: FnOnce(&mut O::Buffer) -> Result<(), AccessError>,
{
    let len = packet_len(hdr.opcode, payload_len).ok_or(TxError::Build)?;
    let header_len = hdr.opcode.header_len();
    // The headers, then zeros: a packet without payload (a READ request, an acknowledgement)
    // is appended whole, its ICRC included, in one piece.
    let mut bytes = [0u8; MAX_HEADER_LEN + ICRC_LEN];
    {
        let head = bytes.get_mut(..header_len).ok_or(TxError::Build)?;
        let mut b =
            PacketBuilder::headers(head, hdr.opcode, payload_len).map_err(|_| TxError::Build)?;
        b.bth_mut().init(
            hdr.opcode,
            BthFields {
                solicited: hdr.solicited,
                pad_count: pad_for(payload_len),
                pkey: hdr.pkey,
                dest_qpn: hdr.dest_qpn,
                ack_req: hdr.ack_req,
                psn: hdr.psn,
            },
        );
        if let (Some((va, rkey, dma_len)), Some(r)) = (hdr.reth, b.reth_mut()) {
            r.set_va(va);
            r.set_rkey(rkey);
            r.set_dma_len(dma_len);
        }
        if let (Some(imm), Some(h)) = (hdr.imm, b.imm_dt_mut()) {
            h.set_imm(imm);
        }
        if let (Some(rkey), Some(h)) = (hdr.ieth, b.ieth_mut()) {
            h.set_rkey(rkey);
        }
        if let (Some((qkey, src_qpn)), Some(h)) = (hdr.deth, b.deth_mut()) {
            h.set_qkey(qkey);
            h.set_src_qpn(src_qpn);
        }
        if let (Some((syndrome, msn)), Some(h)) = (hdr.aeth, b.aeth_mut()) {
            h.set_syndrome(syndrome);
            h.set_msn(msn);
        }
        if let (Some((va, rkey, swap_add, compare)), Some(h)) = (hdr.atomic, b.atomic_eth_mut()) {
            h.set_va(va);
            h.set_rkey(rkey);
            h.set_swap_add(swap_add);
            h.set_compare(compare);
        }
        if let (Some(orig), Some(h)) = (hdr.atomic_ack, b.atomic_ack_eth_mut()) {
            h.set_orig(orig);
        }
        if let (Some((plt, sel)), Some(h)) = (hdr.feth, b.feth_mut()) {
            h.set(plt, sel);
        }
    }
    let buf = out.tx_buffer(len, dest).ok_or(TxError::NoBuffer)?;
    if payload_len == 0 {
        // It reads no memory: its WQE is not looked at again. Its ICRC is zero, for the
        // caller to complete.
        buf.put(bytes.get(..len).ok_or(TxError::Build)?);
    } else {
        buf.put(bytes.get(..header_len).ok_or(TxError::Build)?);
        fill(buf).map_err(TxError::Memory)?;
        // Pad and ICRC: zero, for the caller to complete.
        let tail = [0u8; 3 + ICRC_LEN];
        buf.put(
            tail.get(..usize::from(pad_for(payload_len)).saturating_add(ICRC_LEN))
                .unwrap_or(&tail),
        );
    }
    if !out.transmit(len, dest) {
        return Err(TxError::NoBuffer);
    }
    out.count(Counter::SentPackets);
    Ok(())
}
