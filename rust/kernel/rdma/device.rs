// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! Life of a device:
//!
//! ```text
//!  Unregistered::new()      register()                 unregister (any path)
//! ----------------> Unregistered ----------> owned by the core ---------------------> freed
//!  _ib_alloc_device,  (drop: ib_dealloc_device)        dealloc_driver drops the data,
//!  data initialised                                    then the core frees the memory
//! ```
//!
//! While registered the core may unregister the device at any time (netlink `dellink`, module
//! unload, the driver's own request); [`DeviceRef`] (`ib_device_try_get`) holds that off.

use crate::{
    alloc::{
        allocator::Kmalloc, //
    },
    bindings,
    error::to_result,
    net::device::NetDevice,
    prelude::*,
    rdma::driver::{
        Driver,
        OpsTable, //
    },
    sync::aref::ARef,
    types::Opaque, //
};
c_enum! {
    /// A legacy uverbs write() command a device may offer beyond the core's defaults
    /// (`enum ib_uverbs_write_cmds`).
    pub enum UverbsCmd: u32 {
        /// Post send work requests (a user queue pair's doorbell).
        PostSend = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
        /// Post receive work requests.
        PostRecv = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV,
        /// Post shared receive queue work requests.
        PostSrqRecv = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SRQ_RECV,
        /// Poll a completion queue.
        PollCq = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ,
        /// Arm a completion queue's notification.
        ReqNotifyCq = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
    }
}

use core::{
    alloc::Layout,
    marker::PhantomData,
    ops::Deref,
    ptr::NonNull, //
};

/// An RDMA device of driver `T`: the core's `struct ib_device` followed by the driver's data.
///
/// # Invariants
///
/// - `ibdev` is at offset 0 and was allocated by `_ib_alloc_device` with the size of `Self`.
/// - `data` is initialised from the moment the ops table (with `dealloc_driver`) is installed
///   until `dealloc_driver` drops it.
/// - A `&Device<T>` is only handed out while the core guarantees the device is alive and its
///   data initialised: inside a callback, or under a [`DeviceRef`] or [`Unregistered`].
#[repr(C)]
#[pin_data]
pub struct Device<T: Driver> {
    ibdev: Opaque<bindings::ib_device>,
    #[pin]
    data: T::Data,
}

// SAFETY: The C device is thread-safe and the data is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: The C device is thread-safe and the data is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// Returns the device's index, as `rdma dev` shows it.
    ///
    /// The core assigns it when it registers the device, before any verb can reach it; it is
    /// zero before that.
    pub fn index(&self) -> u32 {
        // SAFETY: The device is valid (the type's invariant); `index` is written once, by the
        // registration, and read as `READ_ONCE` would.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).index) }
    }

    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a device of driver `T` (built by [`Unregistered::new`]) whose data stays
    /// initialised for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ibdev` is the first field of the `repr(C)` container.
        unsafe { &*ptr.cast() }
    }

    /// Returns a pointer to the data field of the device at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to an allocation of the size of `Self`.
    pub(crate) unsafe fn data_ptr(ptr: *mut bindings::ib_device) -> *mut T::Data {
        // SAFETY: The caller guarantees the allocation covers `Self`.
        unsafe { &raw mut (*ptr.cast::<Self>()).data }
    }

    /// Returns whether the raw device belongs to driver `T`.
    ///
    /// Lookups by driver id can find devices of another driver with the same id (two drivers
    /// of one ABI); our `dealloc_driver` function, unique per `T`, tells them apart.
    pub(crate) fn is_ours(ptr: *mut bindings::ib_device) -> bool {
        // SAFETY: The caller holds a reference on a valid device.
        let dealloc = unsafe { (*ptr).ops.dealloc_driver };
        dealloc.map(|f| f as usize) == OpsTable::<T>::OPS.dealloc_driver.map(|f| f as usize)
    }

    /// Returns the registered device of driver `T` bound to `ndev`, with a reference held.
    pub fn get_by_netdev(ndev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `ndev` is valid.
        let ptr = unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID.raw()) };
        if ptr.is_null() {
            return None;
        }
        if !Self::is_ours(ptr) {
            // SAFETY: We hold the reference that `ib_device_get_by_netdev` took.
            unsafe { bindings::ib_device_put(ptr) };
            return None;
        }
        // INVARIANT: We own a registration reference on a device of driver `T`.
        Some(DeviceRef(
            // SAFETY: `ptr` is not null.
            unsafe { NonNull::new_unchecked(ptr.cast()) },
        ))
    }

    /// Takes a registration reference, unless unregistration has begun.
    pub fn try_get(&self) -> Option<DeviceRef<T>> {
        // SAFETY: The device is valid.
        if !unsafe { bindings::ib_device_try_get(self.as_raw()) } {
            return None;
        }
        // INVARIANT: We own a registration reference.
        Some(DeviceRef(NonNull::from(self)))
    }

    /// Returns the netdevice bound to `port`, if any.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is valid; the function returns a held netdevice or null.
        unsafe { NetDevice::from_raw_owned(bindings::ib_device_get_netdev(self.as_raw(), port)) }
    }

    /// Returns whether `gid` is a RoCEv2 GID in the table of `port` (`rdma_find_gid_by_port`).
    ///
    /// Safe in atomic context.
    pub fn has_roce_v2_gid(&self, port: u32, gid: &[u8; 16]) -> bool {
        let mut g: bindings::ib_gid = pin_init::zeroed();
        g.raw = *gid;
        // SAFETY: The device is valid; `g` is valid for the call; a null netdevice matches any.
        let attr = unsafe {
            bindings::rdma_find_gid_by_port(
                self.as_raw(),
                &g,
                bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
                port,
                core::ptr::null_mut(),
            )
        };
        match crate::error::from_err_ptr(attr.cast_mut()) {
            Ok(a) if !a.is_null() => {
                // SAFETY: A found entry comes with a reference, which we drop.
                unsafe { bindings::rdma_put_gid_attr(a) };
                true
            }
            _ => false,
        }
    }

    /// Returns the port's Ethernet speed and width as IB rates (`ib_get_eth_speed`).
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: The device is valid; the out pointers are valid for the call.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Reports the state of the port bound to `ndev` to the device's clients if it changed
    /// (`IB_EVENT_PORT_ACTIVE` or `IB_EVENT_PORT_ERR`, `ib_dispatch_port_state_event`).
    pub fn dispatch_port_state(&self, ndev: &NetDevice) {
        // SAFETY: The device and the netdevice are valid; the core ignores a netdevice that is
        // not bound to a port of the device.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), ndev.as_raw()) };
    }

    /// Unbinds the netdevice of `port` (`ib_device_set_netdev` with none), dropping the core's
    /// reference on it.
    ///
    /// A driver calls it when the netdevice unregisters, so that the netdevice does not wait
    /// for the device's own unregistration; from then on [`Device::netdev`] returns `None` for
    /// the port and [`Device::get_by_netdev`] no longer finds the device. Must be called from
    /// a context that may sleep: it waits for an RCU grace period and sends a netlink event.
    pub fn detach_netdev(&self, port: u32) -> Result {
        // Before the ports' data exist (an unregistered device never bound to a netdevice)
        // there is nothing to unbind; the core would allocate them, sized by a port count
        // that may still change.
        // SAFETY: The device is valid; the field is written only while the device is
        // unregistered and exclusively ours (`Unregistered::set_netdev`, registration).
        if unsafe { (*self.as_raw()).port_data }.is_null() {
            return Ok(());
        }
        // SAFETY: The device is valid and its ports' data exist; the core checks the port
        // number and serialises this with its own uses of the port's netdevice (the port's
        // `netdev_lock`).
        to_result(unsafe {
            bindings::ib_device_set_netdev(self.as_raw(), core::ptr::null_mut(), port)
        })
    }

    /// Starts unregistration in the background (`ib_unregister_device_queued`).
    ///
    /// Safe from any context that may sleep, including netdevice notifiers.
    pub fn unregister_queued(&self) {
        // SAFETY: The device is valid and registered or being unregistered.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }
}

/// A device of driver `T` that is not registered yet: it can be configured, then registered.
///
/// Dropping it frees the device and its data.
///
/// # Invariants
///
/// `self.0` is a valid, unregistered device built by [`Unregistered::new`], owned by us.
pub struct Unregistered<T: Driver>(NonNull<Device<T>>, PhantomData<Device<T>>);

impl<T: Driver> Deref for Unregistered<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is valid.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Unregistered<T> {
    /// Allocates a device through the RDMA core and initialises its data in place.
    ///
    /// `module` becomes the owner of the device's ops. User contexts do not hold it (the
    /// devices of this abstraction let the core disassociate them, see
    /// `ucontext::disassociate_ucontext`): the module's link type unregisters its devices
    /// before it goes ([`LinkOps::devices_alive`]).
    ///
    /// [`LinkOps::devices_alive`]: crate::rdma::link::LinkOps::devices_alive
    pub fn new(module: &'static ThisModule, data: impl PinInit<T::Data, Error>) -> Result<Self> {
        // `_ib_alloc_device` uses `kzalloc`: make the size honour our alignment.
        let layout = Kmalloc::aligned_layout(Layout::new::<Device<T>>());

        // SAFETY: FFI call; `init_net` is a static namespace. The size covers `ib_device`, which
        // is our first field.
        let raw = unsafe { bindings::_ib_alloc_device(layout.size(), &raw mut bindings::init_net) };
        let raw = NonNull::new(raw.cast::<Device<T>>()).ok_or(ENOMEM)?;

        // SAFETY: `raw` points to a zeroed allocation of the size of `Device<T>`.
        let data_ptr = unsafe { &raw mut (*raw.as_ptr()).data };
        // SAFETY: `data_ptr` is valid for writes and never moves: the core owns the allocation.
        if let Err(e) = unsafe { data.__pinned_init(data_ptr) } {
            // SAFETY: No ops are installed yet, so this frees the memory without touching
            // `data`.
            unsafe { bindings::ib_dealloc_device(raw.as_ptr().cast()) };
            return Err(e);
        }

        let ibdev = raw.as_ptr().cast::<bindings::ib_device>();
        // SAFETY: `ibdev` is valid and private to us; the table is `'static`.
        unsafe {
            bindings::ib_set_device_ops(ibdev, const { &OpsTable::<T>::OPS });
            (*ibdev).ops.owner = module.as_ptr();
        }
        // INVARIANT: The data is initialised and `dealloc_driver` installed.
        Ok(Self(raw, PhantomData))
    }

    fn raw(&mut self) -> &mut bindings::ib_device {
        // SAFETY: By the type invariant the device is valid and not yet visible to anyone.
        unsafe { &mut *self.0.as_ptr().cast::<bindings::ib_device>() }
    }

    /// Sets the node GUID (network byte order value).
    pub fn set_node_guid(&mut self, guid: u64) {
        self.raw().node_guid = guid;
    }

    /// Sets the node description (truncated to fit, NUL-terminated).
    pub fn set_node_desc(&mut self, desc: &[u8]) {
        let dst = &mut self.raw().node_desc;
        let n = desc.len().min(dst.len() - 1);
        for (d, s) in dst.iter_mut().zip(desc.iter().take(n)) {
            *d = *s as c_char;
        }
        dst[n] = 0;
    }

    /// Sets the number of physical ports, numbered from 1.
    ///
    /// Fails with `EBUSY` once the ports' data exist ([`Unregistered::set_netdev`] makes them,
    /// sized by the count then): the core would not resize them.
    pub fn set_phys_port_cnt(&mut self, n: u32) -> Result {
        if !self.raw().port_data.is_null() {
            return Err(EBUSY);
        }
        self.raw().phys_port_cnt = n;
        Ok(())
    }

    /// Sets the number of completion vectors.
    pub fn set_num_comp_vectors(&mut self, n: i32) {
        self.raw().num_comp_vectors = n;
    }

    /// Makes the device a channel adapter (`RDMA_NODE_IB_CA`).
    pub fn set_node_type_ca(&mut self) {
        self.raw().node_type = bindings::RDMA_NODE_IB_CA as u8;
    }

    /// Enables legacy uverbs write() commands.
    pub fn enable_uverbs_cmds(&mut self, cmds: &[UverbsCmd]) {
        for c in cmds {
            self.raw().uverbs_cmd_mask |= 1u64 << c.raw();
        }
    }

    /// Records that user space chose the name (it is kept across namespace moves).
    pub fn mark_name_assigned_by_user(&mut self) {
        // SAFETY: The device is valid.
        unsafe { bindings::ib_mark_name_assigned_by_user(self.raw()) };
    }

    /// Binds `ndev` to `port`; the core then manages the RoCE GIDs from its addresses.
    pub fn set_netdev(&mut self, ndev: &NetDevice, port: u32) -> Result {
        // SAFETY: Both objects are valid; the core takes its own netdevice reference.
        to_result(unsafe { bindings::ib_device_set_netdev(self.raw(), ndev.as_raw(), port) })
    }

    /// Registers the device under `name`; from then on the core owns it.
    ///
    /// On failure the device is freed.
    pub fn register(mut self, name: &CStr) -> Result {
        // SAFETY: The device is valid and configured; `name` is NUL-terminated. A null DMA
        // device makes the core use the ib_device with virtual DMA ops.
        to_result(unsafe {
            bindings::ib_register_device(self.raw(), name.as_char_ptr(), core::ptr::null_mut())
        })?;
        // The core owns the device now and frees it on unregistration.
        core::mem::forget(self);
        Ok(())
    }
}

impl<T: Driver> Drop for Unregistered<T> {
    fn drop(&mut self) {
        // SAFETY: We own the unregistered device; this calls `dealloc_driver` (dropping the
        // data) and frees it.
        unsafe { bindings::ib_dealloc_device(self.0.as_ptr().cast()) };
    }
}

/// A registration reference on a device of driver `T` (`ib_device_try_get`/`ib_device_put`).
///
/// While it exists the device stays registered: unregistration waits for it.
///
/// # Invariants
///
/// `self.0` is a device of driver `T` on which we own one `ib_device` reference.
pub struct DeviceRef<T: Driver>(NonNull<Device<T>>);

// SAFETY: The reference can be dropped from any thread; `Device<T>` is `Sync`.
unsafe impl<T: Driver> Send for DeviceRef<T> {}
// SAFETY: Only `&Device<T>` is handed out, which is `Sync`.
unsafe impl<T: Driver> Sync for DeviceRef<T> {}

impl<T: Driver> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: The reference keeps the device registered, so its data is initialised.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> DeviceRef<T> {
    /// Unregisters the device and waits until it is gone (`ib_unregister_device_and_put`).
    pub fn unregister(self) {
        let ptr = self.0.as_ptr().cast();
        core::mem::forget(self);
        // SAFETY: We own a reference, which this call consumes.
        unsafe { bindings::ib_unregister_device_and_put(ptr) };
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: We own one reference.
        unsafe { bindings::ib_device_put(self.0.as_ptr().cast()) };
    }
}
