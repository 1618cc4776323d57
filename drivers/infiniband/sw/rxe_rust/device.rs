// SPDX-License-Identifier: GPL-2.0

//! The Soft-RoCE device: one RDMA device with one port on top of an Ethernet netdevice.

use crate::{
    ah::{
        new_ah_table,
        AhTable, //
    },
    engine::Engine,
    mcast::McastTable,
    mr::{
        new_mr_table,
        MrTable, //
    },
    mw::{
        new_mw_table,
        MwTable, //
    },
    net::RoceSockets,
    param,
    qp::{
        new_qp_table,
        QpTable, //
    },
    srq::{
        new_srq_table,
        SrqTable, //
    },
    stats::Counters,
    Rxe, //
};
use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    AtomicU64,
    AtomicUsize,
    Ordering::AcqRel,
    Ordering::Acquire, //
};
use kernel::{
    net::device::NetDevice,
    prelude::*,
    rdma::device::Device,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        Mutex,
        SpinLockIrq, //
    },
};

/// The number of devices of this module whose data is alive.
static LIVE_DEVICES: AtomicUsize = AtomicUsize::new(0);

/// The number of devices of this module whose netdevice's removal began their unregistration
/// and whose data is still alive: the core keeps such a device's name until just after.
static GOING_DEVICES: AtomicUsize = AtomicUsize::new(0);

/// Counts a device's data as alive until it is dropped (the last field of [`RxeDev`]).
struct Live {
    /// Counted in [`GOING_DEVICES`].
    going: AtomicBool,
}

impl Live {
    fn new() -> Self {
        LIVE_DEVICES.fetch_add(1, AcqRel);
        Self {
            going: AtomicBool::new(false),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if *self.going.get_mut() {
            GOING_DEVICES.fetch_sub(1, AcqRel);
        }
        LIVE_DEVICES.fetch_sub(1, AcqRel);
    }
}

/// Returns whether a device whose netdevice went is still being unregistered.
pub(crate) fn devices_going() -> bool {
    GOING_DEVICES.load(Acquire) != 0
}

/// Waits, for at least `timeout_ms`, until no device whose netdevice went is still being
/// unregistered; returns whether none is.
///
/// The netdevice's removal does not wait for the device's unregistration, so `ip link del`
/// returns while the device still holds its name; a new device of that name, added right after
/// (as `rdma link add` after `ip link del`, which under the C driver waits for it), is refused
/// with `ENFILE` until that device is freed. (The core frees the name just after the device's
/// data is dropped: a few microseconds in which a new device could still find it taken.)
/// Process context.
pub(crate) fn wait_for_going_devices(timeout_ms: u32) -> bool {
    let mut left = timeout_ms;
    while devices_going() {
        if left == 0 {
            return false;
        }
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(10));
        left = left.saturating_sub(10);
    }
    true
}

/// Returns whether the data of a device of this module is still alive (the link type waits,
/// when it goes, until none is: [`LinkOps::devices_alive`]).
///
/// [`LinkOps::devices_alive`]: kernel::rdma::link::LinkOps::devices_alive
pub(crate) fn devices_alive() -> bool {
    LIVE_DEVICES.load(Acquire) != 0
}

/// The data of one Soft-RoCE device.
///
/// # Invariants
///
/// `sockets` holds this device's reference on the RoCEv2 sockets of its netdevice's namespace
/// until the device is removed or the netdevice unregistered, whichever comes first.
#[pin_data]
pub(crate) struct RxeDev {
    /// The UDP port 4791 sockets this device keeps open.
    ///
    /// First, so dropped first: the sockets hold no reference on their namespace, which the
    /// engine's reference on the netdevice keeps alive until it is dropped (when the
    /// notifier missed the netdevice's unregistration, a device already unregistering).
    #[pin]
    sockets: Mutex<Option<RoceSockets>>,
    /// EUI-64 identity derived from the netdevice's MAC (node and port GUID).
    pub(crate) guid: [u8; 8],
    /// The system image GUID (network byte order value); starts as `guid`, and
    /// `modify_device` may change it.
    pub(crate) sys_image_guid: AtomicU64,
    /// The port's capability flags (`IB_PORT_*`), which `modify_port` changes.
    pub(crate) port_cap_flags: AtomicU32,
    /// Packets dropped for a bad Q_Key since the last reset (`modify_port`).
    pub(crate) qkey_violations: AtomicU32,
    /// Whether `enable_driver` ran: a namespace move runs it again, with the port as it was.
    pub(crate) enabled_once: AtomicBool,
    /// The port counters.
    pub(crate) counters: Arc<Counters>,
    /// The protocol processing of the device's queue pairs.
    pub(crate) engine: Arc<Engine>,
    /// The multicast groups, which receive looks up in softirq context.
    #[pin]
    pub(crate) mcast: SpinLockIrq<McastTable>,
    /// Orders attaches and detaches, with the netdevice filter changes they make.
    #[pin]
    pub(crate) mcast_control: Mutex<()>,
    /// Live protection domains, bounded by the reported `max_pd`.
    pub(crate) pds: ObjectLimit,
    /// Live completion queues, bounded by the reported `max_cq`.
    pub(crate) cqs: ObjectLimit,
    /// Live queue pairs, bounded by the reported `max_qp`.
    pub(crate) qps: ObjectLimit,
    /// The queue pairs by number.
    pub(crate) qp_table: Arc<QpTable>,
    /// The address handles by number.
    pub(crate) ah_table: Arc<AhTable>,
    /// Live memory windows, bounded by the reported `max_mw`.
    pub(crate) mws: ObjectLimit,
    /// The memory windows by R_Key index.
    pub(crate) mw_table: Arc<MwTable>,
    /// Live shared receive queues, bounded by the reported `max_srq`.
    pub(crate) srqs: ObjectLimit,
    /// The shared receive queues by number.
    pub(crate) srq_table: Arc<SrqTable>,
    /// Live memory regions, bounded by the reported `max_mr`.
    pub(crate) mrs: ObjectLimit,
    /// The memory regions by key index.
    pub(crate) mr_table: Arc<MrTable>,
    /// Counted among the live devices until everything above is dropped.
    live: Live,
}

/// A count of live objects of one kind with a limit, as the device reports in `max_*`.
///
/// # Invariants
///
/// `live` never exceeds `max`, and equals the number of [`ObjectCount`]s taken from it.
pub(crate) struct ObjectLimit {
    live: Arc<Atomic<u32>>,
    max: u32,
}

impl ObjectLimit {
    fn new(max: u32) -> Result<Self> {
        Ok(Self {
            live: Arc::new(Atomic::new(0), GFP_KERNEL)?,
            max,
        })
    }

    /// Counts one more object, or fails with `EINVAL` at the limit (as the C driver's pools).
    pub(crate) fn take(&self) -> Result<ObjectCount> {
        let mut cur = self.live.load(Relaxed);
        loop {
            if cur >= self.max {
                return Err(EINVAL);
            }
            match self.live.cmpxchg(cur, cur + 1, Relaxed) {
                Ok(_) => {
                    return Ok(ObjectCount {
                        live: self.live.clone(),
                    })
                }
                Err(now) => cur = now,
            }
        }
    }
}

/// One object counted in an [`ObjectLimit`]; dropping it uncounts the object.
pub(crate) struct ObjectCount {
    live: Arc<Atomic<u32>>,
}

impl Drop for ObjectCount {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Relaxed);
    }
}

impl RxeDev {
    /// Creates the data of a device on `ndev` that uses `sockets`.
    pub(crate) fn new(ndev: &NetDevice, sockets: RoceSockets) -> Result<impl PinInit<Self, Error>> {
        let mac = ndev.hw_addr().unwrap_or_else(random_mac);
        let ndev: ARef<NetDevice> = ndev.into();
        let eui = eui64_from_mac(mac);
        let qp_table = new_qp_table()?;
        let ah_table = new_ah_table()?;
        let mr_table = new_mr_table()?;
        let mw_table = new_mw_table()?;
        let counters = Arc::new(Counters::new(), GFP_KERNEL)?;
        let engine = Engine::new(
            qp_table.clone(),
            mr_table.clone(),
            mw_table.clone(),
            ah_table.clone(),
            counters.clone(),
            ndev,
            mac,
        )?;
        Ok(try_pin_init!(Self {
            guid: eui,
            sys_image_guid: AtomicU64::new(guid_be(eui)),
            port_cap_flags: AtomicU32::new(param::PORT_CAP_FLAGS.bits()),
            qkey_violations: AtomicU32::new(0),
            enabled_once: AtomicBool::new(false),
            counters,
            engine,
            mcast <- kernel::new_spinlock_irq!(McastTable::new()),
            mcast_control <- kernel::new_mutex!(()),
            sockets <- kernel::new_mutex!(Some(sockets)),
            pds: ObjectLimit::new(param::MAX_PD as u32)?,
            cqs: ObjectLimit::new(param::MAX_CQ as u32)?,
            qps: ObjectLimit::new(param::MAX_QP as u32)?,
            qp_table,
            ah_table,
            mws: ObjectLimit::new(param::MAX_MW as u32)?,
            mw_table,
            srqs: ObjectLimit::new(param::MAX_SRQ as u32)?,
            srq_table: new_srq_table()?,
            mrs: ObjectLimit::new(param::MAX_MR as u32)?,
            mr_table,
            live: Live::new(),
        }))
    }

    /// Releases the device's sockets now rather than when the device is freed.
    ///
    /// The netdevice is leaving its namespace, which may be destroyed before the queued
    /// unregistration of this device completes.
    pub(crate) fn release_sockets(&self) {
        drop(self.sockets.lock().take());
    }

    /// Counts the device as going (see [`wait_for_going_devices`]) until its data is dropped.
    pub(crate) fn mark_going(&self) {
        if !self.live.going.swap(true, AcqRel) {
            GOING_DEVICES.fetch_add(1, AcqRel);
        }
    }
}

/// Returns the device on top of `ndev`, if any.
pub(crate) fn rxe_by_netdev(ndev: &NetDevice) -> Option<kernel::rdma::device::DeviceRef<Rxe>> {
    Device::<Rxe>::get_by_netdev(ndev)
}

/// A locally administered unicast MAC for netdevices without one (e.g. tun).
fn random_mac() -> [u8; 6] {
    let mut mac = [0u8; 6];
    kernel::random::fill_bytes(&mut mac);
    mac[0] = (mac[0] & 0xfe) | 0x02;
    mac
}

/// Returns the modified EUI-64 of a MAC address (RFC 4291, appendix A).
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Returns the node GUID value to store in `ib_device` (network byte order in memory).
pub(crate) fn guid_be(guid: [u8; 8]) -> u64 {
    u64::from_ne_bytes(guid)
}

const _: () = assert!(param::PORT == 1);

#[kunit_tests(rdma_rxe_rust_device)]
mod tests {
    use super::*;

    #[test]
    fn eui64_flips_universal_local_bit() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        assert_eq!(
            eui64_from_mac([0x02, 0, 0, 0, 0, 1]),
            [0, 0, 0, 0xff, 0xfe, 0, 0, 1]
        );
    }

    #[test]
    fn random_mac_is_local_unicast() {
        for _ in 0..16 {
            let m = random_mac();
            assert_eq!(m[0] & 0x03, 0x02);
        }
    }
}
