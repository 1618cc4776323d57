// SPDX-License-Identifier: GPL-2.0

//! A queue pair's transport: requester, completer and responder behind one interface.
//!
//! [`QpTransport`] takes the events of a QP in the ready-to-send state and dispatches
//! them: a posted send WQE to the requester, a received request to the
//! responder, a received response to the completer, a fired timer to the
//! send side. When one side enters the error state, so does the other, and
//! every outstanding WQE is flushed. Capacities are fixed by the caller: `SQ`
//! send WQEs in flight and a responder resource (`max_dest_rd_atomic`) per slot of the
//! storage `RES` it passes in.

use super::io::{
    Clock,
    Counter,
    Output,
    TimerId,
    WcStatus, //
};
use super::memory::{
    Access,
    MemoryAccess, //
};
use super::mtu::IbMtu;
use super::opcode::{
    QpType,
    Transport, //
};
use super::packet::Packet;
use super::psn::Psn;
use super::requester::{
    PostError,
    Requester,
    SendWr, //
};
use super::responder::{
    Resource,
    Responder, //
};
use super::segment::packets_for;
use super::slots::Slots;
use super::timer::{
    AckTimeout,
    RetryCounter,
    RnrTimer, //
};

/// The attributes of a QP that the transport uses (`ib_qp_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// The QP type.
    pub qp_type: QpType,
    /// This QP's number.
    pub qpn: u32,
    /// The connected peer's QP number (RC, UC).
    pub dest_qpn: u32,
    /// The partition key sent in the BTH.
    pub pkey: u16,
    /// The Q_Key of a UD QP.
    pub qkey: u32,
    /// The path MTU.
    pub mtu: IbMtu,
    /// The first PSN the requester sends.
    pub sq_psn: Psn,
    /// The first PSN the responder expects.
    pub rq_psn: Psn,
    /// The transport retry count, 0 to 7 (7 means seven retries).
    pub retry_cnt: u8,
    /// The RNR retry count, 0 to 7 (7 means retry forever).
    pub rnr_retry: u8,
    /// The RNR timer the responder asks for in its RNR NAKs.
    pub min_rnr_timer: RnrTimer,
    /// The local ACK timeout.
    pub ack_timeout: AckTimeout,
    /// Reads and atomics the requester may have outstanding (`max_rd_atomic`).
    pub max_rd_atomic: u8,
    /// The remote access rights the responder grants.
    pub access: Access,
    /// Signal every send WQE, not only those with `IB_SEND_SIGNALED`.
    pub sq_sig_all: bool,
    /// Receive WQEs come from a shared receive queue: in the error state they stay there
    /// (other QPs take them) instead of being flushed.
    pub srq: bool,
}

/// Why a QP configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// A retry count above 7.
    RetryCount,
    /// An RNR retry count above 7.
    RnrRetry,
}

/// The state of a QP as far as the transport is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportState {
    /// Ready to send and receive.
    ReadyToSend,
    /// In the error state: every WQE is flushed.
    Error,
}

/// The transport of one QP.
#[derive(Debug)]
pub struct QpTransport<const SQ: usize, RES: Slots<Resource>> {
    qp_type: QpType,
    mtu: IbMtu,
    /// The send side: requester and completer.
    pub requester: Requester<SQ>,
    /// The receive side.
    pub responder: Responder<RES>,
}

impl<const SQ: usize, RES: Slots<Resource>> QpTransport<SQ, RES> {
    /// Creates the transport of a QP in the ready-to-send state, its responder resources in
    /// `resources`.
    pub fn new(cfg: &QpConfig, resources: RES) -> Result<Self, ConfigError> {
        let retry = RetryCounter::transport(cfg.retry_cnt).ok_or(ConfigError::RetryCount)?;
        let rnr = RetryCounter::rnr(cfg.rnr_retry).ok_or(ConfigError::RnrRetry)?;
        Ok(Self {
            qp_type: cfg.qp_type,
            mtu: cfg.mtu,
            requester: Requester::new(cfg, retry, rnr),
            responder: Responder::new(cfg, resources),
        })
    }

    /// Starts the requester anew with `cfg` (its first PSN, counters and timeout), as a
    /// QP does when it moves to RTS; nothing has been sent before.
    pub fn restart_requester(&mut self, cfg: &QpConfig) -> Result<(), ConfigError> {
        let retry = RetryCounter::transport(cfg.retry_cnt).ok_or(ConfigError::RetryCount)?;
        let rnr = RetryCounter::rnr(cfg.rnr_retry).ok_or(ConfigError::RnrRetry)?;
        self.requester = Requester::new(cfg, retry, rnr);
        Ok(())
    }

    /// Puts both sides in the error state, flushing every WQE they hold (the owner moved
    /// the QP to ERR).
    pub fn fail<O>(&mut self, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        if !self.requester.is_error() {
            self.requester.flush_all(out);
        }
        if !self.responder.is_error() {
            self.responder.enter_error(WcStatus::WrFlushErr, out);
        }
    }

    /// Returns the state.
    pub fn state(&self) -> TransportState {
        if self.requester.is_error() || self.responder.is_error() {
            TransportState::Error
        } else {
            TransportState::ReadyToSend
        }
    }

    /// Posts a send WQE.
    pub fn post_send<M, O>(&mut self, wr: SendWr, mem: &mut M, out: &mut O) -> Result<(), PostError>
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        self.requester.post(wr, mem, out)
    }

    /// Handles a received packet addressed to this QP.
    ///
    /// The packet has been parsed and its ICRC verified; the QP checks the
    /// opcode against its type and the payload against the path MTU.
    pub fn receive<M, O>(&mut self, pkt: &Packet<'_>, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        if pkt.check_qp(self.qp_type, self.mtu).is_err() {
            out.count(Counter::DroppedPackets);
            return;
        }
        if pkt.opcode().is_request() {
            self.responder.on_request(pkt, mem, out);
        } else {
            self.requester.on_response(pkt, mem, out);
        }
        self.sync_error(out);
    }

    /// Returns whether a coalesced ACK waits for the end of the batch
    /// ([`QpTransport::end_of_batch`]).
    pub fn ack_pending(&self) -> bool {
        self.responder.ack_pending()
    }

    /// Ends a batch of received packets: sends the coalesced ACK.
    pub fn end_of_batch<O>(&mut self, out: &mut O)
    where
        O: Output + ?Sized,
    {
        self.responder.flush_ack(out);
    }

    /// Handles a fired timer.
    pub fn on_timer<M, O>(&mut self, timer: TimerId, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        self.requester.on_timer(timer, mem, out);
        self.sync_error(out);
    }

    /// Sends what the responder and the requester may send now (after [`Output::tx_buffer`]
    /// ran dry): the rest of an interrupted READ response first, then new requests.
    pub fn run<M, O>(&mut self, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + Clock + ?Sized,
    {
        self.responder.resume(mem, out);
        self.requester.run(mem, out);
    }

    /// Sends the rest of an interrupted READ response only (a QP that may not send requests
    /// yet, in RTR, still answers them).
    pub fn resume_response<M, O>(&mut self, mem: &mut M, out: &mut O)
    where
        M: MemoryAccess<Buffer = O::Buffer> + ?Sized,
        O: Output + ?Sized,
    {
        self.responder.resume(mem, out);
    }

    /// Returns whether a READ response waits for transmit buffers: the caller should hold
    /// received packets back until [`QpTransport::run`] has sent it (requests that arrive
    /// meanwhile are dropped, to be retried), but those [`QpTransport::replaces_response`]
    /// lets through.
    pub fn is_sending_response(&self) -> bool {
        self.responder.is_sending()
    }

    /// Returns how many packets the responder answers an RDMA READ request for `len` bytes
    /// with: `ceil(len / MTU)`, at least one.
    ///
    /// The caller sizes where it sends the answer by it: a response sent in part from one
    /// context and in part from another may be reordered on the way.
    pub fn read_response_packets(&self, len: u32) -> u32 {
        packets_for(len, self.mtu.bytes())
    }

    /// Returns the requester's send window, in PSNs (see [`MIN_WINDOW`]).
    ///
    /// [`MIN_WINDOW`]: super::requester::MIN_WINDOW
    pub fn send_window(&self) -> u32 {
        self.requester.window()
    }

    /// Returns true if `pkt` is a request of a reliable connection that came early: after the
    /// PSN the responder expects, by at most [`reorder::MAX_GAP`]. The caller may hold it
    /// back until those before it come (see [`reorder`]).
    ///
    /// Not after the responder NAKed the PSN it expects: the requester sends the requests
    /// after it again, and one held would be carried out when the gap fills and its copy
    /// come as a duplicate. It is dropped, as out of sequence.
    ///
    /// [`reorder`]: super::reorder
    /// [`reorder::MAX_GAP`]: super::reorder::MAX_GAP
    pub fn is_early_request(&self, pkt: &Packet<'_>) -> bool {
        self.qp_type.transport() == Transport::Rc
            && !self.responder.is_error()
            && !self.responder.naked_expected()
            && pkt.opcode().is_request()
            && super::reorder::is_early(pkt.psn(), self.responder.expected_psn())
    }

    /// Returns the PSN of the next request the responder expects.
    pub fn expected_psn(&self) -> Psn {
        self.responder.expected_psn()
    }

    /// Returns the PSN of the next packet the requester sends: a retry's, while it goes back.
    pub fn send_psn(&self) -> Psn {
        self.requester.send_position()
    }

    /// Returns true if `pkt` should be handed to [`QpTransport::receive`] even while
    /// [`QpTransport::is_sending_response`]: a duplicate READ request, answered first.
    pub fn replaces_response(&self, pkt: &Packet<'_>) -> bool {
        pkt.check_qp(self.qp_type, self.mtu).is_ok()
            && pkt.opcode().is_request()
            && self.responder.replaces_response(pkt)
    }

    /// Flushes receive WQEs posted while the QP is in the error state.
    pub fn drain_recv<O>(&mut self, out: &mut O)
    where
        O: Output + ?Sized,
    {
        self.responder.flush_recv(out);
    }

    /// Puts the whole QP in the error state if either side is in it.
    fn sync_error<O>(&mut self, out: &mut O)
    where
        O: Output + Clock + ?Sized,
    {
        if self.requester.is_error() && !self.responder.is_error() {
            self.responder.enter_error(WcStatus::WrFlushErr, out);
        } else if self.responder.is_error() && !self.requester.is_error() {
            self.requester.flush_all(out);
        }
    }
}
