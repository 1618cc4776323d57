// SPDX-License-Identifier: GPL-2.0

//! Network devices.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    error::to_result,
    fmt,
    net::namespace::Namespace,
    prelude::*,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};
use core::ptr::NonNull;

/// A network device (`struct net_device`).
///
/// Instances are reference counted with `dev_hold`/`dev_put`: an [`ARef<NetDevice>`] keeps the
/// device's memory alive (not its registration).
///
/// # Invariants
///
/// `self.0` is a valid `struct net_device` with a non-zero reference count for the lifetime of
/// any reference to it.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` is used from any thread; its mutable state is protected by its own
// locks (RTNL and others) in C.
unsafe impl Send for NetDevice {}
// SAFETY: See `Send` above.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold` and `dev_put` keep the object alive while the count is positive.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the reference count is non-zero.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns an increment of the reference count.
        unsafe { bindings::dev_put(obj.as_ptr().cast()) };
    }
}

impl NetDevice {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct net_device` whose reference count stays non-zero for
    /// `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper; the caller guarantees validity.
        unsafe { &*ptr.cast() }
    }

    /// Takes ownership of a reference count the caller holds (e.g. from `dev_get_by_name`).
    ///
    /// Returns `None` for a null pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or a valid `struct net_device` on which the caller owns one reference,
    /// which moves into the returned [`ARef`].
    pub unsafe fn from_raw_owned(ptr: *mut bindings::net_device) -> Option<ARef<Self>> {
        let ptr = NonNull::new(ptr)?;
        // SAFETY: The caller transfers one reference to us.
        Some(unsafe { ARef::from_raw(ptr.cast()) })
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Returns a copy of the interface name, e.g. `eth0`.
    ///
    /// A rename may follow at any time: the copy is the name at one instant (as
    /// `netdev_copy_name` takes it, consistent against a concurrent rename).
    pub fn name(&self) -> NetDevName {
        let mut name = [0u8; NAME_SIZE];
        // SAFETY: The device is valid; `name` is valid for writes of `IFNAMSIZ` bytes, which
        // `netdev_copy_name` fills with a NUL-terminated string (it reads `dev->name` under
        // the rename seqlock, so the copy is never torn).
        unsafe { bindings::netdev_copy_name(self.as_raw(), name.as_mut_ptr().cast()) };
        NetDevName(name)
    }

    /// Returns the interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: The device is valid; `ifindex` is fixed while it is registered.
        unsafe { (*self.as_raw()).ifindex }
    }

    /// Returns the current MTU in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The device is valid; C reads `mtu` with `READ_ONCE` as it may change.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    /// Returns the hardware (MAC) address, or `None` if the device has none of 6 bytes.
    pub fn hw_addr(&self) -> Option<[u8; 6]> {
        let dev = self.as_raw();
        // SAFETY: The device is valid; `addr_len` is fixed for the device type.
        let len = unsafe { (*dev).addr_len };
        if len != 6 {
            return None;
        }
        let mut addr = [0u8; 6];
        // SAFETY: `dev_addr` points to at least `addr_len` bytes.
        unsafe { core::ptr::copy_nonoverlapping((*dev).dev_addr, addr.as_mut_ptr(), 6) };
        Some(addr)
    }

    /// Adds a multicast link-layer address to the device's filter (`dev_mc_add`).
    ///
    /// Addresses are reference counted: each add needs one [`NetDevice::mc_del`].
    pub fn mc_add(&self, addr: &[u8; 6]) -> Result {
        // SAFETY: The device is valid; `addr` holds the device's 6-byte address length.
        to_result(unsafe { bindings::dev_mc_add(self.as_raw(), addr.as_ptr()) })
    }

    /// Removes a multicast link-layer address added by [`NetDevice::mc_add`] (`dev_mc_del`).
    pub fn mc_del(&self, addr: &[u8; 6]) -> Result {
        // SAFETY: The device is valid; `addr` holds 6 bytes.
        to_result(unsafe { bindings::dev_mc_del(self.as_raw(), addr.as_ptr()) })
    }

    /// Returns whether this is an 802.1Q VLAN device.
    pub fn is_vlan(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::is_vlan_dev(self.as_raw()) }
    }

    /// Returns whether the device is administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Returns whether the device is up and has carrier: the RoCE port is then active.
    pub fn is_operational(&self) -> bool {
        // SAFETY: The device is valid.
        self.is_up() && unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }

    /// Returns the head room a buffer needs for this device's link-layer header
    /// (`LL_RESERVED_SPACE`).
    pub fn ll_reserved_space(&self) -> u32 {
        // SAFETY: The device is valid.
        unsafe { bindings::ll_reserved_space(self.as_raw()) }
    }

    /// Returns a reference on the network namespace the device belongs to now.
    ///
    /// The device may move to another namespace right after: the reference keeps the
    /// namespace it was in alive, not the device in it. `None` if that namespace is being
    /// dismantled.
    pub fn net(&self) -> Option<ARef<Namespace>> {
        // SAFETY: The device is valid. The helper reads `dev_net_rcu()` under the RCU read lock,
        // which keeps the namespace's memory alive (it is freed after a grace period), and takes
        // a reference only if the count is not already zero (`maybe_get_net`).
        let net = unsafe { bindings::dev_net_get(self.as_raw()) };
        // SAFETY: A non-null result carries a reference we now own.
        unsafe { Namespace::from_raw_owned(net) }
    }
}

/// The size of an interface name buffer, terminator included (`IFNAMSIZ`).
const NAME_SIZE: usize = bindings::IFNAMSIZ as usize;

/// A copy of a network device's name ([`NetDevice::name`]).
///
/// # Invariants
///
/// The array holds a NUL terminator.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NetDevName([u8; NAME_SIZE]);

impl NetDevName {
    /// Returns the name as a C string.
    pub fn as_c_str(&self) -> &CStr {
        // The invariant guarantees a terminator; an empty name otherwise.
        CStr::from_bytes_until_nul(&self.0).unwrap_or(c"")
    }
}

impl fmt::Display for NetDevName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_c_str(), f)
    }
}

impl fmt::Debug for NetDevName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_c_str(), f)
    }
}
