// SPDX-License-Identifier: GPL-2.0

//! The performance manager agent (PMA): answers performance management `Get`s of the port's
//! counters, so that the port's `counters` in sysfs exist and move with traffic (the C
//! driver has no `process_mad`, and no such counters).
//!
//! Answered: `ClassPortInfo` (extended counters, IETF layout), `PortCounters` (32-bit;
//! errors are zero) and `PortCountersExtended` (64-bit). Every other MAD goes on to the MAD
//! layer unanswered.

use crate::stats::{
    Counter,
    Counters, //
};
use kernel::{
    prelude::*,
    rdma::driver::{
        MadResult,
        MAD_SIZE, //
    },
};

/// Where the attribute data starts in a MAD: the 24-byte common header, then 40 bytes
/// reserved for the performance management class.
const DATA: usize = 24 + 40;

/// `IB_MGMT_CLASS_PERF_MGMT`.
const CLASS_PERF_MGMT: u8 = 0x04;
/// `IB_MGMT_METHOD_GET` and `IB_MGMT_METHOD_GET_RESP`.
const METHOD_GET: u8 = 0x01;
const METHOD_GET_RESP: u8 = 0x81;

/// Attribute IDs (`IB_PMA_*`).
const CLASS_PORT_INFO: u16 = 0x0001;
const PORT_COUNTERS: u16 = 0x0012;
const PORT_COUNTERS_EXT: u16 = 0x001d;

/// `IB_PMA_CLASS_CAP_EXT_WIDTH`: `PortCountersExtended` has every counter.
const CAP_EXT_WIDTH: u16 = 1 << 9;

/// What a `Get` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    ClassPortInfo,
    PortCounters,
    PortCountersExt,
}

/// Decodes a MAD this agent answers: a version 1 performance management `Get` of one of
/// its attributes.
fn query(mad: &[u8; MAD_SIZE]) -> Option<Query> {
    let (base_version, class, class_version, method) = (mad[0], mad[1], mad[2], mad[3]);
    if base_version != 1 || class != CLASS_PERF_MGMT || class_version != 1 || method != METHOD_GET {
        return None;
    }
    match u16::from_be_bytes([mad[16], mad[17]]) {
        CLASS_PORT_INFO => Some(Query::ClassPortInfo),
        PORT_COUNTERS => Some(Query::PortCounters),
        PORT_COUNTERS_EXT => Some(Query::PortCountersExt),
        _ => None,
    }
}

/// The counters a reply reports: bytes (counted in 4-byte words, as the PMA does) and
/// packets, each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PortCounts {
    xmit_bytes: u64,
    rcv_bytes: u64,
    xmit_packets: u64,
    rcv_packets: u64,
}

/// Writes `v` big-endian at byte `at` of the attribute data.
fn put(out: &mut [u8; MAD_SIZE], at: usize, v: &[u8]) {
    if let Some(d) = out.get_mut(DATA + at..DATA + at + v.len()) {
        d.copy_from_slice(v);
    }
}

/// Builds the answer to `input`, a query `q` of the port whose counts are `c`.
fn answer(input: &[u8; MAD_SIZE], q: Query, c: &PortCounts, out: &mut [u8; MAD_SIZE]) {
    out.fill(0);
    // The common header comes back with the response method and a zero status.
    if let (Some(d), Some(s)) = (out.get_mut(..24), input.get(..24)) {
        d.copy_from_slice(s);
    }
    out[3] = METHOD_GET_RESP;
    out[4] = 0;
    out[5] = 0;
    let sat32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX).to_be_bytes();
    match q {
        Query::ClassPortInfo => {
            // BaseVersion, ClassVersion, CapabilityMask.
            put(out, 0, &[1, 1]);
            put(out, 2, &CAP_EXT_WIDTH.to_be_bytes());
        }
        Query::PortCounters => {
            // The port asked about (PortSelect) comes back.
            out[DATA + 1] = input[DATA + 1];
            put(out, 24, &sat32(c.xmit_bytes / 4));
            put(out, 28, &sat32(c.rcv_bytes / 4));
            put(out, 32, &sat32(c.xmit_packets));
            put(out, 36, &sat32(c.rcv_packets));
        }
        Query::PortCountersExt => {
            out[DATA + 1] = input[DATA + 1];
            put(out, 8, &(c.xmit_bytes / 4).to_be_bytes());
            put(out, 16, &(c.rcv_bytes / 4).to_be_bytes());
            put(out, 24, &c.xmit_packets.to_be_bytes());
            put(out, 32, &c.rcv_packets.to_be_bytes());
            // Unicast: RC, UC and UD to one queue pair; multicast is not counted apart.
            put(out, 40, &c.xmit_packets.to_be_bytes());
            put(out, 48, &c.rcv_packets.to_be_bytes());
        }
    }
}

/// Answers `input` for a port whose counters are `counters` into `out`, if it is a
/// query this agent answers.
pub(crate) fn process_mad(
    counters: &Counters,
    input: &[u8; MAD_SIZE],
    out: &mut [u8; MAD_SIZE],
) -> MadResult {
    let Some(q) = query(input) else {
        return MadResult::Ignored;
    };
    let c = PortCounts {
        xmit_bytes: counters.get(Counter::SentBytes),
        rcv_bytes: counters.get(Counter::RcvdBytes),
        xmit_packets: counters.get(Counter::SentPkts),
        rcv_packets: counters.get(Counter::RcvdPkts),
    };
    answer(input, q, &c, out);
    MadResult::Reply
}

#[kunit_tests(rdma_rxe_rust_pma)]
mod tests {
    use super::*;

    fn get(attr: u16, port: u8) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[..4].copy_from_slice(&[1, CLASS_PERF_MGMT, 1, METHOD_GET]);
        m[8..16].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[DATA + 1] = port;
        m
    }

    /// The counters land where the core's sysfs reads them, in their units.
    #[test]
    fn counters_where_sysfs_reads_them() {
        let c = PortCounts {
            xmit_bytes: 4000,
            rcv_bytes: 8 << 32,
            xmit_packets: 7,
            rcv_packets: 9,
        };
        let mut out = [0xaau8; MAD_SIZE];
        let input = get(PORT_COUNTERS, 1);
        answer(&input, Query::PortCounters, &c, &mut out);
        assert_eq!(out[3], METHOD_GET_RESP);
        // The transaction id comes back.
        assert_eq!(&out[8..16], &input[8..16]);
        assert_eq!(out[DATA + 1], 1);
        assert_eq!(&out[DATA + 24..DATA + 28], &1000u32.to_be_bytes());
        // 32-bit counters saturate.
        assert_eq!(&out[DATA + 28..DATA + 32], &u32::MAX.to_be_bytes());
        assert_eq!(&out[DATA + 32..DATA + 36], &7u32.to_be_bytes());
        assert_eq!(&out[DATA + 36..DATA + 40], &9u32.to_be_bytes());
        // No error counted.
        assert_eq!(&out[DATA..DATA + 1], &[0]);

        answer(
            &get(PORT_COUNTERS_EXT, 1),
            Query::PortCountersExt,
            &c,
            &mut out,
        );
        assert_eq!(&out[DATA + 8..DATA + 16], &1000u64.to_be_bytes());
        assert_eq!(&out[DATA + 16..DATA + 24], &(2u64 << 32).to_be_bytes());
        assert_eq!(&out[DATA + 24..DATA + 32], &7u64.to_be_bytes());
        assert_eq!(&out[DATA + 32..DATA + 40], &9u64.to_be_bytes());

        answer(&get(CLASS_PORT_INFO, 0), Query::ClassPortInfo, &c, &mut out);
        assert_eq!(&out[DATA + 2..DATA + 4], &CAP_EXT_WIDTH.to_be_bytes());
    }

    /// Only performance management `Get`s of the three attributes are answered: a CM MAD,
    /// a `Set` or another attribute goes on to the MAD layer.
    #[test]
    fn answers_only_its_queries() {
        assert_eq!(query(&get(PORT_COUNTERS, 1)), Some(Query::PortCounters));
        assert_eq!(query(&get(0x0013, 1)), None);
        let mut set = get(PORT_COUNTERS, 1);
        set[3] = 0x02;
        assert_eq!(query(&set), None);
        let mut cm = get(PORT_COUNTERS, 1);
        cm[1] = 0x07;
        assert_eq!(query(&cm), None);
        let mut v2 = get(PORT_COUNTERS, 1);
        v2[0] = 2;
        assert_eq!(query(&v2), None);
    }
}
