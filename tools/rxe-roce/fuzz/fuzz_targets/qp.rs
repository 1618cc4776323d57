// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the transport state machines with arbitrary event sequences: posted
//! WQEs, received packets (structure checked, ICRC not) and fired timers, on
//! RC, UC and UD. Nothing may panic, and every WQE completes at most once.

#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use rxe_roce::roce::io::{
    AsyncEvent,
    Clock,
    Completion,
    Destination,
    Instant,
    Output,
    RecvSlot,
    TimerId,
    TxBuffer,
    WorkQueue, //
};
use rxe_roce::roce::memory::{
    Access,
    AccessError,
    AtomicOp,
    MemoryAccess,
    WqeRef, //
};
use rxe_roce::roce::mtu::IbMtu;
use rxe_roce::roce::opcode::QpType;
use rxe_roce::roce::packet::Packet;
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

/// Memory of 4 KiB at address 0 for every key but 0; key 0 is invalid.
struct Mem([u8; 4096]);

impl Mem {
    fn at(&mut self, key: u32, va: u64, len: usize) -> Result<&mut [u8], AccessError> {
        if key == 0 {
            return Err(AccessError::InvalidKey);
        }
        let start = usize::try_from(va).map_err(|_| AccessError::OutOfRange)?;
        let end = start.checked_add(len).ok_or(AccessError::OutOfRange)?;
        self.0.get_mut(start..end).ok_or(AccessError::OutOfRange)
    }
}

impl MemoryAccess for Mem {
    type Buffer = Vec<u8>;

    fn gather(
        &mut self,
        _: WqeRef,
        offset: u32,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        dst.put(self.at(1, u64::from(offset), len)?);
        Ok(())
    }
    fn scatter(&mut self, _: WqeRef, offset: u32, src: &[u8]) -> Result<(), AccessError> {
        self.at(1, u64::from(offset), src.len())?
            .copy_from_slice(src);
        Ok(())
    }
    fn check_remote(&mut self, rkey: u32, va: u64, len: u32, _: Access) -> Result<(), AccessError> {
        self.at(rkey, va, len as usize).map(|_| ())
    }
    fn read_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        dst.put(self.at(rkey, va, len)?);
        Ok(())
    }
    fn write_remote(&mut self, rkey: u32, va: u64, src: &[u8]) -> Result<(), AccessError> {
        self.at(rkey, va, src.len())?.copy_from_slice(src);
        Ok(())
    }
    fn atomic(&mut self, rkey: u32, va: u64, _: AtomicOp) -> Result<u64, AccessError> {
        let w = self.at(rkey, va, 8)?;
        Ok(u64::from_ne_bytes(w.try_into().unwrap()))
    }
    fn flush(&mut self, rkey: u32, va: u64, len: u32, _: u8) -> Result<(), AccessError> {
        self.at(rkey, va, len as usize).map(|_| ())
    }
    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        if rkey == 0 {
            Err(AccessError::InvalidKey)
        } else {
            Ok(())
        }
    }
}

#[derive(Default)]
struct Io {
    now: u64,
    tx: Vec<u8>,
    recvs: u64,
    recv_avail: u32,
    done: BTreeSet<(bool, u64)>,
}

impl Clock for Io {
    fn now(&self) -> Instant {
        Instant(self.now)
    }
    fn arm(&mut self, _: TimerId, _: Instant) {}
    fn cancel(&mut self, _: TimerId) {}
}

impl Output for Io {
    type Buffer = Vec<u8>;

    fn tx_buffer(&mut self, len: usize, _dest: Destination) -> Option<&mut Vec<u8>> {
        self.tx.clear();
        self.tx.reserve(len);
        Some(&mut self.tx)
    }
    fn transmit(&mut self, len: usize, _: Destination) -> bool {
        // What we send is as long as announced, and parses.
        assert_eq!(self.tx.len(), len);
        Packet::parse(&self.tx).expect("a packet we built parses");
        true
    }
    fn complete(&mut self, c: Completion) {
        let fresh = self.done.insert((c.queue == WorkQueue::Send, c.wr_id));
        assert!(fresh, "completed twice: {c:?}");
    }
    fn async_event(&mut self, _: AsyncEvent) {}
    fn take_recv(&mut self) -> Option<RecvSlot> {
        if self.recv_avail == 0 {
            return None;
        }
        self.recv_avail -= 1;
        self.recvs += 1;
        Some(RecvSlot {
            wr_id: self.recvs,
            slot: 0,
            length: 2048,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Rc][usize::from(sel & 3)];
    let cfg = QpConfig {
        qp_type,
        qpn: 0x11,
        dest_qpn: 0x22,
        pkey: 0xffff,
        qkey: 0,
        mtu: IbMtu::Mtu256,
        sq_psn: Psn::new(0xff_fff0),
        rq_psn: Psn::new(0xff_fff8),
        retry_cnt: (sel >> 2) & 7,
        rnr_retry: (sel >> 5) & 7,
        min_rnr_timer: RnrTimer::from_bits(1),
        ack_timeout: AckTimeout::new(1).unwrap(),
        max_rd_atomic: 2,
        access: Access::from_bits(0x30f),
        sq_sig_all: sel & 1 != 0,
        srq: false,
    };
    let mut qp: QpTransport<4, [Option<Resource>; 2]> = QpTransport::new(&cfg, [None; 2]).unwrap();
    let mut mem = Mem([0; 4096]);
    let mut io = Io::default();
    let mut wr_id = 0u64;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        io.now += 5000;
        match op % 8 {
            0..=3 => {
                // A packet of the next `len` bytes.
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let len = usize::from(len).min(tail.len());
                let (bytes, tail) = tail.split_at(len);
                rest = tail;
                if let Ok(pkt) = Packet::parse(bytes) {
                    qp.receive(&pkt, &mut mem, &mut io);
                }
                qp.end_of_batch(&mut io);
            }
            4 => {
                let timer = if rest.first().is_some_and(|b| b & 1 != 0) {
                    TimerId::RnrRetry
                } else {
                    TimerId::Retransmit
                };
                io.now += 1 << 20;
                qp.on_timer(timer, &mut mem, &mut io);
            }
            5 => io.recv_avail += 1,
            _ => {
                // A WQE from the next eight bytes.
                let Some(b) = rest.get(..8) else {
                    break;
                };
                rest = &rest[8..];
                let opcode = [
                    WrOpcode::Send,
                    WrOpcode::SendWithImm,
                    WrOpcode::SendWithInv,
                    WrOpcode::RdmaWrite,
                    WrOpcode::RdmaWriteWithImm,
                    WrOpcode::RdmaRead,
                    WrOpcode::AtomicCmpAndSwp,
                    WrOpcode::AtomicFetchAndAdd,
                    WrOpcode::AtomicWrite,
                    WrOpcode::Flush,
                    WrOpcode::LocalInv,
                    WrOpcode::BindMw,
                ][usize::from(b[0]) % 12];
                let length = u32::from(u16::from_le_bytes([b[1], b[2]])) % 1500;
                let addr = u64::from(b[3]) * 8;
                let rkey = u32::from(b[4] & 1);
                let remote = match opcode {
                    _ if qp_type == QpType::Ud => Remote::Ud {
                        remote_qpn: 0x22,
                        remote_qkey: 0,
                        ah_num: 1,
                    },
                    WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => Remote::None,
                    WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd => Remote::Atomic {
                        addr,
                        rkey,
                        compare_add: u64::from(b[5]),
                        swap: u64::from(b[6]),
                    },
                    WrOpcode::Flush => Remote::Flush {
                        addr,
                        length,
                        rkey,
                        placement_type: b[5] & 3,
                        selectivity_level: 0,
                    },
                    WrOpcode::LocalInv => Remote::LocalInv { rkey },
                    _ => Remote::Rdma { addr, rkey },
                };
                wr_id += 1;
                let wr = SendWr {
                    wr_id,
                    slot: 0,
                    opcode,
                    flags: SendFlags::from_bits(u32::from(b[7])),
                    imm_data: Some(7),
                    invalidate_rkey: Some(rkey),
                    remote,
                    length,
                };
                let _ = qp.post_send(wr, &mut mem, &mut io);
            }
        }
    }
});
