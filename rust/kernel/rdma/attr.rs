// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes reported to the RDMA core.

use crate::bindings;
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
