// SPDX-License-Identifier: GPL-2.0

//! The requester: turns posted send WQEs into request packets (IBTA 9.7.1-9.7.4).
//!
//! The requester keeps the send queue of a QP in a ring of fixed capacity
//! `N`. For each WQE it assigns PSNs, segments the message at the path MTU and
//! builds the request packets, within the limits of the transport: at most
//! [`MAX_UNACKED_PSNS`] PSNs unacknowledged, at most `max_rd_atomic` reads and
//! atomics outstanding, and fenced WQEs held until those complete. It asks
//! for an acknowledgement at the end of each message and every
//! [`MAX_PKTS_PER_ACK`] packets. On UC and UD a WQE completes once sent; on RC
//! the completer (`completer.rs`, which extends [`Requester`]) retires WQEs as
//! responses arrive, and winds the requester back for go-back-N retries.

use super::io::{
    self,
    Clock,
    Completion,
    Destination,
    Instant,
    Outgoing,
    Output,
    TimerId,
    TxError,
    WcOpcode,
    WcStatus,
    WorkQueue, //
};
use super::memory::{
    AccessError,
    MemoryAccess,
    WqeRef, //
};
use super::mtu::IbMtu;
use super::opcode::{
    Opcode,
    Operation,
    QpType,
    Transport, //
};
use super::psn::Psn;
use super::qp::QpConfig;
use super::segment::{
    packets_for,
    MessageKind,
    SegmentError,
    Segmenter, //
};
use super::timer::{
    AckTimeout,
    RetryCounter, //
};
use super::wqe::{
    Remote,
    SendFlags,
    SendWqe,
    WrOpcode, //
};

/// The most PSNs the requester leaves unacknowledged (`RXE_MAX_UNACKED_PSNS`).
pub const MAX_UNACKED_PSNS: u32 = 128;

/// The most responses a READ request asks for. Not in the IBTA: a responder sends a READ
/// response as fast as it can, and the requester's queue pair takes in a bounded number of
/// packets (the driver's inbox, 1,024); a longer READ that asked for everything at once
/// overflowed it on a lossless veth, and the requester dropped the rest and asked again
/// (`ib_read_bw -s 64M`: half the rate, twice the packets). A longer READ is asked for in
/// pieces of this many, the next once the last responses of the one before are within the
/// window; at most this plus [`MAX_UNACKED_PSNS`] responses are ever outstanding.
pub const MAX_READ_RESPONSES: u32 = 512;

/// Words of the bitmap of READ responses that arrived ahead of a gap.
const EARLY_WORDS: usize = (MAX_UNACKED_PSNS / 64) as usize;

/// Returns the bits of `early` ([`Requester::early`]) for the `n` PSNs from `from`, bit `i`
/// for `from + i`.
fn early_window(early: [u64; EARLY_WORDS], from: Psn, n: u32) -> u128 {
    // Bit `psn % MAX_UNACKED_PSNS` of the two words, low word first, is that PSN's.
    let [low, high] = early;
    let all = (u128::from(high) << 64) | u128::from(low);
    let first = all.rotate_right(from.get() % MAX_UNACKED_PSNS);
    let mask = 1u128
        .checked_shl(n)
        .map_or(u128::MAX, |b| b.wrapping_sub(1));
    first & mask
}

/// The bytes of an atomic acknowledge placed in the WQE's buffers: the original value.
const ATOMIC_ACK_LEN: u32 = 8;

/// The requester asks for an ACK at least every this many packets.
pub const MAX_PKTS_PER_ACK: u32 = 64;

/// The smallest send window, in PSNs (see [`Requester::window`]).
pub const MIN_WINDOW: u32 = 2;

/// The tail-loss probe, as a fraction of the local ACK timeout (see [`Requester::probe`]).
pub const TAIL_PROBE_DIVISOR: u64 = 8;

/// A send work request as the requester keeps it: a validated WQE without its buffers.
///
/// The buffers stay with the caller, who names them by `slot` when the
/// requester reads or writes them through [`MemoryAccess`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// The caller's work request ID.
    pub wr_id: u64,
    /// The caller's slot of the WQE and its buffers.
    pub slot: u32,
    /// The opcode.
    pub opcode: WrOpcode,
    /// The send flags.
    pub flags: SendFlags,
    /// Immediate data, in network order.
    pub imm_data: Option<u32>,
    /// The R_Key to invalidate at the responder (SEND with invalidate).
    pub invalidate_rkey: Option<u32>,
    /// The remote side of the operation.
    pub remote: Remote,
    /// Length of the local data.
    pub length: u32,
}

impl SendWr {
    /// Keeps what the requester needs of a decoded WQE held in `slot`.
    pub fn from_wqe(wqe: &SendWqe<'_>, slot: u32) -> Self {
        Self {
            wr_id: wqe.wr_id,
            slot,
            opcode: wqe.opcode,
            flags: wqe.flags,
            imm_data: wqe.imm_data,
            invalidate_rkey: wqe.invalidate_rkey,
            remote: wqe.remote,
            length: wqe.length,
        }
    }

    /// Returns true for RDMA READ and the atomics that answer with data.
    pub fn is_read_or_atomic(&self) -> bool {
        self.opcode.is_read_or_atomic()
    }

    /// Returns the completion opcode.
    pub fn wc_opcode(&self) -> WcOpcode {
        self.opcode.wc_opcode()
    }
}

/// Why a WQE was not posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostError {
    /// The send queue holds `N` WQEs already.
    QueueFull,
    /// The opcode is not allowed on the QP type.
    OpcodeNotAllowed,
}

/// One WQE in the send queue.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) wr: SendWr,
    /// First PSN, once assigned.
    pub(super) first_psn: Psn,
    /// PSNs used; zero until assigned.
    pub(super) npsn: u32,
    /// The PSNs are assigned: the WQE has been (at least partly) sent.
    pub(super) assigned: bool,
    /// The final status, once known.
    pub(super) done: Option<WcStatus>,
}

impl Entry {
    /// Returns the last PSN of the WQE (a READ reserves one per response).
    pub(super) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npsn.saturating_sub(1))
    }

    /// Returns true if `psn` is one of the WQE's PSNs.
    pub(super) fn contains(&self, psn: Psn) -> bool {
        self.assigned && psn.in_window(self.first_psn, self.npsn)
    }
}

/// What to do with the WQE at the send position.
enum Admit {
    /// Send it; `checked`: the buffers the response to its first request is placed in were
    /// found present ([`Requester::response_buffers_present`]).
    Go {
        /// Asked already; `send_packet` need not ask again.
        checked: bool,
    },
    /// Wait for a response to open the window.
    Wait,
    /// It was handled without sending (local operation or error): look at the next.
    Next,
}

/// The send side of a QP: the requester, extended by the completer.
///
/// # Invariants
///
/// `len <= N`, `head < N` when `N > 0`, `cur <= len`. Entries `0..len` from
/// `head` are `Some`, in posting order.
#[derive(Debug)]
pub struct Requester<const N: usize> {
    pub(super) qp_type: QpType,
    pub(super) qpn: u32,
    pub(super) dest_qpn: u32,
    pub(super) pkey: u16,
    pub(super) qkey: u32,
    pub(super) mtu: IbMtu,
    pub(super) ack_timeout: AckTimeout,
    pub(super) max_rd_atomic: u32,
    pub(super) sig_all: bool,
    pub(super) retry: RetryCounter,
    pub(super) rnr_retry: RetryCounter,
    pub(super) ring: [Option<Entry>; N],
    pub(super) head: usize,
    pub(super) len: usize,
    /// Offset from `head` of the WQE to send next.
    pub(super) cur: usize,
    /// Next packet of that WQE (for a READ: the response PSN to ask from).
    pub(super) cur_pkt: u32,
    /// First PSN of the next WQE to be assigned PSNs.
    pub(super) next_psn: Psn,
    /// The PSN just past the furthest packet sent (for a READ request, past the responses it
    /// asks for): a WQE takes all its PSNs at once, but a response to one not sent yet answers
    /// nothing.
    pub(super) sent_end: Psn,
    /// The oldest PSN not yet acknowledged.
    pub(super) comp_psn: Psn,
    /// Reads and atomics sent and not completed.
    pub(super) rd_atomic: u32,
    pub(super) noack_pkts: u32,
    pub(super) retrans_deadline: Option<Instant>,
    /// The tail-loss probe is due at [`Requester::probe_time`], if nothing was
    /// acknowledged by then.
    ///
    /// Not in the IBTA. When the last packets of a window, or the ACK for them, are lost,
    /// no later packet makes the responder NAK, so only the local ACK timeout recovers; on a
    /// lossy link with a narrowed window that is most losses, and the QP waits most of its
    /// time. So 1/[`TAIL_PROBE_DIVISOR`] of the timeout after the timer started, the
    /// requester sends its last packet again, as TCP's tail-loss probe does, without using
    /// a transport retry: if only it was lost, the responder takes it and acknowledges all;
    /// if only the ACK was, the duplicate is acknowledged; if more was lost, it is out of
    /// sequence and the responder NAKs. A probe that was not needed (a slow peer) costs one
    /// duplicate packet.
    ///
    /// At most one probe per start of the timer, and a probe does not start it: the timer
    /// starts when a packet goes out with it idle, on progress, and after a retry or an RNR
    /// wait. On a dead link that is once plus once per retry, so the retry count still runs
    /// out in the same time. A flag, not an `Option<Instant>`: the transport state must fit
    /// in a page.
    pub(super) probe: bool,
    /// After an RNR NAK: the PSN to resume at and when.
    pub(super) rnr_wait: Option<(Psn, Instant)>,
    /// A go-back-N retry is under way: no progress since it started.
    pub(super) retrying: bool,
    /// READ responses placed ahead of `comp_psn`, one bit per PSN modulo
    /// [`MAX_UNACKED_PSNS`], for those within that distance of it
    /// ([`Requester::in_early_window`]; a READ's responses reach further, and one beyond
    /// is dropped and asked for again).
    pub(super) early: [u64; EARLY_WORDS],
    /// While a reorder window runs: responses were seen up to (not including) this PSN,
    /// beyond a gap.
    pub(super) gap_until: Option<Psn>,
    /// A retry that fills gaps only: WQEs from the first PSN (exclusive limit of the gaps)
    /// that were sent before the second PSN (the send position before the retry) are not
    /// sent again; their responses are on their way.
    pub(super) resend: Option<(Psn, Psn)>,
    /// The send window: the most PSNs outstanding, from [`MIN_WINDOW`] to
    /// [`MAX_UNACKED_PSNS`]. Not in the IBTA: on a link that loses or reorders, every
    /// retry is go-back-N (the responder drops what follows a gap), so each costs
    /// what is in flight. A retry halves the window (a local ACK timeout drops it to
    /// the minimum) and progress widens it again, as TCP's congestion window does; a
    /// link that loses nothing never leaves the full window.
    pub(super) window: u32,
    /// Below this, progress widens the window by what it acknowledges; above, by one
    /// PSN per window acknowledged.
    pub(super) window_threshold: u32,
    /// PSNs acknowledged towards the next one-PSN widening.
    pub(super) window_acked: u32,
    pub(super) error: bool,
}

impl<const N: usize> Requester<N> {
    /// Creates the send side of a QP in the ready-to-send state.
    pub fn new(cfg: &QpConfig, retry: RetryCounter, rnr_retry: RetryCounter) -> Self {
        Self {
            qp_type: cfg.qp_type,
            qpn: cfg.qpn,
            dest_qpn: cfg.dest_qpn,
            pkey: cfg.pkey,
            qkey: cfg.qkey,
            mtu: cfg.mtu,
            ack_timeout: cfg.ack_timeout,
            max_rd_atomic: u32::from(cfg.max_rd_atomic).max(1),
            sig_all: cfg.sq_sig_all,
            retry,
            rnr_retry,
            ring: [None; N],
            head: 0,
            len: 0,
            cur: 0,
            cur_pkt: 0,
            next_psn: cfg.sq_psn,
            sent_end: cfg.sq_psn,
            comp_psn: cfg.sq_psn,
            rd_atomic: 0,
            noack_pkts: 0,
            retrans_deadline: None,
            probe: false,
            rnr_wait: None,
            retrying: false,
            early: [0; EARLY_WORDS],
            gap_until: None,
            resend: None,
            window: MAX_UNACKED_PSNS,
            window_threshold: MAX_UNACKED_PSNS,
            window_acked: 0,
            error: false,
        }
    }

    /// Returns true once the send side is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Returns the number of WQEs posted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.len
    }

    /// Returns the oldest PSN not yet acknowledged.
    pub fn acked_psn(&self) -> Psn {
        self.comp_psn
    }

    /// Returns the transport retries left, `None` if infinite.
    pub fn retries_left(&self) -> Option<u8> {
        self.retry.remaining()
    }

    /// Returns the RNR retries left, `None` if infinite.
    pub fn rnr_retries_left(&self) -> Option<u8> {
        self.rnr_retry.remaining()
    }

    pub(super) fn ring_index(&self, i: usize) -> Option<usize> {
        if i >= self.len {
            return None;
        }
        self.head.wrapping_add(i).checked_rem(N)
    }

    pub(super) fn entry(&self, i: usize) -> Option<&Entry> {
        self.ring.get(self.ring_index(i)?)?.as_ref()
    }

    pub(super) fn entry_mut(&mut self, i: usize) -> Option<&mut Entry> {
        let idx = self.ring_index(i)?;
        self.ring.get_mut(idx)?.as_mut()
    }

    pub(super) fn transport(&self) -> Transport {
        self.qp_type.transport()
    }

    /// Posts a send WQE and sends what the transport allows.
    ///
    /// In the error state the WQE completes at once with a flush error.
    pub fn post<M, O>(&mut self, wr: SendWr, mem: &mut M, out: &mut O) -> Result<(), PostError>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        if !wr.opcode.allowed_on(self.qp_type) {
            return Err(PostError::OpcodeNotAllowed);
        }
        if self.len >= N {
            return Err(PostError::QueueFull);
        }
        let idx = self
            .head
            .wrapping_add(self.len)
            .checked_rem(N)
            .ok_or(PostError::QueueFull)?;
        let slot = self.ring.get_mut(idx).ok_or(PostError::QueueFull)?;
        *slot = Some(Entry {
            wr,
            first_psn: Psn::ZERO,
            npsn: 0,
            assigned: false,
            done: None,
        });
        self.len = self.len.wrapping_add(1);
        if self.error {
            if let Some(e) = self.entry_mut(self.len.wrapping_sub(1)) {
                e.done = Some(WcStatus::WrFlushErr);
            }
            self.retire(out);
            return Ok(());
        }
        self.run(mem, out);
        Ok(())
    }

    /// Sends as many packets as the transport allows now.
    ///
    /// Every event handler calls this; call it also when [`Output::tx_buffer`]
    /// has buffers again after returning `None`.
    pub fn run<M, O>(&mut self, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        self.catch_up();
        while !self.error && self.rnr_wait.is_none() {
            let i = self.cur;
            let Some(entry) = self.entry(i).copied() else {
                break;
            };
            if entry.done.is_some() {
                self.advance();
                continue;
            }
            let mut checked = false;
            if entry.assigned {
                if entry.wr.opcode == WrOpcode::RdmaRead && !self.skip_early(&entry) {
                    // Every response arrived ahead of a gap: nothing to ask again.
                    self.advance();
                    continue;
                }
                if let Some((until, resume)) = self.resend {
                    if !entry.first_psn.add(self.cur_pkt).is_before(until) {
                        if entry.last_psn().is_before(resume) {
                            self.advance();
                            continue;
                        }
                        if entry.contains(resume) {
                            self.cur_pkt = self.cur_pkt.max(resume.distance_from(entry.first_psn));
                        }
                        self.resend = None;
                    }
                }
            } else {
                self.resend = None;
                match self.admit(i, mem, out) {
                    Admit::Go { checked: c } => checked = c,
                    Admit::Wait => break,
                    Admit::Next => continue,
                }
            }
            if !out.may_send_request()
                || !out.may_continue()
                || !self.send_packet(i, checked, mem, out)
            {
                break;
            }
        }
        if self.transport() == Transport::Rc
            && !self.error
            && self.rnr_wait.is_none()
            && self.retrans_deadline.is_none()
            && self.next_psn != self.comp_psn
        {
            // A retry that could send nothing yet (the window, or a READ waiting for its
            // earlier responses) still needs its timer.
            self.arm_retransmit(out);
        }
        self.retire(out);
    }

    /// Starts the local ACK timer, with its tail-loss probe.
    pub(super) fn arm_retransmit<O>(&mut self, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        if let Some(nanos) = self.ack_timeout.nanos() {
            let deadline = out.now().after_nanos(nanos);
            self.retrans_deadline = Some(deadline);
            self.probe = true;
            out.arm(TimerId::Retransmit, self.probe_time(deadline));
        }
    }

    /// Returns when the tail-loss probe of the local ACK timer ending at `deadline` is due.
    pub(super) fn probe_time(&self, deadline: Instant) -> Instant {
        let nanos = self.ack_timeout.nanos().unwrap_or(0);
        Instant(
            deadline
                .0
                .saturating_sub(nanos.saturating_sub(nanos / TAIL_PROBE_DIVISOR)),
        )
    }

    /// Moves the send position up to `comp_psn` if acknowledgements overtook it.
    ///
    /// After a retry went back, the responder answers the first duplicates by acknowledging
    /// all it had received: what lies before `comp_psn` needs no resending, and a send
    /// position left behind it would wait on the window (its distance from `comp_psn`
    /// wraps) until the next timeout.
    fn catch_up(&mut self) {
        if self.transport() != Transport::Rc || !self.send_position().is_before(self.comp_psn) {
            return;
        }
        let mut k = self.cur;
        while let Some(e) = self.entry(k).copied() {
            if !e.assigned {
                break;
            }
            if e.done.is_none() && e.contains(self.comp_psn) {
                self.cur = k;
                self.cur_pkt = self.comp_psn.distance_from(e.first_psn);
                return;
            }
            k = k.wrapping_add(1);
        }
    }

    /// Moves the send position of the READ `entry` past the responses that arrived ahead of
    /// a gap (a retry asks again from the first that has not); returns false if none is left.
    fn skip_early(&mut self, entry: &Entry) -> bool {
        while self.cur_pkt < entry.npsn && self.is_early(entry.first_psn.add(self.cur_pkt)) {
            self.cur_pkt = self.cur_pkt.saturating_add(1);
        }
        entry.npsn == 0 || self.cur_pkt < entry.npsn
    }

    /// Moves the send position to the next WQE.
    fn advance(&mut self) {
        self.cur = self.cur.saturating_add(1).min(self.len);
        self.cur_pkt = 0;
    }

    /// Decides whether the unassigned WQE at `i` may start, and assigns its PSNs.
    fn admit<M, O>(&mut self, i: usize, mem: &mut M, out: &mut O) -> Admit
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        let Some(entry) = self.entry(i).copied() else {
            return Admit::Wait;
        };
        let wr = entry.wr;
        if wr.flags.contains(SendFlags::FENCE) && self.rd_atomic > 0 {
            return Admit::Wait;
        }
        let kind = match wr.opcode.message_kind() {
            Some(kind) => kind,
            None => {
                // Local operations run when they reach the send position.
                let status = match (wr.opcode, wr.remote) {
                    (WrOpcode::LocalInv, Remote::LocalInv { rkey }) => match mem.invalidate(rkey) {
                        Ok(()) => WcStatus::Success,
                        Err(_) => WcStatus::LocQpOpErr,
                    },
                    (WrOpcode::RegMr, Remote::RegMr(reg)) => match mem.register(&reg) {
                        Ok(()) => WcStatus::Success,
                        Err(_) => WcStatus::LocQpOpErr,
                    },
                    (WrOpcode::BindMw, Remote::BindMw(bind)) => match mem.bind_mw(&bind) {
                        Ok(()) => WcStatus::Success,
                        Err(_) => WcStatus::MwBindErr,
                    },
                    _ => WcStatus::LocQpOpErr,
                };
                if status == WcStatus::Success {
                    if let Some(e) = self.entry_mut(i) {
                        e.done = Some(status);
                    }
                    self.advance();
                } else {
                    self.fail(i, status, out);
                }
                return Admit::Next;
            }
        };
        if wr.is_read_or_atomic() && self.rd_atomic >= self.max_rd_atomic {
            return Admit::Wait;
        }
        if self.transport() == Transport::Rc
            && self.next_psn.distance_from(self.comp_psn) >= MAX_UNACKED_PSNS
        {
            return Admit::Wait;
        }
        let total = match wr.remote {
            Remote::Flush { length, .. } => length,
            _ => wr.length,
        };
        let npsn = match Segmenter::new(self.transport(), kind, total, self.mtu) {
            Ok(seg) => seg.psn_count(),
            Err(e) => {
                let status = match e {
                    SegmentError::TooLong | SegmentError::BadAtomicWriteLength => {
                        WcStatus::LocLenErr
                    }
                    SegmentError::NotAllowed => WcStatus::LocQpOpErr,
                };
                self.fail(i, status, out);
                return Admit::Next;
            }
        };
        // The buffers the response of a READ or atomic is placed in are checked before the
        // WQE takes its PSNs: a page not present leaves no trace (no PSN outstanding, no timer
        // armed) and the WQE is admitted again at the next run, once the driver has faulted
        // the page in. A window already full sends nothing now: `send_packet` checks what it
        // lets out later.
        let mut checked = false;
        let in_flight = self.next_psn.distance_from(self.comp_psn);
        if wr.is_read_or_atomic() && in_flight < self.window {
            let len = if wr.opcode == WrOpcode::RdmaRead {
                let count = self
                    .read_request_packets(npsn, 0, self.next_psn, in_flight)
                    .unwrap_or(npsn);
                self.read_request_bytes(wr.length, 0, count).1
            } else {
                ATOMIC_ACK_LEN
            };
            if !Self::response_buffers_present(wr.slot, 0, len, mem) {
                return Admit::Wait;
            }
            checked = true;
        }
        let first_psn = self.next_psn;
        self.next_psn = first_psn.add(npsn);
        if wr.is_read_or_atomic() {
            self.rd_atomic = self.rd_atomic.saturating_add(1);
        }
        if let Some(e) = self.entry_mut(i) {
            e.first_psn = first_psn;
            e.npsn = npsn;
            e.assigned = true;
        }
        self.cur_pkt = 0;
        Admit::Go { checked }
    }

    /// Sends the next packet of the WQE at `i`; returns false to stop sending.
    ///
    /// `checked`: the buffers the response to this request is placed in were found present
    /// just before ([`Admit::Go`]).
    fn send_packet<M, O>(&mut self, i: usize, checked: bool, mem: &mut M, out: &mut O) -> bool
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        let Some(entry) = self.entry(i).copied() else {
            return false;
        };
        let wr = entry.wr;
        let rc = self.transport() == Transport::Rc;
        let psn = entry.first_psn.add(self.cur_pkt);
        let in_flight = psn.distance_from(self.comp_psn);
        if rc && in_flight >= self.window {
            return false;
        }
        let Some(kind) = wr.opcode.message_kind() else {
            return false;
        };
        let dest_qpn = self.dest_qpn;
        let mut dest = Destination::Connected;
        let mut hdr;
        let mut payload_len = 0u32;
        let mut payload_offset = 0u32;
        // The responses a READ request asks for; other packets use one PSN.
        let mut read_packets = 1u32;
        let finished;
        match (kind, wr.remote) {
            (MessageKind::RdmaRead, Remote::Rdma { addr, rkey }) => {
                let Some(op) = Opcode::new(Transport::Rc, Operation::RdmaReadRequest) else {
                    return false;
                };
                let Some(count) =
                    self.read_request_packets(entry.npsn, self.cur_pkt, psn, in_flight)
                else {
                    return false;
                };
                let (off, len) = self.read_request_bytes(wr.length, self.cur_pkt, count);
                // Before anything changes for this request: it waits for a page not present.
                if !checked && !Self::response_buffers_present(wr.slot, off, len, mem) {
                    return false;
                }
                hdr = Outgoing::new(op, psn, dest_qpn, self.pkey);
                hdr.reth = Some((addr.wrapping_add(u64::from(off)), rkey, len));
                hdr.ack_req = true;
                read_packets = count;
                finished = self.cur_pkt.saturating_add(count) >= entry.npsn;
            }
            (
                MessageKind::CompareSwap | MessageKind::FetchAdd,
                Remote::Atomic {
                    addr,
                    rkey,
                    compare_add,
                    swap,
                },
            ) => {
                let (operation, swap_add, compare) = if kind == MessageKind::CompareSwap {
                    (Operation::CompareSwap, swap, compare_add)
                } else {
                    (Operation::FetchAdd, compare_add, 0)
                };
                let Some(op) = Opcode::new(Transport::Rc, operation) else {
                    return false;
                };
                if !checked && !Self::response_buffers_present(wr.slot, 0, ATOMIC_ACK_LEN, mem) {
                    return false;
                }
                hdr = Outgoing::new(op, psn, dest_qpn, self.pkey);
                hdr.atomic = Some((addr, rkey, swap_add, compare));
                hdr.ack_req = true;
                finished = true;
            }
            (
                MessageKind::Flush,
                Remote::Flush {
                    addr,
                    length,
                    rkey,
                    placement_type,
                    selectivity_level,
                },
            ) => {
                let Some(op) = Opcode::new(Transport::Rc, Operation::Flush) else {
                    return false;
                };
                hdr = Outgoing::new(op, psn, dest_qpn, self.pkey);
                hdr.reth = Some((addr, rkey, length));
                hdr.feth = Some((placement_type, selectivity_level));
                hdr.ack_req = true;
                finished = true;
            }
            (MessageKind::AtomicWrite, Remote::Rdma { addr, rkey }) => {
                let Some(op) = Opcode::new(Transport::Rc, Operation::AtomicWrite) else {
                    return false;
                };
                hdr = Outgoing::new(op, psn, dest_qpn, self.pkey);
                hdr.reth = Some((addr, rkey, 8));
                hdr.ack_req = true;
                payload_len = 8;
                finished = true;
            }
            (_, remote) => {
                let Ok(mut seg) = Segmenter::new(self.transport(), kind, wr.length, self.mtu)
                else {
                    self.fail(i, WcStatus::LocLenErr, out);
                    return false;
                };
                seg.seek(self.cur_pkt);
                let Some(s) = seg.next() else {
                    self.advance();
                    return true;
                };
                hdr = Outgoing::new(s.opcode, psn, dest_qpn, self.pkey);
                payload_len = s.len;
                payload_offset = s.offset;
                let last = s.is_last();
                match remote {
                    Remote::Rdma { addr, rkey } if s.has_reth() => {
                        hdr.reth = Some((addr, rkey, wr.length));
                    }
                    Remote::Ud {
                        remote_qpn,
                        remote_qkey,
                        ah_num,
                    } => {
                        dest = Destination::AddressHandle(ah_num);
                        hdr.dest_qpn = remote_qpn;
                        // A Q_Key with the high bit set means "use the QP's" (IBTA 10.2.5).
                        let qkey = if remote_qkey & 0x8000_0000 != 0 {
                            self.qkey
                        } else {
                            remote_qkey
                        };
                        hdr.deth = Some((qkey, self.qpn));
                    }
                    _ => {}
                }
                if last {
                    if s.opcode.operation().has_immediate() {
                        hdr.imm = wr.imm_data;
                    }
                    if s.opcode.operation().has_invalidate() {
                        hdr.ieth = wr.invalidate_rkey;
                    }
                    hdr.solicited = wr.flags.contains(SendFlags::SOLICITED);
                }
                // The last packet the window lets out asks for an ACK, or it would
                // wait for the timeout.
                hdr.ack_req = rc
                    && (last
                        || self.noack_pkts >= MAX_PKTS_PER_ACK
                        || in_flight.saturating_add(1) >= self.window);
                finished = last;
            }
        }
        if hdr.ack_req {
            self.noack_pkts = 0;
        } else {
            self.noack_pkts = self.noack_pkts.saturating_add(1);
        }
        let slot = wr.slot;
        let payload_len = usize::try_from(payload_len).unwrap_or(usize::MAX);
        let result = io::transmit(out, &hdr, payload_len, dest, |buf| {
            mem.gather(WqeRef::Send(slot), payload_offset, payload_len, buf)
        });
        match result {
            Ok(()) => {}
            // A page not present is faulted in by the driver, which runs the QP again: the
            // packet waits, as for a transmit buffer.
            Err(TxError::NoBuffer | TxError::Memory(AccessError::NotPresent)) => return false,
            Err(TxError::Memory(_)) => {
                self.fail(i, WcStatus::LocProtErr, out);
                return false;
            }
            Err(TxError::Build) => {
                self.fail(i, WcStatus::LocQpOpErr, out);
                return false;
            }
        }
        let end = psn.add(read_packets);
        if self.sent_end.is_before(end) {
            self.sent_end = end;
        }
        if rc && self.retrans_deadline.is_none() {
            self.arm_retransmit(out);
        }
        if finished {
            if !rc {
                if let Some(e) = self.entry_mut(i) {
                    e.done = Some(WcStatus::Success);
                }
            }
            self.advance();
        } else {
            self.cur_pkt = self.cur_pkt.saturating_add(read_packets);
        }
        true
    }

    /// Returns how many responses the READ request at `psn` asks for, from response `pkt` of
    /// the `npsn` its WQE has, or `None` if it must wait.
    ///
    /// In the full window a READ asks for all it has left, up to [`MAX_READ_RESPONSES`]. In a
    /// narrowed one (after a retry) it asks for what the window allows, and never past a
    /// response that arrived ahead of a gap (a retry then asks for the gaps only). No
    /// request crosses a multiple of [`MAX_READ_RESPONSES`] from the READ's start, where the
    /// full window's pieces end: a retry from the middle of a piece stays within the request
    /// the responder took it for. The C responder drops a duplicate READ that reaches past
    /// the request it holds a resource for, so a retry across the end of a piece failed the
    /// queue pair when its peer was the C driver.
    ///
    /// A request from the middle of a READ waits until every earlier PSN is acknowledged,
    /// but in the full window with no response early, for a piece that is not the READ's
    /// last, once every earlier WQE is acknowledged: there it goes once the previous
    /// request's last responses are within the window (the caller checks `in_flight`), so
    /// that the responder sends the next piece right after them rather than a round trip
    /// later (`ib_read_bw -s 64M` over a veth stopped for one at every piece). The request
    /// before it went with every earlier PSN acknowledged, or ahead by this rule (a whole
    /// piece, longer than the window), or was the READ's first: only it is unacknowledged,
    /// so two requests are outstanding, within the responder's resources if it has two
    /// (`max_rd_atomic`; one per request, the oldest reused, as the C driver's). The last
    /// piece waits for all the others, so the next READ or atomic, admitted once it is sent,
    /// finds one request of this READ outstanding, as without pieces. Fewer than the
    /// window's PSNs plus [`MAX_READ_RESPONSES`] responses are ever coming.
    fn read_request_packets(&self, npsn: u32, pkt: u32, psn: Psn, in_flight: u32) -> Option<u32> {
        let left = npsn.saturating_sub(pkt).max(1);
        // What is left of the piece `pkt` is in.
        let piece_left = MAX_READ_RESPONSES.saturating_sub(pkt % MAX_READ_RESPONSES);
        let full = self.window >= MAX_UNACKED_PSNS;
        let ahead = full
            && self.max_rd_atomic >= 2
            && self.early == [0; EARLY_WORDS]
            // Not the READ's last request.
            && left > piece_left
            // The completed PSN is within this READ: every earlier WQE is acknowledged.
            && in_flight <= pkt;
        if pkt > 0 && psn != self.comp_psn && !ahead {
            return None;
        }
        if full {
            return Some(left.min(piece_left));
        }
        let mut count = left
            .min(piece_left)
            .min(self.window.saturating_sub(in_flight))
            .max(1);
        let mut i = 1;
        while i < count {
            if self.is_early(psn.add(i)) {
                count = i;
                break;
            }
            i = i.wrapping_add(1);
        }
        Some(count)
    }

    /// Returns the bytes of a READ of `length` bytes that its request from response `pkt`,
    /// asking for `count` responses, reads: their offset in the WQE and their length.
    fn read_request_bytes(&self, length: u32, pkt: u32, count: u32) -> (u32, u32) {
        let mtu = self.mtu.bytes();
        let off = pkt.saturating_mul(mtu).min(length);
        (off, count.saturating_mul(mtu).min(length.wrapping_sub(off)))
    }

    /// Returns false if a page of the `len` bytes at `offset` of the buffers of the send WQE
    /// in `slot`, where a response is placed, is not present ([`MemoryAccess::check_local`]):
    /// the request waits, as for a transmit buffer, while the driver faults the page in.
    ///
    /// Any other error is left to the completer: its placement of the response reports it.
    fn response_buffers_present<M>(slot: u32, offset: u32, len: u32, mem: &mut M) -> bool
    where
        M: MemoryAccess + ?Sized,
    {
        len == 0
            || !matches!(
                mem.check_local(WqeRef::Send(slot), offset, len),
                Err(AccessError::NotPresent)
            )
    }

    /// Narrows the send window for a retry: by half, or to the minimum after a local ACK
    /// timeout.
    pub(super) fn narrow_window(&mut self, timeout: bool) {
        self.window_threshold = (self.window / 2).max(MIN_WINDOW);
        self.window = if timeout {
            MIN_WINDOW
        } else {
            self.window_threshold
        };
        self.window_acked = 0;
    }

    /// Widens the send window for `acked` PSNs acknowledged.
    pub(super) fn widen_window(&mut self, acked: u32) {
        if self.window < self.window_threshold {
            self.window = self.window.saturating_add(acked).min(self.window_threshold);
            return;
        }
        self.window_acked = self.window_acked.saturating_add(acked);
        while self.window < MAX_UNACKED_PSNS && self.window_acked >= self.window {
            self.window_acked = self.window_acked.saturating_sub(self.window);
            self.window = self.window.saturating_add(1);
        }
        if self.window >= MAX_UNACKED_PSNS {
            self.window = MAX_UNACKED_PSNS;
            self.window_acked = 0;
        }
    }

    /// Returns the send window, in PSNs.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Marks the WQE at `i` done, releasing its read/atomic credit.
    pub(super) fn finish(&mut self, i: usize, status: WcStatus) {
        let mut release = false;
        if let Some(e) = self.entry_mut(i) {
            if e.done.is_none() {
                e.done = Some(status);
                release = e.assigned && e.wr.is_read_or_atomic();
            }
        }
        if release {
            self.rd_atomic = self.rd_atomic.saturating_sub(1);
        }
    }

    /// Fails the WQE at `i` with `status`, flushes every other, enters the error state.
    pub(super) fn fail<O>(&mut self, i: usize, status: WcStatus, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        let mut k = 0;
        while k < self.len {
            let s = if k == i { status } else { WcStatus::WrFlushErr };
            self.finish(k, s);
            k = k.wrapping_add(1);
        }
        self.enter_error(out);
    }

    /// Flushes every WQE and enters the error state (the QP failed elsewhere).
    pub fn flush_all<O>(&mut self, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        self.fail(usize::MAX, WcStatus::WrFlushErr, out);
    }

    fn enter_error<O>(&mut self, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        self.error = true;
        self.early = [0; EARLY_WORDS];
        self.gap_until = None;
        self.resend = None;
        self.retrans_deadline = None;
        self.probe = false;
        self.rnr_wait = None;
        out.cancel(TimerId::Retransmit);
        out.cancel(TimerId::RnrRetry);
        self.retire(out);
    }

    /// Completes finished WQEs from the head of the queue, in order.
    pub(super) fn retire<O>(&mut self, out: &mut O)
    where
        O: Output + ?Sized,
    {
        while let Some(entry) = self.entry(0).copied() {
            let Some(status) = entry.done else {
                break;
            };
            if let Some(slot) = self.ring.get_mut(self.head) {
                *slot = None;
            }
            self.head = self.head.wrapping_add(1).checked_rem(N).unwrap_or(0);
            self.len = self.len.wrapping_sub(1);
            if self.cur == 0 {
                self.cur_pkt = 0;
            }
            self.cur = self.cur.saturating_sub(1);
            let wr = entry.wr;
            out.retired(wr.slot);
            let signaled = self.sig_all || wr.flags.contains(SendFlags::SIGNALED);
            if status != WcStatus::Success || signaled {
                let byte_len = match wr.opcode {
                    WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => 8,
                    _ => wr.length,
                };
                out.complete(Completion {
                    queue: WorkQueue::Send,
                    wr_id: wr.wr_id,
                    slot: wr.slot,
                    status,
                    opcode: wr.wc_opcode(),
                    byte_len,
                    imm_data: None,
                    invalidated_rkey: None,
                    src_qpn: 0,
                    grh: false,
                    solicited: false,
                });
            }
        }
    }

    /// Moves the send position back to `psn`, for a go-back-N retry.
    pub(super) fn rewind(&mut self, psn: Psn) {
        self.resend = None;
        let mut k = 0;
        while let Some(e) = self.entry(k).copied() {
            if e.done.is_none() && e.contains(psn) {
                self.cur = k;
                self.cur_pkt = psn.distance_from(e.first_psn);
                self.noack_pkts = 0;
                self.retrans_deadline = None;
                self.probe = false;
                return;
            }
            k = k.wrapping_add(1);
        }
    }

    /// Returns the bit of `psn` in [`Requester::early`]: its word and its mask.
    fn early_bit(psn: Psn) -> (usize, u64) {
        let i = psn.get() % MAX_UNACKED_PSNS;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Returns true if `psn` is one the bitmap of early READ responses can note: within
    /// [`MAX_UNACKED_PSNS`] of `comp_psn`. A READ reserves a PSN per response when it is
    /// sent, so outstanding PSNs may reach further; beyond that they would share bits.
    pub(super) fn in_early_window(&self, psn: Psn) -> bool {
        psn.distance_from(self.comp_psn) < MAX_UNACKED_PSNS
    }

    /// Returns true if the READ response at `psn` arrived ahead of `comp_psn`.
    pub(super) fn is_early(&self, psn: Psn) -> bool {
        let (w, m) = Self::early_bit(psn);
        self.in_early_window(psn) && self.early.get(w).is_some_and(|x| x & m != 0)
    }

    /// Notes that the READ response at `psn` (within [`Requester::in_early_window`]) arrived
    /// ahead of `comp_psn`.
    pub(super) fn set_early(&mut self, psn: Psn) {
        if !self.in_early_window(psn) {
            return;
        }
        let (w, m) = Self::early_bit(psn);
        if let Some(x) = self.early.get_mut(w) {
            *x |= m;
        }
    }

    /// Clears the bit of `psn`; returns whether it was set.
    pub(super) fn take_early(&mut self, psn: Psn) -> bool {
        let (w, m) = Self::early_bit(psn);
        match self.early.get_mut(w) {
            Some(x) if *x & m != 0 => {
                *x &= !m;
                true
            }
            _ => false,
        }
    }

    /// Returns the PSN just past the last READ response that arrived ahead of a gap.
    ///
    /// Asked at every acknowledgement that makes progress, so at every READ response of a
    /// stream: word operations on the bitmap, not a test per outstanding PSN (up to
    /// [`MAX_UNACKED_PSNS`] of them, 1,700 instructions per response in `ib_read_bw -s 64K`).
    pub(super) fn early_end(&self) -> Option<Psn> {
        let n = self
            .next_psn
            .distance_from(self.comp_psn)
            .min(MAX_UNACKED_PSNS);
        let last = early_window(self.early, self.comp_psn, n).checked_ilog2()?;
        Some(self.comp_psn.add(last).next())
    }

    /// Returns the PSN of the next packet to send.
    pub(super) fn send_position(&self) -> Psn {
        match self.entry(self.cur) {
            Some(e) if e.assigned => e.first_psn.add(self.cur_pkt),
            _ => self.next_psn,
        }
    }

    /// Returns the number of response packets a READ of `len` bytes gets.
    pub(super) fn read_packets(&self, len: u32) -> u32 {
        packets_for(len, self.mtu.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `early_window` agrees with a test of each PSN's bit, across the end of the bitmap and
    /// the wrap of the PSN space.
    #[test]
    fn early_window_is_the_bits_psn_by_psn() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for from in [0, 1, 63, 64, 100, 127, 128, 0xff_ff80, 0xff_ffc1, 0xff_ffff] {
            for round in 0..64 {
                // Sparse and dense bitmaps, and an empty one.
                let early = match round {
                    0 => [0, 0],
                    r if r % 2 == 0 => [next() & next(), next() & next()],
                    _ => [next(), next()],
                };
                let from = Psn::new(from);
                for n in 0..=MAX_UNACKED_PSNS {
                    let mut want = 0u128;
                    for i in 0..n {
                        let bit = from.add(i).get() % MAX_UNACKED_PSNS;
                        let word = early.get((bit / 64) as usize).copied().unwrap_or(0);
                        if word >> (bit % 64) & 1 != 0 {
                            want |= 1 << i;
                        }
                    }
                    assert_eq!(early_window(early, from, n), want, "from {from:?} n {n}");
                }
            }
        }
    }
}
