// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand, RoCE, iWARP) devices and their verbs.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! The RDMA core allocates every object (device, user context, ...) with a size the driver
//! declares, the C structure first and the driver's data after it. The containers here
//! ([`device::Device`], [`ucontext::UContext`], [`pd::Pd`], ...) have that layout. The core
//! calls the driver through the ops table built from a [`driver::Driver`] implementation: the
//! device and port verbs are [`driver::Driver`]'s, and each object kind's verbs are a trait
//! of its own, implemented by the driver's data for that kind ([`cq::CqOps`],
//! [`qp::QpOps`], ...). Each object's file holds its container, its trait and the C entry
//! points (trampolines) that call the trait. The core frees the memory; the containers drop
//! the driver's data from the matching release callback.

/// Defines a Rust enumeration of C enumeration values, with a checked conversion.
macro_rules! c_enum {
    (
        $(#[$m:meta])*
        pub enum $name:ident: $repr:ty {
            $($(#[$vm:meta])* $v:ident = $val:expr,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
        #[repr($repr)]
        pub enum $name {
            $($(#[$vm])* $v = $val,)*
        }

        impl $name {
            /// Converts the C value; `None` for a value without a variant here.
            // Inline and compared variant by variant, which the compiler folds into a range
            // check: the data path converts a queue pair's state several times per packet.
            #[inline]
            pub fn from_raw(v: $repr) -> Option<Self> {
                $(
                    if v == Self::$v as $repr {
                        return Some(Self::$v);
                    }
                )*
                None
            }

            /// Returns the C value.
            pub const fn raw(self) -> $repr {
                self as $repr
            }
        }
    };
}

/// Defines a set of C flag bits as a Rust type with `const` operations.
macro_rules! c_flags {
    (
        $(#[$m:meta])*
        pub struct $name:ident: $repr:ty {
            $($(#[$vm:meta])* const $v:ident = $val:expr;)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
        #[repr(transparent)]
        pub struct $name($repr);

        #[allow(clippy::unnecessary_cast)]
        impl $name {
            $($(#[$vm])* pub const $v: Self = Self($val as $repr);)*

            /// Every flag named here.
            pub const ALL: Self = Self(0 $(| $val as $repr)*);

            /// No flag.
            pub const fn empty() -> Self {
                Self(0)
            }

            /// Takes the bits as they are, unknown ones included (callers check them
            /// against what they support).
            pub const fn from_bits_retain(bits: $repr) -> Self {
                Self(bits)
            }

            /// Returns the C value.
            pub const fn bits(self) -> $repr {
                self.0
            }

            /// Returns the flags of `self` and of `other`.
            pub const fn union(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// Returns the flags of `self` that are not in `other`.
            pub const fn difference(self, other: Self) -> Self {
                Self(self.0 & !other.0)
            }

            /// Returns whether every flag of `other` is in `self`.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Returns whether `self` and `other` share a flag.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// Returns whether no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                self.union(rhs)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                *self = self.union(rhs);
            }
        }

        impl core::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, rhs: Self) -> Self {
                Self(self.0 & rhs.0)
            }
        }
    };
}

#[macro_use]
mod object;

pub mod ah;
pub mod attr;
pub mod cq;
pub mod device;
pub mod driver;
pub mod event;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod qp;
pub mod srq;
pub mod stats;
pub mod sysfs;
// The events are the driver's own: they exist only where it is built.
#[cfg(any(CONFIG_RDMA_RXE_RUST = "y", CONFIG_RDMA_RXE_RUST = "m"))]
pub mod trace;
pub mod ucontext;
pub mod udata;
pub mod umem;
// Only with CONFIG_INFINIBAND_ON_DEMAND_PAGING (Documentation/infiniband/rxe_rust-odp-plan.rst).
#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
pub mod umem_odp;
pub mod virt_dma;
pub mod wr;

/// The RoCEv2 UDP destination port (IANA).
pub const ROCE_V2_UDP_DPORT: u16 = crate::bindings::ROCE_V2_UDP_DPORT as u16;

/// Returns the RoCEv2 UDP source port of a flow (`rdma_get_udp_sport`): from the flow label,
/// or, if it is zero, from a label derived from the local and remote QP numbers, so that ECMP
/// spreads queue pairs over paths as hardware does.
pub fn udp_sport(flow_label: u32, lqpn: u32, rqpn: u32) -> u16 {
    // SAFETY: A pure function of its arguments.
    unsafe { crate::bindings::rdma_get_udp_sport(flow_label, lqpn, rqpn) }
}

/// Returns the RDMA core's unbound workqueue for completion processing (`ib_comp_unbound_wq`),
/// or `None` before the core has allocated it.
///
/// It has a rescuer (`WQ_MEM_RECLAIM`), so work queued there makes progress under memory
/// pressure too, and the storage drivers above RDMA (NVMe over RDMA, iSER, SRP), whose own
/// workqueues have rescuers, may wait for it. A software RDMA device runs its transport there:
/// the system workqueues have no rescuer, and the workqueue code warns when a workqueue with a
/// rescuer waits for one without.
// Never inlined: the core does not export `ib_comp_unbound_wq`, so a module that inlined this
// would not load (rustc inlines small functions across crates; a kernel with frame pointers did).
#[inline(never)]
pub fn comp_unbound_queue() -> Option<&'static crate::workqueue::Queue> {
    // SAFETY: Only read here. The abstractions are built in with the RDMA core
    // (`INFINIBAND=y`), whose `fs_initcall` allocates the workqueue; the core never destroys
    // one it initialised with (its exit does not run when built in). It destroys it, leaving
    // the pointer, only when its own initialisation fails after allocating it, and then no RDMA
    // device can be registered, so no device's work reaches it.
    let wq = unsafe { bindings::ib_comp_unbound_wq };
    if wq.is_null() {
        return None;
    }
    // SAFETY: As above, a workqueue allocated by the core lives as long as the kernel.
    Some(unsafe { crate::workqueue::Queue::from_raw(wq) })
}
