// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand, RoCE, iWARP) devices and their verbs.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! The RDMA core allocates every object (device, user context, ...) with a size the driver
//! declares, the C structure first and the driver's data after it. The containers here
//! ([`device::Device`], [`object::UContext`], [`object::Pd`], ...) have that layout; the core calls the driver
//! through the ops table built from a [`driver::Driver`] implementation and frees the memory,
//! the containers drop the driver's data from the matching release callback.

pub mod attr;
pub mod device;
pub mod driver;
pub mod event;
pub mod link;
pub mod mmap;
pub mod object;
pub mod stats;
pub mod sysfs;
pub mod udata;
pub mod umem;

/// Error codes the RDMA core uses that the generic list in [`crate::error::code`] lacks.
pub mod code {
    use crate::{
        bindings,
        error::Error, //
    };

    /// Operation not supported (`EOPNOTSUPP`): what verbs answer to an unknown flag or request.
    pub fn eopnotsupp() -> Error {
        Error::from_errno(-(bindings::EOPNOTSUPP as i32))
    }
}
