// SPDX-License-Identifier: GPL-2.0

//! Decoding send and receive WQEs laid out as `rdma_user_rxe.h` (and librxe)
//! lays them out.

use rxe_roce::roce::memory::{
    MwBind,
    Registration, //
};
use rxe_roce::roce::opcode::QpType;
use rxe_roce::roce::segment::MessageKind;
use rxe_roce::roce::wqe::{
    copy_send_wqe,
    decode_recv_wqe,
    decode_send_wqe,
    encode_recv_wqe,
    encode_send_wqe,
    send_wqe_len,
    Remote,
    SendFlags,
    SendQueueLimits,
    SendWqe,
    Sge,
    WqeData,
    WqeError,
    WrOpcode,
    RECV_WQE_HEADER_LEN,
    SEND_WQE_HEADER_LEN,
    SEND_WQE_OPCODE_OFFSET, //
};

// Offsets in struct rxe_send_wqe, checked against the C header with gcc.
const WR_ID: usize = 0;
const OPCODE: usize = 12;
const SEND_FLAGS: usize = 16;
const EX: usize = 20;
const WR: usize = 24;
const DMA_LENGTH: usize = 184;
const DMA_NUM_SGE: usize = 184 + 12;

/// A send queue slot of `max_sge` SGEs, as librxe writes it.
struct Slot(Vec<u8>);

impl Slot {
    fn send(opcode: u32, max_sge: usize) -> Self {
        let mut s = Slot(vec![0xcc; SEND_WQE_HEADER_LEN + 16 * max_sge]);
        s.0[..SEND_WQE_HEADER_LEN].fill(0);
        s.u64(WR_ID, 0x1122_3344_5566_7788);
        s.u32(OPCODE, opcode);
        s
    }

    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn sges(&mut self, header: usize, num_off: usize, sges: &[(u64, u32, u32)]) -> &mut Self {
        self.u32(num_off, sges.len() as u32);
        for (i, &(addr, len, lkey)) in sges.iter().enumerate() {
            let off = header + 16 * i;
            self.u64(off, addr).u32(off + 8, len).u32(off + 12, lkey);
        }
        self
    }
}

const RC: SendQueueLimits = SendQueueLimits {
    qp_type: QpType::Rc,
    max_sge: 4,
    max_inline: 64,
    kernel: false,
};

#[test]
fn rc_send_with_sges() {
    let mut s = Slot::send(2, 4);
    s.u32(SEND_FLAGS, SendFlags::SIGNALED | SendFlags::SOLICITED);
    s.sges(
        SEND_WQE_HEADER_LEN,
        DMA_NUM_SGE,
        &[(0x1000, 100, 7), (0x9000, 28, 8)],
    );
    // The length user space claims is ignored: the SGEs are summed.
    s.u32(DMA_LENGTH, 999);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(w.wr_id, 0x1122_3344_5566_7788);
    assert_eq!(w.opcode, WrOpcode::Send);
    assert!(w.flags.contains(SendFlags::SIGNALED));
    assert!(w.flags.contains(SendFlags::SOLICITED));
    assert!(!w.flags.contains(SendFlags::INLINE));
    assert_eq!(w.flags.bits(), 6);
    assert_eq!(w.remote, Remote::None);
    assert_eq!((w.imm_data, w.invalidate_rkey), (None, None));
    assert_eq!(w.length, 128);
    let WqeData::Sges(sges) = w.data else {
        panic!("{:?}", w.data)
    };
    assert_eq!(sges.len(), 2);
    assert_eq!(
        (sges[1].addr(), sges[1].length(), sges[1].lkey()),
        (0x9000, 28, 8)
    );
}

#[test]
fn immediate_and_invalidate() {
    let mut s = Slot::send(3, 1);
    s.0[EX..EX + 4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(w.imm_data, Some(0xdead_beef));
    assert_eq!(w.length, 0);

    let mut s = Slot::send(9, 1);
    s.u32(EX, 0x1234_5678);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(w.invalidate_rkey, Some(0x1234_5678));
    assert_eq!(w.imm_data, None);

    let mut s = Slot::send(1, 1);
    s.u64(WR, 0xabc0).u32(WR + 8, 0x77);
    s.0[EX..EX + 4].copy_from_slice(&[0, 0, 0, 9]);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(
        w.remote,
        Remote::Rdma {
            addr: 0xabc0,
            rkey: 0x77
        }
    );
    assert_eq!(w.imm_data, Some(9));
}

#[test]
fn inline_data() {
    let mut s = Slot::send(0, 4);
    s.u32(SEND_FLAGS, SendFlags::INLINE);
    s.u32(DMA_LENGTH, 10);
    s.u32(DMA_NUM_SGE, 1000);
    s.0[SEND_WQE_HEADER_LEN..SEND_WQE_HEADER_LEN + 10].copy_from_slice(b"0123456789");
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(w.data, WqeData::Inline(b"0123456789"));
    assert_eq!(w.length, 10);

    s.u32(DMA_LENGTH, 65);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::InlineTooLong));
    let big = SendQueueLimits {
        max_inline: 1 << 20,
        ..RC
    };
    s.u32(DMA_LENGTH, 1 << 20);
    assert_eq!(decode_send_wqe(&s.0, &big), Err(WqeError::Truncated));

    let mut s = Slot::send(4, 1);
    s.u32(SEND_FLAGS, SendFlags::INLINE);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::InlineNotAllowed));
}

#[test]
fn opcodes_and_qp_types() {
    for raw in [10u32, 11, 12, 13, 16, 0x20, 0x21, u32::MAX] {
        let s = Slot::send(raw, 1);
        assert_eq!(
            decode_send_wqe(&s.0, &RC),
            Err(WqeError::UnknownOpcode(raw))
        );
    }
    let uc = SendQueueLimits {
        qp_type: QpType::Uc,
        ..RC
    };
    let ud = SendQueueLimits {
        qp_type: QpType::Ud,
        ..RC
    };
    for (op, on_uc, on_ud) in [
        (WrOpcode::RdmaWrite, true, false),
        (WrOpcode::RdmaWriteWithImm, true, false),
        (WrOpcode::Send, true, true),
        (WrOpcode::SendWithImm, true, true),
        (WrOpcode::RdmaRead, false, false),
        (WrOpcode::AtomicCmpAndSwp, false, false),
        (WrOpcode::AtomicFetchAndAdd, false, false),
        (WrOpcode::LocalInv, false, false),
        (WrOpcode::BindMw, true, false),
        (WrOpcode::SendWithInv, false, false),
        (WrOpcode::Flush, false, false),
        (WrOpcode::AtomicWrite, false, false),
        (WrOpcode::RegMr, false, false),
    ] {
        assert_eq!(WrOpcode::from_raw(op as u32), Some(op));
        let kernel = SendQueueLimits { kernel: true, ..RC };
        if op == WrOpcode::RegMr {
            // Only a kernel consumer's ring may hold a registration request.
            let s = Slot::send(op as u32, 1);
            assert_eq!(
                decode_send_wqe(&s.0, &RC),
                Err(WqeError::UnknownOpcode(0x20))
            );
            assert!(decode_send_wqe(&s.0, &kernel).is_ok());
            continue;
        }
        assert!(op.allowed_on(QpType::Rc));
        assert_eq!(op.allowed_on(QpType::Uc), on_uc, "{op:?}");
        assert_eq!(op.allowed_on(QpType::Ud), on_ud, "{op:?}");
        assert_eq!(op.allowed_on(QpType::Gsi), on_ud, "{op:?}");
        if !on_uc {
            let s = Slot::send(op as u32, 1);
            assert_eq!(decode_send_wqe(&s.0, &uc), Err(WqeError::OpcodeNotAllowed));
        }
    }
    let s = Slot::send(WrOpcode::RdmaWrite as u32, 1);
    assert_eq!(decode_send_wqe(&s.0, &ud), Err(WqeError::OpcodeNotAllowed));
    assert_eq!(
        WrOpcode::RdmaRead.message_kind(),
        Some(MessageKind::RdmaRead)
    );
    assert_eq!(
        WrOpcode::AtomicWrite.message_kind(),
        Some(MessageKind::AtomicWrite)
    );
    assert_eq!(WrOpcode::LocalInv.message_kind(), None);
    assert_eq!(WrOpcode::RegMr.message_kind(), None);
    assert!(!WrOpcode::RegMr.allows_inline());
    assert!(WrOpcode::SendWithInv.allows_inline());
    assert!(!WrOpcode::AtomicWrite.allows_inline());
}

#[test]
fn sge_count_and_total_length() {
    let mut s = Slot::send(0, 5);
    s.sges(SEND_WQE_HEADER_LEN, DMA_NUM_SGE, &[(0, 1, 1); 5]);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::TooManySges));
    let mut s = Slot::send(0, 2);
    s.u32(DMA_NUM_SGE, 3);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::Truncated));
    let mut s = Slot::send(0, 4);
    s.sges(
        SEND_WQE_HEADER_LEN,
        DMA_NUM_SGE,
        &[(0, 1 << 30, 1), (0, 1 << 30, 1)],
    );
    assert_eq!(decode_send_wqe(&s.0, &RC).unwrap().length, 1 << 31);
    s.sges(
        SEND_WQE_HEADER_LEN,
        DMA_NUM_SGE,
        &[(0, 1 << 30, 1), (0, 1 << 30, 1), (0, 1, 1)],
    );
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::TooLong));
    s.sges(
        SEND_WQE_HEADER_LEN,
        DMA_NUM_SGE,
        &[(0, u32::MAX, 1), (0, 2, 1)],
    );
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::TooLong));
    assert_eq!(decode_send_wqe(&[0; 207], &RC), Err(WqeError::Truncated));
}

#[test]
fn atomics() {
    let mut s = Slot::send(5, 1);
    s.u64(WR, 0x1000)
        .u64(WR + 8, 1)
        .u64(WR + 16, 2)
        .u32(WR + 24, 0x55);
    s.sges(SEND_WQE_HEADER_LEN, DMA_NUM_SGE, &[(0x2000, 8, 3)]);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(
        w.remote,
        Remote::Atomic {
            addr: 0x1000,
            rkey: 0x55,
            compare_add: 1,
            swap: 2
        }
    );
    s.u64(WR, 0x1004);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::MisalignedAtomic));
    s.u64(WR, 0x1000);
    s.sges(SEND_WQE_HEADER_LEN, DMA_NUM_SGE, &[(0x2000, 16, 3)]);
    assert_eq!(decode_send_wqe(&s.0, &RC), Err(WqeError::BadAtomicLength));

    // ATOMIC WRITE: the value sits where the SGEs would be.
    let mut s = Slot::send(15, 1);
    s.u64(WR, 0x3000).u32(WR + 8, 0x66);
    s.0[SEND_WQE_HEADER_LEN..SEND_WQE_HEADER_LEN + 8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(
        w.remote,
        Remote::Rdma {
            addr: 0x3000,
            rkey: 0x66
        }
    );
    assert_eq!(w.data, WqeData::Inline(&[1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(w.length, 8);
}

#[test]
fn ud_send_needs_an_address_handle() {
    let ud = SendQueueLimits {
        qp_type: QpType::Ud,
        ..RC
    };
    let mut s = Slot::send(2, 1);
    s.u32(WR, 0xff00_0042).u32(WR + 4, 0x1111).u32(WR + 12, 0);
    assert_eq!(
        decode_send_wqe(&s.0, &ud),
        Err(WqeError::MissingAddressHandle)
    );
    s.u32(WR + 12, 3);
    let w = decode_send_wqe(&s.0, &ud).unwrap();
    assert_eq!(
        w.remote,
        Remote::Ud {
            remote_qpn: 0x42,
            remote_qkey: 0x1111,
            ah_num: 3
        }
    );
}

#[test]
fn flush_and_local_operations() {
    let mut s = Slot::send(14, 1);
    s.u64(WR, 0x4000).u32(WR + 8, 4096).u32(WR + 12, 0x99);
    s.0[WR + 16] = 2;
    s.0[WR + 17] = 1;
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(
        w.remote,
        Remote::Flush {
            addr: 0x4000,
            length: 4096,
            rkey: 0x99,
            placement_type: 2,
            selectivity_level: 1
        }
    );

    let mut s = Slot::send(7, 0);
    s.u32(EX, 0xabcd);
    s.u32(DMA_NUM_SGE, 1000);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(w.remote, Remote::LocalInv { rkey: 0xabcd });
    assert_eq!((w.data, w.length), (WqeData::Sges(&[]), 0));

    let mut s = Slot::send(8, 0);
    s.u64(WR, 0x5000)
        .u64(WR + 8, 0x100)
        .u32(WR + 16, 1)
        .u32(WR + 20, 2);
    s.u32(WR + 24, 3).u32(WR + 28, 4);
    let w = decode_send_wqe(&s.0, &RC).unwrap();
    assert_eq!(
        w.remote,
        Remote::BindMw(MwBind {
            addr: 0x5000,
            length: 0x100,
            mr_lkey: 1,
            mw_rkey: 2,
            rkey: 3,
            access: 4
        })
    );
}

#[test]
fn receive_wqes() {
    let mut s = Slot(vec![0; RECV_WQE_HEADER_LEN + 3 * 16]);
    s.u64(0, 77);
    s.sges(RECV_WQE_HEADER_LEN, 16 + 12, &[(0x10, 5, 1), (0x20, 6, 2)]);
    let w = decode_recv_wqe(&s.0, 3).unwrap();
    assert_eq!((w.wr_id, w.length, w.sges.len()), (77, 11, 2));
    assert_eq!(decode_recv_wqe(&s.0, 1), Err(WqeError::TooManySges));
    s.u32(16 + 12, 4);
    assert_eq!(decode_recv_wqe(&s.0, 8), Err(WqeError::Truncated));
    s.sges(RECV_WQE_HEADER_LEN, 16 + 12, &[(0, u32::MAX, 1), (0, 1, 1)]);
    assert_eq!(decode_recv_wqe(&s.0, 8), Err(WqeError::TooLong));
    assert_eq!(decode_recv_wqe(&[0; 39], 8), Err(WqeError::Truncated));
    assert_eq!(decode_recv_wqe(&[0; 40], 0).unwrap().length, 0);
}

/// A UD queue of kernel limits: every opcode, the largest counts.
const UD_KERNEL: SendQueueLimits = SendQueueLimits {
    qp_type: QpType::Ud,
    max_sge: 32,
    max_inline: 512,
    kernel: true,
};

/// A xorshift generator: reproducible random bytes without a dependency.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn decoding_never_panics_on_arbitrary_bytes() {
    let mut next = xorshift(0x853c_49e6_748f_ea9b);
    let limits = [RC, UD_KERNEL];
    let mut slot = vec![0u8; 208 + 512];
    for _ in 0..50_000 {
        for b in slot.iter_mut() {
            *b = next() as u8;
        }
        // Steer into plausible opcodes, flags and counts, to reach the checks.
        slot[OPCODE..OPCODE + 4].copy_from_slice(&((next() % 17) as u32).to_ne_bytes());
        slot[SEND_FLAGS..SEND_FLAGS + 4].copy_from_slice(&((next() % 32) as u32).to_ne_bytes());
        slot[DMA_NUM_SGE..DMA_NUM_SGE + 4].copy_from_slice(&((next() % 40) as u32).to_ne_bytes());
        slot[DMA_LENGTH..DMA_LENGTH + 4].copy_from_slice(&((next() % 600) as u32).to_ne_bytes());
        let len = (next() as usize) % slot.len();
        let l = &limits[(next() % 2) as usize];
        if let Ok(w) = decode_send_wqe(&slot[..len], l) {
            assert!(w.opcode.allowed_on(l.qp_type));
            assert!(w.length <= 1 << 31);
        }
        let _ = decode_recv_wqe(&slot[..len], (next() % 40) as u32);
    }
}

#[test]
fn receive_wqes_encode_as_the_c_driver_posts_them() {
    let sges = [Sge::new(0x1000, 5, 7), Sge::new(0x2000, 6, 8)];
    let mut slot = vec![0xaau8; RECV_WQE_HEADER_LEN + 4 * 16];
    let n = encode_recv_wqe(&mut slot, 0x1234, &sges, 4).unwrap();
    assert_eq!(n, RECV_WQE_HEADER_LEN + 2 * 16);
    // wr_id, reserved, padding, then dma: length, resid, cur_sge, num_sge, sge_offset.
    assert_eq!(&slot[0..8], &0x1234u64.to_ne_bytes());
    assert_eq!(&slot[8..16], &[0; 8]);
    let word = |o: usize| u32::from_ne_bytes(slot[o..o + 4].try_into().unwrap());
    assert_eq!(
        (word(16), word(20), word(24), word(28), word(32)),
        (11, 11, 0, 2, 0)
    );
    assert_eq!(&slot[40..48], &0x1000u64.to_ne_bytes());
    // Bytes past the WQE are left alone.
    assert_eq!(slot[n], 0xaa);
    let w = decode_recv_wqe(&slot, 4).unwrap();
    assert_eq!((w.wr_id, w.length, w.sges), (0x1234, 11, &sges[..]));

    assert_eq!(
        encode_recv_wqe(&mut slot, 1, &sges, 1),
        Err(WqeError::TooManySges)
    );
    assert_eq!(
        encode_recv_wqe(&mut slot[..50], 1, &sges, 4),
        Err(WqeError::Truncated)
    );
    let huge = [Sge::new(0, u32::MAX, 1), Sge::new(0, 1, 1)];
    assert_eq!(
        encode_recv_wqe(&mut slot, 1, &huge, 4),
        Err(WqeError::TooLong)
    );
    assert_eq!(
        encode_recv_wqe(&mut slot, 9, &[], 0),
        Ok(RECV_WQE_HEADER_LEN)
    );
}

#[test]
fn send_wqes_encode_to_what_decodes_back() {
    let sges = [Sge::new(0x1000, 5, 7), Sge::new(0x2000, 6, 8)];
    let inline = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
    let atomic_sge = [Sge::new(0x3000, 8, 9)];
    let base = SendWqe {
        wr_id: 0xfeed_beef_0000_0001,
        opcode: WrOpcode::Send,
        flags: SendFlags::from_bits(SendFlags::SIGNALED),
        imm_data: None,
        invalidate_rkey: None,
        remote: Remote::None,
        data: WqeData::Sges(&sges),
        length: 11,
    };
    let rc = SendQueueLimits {
        qp_type: QpType::Rc,
        max_sge: 4,
        max_inline: 64,
        kernel: true,
    };
    let ud = SendQueueLimits {
        qp_type: QpType::Gsi,
        ..rc
    };
    let cases = [
        (base, rc),
        (
            SendWqe {
                opcode: WrOpcode::SendWithImm,
                imm_data: Some(0x0102_0304),
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::SendWithInv,
                invalidate_rkey: Some(0x1234_5678),
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::RdmaWriteWithImm,
                imm_data: Some(0xa0b0_c0d0),
                remote: Remote::Rdma {
                    addr: 0x7fff_0000_1000,
                    rkey: 0x4455,
                },
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::RdmaRead,
                remote: Remote::Rdma {
                    addr: 0x10,
                    rkey: 0x99,
                },
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::AtomicCmpAndSwp,
                remote: Remote::Atomic {
                    addr: 0x8000,
                    rkey: 3,
                    compare_add: 11,
                    swap: 12,
                },
                data: WqeData::Sges(&atomic_sge),
                length: 8,
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::LocalInv,
                remote: Remote::LocalInv { rkey: 0x0abc_de01 },
                data: WqeData::Sges(&[]),
                length: 0,
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                opcode: WrOpcode::RegMr,
                remote: Remote::RegMr(Registration {
                    mr_key: 0x0001_2345,
                    key: 0x0001_2346,
                    access: 0x7,
                    iova: 0xffff_8880_0123_4000,
                    length: 3 << 20,
                }),
                data: WqeData::Sges(&[]),
                length: 0,
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                flags: SendFlags::from_bits(SendFlags::INLINE),
                data: WqeData::Inline(&inline),
                length: 9,
                ..base
            },
            rc,
        ),
        (
            SendWqe {
                remote: Remote::Ud {
                    remote_qpn: 1,
                    remote_qkey: 0x8001_0000,
                    ah_num: 17,
                },
                ..base
            },
            ud,
        ),
    ];
    for (wqe, limits) in cases {
        let mut slot = vec![0xccu8; SEND_WQE_HEADER_LEN + 64];
        let n = encode_send_wqe(&mut slot, &wqe).unwrap();
        let tail = match wqe.data {
            WqeData::Sges(s) => 16 * s.len(),
            WqeData::Inline(b) => b.len(),
        };
        assert_eq!(n, SEND_WQE_HEADER_LEN + tail);
        assert_eq!(slot[n], 0xcc, "bytes past the WQE are left alone");
        let back = decode_send_wqe(&slot[..n], &limits).unwrap();
        assert_eq!(back, wqe, "{:?}", wqe.opcode);
    }
    // Where the C driver's layout puts the fields.
    let mut slot = vec![0u8; SEND_WQE_HEADER_LEN + 64];
    let w = SendWqe {
        opcode: WrOpcode::SendWithImm,
        imm_data: Some(0x0102_0304),
        ..base
    };
    encode_send_wqe(&mut slot, &w).unwrap();
    assert_eq!(&slot[WR_ID..WR_ID + 8], &w.wr_id.to_ne_bytes());
    assert_eq!(&slot[OPCODE..OPCODE + 4], &3u32.to_ne_bytes());
    // The doorbell reads the opcode alone, there.
    assert_eq!(SEND_WQE_OPCODE_OFFSET, OPCODE);
    assert_eq!(&slot[SEND_FLAGS..SEND_FLAGS + 4], &2u32.to_ne_bytes());
    assert_eq!(&slot[EX..EX + 4], &[1, 2, 3, 4]);
    assert_eq!(&slot[DMA_LENGTH..DMA_LENGTH + 4], &11u32.to_ne_bytes());
    assert_eq!(&slot[DMA_NUM_SGE..DMA_NUM_SGE + 4], &2u32.to_ne_bytes());
    assert_eq!(&slot[WR..WR + 4], &[0; 4]);
    // Too small a slot, too many SGEs for the layout's counter: refused, nothing panics.
    assert_eq!(
        encode_send_wqe(&mut slot[..SEND_WQE_HEADER_LEN + 8], &base),
        Err(WqeError::Truncated)
    );
}

/// A reader copies only what `copy_send_wqe` names of a slot, into a buffer that holds
/// whatever an earlier WQE left: decoding that must give what decoding the whole slot gives,
/// for any bytes.
#[test]
fn what_copy_send_wqe_copies_decodes_as_the_whole_slot() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let limits = [
        RC,
        UD_KERNEL,
        SendQueueLimits {
            qp_type: QpType::Rc,
            max_sge: 32,
            max_inline: 512,
            kernel: true,
        },
    ];
    let mut slot = vec![0u8; 208 + 512];
    let mut buf = vec![0u8; 208 + 512];
    let (mut shorter, mut decoded) = (0, 0);
    for _ in 0..100_000 {
        for b in slot.iter_mut().chain(buf.iter_mut()) {
            *b = next() as u8;
        }
        // Every opcode, kernel-only registration included.
        let opcode = match next() % 18 {
            17 => 0x20,
            n => n as u32,
        };
        slot[OPCODE..OPCODE + 4].copy_from_slice(&opcode.to_ne_bytes());
        slot[SEND_FLAGS..SEND_FLAGS + 4].copy_from_slice(&((next() % 32) as u32).to_ne_bytes());
        slot[DMA_NUM_SGE..DMA_NUM_SGE + 4].copy_from_slice(&((next() % 40) as u32).to_ne_bytes());
        slot[DMA_LENGTH..DMA_LENGTH + 4].copy_from_slice(&((next() % 600) as u32).to_ne_bytes());
        let whole = &slot[..(next() as usize) % slot.len()];
        let n = copy_send_wqe(&mut buf, whole.len(), |off, dst: &mut [u8]| {
            dst.copy_from_slice(&whole[off..off + dst.len()]);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(n <= whole.len());
        shorter += usize::from(n < whole.len());
        let l = &limits[(next() % 3) as usize];
        let expect = decode_send_wqe(whole, l);
        decoded += usize::from(expect.is_ok());
        assert_eq!(decode_send_wqe(&buf[..n], l), expect);
    }
    // Neither vacuous: many slots are longer than their WQE, many WQEs decode.
    assert!(shorter > 20_000, "{shorter}");
    assert!(decoded > 5_000, "{decoded}");
}

#[test]
fn send_wqe_len_counts_inline_data_or_sges() {
    let mut s = Slot::send(0, 4);
    s.u32(SEND_FLAGS, SendFlags::INLINE).u32(DMA_LENGTH, 10);
    assert_eq!(send_wqe_len(&s.0, s.0.len()), SEND_WQE_HEADER_LEN + 10);
    let mut s = Slot::send(0, 4);
    s.sges(SEND_WQE_HEADER_LEN, DMA_NUM_SGE, &[(1, 2, 3), (4, 5, 6)]);
    assert_eq!(send_wqe_len(&s.0, s.0.len()), SEND_WQE_HEADER_LEN + 32);
    // An ATOMIC WRITE's 8 bytes, whatever the length says.
    let s = Slot::send(15, 4);
    assert_eq!(send_wqe_len(&s.0, s.0.len()), SEND_WQE_HEADER_LEN + 8);
    // Counts beyond the slot, or no whole header: the slot.
    let mut s = Slot::send(0, 1);
    s.u32(DMA_NUM_SGE, 1000);
    assert_eq!(send_wqe_len(&s.0, s.0.len()), s.0.len());
    assert_eq!(send_wqe_len(&s.0[..100], 100), 100);
}
