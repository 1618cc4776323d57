// SPDX-License-Identifier: GPL-2.0

//! Tracepoints on the packet path of the Soft-RoCE driver.
//!
//! C header: [`include/trace/events/rxe_rust.h`](srctree/include/trace/events/rxe_rust.h).
//!
//! The events (`TRACE_SYSTEM rxe_rust`) are created in the driver module
//! (`drivers/infiniband/sw/rxe_rust/rxe_rust_trace.c`), not in the kernel: these functions are
//! inlined into their caller and resolve against that module's tracepoints when it is linked, so
//! only that module can call them. Each costs a static branch while its event is off.

// `declare_trace!` passes its arguments into an unsafe block; here they are plain values.
#![allow(clippy::macro_metavars_in_unsafe)]

use crate::{
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
    /// Always safe to call: the event takes plain values.
    unsafe fn rxe_rust_xmit(dev: u32, qpn: u32, dest_qpn: u32, opcode: u8, psn: u32, len: u32);
    /// # Safety
    ///
    /// Always safe to call: the event takes plain values.
    unsafe fn rxe_rust_recv(dev: u32, qpn: u32, dest_qpn: u32, opcode: u8, psn: u32, len: u32);
    /// # Safety
    ///
    /// `reason` must point to a NUL-terminated string, valid for the call.
    unsafe fn rxe_rust_drop(dev: u32, qpn: u32, reason: *const c_char);
    /// # Safety
    ///
    /// Always safe to call: the event takes plain values.
    unsafe fn rxe_rust_retransmit(dev: u32, qpn: u32, psn: u32, cause: u8);
    /// # Safety
    ///
    /// Always safe to call: the event takes plain values.
    unsafe fn rxe_rust_rnr_nak(dev: u32, qpn: u32, psn: u32, timer: u8, sent: bool);
    /// # Safety
    ///
    /// Always safe to call: the event takes plain values.
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

/// The fields of a packet's base transport header (BTH) that the packet events report.
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

/// Reports a packet that left a queue pair (`rxe_rust:rxe_rust_xmit`).
#[inline(always)]
pub fn xmit(p: &PacketFields) {
    // SAFETY: The event takes plain values.
    unsafe { rxe_rust_xmit(p.dev, p.qpn, p.dest_qpn, p.opcode, p.psn, p.len) }
}

/// Reports a packet that reached its queue pair's transport (`rxe_rust:rxe_rust_recv`).
#[inline(always)]
pub fn recv(p: &PacketFields) {
    // SAFETY: The event takes plain values.
    unsafe { rxe_rust_recv(p.dev, p.qpn, p.dest_qpn, p.opcode, p.psn, p.len) }
}

/// Reports a received packet dropped for `reason` (`rxe_rust:rxe_rust_drop`); `qpn` is its
/// destination, `0xffffff` if it had none that could be read.
#[inline(always)]
pub fn drop(dev: u32, qpn: u32, reason: &CStr) {
    // SAFETY: `reason` is NUL-terminated and outlives the call.
    unsafe { rxe_rust_drop(dev, qpn, reason.as_char_ptr()) }
}

/// Why a requester sends again what it sent, as `rxe_rust_retransmit` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RetransmitCause {
    /// A NAK or an implied NAK.
    Nak = 0,
    /// The local ACK timeout expired.
    Timeout = 1,
    /// Nothing was acknowledged for a while: the last packet again, before the timeout.
    TailProbe = 2,
}

/// Reports a requester going back to send again from `psn` (`rxe_rust:rxe_rust_retransmit`).
#[inline(always)]
pub fn retransmit(dev: u32, qpn: u32, psn: u32, cause: RetransmitCause) {
    // SAFETY: The event takes plain values.
    unsafe { rxe_rust_retransmit(dev, qpn, psn, cause as u8) }
}

/// Reports an RNR NAK for the request at `psn`, carrying the RNR timer code `timer`
/// (`rxe_rust:rxe_rust_rnr_nak`): sent by a responder if `sent`, else received by a requester.
#[inline(always)]
pub fn rnr_nak(dev: u32, qpn: u32, psn: u32, timer: u8, sent: bool) {
    // SAFETY: The event takes plain values.
    unsafe { rxe_rust_rnr_nak(dev, qpn, psn, timer, sent) }
}

/// Reports the work completion `wc` of a send queue, or of a receive queue if `recv`
/// (`rxe_rust:rxe_rust_complete`).
#[inline(always)]
pub fn complete(dev: u32, wc: &WorkCompletion, recv: bool) {
    // SAFETY: The event takes plain values.
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
