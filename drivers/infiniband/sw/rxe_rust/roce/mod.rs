// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 protocol core: wire format, ICRC and transport arithmetic.
//!
//! Everything under this module depends on nothing but `core` and `zerocopy`:
//! no allocation, no `unsafe`, no kernel bindings and no panics on any input.
//! The same source files are compiled into `rdma_rxe_rust` and into the host
//! crate `tools/rxe-roce`, where they are unit-tested against packets captured
//! from the C `rdma_rxe` driver. Names follow the InfiniBand Architecture
//! Specification (IBTA), volume 1, chapter 9, and its RoCEv2 annex (A17).
//!
//! - [`opcode`]: the BTH opcodes and what each implies (headers, payload,
//!   position in a message, transports that may use it).
//! - [`headers`]: typed views of BTH, DETH, RETH, AETH, AtomicETH,
//!   AtomicAckETH, ImmDt, IETH and FETH over a byte slice.
//! - [`packet`]: parsing and validating a UDP payload, and building one in
//!   place.
//! - [`icrc`]: the invariant CRC over the RoCEv2 pseudo header, with the
//!   CRC-32 primitive supplied by the caller.
//! - [`psn`], [`aeth`], [`timer`], [`mtu`], [`segment`]: transport arithmetic.
//! - [`reorder`]: requests that came early, held until those before them come.
//! - [`slots`]: the caller's storage of the transport's larger tables.
//! - [`wqe`]: decoding send and receive work queue entries from untrusted
//!   shared memory.
//! - [`requester`], [`completer`], [`responder`] and [`qp`]: the RC, UC and
//!   UD transport as state machines that take events (a WQE posted, a packet
//!   received, a timer fired) and act through the traits of [`io`] (packets,
//!   completions, timers, async events) and [`memory`] (copies and atomics
//!   checked against L_Keys and R_Keys).

pub mod aeth;
pub mod completer;
pub mod headers;
pub mod icrc;
pub mod io;
pub mod memory;
pub mod mtu;
pub mod opcode;
pub mod packet;
pub mod psn;
pub mod qp;
pub mod reorder;
pub mod requester;
pub mod responder;
pub mod segment;
pub mod slots;
pub mod timer;
pub mod wqe;
