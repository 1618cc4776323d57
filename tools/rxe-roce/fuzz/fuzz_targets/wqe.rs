// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the WQE decoders: any ring slot decodes to a validated WQE or an
//! error, and what decodes keeps the promises of its type.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rxe_roce::roce::opcode::QpType;
use rxe_roce::roce::segment::MAX_MESSAGE_LEN;
use rxe_roce::roce::wqe::{
    decode_recv_wqe,
    decode_send_wqe,
    Remote,
    SendQueueLimits,
    WqeData, //
};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, slot)) = data.split_first() else {
        return;
    };
    let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi][usize::from(sel & 3)];
    let limits = SendQueueLimits {
        qp_type,
        max_sge: u32::from(sel >> 2) & 31,
        max_inline: 512,
        kernel: sel & 0x80 != 0,
    };
    if let Ok(wqe) = decode_send_wqe(slot, &limits) {
        assert!(wqe.opcode.allowed_on(qp_type));
        assert!(wqe.length <= MAX_MESSAGE_LEN);
        match wqe.data {
            WqeData::Sges(sges) => {
                assert!(sges.len() <= limits.max_sge as usize);
                let sum: u64 = sges.iter().map(|s| u64::from(s.length())).sum();
                assert_eq!(sum, u64::from(wqe.length));
            }
            WqeData::Inline(bytes) => assert_eq!(bytes.len(), wqe.length as usize),
        }
        if let Remote::Atomic { addr, .. } = wqe.remote {
            assert_eq!(addr & 7, 0);
            assert_eq!(wqe.length, 8);
        }
        if let Remote::Ud { ah_num, .. } = wqe.remote {
            assert_ne!(ah_num, 0);
        }
    }
    if let Ok(wqe) = decode_recv_wqe(slot, limits.max_sge) {
        assert!(wqe.sges.len() <= limits.max_sge as usize);
        assert!(wqe.length <= MAX_MESSAGE_LEN);
    }
});
