// SPDX-License-Identifier: GPL-2.0

//! The network glue: link creation, netdevice events and the RoCEv2 UDP sockets.

use crate::{
    device::{
        devices_going,
        guid_be,
        rxe_by_netdev,
        wait_for_going_devices,
        RxeDev, //
    },
    param,
    stats::Counter,
    Rxe, //
};
use kernel::{
    net::{
        device::NetDevice,
        notifier::{
            NetdevEvent,
            NetdevNotify, //
        },
        skbuff::{
            SkBuff,
            SkbDropReason, //
        },
        udp_tunnel::{
            EncapRecv,
            SharedSockets,
            SharedSocketsRef, //
        },
    },
    prelude::*,
    rdma::{
        device::{
            Unregistered,
            UverbsCmd, //
        },
        link::{
            LinkOps,
            LinkSlot, //
        },
    },
    sync::Arc,
};

/// The RoCEv2 UDP destination port (IANA).
pub(crate) const ROCE_V2_UDP_DPORT: u16 = kernel::rdma::ROCE_V2_UDP_DPORT;

/// A device's reference on the port 4791 sockets of its namespace.
pub(crate) type RoceSockets = SharedSocketsRef<RoceRecv>;

/// Receives RoCEv2 datagrams.
pub(crate) struct RoceRecv;

impl EncapRecv for RoceRecv {
    fn recv(skb: SkBuff, dev: Option<&NetDevice>) {
        // A datagram that is not for one of our devices, or not a valid packet for it, is
        // dropped (and counted as a drop by the network stack).
        let Some(rxe) = dev.and_then(rxe_by_netdev) else {
            skb.drop_with_reason(SkbDropReason::NoSocket);
            return;
        };
        // A drop is counted and traced (`rxe_rust_drop`) where it happens; no log line: a
        // flood of bad packets would flood the log (65,700 lines in one `rxe_rust_fuzz` run on
        // a kernel with debug assertions, where `pr_debug!` prints).
        let _ = crate::rx::receive(&rxe, skb);
    }
}

/// The "rxe" link type.
#[pin_data]
pub(crate) struct RxeLink {
    /// The UDP sockets, shared by the devices of each network namespace.
    sockets: Arc<SharedSockets<RoceRecv>>,
}

static RXE_LINK_SLOT: LinkSlot<RxeLink> = LinkSlot::new();

/// How long a new link waits, at least, for devices whose netdevice went to finish their
/// unregistration (as long as the RDMA clients' removal takes: seconds on a debug kernel).
const GOING_WAIT_MS: u32 = 30_000;

/// How long a new link goes on asking for a name that a device which just went may still hold.
///
/// The core frees the name a few microseconds after the device's data is dropped
/// ([`wait_for_going_devices`] returns then).
///
/// [`wait_for_going_devices`]: crate::device::wait_for_going_devices
const NAME_RETRY_MS: u32 = 100;

impl RxeLink {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            sockets: SharedSockets::new(ROCE_V2_UDP_DPORT)?,
        })
    }
}

impl LinkOps for RxeLink {
    type Driver = Rxe;

    const TYPE: &'static CStr = c"rxe";
    const CONFLICTS: &'static [&'static CStr] = &[c"rdma_rxe"];

    fn slot() -> &'static LinkSlot<Self> {
        &RXE_LINK_SLOT
    }

    fn devices_alive() -> bool {
        crate::device::devices_alive()
    }

    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result {
        if ndev.is_vlan() {
            pr_err!("rxe creation allowed on top of a real device only\n");
            return Err(EPERM);
        }
        // A device whose netdevice was just deleted may still hold the name asked for (`ip
        // link del` does not wait for its unregistration), and the core refuses the name with
        // `ENFILE` until that device is gone. Waited for only then, so that a link of another
        // name does not wait; a name held by a live device is refused at once unless some
        // other device is going too. The core frees the name just after the device's data
        // goes: a few more tries cover that.
        let going = devices_going();
        let mut retry_ms = 0;
        loop {
            match self.add(name, ndev) {
                Err(e) if e == ENFILE && going && retry_ms < NAME_RETRY_MS => {
                    if retry_ms == 0 && !wait_for_going_devices(GOING_WAIT_MS) {
                        pr_warn!("devices whose netdevice went are still being removed\n");
                        return Err(e);
                    }
                    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
                    retry_ms += 10;
                }
                Err(e) if e == ENFILE => {
                    pr_err!("failed to add {}: the name is taken\n", ndev.name());
                    return Err(e);
                }
                r => return r,
            }
        }
    }
}

impl RxeLink {
    /// Adds a device named `name` on `ndev`.
    fn add(&self, name: &CStr, ndev: &NetDevice) -> Result {
        if rxe_by_netdev(ndev).is_some() {
            pr_err!("already configured on {}\n", ndev.name());
            return Err(EEXIST);
        }

        // The namespace the netdevice is in now (a later move is followed by the notifier).
        let net = ndev.net().ok_or(ENODEV)?;
        let sockets = self.sockets.get(&net).inspect_err(|e| {
            pr_err!("failed to open UDP port {}: {:?}\n", ROCE_V2_UDP_DPORT, e);
        })?;
        let mut dev = Unregistered::<Rxe>::new(&crate::THIS_MODULE, RxeDev::new(ndev, sockets)?)?;
        dev.mark_name_assigned_by_user();
        dev.set_node_desc(b"rxe");
        dev.set_node_type_ca();
        dev.set_phys_port_cnt(1)?;
        dev.set_num_comp_vectors(kernel::cpu::nr_cpu_ids() as i32);
        dev.set_node_guid(guid_be(dev.guid));
        dev.enable_uverbs_cmds(&[UverbsCmd::PostSend, UverbsCmd::ReqNotifyCq]);
        dev.set_netdev(ndev, param::PORT)?;
        dev.register(name).inspect_err(|e| {
            // The caller reports a name taken, which it may ask for again.
            if *e != ENFILE {
                pr_err!("failed to add {}: {:?}\n", ndev.name(), e);
            }
        })
    }
}

/// Follows the netdevices our devices sit on.
pub(crate) struct RxeNetdevEvents;

impl NetdevNotify for RxeNetdevEvents {
    fn notify(event: NetdevEvent, ndev: &NetDevice) {
        // Port state and MTU are read from the netdevice on each query, and the core turns
        // up/down into port events; we count the port going down, and follow the
        // netdevice's departure.
        match event {
            NetdevEvent::Down | NetdevEvent::Change => {
                if let Some(rxe) = rxe_by_netdev(ndev) {
                    if !ndev.is_operational() {
                        rxe.counters.inc(Counter::LinkDowned);
                    }
                }
            }
            NetdevEvent::Unregister => {
                if let Some(rxe) = rxe_by_netdev(ndev) {
                    // The namespace may go right after this: close our sockets in it now.
                    rxe.release_sockets();
                    // The netdevice does not wait for the device's unregistration (its
                    // clients' removal, every queue pair's destruction): the driver drops its
                    // references, and the core's port reference goes too, as the core asks of
                    // a driver that keeps its device past its netdevice. The C driver keeps
                    // the port's, so its netdevice waits for the whole unregistration.
                    rxe.engine.release_netdev();
                    // Consumers learn of it now, their WQEs flushed, not at their next
                    // transmit (the device's unregistration may destroy a process's queue
                    // pairs before then, see `disassociate_ucontext`).
                    rxe.engine.fail_connections();
                    if let Err(e) = rxe.detach_netdev(param::PORT) {
                        pr_warn!("cannot detach netdevice {}: {:?}\n", ndev.name(), e);
                    }
                    rxe.mark_going();
                    rxe.unregister_queued();
                }
            }
            _ => (),
        }
    }
}
