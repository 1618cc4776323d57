// SPDX-License-Identifier: GPL-2.0

//! Networking.

pub mod device;
pub mod namespace;
pub mod notifier;
#[cfg(CONFIG_RUST_PHYLIB_ABSTRACTIONS)]
pub mod phy;
pub mod skbuff;
#[cfg(CONFIG_RUST_RDMA_ABSTRACTIONS)]
pub mod udp_tunnel;
