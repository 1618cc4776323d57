// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the requester, completer and responder, one rule at a time,
//! with packets delivered by hand between two QPs.

use std::collections::{
    BTreeMap,
    VecDeque, //
};

use rxe_roce::roce::aeth::{
    NakCode,
    Syndrome, //
};
use rxe_roce::roce::io::{
    AsyncEvent,
    Clock,
    Completion,
    Counter,
    Destination,
    Instant,
    Output,
    RecvSlot,
    RetransmitCause,
    TimerId,
    TraceEvent,
    TxBuffer,
    WcOpcode,
    WcStatus,
    WorkQueue, //
};
use rxe_roce::roce::memory::{
    Access,
    AccessError,
    AtomicOp,
    MemoryAccess,
    MwBind,
    Registration,
    WqeRef, //
};
use rxe_roce::roce::mtu::IbMtu;
use rxe_roce::roce::opcode::{
    Opcode,
    QpType, //
};
use rxe_roce::roce::packet::Packet;
use rxe_roce::roce::psn::{
    Msn,
    Psn, //
};
use rxe_roce::roce::qp::{
    QpConfig,
    QpTransport,
    TransportState, //
};
use rxe_roce::roce::reorder::Held;
use rxe_roce::roce::requester::{
    SendWr,
    MAX_READ_RESPONSES,
    MAX_UNACKED_PSNS,
    MIN_WINDOW, //
    TAIL_PROBE_DIVISOR,
};
use rxe_roce::roce::responder::Resource;
use rxe_roce::roce::timer::{
    AckTimeout,
    RnrTimer, //
};
use rxe_roce::roce::wqe::{
    Remote,
    SendFlags,
    WrOpcode, //
};

const SLOT: usize = 512 * 1024;
const REMOTE: u64 = 0x10_0000;
/// The local ACK timeout exponent of every QP here (4.2 ms).
const ACK_TIMEOUT: u8 = 10;

/// The local ACK timeout of every QP here, in nanoseconds.
fn ack_timeout_nanos() -> u64 {
    AckTimeout::new(ACK_TIMEOUT).unwrap().nanos().unwrap()
}
const RKEY: u32 = 2;

/// A method of [`MemoryAccess`] that may answer that a page is not present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MemOp {
    Gather,
    Scatter,
    CheckRemote,
    ReadRemote,
    WriteRemote,
    Atomic,
    Flush,
    CheckLocal,
}

/// On-demand paging faults to answer: `times` calls of `op` get
/// [`AccessError::NotPresent`], after `skip` calls that succeed.
#[derive(Clone, Copy, Debug)]
struct PageFault {
    op: MemOp,
    skip: u32,
    times: u32,
}

/// Local buffers: slot `s` is `bytes[s * SLOT..]`; remote memory: `remote` at `REMOTE` for `RKEY`.
#[derive(Default)]
struct Mem {
    local: Vec<u8>,
    remote: Vec<u8>,
    atomics: u32,
    /// Calls of `gather`: a packet without payload makes none.
    gathers: u32,
    invalid: Vec<u32>,
    registered: Vec<Registration>,
    bound: Vec<MwBind>,
    /// Page faults to answer, as an on-demand paging region whose pages come and go.
    faults: Vec<PageFault>,
    /// Calls answered with [`AccessError::NotPresent`].
    not_present: u32,
    /// The pages of the send WQEs' buffers are not present until faulted in: `check_local`
    /// and `scatter` to a send WQE answer [`AccessError::NotPresent`] while this is set.
    send_pages_out: bool,
    /// The calls of `check_local`: WQE, offset and length.
    checks: Vec<(WqeRef, u32, u32)>,
}

impl Mem {
    fn new() -> Self {
        Mem {
            local: vec![0; SLOT * 16],
            remote: vec![0; 64 * 1024],
            ..Default::default()
        }
    }

    fn local(&mut self, wqe: WqeRef, offset: u32, len: usize) -> Result<&mut [u8], AccessError> {
        let slot = match wqe {
            WqeRef::Send(s) => s as usize,
            WqeRef::Recv(s) => 4 + s as usize,
        };
        let start = slot * SLOT + offset as usize;
        if offset as usize + len > SLOT {
            return Err(AccessError::TooShort);
        }
        Ok(&mut self.local[start..start + len])
    }

    fn remote(&mut self, rkey: u32, va: u64, len: usize) -> Result<&mut [u8], AccessError> {
        if rkey != RKEY || self.invalid.contains(&rkey) {
            return Err(AccessError::InvalidKey);
        }
        let start = va.checked_sub(REMOTE).ok_or(AccessError::OutOfRange)? as usize;
        self.remote
            .get_mut(start..start + len)
            .ok_or(AccessError::OutOfRange)
    }

    /// Answers [`AccessError::NotPresent`] if a fault in `faults` says so for this call of
    /// `op`.
    fn page(&mut self, op: MemOp) -> Result<(), AccessError> {
        for f in self.faults.iter_mut().filter(|f| f.op == op) {
            if f.skip > 0 {
                f.skip -= 1;
            } else if f.times > 0 {
                f.times -= 1;
                self.not_present += 1;
                return Err(AccessError::NotPresent);
            }
        }
        Ok(())
    }

    /// Answers [`AccessError::NotPresent`] for a send WQE while its pages are out.
    fn send_pages(&mut self, wqe: WqeRef) -> Result<(), AccessError> {
        if self.send_pages_out && matches!(wqe, WqeRef::Send(_)) {
            self.not_present += 1;
            return Err(AccessError::NotPresent);
        }
        Ok(())
    }
}

impl MemoryAccess for Mem {
    type Buffer = Vec<u8>;

    fn gather(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        self.gathers += 1;
        self.page(MemOp::Gather)?;
        dst.put(self.local(wqe, offset, len)?);
        Ok(())
    }
    fn scatter(&mut self, wqe: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError> {
        self.page(MemOp::Scatter)?;
        self.send_pages(wqe)?;
        self.local(wqe, offset, src.len())?.copy_from_slice(src);
        Ok(())
    }
    fn check_local(&mut self, wqe: WqeRef, offset: u32, len: u32) -> Result<(), AccessError> {
        self.checks.push((wqe, offset, len));
        self.page(MemOp::CheckLocal)?;
        self.send_pages(wqe)?;
        self.local(wqe, offset, len as usize).map(|_| ())
    }
    fn check_remote(&mut self, rkey: u32, va: u64, len: u32, _: Access) -> Result<(), AccessError> {
        self.page(MemOp::CheckRemote)?;
        self.remote(rkey, va, len as usize).map(|_| ())
    }
    fn read_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        self.page(MemOp::ReadRemote)?;
        dst.put(self.remote(rkey, va, len)?);
        Ok(())
    }
    fn write_remote(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), AccessError> {
        self.page(MemOp::WriteRemote)?;
        self.remote(rkey, va, src.len())?.copy_from_slice(src);
        Ok(())
    }
    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        // A page not present: the atomic is not carried out.
        self.page(MemOp::Atomic)?;
        let w = self.remote(rkey, va, 8)?;
        let orig = u64::from_ne_bytes(w.try_into().unwrap());
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } if orig == compare => swap,
            AtomicOp::CompareSwap { .. } => orig,
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
            AtomicOp::Write { value } => u64::from_ne_bytes(value),
        };
        w.copy_from_slice(&new.to_ne_bytes());
        self.atomics += 1;
        Ok(orig)
    }
    fn flush(&mut self, rkey: u32, va: u64, len: u32, _: u8) -> Result<(), AccessError> {
        self.page(MemOp::Flush)?;
        self.remote(rkey, va, len as usize).map(|_| ())
    }
    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        self.invalid.push(rkey);
        Ok(())
    }
    fn register(&mut self, reg: &Registration) -> Result<(), AccessError> {
        if reg.mr_key == 0 {
            return Err(AccessError::InvalidKey);
        }
        self.registered.push(*reg);
        Ok(())
    }
    fn bind_mw(&mut self, bind: &MwBind) -> Result<(), AccessError> {
        if bind.mr_lkey == 0 {
            return Err(AccessError::AccessDenied);
        }
        self.bound.push(*bind);
        Ok(())
    }
}

#[derive(Default)]
struct Io {
    now: u64,
    tx: Vec<u8>,
    sent: VecDeque<Vec<u8>>,
    done: Vec<Completion>,
    events: Vec<AsyncEvent>,
    recvs: VecDeque<RecvSlot>,
    timers: BTreeMap<TimerId, u64>,
    counters: Vec<Counter>,
    traces: Vec<TraceEvent>,
    /// Packets that may still be sent (`None`: no limit), as the driver's run budget.
    budget: Option<usize>,
    /// The GRH of the packet being received, for a UD receive buffer.
    grh: Option<[u8; 40]>,
    /// Refuse requests, as the driver's run in softirq does.
    hold_requests: bool,
    /// A request was refused because of `hold_requests`.
    held_request: bool,
    /// `may_continue` says stop once this many packets wait in `sent`, as the driver's run
    /// bounded in time does (`None`: never).
    go_on: Option<usize>,
    /// `transmit` drops the packet it is given when this many wait in `sent`, once, as a
    /// full queue on the way out of the host does (`None`: never).
    drop_at: Option<usize>,
}

impl Clock for Io {
    fn now(&self) -> Instant {
        Instant(self.now)
    }
    fn arm(&mut self, t: TimerId, d: Instant) {
        self.timers.insert(t, d.0);
    }
    fn cancel(&mut self, t: TimerId) {
        self.timers.remove(&t);
    }
}

impl Output for Io {
    type Buffer = Vec<u8>;

    fn tx_buffer(&mut self, len: usize, _dest: Destination) -> Option<&mut Vec<u8>> {
        if self.budget == Some(0) {
            return None;
        }
        self.tx.clear();
        self.tx.reserve(len);
        Some(&mut self.tx)
    }
    fn may_send_request(&mut self) -> bool {
        self.held_request |= self.hold_requests;
        !self.hold_requests
    }
    fn may_continue(&mut self) -> bool {
        self.go_on.is_none_or(|n| self.sent.len() < n)
    }
    fn transmit(&mut self, len: usize, _: Destination) -> bool {
        if let Some(b) = &mut self.budget {
            *b -= 1;
        }
        assert_eq!(
            self.tx.len(),
            len,
            "the packet appended is as long as announced"
        );
        if self.drop_at == Some(self.sent.len()) {
            self.drop_at = None;
            return false;
        }
        self.sent.push_back(self.tx.clone());
        true
    }
    fn complete(&mut self, c: Completion) {
        self.done.push(c);
    }
    fn async_event(&mut self, e: AsyncEvent) {
        self.events.push(e);
    }
    fn take_recv(&mut self) -> Option<RecvSlot> {
        self.recvs.pop_front()
    }
    fn grh(&self) -> Option<&[u8; 40]> {
        self.grh.as_ref()
    }
    fn count(&mut self, c: Counter) {
        self.counters.push(c);
    }
    fn trace(&mut self, e: TraceEvent) {
        self.traces.push(e);
    }
}

struct End {
    // The responder's resources in a vector, as the kernel keeps them.
    qp: QpTransport<8, Vec<Option<Resource>>>,
    mem: Mem,
    io: Io,
}

impl End {
    fn count(&self, c: Counter) -> usize {
        self.io.counters.iter().filter(|&&x| x == c).count()
    }

    fn post(&mut self, wr: SendWr) {
        self.qp.post_send(wr, &mut self.mem, &mut self.io).unwrap();
    }

    /// Answers `times` calls of `op` with a page not present, after `skip` that succeed.
    fn page_fault(&mut self, op: MemOp, skip: u32, times: u32) {
        self.mem.faults.push(PageFault { op, skip, times });
    }

    fn post_recv(&mut self, slot: u32) {
        self.io.recvs.push_back(RecvSlot {
            wr_id: 100 + u64::from(slot),
            slot,
            length: SLOT as u32,
        });
    }

    /// Delivers `pkts` as one batch.
    ///
    /// The driver ends a batch only when an ACK is pending (`ack_pending`): every test
    /// checks here that nothing else would have been sent.
    fn deliver(&mut self, pkts: &[Vec<u8>]) {
        for p in pkts {
            let pkt = Packet::parse(p).unwrap();
            self.qp.receive(&pkt, &mut self.mem, &mut self.io);
        }
        let pending = self.qp.ack_pending();
        let before = self.io.sent.len();
        self.qp.end_of_batch(&mut self.io);
        assert_eq!(self.io.sent.len() - before, usize::from(pending));
        assert!(!self.qp.ack_pending());
    }

    fn take_sent(&mut self) -> Vec<Vec<u8>> {
        self.io.sent.drain(..).collect()
    }

    fn fire(&mut self, t: TimerId) {
        let at = self.io.timers.remove(&t).expect("timer armed");
        self.io.now = self.io.now.max(at);
        self.qp.on_timer(t, &mut self.mem, &mut self.io);
    }

    /// Lets the local ACK timeout expire: the clock passes the armed time by a whole
    /// timeout, so a tail-loss probe armed before it is passed over.
    fn time_out(&mut self) {
        let at = self
            .io
            .timers
            .remove(&TimerId::Retransmit)
            .expect("timer armed");
        self.io.now = self.io.now.max(at + ack_timeout_nanos());
        self.qp
            .on_timer(TimerId::Retransmit, &mut self.mem, &mut self.io);
    }

    fn sends_done(&self) -> Vec<(u64, WcStatus)> {
        self.io
            .done
            .iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .map(|c| (c.wr_id, c.status))
            .collect()
    }
}

fn pair(qp_type: QpType, retry_cnt: u8, rnr_retry: u8) -> (End, End) {
    pair_with(qp_type, retry_cnt, rnr_retry, false)
}

/// Two connected endpoints; `srq`: they receive through shared receive queues.
fn pair_with(qp_type: QpType, retry_cnt: u8, rnr_retry: u8, srq: bool) -> (End, End) {
    pair_timeout(qp_type, retry_cnt, rnr_retry, srq, ACK_TIMEOUT)
}

/// As [`pair_with`], with the local ACK timeout exponent `ack_timeout` (0: no timer).
fn pair_timeout(
    qp_type: QpType,
    retry_cnt: u8,
    rnr_retry: u8,
    srq: bool,
    ack_timeout: u8,
) -> (End, End) {
    pair_resources(qp_type, retry_cnt, rnr_retry, srq, ack_timeout, 4, 4)
}

/// As [`pair_timeout`], each responder keeping `resources` responder resources and each
/// requester with at most `max_rd_atomic` READs and atomics outstanding.
fn pair_resources(
    qp_type: QpType,
    retry_cnt: u8,
    rnr_retry: u8,
    srq: bool,
    ack_timeout: u8,
    resources: usize,
    max_rd_atomic: u8,
) -> (End, End) {
    let mk = |qpn: u32, dest: u32, sq: u32, rq: u32| {
        let cfg = QpConfig {
            qp_type,
            qpn,
            dest_qpn: dest,
            pkey: 0xffff,
            qkey: 7,
            mtu: IbMtu::Mtu256,
            sq_psn: Psn::new(sq),
            rq_psn: Psn::new(rq),
            retry_cnt,
            rnr_retry,
            min_rnr_timer: RnrTimer::from_bits(4),
            ack_timeout: AckTimeout::new(ack_timeout).unwrap(),
            max_rd_atomic,
            access: Access::from_bits(0x30f),
            sq_sig_all: true,
            srq,
        };
        End {
            qp: QpTransport::new(&cfg, vec![None; resources]).unwrap(),
            mem: Mem::new(),
            io: Io::default(),
        }
    };
    (mk(1, 2, 0xff_fffe, 100), mk(2, 1, 100, 0xff_fffe))
}

fn wr(id: u64, opcode: WrOpcode, remote: Remote, length: u32) -> SendWr {
    SendWr {
        wr_id: id,
        slot: (id % 4) as u32,
        opcode,
        flags: SendFlags::from_bits(SendFlags::SIGNALED),
        imm_data: None,
        invalidate_rkey: None,
        remote,
        length,
    }
}

/// The opcode and PSN of each packet.
fn op_psns(pkts: &[Vec<u8>]) -> Vec<(Opcode, u32)> {
    opcodes(pkts).iter().map(|x| (x.0, x.1)).collect()
}

fn opcodes(pkts: &[Vec<u8>]) -> Vec<(Opcode, u32, Option<Syndrome>)> {
    pkts.iter()
        .map(|p| {
            let pkt = Packet::parse(p).unwrap();
            let syn = pkt.aeth().map(|a| a.syndrome().unwrap());
            (pkt.opcode(), pkt.psn().get(), syn)
        })
        .collect()
}

#[test]
fn one_ack_covers_a_batch() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for i in 0..6 {
        b.post_recv(i);
        a.post(wr(i.into(), WrOpcode::Send, Remote::None, 40));
    }
    let reqs = a.take_sent();
    assert_eq!(reqs.len(), 6);
    b.deliver(&reqs);
    let acks = b.take_sent();
    assert_eq!(
        opcodes(&acks),
        [(Opcode::RC_ACKNOWLEDGE, 0x3, Some(Syndrome::ACK_UNLIMITED))],
        "one coalesced ACK for the last PSN (0xfffffe + 5 wraps to 3)"
    );
    a.deliver(&acks);
    assert_eq!(a.sends_done().len(), 6);
    assert!(!a.io.timers.contains_key(&TimerId::Retransmit));
}

#[test]
fn held_requests_wait_while_responses_go() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.post_recv(0);
    b.post_recv(1);
    // Room for one packet: the second SEND waits for the next run.
    a.io.budget = Some(1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 40));
    a.post(wr(1, WrOpcode::Send, Remote::None, 40));
    let first = a.take_sent();
    assert_eq!(op_psns(&first), [(Opcode::RC_SEND_ONLY, 0xff_fffe)]);
    b.deliver(&first);
    let ack = b.take_sent();
    // A run that may answer but not ask (the driver's softirq): its acknowledgement completes
    // the first SEND and frees the window, a READ from b is answered, and the second SEND
    // still waits.
    a.io.budget = None;
    a.io.hold_requests = true;
    a.deliver(&ack);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert!(a.io.held_request, "the SEND that waits is reported");
    let reads = post_reads(&mut b, &mut a, 1);
    a.deliver(&reads);
    let resp = a.take_sent();
    assert_eq!(
        op_psns(&resp),
        [
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 100),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 101),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 102),
        ],
        "responses go, requests do not"
    );
    // The run in process context sends it.
    a.io.hold_requests = false;
    a.qp.run(&mut a.mem, &mut a.io);
    assert_eq!(op_psns(&a.take_sent()), [(Opcode::RC_SEND_ONLY, 0xff_ffff)]);
}

#[test]
fn ack_requested_at_message_end_and_every_64_packets() {
    let (mut a, _) = pair(QpType::Rc, 7, 7);
    a.post(wr(
        0,
        WrOpcode::RdmaWrite,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        100 * 256,
    ));
    let reqs = a.take_sent();
    // The window stops the requester at 128 unacknowledged PSNs; 100 fit.
    assert_eq!(reqs.len(), 100);
    let ack_req: Vec<usize> = reqs
        .iter()
        .enumerate()
        .filter(|(_, p)| Packet::parse(p).unwrap().bth().ack_req())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ack_req, [64, 99]);
}

#[test]
fn sequence_error_naks_once_then_go_back_n() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for i in 0..4 {
        a.post(wr(
            i,
            WrOpcode::RdmaWrite,
            Remote::Rdma {
                addr: REMOTE,
                rkey: RKEY,
            },
            16,
        ));
    }
    let reqs = a.take_sent();
    b.deliver(&reqs[1..]);
    let naks = b.take_sent();
    assert_eq!(
        opcodes(&naks),
        [(
            Opcode::RC_ACKNOWLEDGE,
            0xff_fffe,
            Some(Syndrome::Nak(NakCode::PsnSequenceError))
        )]
    );
    assert_eq!(b.count(Counter::OutOfSequence), 3);
    a.deliver(&naks);
    assert_eq!(a.count(Counter::SequenceErrorNak), 1);
    assert_eq!(a.count(Counter::OutOfSequence), 0, "a request counter");
    assert_eq!(a.count(Counter::Retry), 1);
    assert_eq!(
        a.io.traces,
        [TraceEvent::Retransmit {
            psn: Packet::parse(&reqs[0]).unwrap().psn(),
            cause: RetransmitCause::Nak,
        }],
        "the retry is traced with the NAKed PSN"
    );
    let again = a.take_sent();
    assert_eq!(again.len(), 4, "go back to the NAKed PSN and resend all");
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        (0..4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
}

#[test]
fn duplicate_atomic_is_answered_from_the_resource() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.mem.remote[..8].copy_from_slice(&40u64.to_ne_bytes());
    let faa = Remote::Atomic {
        addr: REMOTE,
        rkey: RKEY,
        compare_add: 2,
        swap: 0,
    };
    a.post(wr(0, WrOpcode::AtomicFetchAndAdd, faa, 8));
    let req = a.take_sent();
    b.deliver(&req);
    b.deliver(&req);
    b.deliver(&req);
    assert_eq!(b.mem.atomics, 1, "carried out once");
    assert_eq!(
        u64::from_ne_bytes(b.mem.remote[..8].try_into().unwrap()),
        42
    );
    let acks = b.take_sent();
    assert_eq!(acks.len(), 3);
    for p in &acks {
        let pkt = Packet::parse(p).unwrap();
        assert_eq!(pkt.opcode(), Opcode::RC_ATOMIC_ACKNOWLEDGE);
        assert_eq!(pkt.atomic_ack_eth().unwrap().orig(), 40);
    }
    a.deliver(&acks);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..8], 40u64.to_ne_bytes());
}

#[test]
fn duplicate_atomic_is_answered_while_its_resource_is_kept() {
    // As many resources as the storage the owner passed in holds: 128 here, as the kernel
    // keeps them; with 4 the duplicate below would be older than every resource.
    for resources in [4, 128] {
        let (mut a, mut b) = pair_resources(QpType::Rc, 7, 7, false, ACK_TIMEOUT, resources, 4);
        let faa = Remote::Atomic {
            addr: REMOTE,
            rkey: RKEY,
            compare_add: 1,
            swap: 0,
        };
        let mut first = Vec::new();
        for id in 0..100 {
            a.post(wr(id, WrOpcode::AtomicFetchAndAdd, faa, 8));
            let req = a.take_sent();
            if id == 0 {
                first = req.clone();
            }
            b.deliver(&req);
            a.deliver(&b.take_sent());
        }
        assert_eq!(a.sends_done().len(), 100);
        assert_eq!(b.mem.atomics, 100);
        b.deliver(&first);
        assert_eq!(b.mem.atomics, 100, "a duplicate is never carried out again");
        let answer = b.take_sent();
        if resources == 4 {
            assert!(answer.is_empty(), "older than every resource: not answered");
        } else {
            assert_eq!(answer.len(), 1);
            let pkt = Packet::parse(&answer[0]).unwrap();
            assert_eq!(pkt.opcode(), Opcode::RC_ATOMIC_ACKNOWLEDGE);
            assert_eq!(
                pkt.atomic_ack_eth().unwrap().orig(),
                0,
                "the first atomic's value"
            );
        }
    }
}

#[test]
fn duplicate_read_is_replayed_from_the_resource() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = i as u8;
    }
    a.post(wr(
        0,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE + 8,
            rkey: RKEY,
        },
        600,
    ));
    let req = a.take_sent();
    b.deliver(&req);
    let resp = b.take_sent();
    assert_eq!(
        opcodes(&resp).iter().map(|x| x.0).collect::<Vec<_>>(),
        [
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            Opcode::RC_RDMA_READ_RESPONSE_LAST
        ]
    );
    // The middle response is lost: the retry asks again for it alone (the last one
    // arrived), and the responder answers the duplicate's own length only.
    a.deliver(&resp[..1]);
    a.deliver(&resp[2..]);
    a.fire(TimerId::Retransmit);
    let retry = a.take_sent();
    let pkt = Packet::parse(&retry[0]).unwrap();
    assert_eq!(pkt.psn().get(), 0xff_ffff);
    assert_eq!(pkt.reth().unwrap().va(), REMOTE + 8 + 256);
    assert_eq!(pkt.reth().unwrap().dma_len(), 256);
    b.deliver(&retry);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    let replay = b.take_sent();
    assert_eq!(
        op_psns(&replay),
        [(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0xff_ffff)]
    );
    a.deliver(&replay);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
}

/// Posts `n` READs of 600 bytes (three responses each at MTU 256) from `a` to patterned
/// memory of `b`; returns their requests.
fn post_reads(a: &mut End, b: &mut End, n: u64) -> Vec<Vec<u8>> {
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
    for id in 0..n {
        a.post(wr(
            id,
            WrOpcode::RdmaRead,
            Remote::Rdma {
                addr: REMOTE + 1000 * id,
                rkey: RKEY,
            },
            600,
        ));
    }
    let reqs = a.take_sent();
    assert_eq!(reqs.len(), n as usize);
    reqs
}

/// A FETCH_AND_ADD of `add` to the first word of `b`'s region.
fn fetch_add(id: u64, add: u64) -> SendWr {
    wr(
        id,
        WrOpcode::AtomicFetchAndAdd,
        Remote::Atomic {
            addr: REMOTE,
            rkey: RKEY,
            compare_add: add,
            swap: 0,
        },
        8,
    )
}

/// Two READs from `a`, answered by `b`: their six responses.
fn two_reads(a: &mut End, b: &mut End) -> Vec<Vec<u8>> {
    let reqs = post_reads(a, b, 2);
    b.deliver(&reqs);
    let resp = b.take_sent();
    assert_eq!(resp.len(), 6);
    resp
}

/// Checks that the `n` READs of [`post_reads`] completed with the data of `b`.
fn check_reads(a: &End, b: &End, n: u64) {
    assert_eq!(
        a.sends_done(),
        (0..n).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    for id in 0..n as usize {
        let (l, r) = (id * SLOT, id * 1000);
        assert_eq!(a.mem.local[l..l + 600], b.mem.remote[r..r + 600]);
    }
}

#[test]
fn requests_without_payload_read_no_memory() {
    // A READ request, an atomic and a zero-length SEND carry no payload: building them must
    // not look at the WQE's buffer (the driver would copy and decode the WQE again for
    // nothing); a SEND with payload gathers it.
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let reqs = post_reads(&mut a, &mut b, 2);
    assert_eq!(a.mem.gathers, 0);
    b.deliver(&reqs);
    a.deliver(&b.take_sent());
    check_reads(&a, &b, 2);
    a.post(fetch_add(2, 5));
    a.post(wr(3, WrOpcode::Send, Remote::None, 0));
    assert_eq!(a.take_sent().len(), 2);
    assert_eq!(a.mem.gathers, 0);
    a.post(wr(4, WrOpcode::Send, Remote::None, 100));
    assert_eq!(a.take_sent().len(), 1);
    assert_eq!(a.mem.gathers, 1);
}

#[test]
fn read_response_packets_counts_what_the_responder_sends() {
    // The driver decides from this count where a READ response is sent (whole from the
    // softirq run, or all from the work item): it must be what the responder sends.
    for (id, len) in [0u32, 1, 255, 256, 257, 600, 1024].into_iter().enumerate() {
        let (mut a, mut b) = pair(QpType::Rc, 7, 7);
        let rdma = Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        };
        a.post(wr(id as u64, WrOpcode::RdmaRead, rdma, len));
        b.deliver(&a.take_sent());
        let sent = b.take_sent().len();
        assert_eq!(
            b.qp.read_response_packets(len) as usize,
            sent,
            "READ of {len} bytes"
        );
    }
}

#[test]
fn streams_stopped_by_may_continue_go_on_in_order() {
    // The driver bounds a run with bottom halves off in time: a READ response and the
    // requester stop where `may_continue` says, and the next call goes on from there with
    // one packet at least.
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let reqs = post_reads(&mut a, &mut b, 2);
    b.io.go_on = Some(1);
    let mut resp = Vec::new();
    for req in &reqs {
        b.deliver(core::slice::from_ref(req));
        loop {
            let sent = b.take_sent();
            assert_eq!(sent.len(), 1, "one packet per call");
            resp.extend(sent);
            if !b.qp.is_sending_response() {
                break;
            }
            b.qp.resume_response(&mut b.mem, &mut b.io);
        }
    }
    assert_eq!(
        two_reads_psns(&resp),
        op_psns(&resp).iter().map(|x| x.1).collect::<Vec<_>>()
    );
    a.deliver(&resp);
    check_reads(&a, &b, 2);

    // The requester: three RDMA WRITEs, one packet per call.
    a.io.go_on = Some(1);
    for id in 2..5u64 {
        let rdma = Remote::Rdma {
            addr: REMOTE + 1000 * id,
            rkey: RKEY,
        };
        a.post(wr(id, WrOpcode::RdmaWrite, rdma, 100));
    }
    let mut writes = a.take_sent();
    assert_eq!(writes.len(), 1);
    for _ in 0..2 {
        a.qp.run(&mut a.mem, &mut a.io);
        let sent = a.take_sent();
        assert_eq!(sent.len(), 1, "one packet per call");
        writes.extend(sent);
    }
    a.qp.run(&mut a.mem, &mut a.io);
    assert!(a.take_sent().is_empty());
    let psns: Vec<u32> = op_psns(&writes).iter().map(|x| x.1).collect();
    assert_eq!(psns, [psns[0], psns[0] + 1, psns[0] + 2]);
    b.deliver(&writes);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done()[2..],
        [
            (2, WcStatus::Success),
            (3, WcStatus::Success),
            (4, WcStatus::Success)
        ]
    );
}

/// The PSNs six READ responses of [`two_reads`] carry, in order: consecutive, modulo 2^24.
fn two_reads_psns(resp: &[Vec<u8>]) -> Vec<u32> {
    let first = op_psns(resp)[0].1;
    (0..6).map(|i| (first + i) & 0xff_ffff).collect()
}

#[test]
fn late_read_response_needs_no_retry() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let resp = two_reads(&mut a, &mut b);
    // The second response is overtaken by the rest: they are kept, and no retry goes out
    // while it may still come; the retry would wait a reorder window, not the ACK timeout.
    a.deliver(&resp[..1]);
    a.deliver(&resp[2..]);
    assert!(
        a.take_sent().is_empty(),
        "no go-back-N retry on a reordering"
    );
    let window = ack_timeout_nanos() / 16;
    assert_eq!(
        a.io.timers.get(&TimerId::Retransmit),
        Some(&(a.io.now + window))
    );
    assert!(a.sends_done().is_empty());
    a.deliver(&resp[1..2]);
    check_reads(&a, &b, 2);
    assert_eq!(a.count(Counter::Retry), 0);
    assert!(a.take_sent().is_empty());
    assert!(!a.io.timers.contains_key(&TimerId::Retransmit));
}

#[test]
fn lost_read_response_alone_is_asked_again() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let resp = two_reads(&mut a, &mut b);
    // The second response is lost. After the reorder window only the first READ is asked
    // again, from that response on; the second READ has all of its responses.
    a.deliver(&resp[..1]);
    a.deliver(&resp[2..]);
    a.fire(TimerId::Retransmit);
    assert_eq!(a.count(Counter::Retry), 1);
    let retry = a.take_sent();
    assert_eq!(retry.len(), 1, "one READ request asked again");
    let pkt = Packet::parse(&retry[0]).unwrap();
    assert_eq!(pkt.opcode(), Opcode::RC_RDMA_READ_REQUEST);
    assert_eq!(pkt.psn().get(), 0xff_ffff);
    assert_eq!(pkt.reth().unwrap().va(), REMOTE + 256);
    assert_eq!(pkt.reth().unwrap().dma_len(), 256, "the gap only");
    b.deliver(&retry);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    a.deliver(&b.take_sent());
    check_reads(&a, &b, 2);
}

#[test]
fn gap_retry_leaves_what_was_sent_after_the_gap() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let reqs = post_reads(&mut a, &mut b, 3);
    b.deliver(&reqs);
    let resp = b.take_sent();
    assert_eq!(resp.len(), 9);
    // The first READ's second response is lost; the third READ's are still on the way.
    a.deliver(&resp[..1]);
    a.deliver(&resp[2..6]);
    a.fire(TimerId::Retransmit);
    let retry = a.take_sent();
    assert_eq!(
        opcodes(&retry).iter().map(|x| x.1).collect::<Vec<_>>(),
        [0xff_ffff],
        "only the gap is asked for again, not the READs after it"
    );
    a.deliver(&resp[6..]);
    b.deliver(&retry);
    a.deliver(&b.take_sent());
    check_reads(&a, &b, 3);
    assert_eq!(a.count(Counter::Retry), 1);
}

#[test]
fn duplicate_read_goes_before_the_response_in_progress() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let reqs = post_reads(&mut a, &mut b, 2);
    b.deliver(&reqs[..1]);
    let first = b.take_sent();
    // The second READ's response gets buffers for one packet only.
    b.io.budget = Some(1);
    b.deliver(&reqs[1..]);
    let second = b.take_sent();
    assert_eq!(second.len(), 1);
    assert!(b.qp.is_sending_response());
    b.io.budget = None;
    // The first READ's middle response is lost: `a` asks for it again.
    a.deliver(&[first[0].clone(), first[2].clone()]);
    a.deliver(&second);
    a.fire(TimerId::Retransmit);
    let retry = a.take_sent();
    assert_eq!(retry.len(), 1);
    // Answered at once, not behind the rest of the second READ's response.
    b.deliver(&retry);
    let replay = b.take_sent();
    assert_eq!(
        op_psns(&replay),
        [(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0xff_ffff)]
    );
    assert!(
        b.qp.is_sending_response(),
        "the interrupted response is kept"
    );
    b.qp.run(&mut b.mem, &mut b.io);
    assert!(!b.qp.is_sending_response());
    let rest = b.take_sent();
    assert_eq!(
        opcodes(&rest).iter().map(|x| x.1).collect::<Vec<_>>(),
        [2, 3],
        "then the second READ's response goes on"
    );
    a.deliver(&replay);
    a.deliver(&rest);
    check_reads(&a, &b, 2);
}

#[test]
fn read_responses_further_than_the_window_do_not_fill_a_gap() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = (i * 13) as u8;
    }
    // Two READs of 100 responses each: more PSNs outstanding than the 128 the bitmap of
    // early responses holds.
    let len = 100 * 256;
    for id in 0..2u64 {
        a.post(wr(
            id,
            WrOpcode::RdmaRead,
            Remote::Rdma {
                addr: REMOTE + 30_000 * id,
                rkey: RKEY,
            },
            len,
        ));
    }
    b.deliver(&a.take_sent());
    let resp = b.take_sent();
    assert_eq!(resp.len(), 200);
    // The 11th response is lost; the second READ's 39th lands 128 PSNs after it.
    a.deliver(&resp[..10]);
    a.deliver(&resp[11..]);
    assert!(
        a.sends_done().is_empty(),
        "the first READ waits for its lost response"
    );
    // After the reorder window: the first READ from its lost response on; the second
    // READ from its first response beyond the bitmap, once the window of unacknowledged
    // PSNs has room again.
    a.fire(TimerId::Retransmit);
    for expect in [0xff_fffe + 10 - 0x100_0000, 0xff_fffe + 138 - 0x100_0000] {
        let req = a.take_sent();
        assert_eq!(
            opcodes(&req).iter().map(|x| x.1).collect::<Vec<_>>(),
            [expect]
        );
        b.deliver(&req);
        a.deliver(&b.take_sent());
    }
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert!(a.io.timers.is_empty());
    let len = len as usize;
    assert_eq!(a.mem.local[..len], b.mem.remote[..len]);
    assert_eq!(
        a.mem.local[SLOT..SLOT + len],
        b.mem.remote[30_000..30_000 + len]
    );
}

/// Asserts that `pkts` is one NAK of a PSN sequence error at `psn`.
fn assert_sequence_nak(pkts: &[Vec<u8>], psn: u32) {
    assert_eq!(
        opcodes(pkts),
        [(
            Opcode::RC_ACKNOWLEDGE,
            psn,
            Some(Syndrome::Nak(NakCode::PsnSequenceError))
        )]
    );
}

#[test]
fn sequence_error_nak_resends_from_its_psn_not_before() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let reqs = post_reads(&mut a, &mut b, 3);
    // The second request is lost: the first is answered, the third NAKed. The NAK
    // overtakes the first READ's responses.
    b.deliver(&reqs[..1]);
    let responses = b.take_sent();
    assert_eq!(responses.len(), 3);
    b.deliver(&reqs[2..]);
    let nak = b.take_sent();
    assert_sequence_nak(&nak, 0xff_fffe + 3 - 0x100_0000);
    a.deliver(&nak);
    assert_eq!(a.count(Counter::Retry), 1);
    let again = a.take_sent();
    assert_eq!(
        opcodes(&again).iter().map(|x| x.1).collect::<Vec<_>>(),
        [1, 4],
        "the first READ was carried out: only the second and third are asked again"
    );
    a.deliver(&responses);
    b.deliver(&again);
    a.deliver(&b.take_sent());
    check_reads(&a, &b, 3);
}

#[test]
fn sequence_error_nak_past_all_sent_spends_no_retry() {
    // No retry at all: one spent on this NAK fails the READ.
    let (mut a, mut b) = pair(QpType::Rc, 0, 7);
    let reqs = post_reads(&mut a, &mut b, 1);
    b.deliver(&reqs);
    let responses = b.take_sent();
    assert_eq!(responses.len(), 3);
    // A request A never sent (forged, or stale), far ahead of B's PSN: B NAKs it with the
    // PSN it expects, which is past everything A sent. Nothing of A's was lost.
    let mut forged = reqs[0].clone();
    let psn = Packet::parse(&forged).unwrap().psn().add(1 << 22);
    forged[9..12].copy_from_slice(&psn.get().to_be_bytes()[1..]);
    b.deliver(&[forged]);
    let nak = b.take_sent();
    assert_sequence_nak(&nak, 0xff_fffe + 3 - 0x100_0000);
    a.deliver(&nak);
    assert_eq!(a.count(Counter::Retry), 0);
    assert!(a.take_sent().is_empty(), "nothing to ask for again");
    assert!(
        a.sends_done().is_empty(),
        "the READ still waits for its responses"
    );
    a.deliver(&responses);
    check_reads(&a, &b, 1);
}

/// The responses of the READ [`post_read_600`] posts.
const READ_600_RESPONSES: [(Opcode, u32); 3] = [
    (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 0xff_fffe),
    (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 0xff_ffff),
    (Opcode::RC_RDMA_READ_RESPONSE_LAST, 0),
];

/// Fills `b`'s remote memory with a pattern and posts on `a` a READ of 600 bytes of it (three
/// responses at the pair's MTU).
fn post_read_600(a: &mut End, b: &mut End) {
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = i as u8;
    }
    let read = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, read, 600));
}

#[test]
fn read_response_resumes_where_buffers_ran_out() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    post_read_600(&mut a, &mut b);
    let write = Remote::Rdma {
        addr: REMOTE + 700,
        rkey: RKEY,
    };
    a.post(wr(1, WrOpcode::RdmaWrite, write, 4));
    let reqs = a.take_sent();
    assert_eq!(reqs.len(), 2);
    // Room for two of the three responses.
    b.io.budget = Some(2);
    b.deliver(&reqs[..1]);
    let mut resp = b.take_sent();
    assert_eq!(resp.len(), 2);
    assert!(b.qp.is_sending_response());
    // The WRITE behind the READ does not overtake the rest of the response.
    b.deliver(&reqs[1..]);
    assert_eq!(b.count(Counter::DroppedPackets), 1);
    assert!(b.take_sent().is_empty());
    // Buffers again: the response goes on where it stopped, with a LAST.
    b.io.budget = None;
    b.qp.run(&mut b.mem, &mut b.io);
    assert!(!b.qp.is_sending_response());
    resp.extend(b.take_sent());
    assert_eq!(op_psns(&resp), READ_600_RESPONSES);
    a.deliver(&resp);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    // The dropped WRITE comes again with the retry and is carried out.
    a.time_out();
    let retry = a.take_sent();
    b.deliver(&retry);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
}

#[test]
fn duplicate_read_older_than_every_resource_is_read_again() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = i as u8;
    }
    let read = |id: u64| {
        wr(
            id,
            WrOpcode::RdmaRead,
            Remote::Rdma {
                addr: REMOTE + 16 * id,
                rkey: RKEY,
            },
            16,
        )
    };
    // Five READs through a responder that keeps four resources: the first is forgotten.
    let mut first = Vec::new();
    for id in 0..5 {
        a.post(read(id));
        let req = a.take_sent();
        if id == 0 {
            first = req.clone();
        }
        b.deliver(&req);
        a.deliver(&b.take_sent());
    }
    assert_eq!(a.sends_done().len(), 5);
    // Its duplicate is answered all the same, from memory, at its own PSN.
    b.deliver(&first);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    let replay = b.take_sent();
    assert_eq!(
        op_psns(&replay),
        [(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0xff_fffe)]
    );
    let pkt = Packet::parse(&replay[0]).unwrap();
    assert_eq!(pkt.payload().as_slice(), Some(&b.mem.remote[..16]));
    // A duplicate whose R_Key no longer reads is dropped, not answered.
    let mut bad = first.clone();
    bad[0][20..24].copy_from_slice(&(RKEY ^ 0x100).to_be_bytes());
    b.deliver(&bad);
    assert!(b.take_sent().is_empty());
}

#[test]
fn rnr_nak_waits_the_timer_then_retries() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    a.post(wr(0, WrOpcode::Send, Remote::None, 10));
    for round in 0..50 {
        let req = a.take_sent();
        let psn = Packet::parse(&req[0]).unwrap().psn();
        b.deliver(&req);
        let nak = b.take_sent();
        let traced = TraceEvent::RnrNakSent {
            psn,
            timer: RnrTimer::from_bits(4),
        };
        assert_eq!(b.io.traces.pop(), Some(traced), "round {round}");
        assert_eq!(
            opcodes(&nak),
            [(
                Opcode::RC_ACKNOWLEDGE,
                0xff_fffe,
                Some(Syndrome::RnrNak(RnrTimer::from_bits(4)))
            )],
            "round {round}"
        );
        let t0 = a.io.now;
        a.deliver(&nak);
        let traced = TraceEvent::RnrNakReceived {
            psn,
            timer: RnrTimer::from_bits(4),
        };
        assert_eq!(a.io.traces.pop(), Some(traced), "round {round}");
        assert!(a.io.sent.is_empty(), "waits for the RNR timer");
        // RNR timer code 4 is 40 us.
        assert_eq!(a.io.timers[&TimerId::RnrRetry], t0 + 40_000);
        assert!(!a.io.timers.contains_key(&TimerId::Retransmit));
        a.fire(TimerId::RnrRetry);
        let traced = TraceEvent::Retransmit {
            psn,
            cause: RetransmitCause::Rnr,
        };
        assert_eq!(a.io.traces.last(), Some(&traced), "round {round}");
    }
    b.post_recv(0);
    b.deliver(&a.take_sent());
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success)],
        "RNR retry 7 retries forever"
    );
    assert_eq!(b.io.done[0].opcode, WcOpcode::Recv);
}

#[test]
fn rnr_retry_count_runs_out() {
    for rnr_retry in 0..7u8 {
        let (mut a, mut b) = pair(QpType::Rc, 7, rnr_retry);
        a.post(wr(0, WrOpcode::Send, Remote::None, 10));
        a.post(wr(1, WrOpcode::Send, Remote::None, 10));
        loop {
            b.deliver(&a.take_sent());
            a.deliver(&b.take_sent());
            if a.qp.state() == TransportState::Error {
                break;
            }
            a.fire(TimerId::RnrRetry);
        }
        assert_eq!(a.count(Counter::RnrRetry), usize::from(rnr_retry));
        assert_eq!(
            a.sends_done(),
            [(0, WcStatus::RnrRetryExcErr), (1, WcStatus::WrFlushErr)]
        );
    }
}

#[test]
fn timeout_retry_count_is_the_ibta_count() {
    for retry_cnt in 0..=7u8 {
        let (mut a, _) = pair(QpType::Rc, retry_cnt, 7);
        a.post(wr(0, WrOpcode::Send, Remote::None, 10));
        a.post(wr(
            1,
            WrOpcode::RdmaRead,
            Remote::Rdma {
                addr: REMOTE,
                rkey: RKEY,
            },
            10,
        ));
        let mut sends = 0;
        while a.qp.state() != TransportState::Error {
            sends += 1;
            assert_eq!(a.take_sent().len(), 2);
            a.time_out();
        }
        assert_eq!(sends, 1 + usize::from(retry_cnt), "7 means seven retries");
        assert_eq!(
            a.sends_done(),
            [(0, WcStatus::RetryExcErr), (1, WcStatus::WrFlushErr)]
        );
        assert!(a.io.timers.is_empty());
    }
}

#[test]
fn tail_loss_probe_recovers_a_lost_last_packet_before_the_timeout() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let timeout = ack_timeout_nanos();
    a.post(wr(0, WrOpcode::Send, Remote::None, 10));
    a.post(wr(1, WrOpcode::Send, Remote::None, 10));
    let t0 = a.io.now;
    let mut sent = a.take_sent();
    assert_eq!(sent.len(), 2);
    // The second SEND is lost: no later packet tells the responder.
    let sent_second = vec![sent.pop().unwrap()];
    b.post_recv(0);
    b.post_recv(1);
    b.deliver(&sent);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(
        a.io.timers[&TimerId::Retransmit],
        t0 + timeout / TAIL_PROBE_DIVISOR,
        "the probe comes before the timeout"
    );
    a.fire(TimerId::Retransmit);
    assert_eq!(a.count(Counter::TailProbe), 1);
    assert_eq!(a.count(Counter::Retry), 0, "a probe is no retry");
    assert_eq!(
        a.io.traces,
        [TraceEvent::Retransmit {
            psn: Packet::parse(&sent_second[0]).unwrap().psn(),
            cause: RetransmitCause::TailProbe,
        }],
        "a probe is traced as a retransmission of the last packet"
    );
    // What was not acknowledged goes again; the timeout stays where it was.
    assert_eq!(a.io.timers[&TimerId::Retransmit], t0 + timeout);
    let probe = a.take_sent();
    assert_eq!(probe.len(), 1);
    assert_eq!(probe, sent_second);
    b.deliver(&probe);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(b.io.done.len(), 2);
    assert!(a.io.timers.is_empty());
}

#[test]
fn a_needless_probe_costs_one_duplicate_and_reads_are_not_probed() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    for id in 0..4 {
        a.post(wr(id, WrOpcode::Send, Remote::None, 10));
    }
    let sent = a.take_sent();
    assert_eq!(sent.len(), 4);
    // Nothing came back yet (a slow peer): the probe sends the last packet only.
    a.fire(TimerId::Retransmit);
    assert_eq!(a.count(Counter::TailProbe), 1);
    let probe = a.take_sent();
    assert_eq!(probe, sent[3..]);
    for slot in 0..4 {
        b.post_recv(slot);
    }
    b.deliver(&sent);
    b.deliver(&probe);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done().len(), 4);
    assert_eq!(b.io.done.len(), 4);

    // A READ's responses are what would be missing: no probe asks for them again.
    a.post(wr(
        9,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        10,
    ));
    assert_eq!(a.take_sent().len(), 1);
    a.fire(TimerId::Retransmit);
    assert_eq!(a.count(Counter::TailProbe), 1);
    assert!(a.io.sent.is_empty());
    assert_eq!(a.count(Counter::Retry), 0);
}

#[test]
fn a_late_timer_skips_the_probe_and_times_out_on_time() {
    let (mut a, _) = pair(QpType::Rc, 7, 7);
    let timeout = ack_timeout_nanos();
    let t0 = a.io.now;
    a.post(wr(0, WrOpcode::Send, Remote::None, 10));
    a.take_sent();
    // The timer fires past the middle of the probe's time and the timeout.
    a.io.timers.remove(&TimerId::Retransmit);
    a.io.now = t0 + timeout / 16 * 15;
    a.qp.on_timer(TimerId::Retransmit, &mut a.mem, &mut a.io);
    assert_eq!(a.count(Counter::TailProbe), 0);
    assert!(a.io.sent.is_empty());
    assert_eq!(a.io.timers[&TimerId::Retransmit], t0 + timeout);
    a.fire(TimerId::Retransmit);
    assert_eq!(a.count(Counter::Retry), 1);
    assert_eq!(a.take_sent().len(), 1);
}

#[test]
fn tail_loss_probes_leave_the_retry_count_and_its_time_as_they_were() {
    for retry_cnt in 0..=3u8 {
        let (mut a, _) = pair(QpType::Rc, retry_cnt, 7);
        let timeout = ack_timeout_nanos();
        let t0 = a.io.now;
        a.post(wr(0, WrOpcode::Send, Remote::None, 10));
        // A dead link: nothing comes back.
        while a.qp.state() != TransportState::Error {
            a.take_sent();
            a.fire(TimerId::Retransmit);
        }
        assert_eq!(a.count(Counter::Retry), usize::from(retry_cnt));
        assert_eq!(a.count(Counter::TailProbe), usize::from(retry_cnt) + 1);
        assert_eq!(
            a.io.now,
            t0 + (u64::from(retry_cnt) + 1) * timeout,
            "the probes do not move the timeout"
        );
        assert_eq!(a.sends_done(), [(0, WcStatus::RetryExcErr)]);
    }
}

#[test]
fn bad_rkey_naks_with_remote_access_error() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.post_recv(0);
    a.post(wr(
        0,
        WrOpcode::RdmaWrite,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        4,
    ));
    a.post(wr(
        1,
        WrOpcode::RdmaWrite,
        Remote::Rdma {
            addr: REMOTE,
            rkey: 99,
        },
        4,
    ));
    a.post(wr(2, WrOpcode::Send, Remote::None, 4));
    b.deliver(&a.take_sent());
    let resp = b.take_sent();
    assert_eq!(
        opcodes(&resp),
        [
            (
                Opcode::RC_ACKNOWLEDGE,
                0xff_fffe,
                Some(Syndrome::ACK_UNLIMITED)
            ),
            (
                Opcode::RC_ACKNOWLEDGE,
                0xff_ffff,
                Some(Syndrome::Nak(NakCode::RemoteAccessError))
            )
        ]
    );
    assert_eq!(b.io.events, [AsyncEvent::AccessError]);
    assert_eq!(b.qp.state(), TransportState::Error);
    assert_eq!(
        b.io.done[0].status,
        WcStatus::WrFlushErr,
        "receive queue flushed"
    );
    a.deliver(&resp);
    assert_eq!(
        a.sends_done(),
        [
            (0, WcStatus::Success),
            (1, WcStatus::RemAccessErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
}

#[test]
fn uc_drops_the_rest_of_a_message_after_a_loss() {
    let (mut a, mut b) = pair(QpType::Uc, 7, 7);
    b.post_recv(0);
    a.post(wr(0, WrOpcode::Send, Remote::None, 700));
    a.post(wr(1, WrOpcode::Send, Remote::None, 20));
    assert_eq!(a.sends_done().len(), 2, "UC completes when sent");
    let pkts = a.take_sent();
    assert_eq!(pkts.len(), 4);
    b.deliver(&[
        pkts[0].clone(),
        pkts[2].clone(),
        pkts[3].clone(),
        pkts[3].clone(),
    ]);
    let recvs: Vec<_> = b.io.done.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(
        recvs,
        [(100, 20)],
        "the first message dropped, its WQE reused; no duplicate"
    );
    assert!(b.take_sent().is_empty(), "UC sends no responses");
}

#[test]
fn uc_packet_dropped_on_the_way_out_is_sent_again() {
    let (mut a, mut b) = pair(QpType::Uc, 7, 7);
    b.post_recv(0);
    for (i, x) in a.mem.local[..700].iter_mut().enumerate() {
        *x = i as u8;
    }
    a.io.drop_at = Some(1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 700));
    assert!(
        a.sends_done().is_empty(),
        "the message waits at its second packet"
    );
    assert_eq!(a.io.sent.len(), 1);
    // Its next event (the driver's retry): the same packet, then the rest.
    a.qp.run(&mut a.mem, &mut a.io);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    let pkts = a.take_sent();
    assert_eq!(
        op_psns(&pkts),
        [
            (Opcode::UC_SEND_FIRST, 0xff_fffe),
            (Opcode::UC_SEND_MIDDLE, 0xff_ffff),
            (Opcode::UC_SEND_LAST, 0),
        ]
    );
    assert_eq!(
        a.count(Counter::SentPackets),
        3,
        "the dropped one is not counted"
    );
    b.deliver(&pkts);
    let recvs: Vec<_> = b.io.done.iter().map(|c| (c.wr_id, c.byte_len)).collect();
    assert_eq!(recvs, [(100, 700)]);
    // Receive slot 0 is the fifth of the harness's memory.
    assert_eq!(b.mem.local[4 * SLOT..4 * SLOT + 700], a.mem.local[..700]);
}

#[test]
fn read_response_packet_dropped_on_the_way_out_is_sent_again() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    post_read_600(&mut a, &mut b);
    b.io.drop_at = Some(1);
    b.deliver(&a.take_sent());
    assert_eq!(b.io.sent.len(), 1);
    assert!(b.qp.is_sending_response());
    b.qp.run(&mut b.mem, &mut b.io);
    assert!(!b.qp.is_sending_response());
    let resp = b.take_sent();
    assert_eq!(op_psns(&resp), READ_600_RESPONSES);
    a.deliver(&resp);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(a.count(Counter::Retry), 0, "no retry: nothing was lost");
}

#[test]
fn ud_datagram_lands_after_the_grh() {
    let (mut a, mut b) = pair(QpType::Ud, 7, 7);
    b.post_recv(1);
    a.mem.local[..4].copy_from_slice(b"ping");
    let mut w = wr(
        0,
        WrOpcode::SendWithImm,
        Remote::Ud {
            remote_qpn: 2,
            remote_qkey: 7,
            ah_num: 3,
        },
        4,
    );
    w.imm_data = Some(0x1234);
    a.post(w);
    let pkts = a.take_sent();
    let pkt = Packet::parse(&pkts[0]).unwrap();
    assert_eq!(pkt.opcode(), Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!(
        (pkt.deth().unwrap().qkey(), pkt.deth().unwrap().src_qpn()),
        (7, 1)
    );
    // The receiver's network header, as the driver hands it: zeros, then an IPv4 header.
    let mut grh = [0u8; 40];
    grh[20] = 0x45;
    grh[32..40].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    b.mem.local[5 * SLOT..5 * SLOT + 40].fill(0xee);
    b.io.grh = Some(grh);
    b.deliver(&pkts);
    let c = b.io.done[0];
    assert_eq!(
        (c.byte_len, c.src_qpn, c.grh, c.imm_data),
        (44, 1, true, Some(0x1234))
    );
    assert_eq!(
        &b.mem.local[5 * SLOT..5 * SLOT + 40],
        &grh[..],
        "the GRH first"
    );
    assert_eq!(&b.mem.local[5 * SLOT + 40..5 * SLOT + 44], b"ping");
    // A wrong Q_Key is dropped.
    let mut w = wr(
        1,
        WrOpcode::Send,
        Remote::Ud {
            remote_qpn: 2,
            remote_qkey: 8,
            ah_num: 3,
        },
        4,
    );
    w.slot = 0;
    a.post(w);
    b.post_recv(2);
    b.deliver(&a.take_sent());
    assert_eq!(b.io.done.len(), 1);
}

/// Runs every RC operation from `a` to `b`; returns both ends and every packet either sent.
///
fn every_rc_opcode() -> (End, End, Vec<Vec<u8>>) {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let mut log = Vec::new();
    let mut exchange = |a: &mut End, b: &mut End| {
        let p = a.take_sent();
        log.extend(p.iter().cloned());
        b.deliver(&p);
        let p = b.take_sent();
        log.extend(p.iter().cloned());
        a.deliver(&p);
    };
    for s in 0..4 {
        b.post_recv(s);
    }
    let rdma = Remote::Rdma {
        addr: REMOTE + 64,
        rkey: RKEY,
    };
    let mut ops = vec![
        wr(0, WrOpcode::Send, Remote::None, 300),
        wr(1, WrOpcode::SendWithImm, Remote::None, 0),
        wr(2, WrOpcode::SendWithInv, Remote::None, 5),
        wr(3, WrOpcode::RdmaWrite, rdma, 513),
        wr(4, WrOpcode::RdmaWriteWithImm, rdma, 7),
        wr(5, WrOpcode::RdmaRead, rdma, 513),
        wr(
            6,
            WrOpcode::AtomicCmpAndSwp,
            Remote::Atomic {
                addr: REMOTE,
                rkey: RKEY,
                compare_add: 0,
                swap: 9,
            },
            8,
        ),
        fetch_add(7, 1),
    ];
    ops[1].imm_data = Some(11);
    ops[2].invalidate_rkey = Some(55);
    ops[4].imm_data = Some(44);
    let more = [
        wr(8, WrOpcode::AtomicWrite, rdma, 8),
        wr(
            9,
            WrOpcode::Flush,
            Remote::Flush {
                addr: REMOTE,
                length: 64,
                rkey: RKEY,
                placement_type: 1,
                selectivity_level: 0,
            },
            0,
        ),
    ];
    for w in ops {
        a.post(w);
    }
    for _ in 0..10 {
        exchange(&mut a, &mut b);
    }
    for w in more {
        a.post(w);
    }
    for _ in 0..4 {
        exchange(&mut a, &mut b);
    }
    (a, b, log)
}

#[test]
fn every_rc_opcode_round_trips() {
    let (a, b, _) = every_rc_opcode();
    assert_eq!(
        a.sends_done(),
        (0..10).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    let recv: Vec<_> =
        b.io.done
            .iter()
            .map(|c| (c.opcode, c.byte_len, c.imm_data, c.invalidated_rkey))
            .collect();
    assert_eq!(
        recv,
        [
            (WcOpcode::Recv, 300, None, None),
            (WcOpcode::Recv, 0, Some(11), None),
            (WcOpcode::Recv, 5, None, Some(55)),
            (WcOpcode::RecvRdmaWithImm, 7, Some(44), None),
        ]
    );
    assert_eq!(b.mem.invalid, [55]);
    assert_eq!(
        u64::from_ne_bytes(b.mem.remote[..8].try_into().unwrap()),
        10
    );
    assert_eq!(b.mem.atomics, 3);
}

/// A packet is appended to an empty buffer, every byte once (the test's `transmit` checks the
/// length): its pad and ICRC are left zero for the caller, who fills in the ICRC.
#[test]
fn packets_are_appended_whole_with_zero_pad_and_icrc() {
    let (_, _, packets) = every_rc_opcode();
    assert!(packets.len() >= 20, "{} packets", packets.len());
    for p in &packets {
        let pad = usize::from((p[1] >> 4) & 3);
        assert!(p.len() >= 12 + pad + 4, "{p:02x?}");
        assert!(p[p.len() - 4 - pad..].iter().all(|&b| b == 0), "{p:02x?}");
    }
}

#[test]
fn error_flushes_receive_wqes_unless_they_are_the_srqs() {
    for srq in [false, true] {
        let (mut a, _b) = pair_with(QpType::Rc, 7, 7, srq);
        a.post_recv(1);
        a.post_recv(2);
        a.qp.fail(&mut a.io);
        let flushed: Vec<_> =
            a.io.done
                .iter()
                .filter(|c| c.queue == WorkQueue::Recv)
                .map(|c| (c.wr_id, c.status))
                .collect();
        if srq {
            assert!(flushed.is_empty(), "an SRQ's WQEs belong to every QP on it");
            assert_eq!(a.io.recvs.len(), 2);
        } else {
            assert_eq!(
                flushed,
                [(101, WcStatus::WrFlushErr), (102, WcStatus::WrFlushErr)]
            );
        }
    }
}

/// Delivers to `b` an RDMA READ request from `a` whose RETH says `dma_len` bytes; returns
/// `b`'s answer.
fn read_request_of(a: &mut End, b: &mut End, dma_len: u32) -> Vec<Vec<u8>> {
    a.post(wr(
        0,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        4,
    ));
    let mut reqs = a.take_sent();
    assert_eq!(reqs.len(), 1);
    // The RETH follows the 12-byte BTH: VA (8 bytes), R_Key (4), DMA length (4).
    reqs[0][24..28].copy_from_slice(&dma_len.to_be_bytes());
    assert_eq!(
        Packet::parse(&reqs[0]).unwrap().reth().unwrap().dma_len(),
        dma_len
    );
    b.deliver(&reqs);
    b.take_sent()
}

#[test]
fn reth_dma_len_over_2_pow_31_naks_invalid_request() {
    // At a 256-byte MTU a READ of 2^32 - 1 bytes would take 2^24 PSNs: the expected PSN
    // would wrap onto itself. The C driver's check_length refuses it (IBA C9-94).
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let resp = read_request_of(&mut a, &mut b, u32::MAX);
    assert_eq!(
        opcodes(&resp),
        [(
            Opcode::RC_ACKNOWLEDGE,
            0xff_fffe,
            Some(Syndrome::Nak(NakCode::InvalidRequest))
        )]
    );
    assert_eq!(b.io.events, [AsyncEvent::RequestError]);
    assert_eq!(b.qp.state(), TransportState::Error);

    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let resp = read_request_of(&mut a, &mut b, (1 << 31) + 1);
    assert_eq!(
        opcodes(&resp)[0].2,
        Some(Syndrome::Nak(NakCode::InvalidRequest))
    );
}

#[test]
fn reth_dma_len_of_2_pow_31_passes_the_length_check() {
    // 2^31 itself is allowed: the request goes on to the R_Key check, which refuses the
    // range (the remote buffer is smaller).
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let resp = read_request_of(&mut a, &mut b, 1 << 31);
    assert_eq!(
        opcodes(&resp),
        [(
            Opcode::RC_ACKNOWLEDGE,
            0xff_fffe,
            Some(Syndrome::Nak(NakCode::RemoteAccessError))
        )]
    );
}

/// A registration request runs in order on the send queue: it registers when it reaches the
/// send position, completes as REG_MR, and a refused one fails the queue pair.
#[test]
fn registration_runs_in_order_and_completes() {
    let (mut a, _b) = pair(QpType::Rc, 7, 7);
    let reg = Registration {
        mr_key: 0x100,
        key: 0x101,
        access: 6,
        iova: 0x4000,
        length: 8192,
    };
    let mut w = wr(0, WrOpcode::RegMr, Remote::RegMr(reg), 0);
    w.slot = 0;
    a.post(w);
    assert_eq!(a.mem.registered, vec![reg]);
    assert!(a.take_sent().is_empty(), "a local operation sends nothing");
    let c = a.io.done[0];
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (0, WcStatus::Success, WcOpcode::RegMr)
    );
    let bad = Registration { mr_key: 0, ..reg };
    let mut w = wr(1, WrOpcode::RegMr, Remote::RegMr(bad), 0);
    w.slot = 1;
    a.post(w);
    assert_eq!(a.mem.registered.len(), 1);
    assert_eq!(a.sends_done()[1], (1, WcStatus::LocQpOpErr));
}

/// A memory window bind runs in order on the send queue, sends nothing and completes as
/// BIND_MW; a refused one completes with a bind error (not a local QP operation error, as
/// the C driver's `IB_WC_MW_BIND_ERR`) and fails the queue pair.
#[test]
fn window_bind_runs_in_order_and_completes() {
    let (mut a, _b) = pair(QpType::Rc, 7, 7);
    let bind = MwBind {
        addr: 0x4000,
        length: 4096,
        mr_lkey: 0x100,
        mw_rkey: 0x0800_0001,
        rkey: 0x02,
        access: 2,
    };
    let mut w = wr(0, WrOpcode::BindMw, Remote::BindMw(bind), 0);
    w.slot = 0;
    a.post(w);
    assert_eq!(a.mem.bound, vec![bind]);
    assert!(a.take_sent().is_empty(), "a local operation sends nothing");
    let c = a.io.done[0];
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (0, WcStatus::Success, WcOpcode::BindMw)
    );
    let bad = MwBind { mr_lkey: 0, ..bind };
    let mut w = wr(1, WrOpcode::BindMw, Remote::BindMw(bad), 0);
    w.slot = 1;
    a.post(w);
    assert_eq!(a.mem.bound.len(), 1);
    assert_eq!(a.sends_done()[1], (1, WcStatus::MwBindErr));
    assert_eq!(a.qp.state(), TransportState::Error);
}

#[test]
fn timeout_narrows_the_window_and_a_read_is_asked_in_pieces() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    assert_eq!(a.qp.send_window(), MAX_UNACKED_PSNS);
    // A write whose packets are all lost: the local ACK timeout drops the window to the
    // minimum and sends again only what it lets out.
    a.post(wr(
        0,
        WrOpcode::RdmaWrite,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        4 * 256,
    ));
    assert_eq!(a.take_sent().len(), 4);
    a.time_out();
    assert_eq!(a.qp.send_window(), MIN_WINDOW);
    let again = a.take_sent();
    assert_eq!(again.len(), MIN_WINDOW as usize);
    assert!(
        Packet::parse(again.last().unwrap())
            .unwrap()
            .bth()
            .ack_req(),
        "the last packet the window lets out asks for an ACK"
    );
    let mut sent = again;
    while !sent.is_empty() {
        assert!(sent.len() <= a.qp.send_window() as usize);
        b.deliver(&sent);
        a.deliver(&b.take_sent());
        sent = a.take_sent();
    }
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    let widened = a.qp.send_window();
    assert!(widened > MIN_WINDOW, "progress widens the window");
    assert!(widened < MAX_UNACKED_PSNS);

    // In the narrowed window a READ of 600 bytes (three responses) asks for what the
    // window lets out, then for the rest once those responses are in; its data is whole.
    let reqs = post_reads(&mut a, &mut b, 1);
    let first = Packet::parse(&reqs[0]).unwrap();
    assert_eq!(first.opcode(), Opcode::RC_RDMA_READ_REQUEST);
    let asked = first.reth().unwrap().dma_len();
    assert_eq!(
        asked,
        (256 * widened).min(600),
        "as much as the window allows"
    );
    let mut requests = 1;
    b.deliver(&reqs);
    loop {
        let resp = b.take_sent();
        a.deliver(&resp);
        let next = a.take_sent();
        if next.is_empty() {
            break;
        }
        requests += 1;
        b.deliver(&next);
    }
    if widened < 3 {
        assert!(requests > 1, "the READ went out in pieces");
    }
    assert_eq!(a.count(Counter::RetryExceeded), 0);
    let done = a.sends_done();
    assert_eq!(done.last(), Some(&(0, WcStatus::Success)));
    assert_eq!(a.mem.local[..600], b.mem.remote[..600]);
}

#[test]
fn a_read_asked_in_two_requests_completes() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    // Narrow the window to the minimum: an atomic whose request is lost.
    a.post(fetch_add(0, 1));
    // Lost twice: the second timeout leaves no room to grow back at once.
    let _lost = a.take_sent();
    a.time_out();
    let _lost_again = a.take_sent();
    a.time_out();
    assert_eq!(a.qp.send_window(), MIN_WINDOW);
    b.deliver(&a.take_sent());
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    let w = a.qp.send_window();
    assert!(w < 3, "window {w}: too wide for this test");
    // Three responses, a window of two: the first request asks for two, ending in an
    // RDMA READ response LAST that is not the READ's last; the second for the third.
    for (i, x) in b.mem.remote.iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
    a.post(wr(
        1,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE + 1000,
            rkey: RKEY,
        },
        600,
    ));
    let r1 = a.take_sent();
    assert_eq!(r1.len(), 1);
    assert_eq!(
        Packet::parse(&r1[0]).unwrap().reth().unwrap().dma_len(),
        512
    );
    b.deliver(&r1);
    let resp1 = b.take_sent();
    assert_eq!(
        opcodes(&resp1).iter().map(|x| x.0).collect::<Vec<_>>(),
        [
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            Opcode::RC_RDMA_READ_RESPONSE_LAST
        ]
    );
    a.deliver(&resp1);
    let r2 = a.take_sent();
    assert_eq!(r2.len(), 1);
    let p2 = Packet::parse(&r2[0]).unwrap();
    assert_eq!(p2.reth().unwrap().va(), REMOTE + 1000 + 512);
    assert_eq!(p2.reth().unwrap().dma_len(), 600 - 512);
    b.deliver(&r2);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done().last(), Some(&(1, WcStatus::Success)));
    assert_eq!(a.mem.local[SLOT..SLOT + 600], b.mem.remote[1000..1600]);
    assert_eq!(b.count(Counter::DuplicateRequest), 0, "two new requests");
}

#[test]
fn acknowledgement_past_the_send_position_moves_it_up() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    a.post(wr(
        0,
        WrOpcode::RdmaWrite,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        8 * 256,
    ));
    let sent = a.take_sent();
    assert_eq!(sent.len(), 8);
    // The responder gets the first five; its acknowledgement is lost.
    b.deliver(&sent[..5]);
    let _lost = b.take_sent();
    // The timeout goes back with the smallest window: two packets, duplicates to `b`,
    // which acknowledges all five.
    a.time_out();
    let again = a.take_sent();
    assert_eq!(again.len(), MIN_WINDOW as usize);
    b.deliver(&again);
    a.deliver(&b.take_sent());
    // The rest goes out at once from the first PSN `b` lacks, not after another timeout.
    let rest = a.take_sent();
    assert!(
        !rest.is_empty(),
        "the send position caught up with the acknowledgement"
    );
    assert_eq!(
        Packet::parse(&rest[0]).unwrap().psn(),
        Packet::parse(&sent[5]).unwrap().psn()
    );
    b.deliver(&rest);
    let mut out = b.take_sent();
    while !out.is_empty() {
        a.deliver(&out);
        let more = a.take_sent();
        b.deliver(&more);
        out = b.take_sent();
    }
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.count(Counter::Retry), 1);
    assert_eq!(b.mem.remote[..8 * 256], a.mem.local[..8 * 256]);
}

#[test]
fn acknowledgement_of_a_psn_not_yet_sent_is_dropped() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..2 * SLOT], 5);
    let write = |id: u64, off: u32, packets: u32| {
        wr(
            id,
            WrOpcode::RdmaWrite,
            Remote::Rdma {
                addr: REMOTE + u64::from(off),
                rkey: RKEY,
            },
            packets * 256,
        )
    };
    // A WRITE of two packets, both lost: the timeout narrows the window and sends them again.
    a.post(write(0, 0, 2));
    assert_eq!(a.take_sent().len(), 2);
    a.time_out();
    let again = a.take_sent();
    assert_eq!(again.len(), 2);
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    // A WRITE of 16 packets takes 16 PSNs; the narrow window lets only the first few out.
    a.post(write(1, 2 * 256, 16));
    let sent = a.take_sent();
    assert!(!sent.is_empty() && sent.len() < 12, "{} sent", sent.len());
    let first = Packet::parse(&sent[0]).unwrap().psn();
    b.deliver(&sent);
    let ack = b.take_sent();
    assert_eq!(ack.len(), 1);
    // An acknowledgement of the WRITE's PSN 12 (forged, or stale from an earlier
    // connection): that packet was never sent, so it acknowledges nothing. Taken, it moved
    // the requester past packets the responder never got.
    let mut forged = ack[0].clone();
    forged[9..12].copy_from_slice(&first.add(12).get().to_be_bytes()[1..]);
    let dropped = a.count(Counter::DroppedPackets);
    a.deliver(&[forged]);
    assert_eq!(a.count(Counter::DroppedPackets), dropped + 1);
    assert!(a.take_sent().is_empty(), "nothing skipped ahead");
    // The real acknowledgement, then the rest, in turn.
    a.deliver(&ack);
    let mut out = a.take_sent();
    while !out.is_empty() {
        b.deliver(&out);
        a.deliver(&b.take_sent());
        out = a.take_sent();
    }
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(b.mem.remote[..2 * 256], a.mem.local[..2 * 256]);
    assert_eq!(
        b.mem.remote[2 * 256..18 * 256],
        a.mem.local[SLOT..SLOT + 16 * 256]
    );
    assert_eq!(a.count(Counter::Retry), 1);
}

// On-demand paging: a page not present (`AccessError::NotPresent`) stops the transport without
// a trace, and the same request or packet is carried out again once the page is in.

/// The RNR NAK a responder here sends for `psn` (RNR timer code 4).
fn rnr_nak(psn: u32) -> (Opcode, u32, Option<Syndrome>) {
    (
        Opcode::RC_ACKNOWLEDGE,
        psn,
        Some(Syndrome::RnrNak(RnrTimer::from_bits(4))),
    )
}

/// Fills `buf` with a pattern that differs for each `seed`.
fn pattern(buf: &mut [u8], seed: u8) {
    for (i, x) in buf.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
}

/// Hands the RNR NAK `nak` to the requester `a`, lets its RNR timer expire and returns what
/// it sends again.
fn after_rnr_wait(a: &mut End, nak: &[Vec<u8>]) -> Vec<Vec<u8>> {
    a.deliver(nak);
    assert!(a.io.sent.is_empty(), "waits for the RNR timer");
    a.fire(TimerId::RnrRetry);
    a.take_sent()
}

/// Checks that neither end failed: no error completion, no async event, no NAK of an error
/// kind, both ready to send.
fn assert_no_error(a: &End, b: &End) {
    for e in [a, b] {
        assert_eq!(e.qp.state(), TransportState::ReadyToSend);
        assert!(e.io.events.is_empty(), "{:?}", e.io.events);
        assert!(
            e.io.done.iter().all(|c| c.status == WcStatus::Success),
            "{:?}",
            e.io.done
        );
    }
}

/// The receive completions of `e`: work request ID, status, opcode and length.
fn recvs_done(e: &End) -> Vec<(u64, WcStatus, WcOpcode, u32)> {
    e.io.done
        .iter()
        .filter(|c| c.queue == WorkQueue::Recv)
        .map(|c| (c.wr_id, c.status, c.opcode, c.byte_len))
        .collect()
}

#[test]
fn odp_send_not_present_at_its_first_packet_is_rnr_naked_and_lands_once() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 1);
    b.post_recv(0);
    b.post_recv(1);
    b.page_fault(MemOp::Scatter, 0, 1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 600));
    let reqs = a.take_sent();
    assert_eq!(reqs.len(), 3);
    b.deliver(&reqs);
    let nak = b.take_sent();
    assert_eq!(
        opcodes(&nak),
        [rnr_nak(0xff_fffe)],
        "an RNR NAK, and no sequence NAK for the packets behind it"
    );
    assert_eq!(b.qp.expected_psn(), Psn::new(0xff_fffe));
    assert!(b.io.done.is_empty());
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(again, reqs, "the same packets again");
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(
        recvs_done(&b),
        [(100, WcStatus::Success, WcOpcode::Recv, 600)],
        "in the receive WQE the first attempt took"
    );
    assert_eq!(b.io.recvs.len(), 1, "the second receive WQE is untouched");
    assert_eq!(b.mem.local[4 * SLOT..4 * SLOT + 600], a.mem.local[..600]);
    assert_eq!(b.mem.not_present, 1);
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::RnrRetry), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_send_not_present_at_a_middle_packet_resumes_there() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 2);
    b.post_recv(0);
    b.post_recv(1);
    b.page_fault(MemOp::Scatter, 1, 1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 600));
    let reqs = a.take_sent();
    b.deliver(&reqs);
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_ffff)]);
    assert_eq!(b.qp.expected_psn(), Psn::new(0xff_ffff));
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(
        op_psns(&again),
        [
            (Opcode::RC_SEND_MIDDLE, 0xff_ffff),
            (Opcode::RC_SEND_LAST, 0)
        ],
        "from the packet refused on"
    );
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(
        recvs_done(&b),
        [(100, WcStatus::Success, WcOpcode::Recv, 600)]
    );
    assert_eq!(b.io.recvs.len(), 1);
    assert_eq!(b.mem.local[4 * SLOT..4 * SLOT + 600], a.mem.local[..600]);
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::RnrRetry), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_write_refused_by_check_remote_is_rnr_naked_and_lands() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 3);
    b.page_fault(MemOp::CheckRemote, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 64,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaWrite, rdma, 600));
    let reqs = a.take_sent();
    b.deliver(&reqs);
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_fffe)]);
    assert!(
        b.mem.remote[64..664].iter().all(|&x| x == 0),
        "nothing written"
    );
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(again, reqs);
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(b.mem.remote[64..664], a.mem.local[..600]);
    assert!(b.io.done.is_empty());
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_write_not_present_at_a_middle_packet_resumes_there() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 4);
    b.page_fault(MemOp::WriteRemote, 1, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 64,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaWrite, rdma, 600));
    b.deliver(&a.take_sent());
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_ffff)]);
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(
        op_psns(&again),
        [
            (Opcode::RC_RDMA_WRITE_MIDDLE, 0xff_ffff),
            (Opcode::RC_RDMA_WRITE_LAST, 0)
        ]
    );
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(b.mem.remote[64..664], a.mem.local[..600]);
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_write_with_immediate_not_present_at_its_last_packet_keeps_the_receive_wqe() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 5);
    b.post_recv(0);
    b.post_recv(1);
    b.page_fault(MemOp::WriteRemote, 2, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 64,
        rkey: RKEY,
    };
    let mut w = wr(0, WrOpcode::RdmaWriteWithImm, rdma, 600);
    w.imm_data = Some(0x77);
    a.post(w);
    b.deliver(&a.take_sent());
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0)]);
    assert!(b.io.done.is_empty());
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(
        op_psns(&again),
        [(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 0)]
    );
    b.deliver(&again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(
        recvs_done(&b),
        [(100, WcStatus::Success, WcOpcode::RecvRdmaWithImm, 600)]
    );
    assert_eq!(b.io.done[0].imm_data, Some(0x77));
    assert_eq!(b.io.recvs.len(), 1);
    assert_eq!(b.mem.remote[64..664], a.mem.local[..600]);
    assert_no_error(&a, &b);
}

#[test]
fn odp_atomic_write_and_flush_not_present_are_rnr_naked() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.page_fault(MemOp::Atomic, 0, 1);
    b.page_fault(MemOp::Flush, 0, 1);
    a.mem.local[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
    let rdma = Remote::Rdma {
        addr: REMOTE + 64,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::AtomicWrite, rdma, 8));
    b.deliver(&a.take_sent());
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_fffe)]);
    assert_eq!(b.mem.atomics, 0);
    b.deliver(&after_rnr_wait(&mut a, &nak));
    a.deliver(&b.take_sent());
    let flush = Remote::Flush {
        addr: REMOTE,
        length: 64,
        rkey: RKEY,
        placement_type: 1,
        selectivity_level: 0,
    };
    a.post(wr(1, WrOpcode::Flush, flush, 0));
    b.deliver(&a.take_sent());
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_ffff)]);
    b.deliver(&after_rnr_wait(&mut a, &nak));
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(b.mem.atomics, 1);
    assert_eq!(b.mem.remote[64..72], a.mem.local[..8]);
    assert_eq!(b.count(Counter::RnrNakSent), 2);
    assert_eq!(a.count(Counter::RnrNakReceived), 2);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_refused_by_check_remote_is_rnr_naked_and_read_once() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut b.mem.remote, 6);
    b.page_fault(MemOp::CheckRemote, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 600));
    let req = a.take_sent();
    b.deliver(&req);
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_fffe)]);
    let msn = |p: &Vec<u8>| Packet::parse(p).unwrap().aeth().unwrap().msn();
    assert_eq!(msn(&nak[0]), Msn::ZERO);
    assert_eq!(b.qp.expected_psn(), Psn::new(0xff_fffe));
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(again, req, "the same request again");
    b.deliver(&again);
    let resp = b.take_sent();
    assert_eq!(
        op_psns(&resp),
        [
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 0xff_fffe),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 0xff_ffff),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 0),
        ]
    );
    assert_eq!(
        msn(&resp[0]),
        Msn::new(1),
        "the refused READ was no message"
    );
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    a.deliver(&resp);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_response_abandoned_midway_is_replayed_on_the_retry() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut b.mem.remote, 7);
    b.page_fault(MemOp::ReadRemote, 1, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 600));
    b.deliver(&a.take_sent());
    let first = b.take_sent();
    assert_eq!(
        op_psns(&first),
        [(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 0xff_fffe)],
        "the rest abandoned, without a NAK"
    );
    assert!(!b.qp.is_sending_response(), "nothing left to resume");
    b.qp.run(&mut b.mem, &mut b.io);
    assert!(b.take_sent().is_empty());
    assert_eq!(b.qp.expected_psn(), Psn::new(1), "the READ was carried out");
    a.deliver(&first);
    assert!(a.io.sent.is_empty());
    // The rest never comes: the local ACK timeout asks for it again.
    a.time_out();
    let retry = a.take_sent();
    assert_eq!(op_psns(&retry), [(Opcode::RC_RDMA_READ_REQUEST, 0xff_ffff)]);
    b.deliver(&retry);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    let replay = b.take_sent();
    assert_eq!(
        op_psns(&replay),
        [
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 0xff_ffff),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 0),
        ]
    );
    a.deliver(&replay);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(b.mem.not_present, 1);
    assert_eq!(b.count(Counter::RnrNakSent), 0);
    assert_eq!(a.count(Counter::RnrNakReceived), 0);
    assert_eq!(a.count(Counter::SequenceErrorNak), 0);
    assert_eq!(a.count(Counter::Retry), 1);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_response_not_placed_is_dropped_and_asked_again() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut b.mem.remote, 8);
    a.page_fault(MemOp::Scatter, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 600));
    b.deliver(&a.take_sent());
    let resp = b.take_sent();
    assert_eq!(resp.len(), 3);
    a.deliver(&resp);
    assert_eq!(a.mem.not_present, 1);
    assert_eq!(a.count(Counter::DroppedPackets), 1);
    assert!(a.sends_done().is_empty());
    assert_eq!(a.qp.requester.acked_psn(), Psn::new(0xff_fffe));
    assert!(a.io.sent.is_empty());
    // The two after it were placed ahead of the gap; the reorder window ends and only the
    // dropped one is asked for again.
    a.fire(TimerId::Retransmit);
    let retry = a.take_sent();
    assert_eq!(op_psns(&retry), [(Opcode::RC_RDMA_READ_REQUEST, 0xff_fffe)]);
    let reth = *Packet::parse(&retry[0]).unwrap().reth().unwrap();
    assert_eq!((reth.va(), reth.dma_len()), (REMOTE + 8, 256));
    b.deliver(&retry);
    let replay = b.take_sent();
    assert_eq!(
        op_psns(&replay),
        [(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0xff_fffe)]
    );
    a.deliver(&replay);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(a.count(Counter::Retry), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 0);
    assert_eq!(a.count(Counter::SequenceErrorNak), 0);
    assert_eq!(b.count(Counter::RnrNakSent), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_fetch_add_not_present_is_rnr_naked_and_applied_once() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.mem.remote[..8].copy_from_slice(&40u64.to_ne_bytes());
    b.page_fault(MemOp::Atomic, 0, 1);
    a.post(fetch_add(0, 2));
    let req = a.take_sent();
    b.deliver(&req);
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak), [rnr_nak(0xff_fffe)]);
    assert_eq!(b.mem.atomics, 0);
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(again, req);
    b.deliver(&again);
    let ack = b.take_sent();
    assert_eq!(op_psns(&ack), [(Opcode::RC_ATOMIC_ACKNOWLEDGE, 0xff_fffe)]);
    a.deliver(&ack);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(b.mem.atomics, 1, "carried out once");
    assert_eq!(b.mem.remote[..8], 42u64.to_ne_bytes());
    assert_eq!(a.mem.local[..8], 40u64.to_ne_bytes());
    assert_eq!(b.count(Counter::RnrNakSent), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 1);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_atomic_acknowledge_not_placed_is_dropped_and_answered_from_the_resource() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.mem.remote[..8].copy_from_slice(&40u64.to_ne_bytes());
    a.page_fault(MemOp::Scatter, 0, 1);
    a.post(fetch_add(0, 2));
    let req = a.take_sent();
    b.deliver(&req);
    a.deliver(&b.take_sent());
    assert_eq!(a.mem.not_present, 1);
    assert_eq!(a.count(Counter::DroppedPackets), 1);
    assert!(a.sends_done().is_empty());
    assert_eq!(a.qp.requester.acked_psn(), Psn::new(0xff_fffe));
    // No probe for an atomic: the timeout asks again, and the duplicate is answered from
    // the responder resource.
    a.time_out();
    let retry = a.take_sent();
    assert_eq!(retry, req);
    b.deliver(&retry);
    assert_eq!(b.count(Counter::DuplicateRequest), 1);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(b.mem.atomics, 1, "carried out once");
    assert_eq!(b.mem.remote[..8], 42u64.to_ne_bytes());
    assert_eq!(a.mem.local[..8], 40u64.to_ne_bytes());
    assert_eq!(a.count(Counter::Retry), 1);
    assert_eq!(a.count(Counter::RnrNakReceived), 0);
    assert_eq!(b.count(Counter::RnrNakSent), 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_gather_not_present_sends_nothing_until_the_next_run() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut a.mem.local[..600], 9);
    pattern(&mut a.mem.local[SLOT..SLOT + 600], 10);
    b.post_recv(0);
    b.post_recv(1);
    a.page_fault(MemOp::Gather, 0, 1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 600));
    assert!(a.take_sent().is_empty(), "nothing sent");
    assert_eq!(a.count(Counter::SentPackets), 0);
    assert_eq!(a.mem.not_present, 1);
    // The driver faults the page in and runs the QP again.
    a.qp.run(&mut a.mem, &mut a.io);
    let reqs = a.take_sent();
    assert_eq!(
        op_psns(&reqs),
        [
            (Opcode::RC_SEND_FIRST, 0xff_fffe),
            (Opcode::RC_SEND_MIDDLE, 0xff_ffff),
            (Opcode::RC_SEND_LAST, 0),
        ]
    );
    b.deliver(&reqs);
    a.deliver(&b.take_sent());
    // A page that is not present at the second packet of the next SEND.
    a.page_fault(MemOp::Gather, 1, 1);
    a.post(wr(1, WrOpcode::Send, Remote::None, 600));
    let first = a.take_sent();
    assert_eq!(op_psns(&first), [(Opcode::RC_SEND_FIRST, 1)]);
    b.deliver(&first);
    a.qp.run(&mut a.mem, &mut a.io);
    let rest = a.take_sent();
    assert_eq!(
        op_psns(&rest),
        [(Opcode::RC_SEND_MIDDLE, 2), (Opcode::RC_SEND_LAST, 3)]
    );
    b.deliver(&rest);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(
        recvs_done(&b),
        [
            (100, WcStatus::Success, WcOpcode::Recv, 600),
            (101, WcStatus::Success, WcOpcode::Recv, 600)
        ]
    );
    assert_eq!(b.mem.local[4 * SLOT..4 * SLOT + 600], a.mem.local[..600]);
    assert_eq!(
        b.mem.local[5 * SLOT..5 * SLOT + 600],
        a.mem.local[SLOT..SLOT + 600]
    );
    assert_eq!(a.count(Counter::SentPackets), 6);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_eq!(b.count(Counter::OutOfSequence), 0);
    assert_eq!(a.mem.not_present, 2);
    assert_no_error(&a, &b);
}

#[test]
fn odp_ud_scatter_not_present_drops_the_datagram_and_keeps_the_receive_wqe() {
    let (mut a, mut b) = pair(QpType::Ud, 7, 7);
    b.post_recv(1);
    b.post_recv(2);
    b.page_fault(MemOp::Scatter, 0, 1);
    let ud = Remote::Ud {
        remote_qpn: 2,
        remote_qkey: 7,
        ah_num: 3,
    };
    a.mem.local[..4].copy_from_slice(b"ping");
    a.mem.local[SLOT..SLOT + 4].copy_from_slice(b"pong");
    a.post(wr(0, WrOpcode::Send, ud, 4));
    b.deliver(&a.take_sent());
    assert!(b.io.done.is_empty(), "dropped");
    assert_eq!(b.count(Counter::DroppedPackets), 1);
    assert_eq!(b.mem.not_present, 1);
    assert_eq!(b.io.recvs.len(), 1, "one receive WQE taken and kept");
    a.post(wr(1, WrOpcode::Send, ud, 4));
    b.deliver(&a.take_sent());
    assert_eq!(
        recvs_done(&b),
        [(101, WcStatus::Success, WcOpcode::Recv, 44)],
        "the next datagram lands in the kept WQE"
    );
    assert_eq!(&b.mem.local[5 * SLOT + 40..5 * SLOT + 44], b"pong");
    assert_eq!(b.io.recvs.len(), 1, "the next WQE is untouched");
    assert_no_error(&a, &b);
    // A WQE kept for a dropped datagram is flushed once when the QP fails.
    b.page_fault(MemOp::Scatter, 0, 1);
    a.post(wr(2, WrOpcode::Send, ud, 4));
    b.deliver(&a.take_sent());
    assert!(b.io.recvs.is_empty());
    b.qp.fail(&mut b.io);
    b.qp.drain_recv(&mut b.io);
    assert_eq!(
        recvs_done(&b),
        [
            (101, WcStatus::Success, WcOpcode::Recv, 44),
            (102, WcStatus::WrFlushErr, WcOpcode::Recv, 0)
        ]
    );
}

#[test]
fn odp_uc_not_present_drops_the_message_and_keeps_the_receive_wqe() {
    let (mut a, mut b) = pair(QpType::Uc, 7, 7);
    pattern(&mut a.mem.local[..700], 11);
    pattern(&mut a.mem.local[SLOT..SLOT + 20], 12);
    b.post_recv(0);
    b.page_fault(MemOp::Scatter, 1, 1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 700));
    a.post(wr(1, WrOpcode::Send, Remote::None, 20));
    let pkts = a.take_sent();
    assert_eq!(pkts.len(), 4);
    b.deliver(&pkts);
    assert_eq!(
        recvs_done(&b),
        [(100, WcStatus::Success, WcOpcode::Recv, 20)],
        "the first message dropped as if lost, its WQE reused"
    );
    assert_eq!(
        b.mem.local[4 * SLOT..4 * SLOT + 20],
        a.mem.local[SLOT..SLOT + 20]
    );
    assert_eq!(b.count(Counter::DroppedPackets), 2);
    assert!(b.take_sent().is_empty(), "UC sends no responses");
    assert_no_error(&a, &b);
}

// The buffers a READ response or an atomic acknowledge is placed in are checked before the
// request goes out (`MemoryAccess::check_local`): a page not present holds the request back,
// as for a transmit buffer, rather than letting the completer drop the response.

/// Hands `sent` from `a` to `b`, what `b` answers back to `a`, and so on until neither sends.
fn converse(a: &mut End, b: &mut End, mut sent: Vec<Vec<u8>>) {
    while !sent.is_empty() {
        b.deliver(&sent);
        let answers = b.take_sent();
        a.deliver(&answers);
        sent = a.take_sent();
    }
}

#[test]
fn odp_read_buffer_not_present_holds_the_request_back() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    pattern(&mut b.mem.remote, 13);
    a.page_fault(MemOp::CheckLocal, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 600));
    assert!(a.take_sent().is_empty(), "nothing sent");
    assert_eq!(a.count(Counter::SentPackets), 0);
    assert_eq!(a.mem.not_present, 1);
    assert!(
        !a.io.timers.contains_key(&TimerId::Retransmit),
        "no PSN taken, so nothing outstanding to time"
    );
    assert_eq!(a.qp.requester.outstanding(), 1);
    // The driver faults the page in and runs the QP again.
    a.qp.run(&mut a.mem, &mut a.io);
    let req = a.take_sent();
    assert_eq!(
        op_psns(&req),
        [(Opcode::RC_RDMA_READ_REQUEST, 0xff_fffe)],
        "the READ with the PSN it would have had"
    );
    let reth = *Packet::parse(&req[0]).unwrap().reth().unwrap();
    assert_eq!((reth.va(), reth.dma_len()), (REMOTE + 8, 600));
    assert_eq!(
        a.mem.checks,
        [(WqeRef::Send(0), 0, 600); 2],
        "the bytes the request reads, once per run"
    );
    b.deliver(&req);
    let resp = b.take_sent();
    assert_eq!(resp.len(), 3);
    a.deliver(&resp);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(a.io.now, 0, "no timer needed");
    assert!(!a.io.timers.contains_key(&TimerId::Retransmit));
    assert_eq!(a.count(Counter::Retry), 0);
    assert_eq!(a.count(Counter::DroppedPackets), 0);
    assert_eq!(a.count(Counter::SentPackets), 1);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_eq!(a.mem.not_present, 1);
    assert_no_error(&a, &b);
}

#[test]
fn odp_atomic_buffer_not_present_holds_the_request_back() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    b.mem.remote[..8].copy_from_slice(&40u64.to_ne_bytes());
    a.page_fault(MemOp::CheckLocal, 0, 1);
    a.post(fetch_add(0, 2));
    assert!(a.take_sent().is_empty(), "nothing sent");
    assert!(!a.io.timers.contains_key(&TimerId::Retransmit));
    a.qp.run(&mut a.mem, &mut a.io);
    let req = a.take_sent();
    assert_eq!(op_psns(&req), [(Opcode::RC_FETCH_ADD, 0xff_fffe)]);
    b.deliver(&req);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(b.mem.atomics, 1, "carried out once");
    assert_eq!(b.mem.remote[..8], 42u64.to_ne_bytes());
    assert_eq!(a.mem.local[..8], 40u64.to_ne_bytes());
    // A compare and swap after it, its buffer not present either.
    a.page_fault(MemOp::CheckLocal, 0, 1);
    let cas = Remote::Atomic {
        addr: REMOTE,
        rkey: RKEY,
        compare_add: 42,
        swap: 7,
    };
    a.post(wr(1, WrOpcode::AtomicCmpAndSwp, cas, 8));
    assert!(a.take_sent().is_empty(), "nothing sent");
    a.qp.run(&mut a.mem, &mut a.io);
    let req = a.take_sent();
    assert_eq!(op_psns(&req), [(Opcode::RC_COMPARE_SWAP, 0xff_ffff)]);
    b.deliver(&req);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(b.mem.remote[..8], 7u64.to_ne_bytes());
    assert_eq!(a.mem.local[SLOT..SLOT + 8], 42u64.to_ne_bytes());
    assert_eq!(
        a.mem.checks,
        [
            (WqeRef::Send(0), 0, 8),
            (WqeRef::Send(0), 0, 8),
            (WqeRef::Send(1), 0, 8),
            (WqeRef::Send(1), 0, 8)
        ],
        "the eight bytes of the original value"
    );
    assert_eq!(a.io.now, 0, "no timer needed");
    assert_eq!(a.count(Counter::Retry), 0);
    assert_eq!(a.count(Counter::DroppedPackets), 0);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_eq!(a.mem.not_present, 2);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_asked_in_pieces_checks_each_piece() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    // Narrow the window to the minimum, as `a_read_asked_in_two_requests_completes` does.
    a.post(fetch_add(0, 1));
    let _lost = a.take_sent();
    a.time_out();
    let _lost_again = a.take_sent();
    a.time_out();
    b.deliver(&a.take_sent());
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    let w = a.qp.send_window();
    assert!(w < 3, "window {w}: too wide for this test");
    let (retries, dropped, now) = (
        a.count(Counter::Retry),
        a.count(Counter::DroppedPackets),
        a.io.now,
    );
    a.mem.checks.clear();
    pattern(&mut b.mem.remote, 14);
    a.page_fault(MemOp::CheckLocal, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 1000,
        rkey: RKEY,
    };
    a.post(wr(1, WrOpcode::RdmaRead, rdma, 600));
    assert!(a.take_sent().is_empty(), "the first piece waits");
    a.qp.run(&mut a.mem, &mut a.io);
    let r1 = a.take_sent();
    assert_eq!(op_psns(&r1), [(Opcode::RC_RDMA_READ_REQUEST, 0xff_ffff)]);
    let reth = *Packet::parse(&r1[0]).unwrap().reth().unwrap();
    assert_eq!((reth.va(), reth.dma_len()), (REMOTE + 1000, 512));
    assert_eq!(a.mem.checks, [(WqeRef::Send(1), 0, 512); 2]);
    b.deliver(&r1);
    let resp1 = b.take_sent();
    assert_eq!(resp1.len(), 2);
    // The page of the second piece is not present either.
    a.page_fault(MemOp::CheckLocal, 0, 1);
    a.deliver(&resp1);
    assert!(a.take_sent().is_empty(), "the second piece waits");
    a.qp.run(&mut a.mem, &mut a.io);
    let r2 = a.take_sent();
    assert_eq!(op_psns(&r2), [(Opcode::RC_RDMA_READ_REQUEST, 1)]);
    let reth = *Packet::parse(&r2[0]).unwrap().reth().unwrap();
    assert_eq!(
        (reth.va(), reth.dma_len()),
        (REMOTE + 1000 + 512, 600 - 512)
    );
    assert_eq!(
        a.mem.checks[2..],
        [(WqeRef::Send(1), 512, 600 - 512); 2],
        "exactly the bytes of the second piece"
    );
    b.deliver(&r2);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done().last(), Some(&(1, WcStatus::Success)));
    assert_eq!(a.mem.local[SLOT..SLOT + 600], b.mem.remote[1000..1600]);
    assert_eq!(a.count(Counter::Retry), retries, "no retry for the waits");
    assert_eq!(a.count(Counter::DroppedPackets), dropped);
    assert_eq!(a.io.now, now, "no timer needed");
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_eq!(a.mem.not_present, 2);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_without_an_ack_timer_waits_for_its_buffer_instead_of_hanging() {
    // No local ACK timer (timeout 0): a READ response dropped for a page not present would
    // never be asked for again.
    let (mut a, mut b) = pair_timeout(QpType::Rc, 7, 7, false, 0);
    pattern(&mut b.mem.remote, 15);
    a.mem.send_pages_out = true;
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 600));
    let sent = a.take_sent();
    converse(&mut a, &mut b, sent);
    assert!(a.sends_done().is_empty());
    assert!(a.io.timers.is_empty(), "no timer");
    // The driver faults the pages in and runs the QP again.
    a.mem.send_pages_out = false;
    a.qp.run(&mut a.mem, &mut a.io);
    let sent = a.take_sent();
    converse(&mut a, &mut b, sent);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..600], b.mem.remote[8..608]);
    assert_eq!(a.count(Counter::DroppedPackets), 0, "no response dropped");
    assert_eq!(a.count(Counter::Retry), 0);
    assert_eq!(a.mem.not_present, 1);
    assert_eq!(a.io.now, 0);
    assert_no_error(&a, &b);
}

#[test]
fn odp_read_held_by_the_window_is_checked_when_it_goes_out() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    // Narrow the window to the minimum, as `a_read_asked_in_two_requests_completes` does.
    a.post(fetch_add(0, 1));
    let _lost = a.take_sent();
    a.time_out();
    let _lost_again = a.take_sent();
    a.time_out();
    b.deliver(&a.take_sent());
    a.deliver(&b.take_sent());
    let w = a.qp.send_window();
    assert!(w < 3, "window {w}: too wide for this test");
    let retries = a.count(Counter::Retry);
    a.mem.checks.clear();
    // A write fills the window: the READ behind it takes its PSNs but waits.
    let write = Remote::Rdma {
        addr: REMOTE + 4096,
        rkey: RKEY,
    };
    a.post(wr(1, WrOpcode::RdmaWrite, write, 512));
    pattern(&mut b.mem.remote[..1000], 16);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(2, WrOpcode::RdmaRead, rdma, 200));
    let writes = a.take_sent();
    assert_eq!(writes.len(), 2);
    assert!(
        a.mem.checks.is_empty(),
        "not asked while the window is full"
    );
    a.page_fault(MemOp::CheckLocal, 0, 1);
    b.deliver(&writes);
    a.deliver(&b.take_sent());
    assert!(a.take_sent().is_empty(), "the READ waits for its buffer");
    a.qp.run(&mut a.mem, &mut a.io);
    let req = a.take_sent();
    assert_eq!(op_psns(&req), [(Opcode::RC_RDMA_READ_REQUEST, 1)]);
    assert_eq!(a.mem.checks, [(WqeRef::Send(2), 0, 200); 2]);
    b.deliver(&req);
    a.deliver(&b.take_sent());
    assert_eq!(
        a.sends_done(),
        [
            (0, WcStatus::Success),
            (1, WcStatus::Success),
            (2, WcStatus::Success)
        ]
    );
    assert_eq!(a.mem.local[2 * SLOT..2 * SLOT + 200], b.mem.remote[8..208]);
    assert_eq!(a.count(Counter::Retry), retries);
    assert_no_error(&a, &b);
}

#[test]
fn odp_zero_length_read_checks_no_buffer() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    a.page_fault(MemOp::CheckLocal, 0, 1);
    let rdma = Remote::Rdma {
        addr: REMOTE + 8,
        rkey: RKEY,
    };
    a.post(wr(0, WrOpcode::RdmaRead, rdma, 0));
    let req = a.take_sent();
    assert_eq!(op_psns(&req), [(Opcode::RC_RDMA_READ_REQUEST, 0xff_fffe)]);
    assert!(a.mem.checks.is_empty(), "no byte to place");
    b.deliver(&req);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.not_present, 0);
    assert_no_error(&a, &b);
}

/// Delivers `pkts` to `e` as the driver's engine does: an early request of a reliable
/// connection waits in `held` until those before it have come.
fn deliver_holding(e: &mut End, held: &mut Held<Vec<u8>, 8>, pkts: &[Vec<u8>]) {
    for p in pkts {
        let pkt = Packet::parse(p).unwrap();
        if e.qp.is_early_request(&pkt) {
            let now = Instant(e.io.now);
            held.hold(pkt.psn(), e.qp.expected_psn(), p.clone(), now)
                .unwrap();
            continue;
        }
        e.qp.receive(&pkt, &mut e.mem, &mut e.io);
        while let Some(next) = held.take(e.qp.expected_psn()) {
            let pkt = Packet::parse(&next).unwrap();
            e.qp.receive(&pkt, &mut e.mem, &mut e.io);
        }
    }
    e.qp.end_of_batch(&mut e.io);
}

#[test]
fn early_request_is_held_until_its_gap_fills() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let mut held = Held::new();
    b.post_recv(0);
    b.post_recv(1);
    a.post(wr(0, WrOpcode::Send, Remote::None, 10));
    a.post(wr(1, WrOpcode::Send, Remote::None, 10));
    let reqs = a.take_sent();
    // Reordered on the way (two CPUs): the second waits for the first.
    deliver_holding(&mut b, &mut held, &reqs[1..]);
    assert!(b.take_sent().is_empty(), "no NAK for a request held");
    deliver_holding(&mut b, &mut held, &reqs[..1]);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done().len(), 2);
    assert_eq!(b.count(Counter::OutOfSequence), 0);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
}

#[test]
fn requests_after_an_rnr_nak_are_not_held() {
    // A stream meets an empty receive queue: the requests after the one NAKed are sent
    // again after the RNR wait, so they are dropped, not held. Held, they were carried out
    // when the gap filled, and their copies sent again came as duplicates (make bench,
    // ib_send_bw -s 64: a few duplicate requests per RNR NAK).
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let mut held = Held::new();
    b.post_recv(0);
    for i in 0..4 {
        a.post(wr(i, WrOpcode::Send, Remote::None, 10));
    }
    let reqs = a.take_sent();
    assert_eq!(reqs.len(), 4);
    deliver_holding(&mut b, &mut held, &reqs);
    let nak = b.take_sent();
    assert_eq!(opcodes(&nak)[1], rnr_nak(0xff_ffff));
    for i in 1..4 {
        b.post_recv(i);
    }
    let again = after_rnr_wait(&mut a, &nak);
    assert_eq!(
        op_psns(&again).len(),
        3,
        "the NAKed request and those after it"
    );
    deliver_holding(&mut b, &mut held, &again);
    a.deliver(&b.take_sent());
    assert_eq!(a.sends_done().len(), 4);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_eq!(b.count(Counter::OutOfSequence), 2);
    assert_eq!(recvs_done(&b).len(), 4);
    assert_no_error(&a, &b);
}

#[test]
fn a_long_read_is_asked_in_pieces_the_requester_can_take_in() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let len = post_long_read(&mut a, &mut b, MAX_READ_RESPONSES as usize + 100);
    let mut asked = Vec::new();
    let mut sent = a.take_sent();
    while !sent.is_empty() {
        asked.extend(read_requests(&sent));
        b.deliver(&sent);
        let resp = b.take_sent();
        // Every response of a piece is out before the next piece is asked for: the requester
        // never has more than one piece's responses coming.
        assert!(resp.len() <= MAX_READ_RESPONSES as usize);
        a.deliver(&resp);
        sent = a.take_sent();
    }
    assert_eq!(asked, [MAX_READ_RESPONSES, 100]);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.count(Counter::RetryExceeded), 0);
    assert_eq!(a.mem.local[..len], b.mem.remote[..]);
}

/// Posts a READ of `responses` responses of 256 bytes from a pattern in `b`'s memory.
fn post_long_read(a: &mut End, b: &mut End, responses: usize) -> usize {
    let len = responses * 256;
    b.mem.remote = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    a.post(wr(
        0,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE,
            rkey: RKEY,
        },
        len as u32,
    ));
    len
}

/// The responses each READ request in `pkts` asks for.
fn read_requests(pkts: &[Vec<u8>]) -> Vec<u32> {
    read_requests_at(pkts).into_iter().map(|(_, n)| n).collect()
}

/// The first response (from the READ at `REMOTE`) and the responses each READ request in
/// `pkts` asks for.
fn read_requests_at(pkts: &[Vec<u8>]) -> Vec<(u32, u32)> {
    pkts.iter()
        .map(|p| Packet::parse(p).unwrap())
        .filter(|p| p.opcode() == Opcode::RC_RDMA_READ_REQUEST)
        .map(|p| {
            let reth = p.reth().unwrap();
            ((reth.va() - REMOTE) as u32 / 256, reth.dma_len() / 256)
        })
        .collect()
}

/// Delivers `a`'s READ responses from `b` one at a time, handing `b` each request `a` sends
/// as it goes, until neither sends (`lost`: the index of a response not delivered); returns
/// the responses each request asked for, and how many responses had been delivered when it
/// went. Checks that at most `max_requests` requests are outstanding at any time.
fn read_one_by_one(
    a: &mut End,
    b: &mut End,
    lost: Option<usize>,
    max_requests: usize,
) -> Vec<(u32, usize)> {
    let mut asked = Vec::new();
    // The responses still to come for each request outstanding, oldest first.
    let mut outstanding: Vec<u32> = Vec::new();
    let mut coming: Vec<Vec<u8>> = Vec::new();
    let mut delivered = 0usize;
    let mut rounds = 0;
    loop {
        let reqs = a.take_sent();
        for (first, n) in read_requests_at(&reqs) {
            // Within one piece: the C responder drops a duplicate that reaches past the
            // request it holds a resource for.
            assert_eq!(
                first / MAX_READ_RESPONSES,
                (first + n - 1) / MAX_READ_RESPONSES,
                "a request of {n} responses from response {first} crosses the end of a piece"
            );
            asked.push((n, delivered));
            outstanding.push(n);
        }
        assert!(
            outstanding.len() <= max_requests,
            "{} READ requests outstanding: {outstanding:?}",
            outstanding.len()
        );
        b.deliver(&reqs);
        coming.extend(b.take_sent());
        rounds += 1;
        assert!(rounds < 100_000, "the READs complete");
        if coming.is_empty() {
            // Nothing outstanding: no retransmit timer.
            if !a.io.timers.contains_key(&TimerId::Retransmit) {
                return asked;
            }
            a.time_out();
            outstanding.clear();
            continue;
        }
        let resp = coming.remove(0);
        if Some(delivered) != lost {
            a.deliver(&[resp]);
        }
        delivered += 1;
        if let Some(first) = outstanding.first_mut() {
            *first -= 1;
            if *first == 0 {
                outstanding.remove(0);
            }
        }
    }
}

#[test]
fn the_next_piece_of_a_long_read_is_asked_while_the_last_responses_come() {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let m = MAX_READ_RESPONSES;
    let len = post_long_read(&mut a, &mut b, 2 * m as usize + 100);
    let asked = read_one_by_one(&mut a, &mut b, None, 2);
    // The second piece is asked once the first piece's last responses are within the
    // window of what is acknowledged: the responder sends it right after them, not a round
    // trip after them. The last piece waits for every response before it.
    assert_eq!(
        asked,
        [
            (m, 0),
            (m, (m - MAX_UNACKED_PSNS + 1) as usize),
            (100, 2 * m as usize)
        ]
    );
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..len], b.mem.remote[..]);
    assert_eq!(a.count(Counter::Retry), 0);
    assert_eq!(b.count(Counter::DuplicateRequest), 0);
    assert_no_error(&a, &b);
}

#[test]
fn a_read_with_pieces_asked_ahead_keeps_to_max_rd_atomic() {
    // Two READs and `max_rd_atomic` 2: the second READ's request goes once the first READ's
    // last piece is out, which waits for every earlier response, so that no more than two
    // requests are ever outstanding at the responder (whose resources hold two; the C
    // driver's drops a duplicate it holds no resource for).
    let (mut a, mut b) = pair_resources(QpType::Rc, 7, 7, false, ACK_TIMEOUT, 2, 2);
    let m = MAX_READ_RESPONSES as usize;
    let len = post_long_read(&mut a, &mut b, 2 * m + 50);
    b.mem.remote.extend((0..256).map(|i| i as u8));
    a.post(wr(
        1,
        WrOpcode::RdmaRead,
        Remote::Rdma {
            addr: REMOTE + len as u64,
            rkey: RKEY,
        },
        256,
    ));
    let asked = read_one_by_one(&mut a, &mut b, None, 2);
    assert_eq!(asked.len(), 4);
    assert_eq!(
        a.sends_done(),
        [(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(a.mem.local[..len], b.mem.remote[..len]);
    assert_eq!(a.mem.local[SLOT..SLOT + 256], b.mem.remote[len..]);
    assert_no_error(&a, &b);
}

/// A READ of two pieces and 100 responses, whose response `lost` is lost once: it completes,
/// its data whole; returns the requests it went in ([`read_one_by_one`]).
fn long_read_losing(lost: usize) -> Vec<(u32, usize)> {
    let (mut a, mut b) = pair(QpType::Rc, 7, 7);
    let len = post_long_read(&mut a, &mut b, 2 * MAX_READ_RESPONSES as usize + 100);
    let asked = read_one_by_one(&mut a, &mut b, Some(lost), 3);
    assert_eq!(a.sends_done(), [(0, WcStatus::Success)]);
    assert_eq!(a.mem.local[..len], b.mem.remote[..]);
    assert_eq!(a.count(Counter::RetryExceeded), 0);
    assert_no_error(&a, &b);
    asked
}

#[test]
fn a_response_lost_after_the_next_piece_was_asked_is_asked_again() {
    // Lost: a response of the first piece after the second piece was asked for.
    let m = MAX_READ_RESPONSES as usize;
    let asked = long_read_losing(m - 20);
    assert!(
        asked.iter().any(|&(_, at)| at > 0 && at < m),
        "the second piece was asked before the loss: {asked:?}"
    );
}

#[test]
fn a_retry_from_the_end_of_a_piece_asks_for_that_piece_only() {
    // The last response of the first piece is lost: the retry, in a narrowed window, asks
    // for it alone, then the rest in requests that do not cross the end of a piece either
    // ([`read_one_by_one`] checks every request).
    let asked = long_read_losing(MAX_READ_RESPONSES as usize - 1);
    assert!(
        asked.len() > 3,
        "the lost response was asked again: {asked:?}"
    );
}
