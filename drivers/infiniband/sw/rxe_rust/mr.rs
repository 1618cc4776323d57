// SPDX-License-Identifier: GPL-2.0

//! Memory regions: memory the device may access, named by an L_Key and R_Key.

use crate::{
    device::ObjectCount,
    index::{
        Index,
        IndexTable, //
    },
    mw::key,
    param,
    Rxe, //
};
use core::sync::atomic::{
    AtomicU32,
    Ordering::Relaxed, //
};
use kernel::{
    bindings,
    prelude::*,
    rdma::{
        code,
        object::Pd,
        udata::UData,
        umem::Umem, //
    },
    sync::Arc,
};

/// Checks requested access rights (`RXE_ACCESS_SUPPORTED_MR`, no on-demand paging).
fn check_access(access: u32) -> Result {
    if access & !param::ACCESS_SUPPORTED_MR != 0
        || access & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND != 0
    {
        pr_debug!("unsupported access flags {:#x}\n", access);
        return Err(code::eopnotsupp());
    }
    Ok(())
}

/// What the data path will need to find by key index.
pub(crate) struct MrShared {
    /// The `IB_ACCESS_*` rights of the region.
    #[expect(dead_code, reason = "the data path (next step) checks keys and rights")]
    pub(crate) access: u32,
}

/// The device's memory region indices (below those of memory windows).
pub(crate) type MrTable = IndexTable<MrShared>;

/// Creates the device's memory region table.
pub(crate) fn new_mr_table() -> Result<Arc<MrTable>> {
    MrTable::new(param::MIN_MR_INDEX as u32, param::MAX_MR_INDEX as u32)
}

/// A memory region.
pub(crate) struct Mr {
    /// The `IB_ACCESS_*` rights (changed by `rereg_user_mr`; read by the data path).
    access: AtomicU32,
    _umem: Umem,
    _index: Index<MrShared>,
    _count: ObjectCount,
}

impl Mr {
    /// Registers `len` bytes at `start` of the calling process for `access`.
    ///
    /// Returns the region with its L_Key and R_Key (equal, as for the C driver).
    pub(crate) fn new_user(
        pd: &Pd<Rxe>,
        start: u64,
        len: u64,
        access: u32,
        udata: &mut UData<'_>,
    ) -> Result<(Self, u32, u32)> {
        udata.check_in_empty()?;
        check_access(access)?;
        let dev = pd.device();
        let count = dev.mrs.take()?;
        // Pins the pages: fails with EFAULT for memory the process has not mapped.
        let umem = Umem::get(dev, start, len, access)?;
        let index = dev
            .mr_table
            .insert(Arc::new(MrShared { access }, GFP_KERNEL)?, GFP_KERNEL)?;
        let mut b = [0u8; 1];
        kernel::random::fill_bytes(&mut b);
        let k = key(index.get(), b[0]);
        Ok((
            Self {
                access: AtomicU32::new(access),
                _umem: umem,
                _index: index,
                _count: count,
            },
            k,
            k,
        ))
    }
}

impl Mr {
    /// Changes the domain (recorded by the core) and/or the access rights in place.
    ///
    /// Only these two are supported, as by the C driver; a new address range is refused.
    pub(crate) fn rereg(&self, flags: u32, access: u32) -> Result {
        let supported = bindings::ib_mr_rereg_flags_IB_MR_REREG_PD
            | bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
        if flags & !supported != 0 {
            return Err(code::eopnotsupp());
        }
        if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
            check_access(access)?;
            self.access.store(access, Relaxed);
        }
        Ok(())
    }
}
