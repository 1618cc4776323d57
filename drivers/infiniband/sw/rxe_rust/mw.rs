// SPDX-License-Identifier: GPL-2.0

//! Memory windows: remote access to part of a memory region, bound later by a work request.

use crate::{
    device::ObjectCount,
    index::{
        Index,
        IndexTable, //
    },
    mr::MrTable,
    param,
    roce::memory::{
        Access,
        AccessError,
        MwBind, //
    },
    Rxe, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        device::Device,
        mw::{
            MwOps,
            MwType,
            NewMw, //
        },
        pd::Pd,
        udata::UData, //
    },
    sync::{
        rcu,
        Arc,
        SpinLockIrq, //
    },
    xarray::RcuXArray,
};

/// Whether a window is bound (`enum rxe_mw_state`; a window that is not valid is free).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MwState {
    /// Unbound: a type 2 window before its bind and after an invalidation.
    Free,
    /// Bound, or a type 1 window (bound to its domain, of length zero until a bind).
    Valid,
    /// Deallocated: nothing binds or reaches it any more, even a run that found it before
    /// its index went (as the C driver's `RXE_MW_STATE_INVALID`).
    Invalid,
}

/// What a window grants, as its last bind set it.
struct Binding {
    /// The R_Key (the window's index above the key byte of the last bind).
    rkey: u32,
    state: MwState,
    access: Access,
    /// The first address (an offset into the region, if zero based).
    addr: u64,
    /// The length in bytes; zero while unbound.
    length: u64,
    /// The key of the region the window lies in, while it has a length. The region counts
    /// the window ([`MrShared::take_window`]), so it stays registered under that key.
    mr_key: Option<u32>,
    /// The serial of the queue pair a type 2 window is bound to ([`QpShared::serial`]): not
    /// its number, which a later queue pair may get.
    ///
    /// [`QpShared::serial`]: crate::qp::QpShared::serial
    qp: Option<u64>,
}

/// A memory window as the data path finds it by R_Key index.
#[pin_data]
pub(crate) struct MwShared {
    /// Type 1 or type 2.
    mw_type: MwType,
    /// The protection domain (its address: an identity, never dereferenced).
    pd: usize,
    /// Changed by binds and invalidations, which may run on other CPUs than its users.
    #[pin]
    binding: SpinLockIrq<Binding>,
}

impl MwShared {
    /// Binds the window to part of a region of `mrs`, or unbinds it, as `bind` asks, for the
    /// queue pair `qp` (its serial) of domain `pd`: the checks of the C driver's `rxe_check_bind_mw`
    /// (IBA C10-72 to C10-75), then `rxe_do_bind_mw`.
    pub(crate) fn bind(
        &self,
        bind: &MwBind,
        pd: usize,
        qp: u64,
        mrs: &MrTable,
        rcu: &rcu::Guard,
    ) -> Result<(), AccessError> {
        let access = Access::from_bits(bind.access);
        let zero_based = access.contains(Access::ZERO_BASED);
        if bind.access & !(param::ACCESS_SUPPORTED_MR.bits() | Access::ZERO_BASED.bits()) != 0 {
            return Err(AccessError::AccessDenied);
        }
        let mut b = self.binding.lock();
        if b.rkey != bind.mw_rkey || self.pd != pd {
            return Err(AccessError::InvalidKey);
        }
        match self.mw_type {
            MwType::Type1 if b.state != MwState::Valid || zero_based => {
                return Err(AccessError::InvalidKey)
            }
            MwType::Type2 if b.state != MwState::Free || bind.length == 0 => {
                return Err(AccessError::InvalidKey)
            }
            _ => {}
        }
        let mr = if bind.length != 0 {
            let mr = mrs
                .load(bind.mr_lkey >> 8, rcu)
                .ok_or(AccessError::InvalidKey)?;
            mr.check_bind(bind.mr_lkey, pd, access, bind.addr, bind.length)?;
            // Fails if the region is being deregistered, or was invalidated meanwhile.
            mr.take_window(bind.mr_lkey)?;
            Some(mr)
        } else {
            None
        };
        if let Some(old) = b.mr_key.take() {
            release_region(mrs, old, rcu);
        }
        b.rkey = (bind.mw_rkey & !0xff) | (bind.rkey & 0xff);
        b.state = MwState::Valid;
        b.access = access;
        b.addr = bind.addr;
        b.length = bind.length;
        b.mr_key = mr.map(|_| bind.mr_lkey);
        b.qp = (self.mw_type == MwType::Type2).then_some(qp);
        Ok(())
    }

    /// Checks that `rkey` names this window for queue pair `qp` (its serial) of domain `pd`, with `need`
    /// rights on `len` bytes at `va`; returns the key of the region and the address there,
    /// as the C driver's `rxe_lookup_mw` and IBA o10-37.2.
    ///
    /// Unlike the C driver, the range is checked against the window too, not only against
    /// its region.
    pub(crate) fn check(
        &self,
        rkey: u32,
        pd: usize,
        qp: u64,
        va: u64,
        len: usize,
        need: Access,
    ) -> Result<(u32, u64), AccessError> {
        let b = self.binding.lock();
        if b.state != MwState::Valid || b.rkey != rkey || self.pd != pd {
            return Err(AccessError::InvalidKey);
        }
        if self.mw_type == MwType::Type2 && b.qp != Some(qp) {
            return Err(AccessError::InvalidKey);
        }
        let mr_key = b.mr_key.ok_or(AccessError::InvalidKey)?;
        if !b.access.contains(need) {
            return Err(AccessError::AccessDenied);
        }
        let zero_based = b.access.contains(Access::ZERO_BASED);
        let off = if zero_based {
            va
        } else {
            va.checked_sub(b.addr).ok_or(AccessError::OutOfRange)?
        };
        let end = off.checked_add(len as u64).ok_or(AccessError::OutOfRange)?;
        if end > b.length {
            return Err(AccessError::OutOfRange);
        }
        let mr_va = if zero_based {
            b.addr.checked_add(off).ok_or(AccessError::OutOfRange)?
        } else {
            va
        };
        Ok((mr_key, mr_va))
    }

    /// Invalidates the type 2 window whose key is `rkey` for a queue pair of domain `pd`
    /// (local invalidate, SEND with invalidate), as the C driver's `rxe_invalidate_mw`: it is
    /// free again.
    ///
    /// Unlike the C driver, only for a queue pair of the window's domain.
    pub(crate) fn invalidate(
        &self,
        rkey: u32,
        pd: usize,
        mrs: &MrTable,
        rcu: &rcu::Guard,
    ) -> Result<(), AccessError> {
        let mut b = self.binding.lock();
        // IBA o10-37.2.26: a type 1 window is not invalidated by a work request.
        if b.rkey != rkey
            || self.pd != pd
            || self.mw_type == MwType::Type1
            || b.state == MwState::Invalid
        {
            return Err(AccessError::InvalidKey);
        }
        b.unbind(MwState::Free, mrs, rcu);
        Ok(())
    }
}

impl Binding {
    /// Forgets the region and rights, leaving the window in `state`.
    fn unbind(&mut self, state: MwState, mrs: &MrTable, rcu: &rcu::Guard) {
        if let Some(old) = self.mr_key.take() {
            release_region(mrs, old, rcu);
        }
        self.state = state;
        self.access = Access::NONE;
        self.addr = 0;
        self.length = 0;
        self.qp = None;
    }
}

/// Uncounts a window of the region whose key is `mr_key`: the count kept it registered.
fn release_region(mrs: &MrTable, mr_key: u32, rcu: &rcu::Guard) {
    if let Some(mr) = mrs.load(mr_key >> 8, rcu) {
        mr.put_window();
    }
}

/// Memory windows by R_Key index (above those of memory regions); read under the RCU read
/// lock by the queue pairs' runs, which may be in softirq.
pub(crate) type MwTable = IndexTable<MwShared, RcuXArray<Arc<MwShared>>>;

/// Creates the device's memory window table.
pub(crate) fn new_mw_table() -> Result<Arc<MwTable>> {
    MwTable::new(param::MIN_MW_INDEX as u32, param::MAX_MW_INDEX as u32)
}

/// Returns whether `key` names a memory window rather than a memory region.
pub(crate) fn is_window_key(key: u32) -> bool {
    (param::MIN_MW_INDEX as u32..=param::MAX_MW_INDEX as u32).contains(&(key >> 8))
}

/// A memory window.
pub(crate) struct RxeMw {
    shared: Arc<MwShared>,
    /// The regions the window may be bound to.
    mrs: Arc<MrTable>,
    _index: Index<MwShared, RcuXArray<Arc<MwShared>>>,
    _count: ObjectCount,
}

impl Drop for RxeMw {
    fn drop(&mut self) {
        // Deallocated while bound: the region is released, and the key grants nothing, nor
        // binds again, even for a run that found the window before its index went.
        let rcu = rcu::read_lock();
        self.shared
            .binding
            .lock()
            .unbind(MwState::Invalid, &self.mrs, &rcu);
    }
}

#[vtable]
impl MwOps for RxeMw {
    type Driver = Rxe;

    /// Creates a window of `mw_type` in `pd`: a type 1 window is valid (of length zero until
    /// bound), a type 2 window free, as in the C driver.
    fn alloc(
        dev: &Device<Rxe>,
        pd: &Pd<Rxe>,
        mw_type: MwType,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewMw<Self>> {
        udata.check_in_empty()?;
        let count = dev.mws.take()?;
        let state = match mw_type {
            MwType::Type1 => MwState::Valid,
            MwType::Type2 => MwState::Free,
        };
        let shared = Arc::pin_init(
            pin_init!(MwShared {
                mw_type,
                pd: pd.as_raw() as usize,
                binding <- new_spinlock_irq!(Binding {
                    rkey: 0,
                    state,
                    access: Access::NONE,
                    addr: 0,
                    length: 0,
                    mr_key: None,
                    qp: None,
                }),
            }),
            GFP_KERNEL,
        )?;
        let index = dev.mw_table.insert(shared.clone(), GFP_KERNEL)?;
        let rkey = key(index.get(), random_key_byte());
        // No work request names the window before its key is returned.
        shared.binding.lock().rkey = rkey;
        Ok(NewMw {
            data: Self {
                shared,
                mrs: dev.mr_table.clone(),
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
