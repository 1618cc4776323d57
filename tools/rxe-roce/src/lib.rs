// SPDX-License-Identifier: GPL-2.0

//! Host build of the `rdma_rxe_rust` RoCEv2 protocol core.
//!
//! The protocol core lives in `drivers/infiniband/sw/rxe_rust/roce/` and is
//! compiled here unchanged, as a `no_std` library, so that it can be tested
//! and benchmarked on the host. This crate adds only what the kernel provides
//! in the module: the CRC-32 primitive. [`sim`] (which uses `std`) runs the
//! transport state machines against each other over a simulated faulty link.

#![no_std]

#[path = "../../../drivers/infiniband/sw/rxe_rust/roce/mod.rs"]
#[deny(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented,
    unsafe_code
)]
pub mod roce;

pub mod sim;

/// The CRC-32 primitive on the host, from the `crc32fast` crate.
///
/// Implements the kernel's `crc32_le()` semantics on top of `crc32fast`,
/// which works on the finalized (inverted) value.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCrc32;

impl roce::icrc::Crc32 for HostCrc32 {
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        let mut hasher = crc32fast::Hasher::new_with_initial(!seed);
        hasher.update(data);
        !hasher.finalize()
    }
}
