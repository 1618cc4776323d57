// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`) and the address vectors they hold.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        pd::Pd,
        udata::UData, //
    },
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

core_object!(
    /// An address handle (`struct ib_ah`).
    Ah,
    ib_ah,
    Ah
);

/// The verbs of an address handle, implemented by the driver's data for one.
#[vtable]
pub trait AhOps: Send + Sync + Sized {
    /// The driver whose handles these are.
    type Driver: Driver<Ah = Self>;

    /// Creates the driver's data of an address handle for `attr` in `pd`.
    ///
    /// Unless `sleepable`, it runs in atomic context: allocate with `GFP_ATOMIC`.
    fn create(
        _dev: &Device<Self::Driver>,
        _pd: &Pd<Self::Driver>,
        _attr: &AhAttr,
        _sleepable: bool,
        _udata: &mut UData<'_, Self::Driver>,
    ) -> Result<Self> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the address vector of an address handle.
    fn query(_ah: &Ah<Self::Driver>, _attr: &mut AhAttrSink<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// An address vector (`struct rdma_ah_attr`): where a packet goes, as the core passes it to
/// `create_ah` or `modify_qp`, or as a driver keeps it. Read only.
///
/// # Invariants
///
/// `self.0` is initialised; its `sgid_attr` is null or a reference the core holds for the call.
#[repr(transparent)]
pub struct AhAttr(bindings::rdma_ah_attr);

impl AhAttr {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to an initialised address vector, valid for reads for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *const bindings::rdma_ah_attr) -> &'a Self {
        // SAFETY: Transparent wrapper; the caller guarantees validity.
        unsafe { &*ptr.cast() }
    }

    /// Returns the port number.
    pub fn port_num(&self) -> u32 {
        self.0.port_num
    }

    /// Returns the service level.
    pub fn sl(&self) -> u8 {
        self.0.sl
    }

    /// Returns a copy of the vector without the core's reference to the source GID (null).
    pub fn to_raw(&self) -> bindings::rdma_ah_attr {
        let mut a = self.0;
        a.grh.sgid_attr = core::ptr::null();
        a
    }

    /// Returns whether the vector has a global route header (RoCE requires one).
    pub fn has_grh(&self) -> bool {
        u32::from(self.0.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0
    }

    /// Returns the destination GID.
    pub fn dgid(&self) -> [u8; 16] {
        // SAFETY: Every variant of `union ib_gid` is 16 plain bytes.
        unsafe { self.0.grh.dgid.raw }
    }

    /// Returns the source GID the core resolved for the vector, or `None` if it lends none
    /// (a vector a driver kept, whose reference was dropped).
    pub fn sgid(&self) -> Option<[u8; 16]> {
        let attr = self.0.grh.sgid_attr;
        if attr.is_null() {
            return None;
        }
        // SAFETY: By the type invariant a non-null `sgid_attr` is a reference the core holds
        // for the call that lent `self`; every variant of `union ib_gid` is 16 plain bytes.
        Some(unsafe { (*attr).gid.raw })
    }

    /// Returns the destination MAC of a RoCE vector, or `None` for another kind.
    pub fn roce_dmac(&self) -> Option<[u8; 6]> {
        if self.0.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
            return None;
        }
        // SAFETY: The type says the `roce` variant is the one in use.
        Some(unsafe { self.0.__bindgen_anon_1.roce.dmac })
    }

    /// Returns the global route (meaningful if [`AhAttr::has_grh`]).
    pub fn global_route(&self) -> GlobalRoute {
        GlobalRoute {
            dgid: self.dgid(),
            flow_label: self.0.grh.flow_label,
            sgid_index: self.0.grh.sgid_index,
            hop_limit: self.0.grh.hop_limit,
            traffic_class: self.0.grh.traffic_class,
        }
    }
}

/// The address vector `query_ah` reports (`struct rdma_ah_attr`): write only, as the caller's
/// structure may be uninitialised.
///
/// # Invariants
///
/// `self.0` is valid for writes for `'a`.
pub struct AhAttrSink<'a>(NonNull<bindings::rdma_ah_attr>, PhantomData<&'a mut ()>);

impl<'a> AhAttrSink<'a> {
    /// Wraps the caller's structure.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for writes, and not accessed otherwise, for `'a`.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::rdma_ah_attr) -> Option<Self> {
        // INVARIANT: The caller guarantees validity for writes.
        Some(Self(NonNull::new(ptr)?, PhantomData))
    }

    /// Reports a RoCE vector with a global route (the fields not passed are zeroed, the source
    /// GID reference null).
    pub fn set_roce(&mut self, grh: &GlobalRoute, dmac: [u8; 6], port_num: u32, sl: u8) {
        let mut a: bindings::rdma_ah_attr = pin_init::zeroed();
        a.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.port_num = port_num;
        a.sl = sl;
        a.grh.dgid.raw = grh.dgid;
        a.grh.flow_label = grh.flow_label;
        a.grh.sgid_index = grh.sgid_index;
        a.grh.hop_limit = grh.hop_limit;
        a.grh.traffic_class = grh.traffic_class;
        a.__bindgen_anon_1.roce.dmac = dmac;
        // SAFETY: By the type invariant the pointer is valid for writes; a whole write reads
        // nothing of the old contents.
        unsafe { self.0.as_ptr().write(a) };
    }
}

/// The global route of an address vector (`struct ib_global_route`, without the core's
/// reference to the source GID).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalRoute {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Traffic class / DSCP+ECN.
    pub traffic_class: u8,
}

/// The `create_ah` and `create_user_ah` ops.
///
/// # Safety
///
/// `ibah` is a handle the core allocated with `size_ib_ah` of driver `T` (zeroed past the C
/// part) with `device` and `pd` (a live domain of the same device) set, not yet visible to
/// anyone; `init` holds an initialised address vector whose source GID reference the core
/// holds for the call; `udata` is null or the call's udata. Without
/// `RDMA_CREATE_AH_SLEEPABLE` the op runs in atomic context.
pub(crate) unsafe extern "C" fn create_ah<T: Driver>(
    ibah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device, the domain, the
    // vector and the udata.
    let (dev, pd, attr, sleepable, mut udata) = unsafe {
        (
            Ah::<T>::device_of(ibah),
            Pd::<T>::from_raw((*ibah).pd),
            AhAttr::from_raw((*init).ah_attr),
            (*init).flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0,
            UData::from_raw(udata),
        )
    };
    match T::Ah::create(dev, pd, attr, sleepable, &mut udata) {
        Ok(data) => {
            // SAFETY: The container's data field is valid for writes and uninitialised.
            unsafe { Ah::<T>::data_ptr(ibah).write(data) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `destroy_ah` op.
///
/// # Safety
///
/// `ibah` is a handle of driver `T` for which [`create_ah`] succeeded; the core calls this
/// once, when no request in flight names it, and frees the memory after.
pub(crate) unsafe extern "C" fn destroy_ah<T: Driver>(
    ibah: *mut bindings::ib_ah,
    _flags: u32,
) -> c_int {
    // SAFETY: The caller guarantees the data is initialised and used no more.
    unsafe { core::ptr::drop_in_place(Ah::<T>::data_ptr(ibah)) };
    0
}

/// The `query_ah` op.
///
/// # Safety
///
/// `ibah` is a live handle of driver `T`, and `attr` the caller's structure, valid for
/// writes for the call and possibly uninitialised.
pub(crate) unsafe extern "C" fn query_ah<T: Driver>(
    ibah: *mut bindings::ib_ah,
    attr: *mut bindings::rdma_ah_attr,
) -> c_int {
    // SAFETY: The caller guarantees the handle is live and `attr` valid for writes (the sink
    // only writes).
    let (ah, attr) = unsafe { (Ah::<T>::from_raw(ibah), AhAttrSink::from_raw(attr)) };
    let Some(mut attr) = attr else {
        return EINVAL.to_errno();
    };
    match T::Ah::query(ah, &mut attr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
