// SPDX-License-Identifier: GPL-2.0

//! Address handles: where UD packets go.
//!
//! Each handle gets a number (`ah_num`, from 1) that user space puts in its UD send WQEs
//! instead of a kernel pointer; the rxe provider learns it from the create response.

use crate::{
    index::{
        Index,
        IndexTable, //
    },
    param,
    tx::Path,
    Rxe, //
};
use kernel::{
    prelude::*,
    rdma::{
        ah::{
            Ah,
            AhAttr,
            AhAttrSink,
            AhOps,
            GlobalRoute, //
        },
        device::Device,
        pd::Pd,
        udata::UData, //
    },
    sync::Arc,
};
use zerocopy_derive::Immutable;

/// The address vector the data path sends to.
pub(crate) struct Av {
    /// The protection domain (its address: an identity, never dereferenced).
    pd: usize,
    grh: GlobalRoute,
    path: Path,
    port_num: u32,
    sl: u8,
}

impl Av {
    /// Returns the protection domain's identity: a UD send may use the handle only from a
    /// queue pair of the same domain.
    pub(crate) fn pd(&self) -> usize {
        self.pd
    }

    /// Returns where the handle's packets go.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// The device's address handle numbers.
pub(crate) type AhTable = IndexTable<Av>;

/// Creates the device's address handle table.
pub(crate) fn new_ah_table() -> Result<Arc<AhTable>> {
    AhTable::new(1, param::MAX_AH as u32)
}

/// The driver response of `create_ah` (`struct rxe_create_ah_resp`).
#[derive(IntoBytes, Immutable, Clone, Copy)]
#[repr(C)]
struct CreateAhResp {
    ah_num: u32,
    reserved: u32,
}

/// An address handle.
pub(crate) struct RxeAh {
    av: Arc<Av>,
    num: Index<Av>,
}

impl RxeAh {
    /// Returns the handle's number, which send WQEs name it by.
    pub(crate) fn number(&self) -> u32 {
        self.num.get()
    }
}

#[vtable]
impl AhOps for RxeAh {
    type Driver = Rxe;

    /// Creates a handle for `attr` on `dev`.
    fn create(
        dev: &Device<Rxe>,
        pd: &Pd<Rxe>,
        attr: &AhAttr,
        sleepable: bool,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<Self> {
        // RoCE addresses are IP addresses: no global route, no destination.
        if !attr.has_grh() {
            pr_debug!("address handle without a GRH\n");
            return Err(EINVAL);
        }
        let grh = attr.global_route();
        if u32::from(grh.sgid_index) >= param::PORT_GID_TBL_LEN as u32 {
            pr_debug!("source GID index {} out of range\n", grh.sgid_index);
            return Err(EINVAL);
        }
        let gfp = if sleepable { GFP_KERNEL } else { GFP_ATOMIC };
        let av = Arc::new(
            Av {
                pd: pd.as_raw() as usize,
                grh,
                // The core resolves the source GID of every RoCE handle.
                path: Path::from_ah_attr(attr).ok_or(EINVAL)?,
                port_num: attr.port_num(),
                sl: attr.sl(),
            },
            gfp,
        )?;
        let num = dev.ah_table.insert(av.clone(), gfp)?;
        // Only a provider that offers room for the response learns the number.
        if udata.outlen() >= core::mem::size_of::<CreateAhResp>() {
            udata.respond(&CreateAhResp {
                ah_num: num.get(),
                reserved: 0,
            })?;
        }
        Ok(Self { av, num })
    }

    /// Reports the address vector.
    fn query(ah: &Ah<Rxe>, attr: &mut AhAttrSink<'_>) -> Result {
        let av = &ah.av;
        attr.set_roce(&av.grh, av.path.dmac, av.port_num, av.sl);
        Ok(())
    }
}
