// SPDX-License-Identifier: GPL-2.0

//! Protection domains.

use crate::{
    device::ObjectCount,
    Rxe, //
};
use kernel::{
    prelude::*,
    rdma::{
        device::Device,
        pd::PdOps,
        udata::UData, //
    },
};

/// A protection domain: memory regions, windows, address handles and QPs belong to one, and
/// may only be used with objects of the same domain.
pub(crate) struct RxePd {
    _count: ObjectCount,
}

#[vtable]
impl PdOps for RxePd {
    type Driver = Rxe;

    /// Creates a domain on `dev`, within the device's limit of domains.
    fn alloc(dev: &Device<Rxe>, udata: &mut UData<'_, Rxe>) -> Result<Self> {
        udata.check_in_empty()?;
        Ok(Self {
            _count: dev.pds.take()?,
        })
    }
}
