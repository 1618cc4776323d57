// SPDX-License-Identifier: GPL-2.0

//! Protection domains.

use crate::{
    device::ObjectCount,
    Rxe, //
};
use kernel::{
    prelude::*,
    rdma::device::Device, //
};

/// A protection domain: memory regions, windows, address handles and QPs belong to one, and
/// may only be used with objects of the same domain.
pub(crate) struct Pd {
    _count: ObjectCount,
}

impl Pd {
    /// Creates a domain on `dev`, within the device's limit of domains.
    pub(crate) fn new(dev: &Device<Rxe>) -> Result<Self> {
        Ok(Self {
            _count: dev.pds.take()?,
        })
    }
}
