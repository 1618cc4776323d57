// SPDX-License-Identifier: GPL-2.0

//! The completer: retires RC send WQEs as responses arrive (IBTA 9.7.5.2).
//!
//! The completer works on the requester's send queue, so it is written as
//! more methods of [`Requester`]. An ACK acknowledges every PSN up to its
//! own; a read response, atomic acknowledge or NAK acknowledges every PSN
//! before its own. An acknowledgement that reaches past a READ or atomic
//! whose response has not arrived means that response is lost or late (an
//! implied NAK).
//!
//! Recovery asks again only for what is missing:
//! - A READ response that arrives ahead of a gap (only READs in between) is
//!   placed at once and noted; when the gap fills, the completer moves past
//!   every response noted, and a retry does not ask for them again.
//! - An implied NAK waits a reorder window (a sixteenth of the local ACK
//!   timeout) for the late response, then retries for the gaps only: what was
//!   sent after the last response seen is left alone (its responses follow).
//! - A PSN sequence error NAK resends from the PSN it names: the responder
//!   carried out everything before it.
//! - The local ACK timeout goes back to the oldest unacknowledged PSN
//!   (go-back-N).
//!
//! - Every retry narrows the requester's send window (the PSNs it leaves
//!   outstanding): by half, or to the minimum after a local ACK timeout;
//!   progress widens it again. A narrowed window asks for a READ in pieces,
//!   each its own request, and a retry asks for the gaps only, which the
//!   responder answers for the duplicate's own length.
//!
//! Each of these retries uses one transport retry. An RNR NAK waits the delay
//! it names and resumes at its PSN, using one RNR retry and restoring the
//! transport retry budget (the responder answered). Progress restores both
//! budgets. When a budget runs out, or on a NAK that reports an error, the WQE
//! completes with the matching status, every later WQE is flushed and the QP
//! enters the error state.

use super::aeth::{
    NakCode,
    Syndrome, //
};
use super::io::{
    Clock,
    Counter,
    Instant,
    Output,
    RetransmitCause,
    TimerId,
    TraceEvent,
    WcStatus, //
};
use super::memory::{
    AccessError,
    MemoryAccess,
    WqeRef, //
};
use super::opcode::{
    OpClass,
    Transport, //
};
use super::packet::Packet;
use super::psn::Psn;
use super::requester::{
    Entry,
    Requester, //
};
use super::wqe::WrOpcode;

/// The reorder window after an implied NAK, as a fraction of the local ACK timeout.
const REORDER_WINDOW_DIVISOR: u64 = 16;

/// What acknowledging a range of PSNs found.
enum Acked {
    /// The acknowledgement was applied.
    Ok,
    /// It reached past a READ or atomic without its response: retry.
    ImpliedNak,
}

/// What became of the payload of a READ response.
enum Placement {
    /// It is in the WQE's buffers.
    Placed,
    /// The response does not fit the request, or the buffers refused it: the WQE failed.
    Failed,
    /// A page of the buffers is not present: the response was dropped as if lost, and loss
    /// recovery asks for it again once the driver has faulted the page in.
    Dropped,
}

impl<const N: usize> Requester<N> {
    /// Returns the index of the oldest WQE not yet done.
    fn first_pending(&self) -> Option<usize> {
        let mut k = 0;
        while let Some(e) = self.entry(k) {
            if e.done.is_none() {
                return Some(k);
            }
            k = k.wrapping_add(1);
        }
        None
    }

    /// Returns the index of the WQE that owns `psn`.
    fn owner_of(&self, psn: Psn) -> Option<usize> {
        let mut k = 0;
        while let Some(e) = self.entry(k) {
            if e.done.is_none() && e.contains(psn) {
                return Some(k);
            }
            k = k.wrapping_add(1);
        }
        None
    }

    /// Returns true if `psn` was sent and is not yet acknowledged.
    ///
    /// Sent, not only taken by a WQE: a response to a PSN past the furthest packet sent (a
    /// forged one, or a stale one of an earlier connection) would otherwise complete WQEs
    /// and move the send position past packets the responder never got.
    fn is_outstanding(&self, psn: Psn) -> bool {
        let sent = self
            .sent_end
            .distance_from(self.comp_psn)
            .min(self.next_psn.distance_from(self.comp_psn));
        psn.distance_from(self.comp_psn) < sent
    }

    /// Acknowledges what a READ or atomic response at `psn` implies, and returns the oldest
    /// pending WQE it answers; `None` if there is none, or if a retry started instead (the
    /// response skipped a READ or atomic still waiting for its own).
    fn response_target<O>(&mut self, psn: Psn, out: &mut O) -> Option<(usize, Entry)>
    where
        O: Output + Clock + ?Sized,
    {
        if let Acked::ImpliedNak = self.ack_before(psn, out) {
            self.implied_nak(psn.next(), out);
            return None;
        }
        let k = self.first_pending()?;
        let e = self.entry(k).copied()?;
        Some((k, e))
    }

    /// Acknowledges every PSN before `psn`.
    fn ack_before<O>(&mut self, psn: Psn, out: &mut O) -> Acked
    where
        O: Output + Clock + ?Sized,
    {
        let start = self.comp_psn;
        let mut result = Acked::Ok;
        while let Some(k) = self.first_pending() {
            let Some(e) = self.entry(k).copied() else {
                break;
            };
            if !e.assigned {
                break;
            }
            if e.last_psn().is_before(psn) {
                if e.wr.is_read_or_atomic() {
                    result = Acked::ImpliedNak;
                    break;
                }
                self.finish(k, WcStatus::Success);
                self.comp_psn = e.last_psn().next();
            } else {
                if !e.wr.is_read_or_atomic() && self.comp_psn.is_before(psn) {
                    self.comp_psn = psn;
                }
                break;
            }
        }
        if self.comp_psn != start {
            self.progress(start, out);
        }
        result
    }

    /// Restores the retry budgets, widens the send window for what was acknowledged since
    /// `start` and restarts the local ACK timer.
    fn progress<O>(&mut self, start: Psn, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        out.count(Counter::Progress);
        self.widen_window(self.comp_psn.distance_from(start));
        self.retrying = false;
        self.retry.reset();
        self.rnr_retry.reset();
        if self.next_psn != self.comp_psn
            && self.rnr_wait.is_none()
            && self.ack_timeout.nanos().is_some()
        {
            self.arm_retransmit(out);
            self.gap_until = None;
            if let Some(end) = self.early_end() {
                // Responses wait beyond another gap.
                self.implied_nak(end, out);
            }
            return;
        }
        self.retrans_deadline = None;
        self.probe = false;
        self.gap_until = None;
        out.cancel(TimerId::Retransmit);
    }

    /// Uses a transport retry to go back to the oldest unacknowledged PSN.
    ///
    /// Without a retry left, fails that WQE with a retry exceeded error.
    /// A NAK or an implied NAK while a retry is under way (`timeout` false)
    /// is ignored: it answers packets sent before the retry, and the retry
    /// already resends what it reports missing.
    fn retry_transport<O>(&mut self, timeout: bool, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        self.retry_from(self.comp_psn, timeout, None, out);
    }

    /// Uses a transport retry to go back to `psn`, or to the oldest unacknowledged PSN if
    /// that is later; as [`Requester::retry_transport`] otherwise.
    ///
    /// With `until`, the retry fills gaps only: what was sent from that PSN on is not sent
    /// again.
    fn retry_from<O>(&mut self, psn: Psn, timeout: bool, until: Option<Psn>, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        if self.retrying && !timeout {
            return;
        }
        if self.retry.try_consume() {
            out.count(Counter::Retry);
            self.retrying = true;
            // A timeout that is no reorder window's end: nothing came back at all.
            self.narrow_window(timeout && until.is_none());
            let from = if self.comp_psn.is_before(psn) && self.is_outstanding(psn) {
                psn
            } else {
                self.comp_psn
            };
            let cause = match (timeout, until) {
                (false, _) => RetransmitCause::Nak,
                (true, None) => RetransmitCause::Timeout,
                (true, Some(_)) => RetransmitCause::Reorder,
            };
            out.trace(TraceEvent::Retransmit { psn: from, cause });
            let resume = self.send_position();
            self.rewind(from);
            self.resend = until.map(|u| (u, resume));
        } else {
            out.count(Counter::RetryExceeded);
            let k = self.owner_of(self.comp_psn).or(self.first_pending());
            self.fail(k.unwrap_or(0), WcStatus::RetryExcErr, out);
        }
    }

    /// Sends the last packet sent again, before the local ACK timeout and without a
    /// transport retry (see [`Requester::probe`]); the timeout stays at `deadline`.
    ///
    /// Returns false if there is nothing to probe: nothing outstanding, the last packet a
    /// READ or atomic request (its responses are what would be missing, and asking for them
    /// again costs as much as a retry), or an RNR wait, a reorder window or a gap-filling
    /// retry already under way.
    fn tail_probe<O>(&mut self, deadline: Instant, out: &mut O) -> bool
    where
        O: Output + Clock + ?Sized,
    {
        if self.next_psn == self.comp_psn
            || self.rnr_wait.is_some()
            || self.gap_until.is_some()
            || self.resend.is_some()
        {
            return false;
        }
        let last = self.send_position().prev();
        if !self.is_outstanding(last) {
            return false;
        }
        let Some(entry) = self.owner_of(last).and_then(|k| self.entry(k)) else {
            return false;
        };
        if entry.wr.is_read_or_atomic() {
            return false;
        }
        out.count(Counter::TailProbe);
        out.trace(TraceEvent::Retransmit {
            psn: last,
            cause: RetransmitCause::TailProbe,
        });
        self.rewind(last);
        self.retrans_deadline = Some(deadline);
        out.arm(TimerId::Retransmit, deadline);
        true
    }

    /// Answers an implied NAK: a response reached past a READ or atomic whose own response
    /// has not arrived.
    ///
    /// That response may only be late: a link that reorders delivers it shortly after. A
    /// go-back-N retry at once would ask again for everything outstanding, and answering
    /// every such reordering with one is what floods a lossy link with duplicates. So the
    /// retry waits a reorder window (a sixteenth of the local ACK timeout); progress in
    /// between (the late response) restores the full timeout instead.
    ///
    /// `seen` is the PSN just past the responses seen beyond the gap: the retry asks again
    /// for what is missing before it, not for what was sent after (its responses follow).
    fn implied_nak<O>(&mut self, seen: Psn, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        if self.retrying {
            // The retry under way already asks for it again.
            return;
        }
        let Some(nanos) = self.ack_timeout.nanos() else {
            self.retry_transport(false, out);
            return;
        };
        self.gap_until = Some(match self.gap_until {
            Some(g) if seen.is_before(g) => g,
            _ => seen,
        });
        let deadline = out.now().after_nanos(nanos / REORDER_WINDOW_DIVISOR);
        if self.retrans_deadline.is_none_or(|d| deadline < d) {
            self.retrans_deadline = Some(deadline);
            // The window ends before any probe would.
            self.probe = false;
            out.arm(TimerId::Retransmit, deadline);
        }
    }

    /// Handles a response (ACK, NAK, read response, atomic acknowledge).
    ///
    /// The packet has passed [`Packet::check_qp`] for this QP.
    pub fn on_response<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        if self.error || self.transport() != Transport::Rc {
            out.count(Counter::DroppedPackets);
            return;
        }
        out.count(Counter::ReceivedPackets);
        let psn = pkt.psn();
        if !self.is_outstanding(psn) {
            // A late duplicate, or a response to nothing we sent.
            out.count(Counter::DroppedPackets);
            return;
        }
        match pkt.opcode().class() {
            OpClass::Acknowledge => self.on_ack(pkt, psn, out),
            OpClass::ReadResponse => self.on_read_response(pkt, psn, mem, out),
            OpClass::AtomicAcknowledge => self.on_atomic_ack(pkt, psn, mem, out),
            _ => out.count(Counter::DroppedPackets),
        }
        self.retire(out);
        self.run(mem, out);
    }

    fn on_ack<O>(&mut self, pkt: &Packet<'_>, psn: Psn, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        let Some(Ok(syndrome)) = pkt.aeth().map(|a| a.syndrome()) else {
            out.count(Counter::DroppedPackets);
            return;
        };
        match syndrome {
            Syndrome::Ack(_) => {
                if let Acked::ImpliedNak = self.ack_before(psn.next(), out) {
                    self.implied_nak(psn.next(), out);
                }
            }
            Syndrome::RnrNak(timer) => {
                out.count(Counter::RnrNakReceived);
                out.trace(TraceEvent::RnrNakReceived { psn, timer });
                if self.rnr_wait.is_some() {
                    return;
                }
                if let Acked::ImpliedNak = self.ack_before(psn, out) {
                    self.implied_nak(psn, out);
                    return;
                }
                if self.rnr_retry.try_consume() {
                    // The responder answered: timeouts so far are forgiven.
                    self.retry.reset();
                    self.retrying = false;
                    out.count(Counter::RnrRetry);
                    let nanos = u64::from(timer.micros()).saturating_mul(1000);
                    let deadline = out.now().after_nanos(nanos);
                    self.rnr_wait = Some((psn, deadline));
                    self.retrans_deadline = None;
                    self.probe = false;
                    out.cancel(TimerId::Retransmit);
                    out.arm(TimerId::RnrRetry, deadline);
                } else {
                    out.count(Counter::RnrRetryExceeded);
                    let k = self.owner_of(psn).or(self.first_pending());
                    self.fail(k.unwrap_or(0), WcStatus::RnrRetryExcErr, out);
                }
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                out.count(Counter::SequenceErrorNak);
                if self.rnr_wait.is_some() {
                    // Requests sent after the RNR NAKed one; the RNR retry resends them.
                    return;
                }
                // The responder carried out every request before the PSN it NAKs: only the
                // rest is sent again. Responses to READs before it may still be on their way;
                // if not, the reorder window or the timeout asks for them.
                let _ = self.ack_before(psn, out);
                self.retry_from(psn, false, None, out);
            }
            Syndrome::Nak(code) => {
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                    NakCode::PsnSequenceError
                    | NakCode::InvalidRequest
                    | NakCode::InvalidRdRequest => WcStatus::RemInvReqErr,
                };
                let _ = self.ack_before(psn, out);
                let k = self.owner_of(psn).or(self.first_pending());
                self.fail(k.unwrap_or(0), status, out);
            }
        }
    }

    fn on_read_response<M, O>(&mut self, pkt: &Packet<'_>, psn: Psn, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        if psn != self.comp_psn {
            // The response acknowledges the requests before it; the oldest pending one may
            // still wait for its own response.
            let _ = self.ack_before(psn, out);
        }
        let Some(k) = self.owner_of(psn) else {
            out.count(Counter::DroppedPackets);
            return;
        };
        let Some(e) = self.entry(k).copied() else {
            return;
        };
        if e.wr.opcode != WrOpcode::RdmaRead {
            out.count(Counter::DroppedPackets);
            return;
        }
        if psn != self.comp_psn {
            // Ahead of a gap: a response before it is lost or late. Placed now, it is not
            // asked for again; only READs may stand in between (the gap is a response), and
            // only as far as the bitmap reaches.
            if self.reads_up_to(k) && self.in_early_window(psn) && !self.is_early(psn) {
                let Placement::Placed = self.place_read_response(k, &e, pkt, psn, mem, out) else {
                    return;
                };
                self.set_early(psn);
            } else {
                out.count(Counter::DroppedPackets);
            }
            self.implied_nak(psn.next(), out);
            return;
        }
        let Placement::Placed = self.place_read_response(k, &e, pkt, psn, mem, out) else {
            return;
        };
        // In order: move past it and every response that arrived ahead of it.
        let start = self.comp_psn;
        self.comp_psn = psn.next();
        while self.take_early(self.comp_psn) {
            self.comp_psn = self.comp_psn.next();
        }
        while let Some(j) = self.first_pending() {
            match self.entry(j).copied() {
                Some(w)
                    if w.assigned
                        && w.wr.opcode == WrOpcode::RdmaRead
                        && w.last_psn().is_before(self.comp_psn) =>
                {
                    self.finish(j, WcStatus::Success);
                }
                _ => break,
            }
        }
        self.progress(start, out);
    }

    /// Returns true if every pending WQE up to the one at `k` is a READ.
    fn reads_up_to(&self, k: usize) -> bool {
        let mut j = k;
        loop {
            match self.entry(j) {
                Some(e) if e.done.is_some() || e.wr.opcode == WrOpcode::RdmaRead => {}
                _ => return false,
            }
            if j == 0 {
                return true;
            }
            j = j.wrapping_sub(1);
        }
    }

    /// Checks the READ response at `psn` for the WQE `e` (at `k`) and places its payload; on
    /// a mismatch fails the WQE.
    fn place_read_response<M, O>(
        &mut self,
        k: usize,
        e: &Entry,
        pkt: &Packet<'_>,
        psn: Psn,
        mem: &mut M,
        out: &mut O,
    ) -> Placement
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        let idx = psn.distance_from(e.first_psn);
        let mtu = self.mtu.bytes();
        let offset = idx.saturating_mul(mtu);
        let expected = e.wr.length.saturating_sub(offset).min(mtu);
        let last = idx.wrapping_add(1) == self.read_packets(e.wr.length);
        let payload = pkt.payload();
        // A READ asked for in several requests (a narrowed window, a retry for a gap) gets
        // an end before its last response too, so only the last must end; every response
        // before it carries a full MTU (the length check).
        let end = pkt.opcode().position().is_end();
        if (last && !end) || usize::try_from(expected).ok() != Some(payload.len()) {
            self.fail(k, WcStatus::BadRespErr, out);
            return Placement::Failed;
        }
        match mem.scatter_payload(WqeRef::Send(e.wr.slot), offset, payload) {
            Ok(()) => Placement::Placed,
            Err(AccessError::NotPresent) => {
                out.count(Counter::DroppedPackets);
                Placement::Dropped
            }
            Err(_) => {
                self.fail(k, WcStatus::LocProtErr, out);
                Placement::Failed
            }
        }
    }

    fn on_atomic_ack<M, O>(&mut self, pkt: &Packet<'_>, psn: Psn, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        let Some((k, e)) = self.response_target(psn, out) else {
            return;
        };
        let is_atomic = matches!(
            e.wr.opcode,
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
        );
        let Some(ack) = pkt.atomic_ack_eth() else {
            return;
        };
        if !is_atomic || e.first_psn != psn || psn != self.comp_psn {
            out.count(Counter::DroppedPackets);
            return;
        }
        let orig = ack.orig().to_ne_bytes();
        match mem.scatter(WqeRef::Send(e.wr.slot), 0, &orig) {
            Ok(()) => {}
            Err(AccessError::NotPresent) => {
                // Dropped as if lost: the retry's duplicate is answered from the responder
                // resource once the driver has faulted the page in.
                out.count(Counter::DroppedPackets);
                return;
            }
            Err(_) => {
                self.fail(k, WcStatus::LocProtErr, out);
                return;
            }
        }
        self.comp_psn = psn.next();
        self.finish(k, WcStatus::Success);
        self.progress(psn, out);
    }

    /// Handles a timer of the send side.
    pub fn on_timer<M, O>(&mut self, timer: TimerId, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        if self.error {
            return;
        }
        let now = out.now();
        match timer {
            TimerId::Retransmit => {
                let Some(deadline) = self.retrans_deadline else {
                    return;
                };
                if self.probe {
                    let probe_at = self.probe_time(deadline);
                    if now < probe_at {
                        out.arm(TimerId::Retransmit, probe_at);
                        return;
                    }
                    self.probe = false;
                    // A timer that fires late probes only well before the timeout, or the
                    // retry would follow the probe at once.
                    let latest = probe_at.after_nanos(deadline.0.saturating_sub(probe_at.0) / 2);
                    if now < latest && self.tail_probe(deadline, out) {
                        self.run(mem, out);
                        return;
                    }
                }
                if now < deadline {
                    out.arm(TimerId::Retransmit, deadline);
                    return;
                }
                self.retrans_deadline = None;
                self.probe = false;
                let gap_until = self.gap_until.take();
                if self.next_psn == self.comp_psn || self.rnr_wait.is_some() {
                    return;
                }
                // After a reorder window, only the gaps are asked for again.
                self.retry_from(self.comp_psn, true, gap_until, out);
            }
            TimerId::RnrRetry => {
                let Some((_, deadline)) = self.rnr_wait else {
                    return;
                };
                if now < deadline {
                    out.arm(TimerId::RnrRetry, deadline);
                    return;
                }
                self.rnr_wait = None;
                // The NAKed PSN, or later if an acknowledgement overtook the NAK.
                out.trace(TraceEvent::Retransmit {
                    psn: self.comp_psn,
                    cause: RetransmitCause::Rnr,
                });
                self.rewind(self.comp_psn);
            }
        }
        self.retire(out);
        self.run(mem, out);
    }
}
