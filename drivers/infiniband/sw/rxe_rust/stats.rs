// SPDX-License-Identifier: GPL-2.0

//! Port counters, named and ordered as the C driver's (`rdma statistic show link rxe0/1`), then
//! optional ones the C driver does not have: received packets dropped, by reason, and tail-loss
//! probes sent.
//!
//! The optional counters show once enabled (`rdma statistic set link rxe0/1 optional-counters
//! drop_icrc,...`); sysfs and the default view keep the C driver's list.

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
    /// Dropped: its headers could not be made linear, or no memory to hold it.
    DropNoMemory,
    /// Dropped: no IPv4 header without options or IPv6 header without extensions.
    DropNetworkHeader,
    /// Dropped: the UDP length disagrees with the datagram's.
    DropUdpLength,
    /// Dropped: shorter than its headers, pad and ICRC.
    DropTruncated,
    /// Dropped: malformed otherwise (an opcode no transport has, a bad multicast QPN...).
    DropMalformed,
    /// Dropped: the ICRC is wrong.
    DropIcrc,
    /// Dropped: not addressed to a GID or multicast group of the port.
    DropNotOurs,
    /// Dropped: no queue pair has its destination QP number.
    DropNoQp,
    /// Dropped: its queue pair was being destroyed.
    DropQpGone,
    /// Dropped: too many packets waited for its queue pair.
    DropBusy,
    /// Dropped: its queue pair was not in a state that receives.
    DropQpState,
    /// Dropped: its queue pair was reset or destroyed while it waited.
    DropPurge,
    /// Discarded by its queue pair's transport: an opcode its type does not take, a response
    /// to nothing outstanding, a request while it sends a READ response, a malformed ACK.
    DropTransport,
    /// Sent: a tail-loss probe, the last packet sent again without a transport retry (a
    /// `duplicate_request` at the responder when nothing was lost).
    TailProbe,
}

/// The number of counters.
const COUNT: usize = 31;

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
    StatDesc::optional(c"drop_no_memory"),
    StatDesc::optional(c"drop_network_header"),
    StatDesc::optional(c"drop_udp_length"),
    StatDesc::optional(c"drop_truncated"),
    StatDesc::optional(c"drop_malformed"),
    StatDesc::optional(c"drop_icrc"),
    StatDesc::optional(c"drop_not_ours"),
    StatDesc::optional(c"drop_no_qp"),
    StatDesc::optional(c"drop_qp_gone"),
    StatDesc::optional(c"drop_busy"),
    StatDesc::optional(c"drop_qp_state"),
    StatDesc::optional(c"drop_purge"),
    StatDesc::optional(c"drop_transport"),
    StatDesc::optional(c"tail_probe"),
];

const _: () = assert!(Counter::TailProbe as usize + 1 == COUNT);

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
