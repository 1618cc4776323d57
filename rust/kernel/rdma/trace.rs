// SPDX-License-Identifier: GPL-2.0

//! Tracepoints on the packet path of the Soft-RoCE driver.
//!
//! C header: [`include/trace/events/rxe_rust.h`](srctree/include/trace/events/rxe_rust.h).
//!
//! The events (`TRACE_SYSTEM rxe_rust`) are created in the driver module
//! (`drivers/infiniband/sw/rxe_rust/rxe_rust_trace.c`), as `rust_binder` creates its own; they
//! live here rather than in the driver so that the driver has no `unsafe`. These functions are
//! inlined into their caller (a private copy in each crate that calls them, none in this one)
//! and resolve against the module's tracepoints when it is linked: only that module can call
//! them; any other caller gets a link error. Each costs a static branch while its event is off.

// `declare_trace!`'s metavariables in its unsafe block are the identifiers of the generated
// function's own parameters, plain values here. `allow`, not `expect`: without
// `CONFIG_TRACEPOINTS` the block, and the lint, are gone.
#![allow(clippy::macro_metavars_in_unsafe)]

use crate::{
    bindings,
    ffi::c_char,
    rdma::cq::WorkCompletion,
    str::{
        CStr,
        CStrExt, //
    },
    tracepoint::declare_trace, //
};

declare_trace! {
    /// # Safety
    ///
    /// No requirements: the event takes plain values.
    unsafe fn rxe_rust_xmit(
        dev: u32,
        qpn: u32,
        dest_qpn: u32,
        opcode: u8,
        psn: u32,
        len: u32,
        linear: u32,
    );
    /// # Safety
    ///
    /// No requirements: the event takes plain values.
    unsafe fn rxe_rust_recv(
        dev: u32,
        qpn: u32,
        dest_qpn: u32,
        opcode: u8,
        psn: u32,
        len: u32,
        linear: u32,
    );
    /// # Safety
    ///
    /// `reason` must point to a NUL-terminated string, valid for the call.
    unsafe fn rxe_rust_drop(dev: u32, qpn: u32, reason: *const c_char);
    /// # Safety
    ///
    /// No requirements: the event takes plain values.
    unsafe fn rxe_rust_retransmit(dev: u32, qpn: u32, psn: u32, cause: u8);
    /// # Safety
    ///
    /// No requirements: the event takes plain values.
    unsafe fn rxe_rust_rnr_nak(dev: u32, qpn: u32, psn: u32, timer: u8, sent: bool);
    /// # Safety
    ///
    /// No requirements: the event takes plain values.
    unsafe fn rxe_rust_complete(
        dev: u32,
        qpn: u32,
        wr_id: u64,
        status: u32,
        opcode: u32,
        byte_len: u32,
        recv: bool,
    );
}

/// What the packet events report of a packet: its device, queue pair, BTH fields and length.
#[derive(Clone, Copy, Debug)]
pub struct PacketFields {
    /// The device's index ([`super::device::Device::index`]).
    pub dev: u32,
    /// The local queue pair: the sender's for a packet sent, the receiver's for one received.
    pub qpn: u32,
    /// The BTH's destination QP.
    pub dest_qpn: u32,
    /// The BTH's opcode.
    pub opcode: u8,
    /// The BTH's PSN.
    pub psn: u32,
    /// The packet's length from the BTH to the ICRC.
    pub len: u32,
}

/// Evaluates to whether the event of the tracepoint `bindings::$tp` is on: a static branch.
macro_rules! event_enabled {
    ($tp:ident) => {{
        #[cfg(CONFIG_TRACEPOINTS)]
        {
            // SAFETY: `bindings::$tp` is an event's tracepoint, a static defined by C, whose key
            // may always be queried.
            unsafe {
                crate::jump_label::static_branch_unlikely!(bindings::$tp, bindings::tracepoint, key)
            }
        }
        #[cfg(not(CONFIG_TRACEPOINTS))]
        false
    }};
}

/// Returns whether `rxe_rust:rxe_rust_xmit` is on, so that a caller gathers the event's fields
/// only then.
#[inline(always)]
pub fn xmit_enabled() -> bool {
    event_enabled!(__tracepoint_rxe_rust_xmit)
}

/// Returns whether `rxe_rust:rxe_rust_recv` is on, as [`xmit_enabled`].
#[inline(always)]
pub fn recv_enabled() -> bool {
    event_enabled!(__tracepoint_rxe_rust_recv)
}

/// Reports a packet that left a queue pair (`rxe_rust:rxe_rust_xmit`).
#[inline(always)]
pub fn xmit(p: &PacketFields) {
    // A packet sent is built in one piece.
    // SAFETY: No requirements (see the event's `# Safety`).
    unsafe { rxe_rust_xmit(p.dev, p.qpn, p.dest_qpn, p.opcode, p.psn, p.len, p.len) }
}

/// Reports a packet that reached its queue pair's transport (`rxe_rust:rxe_rust_recv`), of
/// which the first `linear` bytes are in one piece (less than `p.len` when its payload is read
/// from a socket buffer's pages).
#[inline(always)]
pub fn recv(p: &PacketFields, linear: u32) {
    // SAFETY: No requirements (see the event's `# Safety`).
    unsafe { rxe_rust_recv(p.dev, p.qpn, p.dest_qpn, p.opcode, p.psn, p.len, linear) }
}

/// Reports a received packet dropped for `reason`, before its queue pair's transport took it
/// or by that transport (`rxe_rust:rxe_rust_drop`); `qpn` is its destination, `0xffffff` if
/// none was read.
#[inline(always)]
pub fn rx_drop(dev: u32, qpn: u32, reason: &CStr) {
    // SAFETY: `reason` is NUL-terminated and outlives the call, which copies it.
    unsafe { rxe_rust_drop(dev, qpn, reason.as_char_ptr()) }
}

/// Why a requester sends again what it sent (`enum rxe_rust_retransmit_cause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RetransmitCause {
    /// A NAK: a transport retry.
    Nak = bindings::rxe_rust_retransmit_cause_RXE_RUST_RETRANSMIT_NAK as u8,
    /// The local ACK timeout expired: a transport retry.
    Timeout = bindings::rxe_rust_retransmit_cause_RXE_RUST_RETRANSMIT_TIMEOUT as u8,
    /// The reorder window after an implied NAK ended: a transport retry of the gaps.
    Reorder = bindings::rxe_rust_retransmit_cause_RXE_RUST_RETRANSMIT_REORDER as u8,
    /// Nothing was acknowledged for a while: the last packet again, before the timeout.
    TailProbe = bindings::rxe_rust_retransmit_cause_RXE_RUST_RETRANSMIT_TAIL_PROBE as u8,
    /// The RNR timer expired: the request an RNR NAK refused.
    Rnr = bindings::rxe_rust_retransmit_cause_RXE_RUST_RETRANSMIT_RNR as u8,
}

/// Reports a requester going back to send again from `psn` (`rxe_rust:rxe_rust_retransmit`).
#[inline(always)]
pub fn retransmit(dev: u32, qpn: u32, psn: u32, cause: RetransmitCause) {
    // SAFETY: No requirements (see the event's `# Safety`).
    unsafe { rxe_rust_retransmit(dev, qpn, psn, cause as u8) }
}

/// Reports an RNR NAK for the request at `psn`, carrying the RNR timer code `timer`
/// (`rxe_rust:rxe_rust_rnr_nak`): sent by a responder if `sent`, else received by a requester.
#[inline(always)]
pub fn rnr_nak(dev: u32, qpn: u32, psn: u32, timer: u8, sent: bool) {
    // SAFETY: No requirements (see the event's `# Safety`).
    unsafe { rxe_rust_rnr_nak(dev, qpn, psn, timer, sent) }
}

/// Reports the work completion `wc` of a send queue, or of a receive queue if `recv`
/// (`rxe_rust:rxe_rust_complete`).
#[inline(always)]
pub fn complete(dev: u32, wc: &WorkCompletion, recv: bool) {
    // SAFETY: No requirements (see the event's `# Safety`).
    unsafe {
        rxe_rust_complete(
            dev,
            wc.qp_num,
            wc.wr_id,
            wc.status.raw(),
            wc.opcode.raw(),
            wc.byte_len,
            recv,
        )
    }
}
