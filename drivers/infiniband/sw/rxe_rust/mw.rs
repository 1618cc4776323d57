// SPDX-License-Identifier: GPL-2.0

//! Memory windows: remote access to part of a memory region, bound later by a work request.

use crate::{
    device::ObjectCount,
    index::{
        Index,
        IndexTable, //
    },
    param,
    Rxe, //
};
use kernel::{
    prelude::*,
    rdma::{
        device::Device,
        mw::{
            MwOps,
            MwType,
            NewMw, //
        },
        udata::UData, //
    },
    sync::Arc,
};

/// What the data path will need to find by R_Key index.
pub(crate) struct MwShared {
    /// Type 1 or type 2.
    #[expect(
        dead_code,
        reason = "the data path (next step) binds and checks windows"
    )]
    pub(crate) mw_type: MwType,
}

/// The device's memory window indices (above those of memory regions).
pub(crate) type MwTable = IndexTable<MwShared>;

/// Creates the device's memory window table.
pub(crate) fn new_mw_table() -> Result<Arc<MwTable>> {
    MwTable::new(param::MIN_MW_INDEX as u32, param::MAX_MW_INDEX as u32)
}

/// A memory window.
pub(crate) struct RxeMw {
    _index: Index<MwShared>,
    _count: ObjectCount,
}

#[vtable]
impl MwOps for RxeMw {
    type Driver = Rxe;

    /// Creates a window of `mw_type` on `dev`.
    fn alloc(
        dev: &Device<Rxe>,
        mw_type: MwType,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewMw<Self>> {
        udata.check_in_empty()?;
        let count = dev.mws.take()?;
        let index = dev
            .mw_table
            .insert(Arc::new(MwShared { mw_type }, GFP_KERNEL)?, GFP_KERNEL)?;
        let rkey = key(index.get(), random_key_byte());
        Ok(NewMw {
            data: Self {
                _index: index,
                _count: count,
            },
            rkey,
        })
    }
}

/// Returns an L_Key/R_Key: the object's index above a key byte the owner may change.
pub(crate) fn key(index: u32, key_byte: u8) -> u32 {
    (index << 8) | u32::from(key_byte)
}

fn random_key_byte() -> u8 {
    let mut b = [0u8; 1];
    kernel::random::fill_bytes(&mut b);
    b[0]
}
