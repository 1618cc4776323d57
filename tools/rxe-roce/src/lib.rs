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

/// Bytes handed out in pieces of at most `step` bytes, as the pages of a socket buffer are:
/// the host's [`roce::packet::Fragments`].
#[derive(Clone, Copy, Debug)]
pub struct Pieces<'a> {
    /// The bytes; offsets count from their start.
    pub bytes: &'a [u8],
    /// The largest piece, at least one byte.
    pub step: usize,
}

impl roce::packet::Fragments for Pieces<'_> {
    fn read(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        let Some(mut rest) = offset
            .checked_add(len)
            .and_then(|end| self.bytes.get(offset..end))
        else {
            return false;
        };
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(rest.len().min(self.step.max(1)));
            if !f(piece) {
                return false;
            }
            rest = after;
        }
        true
    }
}
