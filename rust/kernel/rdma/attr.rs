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
