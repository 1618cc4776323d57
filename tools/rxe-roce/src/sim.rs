// SPDX-License-Identifier: GPL-2.0

//! Deterministic simulation of the transport: two QPs joined by a faulty link.
//!
//! Each run is fixed by one seed: the QP type, the path MTU, the fault
//! profile of the link (drop, duplicate, corrupt, delay and the reordering
//! that jitter causes, a blackhole period), the retry counts and a random
//! workload of every opcode the QP type allows, posted from both ends. The
//! two endpoints run the real [`QpTransport`] state machines; every packet is built,
//! given an ICRC over IPv4 and UDP headers, and parsed and verified again at
//! the receiver, half of them in pieces as a socket buffer's pages come (the
//! headers and a few bytes linear, the rest cut at random). Time is virtual. After the run [`run`] checks what the
//! transport promises (see [`Scenario`]) and returns a report or the first
//! violation.
//!
//! This module uses `std`; the protocol core does not (`extern crate` in a
//! module other than the crate root does not reach other modules).

extern crate std;

use std::cmp::Reverse;
use std::collections::{
    BTreeMap,
    BinaryHeap,
    VecDeque, //
};
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use zerocopy::byteorder::network_endian::U16;

use crate::roce::icrc::{
    self,
    IpHeader,
    Ipv4Header,
    UdpHeader, //
};
use crate::roce::io::{
    AsyncEvent,
    Clock,
    Completion,
    Counter,
    Destination,
    Instant,
    Output,
    RecvSlot,
    TimerId,
    TxBuffer,
    WcOpcode,
    WcStatus,
    WorkQueue, //
};
use crate::roce::memory::{
    for_each_chunk,
    Access,
    AccessError,
    AtomicOp,
    MemoryAccess,
    WqeRef, //
};
use crate::roce::mtu::IbMtu;
use crate::roce::opcode::{
    QpType,
    MAX_HEADER_LEN, //
};
use crate::roce::packet::{
    Packet,
    Payload, //
};
use crate::roce::psn::Psn;
use crate::roce::qp::{
    QpConfig,
    QpTransport,
    TransportState, //
};
use crate::roce::requester::SendWr;
use crate::roce::responder::{
    Resource,
    GRH_LEN, //
};
use crate::roce::timer::{
    AckTimeout,
    RnrTimer, //
};
use crate::roce::wqe::{
    Remote,
    SendFlags,
    Sge,
    WrOpcode, //
};
use crate::HostCrc32;

/// Send queue depth of the simulated QPs.
pub const SQ_DEPTH: usize = 16;
/// Responder resources of the simulated QPs.
pub const RESOURCES: usize = 16;

/// A small seeded PRNG (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Creates a generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5eed_0f5e_ed0f_u64)
    }

    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Returns a number below `n` (0 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Returns a number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Returns true with probability `ppm` parts per million.
    pub fn chance(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < u64::from(ppm)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Everything a seed decides about one run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The seed.
    pub seed: u64,
    /// The QP type of both ends.
    pub qp_type: QpType,
    /// The path MTU.
    pub mtu: IbMtu,
    /// Work requests each end posts.
    pub ops_per_side: [usize; 2],
    /// Largest message of the workload.
    pub max_len: u32,
    /// Packets dropped, per million.
    pub drop_ppm: u32,
    /// Packets duplicated, per million.
    pub dup_ppm: u32,
    /// Packets with one bit flipped (the ICRC must catch them), per million.
    pub corrupt_ppm: u32,
    /// Fixed one-way delay, ns.
    pub base_delay_ns: u64,
    /// Random extra delay up to this, ns; packets overtake each other.
    pub jitter_ns: u64,
    /// A period (start, end), in ns, when the link drops everything.
    pub blackhole: Option<(u64, u64)>,
    /// Transport retry count.
    pub retry_cnt: u8,
    /// RNR retry count (7: forever).
    pub rnr_retry: u8,
    /// RNR timer code the responders ask for.
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent.
    pub ack_timeout: u8,
    /// Initiator depth.
    pub max_rd_atomic: u8,
    /// When the receive WQEs are posted, ns (late posting causes RNR NAKs).
    pub recv_delay_ns: u64,
    /// Signal every send WQE (otherwise some are unsignaled).
    pub sig_all: bool,
    /// Requests for a transmit buffer refused, per million (a full qdisc).
    pub tx_full_ppm: u32,
    /// Memory accesses answered with a page not present, per million (on-demand paging);
    /// zero from [`Scenario::from_seed`], set by hand.
    pub odp_ppm: u32,
}

impl Scenario {
    /// Derives a scenario from `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let mut r = Rng::new(seed);
        let qp_type = match r.below(100) {
            0..=69 => QpType::Rc,
            70..=84 => QpType::Uc,
            _ => QpType::Ud,
        };
        let mtu = match r.below(5) {
            0 => IbMtu::Mtu256,
            1 => IbMtu::Mtu512,
            2 => IbMtu::Mtu1024,
            3 => IbMtu::Mtu2048,
            _ => IbMtu::Mtu4096,
        };
        let (drop_ppm, dup_ppm, corrupt_ppm, jitter_ns) = match r.below(10) {
            0..=1 => (0, 0, 0, 0),
            2..=3 => (0, 0, 0, r.range(0, 20_000)),
            4..=6 => (10_000, 10_000, 2_000, r.range(0, 10_000)),
            _ => (
                r.range(30_000, 100_000) as u32,
                30_000,
                5_000,
                r.range(0, 50_000),
            ),
        };
        let rc = qp_type == QpType::Rc;
        let blackhole = if rc && r.chance(80_000) {
            let start = r.range(0, 2_000_000);
            Some((start, start + r.range(500_000, 40_000_000)))
        } else {
            None
        };
        let late_recv = rc && r.chance(150_000);
        let ops = r.range(1, 24) as usize;
        let ops2 = if r.chance(600_000) {
            r.range(0, 24) as usize
        } else {
            0
        };
        Scenario {
            seed,
            qp_type,
            mtu,
            ops_per_side: [ops, ops2],
            max_len: match r.below(4) {
                0 => 64,
                1 | 2 => 4096,
                _ => 8192,
            },
            drop_ppm,
            dup_ppm,
            corrupt_ppm,
            base_delay_ns: r.range(1_000, 5_000),
            jitter_ns,
            blackhole,
            retry_cnt: if r.chance(800_000) {
                7
            } else {
                r.range(1, 6) as u8
            },
            rnr_retry: if late_recv && r.chance(500_000) {
                r.range(0, 6) as u8
            } else {
                7
            },
            min_rnr_timer: r.range(1, 14) as u8,
            ack_timeout: r.range(6, 10) as u8,
            max_rd_atomic: r.range(1, 8) as u8,
            recv_delay_ns: if late_recv {
                r.range(10_000, 5_000_000)
            } else {
                0
            },
            sig_all: r.chance(500_000),
            tx_full_ppm: if r.chance(300_000) { 20_000 } else { 0 },
            odp_ppm: 0,
        }
    }

    /// Returns true if the run must end without an error completion.
    ///
    /// Errors are allowed when the link can defeat the retry budget: a
    /// blackhole, heavy loss, any loss (refused transmit buffers and pages not
    /// present included) or reordering with a transport retry count below 7,
    /// or late receive WQEs or pages not present (RNR NAKs) with a finite RNR
    /// retry count.
    pub fn must_succeed(&self) -> bool {
        let link_ok = (self.drop_ppm.saturating_add(self.odp_ppm) <= 20_000 && self.retry_cnt == 7)
            || (self.drop_ppm == 0
                && self.jitter_ns == 0
                && self.tx_full_ppm == 0
                && self.odp_ppm == 0);
        self.qp_type != QpType::Rc
            || (self.blackhole.is_none()
                && link_ok
                && ((self.recv_delay_ns == 0 && self.odp_ppm == 0) || self.rnr_retry == 7))
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Packets put on the link.
    pub packets: u64,
    /// Packets the link dropped.
    pub dropped: u64,
    /// Packets the link duplicated.
    pub duplicated: u64,
    /// Packets the link corrupted (all caught by the ICRC).
    pub corrupted: u64,
    /// Transmit buffers refused (the QP resumed when told there was room).
    pub tx_full: u64,
    /// Memory accesses answered with a page not present (the QP ran again after the fault).
    pub page_faults: u64,
    /// Transport retries.
    pub retries: u64,
    /// RNR retries.
    pub rnr_retries: u64,
    /// Transport retry budgets that ran out.
    pub retry_exceeded: u64,
    /// RNR retry budgets that ran out.
    pub rnr_retry_exceeded: u64,
    /// Duplicate requests the responders saw.
    pub duplicate_requests: u64,
    /// Requests the responders saw ahead of the expected PSN.
    pub out_of_sequence: u64,
    /// Send WQEs posted.
    pub wqes: u64,
    /// Completions reported.
    pub completions: u64,
    /// The run ended with the QPs in the error state.
    pub error: bool,
    /// Virtual time at the end, ns.
    pub end_ns: u64,
    /// Work request opcodes posted, by `WrOpcode` value.
    pub opcodes: BTreeMap<u32, u64>,
}

impl Report {
    /// Adds the counts of another run to these totals.
    pub fn add(&mut self, r: &Report) {
        self.packets += r.packets;
        self.dropped += r.dropped;
        self.duplicated += r.duplicated;
        self.corrupted += r.corrupted;
        self.tx_full += r.tx_full;
        self.page_faults += r.page_faults;
        self.retries += r.retries;
        self.rnr_retries += r.rnr_retries;
        self.retry_exceeded += r.retry_exceeded;
        self.rnr_retry_exceeded += r.rnr_retry_exceeded;
        self.duplicate_requests += r.duplicate_requests;
        self.out_of_sequence += r.out_of_sequence;
        self.wqes += r.wqes;
        self.completions += r.completions;
        self.error |= r.error;
        for (op, n) in &r.opcodes {
            *self.opcodes.entry(*op).or_default() += n;
        }
    }
}

// Memory layout of each endpoint.
const LOCAL_LEN: usize = 24 * 8192 + 24 * 8 + 4096;
const RECV_BUF: usize = 8192 + 64;
const RECV_SLOTS: usize = 64;
const RECV_OFF: usize = LOCAL_LEN;
const WINDOW_OFF: usize = RECV_OFF + RECV_BUF * RECV_SLOTS;
const WINDOW_LEN: usize = 64 * 1024;
const ATOMIC_OFF: usize = WINDOW_OFF + WINDOW_LEN;
const ATOMIC_WORDS: usize = 8;
const MEM_LEN: usize = ATOMIC_OFF + ATOMIC_WORDS * 8;
const LKEY: u32 = 0x100;
const RKEY: u32 = 0x200;
const INV_KEY_BASE: u32 = 0x1000;

#[derive(Clone, Copy, Debug)]
struct Mr {
    start: usize,
    len: usize,
    access: Access,
    valid: bool,
}

#[derive(Clone, Debug)]
enum LocalData {
    Sges(Vec<Sge>),
    Inline(Vec<u8>),
}

/// The memory of one endpoint, reached by keys.
struct SimMem {
    bytes: Vec<u8>,
    base: u64,
    keys: BTreeMap<u32, Mr>,
    send: BTreeMap<u32, LocalData>,
    recv: BTreeMap<u32, Vec<Sge>>,
    atomics: u64,
    flushes: u64,
    /// Accesses answered with a page not present, per million.
    odp_ppm: u32,
    odp_rng: Rng,
    /// A page was not present: the driver faults it in and runs the QP again.
    faulted: bool,
    /// Accesses answered with a page not present.
    page_faults: u64,
}

impl SimMem {
    /// Copies `src` to offset `offset` of the local buffers of `wqe`, without a page fault.
    fn place(&mut self, wqe: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError> {
        let LocalData::Sges(sges) = self.sges(wqe)? else {
            return Err(AccessError::AccessDenied);
        };
        for_each_chunk(&sges, offset, src.len(), |sge, addr, r| {
            let off = self.range(sge.lkey(), addr, r.len(), Access::LOCAL_WRITE)?;
            self.bytes[off..off + r.len()].copy_from_slice(&src[r]);
            Ok(())
        })
    }

    /// Answers a page not present, `odp_ppm` per million of the accesses that pass their checks.
    fn page(&mut self) -> Result<(), AccessError> {
        if self.odp_ppm > 0 && self.odp_rng.chance(self.odp_ppm) {
            self.faulted = true;
            self.page_faults += 1;
            return Err(AccessError::NotPresent);
        }
        Ok(())
    }

    fn range(&self, key: u32, va: u64, len: usize, need: Access) -> Result<usize, AccessError> {
        let mr = self.keys.get(&key).ok_or(AccessError::InvalidKey)?;
        if !mr.valid {
            return Err(AccessError::InvalidKey);
        }
        if !mr.access.contains(need) {
            return Err(AccessError::AccessDenied);
        }
        let off = va
            .checked_sub(self.base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(AccessError::OutOfRange)?;
        if off < mr.start
            || off.checked_add(len).ok_or(AccessError::OutOfRange)? > mr.start + mr.len
        {
            return Err(AccessError::OutOfRange);
        }
        Ok(off)
    }

    fn sges(&self, wqe: WqeRef) -> Result<LocalData, AccessError> {
        match wqe {
            WqeRef::Send(slot) => self.send.get(&slot).cloned().ok_or(AccessError::InvalidKey),
            WqeRef::Recv(slot) => self
                .recv
                .get(&slot)
                .cloned()
                .map(LocalData::Sges)
                .ok_or(AccessError::InvalidKey),
        }
    }

    fn word(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.bytes[off..off + 8].try_into().unwrap())
    }
}

/// The host's packet buffer: a vector, appended to.
impl TxBuffer for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl MemoryAccess for SimMem {
    type Buffer = Vec<u8>;

    fn gather(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        match self.sges(wqe)? {
            LocalData::Inline(data) => {
                let start = offset as usize;
                let src = data.get(start..start + len).ok_or(AccessError::TooShort)?;
                dst.put(src);
                Ok(())
            }
            LocalData::Sges(sges) => {
                for_each_chunk(&sges, offset, len, |sge, addr, r| {
                    let off = self.range(sge.lkey(), addr, r.len(), Access::NONE)?;
                    dst.put(&self.bytes[off..off + r.len()]);
                    Ok(())
                })?;
                self.page()
            }
        }
    }

    fn scatter(&mut self, wqe: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError> {
        self.place(wqe, offset, src)?;
        // After the copy: what a page fault leaves half written is written again.
        self.page()
    }

    fn scatter_payload(
        &mut self,
        wqe: WqeRef,
        offset: u32,
        payload: Payload<'_>,
    ) -> Result<(), AccessError> {
        // One access, as for a payload in one piece: the pieces, then the fault.
        payload.for_each_piece(AccessError::NotPresent, |at, piece| {
            self.place(wqe, offset + at as u32, piece)
        })?;
        self.page()
    }

    fn check_local(&mut self, wqe: WqeRef, offset: u32, len: u32) -> Result<(), AccessError> {
        let LocalData::Sges(sges) = self.sges(wqe)? else {
            return Err(AccessError::AccessDenied);
        };
        for_each_chunk(&sges, offset, len as usize, |sge, addr, r| {
            self.range(sge.lkey(), addr, r.len(), Access::LOCAL_WRITE)
                .map(|_| ())
        })?;
        self.page()
    }

    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        access: Access,
    ) -> Result<(), AccessError> {
        self.range(rkey, va, len as usize, access)?;
        self.page()
    }

    fn read_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        let off = self.range(rkey, va, len, Access::REMOTE_READ)?;
        self.page()?;
        dst.put(&self.bytes[off..off + len]);
        Ok(())
    }

    fn write_remote(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), AccessError> {
        let off = self.range(rkey, va, src.len(), Access::REMOTE_WRITE)?;
        self.bytes[off..off + src.len()].copy_from_slice(src);
        self.page()
    }

    fn write_remote_payload(
        &mut self,
        rkey: u32,
        va: u64,
        payload: Payload<'_>,
    ) -> Result<(), AccessError> {
        let off = self.range(rkey, va, payload.len(), Access::REMOTE_WRITE)?;
        payload.for_each_piece(AccessError::NotPresent, |at, piece| {
            self.bytes[off + at..off + at + piece.len()].copy_from_slice(piece);
            Ok(())
        })?;
        self.page()
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        if va & 7 != 0 {
            return Err(AccessError::Misaligned);
        }
        let off = self.range(rkey, va, 8, op.access())?;
        // Before the operation: an atomic refused is not carried out.
        self.page()?;
        let orig = self.word(off);
        let new = op.apply(orig);
        self.bytes[off..off + 8].copy_from_slice(&new.to_ne_bytes());
        self.atomics += 1;
        Ok(orig)
    }

    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        placement_type: u8,
    ) -> Result<(), AccessError> {
        let need = Access::for_flush(placement_type);
        self.range(rkey, va, len as usize, need)?;
        self.page()?;
        self.flushes += 1;
        Ok(())
    }

    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        let mr = self.keys.get_mut(&rkey).ok_or(AccessError::InvalidKey)?;
        if !mr.valid {
            return Err(AccessError::InvalidKey);
        }
        mr.valid = false;
        Ok(())
    }
}

/// The I/O of one endpoint: clock, timers, outgoing packets, completions.
struct SimIo {
    now: u64,
    tx: Vec<u8>,
    outbox: Vec<Vec<u8>>,
    completions: Vec<Completion>,
    events: Vec<AsyncEvent>,
    recv_queue: VecDeque<RecvSlot>,
    timers: BTreeMap<TimerId, u64>,
    new_timers: Vec<(TimerId, u64)>,
    counters: BTreeMap<Counter, u64>,
    retry_cnt: u8,
    rnr_retry: u8,
    retries_since_progress: u8,
    rnr_since_progress: u8,
    violation: Option<String>,
    tx_rng: Rng,
    tx_full_ppm: u32,
    /// A transmit buffer was refused: call `QpTransport::run` when there is room.
    tx_blocked: bool,
}

impl Clock for SimIo {
    fn now(&self) -> Instant {
        Instant(self.now)
    }

    fn arm(&mut self, timer: TimerId, deadline: Instant) {
        self.timers.insert(timer, deadline.0);
        self.new_timers.push((timer, deadline.0));
    }

    fn cancel(&mut self, timer: TimerId) {
        self.timers.remove(&timer);
    }
}

impl Output for SimIo {
    type Buffer = Vec<u8>;

    fn tx_buffer(&mut self, len: usize, _dest: Destination) -> Option<&mut Vec<u8>> {
        if self.tx_rng.chance(self.tx_full_ppm) {
            self.tx_blocked = true;
            return None;
        }
        self.tx.clear();
        self.tx.reserve(len);
        Some(&mut self.tx)
    }

    fn transmit(&mut self, len: usize, _dest: Destination) -> bool {
        assert_eq!(
            self.tx.len(),
            len,
            "the packet appended is as long as announced"
        );
        self.outbox.push(self.tx.clone());
        true
    }

    fn complete(&mut self, completion: Completion) {
        if std::env::var_os("SIM_TRACE").is_some() {
            std::println!("{:>10} complete {completion:?}", self.now);
        }
        self.completions.push(completion);
    }

    fn async_event(&mut self, event: AsyncEvent) {
        self.events.push(event);
    }

    fn take_recv(&mut self) -> Option<RecvSlot> {
        self.recv_queue.pop_front()
    }

    fn count(&mut self, counter: Counter) {
        if std::env::var_os("SIM_TRACE").is_some()
            && !matches!(counter, Counter::SentPackets | Counter::ReceivedPackets)
        {
            std::println!("{:>10} count {counter:?}", self.now);
        }
        *self.counters.entry(counter).or_default() += 1;
        let mut bad = None;
        match counter {
            Counter::Progress => {
                self.retries_since_progress = 0;
                self.rnr_since_progress = 0;
            }
            Counter::Retry => {
                self.retries_since_progress += 1;
                if self.retries_since_progress > self.retry_cnt {
                    bad = Some(format!(
                        "{} transport retries without progress, retry_cnt {}",
                        self.retries_since_progress, self.retry_cnt
                    ));
                }
            }
            Counter::RetryExceeded if self.retries_since_progress != self.retry_cnt => {
                bad = Some(format!(
                    "retry exceeded after {} retries, retry_cnt {}",
                    self.retries_since_progress, self.retry_cnt
                ));
            }
            Counter::RnrRetry => {
                self.retries_since_progress = 0;
                self.rnr_since_progress = self.rnr_since_progress.saturating_add(1);
                if self.rnr_retry < 7 && self.rnr_since_progress > self.rnr_retry {
                    bad = Some(format!(
                        "{} RNR retries without progress, rnr_retry {}",
                        self.rnr_since_progress, self.rnr_retry
                    ));
                }
            }
            Counter::RnrRetryExceeded
                if self.rnr_retry == 7 || self.rnr_since_progress != self.rnr_retry =>
            {
                bad = Some(format!(
                    "RNR retry exceeded after {} retries, rnr_retry {}",
                    self.rnr_since_progress, self.rnr_retry
                ));
            }
            _ => {}
        }
        if self.violation.is_none() {
            self.violation = bad;
        }
    }
}

/// One work request of the workload, and what it must produce.
#[derive(Clone, Debug)]
struct Op {
    wr: SendWr,
    /// Offset in local memory of the local buffer (data or result).
    local_off: usize,
    /// Data sent or written (SEND, WRITE, ATOMIC WRITE).
    data: Vec<u8>,
    /// What a READ must bring back, or the original value of an atomic.
    expect_local: Option<Vec<u8>>,
    signaled: bool,
    /// For UC writes: the remote region, to check prefix semantics.
    remote_off: usize,
}

struct Endpoint {
    qp: QpTransport<SQ_DEPTH, [Option<Resource>; RESOURCES]>,
    mem: SimMem,
    io: SimIo,
    qpn: u32,
    ops: Vec<Op>,
    next_op: usize,
    /// Receive WQEs not yet posted (posted at `recv_delay_ns`).
    pending_recvs: Vec<RecvSlot>,
    recv_posted: usize,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Deliver {
        to: usize,
        bytes: Vec<u8>,
    },
    Timer {
        ep: usize,
        timer: TimerId,
        deadline: u64,
    },
    Wakeup,
    /// The transmit queue of `ep` has room again.
    TxReady {
        ep: usize,
    },
}

/// What the peer's responder must see, in order, for RC and UC messages.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ExpectedRecv {
    op: usize,
    data: Vec<u8>,
    opcode: WcOpcode,
    imm: Option<u32>,
    inv: Option<u32>,
}

/// Builds the workload of the endpoint `me` and applies it to the model of
/// the peer's memory; returns the ops and the receives they imply.
#[expect(clippy::too_many_arguments, reason = "the two endpoints' state, split")]
fn workload(
    sc: &Scenario,
    r: &mut Rng,
    me: usize,
    count: usize,
    local: &mut [u8],
    peer_base: u64,
    peer_model: &mut [u8],
    peer_inv_keys: &mut Vec<u32>,
) -> (Vec<Op>, Vec<ExpectedRecv>) {
    let mtu = sc.mtu.bytes();
    let mut ops = Vec::new();
    let mut recvs = Vec::new();
    let mut local_next = 0usize;
    let mut uc_remote_next = 0usize;
    let mut reads: Vec<(usize, usize)> = Vec::new();
    let rc = sc.qp_type == QpType::Rc;
    for i in 0..count {
        let opcode = match sc.qp_type {
            QpType::Ud | QpType::Gsi => {
                if r.chance(500_000) {
                    WrOpcode::Send
                } else {
                    WrOpcode::SendWithImm
                }
            }
            QpType::Uc => match r.below(4) {
                0 => WrOpcode::Send,
                1 => WrOpcode::SendWithImm,
                2 => WrOpcode::RdmaWrite,
                _ => WrOpcode::RdmaWriteWithImm,
            },
            QpType::Rc => match r.below(10) {
                0 => WrOpcode::Send,
                1 => WrOpcode::SendWithImm,
                2 => WrOpcode::SendWithInv,
                3 => WrOpcode::RdmaWrite,
                4 => WrOpcode::RdmaWriteWithImm,
                5 => WrOpcode::RdmaRead,
                6 => WrOpcode::AtomicCmpAndSwp,
                7 => WrOpcode::AtomicFetchAndAdd,
                8 => WrOpcode::AtomicWrite,
                _ => WrOpcode::Flush,
            },
        };
        let max_len = match sc.qp_type {
            QpType::Ud | QpType::Gsi => mtu.min(sc.max_len),
            QpType::Uc => sc.max_len.min(2048),
            QpType::Rc => sc.max_len,
        };
        let mut len = match r.below(8) {
            0 => 0,
            1 => r.range(1, 16) as u32,
            2 => mtu,
            3 => (mtu * r.range(1, 3) as u32).min(max_len),
            _ => r.range(0, u64::from(max_len)) as u32,
        }
        .min(max_len);
        let atomic = matches!(
            opcode,
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd | WrOpcode::AtomicWrite
        );
        if atomic {
            len = 8;
        }
        let local_off = local_next;
        local_next += (len as usize).max(8).next_multiple_of(8);
        let mut data = vec![0u8; len as usize];
        r.fill(&mut data);
        if opcode != WrOpcode::RdmaRead
            && !matches!(
                opcode,
                WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
            )
        {
            local[local_off..local_off + len as usize].copy_from_slice(&data);
        } else {
            data.clear();
        }
        // The remote range: overlapping on RC, private on UC.
        let remote_off = if rc {
            if atomic {
                WINDOW_LEN + 8 * r.below(ATOMIC_WORDS as u64) as usize
            } else {
                r.below((WINDOW_LEN - len as usize) as u64 + 1) as usize
            }
        } else if matches!(opcode, WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm) {
            let off = uc_remote_next;
            uc_remote_next += len as usize;
            off
        } else {
            0
        };
        let remote_va = peer_base + (WINDOW_OFF + remote_off) as u64;
        let mut expect_local = None;
        let imm = r.next_u64() as u32;
        let mut imm_data = None;
        let mut invalidate_rkey = None;
        let model = &mut peer_model[remote_off..];
        let remote = match opcode {
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => {
                if opcode == WrOpcode::SendWithImm {
                    imm_data = Some(imm);
                }
                if opcode == WrOpcode::SendWithInv {
                    let key = INV_KEY_BASE + peer_inv_keys.len() as u32;
                    peer_inv_keys.push(key);
                    invalidate_rkey = Some(key);
                }
                recvs.push(ExpectedRecv {
                    op: i,
                    data: data.clone(),
                    opcode: WcOpcode::Recv,
                    imm: imm_data,
                    inv: invalidate_rkey,
                });
                if matches!(sc.qp_type, QpType::Ud) {
                    Remote::Ud {
                        remote_qpn: 0,
                        remote_qkey: 0x1234,
                        ah_num: 1,
                    }
                } else {
                    Remote::None
                }
            }
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => {
                model[..len as usize].copy_from_slice(&data);
                if opcode == WrOpcode::RdmaWriteWithImm {
                    imm_data = Some(imm);
                    recvs.push(ExpectedRecv {
                        op: i,
                        data: Vec::new(),
                        opcode: WcOpcode::RecvRdmaWithImm,
                        imm: imm_data,
                        inv: None,
                    });
                }
                Remote::Rdma {
                    addr: remote_va,
                    rkey: RKEY,
                }
            }
            WrOpcode::RdmaRead => {
                expect_local = Some(model[..len as usize].to_vec());
                Remote::Rdma {
                    addr: remote_va,
                    rkey: RKEY,
                }
            }
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => {
                let orig = u64::from_ne_bytes(model[..8].try_into().unwrap());
                expect_local = Some(orig.to_ne_bytes().to_vec());
                let (compare_add, swap) = if opcode == WrOpcode::AtomicCmpAndSwp {
                    let compare = if r.chance(600_000) {
                        orig
                    } else {
                        r.next_u64()
                    };
                    let swap = r.next_u64();
                    if compare == orig {
                        model[..8].copy_from_slice(&swap.to_ne_bytes());
                    }
                    (compare, swap)
                } else {
                    let add = r.next_u64() >> r.below(64);
                    model[..8].copy_from_slice(&orig.wrapping_add(add).to_ne_bytes());
                    (add, 0)
                };
                Remote::Atomic {
                    addr: remote_va,
                    rkey: RKEY,
                    compare_add,
                    swap,
                }
            }
            WrOpcode::AtomicWrite => {
                model[..8].copy_from_slice(&data);
                Remote::Rdma {
                    addr: remote_va,
                    rkey: RKEY,
                }
            }
            WrOpcode::Flush => Remote::Flush {
                addr: remote_va,
                length: len,
                rkey: RKEY,
                placement_type: r.range(1, 2) as u8,
                selectivity_level: 0,
            },
            WrOpcode::LocalInv | WrOpcode::BindMw | WrOpcode::RegMr => unreachable!(),
        };
        let signaled = sc.sig_all || r.chance(700_000);
        let mut flags = 0;
        if signaled {
            flags |= SendFlags::SIGNALED;
        }
        if r.chance(100_000) {
            flags |= SendFlags::FENCE;
        }
        // A duplicate READ reads memory again (IBTA 9.5): a later write to
        // what an earlier READ reads must wait for that READ (the fence).
        let writes_remote = matches!(
            opcode,
            WrOpcode::RdmaWrite
                | WrOpcode::RdmaWriteWithImm
                | WrOpcode::AtomicCmpAndSwp
                | WrOpcode::AtomicFetchAndAdd
                | WrOpcode::AtomicWrite
        );
        let span = (remote_off, remote_off + (len as usize).max(8));
        if rc && writes_remote && reads.iter().any(|&(a, b)| span.0 < b && a < span.1) {
            flags |= SendFlags::FENCE;
        }
        if opcode == WrOpcode::RdmaRead {
            reads.push((remote_off, remote_off + len as usize));
        }
        if r.chance(200_000) {
            flags |= SendFlags::SOLICITED;
        }
        let wr = SendWr {
            wr_id: ((me as u64) << 32) | i as u64,
            slot: i as u32,
            opcode,
            flags: SendFlags::from_bits(flags),
            imm_data,
            invalidate_rkey,
            remote,
            length: if opcode == WrOpcode::Flush { 0 } else { len },
        };
        ops.push(Op {
            wr,
            local_off,
            data,
            expect_local,
            signaled,
            remote_off,
        });
    }
    (ops, recvs)
}

/// Splits `len` bytes at `off` into one to three SGEs with the local key.
fn split_sges(r: &mut Rng, base: u64, off: usize, len: usize) -> Vec<Sge> {
    let mut sges = Vec::new();
    let pieces = if len < 2 { 1 } else { r.range(1, 3) as usize };
    let mut start = off;
    let end = off + len;
    for p in 0..pieces {
        let piece_end = if p + 1 == pieces {
            end
        } else {
            r.range(start as u64, end as u64) as usize
        };
        sges.push(Sge::new(
            base + start as u64,
            (piece_end - start) as u32,
            LKEY,
        ));
        start = piece_end;
    }
    sges
}

fn ipv4(src: u8, dst: u8, payload_len: usize) -> (Ipv4Header, UdpHeader) {
    let total = 20 + 8 + payload_len;
    let ip = Ipv4Header {
        version_ihl: 0x45,
        tos: 0,
        total_len: U16::new(total as u16),
        id: U16::new(0),
        frag_off: U16::new(0x4000),
        ttl: 64,
        protocol: 17,
        check: U16::new(0),
        saddr: [10, 0, 0, src],
        daddr: [10, 0, 0, dst],
    };
    let udp = UdpHeader {
        source: U16::new(0xc000),
        dest: U16::new(UdpHeader::ROCE_V2_PORT),
        len: U16::new((8 + payload_len) as u16),
        check: U16::new(0),
    };
    (ip, udp)
}

/// Runs the scenario of `seed`; returns a report, or the first violation.
///
/// A panic in the run (a bug of the simulation) is reported as a violation.
pub fn run(seed: u64) -> Result<Report, String> {
    let sc = Scenario::from_seed(seed);
    std::panic::catch_unwind(|| run_scenario(&sc)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| String::from(*s))
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(format!("panic: {msg}"))
    })
}

/// Runs a scenario; returns a report, or the first violation.
pub fn run_scenario(sc: &Scenario) -> Result<Report, String> {
    let mut r = Rng::new(sc.seed.wrapping_mul(31).wrapping_add(7));
    let qpns = [0x11u32, 0x22];
    let bases = [0x1_0000_0000u64, 0x2_0000_0000];
    let mut mems: Vec<Vec<u8>> = (0..2)
        .map(|_| {
            let mut m = vec![0u8; MEM_LEN];
            r.fill(&mut m[WINDOW_OFF..]);
            m
        })
        .collect();
    // Models of each endpoint's window and atomic words, as the peer's ops change them.
    let mut models: Vec<Vec<u8>> = mems.iter().map(|m| m[WINDOW_OFF..].to_vec()).collect();
    let initials = models.clone();
    let mut inv_keys: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    let mut all_ops = Vec::new();
    let mut all_recvs = Vec::new();
    #[expect(clippy::needless_range_loop, reason = "`me` indexes four arrays")]
    for me in 0..2 {
        let peer = 1 - me;
        let (local, _) = mems[me].split_at_mut(LOCAL_LEN);
        let (ops, recvs) = workload(
            sc,
            &mut r,
            me,
            sc.ops_per_side[me],
            local,
            bases[peer],
            &mut models[peer],
            &mut inv_keys[peer],
        );
        all_ops.push(ops);
        all_recvs.push(recvs);
    }
    let ud = matches!(sc.qp_type, QpType::Ud | QpType::Gsi);
    let mut eps: Vec<Endpoint> = Vec::new();
    for me in 0..2 {
        let peer = 1 - me;
        let cfg = QpConfig {
            qp_type: sc.qp_type,
            qpn: qpns[me],
            dest_qpn: qpns[peer],
            pkey: 0xffff,
            qkey: 0x1234,
            mtu: sc.mtu,
            sq_psn: Psn::new(0xff_fff0u32.wrapping_add(me as u32 * 77)),
            rq_psn: Psn::new(0xff_fff0u32.wrapping_add(peer as u32 * 77)),
            retry_cnt: sc.retry_cnt,
            rnr_retry: sc.rnr_retry,
            min_rnr_timer: RnrTimer::from_bits(sc.min_rnr_timer),
            ack_timeout: AckTimeout::new(sc.ack_timeout).unwrap(),
            max_rd_atomic: sc.max_rd_atomic,
            access: Access::REMOTE_READ
                .with(Access::REMOTE_WRITE)
                .with(Access::REMOTE_ATOMIC)
                .with(Access::FLUSH_GLOBAL)
                .with(Access::FLUSH_PERSISTENT),
            sq_sig_all: sc.sig_all,
            srq: false,
        };
        let mut keys = BTreeMap::new();
        keys.insert(
            LKEY,
            Mr {
                start: 0,
                len: MEM_LEN,
                access: Access::LOCAL_WRITE,
                valid: true,
            },
        );
        keys.insert(
            RKEY,
            Mr {
                start: WINDOW_OFF,
                len: WINDOW_LEN + ATOMIC_WORDS * 8,
                access: cfg.access,
                valid: true,
            },
        );
        for &k in &inv_keys[me] {
            keys.insert(
                k,
                Mr {
                    start: WINDOW_OFF,
                    len: 64,
                    access: Access::REMOTE_READ,
                    valid: true,
                },
            );
        }
        let mut send = BTreeMap::new();
        for op in &all_ops[me] {
            let data = if op.wr.opcode == WrOpcode::AtomicWrite {
                LocalData::Inline(op.data.clone())
            } else {
                let len = match op.wr.opcode {
                    WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => 8,
                    _ => op.wr.length as usize,
                };
                LocalData::Sges(split_sges(&mut r, bases[me], op.local_off, len))
            };
            send.insert(op.wr.slot, data);
        }
        // Receive WQEs for what the peer sends, and two more that must stay unused.
        let nrecv = if ud {
            all_recvs[peer].len() * 2 + 2
        } else {
            all_recvs[peer].len() + 2
        }
        .min(RECV_SLOTS);
        let mut recv = BTreeMap::new();
        let mut pending_recvs = Vec::new();
        for i in 0..nrecv {
            let off = RECV_OFF + i * RECV_BUF;
            recv.insert(i as u32, split_sges(&mut r, bases[me], off, RECV_BUF));
            pending_recvs.push(RecvSlot {
                wr_id: (1 << 40) | ((me as u64) << 32) | i as u64,
                slot: i as u32,
                length: RECV_BUF as u32,
            });
        }
        pending_recvs.reverse();
        eps.push(Endpoint {
            qp: QpTransport::new(&cfg, [None; RESOURCES]).map_err(|e| format!("config: {e:?}"))?,
            mem: SimMem {
                bytes: core::mem::take(&mut mems[me]),
                base: bases[me],
                keys,
                send,
                recv,
                atomics: 0,
                flushes: 0,
                odp_ppm: sc.odp_ppm,
                odp_rng: Rng::new(sc.seed ^ (0x0d9a_0000 + me as u64)),
                faulted: false,
                page_faults: 0,
            },
            io: SimIo {
                now: 0,
                tx: Vec::with_capacity(4200),
                outbox: Vec::new(),
                completions: Vec::new(),
                events: Vec::new(),
                recv_queue: VecDeque::new(),
                timers: BTreeMap::new(),
                new_timers: Vec::new(),
                counters: BTreeMap::new(),
                retry_cnt: sc.retry_cnt,
                rnr_retry: sc.rnr_retry,
                retries_since_progress: 0,
                rnr_since_progress: 0,
                violation: None,
                tx_rng: Rng::new(sc.seed ^ (0x7e57 + me as u64)),
                tx_full_ppm: sc.tx_full_ppm,
                tx_blocked: false,
            },
            qpn: qpns[me],
            ops: core::mem::take(&mut all_ops[me]),
            next_op: 0,
            pending_recvs,
            recv_posted: 0,
        });
    }
    if ud {
        for me in 0..2 {
            let peer_qpn = qpns[1 - me];
            for op in &mut eps[me].ops {
                if let Remote::Ud { remote_qpn, .. } = &mut op.wr.remote {
                    *remote_qpn = peer_qpn;
                }
            }
        }
    }

    let mut report = Report::default();
    for ep in &eps {
        for op in &ep.ops {
            *report.opcodes.entry(op.wr.opcode as u32).or_default() += 1;
        }
        report.wqes += ep.ops.len() as u64;
    }
    let mut heap: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut link = Rng::new(sc.seed ^ 0x11ee_55aa);
    let mut pager = Rng::new(sc.seed ^ 0x9a9e_5000);
    if sc.recv_delay_ns > 0 {
        heap.push(Reverse((sc.recv_delay_ns, seq, Event::Wakeup)));
        seq += 1;
    }
    let trace = std::env::var_os("SIM_TRACE").is_some();
    let mut now = 0u64;
    let mut steps = 0u64;
    const TIME_LIMIT_NS: u64 = 60_000_000_000;
    const STEP_LIMIT: u64 = 3_000_000;
    loop {
        // Post receive WQEs that are due, and send WQEs while there is room.
        for ep in eps.iter_mut() {
            if now >= sc.recv_delay_ns {
                while let Some(wr) = ep.pending_recvs.pop() {
                    ep.io.recv_queue.push_back(wr);
                    ep.recv_posted += 1;
                }
                ep.qp.drain_recv(&mut ep.io);
            }
            while ep.next_op < ep.ops.len() && ep.qp.requester.outstanding() < SQ_DEPTH {
                let wr = ep.ops[ep.next_op].wr;
                ep.qp
                    .post_send(wr, &mut ep.mem, &mut ep.io)
                    .map_err(|e| format!("post_send: {e:?}"))?;
                ep.next_op += 1;
            }
        }
        // Move what the endpoints produced onto the link and the timer queue.
        for (me, ep) in eps.iter_mut().enumerate() {
            if ep.io.tx_blocked {
                ep.io.tx_blocked = false;
                report.tx_full += 1;
                heap.push(Reverse((now + 2_000, seq, Event::TxReady { ep: me })));
                seq += 1;
            }
            if ep.mem.faulted {
                // The driver faults the page in from process context and runs the QP again.
                ep.mem.faulted = false;
                heap.push(Reverse((now + 5_000, seq, Event::TxReady { ep: me })));
                seq += 1;
            }
            for (timer, deadline) in ep.io.new_timers.drain(..) {
                heap.push(Reverse((
                    deadline,
                    seq,
                    Event::Timer {
                        ep: me,
                        timer,
                        deadline,
                    },
                )));
                seq += 1;
            }
            for mut bytes in ep.io.outbox.drain(..) {
                report.packets += 1;
                let (ip, udp) = ipv4(me as u8, 1 - me as u8, bytes.len());
                let n = bytes.len() - 4;
                let crc = icrc::compute(&HostCrc32, IpHeader::V4(&ip), &udp, &bytes[..n])
                    .ok_or("icrc of a short packet")?;
                bytes[n..].copy_from_slice(&crc.to_le_bytes());
                let in_blackhole = sc
                    .blackhole
                    .is_some_and(|(start, end)| now >= start && now < end);
                if in_blackhole || link.chance(sc.drop_ppm) {
                    report.dropped += 1;
                    continue;
                }
                let copies = if link.chance(sc.dup_ppm) {
                    report.duplicated += 1;
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let mut b = bytes.clone();
                    if link.chance(sc.corrupt_ppm) {
                        // Any bit but the BTH byte the ICRC masks.
                        let mut bit = link.below(b.len() as u64 * 8) as usize;
                        if bit / 8 == 4 {
                            bit += 8;
                        }
                        b[bit / 8] ^= 1 << (bit % 8);
                        report.corrupted += 1;
                    }
                    let at = now + sc.base_delay_ns + link.below(sc.jitter_ns + 1);
                    heap.push(Reverse((
                        at,
                        seq,
                        Event::Deliver {
                            to: 1 - me,
                            bytes: b,
                        },
                    )));
                    seq += 1;
                }
            }
            if let Some(v) = ep.io.violation.take() {
                return Err(format!("endpoint {me}: {v}"));
            }
        }
        let Some(Reverse((at, _, event))) = heap.pop() else {
            break;
        };
        now = at;
        steps += 1;
        if now > TIME_LIMIT_NS || steps > STEP_LIMIT {
            return Err(format!("no quiescence: t={now} ns, {steps} steps"));
        }
        for ep in eps.iter_mut() {
            ep.io.now = now;
        }
        match event {
            Event::Deliver { to, bytes } => {
                let ep = &mut eps[to];
                let (ip, udp) = ipv4(1 - to as u8, to as u8, bytes.len());
                let cut = (MAX_HEADER_LEN + pager.below(64) as usize).min(bytes.len());
                let pieces = crate::Pieces {
                    bytes: &bytes,
                    step: 1 + pager.below(600) as usize,
                };
                let parsed = if pager.chance(500_000) {
                    Packet::parse_paged(&bytes[..cut], &pieces, 0, bytes.len())
                } else {
                    Packet::parse(&bytes)
                };
                match parsed.and_then(|p| {
                    p.verify_icrc(&HostCrc32, IpHeader::V4(&ip), &udp)?;
                    Ok(p)
                }) {
                    Ok(pkt) => {
                        if trace {
                            let syn = pkt.aeth().map(|a| a.syndrome());
                            std::println!(
                                "{now:>10} -> {to} {:?} psn {:#x} len {} ack_req {} {:?}",
                                pkt.opcode(),
                                pkt.psn().get(),
                                pkt.payload().len(),
                                pkt.bth().ack_req(),
                                syn
                            );
                        }
                        if pkt.dest_qpn() != ep.qpn {
                            return Err(format!("packet for QPN {:#x}", pkt.dest_qpn()));
                        }
                        ep.qp.receive(&pkt, &mut ep.mem, &mut ep.io);
                    }
                    Err(_) => {
                        // Only corrupted packets may fail.
                        if report.corrupted == 0 {
                            return Err("a packet failed to parse".into());
                        }
                    }
                }
            }
            Event::Timer {
                ep,
                timer,
                deadline,
            } => {
                let e = &mut eps[ep];
                if e.io.timers.get(&timer) == Some(&deadline) {
                    if trace {
                        std::println!("{now:>10} timer {ep} {timer:?}");
                    }
                    e.io.timers.remove(&timer);
                    e.qp.on_timer(timer, &mut e.mem, &mut e.io);
                }
            }
            Event::Wakeup => {}
            Event::TxReady { ep } => {
                let e = &mut eps[ep];
                e.qp.run(&mut e.mem, &mut e.io);
            }
        }
        let batch_over = heap.peek().is_none_or(|Reverse((t, _, _))| *t > now);
        if batch_over {
            for ep in eps.iter_mut() {
                ep.qp.end_of_batch(&mut ep.io);
            }
        }
    }
    report.end_ns = now;
    for ep in &eps {
        report.retries += ep.io.counters.get(&Counter::Retry).copied().unwrap_or(0);
        let n = |c| ep.io.counters.get(&c).copied().unwrap_or(0);
        report.rnr_retries += n(Counter::RnrRetry);
        report.retry_exceeded += n(Counter::RetryExceeded);
        report.rnr_retry_exceeded += n(Counter::RnrRetryExceeded);
        report.duplicate_requests += n(Counter::DuplicateRequest);
        report.out_of_sequence += n(Counter::OutOfSequence);
        report.completions += ep.io.completions.len() as u64;
        report.page_faults += ep.mem.page_faults;
    }
    report.error = eps.iter().any(|ep| ep.qp.state() == TransportState::Error);
    check(sc, &eps, &all_recvs, &models, &initials, &report)?;
    Ok(report)
}

/// Checks the outcome of a run.
fn check(
    sc: &Scenario,
    eps: &[Endpoint],
    recvs: &[Vec<ExpectedRecv>],
    models: &[Vec<u8>],
    initials: &[Vec<u8>],
    report: &Report,
) -> Result<(), String> {
    if sc.must_succeed() && report.error {
        return Err("the QP entered the error state".into());
    }
    let rc = sc.qp_type == QpType::Rc;
    for (me, ep) in eps.iter().enumerate() {
        if ep.next_op != ep.ops.len() {
            return Err(format!(
                "endpoint {me}: only {} of {} ops posted",
                ep.next_op,
                ep.ops.len()
            ));
        }
        if ep.qp.requester.outstanding() != 0 {
            return Err(format!(
                "endpoint {me}: {} WQEs never completed",
                ep.qp.requester.outstanding()
            ));
        }
        // Send completions: in order, exactly once, the right status.
        let sends: Vec<&Completion> = ep
            .io
            .completions
            .iter()
            .filter(|c| c.queue == WorkQueue::Send)
            .collect();
        let mut next = 0usize;
        let mut failed = false;
        for c in &sends {
            let i = (c.wr_id & 0xffff_ffff) as usize;
            if c.wr_id >> 32 != me as u64 || i >= ep.ops.len() || i < next {
                return Err(format!(
                    "endpoint {me}: completion out of order or repeated: {c:?}"
                ));
            }
            // Skipped ops must be unsignaled successes.
            for skipped in &ep.ops[next..i] {
                if skipped.signaled || failed {
                    return Err(format!(
                        "endpoint {me}: no completion for op {}",
                        skipped.wr.wr_id & 0xffff_ffff
                    ));
                }
            }
            next = i + 1;
            let op = &ep.ops[i];
            if c.opcode != op.wr.wc_opcode() {
                return Err(format!(
                    "endpoint {me}: opcode {:?} for {:?}",
                    c.opcode, op.wr.opcode
                ));
            }
            match c.status {
                WcStatus::Success => {
                    if failed {
                        return Err(format!("endpoint {me}: success after an error: {c:?}"));
                    }
                    if !op.signaled {
                        return Err(format!("endpoint {me}: unsignaled op completed: {c:?}"));
                    }
                }
                WcStatus::WrFlushErr => failed = true,
                WcStatus::RetryExcErr | WcStatus::RnrRetryExcErr if rc && !failed => {
                    failed = true;
                }
                s => return Err(format!("endpoint {me}: unexpected status {s:?} for {c:?}")),
            }
        }
        for skipped in &ep.ops[next..] {
            if skipped.signaled || failed {
                return Err(format!(
                    "endpoint {me}: no completion for op {}",
                    skipped.wr.wr_id & 0xffff_ffff
                ));
            }
        }
        if failed && !report.error {
            return Err(format!(
                "endpoint {me}: error completions without the error state"
            ));
        }
        // Receive completions, each WQE at most once.
        let mut seen = std::collections::BTreeSet::new();
        for c in ep
            .io
            .completions
            .iter()
            .filter(|c| c.queue == WorkQueue::Recv)
        {
            if !seen.insert(c.wr_id) {
                return Err(format!("endpoint {me}: receive completed twice: {c:?}"));
            }
        }
    }
    if report.error {
        // Only the structure above is certain once the QP has failed.
        return Ok(());
    }
    for (me, ep) in eps.iter().enumerate() {
        let peer = &eps[1 - me];
        let recv_done: Vec<&Completion> = peer
            .io
            .completions
            .iter()
            .filter(|c| c.queue == WorkQueue::Recv)
            .collect();
        let recv_data = |c: &Completion, skip: usize| -> Vec<u8> {
            let slot = c.slot as usize;
            let off = RECV_OFF + slot * RECV_BUF + skip;
            peer.mem.bytes[off..off + c.byte_len as usize - skip].to_vec()
        };
        match sc.qp_type {
            QpType::Rc => {
                // Every byte of the peer's window is what the ops imply.
                if peer.mem.bytes[WINDOW_OFF..] != models[1 - me][..] {
                    let first = peer.mem.bytes[WINDOW_OFF..]
                        .iter()
                        .zip(&models[1 - me])
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    return Err(format!(
                        "endpoint {}: window differs at offset {first}",
                        1 - me
                    ));
                }
                for op in &ep.ops {
                    if let Some(expect) = &op.expect_local {
                        let got = &ep.mem.bytes[op.local_off..op.local_off + expect.len()];
                        if got != &expect[..] {
                            return Err(format!(
                                "endpoint {me}: op {} ({:?}) brought back wrong data",
                                op.wr.wr_id & 0xffff_ffff,
                                op.wr.opcode
                            ));
                        }
                    }
                }
                let atomics = ep
                    .ops
                    .iter()
                    .filter(|o| {
                        matches!(
                            o.wr.opcode,
                            WrOpcode::AtomicCmpAndSwp
                                | WrOpcode::AtomicFetchAndAdd
                                | WrOpcode::AtomicWrite
                        )
                    })
                    .count() as u64;
                let flushes = ep
                    .ops
                    .iter()
                    .filter(|o| o.wr.opcode == WrOpcode::Flush)
                    .count() as u64;
                if peer.mem.atomics != atomics || peer.mem.flushes != flushes {
                    return Err(format!(
                        "endpoint {}: {} atomics and {} flushes carried out, {atomics} and {flushes} posted",
                        1 - me,
                        peer.mem.atomics,
                        peer.mem.flushes
                    ));
                }
                if recv_done.len() != recvs[me].len() {
                    return Err(format!(
                        "endpoint {}: {} receives completed, {} expected",
                        1 - me,
                        recv_done.len(),
                        recvs[me].len()
                    ));
                }
                for (c, e) in recv_done.iter().zip(&recvs[me]) {
                    check_recv(c, e, &recv_data(c, 0), 1 - me)?;
                }
                let unused = peer.io.recv_queue.len();
                if unused != 2 {
                    return Err(format!(
                        "endpoint {}: {unused} receive WQEs left, 2 expected",
                        1 - me
                    ));
                }
                for (i, &key) in ep
                    .ops
                    .iter()
                    .filter_map(|o| o.wr.invalidate_rkey.as_ref())
                    .enumerate()
                {
                    if peer.mem.keys[&key].valid {
                        return Err(format!(
                            "endpoint {}: key {key:#x} ({i}) still valid",
                            1 - me
                        ));
                    }
                }
            }
            QpType::Uc => {
                // Messages arrive whole, in order, at most once; writes land as a prefix.
                let mut k = 0usize;
                for c in &recv_done {
                    if c.status != WcStatus::Success {
                        return Err(format!("endpoint {}: UC receive failed: {c:?}", 1 - me));
                    }
                    let got = recv_data(c, 0);
                    let pos = recvs[me][k..].iter().position(|e| {
                        e.opcode == c.opcode
                            && e.imm == c.imm_data
                            && (c.opcode == WcOpcode::RecvRdmaWithImm || e.data == got)
                    });
                    let Some(p) = pos else {
                        return Err(format!(
                            "endpoint {}: UC receive matches no message: {c:?}",
                            1 - me
                        ));
                    };
                    let e = &recvs[me][k + p];
                    if c.opcode == WcOpcode::RecvRdmaWithImm {
                        let op = &ep.ops[e.op];
                        let off = WINDOW_OFF + op.remote_off;
                        if peer.mem.bytes[off..off + op.data.len()] != op.data[..] {
                            return Err(format!(
                                "endpoint {}: UC write with immediate incomplete",
                                1 - me
                            ));
                        }
                    }
                    k += p + 1;
                }
                let mtu = sc.mtu.bytes() as usize;
                let initial = &initials[1 - me];
                for op in ep.ops.iter().filter(|o| o.wr.opcode == WrOpcode::RdmaWrite) {
                    let off = WINDOW_OFF + op.remote_off;
                    let got = &peer.mem.bytes[off..off + op.data.len()];
                    let init = &initial[op.remote_off..op.remote_off + op.data.len()];
                    // Chunks equal to the data, then chunks equal to the initial bytes.
                    let mut prefix = true;
                    for (i, chunk) in got.chunks(mtu).enumerate() {
                        let d = &op.data[i * mtu..i * mtu + chunk.len()];
                        let b = &init[i * mtu..i * mtu + chunk.len()];
                        if prefix && chunk == d {
                            continue;
                        }
                        prefix = false;
                        if chunk != b {
                            return Err(format!("endpoint {}: UC write is not a prefix", 1 - me));
                        }
                    }
                }
            }
            QpType::Ud | QpType::Gsi => {
                for c in &recv_done {
                    if c.status != WcStatus::Success || !c.grh || c.src_qpn != ep.qpn {
                        return Err(format!("endpoint {}: bad UD receive {c:?}", 1 - me));
                    }
                    let got = recv_data(c, GRH_LEN);
                    if !recvs[me]
                        .iter()
                        .any(|e| e.imm == c.imm_data && e.data == got)
                    {
                        return Err(format!(
                            "endpoint {}: UD receive matches no datagram",
                            1 - me
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_recv(c: &Completion, e: &ExpectedRecv, data: &[u8], ep: usize) -> Result<(), String> {
    let len_ok = match e.opcode {
        WcOpcode::Recv => data == &e.data[..],
        _ => true,
    };
    if c.status != WcStatus::Success
        || c.opcode != e.opcode
        || c.imm_data != e.imm
        || c.invalidated_rkey != e.inv
        || !len_ok
    {
        return Err(format!("endpoint {ep}: receive {c:?} for {e:?}"));
    }
    Ok(())
}

/// Returns the command that reruns `seed` with details.
pub fn repro_command(seed: u64) -> String {
    format!("cd tools/rxe-roce && cargo run --release --example sim -- --seed {seed} --verbose")
}
