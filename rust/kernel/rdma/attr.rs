// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes reported to the RDMA core.

use crate::bindings;
use core::ops::{
    Deref,
    DerefMut, //
};

macro_rules! plain_attr_wrapper {
    ($(#[$m:meta])* $name:ident, $c:ty) => {
        $(#[$m])*
        ///
        /// # Invariants
        ///
        /// The structure holds no pointer, only numbers, and the core zeroes it before it asks
        /// the driver to fill it: every field may be read, and any value written is only a
        /// number the core interprets. So the fields are handed out as they are ([`Deref`],
        /// [`DerefMut`]); the fields that hold flags or enumerations have typed setters.
        #[repr(transparent)]
        pub struct $name($c);

        impl $name {
            /// Creates a mutable reference from a raw pointer.
            ///
            /// # Safety
            ///
            /// `ptr` must be valid for reads and writes, initialised (the core zeroes these
            /// structures before the call), and not aliased, for `'a`.
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut $c) -> &'a mut Self {
                // SAFETY: Transparent wrapper; the caller guarantees validity and uniqueness.
                unsafe { &mut *ptr.cast() }
            }
        }

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

plain_attr_wrapper!(
    /// Device attributes (`struct ib_device_attr`), filled by `query_device`.
    DeviceAttr,
    bindings::ib_device_attr
);
plain_attr_wrapper!(
    /// Port attributes (`struct ib_port_attr`), filled by `query_port`.
    PortAttr,
    bindings::ib_port_attr
);
plain_attr_wrapper!(
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

/// The size of a management datagram on InfiniBand and RoCE ports (`IB_MGMT_MAD_SIZE`).
pub const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;

c_enum! {
    /// The driver id a user-space provider matches (`enum rdma_driver_id`).
    pub enum DriverId: u32 {
        /// Soft-RoCE.
        Rxe = bindings::rdma_driver_id_RDMA_DRIVER_RXE,
    }
}

c_flags! {
    /// Device capabilities (`enum ib_device_cap_flags`).
    pub struct DeviceCapFlags: u64 {
        /// Counts bad P_Keys.
        const BAD_PKEY_CNTR = bindings::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR;
        /// Counts bad Q_Keys.
        const BAD_QKEY_CNTR = bindings::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR;
        /// Automatic path migration.
        const AUTO_PATH_MIG = bindings::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG;
        /// Changing the physical port of a queue pair.
        const CHANGE_PHY_PORT = bindings::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT;
        /// UD address vectors are checked against the queue pair's port.
        const UD_AV_PORT_ENFORCE = bindings::ib_device_cap_flags_IB_DEVICE_UD_AV_PORT_ENFORCE;
        /// Reports the port active event.
        const PORT_ACTIVE_EVENT = bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT;
        /// Has a system image GUID.
        const SYS_IMAGE_GUID = bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID;
        /// Generates RNR NAKs on RC queue pairs.
        const RC_RNR_NAK_GEN = bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN;
        /// Shared receive queues can be resized.
        const SRQ_RESIZE = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE;
        /// Memory management extensions (fast registration, local invalidation).
        const MEM_MGT_EXTENSIONS = bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS;
        /// Memory windows.
        const MEM_WINDOW = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW;
        /// Global visibility flush.
        const FLUSH_GLOBAL = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL;
        /// Persistence flush.
        const FLUSH_PERSISTENT = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT;
        /// Type 2B memory windows.
        const MEM_WINDOW_TYPE_2B = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B;
        /// Atomic write.
        const ATOMIC_WRITE = bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE;
    }
}

c_flags! {
    /// Capabilities only kernel users see (`enum ib_kernel_cap_flags`).
    pub struct KernelCapFlags: u64 {
        /// User space may use the device without registering memory.
        const ALLOW_USER_UNREG = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG;
        /// Memory may be registered for on-demand paging (`IB_ACCESS_ON_DEMAND`).
        const ON_DEMAND_PAGING = bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING;
    }
}

c_flags! {
    /// On-demand paging as a whole (`enum ib_odp_general_cap_bits`).
    pub struct OdpGeneralCaps: u64 {
        /// Explicit on-demand paging: a region over a given range.
        const SUPPORT = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT;
    }
}

c_flags! {
    /// What a transport may do with memory registered for on-demand paging
    /// (`enum ib_odp_transport_cap_bits`).
    pub struct OdpTransportCaps: u32 {
        /// Send from it.
        const SEND = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
        /// Receive into it.
        const RECV = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV;
        /// Be the target of an RDMA WRITE.
        const WRITE = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE;
        /// Be the source of an RDMA READ.
        const READ = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ;
        /// Be the target of an atomic operation.
        const ATOMIC = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC;
        /// Receive into it through a shared receive queue.
        const SRQ_RECV = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
        /// Be flushed.
        const FLUSH = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH;
        /// Be the target of an atomic write.
        const ATOMIC_WRITE = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE;
    }
}

c_enum! {
    /// How atomic operations are ordered against other accesses (`enum ib_atomic_cap`).
    pub enum AtomicCap: u32 {
        /// No atomic operations.
        None = bindings::ib_atomic_cap_IB_ATOMIC_NONE,
        /// Atomic among this device's operations.
        Hca = bindings::ib_atomic_cap_IB_ATOMIC_HCA,
        /// Atomic with the CPUs too.
        Glob = bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
    }
}

c_flags! {
    /// Port capabilities (`enum ib_port_capability_mask_bits`).
    pub struct PortCapFlags: u32 {
        /// The port supports connection management.
        const CM_SUP = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
    }
}

c_flags! {
    /// What a port's protocol is (`RDMA_CORE_PORT_*` in `ib_port_immutable.core_cap_flags`).
    pub struct CoreCapFlags: u32 {
        /// RoCE v2: InfiniBand transport over UDP.
        const IBA_ROCE_UDP_ENCAP = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    }
}

c_flags! {
    /// What `modify_port` changes (`enum ib_port_modify_flags`).
    pub struct PortModifyFlags: u32 {
        /// Shut the port down.
        const SHUTDOWN = bindings::ib_port_modify_flags_IB_PORT_SHUTDOWN;
        /// Initialise the type of the port.
        const INIT_TYPE = bindings::ib_port_modify_flags_IB_PORT_INIT_TYPE;
        /// Reset the Q_Key violation counter.
        const RESET_QKEY_CNTR = bindings::ib_port_modify_flags_IB_PORT_RESET_QKEY_CNTR;
        /// Set the options of the port info.
        const OPA_MASK_CHG = bindings::ib_port_modify_flags_IB_PORT_OPA_MASK_CHG;
    }
}

c_flags! {
    /// What `modify_device` changes (`enum ib_device_modify_flags`).
    pub struct DeviceModifyFlags: u32 {
        /// The system image GUID.
        const SYS_IMAGE_GUID = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID;
        /// The node description.
        const NODE_DESC = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC;
    }
}

c_enum! {
    /// The width of a port's link (`enum ib_port_width`).
    pub enum PortWidth: u8 {
        /// One lane.
        X1 = bindings::ib_port_width_IB_WIDTH_1X as u8,
        /// Two lanes.
        X2 = bindings::ib_port_width_IB_WIDTH_2X as u8,
        /// Four lanes.
        X4 = bindings::ib_port_width_IB_WIDTH_4X as u8,
        /// Eight lanes.
        X8 = bindings::ib_port_width_IB_WIDTH_8X as u8,
        /// Twelve lanes.
        X12 = bindings::ib_port_width_IB_WIDTH_12X as u8,
    }
}

impl DeviceAttr {
    /// Sets the device capabilities.
    pub fn set_device_cap_flags(&mut self, flags: DeviceCapFlags) {
        self.0.device_cap_flags = flags.bits();
    }

    /// Sets the capabilities only kernel users see.
    pub fn set_kernel_cap_flags(&mut self, flags: KernelCapFlags) {
        self.0.kernel_cap_flags = flags.bits();
    }

    /// Sets the atomic capability.
    pub fn set_atomic_cap(&mut self, cap: AtomicCap) {
        self.0.atomic_cap = cap.raw();
    }

    /// Sets the on-demand paging capabilities: `general`, and what RC and UD queue pairs may
    /// do with such memory (UC and XRC none).
    pub fn set_odp_caps(
        &mut self,
        general: OdpGeneralCaps,
        rc: OdpTransportCaps,
        ud: OdpTransportCaps,
    ) {
        let caps = &mut self.0.odp_caps;
        caps.general_caps = general.bits();
        caps.per_transport_caps.rc_odp_caps = rc.bits();
        caps.per_transport_caps.ud_odp_caps = ud.bits();
        caps.per_transport_caps.uc_odp_caps = 0;
        caps.per_transport_caps.xrc_odp_caps = 0;
    }
}

impl PortAttr {
    /// Sets the port's logical and physical state.
    pub fn set_state(&mut self, state: PortState, phys: PortPhysState) {
        self.0.state = state as u32;
        self.0.phys_state = phys as u8;
    }

    /// Sets the port's capabilities.
    pub fn set_port_cap_flags(&mut self, flags: PortCapFlags) {
        self.0.port_cap_flags = flags.bits();
    }

    /// Sets the link width.
    pub fn set_active_width(&mut self, width: PortWidth) {
        self.0.active_width = width.raw();
    }
}

impl PortImmutable {
    /// Sets the port's protocol.
    pub fn set_core_cap_flags(&mut self, flags: CoreCapFlags) {
        self.0.core_cap_flags = flags.bits();
    }
}
