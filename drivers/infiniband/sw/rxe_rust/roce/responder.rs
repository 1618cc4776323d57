// SPDX-License-Identifier: GPL-2.0

//! The responder: carries out received requests and answers them (IBTA 9.7.5).
//!
//! On RC a request is carried out only at the expected PSN, exactly once. A
//! request ahead of it gets one PSN sequence error NAK until the expected PSN
//! arrives; a request behind it is a duplicate: SEND, RDMA WRITE, ATOMIC
//! WRITE and FLUSH are acknowledged again without being carried out, an RDMA
//! READ or atomic is answered again from its responder resource (the range
//! read, or the value an atomic returned) and never carried out twice. A SEND
//! without a receive WQE gets an RNR NAK, and so does a request that meets a
//! page not present (on-demand paging). Errors NAK the request and put the
//! QP in the error state. ACKs are coalesced: a request asking for one marks
//! it pending, and the pending ACK goes out at the end of a receive batch
//! ([`Responder::flush_ack`]) or before any other response, so one ACK covers
//! every request of the batch.
//!
//! On UC a lost packet drops the rest of its message and the next First or
//! Only packet starts afresh; on UD each SEND Only is a message of its own.

use core::borrow::BorrowMut;

use super::aeth::{
    NakCode,
    Syndrome, //
};
use super::io::{
    self,
    AsyncEvent,
    Completion,
    Counter,
    Destination,
    Outgoing,
    Output,
    RecvSlot,
    TraceEvent,
    TxError,
    WcOpcode,
    WcStatus,
    WorkQueue, //
};
use super::memory::{
    Access,
    AccessError,
    AtomicOp,
    MemoryAccess,
    WqeRef, //
};
use super::mtu::IbMtu;
use super::opcode::{
    OpClass,
    Opcode,
    Operation,
    Position,
    QpType,
    Transport, //
};
use super::packet::Packet;
use super::psn::{
    Msn,
    Psn, //
};
use super::qp::QpConfig;
use super::segment::packets_for;
use super::slots::Slots;
use super::timer::RnrTimer;

/// Bytes at the start of a UD receive buffer left for the GRH.
pub const GRH_LEN: usize = 40;

/// A message being received.
#[derive(Clone, Copy, Debug)]
struct InMsg {
    class: OpClass,
    /// Bytes received so far.
    offset: u32,
    /// RDMA WRITE: the RETH.
    va: u64,
    rkey: u32,
    dma_len: u32,
}

/// What a responder resource remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResourceKind {
    /// An RDMA READ: the range to read again.
    Read { va: u64, rkey: u32, len: u32 },
    /// A CmpSwap or FetchAdd: the value it returned.
    Atomic { orig: u64 },
}

/// A responder resource: a READ or atomic carried out, kept for duplicates.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    first_psn: Psn,
    npsn: u32,
    msn: Msn,
    kind: ResourceKind,
}

/// Where an RDMA READ response that ran out of transmit buffers resumes.
#[derive(Clone, Copy, Debug)]
struct ReadCursor {
    res: Resource,
    /// The index of the response's first packet (a First or Only opcode).
    first: u32,
    /// The index of the next packet to send.
    next: u32,
    /// It answers a duplicate request (a newer duplicate replaces it).
    replay: bool,
}

/// Why a request was not carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// No receive WQE: RNR NAK.
    ///
    /// Also the answer to a page not present ([`AccessError::NotPresent`]), as hardware RNICs
    /// answer an on-demand paging fault: the requester retries after the RNR timer.
    Rnr,
    /// Invalid request: bad opcode sequence, length or rights of the QP.
    Invalid,
    /// A message longer than the receive WQE.
    Length,
    /// An R_Key, range or rights violation.
    Access,
    /// The responder could not carry out a valid request.
    Operational,
}

/// The largest DMA length a RETH may carry (IBA C9-94): 2^31 bytes.
const MAX_DMA_LEN: u32 = 1 << 31;

/// Checks the DMA length of the packet's RETH, if it has one, as the C driver's
/// `check_length`: a longer one is a length error (an RDMA READ of up to 2^32 - 1 bytes would
/// reserve more PSNs than the 2^23 of a valid window).
fn check_dma_len(pkt: &Packet<'_>) -> Result<(), Fault> {
    match pkt.reth() {
        Some(reth) if reth.dma_len() > MAX_DMA_LEN => Err(Fault::Length),
        _ => Ok(()),
    }
}

/// The receive side of a QP, with a responder resource per slot of `R`.
#[derive(Debug)]
pub struct Responder<R: Slots<Resource>> {
    qp_type: QpType,
    dest_qpn: u32,
    pkey: u16,
    qkey: u32,
    mtu: IbMtu,
    access: Access,
    min_rnr_timer: RnrTimer,
    epsn: Psn,
    msn: Msn,
    /// A sequence or RNR NAK was sent for `epsn`: send no more sequence NAKs.
    nak_sent: bool,
    ack_pending: Option<Psn>,
    msg: Option<InMsg>,
    /// The receive WQE taken for the message in progress; kept for the next message when
    /// the message is not carried out (an RNR NAK, a UC message dropped, a UD datagram
    /// dropped for a page not present).
    recv: Option<RecvSlot>,
    /// UC: drop packets until the next First or Only.
    drop_msg: bool,
    resources: R,
    res_next: usize,
    /// A READ response left unfinished when transmit buffers ran out: it is resumed by
    /// [`Responder::resume`] before any other request is handled.
    read_cursor: Option<ReadCursor>,
    /// A first READ response interrupted by a duplicate READ, to be finished after it.
    held: Option<ReadCursor>,
    error: bool,
    /// Receive WQEs come from a shared receive queue.
    srq: bool,
}

impl<R: Slots<Resource>> Responder<R> {
    /// Creates the receive side of a QP in the ready-to-receive state, keeping its responder
    /// resources in `resources` (whatever they held is dropped).
    pub fn new(cfg: &QpConfig, mut resources: R) -> Self {
        BorrowMut::<[Option<Resource>]>::borrow_mut(&mut resources).fill(None);
        Self {
            qp_type: cfg.qp_type,
            dest_qpn: cfg.dest_qpn,
            pkey: cfg.pkey,
            qkey: cfg.qkey,
            mtu: cfg.mtu,
            access: cfg.access,
            min_rnr_timer: cfg.min_rnr_timer,
            epsn: cfg.rq_psn,
            msn: Msn::ZERO,
            nak_sent: false,
            ack_pending: None,
            msg: None,
            recv: None,
            drop_msg: false,
            resources,
            res_next: 0,
            read_cursor: None,
            held: None,
            error: false,
            srq: cfg.srq,
        }
    }

    /// Returns true once the receive side is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Returns the next PSN the responder expects.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Returns whether the responder NAKed the PSN it expects (a sequence error or RNR NAK)
    /// and has not received it since: the requester goes back to it and sends everything
    /// after it again.
    pub fn naked_expected(&self) -> bool {
        self.nak_sent
    }

    /// Returns whether a READ response waits for transmit buffers: requests that arrive
    /// before [`Responder::resume`] finishes it are dropped (the caller should hold them back),
    /// except a duplicate READ (see [`Responder::replaces_response`]).
    pub fn is_sending(&self) -> bool {
        self.read_cursor.is_some() || self.held.is_some()
    }

    /// Returns true if `pkt` is a duplicate RDMA READ request that is answered at once, while
    /// a READ response waits: the requester asks again for what it misses, so it should not
    /// wait behind responses sent before (a replay is dropped for it, a first response held).
    pub fn replaces_response(&self, pkt: &Packet<'_>) -> bool {
        self.is_sending() && self.is_duplicate_read(pkt)
    }

    fn is_duplicate_read(&self, pkt: &Packet<'_>) -> bool {
        self.qp_type.transport() == Transport::Rc
            && pkt.opcode().operation() == Operation::RdmaReadRequest
            && pkt.psn().is_before(self.epsn)
    }

    /// Sends what is left of an interrupted READ response, as far as transmit buffers go,
    /// then of a first response a duplicate READ interrupted.
    pub fn resume<M, O>(&mut self, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        while let Some(c) = self.read_cursor.take().or_else(|| self.held.take()) {
            // The range was checked when the request came. If it is no longer readable, the
            // rest is not sent and the requester's retry gets the NAK (or, for a page not
            // present, the replay from the resource).
            let _ = self.send_read_responses(&c.res, c.first, c.next, c.replay, mem, out);
            if self.read_cursor.is_some() {
                return;
            }
        }
    }

    /// Handles a request packet that passed [`Packet::check_qp`] for this QP.
    pub fn on_request<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        if self.error || !pkt.opcode().is_request() {
            out.count(Counter::DroppedPackets);
            return;
        }
        if self.is_sending() {
            // Requests are handled in order: none overtakes the READ response still being
            // sent, but a duplicate READ, which changes nothing, goes first.
            if !self.is_duplicate_read(pkt) {
                out.count(Counter::DroppedPackets);
                return;
            }
            if let Some(c) = self.read_cursor.take() {
                if !c.replay {
                    self.held = Some(c);
                }
            }
        }
        out.count(Counter::ReceivedPackets);
        match self.qp_type.transport() {
            Transport::Rc => self.rc(pkt, mem, out),
            Transport::Uc => self.uc(pkt, mem, out),
            Transport::Ud => self.ud(pkt, mem, out),
        }
    }

    /// Returns whether a coalesced ACK is pending ([`Responder::flush_ack`]).
    pub fn ack_pending(&self) -> bool {
        self.ack_pending.is_some()
    }

    /// Sends the coalesced ACK, if one is pending; call at the end of a receive batch.
    pub fn flush_ack<O: Output + ?Sized>(&mut self, out: &mut O) {
        if let Some(psn) = self.ack_pending.take() {
            self.send_ack(out, Syndrome::ACK_UNLIMITED, psn, self.msn);
        }
    }

    fn send_ack<O: Output + ?Sized>(
        &mut self,
        out: &mut O,
        syndrome: Syndrome,
        psn: Psn,
        msn: Msn,
    ) {
        let Some(op) = Opcode::new(Transport::Rc, Operation::Acknowledge) else {
            return;
        };
        let mut hdr = Outgoing::new(op, psn, self.dest_qpn, self.pkey);
        hdr.aeth = Some((syndrome, msn));
        // A lost ACK is recovered by the requester's retry.
        let _ = io::transmit(out, &hdr, 0, Destination::Connected, |_| Ok(()));
    }

    fn rc<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let psn = pkt.psn();
        if psn.is_after(self.epsn) {
            out.count(Counter::OutOfSequence);
            if !self.nak_sent {
                self.nak_sent = true;
                self.flush_ack(out);
                let nak = Syndrome::Nak(NakCode::PsnSequenceError);
                self.send_ack(out, nak, self.epsn, self.msn);
            }
            return;
        }
        if psn.is_before(self.epsn) {
            out.count(Counter::DuplicateRequest);
            self.duplicate(pkt, mem, out);
            return;
        }
        let class = pkt.opcode().class();
        let result = check_dma_len(pkt).and_then(|()| match class {
            OpClass::Send | OpClass::RdmaWrite => self.send_write(pkt, mem, out).map(|()| 1),
            OpClass::RdmaRead => self.read(pkt, mem, out),
            OpClass::Atomic => self.atomic(pkt, mem, out).map(|()| 1),
            OpClass::AtomicWrite => self.atomic_write(pkt, mem).map(|()| 1),
            OpClass::Flush => self.flush(pkt, mem).map(|()| 1),
            OpClass::ReadResponse | OpClass::Acknowledge | OpClass::AtomicAcknowledge => {
                Err(Fault::Invalid)
            }
        });
        match result {
            Ok(npsn) => {
                self.epsn = psn.add(npsn);
                self.nak_sent = false;
                let acked_by_response = matches!(class, OpClass::RdmaRead | OpClass::Atomic);
                if pkt.bth().ack_req() && !acked_by_response {
                    self.ack_pending = Some(psn);
                }
            }
            Err(Fault::Rnr) => {
                if pkt.opcode().position().is_start() {
                    // The message has not started: the retry starts it again.
                    self.msg = None;
                }
                out.count(Counter::RnrNakSent);
                out.trace(TraceEvent::RnrNakSent {
                    psn,
                    timer: self.min_rnr_timer,
                });
                self.nak_sent = true;
                self.flush_ack(out);
                self.send_ack(out, Syndrome::RnrNak(self.min_rnr_timer), psn, self.msn);
            }
            Err(fault) => self.fatal(fault, psn, out),
        }
    }

    /// Answers a duplicate RC request without carrying it out again.
    fn duplicate<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let psn = pkt.psn();
        match pkt.opcode().class() {
            OpClass::RdmaRead => {
                let found = self.slots().iter().flatten().copied().find(|r| {
                    matches!(r.kind, ResourceKind::Read { .. })
                        && psn.in_window(r.first_psn, r.npsn)
                });
                let Some(res) = found else {
                    // Older than every resource kept (the requester may have more READs
                    // outstanding than there are resources): a READ changes nothing, so it
                    // is carried out again from the duplicate's own RETH, at its PSN.
                    self.reread(pkt, mem, out);
                    return;
                };
                let (ResourceKind::Read { va, rkey, len }, Some(reth)) = (res.kind, pkt.reth())
                else {
                    out.count(Counter::DroppedPackets);
                    return;
                };
                if reth.rkey() != rkey {
                    out.count(Counter::DroppedPackets);
                    return;
                }
                // The duplicate asks from its PSN on, for its own length: a requester
                // that asks again for a gap only gets the gap. A zero length, or more
                // than is left, gets the rest of the original READ.
                let start = psn.distance_from(res.first_psn);
                let offset = start.saturating_mul(self.mtu.bytes());
                let rest = len.saturating_sub(offset);
                let want = match reth.dma_len() {
                    0 => rest,
                    n => n.min(rest),
                };
                let replay = Resource {
                    first_psn: psn,
                    npsn: packets_for(want, self.mtu.bytes()).min(res.npsn.saturating_sub(start)),
                    msn: res.msn,
                    kind: ResourceKind::Read {
                        va: va.wrapping_add(u64::from(offset)),
                        rkey,
                        len: want,
                    },
                };
                self.flush_ack(out);
                // A failure here is a failure of the original read too; the
                // requester times out.
                let _ = self.send_read_responses(&replay, 0, 0, true, mem, out);
            }
            OpClass::Atomic => {
                let found =
                    self.slots().iter().flatten().copied().find(|r| {
                        matches!(r.kind, ResourceKind::Atomic { .. }) && r.first_psn == psn
                    });
                match found {
                    Some(Resource {
                        kind: ResourceKind::Atomic { orig },
                        msn,
                        ..
                    }) => {
                        self.flush_ack(out);
                        self.send_atomic_ack(out, psn, orig, msn);
                    }
                    _ => out.count(Counter::DroppedPackets),
                }
            }
            _ => {
                // Carried out already: acknowledge everything received so far.
                self.ack_pending = Some(self.epsn.prev());
            }
        }
    }

    /// Carries out one packet of a SEND or RDMA WRITE (RC and UC).
    fn send_write<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O) -> Result<(), Fault>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let op = pkt.opcode();
        let pos = op.position();
        let class = op.class();
        let payload = pkt.payload();
        let plen = u32::try_from(payload.len()).map_err(|_| Fault::Invalid)?;
        match self.msg {
            Some(m) if m.class != class || pos.is_start() => return Err(Fault::Invalid),
            None if !pos.is_start() => return Err(Fault::Invalid),
            _ => {}
        }
        if class == OpClass::Send {
            if pos.is_start() {
                let wr = match self.recv {
                    Some(wr) => wr,
                    None => out.take_recv().ok_or(Fault::Rnr)?,
                };
                self.recv = Some(wr);
                self.msg = Some(InMsg {
                    class,
                    offset: 0,
                    va: 0,
                    rkey: 0,
                    dma_len: 0,
                });
            }
            let (Some(wr), Some(mut m)) = (self.recv, self.msg) else {
                return Err(Fault::Invalid);
            };
            let end = m.offset.checked_add(plen).ok_or(Fault::Length)?;
            if end > wr.length {
                return Err(Fault::Length);
            }
            mem.scatter_payload(WqeRef::Recv(wr.slot), m.offset, payload)
                .map_err(|e| or_rnr(e, Fault::Operational))?;
            m.offset = end;
            self.msg = Some(m);
            if pos.is_end() {
                let mut invalidated = None;
                if let Some(ieth) = pkt.ieth() {
                    mem.invalidate(ieth.rkey()).map_err(|_| Fault::Invalid)?;
                    invalidated = Some(ieth.rkey());
                }
                self.msg = None;
                self.recv = None;
                self.msn = self.msn.next();
                out.complete(recv_completion(
                    wr,
                    WcStatus::Success,
                    WcOpcode::Recv,
                    end,
                    pkt,
                    invalidated,
                ));
            }
            return Ok(());
        }
        // RDMA WRITE.
        if !self.access.contains(Access::REMOTE_WRITE) {
            return Err(Fault::Invalid);
        }
        if pos.is_start() {
            let reth = pkt.reth().ok_or(Fault::Invalid)?;
            mem.check_remote(reth.rkey(), reth.va(), reth.dma_len(), Access::REMOTE_WRITE)
                .map_err(|e| or_rnr(e, Fault::Access))?;
            self.msg = Some(InMsg {
                class,
                offset: 0,
                va: reth.va(),
                rkey: reth.rkey(),
                dma_len: reth.dma_len(),
            });
        }
        let Some(mut m) = self.msg else {
            return Err(Fault::Invalid);
        };
        let end = m.offset.checked_add(plen).ok_or(Fault::Invalid)?;
        if end > m.dma_len || (pos.is_end() && end != m.dma_len) {
            return Err(Fault::Invalid);
        }
        let wr = if pos.is_end() && op.operation().has_immediate() {
            let wr = match self.recv {
                Some(wr) => wr,
                None => out.take_recv().ok_or(Fault::Rnr)?,
            };
            self.recv = Some(wr);
            Some(wr)
        } else {
            None
        };
        let va = m.va.wrapping_add(u64::from(m.offset));
        mem.write_remote_payload(m.rkey, va, payload)
            .map_err(|e| or_rnr(e, Fault::Access))?;
        m.offset = end;
        self.msg = Some(m);
        if pos.is_end() {
            self.msg = None;
            self.msn = self.msn.next();
            if let Some(wr) = wr {
                self.recv = None;
                out.complete(recv_completion(
                    wr,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    m.dma_len,
                    pkt,
                    None,
                ));
            }
        }
        Ok(())
    }

    /// Answers a duplicate RDMA READ that no resource remembers by reading again what its
    /// RETH names, if the QP and the R_Key still allow it; otherwise drops it.
    fn reread<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let Some(reth) = pkt.reth() else {
            out.count(Counter::DroppedPackets);
            return;
        };
        let allowed = self.access.contains(Access::REMOTE_READ)
            && check_dma_len(pkt).is_ok()
            && mem
                .check_remote(reth.rkey(), reth.va(), reth.dma_len(), Access::REMOTE_READ)
                .is_ok();
        if !allowed {
            out.count(Counter::DroppedPackets);
            return;
        }
        let npsn = packets_for(reth.dma_len(), self.mtu.bytes());
        if self.epsn.is_before(pkt.psn().add(npsn)) {
            // Responses past what was ever requested: not a READ that was carried out.
            out.count(Counter::DroppedPackets);
            return;
        }
        let res = Resource {
            first_psn: pkt.psn(),
            npsn,
            msn: self.msn,
            kind: ResourceKind::Read {
                va: reth.va(),
                rkey: reth.rkey(),
                len: reth.dma_len(),
            },
        };
        self.flush_ack(out);
        let _ = self.send_read_responses(&res, 0, 0, true, mem, out);
    }

    /// Carries out an RDMA READ request; returns the PSNs its responses use.
    fn read<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O) -> Result<u32, Fault>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        if self.msg.is_some() || !self.access.contains(Access::REMOTE_READ) {
            return Err(Fault::Invalid);
        }
        let reth = pkt.reth().ok_or(Fault::Invalid)?;
        // Nothing is changed before the check: an RNR NAK for a page not present leaves no
        // trace.
        mem.check_remote(reth.rkey(), reth.va(), reth.dma_len(), Access::REMOTE_READ)
            .map_err(|e| or_rnr(e, Fault::Access))?;
        let npsn = packets_for(reth.dma_len(), self.mtu.bytes());
        self.msn = self.msn.next();
        let res = Resource {
            first_psn: pkt.psn(),
            npsn,
            msn: self.msn,
            kind: ResourceKind::Read {
                va: reth.va(),
                rkey: reth.rkey(),
                len: reth.dma_len(),
            },
        };
        self.store(res);
        self.flush_ack(out);
        self.send_read_responses(&res, 0, 0, false, mem, out)?;
        Ok(npsn)
    }

    /// The responder resources kept.
    fn slots(&self) -> &[Option<Resource>] {
        self.resources.borrow()
    }

    fn store(&mut self, res: Resource) {
        let slots: &mut [Option<Resource>] = self.resources.borrow_mut();
        if let Some(slot) = slots.get_mut(self.res_next) {
            *slot = Some(res);
        }
        self.res_next = self
            .res_next
            .wrapping_add(1)
            .checked_rem(slots.len())
            .unwrap_or(0);
    }

    /// Sends the responses of a READ from response `from` on; the response starts at `first`;
    /// `replay` if it answers a duplicate request.
    ///
    /// When transmit buffers run out, the rest waits in the READ cursor.
    fn send_read_responses<M, O>(
        &mut self,
        res: &Resource,
        first: u32,
        from: u32,
        replay: bool,
        mem: &mut M,
        out: &mut O,
    ) -> Result<(), Fault>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let ResourceKind::Read { va, rkey, len } = res.kind else {
            return Ok(());
        };
        let mtu = self.mtu.bytes();
        let last = res.npsn.saturating_sub(1);
        let mut idx = from;
        while idx <= last {
            let offset = idx.saturating_mul(mtu);
            let plen = len.saturating_sub(offset).min(mtu);
            let pos = match (idx == first, idx == last) {
                (true, true) => Position::Only,
                (true, false) => Position::First,
                (false, true) => Position::Last,
                (false, false) => Position::Middle,
            };
            let operation = match pos {
                Position::First => Operation::RdmaReadResponseFirst,
                Position::Middle => Operation::RdmaReadResponseMiddle,
                Position::Last => Operation::RdmaReadResponseLast,
                Position::Only => Operation::RdmaReadResponseOnly,
            };
            let op = Opcode::new(Transport::Rc, operation).ok_or(Fault::Operational)?;
            let mut hdr = Outgoing::new(op, res.first_psn.add(idx), self.dest_qpn, self.pkey);
            if pos != Position::Middle {
                hdr.aeth = Some((Syndrome::ACK_UNLIMITED, res.msn));
            }
            let src = va.wrapping_add(u64::from(offset));
            // One packet per call at least: the rest waits in the cursor as for a buffer.
            let r = if idx != from && !out.may_continue() {
                Err(TxError::NoBuffer)
            } else {
                let plen = usize::try_from(plen).unwrap_or(usize::MAX);
                io::transmit(out, &hdr, plen, Destination::Connected, |buf| {
                    mem.read_remote(rkey, src, plen, buf)
                })
            };
            match r {
                Ok(()) => {}
                Err(TxError::NoBuffer) => {
                    self.read_cursor = Some(ReadCursor {
                        res: *res,
                        first,
                        next: idx,
                        replay,
                    });
                    return Ok(());
                }
                Err(TxError::Memory(AccessError::NotPresent)) => {
                    // A page went away since the request was checked: the rest is not sent,
                    // and the requester's retry is answered from the resource.
                    return Ok(());
                }
                Err(TxError::Memory(_)) => return Err(Fault::Access),
                Err(TxError::Build) => return Err(Fault::Operational),
            }
            idx = idx.wrapping_add(1);
        }
        Ok(())
    }

    fn send_atomic_ack<O: Output + ?Sized>(&mut self, out: &mut O, psn: Psn, orig: u64, msn: Msn) {
        let Some(op) = Opcode::new(Transport::Rc, Operation::AtomicAcknowledge) else {
            return;
        };
        let mut hdr = Outgoing::new(op, psn, self.dest_qpn, self.pkey);
        hdr.aeth = Some((Syndrome::ACK_UNLIMITED, msn));
        hdr.atomic_ack = Some(orig);
        // If lost, the duplicate request is answered from the resource.
        let _ = io::transmit(out, &hdr, 0, Destination::Connected, |_| Ok(()));
    }

    /// Carries out a CmpSwap or FetchAdd.
    fn atomic<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O) -> Result<(), Fault>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        if self.msg.is_some() || !self.access.contains(Access::REMOTE_ATOMIC) {
            return Err(Fault::Invalid);
        }
        let eth = pkt.atomic_eth().ok_or(Fault::Invalid)?;
        if eth.va() & 7 != 0 {
            return Err(Fault::Invalid);
        }
        let op = if pkt.opcode().operation() == Operation::CompareSwap {
            AtomicOp::CompareSwap {
                compare: eth.compare(),
                swap: eth.swap_add(),
            }
        } else {
            AtomicOp::FetchAdd {
                add: eth.swap_add(),
            }
        };
        let orig = mem.atomic(eth.rkey(), eth.va(), op).map_err(access_fault)?;
        self.msn = self.msn.next();
        let psn = pkt.psn();
        self.store(Resource {
            first_psn: psn,
            npsn: 1,
            msn: self.msn,
            kind: ResourceKind::Atomic { orig },
        });
        self.flush_ack(out);
        self.send_atomic_ack(out, psn, orig, self.msn);
        Ok(())
    }

    /// Carries out an ATOMIC WRITE.
    fn atomic_write<M>(&mut self, pkt: &Packet<'_>, mem: &mut M) -> Result<(), Fault>
    where
        M: MemoryAccess + ?Sized,
    {
        if self.msg.is_some() || !self.access.contains(Access::REMOTE_WRITE) {
            return Err(Fault::Invalid);
        }
        let reth = pkt.reth().ok_or(Fault::Invalid)?;
        let mut value = [0u8; 8];
        if !pkt.payload().copy_to(&mut value) {
            return Err(Fault::Invalid);
        }
        if reth.va() & 7 != 0 {
            return Err(Fault::Invalid);
        }
        mem.atomic(reth.rkey(), reth.va(), AtomicOp::Write { value })
            .map_err(access_fault)?;
        self.msn = self.msn.next();
        Ok(())
    }

    /// Carries out a FLUSH.
    fn flush<M>(&mut self, pkt: &Packet<'_>, mem: &mut M) -> Result<(), Fault>
    where
        M: MemoryAccess + ?Sized,
    {
        if self.msg.is_some() {
            return Err(Fault::Invalid);
        }
        let (Some(reth), Some(feth)) = (pkt.reth(), pkt.feth()) else {
            return Err(Fault::Invalid);
        };
        let right = match feth.placement_type() {
            1 => Access::FLUSH_GLOBAL,
            2 => Access::FLUSH_PERSISTENT,
            _ => return Err(Fault::Invalid),
        };
        if !self.access.contains(right) {
            return Err(Fault::Invalid);
        }
        mem.flush(
            reth.rkey(),
            reth.va(),
            reth.dma_len(),
            feth.placement_type(),
        )
        .map_err(access_fault)?;
        self.msn = self.msn.next();
        Ok(())
    }

    /// NAKs the request at `psn` and enters the error state (RC).
    fn fatal<O: Output + ?Sized>(&mut self, fault: Fault, psn: Psn, out: &mut O) {
        self.flush_ack(out);
        let (code, event, status) = match fault {
            Fault::Length => (
                NakCode::InvalidRequest,
                AsyncEvent::RequestError,
                WcStatus::LocLenErr,
            ),
            Fault::Access => (
                NakCode::RemoteAccessError,
                AsyncEvent::AccessError,
                WcStatus::WrFlushErr,
            ),
            Fault::Operational => (
                NakCode::RemoteOperationalError,
                AsyncEvent::Fatal,
                WcStatus::LocProtErr,
            ),
            Fault::Invalid | Fault::Rnr => (
                NakCode::InvalidRequest,
                AsyncEvent::RequestError,
                WcStatus::WrFlushErr,
            ),
        };
        self.send_ack(out, Syndrome::Nak(code), psn, self.msn);
        out.async_event(event);
        self.enter_error(status, out);
    }

    /// Enters the error state: completes the WQE in progress with `status`
    /// and flushes the receive queue.
    pub(super) fn enter_error<O: Output + ?Sized>(&mut self, status: WcStatus, out: &mut O) {
        self.error = true;
        self.msg = None;
        self.ack_pending = None;
        self.read_cursor = None;
        self.held = None;
        if let Some(wr) = self.recv.take() {
            out.complete(flushed(wr, status));
        }
        self.flush_recv(out);
    }

    /// Completes every receive WQE left with a flush error (error state only).
    pub fn flush_recv<O: Output + ?Sized>(&mut self, out: &mut O) {
        if !self.error || self.srq {
            return;
        }
        while let Some(wr) = out.take_recv() {
            out.complete(flushed(wr, WcStatus::WrFlushErr));
        }
    }

    fn uc<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let psn = pkt.psn();
        let pos = pkt.opcode().position();
        if self.msg.is_some() && psn != self.epsn {
            // A packet of the message was lost: drop the message.
            self.msg = None;
            self.drop_msg = true;
        }
        if pos.is_start() {
            if psn.is_before(self.epsn) {
                out.count(Counter::DuplicateRequest);
                return;
            }
            self.msg = None;
            self.drop_msg = false;
            self.epsn = psn;
        } else if self.drop_msg || self.msg.is_none() || psn != self.epsn {
            out.count(Counter::DroppedPackets);
            return;
        }
        self.epsn = psn.next();
        match check_dma_len(pkt).and_then(|()| self.send_write(pkt, mem, out)) {
            Ok(()) => {}
            Err(Fault::Length) => {
                if let Some(wr) = self.recv.take() {
                    out.complete(flushed(wr, WcStatus::LocLenErr));
                }
                self.msg = None;
                self.drop_msg = true;
            }
            Err(_) => {
                // UC has no NAK: without a receive WQE, at a page not present or on an error
                // the message is dropped as if a packet were lost; a receive WQE it took waits
                // in `recv` for the next message.
                out.count(Counter::DroppedPackets);
                self.msg = None;
                self.drop_msg = true;
            }
        }
    }

    fn ud<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        let Some(deth) = pkt.deth() else {
            out.count(Counter::DroppedPackets);
            return;
        };
        if deth.qkey() != self.qkey || pkt.opcode().class() != OpClass::Send {
            out.count(Counter::DroppedPackets);
            return;
        }
        let Some(wr) = self.recv.take().or_else(|| out.take_recv()) else {
            out.count(Counter::DroppedPackets);
            return;
        };
        let payload = pkt.payload();
        let len = u32::try_from(payload.len())
            .ok()
            .and_then(|n| n.checked_add(GRH_LEN as u32));
        let status = match len {
            Some(len) if len <= wr.length => {
                let grh = match out.grh() {
                    Some(grh) => mem.scatter(WqeRef::Recv(wr.slot), 0, grh),
                    None => Ok(()),
                };
                match grh.and_then(|()| {
                    mem.scatter_payload(WqeRef::Recv(wr.slot), GRH_LEN as u32, payload)
                }) {
                    Ok(()) => WcStatus::Success,
                    Err(AccessError::NotPresent) => {
                        // Dropped as if lost; the receive WQE waits for the next datagram.
                        self.recv = Some(wr);
                        out.count(Counter::DroppedPackets);
                        return;
                    }
                    Err(_) => WcStatus::LocProtErr,
                }
            }
            _ => WcStatus::LocLenErr,
        };
        let mut c = recv_completion(wr, status, WcOpcode::Recv, len.unwrap_or(0), pkt, None);
        c.src_qpn = deth.src_qpn();
        c.grh = true;
        out.complete(c);
    }
}

fn access_fault(e: AccessError) -> Fault {
    match e {
        AccessError::Misaligned => Fault::Invalid,
        AccessError::NotPresent => Fault::Rnr,
        AccessError::InvalidKey
        | AccessError::AccessDenied
        | AccessError::OutOfRange
        | AccessError::TooShort => Fault::Access,
    }
}

/// Returns [`Fault::Rnr`] for a page not present, `fault` for every other memory error.
fn or_rnr(e: AccessError, fault: Fault) -> Fault {
    if e == AccessError::NotPresent {
        Fault::Rnr
    } else {
        fault
    }
}

fn recv_completion(
    wr: RecvSlot,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    pkt: &Packet<'_>,
    invalidated_rkey: Option<u32>,
) -> Completion {
    Completion {
        queue: WorkQueue::Recv,
        wr_id: wr.wr_id,
        slot: wr.slot,
        status,
        opcode,
        byte_len,
        imm_data: pkt.imm_dt().map(|h| h.imm()),
        invalidated_rkey,
        src_qpn: 0,
        grh: false,
        solicited: pkt.bth().solicited(),
    }
}

fn flushed(wr: RecvSlot, status: WcStatus) -> Completion {
    Completion {
        queue: WorkQueue::Recv,
        wr_id: wr.wr_id,
        slot: wr.slot,
        status,
        opcode: WcOpcode::Recv,
        byte_len: 0,
        imm_data: None,
        invalidated_rkey: None,
        src_qpn: 0,
        grh: false,
        solicited: false,
    }
}
