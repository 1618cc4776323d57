// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: `rdma link add NAME type TYPE netdev NETDEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use crate::{
    bindings,
    net::device::NetDevice,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    sync::atomic::{
        AtomicPtr,
        Ordering, //
    },
};

/// A link type: creates RDMA devices on top of netdevices on request from user space.
///
/// The implementing type is the link type's state, kept in its [`LinkRegistration`].
/// `rdma link delete` needs no callback here: the core unregisters the device, which drops the
/// driver's data and everything it holds.
pub trait LinkOps: Send + Sync + Sized + 'static {
    /// The driver of the devices this link type creates.
    type Driver: Driver;

    /// The link type name, e.g. `c"rxe"`. The module must also carry the alias
    /// `rdma-link-<type>` so that `rdma link add` can load it.
    const TYPE: &'static CStr;

    /// Other modules that provide the same link type (the C driver of the same hardware, say).
    ///
    /// Registration fails with `EBUSY` and a message while one of them is loaded, before the
    /// core would refuse the duplicate type with a warning.
    const CONFLICTS: &'static [&'static CStr] = &[];

    /// Returns the slot through which the core's context-free callbacks find the registration:
    /// a `static` of the driver's, `static SLOT: LinkSlot<MyLink> = LinkSlot::new();`.
    fn slot() -> &'static LinkSlot<Self>;

    /// Creates and registers a device called `name` on `ndev`.
    ///
    /// Called in process context, with the core's link-type lock held for reading.
    fn newlink(&self, name: &CStr, ndev: &NetDevice) -> Result;

    /// Returns whether the data of a device this link type created is still alive (the
    /// driver's `dealloc_driver` has not run for it).
    ///
    /// The registration, when it goes, unregisters the devices it finds and looks again until
    /// this is false: a device it does not see (its unregistration begun elsewhere, or moving
    /// to another network namespace, which hides it from the core's clients meanwhile) is then
    /// gone, or found on a later look.
    fn devices_alive() -> bool;
}

/// Where a registered link type of `L` can be found (see [`LinkOps::slot`]).
pub struct LinkSlot<L: LinkOps>(AtomicPtr<LinkRegistration<L>>, AtomicPtr<Found>);

impl<L: LinkOps> LinkSlot<L> {
    /// Creates an empty slot.
    pub const fn new() -> Self {
        Self(
            AtomicPtr::new(core::ptr::null_mut()),
            AtomicPtr::new(core::ptr::null_mut()),
        )
    }
}

/// The devices of a driver found while its link type goes, each with a registration
/// reference.
struct Found {
    devs: KVec<*mut bindings::ib_device>,
    /// A device could not be recorded (no memory): it is unregistered with the driver's id.
    missed: bool,
}

impl<L: LinkOps> Default for LinkSlot<L> {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered link type.
///
/// Dropping it unregisters the link type and then every device of its driver, so that no device
/// outlives the module that created it. Only this driver's: another driver may share its
/// driver id (the C driver of the same ABI), so not `ib_unregister_driver`.
///
/// # Invariants
///
/// `ops` is on the core's list of link types, and `L::slot()` points to `self`, for the
/// lifetime of `self`.
#[pin_data(PinnedDrop)]
pub struct LinkRegistration<L: LinkOps> {
    #[pin]
    link: L,
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _p: PhantomData<L>,
}

// SAFETY: The ops are only read by the core under its own lock; `L` is `Send`.
unsafe impl<L: LinkOps> Send for LinkRegistration<L> {}
// SAFETY: Only `&L` is shared, and `L` is `Sync`.
unsafe impl<L: LinkOps> Sync for LinkRegistration<L> {}

impl<L: LinkOps> LinkRegistration<L> {
    /// Registers link type `L::TYPE` with state `link`.
    ///
    /// Fails with `EBUSY` if another module already registered the same type (the core
    /// refuses it with a one-time warning and leaves our entry off its list), or if `L` is
    /// registered already.
    pub fn new(link: impl PinInit<L, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            link <- link,
            ops <- Opaque::try_ffi_init(|ops: *mut bindings::rdma_link_ops| {
                if let Some(m) = L::CONFLICTS.iter().find(|m| module_is_live(m)) {
                    pr_err!(
                        "RDMA link type '{}' is provided by module {}, which is loaded; \
                         unload it first\n",
                        L::TYPE.to_str().unwrap_or("?"),
                        m.to_str().unwrap_or("?")
                    );
                    return Err(EBUSY);
                }
                // SAFETY: `ops` is the `ops` field of a pinned `Self` whose `link` is
                // initialised.
                let this = unsafe {
                    ops.byte_sub(core::mem::offset_of!(Self, ops)).cast::<Self>()
                };
                L::slot()
                    .0
                    .compare_exchange(
                        core::ptr::null_mut(),
                        this,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .map_err(|_| EBUSY)?;
                // SAFETY: `ops` is valid for writes and pinned for the lifetime of `Self`.
                unsafe {
                    ops.write(bindings::rdma_link_ops {
                        type_: L::TYPE.as_char_ptr(),
                        newlink: Some(Self::newlink),
                        ..pin_init::zeroed()
                    });
                    bindings::rdma_link_register(ops);
                }
                // SAFETY: `ops` is valid; a refused registration leaves the node as zeroed.
                if unsafe { (*ops).list.next.is_null() } {
                    L::slot().0.store(core::ptr::null_mut(), Ordering::Release);
                    pr_err!(
                        "RDMA link type '{}' is already registered by another module\n",
                        L::TYPE.to_str().unwrap_or("?")
                    );
                    return Err(EBUSY);
                }
                Ok(())
            }),
            _p: PhantomData,
        })
    }

    /// Returns the link type's state.
    pub fn link(&self) -> &L {
        &self.link
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, as `newlink` of a registered `struct rdma_link_ops`.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut bindings::net_device) -> c_int {
        let this = L::slot().0.load(Ordering::Acquire);
        if this.is_null() {
            return ENODEV.to_errno();
        }
        // SAFETY: By the type invariant the slot points to the registration while the ops are
        // listed, and the core calls `newlink` only for listed ops, under the lock that
        // unregistration takes. The name is NUL-terminated and the netdevice held for the call.
        let (this, name, ndev) =
            unsafe { (&*this, CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
        match this.link.newlink(name, ndev) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

/// Returns whether a module called `name` is loaded (and not still being formed).
fn module_is_live(name: &CStr) -> bool {
    let _rcu = crate::sync::rcu::read_lock();
    // SAFETY: `find_module` walks the module list under RCU, which we hold; only the null-ness
    // of the result is used, never the module.
    !unsafe { bindings::find_module(name.as_char_ptr()) }.is_null()
}

#[pinned_drop]
impl<L: LinkOps> PinnedDrop for LinkRegistration<L> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `ops` is registered. Unregistering takes the core's
        // lock for writing: no `newlink` runs after this.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        L::slot().0.store(core::ptr::null_mut(), Ordering::Release);
        loop {
            let found = Self::find_devices();
            if found.missed {
                // SAFETY: FFI call; it waits until every device with the driver's id is freed.
                unsafe { bindings::ib_unregister_driver(L::Driver::DRIVER_ID.raw()) };
            }
            for dev in found.devs {
                // SAFETY: `find_devices` took a registration reference on `dev`, which this
                // gives back; it waits until the device is unregistered (by us or a concurrent
                // path).
                unsafe { bindings::ib_unregister_device_and_put(dev) };
            }
            if !L::devices_alive() {
                break;
            }
            fsleep(Delta::from_millis(10));
        }
    }
}

impl<L: LinkOps> LinkRegistration<L> {
    /// Returns the registered devices of `L::Driver`, each with a registration reference.
    ///
    /// A client registered with the core is shown every registered device; it records ours.
    fn find_devices() -> Found {
        let mut found = Found {
            devs: KVec::new(),
            missed: false,
        };
        let slot = &L::slot().1;
        if slot
            .compare_exchange(
                core::ptr::null_mut(),
                &raw mut found,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            found.missed = true;
            return found;
        }
        let client = Opaque::<bindings::ib_client>::zeroed();
        // SAFETY: `client` is a zeroed client, valid for writes; it stays in place (on this
        // stack frame) from its registration to its unregistration below.
        let ret = unsafe {
            let c = client.get();
            (*c).name = c"rdma_link_unload".as_char_ptr();
            (*c).add = Some(Self::found_device);
            // Shown devices whether or not they serve kernel verbs.
            (*c).set_no_kverbs_req(1);
            bindings::ib_register_client(c)
        };
        if ret == 0 {
            // SAFETY: Registered above.
            unsafe { bindings::ib_unregister_client(client.get()) };
        } else {
            found.missed = true;
        }
        slot.store(core::ptr::null_mut(), Ordering::Release);
        found
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, as `add` of the client of [`Self::find_devices`], for a
    /// registered device.
    unsafe extern "C" fn found_device(ibdev: *mut bindings::ib_device) -> c_int {
        let found = L::slot().1.load(Ordering::Acquire);
        // SAFETY: The core calls `add` only while the client is registered, that is while
        // `find_devices` runs with `found` pointing to its local `Found`, and one call at a
        // time (under the core's device list lock, held for writing).
        let Some(found) = (unsafe { found.as_mut() }) else {
            return ENODEV.to_errno();
        };
        // SAFETY: The device is registered and valid for the call. A failed `try_get` means its
        // unregistration has begun, which the core completes without us.
        let held =
            Device::<L::Driver>::is_ours(ibdev) && unsafe { bindings::ib_device_try_get(ibdev) };
        if held && found.devs.push(ibdev, GFP_KERNEL).is_err() {
            // SAFETY: Gives back the reference just taken.
            unsafe { bindings::ib_device_put(ibdev) };
            found.missed = true;
        }
        // Not a real client of the device: no further callbacks.
        EOPNOTSUPP.to_errno()
    }
}
