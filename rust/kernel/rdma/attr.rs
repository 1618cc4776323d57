// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes reported to the RDMA core.

use crate::{
    bindings,
    rdma::{
        device::Device,
        driver::Driver,
        object::{
            Cq,
            Srq, //
        },
    },
};
use core::ops::{
    Deref,
    DerefMut, //
};

macro_rules! attr_wrapper {
    ($(#[$m:meta])* $name:ident, $c:ty) => {
        $(#[$m])*
        #[repr(transparent)]
        pub struct $name($c);

        impl $name {
            /// Creates a mutable reference from a raw pointer.
            ///
            /// # Safety
            ///
            /// `ptr` must be valid for reads and writes, and not aliased, for `'a`.
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut $c) -> &'a mut Self {
                // SAFETY: Transparent wrapper; the caller guarantees validity and uniqueness.
                unsafe { &mut *ptr.cast() }
            }
        }

        // The C structure is plain data: every bit pattern of its fields is valid, so handing
        // out the fields is safe.
        impl Deref for $name {
            type Target = $c;
            fn deref(&self) -> &$c {
                &self.0
            }
        }

        impl DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $c {
                &mut self.0
            }
        }
    };
}

attr_wrapper!(
    /// Device attributes (`struct ib_device_attr`), filled by `query_device`.
    DeviceAttr,
    bindings::ib_device_attr
);
attr_wrapper!(
    /// Port attributes (`struct ib_port_attr`), filled by `query_port`.
    PortAttr,
    bindings::ib_port_attr
);
attr_wrapper!(
    /// Port properties fixed at registration (`struct ib_port_immutable`).
    PortImmutable,
    bindings::ib_port_immutable
);

/// The link layer of a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum LinkLayer {
    /// InfiniBand.
    Infiniband = bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
    /// Ethernet (RoCE, iWARP).
    Ethernet = bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
}

/// The logical state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum PortState {
    /// Down.
    Down = bindings::ib_port_state_IB_PORT_DOWN,
    /// Active: traffic flows.
    Active = bindings::ib_port_state_IB_PORT_ACTIVE,
}

/// The physical state of a port (`enum ib_port_phys_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum PortPhysState {
    /// Polling: enabled, no link.
    Polling = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING as u8,
    /// Disabled.
    Disabled = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
    /// Link up.
    LinkUp = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8,
}

attr_wrapper!(
    /// The attributes a queue pair is created with (`struct ib_qp_init_attr`); the driver
    /// writes the capabilities it really gives back into `cap`.
    QpInitAttr,
    bindings::ib_qp_init_attr
);

impl QpInitAttr {
    /// Returns whether the queue pair receives through a shared receive queue.
    pub fn has_srq(&self) -> bool {
        !self.0.srq.is_null()
    }

    /// Returns whether both completion queues are given.
    pub fn has_cqs(&self) -> bool {
        !self.0.send_cq.is_null() && !self.0.recv_cq.is_null()
    }

    /// Returns the send completion queue, if it is one of `dev`'s.
    pub fn send_cq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Cq<T>> {
        // SAFETY: The core passes live queues with the attributes and keeps them alive while
        // the queue pair uses them (`usecnt`); a queue of `dev` belongs to driver `T`.
        unsafe { own_object(self.0.send_cq, dev).map(|p| Cq::<T>::from_raw(p)) }
    }

    /// Returns the receive completion queue, if it is one of `dev`'s.
    pub fn recv_cq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Cq<T>> {
        // SAFETY: As in `send_cq`.
        unsafe { own_object(self.0.recv_cq, dev).map(|p| Cq::<T>::from_raw(p)) }
    }

    /// Returns the shared receive queue, if there is one and it is `dev`'s.
    pub fn srq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Srq<T>> {
        // SAFETY: As in `send_cq`.
        unsafe { own_object(self.0.srq, dev).map(|p| Srq::<T>::from_raw(p)) }
    }
}

/// A core object with a `device` field.
trait HasDevice {
    fn device(&self) -> *mut bindings::ib_device;
}

impl HasDevice for bindings::ib_cq {
    fn device(&self) -> *mut bindings::ib_device {
        self.device
    }
}

impl HasDevice for bindings::ib_srq {
    fn device(&self) -> *mut bindings::ib_device {
        self.device
    }
}

/// Returns `ptr` if it is non-null and an object of `dev`.
///
/// # Safety
///
/// `ptr` must be null or point to a live object.
unsafe fn own_object<O: HasDevice, T: Driver>(ptr: *mut O, dev: &Device<T>) -> Option<*mut O> {
    // SAFETY: The caller guarantees a non-null `ptr` is live.
    let o = unsafe { ptr.as_ref()? };
    (o.device() == dev.as_raw()).then_some(ptr)
}

attr_wrapper!(
    /// Queue pair attributes (`struct ib_qp_attr`): what `modify_qp` sets (under a mask of
    /// `IB_QP_*` bits) and `query_qp` reports.
    QpAttr,
    bindings::ib_qp_attr
);

/// Returns whether moving a queue pair of type `qp_type` from `cur` to `next` with the
/// attributes in `mask` is a legal transition (IBTA table 91, `ib_modify_qp_is_ok`).
pub fn modify_qp_is_ok(cur: u32, next: u32, qp_type: u32, mask: u32) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur, next, qp_type, mask) }
}

/// A copy of queue pair attributes that a driver keeps (`struct ib_qp_attr`).
///
/// # Invariants
///
/// The copy's pointers (the address vectors' `sgid_attr`, `xmit_slave`) are null: they are
/// references the core owns and lends for one call only.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct QpAttrCopy(bindings::ib_qp_attr);

// SAFETY: By the type invariant the copy holds no pointer; the rest is plain data.
unsafe impl Send for QpAttrCopy {}
// SAFETY: See `Send`.
unsafe impl Sync for QpAttrCopy {}

impl Default for QpAttrCopy {
    fn default() -> Self {
        // INVARIANT: All pointers are null.
        Self(pin_init::zeroed())
    }
}

impl QpAttrCopy {
    /// Returns the primary address vector.
    pub fn ah(&self) -> &AhAttr {
        // SAFETY: `AhAttr` is a transparent wrapper of `rdma_ah_attr`; its accessors only
        // read plain data (the copy's `sgid_attr` is null).
        unsafe { &*(&raw const self.0.ah_attr).cast::<AhAttr>() }
    }

    /// Returns the attributes.
    pub fn get(&self) -> &bindings::ib_qp_attr {
        &self.0
    }

    /// Changes the attributes with `f`; the core's pointers are dropped from the result.
    pub fn update(&mut self, f: impl FnOnce(&mut bindings::ib_qp_attr)) {
        f(&mut self.0);
        // INVARIANT: The pointers `f` may have copied in are cleared.
        self.0.ah_attr.grh.sgid_attr = core::ptr::null();
        self.0.alt_ah_attr.grh.sgid_attr = core::ptr::null();
        self.0.xmit_slave = core::ptr::null_mut();
    }
}

impl QpAttr {
    /// Reports the kept attributes `copy`.
    pub fn set_from(&mut self, copy: &QpAttrCopy) {
        self.0 = copy.0;
    }
}

attr_wrapper!(
    /// An address vector (`struct rdma_ah_attr`): where a packet goes.
    AhAttr,
    bindings::rdma_ah_attr
);

impl AhAttr {
    /// Returns whether the vector has a global route header (RoCE requires one).
    pub fn has_grh(&self) -> bool {
        u32::from(self.0.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0
    }

    /// Returns the destination GID.
    pub fn dgid(&self) -> [u8; 16] {
        // SAFETY: Every variant of `union ib_gid` is 16 plain bytes.
        unsafe { self.0.grh.dgid.raw }
    }

    /// Returns the destination MAC of a RoCE vector, or `None` for another kind.
    pub fn roce_dmac(&self) -> Option<[u8; 6]> {
        if self.0.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
            return None;
        }
        // SAFETY: The type says the `roce` variant is the one in use.
        Some(unsafe { self.0.__bindgen_anon_1.roce.dmac })
    }

    /// Makes this a RoCE vector with a global route (the fields not passed are zeroed).
    pub fn set_roce(&mut self, grh: &GlobalRoute, dmac: [u8; 6], port_num: u32, sl: u8) {
        let mut a: bindings::rdma_ah_attr = pin_init::zeroed();
        a.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.port_num = port_num;
        a.sl = sl;
        a.grh.dgid.raw = grh.dgid;
        a.grh.flow_label = grh.flow_label;
        a.grh.sgid_index = grh.sgid_index;
        a.grh.hop_limit = grh.hop_limit;
        a.grh.traffic_class = grh.traffic_class;
        a.__bindgen_anon_1.roce.dmac = dmac;
        self.0 = a;
    }

    /// Returns the global route (meaningful if [`AhAttr::has_grh`]).
    pub fn global_route(&self) -> GlobalRoute {
        GlobalRoute {
            dgid: self.dgid(),
            flow_label: self.0.grh.flow_label,
            sgid_index: self.0.grh.sgid_index,
            hop_limit: self.0.grh.hop_limit,
            traffic_class: self.0.grh.traffic_class,
        }
    }
}

/// The global route of an address vector (`struct ib_global_route`, without the core's
/// reference to the source GID).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / DSCP+ECN.
    pub traffic_class: u8,
}
