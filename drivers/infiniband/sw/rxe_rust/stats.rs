// SPDX-License-Identifier: GPL-2.0

//! Port counters, named and ordered as the C driver's (`rdma statistic show link rxe0/1`).

use core::sync::atomic::{
    AtomicU64,
    Ordering::Relaxed, //
};
use kernel::rdma::stats::StatDesc;

/// A port counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    dead_code,
    reason = "the data path (next step) counts packets, bytes and errors"
)]
pub(crate) enum Counter {
    SentPkts,
    RcvdPkts,
    DuplicateRequest,
    OutOfSeqRequest,
    RcvdRnrErr,
    SendRnrErr,
    RcvdSeqErr,
    AckDeferred,
    RetryExceededErr,
    RetryRnrExceededErr,
    CompleterRetryErr,
    SendErr,
    /// The port went down (`NETDEV_DOWN` or a carrier loss).
    LinkDowned,
    RdmaSends,
    RdmaRecvs,
    SentBytes,
    RcvdBytes,
}

/// The number of counters.
const COUNT: usize = 17;

/// The counters' names, in [`Counter`] order.
pub(crate) static NAMES: [StatDesc; COUNT] = [
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"ack_deferred"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"link_downed"),
    StatDesc::new(c"rdma_sends"),
    StatDesc::new(c"rdma_recvs"),
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"rcvd_bytes"),
];

const _: () = assert!(Counter::RcvdBytes as usize + 1 == COUNT);

/// The values of a device's counters.
pub(crate) struct Counters([AtomicU64; COUNT]);

impl Counters {
    /// Creates counters at zero.
    pub(crate) fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNT])
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Relaxed);
    }

    /// Returns the value of `c`.
    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.0[c as usize].load(Relaxed)
    }

    /// Copies the values into `out`, in [`Counter`] order.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.0.iter()) {
            *o = v.load(Relaxed);
        }
    }
}
