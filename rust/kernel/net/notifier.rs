// SPDX-License-Identifier: GPL-2.0

//! Network device notifiers.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    error::to_result,
    net::device::NetDevice,
    prelude::*,
    types::Opaque, //
};
use core::marker::PhantomData;

/// An event on a network device, as delivered to a [`NetdevNotifier`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NetdevEvent {
    /// The device was opened (`NETDEV_UP`).
    Up,
    /// The device was closed (`NETDEV_DOWN`).
    Down,
    /// The device is about to close (`NETDEV_GOING_DOWN`).
    GoingDown,
    /// The device changed state, e.g. carrier (`NETDEV_CHANGE`).
    Change,
    /// The device was registered (`NETDEV_REGISTER`).
    Register,
    /// The device is being unregistered or leaves the namespace (`NETDEV_UNREGISTER`).
    Unregister,
    /// The MTU changed (`NETDEV_CHANGEMTU`).
    ChangeMtu,
    /// The hardware address changed (`NETDEV_CHANGEADDR`).
    ChangeAddr,
    /// The device was renamed (`NETDEV_CHANGENAME`).
    ChangeName,
    /// Any other event, with its `NETDEV_*` value.
    Other(u64),
}

impl NetdevEvent {
    fn from_raw(event: u64) -> Self {
        match event as u32 {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_GOING_DOWN => Self::GoingDown,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_REGISTER => Self::Register,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            bindings::netdev_cmd_NETDEV_CHANGENAME => Self::ChangeName,
            _ => Self::Other(event),
        }
    }
}

/// A handler of network device events.
pub trait NetdevNotify {
    /// Handles `event` on `dev`.
    ///
    /// Called in process context with RTNL held, for devices of every namespace.
    fn notify(event: NetdevEvent, dev: &NetDevice);
}

/// A registered network device notifier that calls `T::notify`.
///
/// At registration the core replays `Register` and `Up` for existing devices. Dropping the
/// registration unregisters it and waits for running callbacks.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier` for the lifetime of `self`.
#[pin_data(PinnedDrop)]
pub struct NetdevNotifier<T: NetdevNotify> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _p: PhantomData<T>,
}

// SAFETY: The notifier block is only touched by the notifier chain, under its own lock.
unsafe impl<T: NetdevNotify> Send for NetdevNotifier<T> {}
// SAFETY: No `&self` method touches the notifier block.
unsafe impl<T: NetdevNotify> Sync for NetdevNotifier<T> {}

impl<T: NetdevNotify> NetdevNotifier<T> {
    /// Registers a notifier that calls `T::notify`.
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|nb: *mut bindings::notifier_block| {
                // SAFETY: `nb` is valid for writes and pinned for the lifetime of `Self`.
                unsafe {
                    nb.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..pin_init::zeroed()
                    });
                    to_result(bindings::register_netdevice_notifier(nb))
                }
            }),
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the netdevice notifier chain only.
    unsafe extern "C" fn notifier_call(
        _nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: The netdevice notifier chain passes a `netdev_notifier_info`.
        let dev = unsafe { bindings::netdev_notifier_info_to_dev(ptr.cast()) };
        if dev.is_null() {
            return bindings::NOTIFY_DONE as c_int;
        }
        // SAFETY: The device is valid and referenced for the duration of the callback.
        let dev = unsafe { NetDevice::from_raw(dev) };
        T::notify(NetdevEvent::from_raw(event as u64), dev);
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: NetdevNotify> PinnedDrop for NetdevNotifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
