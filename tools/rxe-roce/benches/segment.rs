// SPDX-License-Identifier: GPL-2.0

//! Micro-benchmark: segmentation of a 1 MiB message against a bare CRC-32 of its bytes.
//!
//! Run with `cargo bench --bench segment`. A UC queue pair of the protocol core sends one
//! 1 MiB SEND, at each path MTU: the requester builds every packet (headers, payload
//! gathered from memory, pad) in one reused buffer, and the ICRC of each is computed over
//! its IPv4 and UDP headers, as the driver's transmit does. That is timed against
//! `crc32fast::hash` over the same 1 MiB, the bound the ICRC alone cannot beat, and the
//! segmentation without the ICRC against a `memcpy` of the 1 MiB (today's transmit copies
//! the payload into the packet). It prints microseconds per message and the ratios. This is
//! a benchmark, not a test: nothing is asserted but that every byte was sent.

mod common;

use std::hint::black_box;
use std::time::Duration;

use rxe_roce::roce::icrc::{
    compute,
    IpHeader,
    Ipv4Header,
    UdpHeader,
    ICRC_LEN, //
};
use rxe_roce::roce::io::{
    AsyncEvent,
    Clock,
    Completion,
    Destination,
    Instant,
    Output,
    RecvSlot,
    TimerId,
    TxBuffer, //
};
use rxe_roce::roce::memory::{
    Access,
    AccessError,
    AtomicOp,
    MemoryAccess,
    WqeRef, //
};
use rxe_roce::roce::mtu::IbMtu;
use rxe_roce::roce::psn::Psn;
use rxe_roce::roce::qp::{
    QpConfig,
    QpTransport, //
};
use rxe_roce::roce::requester::SendWr;
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
use rxe_roce::HostCrc32;
use zerocopy::FromZeros;

const MESSAGE: usize = 1 << 20;

/// The local data of the one send WQE: `MESSAGE` bytes.
struct Mem(Vec<u8>);

impl MemoryAccess for Mem {
    type Buffer = Vec<u8>;

    fn gather(
        &mut self,
        _wqe: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        let start = offset as usize;
        let src = self
            .0
            .get(start..start + len)
            .ok_or(AccessError::TooShort)?;
        dst.put(src);
        Ok(())
    }

    fn scatter(&mut self, _: WqeRef, _: u32, _: &[u8]) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn check_remote(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn read_remote(
        &mut self,
        _: u32,
        _: u64,
        _: usize,
        _: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn write_remote(&mut self, _: u32, _: u64, _: &[u8]) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn flush(&mut self, _: u32, _: u64, _: u32, _: u8) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }

    fn invalidate(&mut self, _: u32) -> Result<(), AccessError> {
        Err(AccessError::InvalidKey)
    }
}

/// One reused transmit buffer; each packet sent gets its ICRC and is counted.
struct Io {
    buf: Vec<u8>,
    ip: Ipv4Header,
    udp: UdpHeader,
    packets: usize,
    bytes: usize,
    icrc: u32,
    /// Compute each packet's ICRC (off: the segmentation alone).
    with_icrc: bool,
    done: bool,
}

impl Clock for Io {
    fn now(&self) -> Instant {
        Instant(0)
    }

    fn arm(&mut self, _: TimerId, _: Instant) {}

    fn cancel(&mut self, _: TimerId) {}
}

impl Output for Io {
    type Buffer = Vec<u8>;

    fn tx_buffer(&mut self, len: usize, _: Destination) -> Option<&mut Vec<u8>> {
        // Appended to: no zero-fill, and no allocation once the buffer has grown.
        self.buf.clear();
        self.buf.reserve(len);
        Some(&mut self.buf)
    }

    fn transmit(&mut self, len: usize, _: Destination) -> bool {
        let packet = &self.buf[..len];
        self.ip.total_len.set((28 + len) as u16);
        self.udp.len.set((8 + len) as u16);
        let covered = &packet[..len - ICRC_LEN];
        if self.with_icrc {
            self.icrc ^= compute(&HostCrc32, IpHeader::V4(&self.ip), &self.udp, covered).unwrap();
        }
        self.packets += 1;
        self.bytes += len;
        true
    }

    fn complete(&mut self, _: Completion) {
        self.done = true;
    }

    fn async_event(&mut self, _: AsyncEvent) {}

    fn take_recv(&mut self) -> Option<RecvSlot> {
        None
    }
}

/// Sends one message at `mtu` from a new queue pair; returns the packets sent.
fn send_one(mtu: IbMtu, mem: &mut Mem, io: &mut Io) -> usize {
    let cfg = QpConfig {
        qp_type: rxe_roce::roce::opcode::QpType::Uc,
        qpn: 0x11,
        dest_qpn: 0x12,
        pkey: 0xffff,
        qkey: 0,
        mtu,
        sq_psn: Psn::new(0),
        rq_psn: Psn::new(0),
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: RnrTimer::from_bits(1),
        ack_timeout: AckTimeout::new(14).unwrap(),
        max_rd_atomic: 1,
        access: Access::from_bits(0x30f),
        sq_sig_all: true,
        srq: false,
    };
    let mut qp: QpTransport<32, [Option<Resource>; 16]> =
        QpTransport::new(&cfg, [None; 16]).unwrap();
    io.done = false;
    io.packets = 0;
    let wr = SendWr {
        wr_id: 1,
        slot: 0,
        opcode: WrOpcode::Send,
        flags: SendFlags::from_bits(SendFlags::SIGNALED),
        imm_data: None,
        invalidate_rkey: None,
        remote: Remote::None,
        length: MESSAGE as u32,
    };
    qp.post_send(wr, mem, io).unwrap();
    // The requester sends a window per call: run it until the message is out.
    while !io.done {
        qp.run(mem, io);
    }
    io.packets
}

/// Runs `f` until `budget` has passed; returns microseconds per call.
fn time(budget: Duration, f: impl FnMut()) -> f64 {
    common::ns_per_call(budget, 1, f) / 1000.0
}

fn main() {
    let budget = Duration::from_secs(1);
    let mut mem = Mem((0..MESSAGE).map(|i| (i * 31) as u8).collect());
    let mut ip = Ipv4Header::new_zeroed();
    ip.version_ihl = 0x45;
    ip.ttl = 64;
    ip.protocol = 17;
    ip.saddr = [198, 18, 0, 1];
    ip.daddr = [198, 18, 0, 2];
    let mut udp = UdpHeader::new_zeroed();
    udp.source.set(0xc000);
    udp.dest.set(UdpHeader::ROCE_V2_PORT);
    let mut io = Io {
        buf: Vec::new(),
        ip,
        udp,
        packets: 0,
        bytes: 0,
        icrc: 0,
        with_icrc: true,
        done: false,
    };
    let crc_us = time(budget, || {
        black_box(crc32fast::hash(black_box(&mem.0)));
    });
    let mut copy = vec![0u8; MESSAGE];
    let copy_us = time(budget, || {
        copy.copy_from_slice(black_box(&mem.0));
        black_box(&copy);
    });
    println!("1 MiB message: bare crc32 {crc_us:.1} us, memcpy {copy_us:.1} us");
    println!(
        "{:>6} {:>8} | {:>12} {:>8} | {:>12} {:>8}",
        "mtu", "packets", "segment+icrc", "/crc", "segment", "/memcpy"
    );
    for mtu in [IbMtu::Mtu1024, IbMtu::Mtu4096] {
        io.bytes = 0;
        let packets = send_one(mtu, &mut mem, &mut io);
        assert!(io.bytes >= MESSAGE, "the whole message was sent");
        let mut run = |with_icrc: bool| {
            io.with_icrc = with_icrc;
            time(budget, || {
                black_box(send_one(mtu, &mut mem, &mut io));
            })
        };
        let full = run(true);
        let bare = run(false);
        println!(
            "{:>6} {packets:>8} | {full:>9.1} us {:>8.2} | {bare:>9.1} us {:>8.2}",
            mtu.bytes(),
            full / crc_us,
            bare / copy_us
        );
    }
    black_box(io.icrc);
}
