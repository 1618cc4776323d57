// SPDX-License-Identifier: GPL-2.0

//! Soft-RoCE: RDMA over Converged Ethernet (RoCEv2) in software.
//!
//! The Rust reference driver for Soft-RoCE. It registers the same `rxe` link type and user
//! ABI as the C driver (`drivers/infiniband/sw/rxe`), so unmodified rdma-core works with it:
//!
//! ```text
//! rdma link add rxe0 type rxe netdev eth0
//! ```
//!
//! - [`net`]: link creation, netdevice events, the UDP port 4791 sockets;
//! - [`device`]: the device on top of a netdevice;
//! - [`verbs`]: what the RDMA core calls;
//! - [`param`]: the limits and capabilities reported;
//! - [`icrc`]: the ICRC with the kernel's CRC-32;
//! - [`tx`], [`rx`]: packets to and from other hosts, in UDP;
//! - [`roce`]: the RoCEv2 protocol core (wire format, ICRC, transport arithmetic), shared with
//!   the host test crate `tools/rxe-roce`.

use kernel::{
    net::notifier::NetdevNotifier,
    prelude::*,
    rdma::link::LinkRegistration, //
};

mod ah;
mod buffers;
mod cq;
mod device;
mod engine;
mod icrc;
#[cfg(CONFIG_KUNIT)]
mod icrc_vectors;
mod index;
mod mcast;
mod mr;
mod mw;
mod net;
mod odp;
mod param;
mod pd;
mod pma;
mod qp;
mod queue;
mod srq;
mod stats;
mod transport;
// The data path (requester, responder, completer) is what uses the protocol core.
// The protocol core is also the public API of the host test crate, hence `pub` items that this
// crate does not re-export.
#[allow(unreachable_pub)]
#[expect(
    dead_code,
    reason = "the protocol core is wired to the data path in a later step"
)]
mod roce;
mod rx;
mod tx;
mod verbs;

pub(crate) use verbs::Rxe;

module! {
    type: RxeModule,
    name: "rdma_rxe_rust",
    authors: ["rdma_rxe_rust developers"],
    description: "Soft RDMA transport (RoCEv2), Rust reference driver",
    license: "Dual BSD/GPL",
    alias: ["rdma-link-rxe"],
}

/// The module: its link type and its netdevice notifier.
///
/// Fields drop in order: the link type goes first, taking this driver's devices with it (and
/// only those: the C driver's have the same driver id), and waiting for those whose removal
/// had begun elsewhere; then the notifier that followed their netdevices goes.
#[pin_data]
struct RxeModule {
    #[pin]
    link: LinkRegistration<net::RxeLink>,
    #[pin]
    notifier: NetdevNotifier<net::RxeNetdevEvents>,
}

impl kernel::InPlaceModule for RxeModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            notifier <- NetdevNotifier::new(),
            link <- LinkRegistration::new(net::RxeLink::new()),
        })
        .pin_chain(|_| {
            pr_info!("loaded\n");
            Ok(())
        })
    }
}
