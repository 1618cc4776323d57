// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`) and their access rights.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    alloc::KBox,
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        driver::Driver,
        pd::Pd,
        udata::UData,
        virt_dma::VirtDma,
        wr::Sge, //
    },
    types::Opaque, //
};
use core::ops::Deref;

c_flags! {
    /// Access rights of a memory region or window (`enum ib_access_flags`).
    pub struct AccessFlags: u32 {
        /// The device may write locally.
        const LOCAL_WRITE = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
        /// Remote RDMA WRITE.
        const REMOTE_WRITE = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        /// Remote RDMA READ.
        const REMOTE_READ = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
        /// Remote atomic operations.
        const REMOTE_ATOMIC = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
        /// Memory windows may be bound.
        const MW_BIND = bindings::ib_access_flags_IB_ACCESS_MW_BIND;
        /// Zero-based addressing.
        const ZERO_BASED = bindings::ib_access_flags_IB_ZERO_BASED;
        /// On-demand paging.
        const ON_DEMAND = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND;
        /// Huge pages.
        const HUGETLB = bindings::ib_access_flags_IB_ACCESS_HUGETLB;
        /// Global visibility flush.
        const FLUSH_GLOBAL = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
        /// Persistence flush.
        const FLUSH_PERSISTENT = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
        /// Relaxed ordering.
        const RELAXED_ORDERING = bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;
    }
}

impl AccessFlags {
    /// The optional flags, which a device may ignore (`IB_ACCESS_OPTIONAL`).
    pub const OPTIONAL: Self = Self::from_bits_retain(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);
}

c_flags! {
    /// What `rereg_user_mr` changes (`enum ib_mr_rereg_flags`).
    pub struct ReregFlags: u32 {
        /// The translation (address range).
        const TRANS = bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS;
        /// The protection domain.
        const PD = bindings::ib_mr_rereg_flags_IB_MR_REREG_PD;
        /// The access rights.
        const ACCESS = bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
    }
}

c_enum! {
    /// The type of a region a kernel consumer allocates (`enum ib_mr_type`).
    pub enum MrType: u32 {
        /// Fast registration by a work request.
        MemReg = bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
        /// Arbitrary scatter lists.
        SgGaps = bindings::ib_mr_type_IB_MR_TYPE_SG_GAPS,
        /// Driver-specific.
        Dm = bindings::ib_mr_type_IB_MR_TYPE_DM,
        /// User memory.
        User = bindings::ib_mr_type_IB_MR_TYPE_USER,
        /// DMA memory.
        Dma = bindings::ib_mr_type_IB_MR_TYPE_DMA,
        /// Signature integrity.
        Integrity = bindings::ib_mr_type_IB_MR_TYPE_INTEGRITY,
    }
}

c_enum! {
    /// What `ibv_advise_mr` asks of regions registered for on-demand paging
    /// (`enum ib_uverbs_advise_mr_advice`).
    pub enum Advice: u32 {
        /// Fault the ranges in for reading.
        Prefetch = bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH,
        /// Fault the ranges in for writing.
        PrefetchWrite =
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
        /// Take note of the pages present, faulting none in.
        PrefetchNoFault =
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
    }
}

/// A new region's data and keys, as the [`MrOps`] constructors return them.
pub struct NewMr<D> {
    /// The driver's data.
    pub data: D,
    /// The local key.
    pub lkey: u32,
    /// The remote key.
    pub rkey: u32,
}

/// The verbs of a memory region, implemented by the driver's data for one.
#[vtable]
pub trait MrOps: Send + Sync + Sized {
    /// The driver whose regions these are.
    type Driver: Driver<Mr = Self>;

    /// Registers `len` bytes of the caller's memory at `start`, seen by the device at `iova`.
    fn reg_user(
        _pd: &Pd<Self::Driver>,
        _start: u64,
        _len: u64,
        _iova: u64,
        _access: AccessFlags,
        _udata: &mut UData<'_, Self::Driver>,
    ) -> Result<NewMr<Self>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes a region in place, as `flags` selects: a new domain `pd` (which the core
    /// records; the region's own domain without [`ReregFlags::PD`]) and/or new `access`
    /// rights.
    fn rereg_user(
        _mr: &Mr<Self::Driver>,
        _flags: ReregFlags,
        _access: AccessFlags,
        _pd: &Pd<Self::Driver>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a region covering all of memory for kernel consumers, reached through `dma`.
    fn get_dma(_pd: &Pd<Self::Driver>, _access: AccessFlags, _dma: VirtDma) -> Result<NewMr<Self>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a fast-registration region of type `mr_type` for up to `max_num_sg` pages,
    /// whose memory is reached through `dma`.
    fn alloc(
        _pd: &Pd<Self::Driver>,
        _mr_type: MrType,
        _max_num_sg: u32,
        _dma: VirtDma,
    ) -> Result<NewMr<Self>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Starts mapping a fast-registration region (`map_mr_sg`): forgets its pages.
    ///
    /// The core then calls [`MrOps::map_sg_page`] for each page, in order.
    fn map_sg_start(_mr: &Mr<Self::Driver>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Appends the page at DMA address `addr` to a fast-registration region being mapped.
    fn map_sg_page(_mr: &Mr<Self::Driver>, _addr: u64) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Checks that a region may be deregistered now (no window bound to it, say).
    fn dereg(_mr: &Mr<Self::Driver>) -> Result {
        Ok(())
    }

    /// Carries out `advice` on the ranges `sges` name, by local key, in regions of `pd`
    /// (`ibv_advise_mr`); before returning if `flush` (`IB_UVERBS_ADVISE_MR_FLAG_FLUSH`),
    /// otherwise when the driver chooses. Process context: may sleep.
    fn advise(_pd: &Pd<Self::Driver>, _advice: Advice, _flush: bool, _sges: &[Sge]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A memory region (`struct ib_mr`) of driver `T`.
///
/// Unlike the objects above, the driver allocates memory regions: the container is a
/// [`KBox`] that the driver's `reg_user_mr` creates and `dereg_mr` frees.
///
/// # Invariants
///
/// `raw` is at offset 0; the data is initialised for the lifetime of the container.
#[repr(C)]
pub struct Mr<T: Driver> {
    raw: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

impl<T: Driver> Mr<T> {
    /// Returns the page size a kernel consumer chose for a fast-registration region.
    ///
    /// Meaningful in `map_mr_sg`, where the core has just set it.
    pub fn page_size(&self) -> u32 {
        // SAFETY: The region is live; `page_size` is plain data the core writes before calling
        // `map_mr_sg`, and not concurrently with it.
        unsafe { (*self.raw.get()).page_size }
    }

    /// Returns the first address of a fast-registration region's mapped pages, as the last
    /// `map_mr_sg` set it (`ib_mr.iova`).
    pub fn iova(&self) -> u64 {
        // SAFETY: The region is live; `iova` is plain data the core writes in `map_mr_sg`,
        // which the consumer does not run while it posts the region.
        unsafe { (*self.raw.get()).iova }
    }

    /// Returns the length of a fast-registration region's mapped pages (`ib_mr.length`).
    pub fn length(&self) -> u64 {
        // SAFETY: As in `iova`.
        unsafe { (*self.raw.get()).length }
    }

    /// Allocates a region holding the new region's data and keys.
    pub(crate) fn alloc(new: NewMr<T::Mr>) -> Result<*mut bindings::ib_mr> {
        let mr = KBox::new(
            Self {
                raw: Opaque::zeroed(),
                data: new.data,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(mr).cast::<bindings::ib_mr>();
        // SAFETY: `raw` is the zeroed `ib_mr` at the start of the new container, ours alone.
        unsafe {
            (*raw).lkey = new.lkey;
            (*raw).rkey = new.rkey;
        }
        Ok(raw)
    }

    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`Mr::alloc`] for driver `T` and not be freed for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: `ib_mr` is the first field of the `repr(C)` container.
        unsafe { &*ptr.cast() }
    }

    /// Frees a region.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`Mr::alloc`] for driver `T`; nothing may use it afterwards.
    pub(crate) unsafe fn free(ptr: *mut bindings::ib_mr) {
        // SAFETY: The container was leaked from a `KBox` in `alloc`.
        drop(unsafe { KBox::from_raw(ptr.cast::<Self>()) });
    }
}

/// The `reg_user_mr` op.
///
/// # Safety
///
/// `ibpd` is a live domain of driver `T` that the core holds for the call; `dmah` is null or
/// a DMA handle; `udata` is null (`ib_reg_user_mr` of a kernel caller) or the `driver_udata`
/// of the uverbs call's bundle.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn reg_user_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    start: u64,
    len: u64,
    iova: u64,
    access: c_int,
    dmah: *mut bindings::ib_dmah,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    // SAFETY: The caller guarantees the domain is live and the udata a bundle's, or null.
    let (pd, mut udata) = unsafe { (Pd::<T>::from_raw(ibpd), UData::from_bundle(udata)) };
    let access = AccessFlags::from_bits_retain(access as u32);
    match T::Mr::reg_user(pd, start, len, iova, access, &mut udata).and_then(Mr::<T>::alloc) {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// The `rereg_user_mr` op.
///
/// # Safety
///
/// `ibmr` is a live region of driver `T` from [`reg_user_mr`], whose rereg calls the core
/// serialises; `ibpd` is the new domain (or the region's own), a live domain of the same
/// device that the core holds for the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn rereg_user_mr<T: Driver>(
    ibmr: *mut bindings::ib_mr,
    flags: c_int,
    _start: u64,
    _len: u64,
    _iova: u64,
    access: c_int,
    ibpd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: The caller guarantees the region and the domain are live.
    let (mr, pd) = unsafe { (Mr::<T>::from_raw(ibmr), Pd::<T>::from_raw(ibpd)) };
    let flags = ReregFlags::from_bits_retain(flags as u32);
    match T::Mr::rereg_user(mr, flags, AccessFlags::from_bits_retain(access as u32), pd) {
        // Changed in place: no new region.
        Ok(()) => core::ptr::null_mut(),
        Err(e) => e.to_ptr(),
    }
}

/// The `dereg_mr` op.
///
/// # Safety
///
/// `ibmr` is a live region of driver `T` (from [`reg_user_mr`], [`get_dma_mr`] or
/// [`alloc_mr`]); if this op succeeds, the core uses it no more.
pub(crate) unsafe extern "C" fn dereg_mr<T: Driver>(
    ibmr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the region is live.
    if let Err(e) = T::Mr::dereg(unsafe { Mr::<T>::from_raw(ibmr) }) {
        return e.to_errno();
    }
    // SAFETY: The caller guarantees the core is done with the region; it came from
    // `Mr::alloc`.
    unsafe { Mr::<T>::free(ibmr) };
    0
}

/// The `get_dma_mr` op.
///
/// # Safety
///
/// `ibpd` is a live domain of driver `T` that the core holds for the call.
pub(crate) unsafe extern "C" fn get_dma_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: The caller guarantees the domain is live.
    let pd = unsafe { Pd::<T>::from_raw(ibpd) };
    let access = AccessFlags::from_bits_retain(access as u32);
    // `get_dma_mr` is a verb of kernel consumers only.
    match T::Mr::get_dma(pd, access, VirtDma::new()).and_then(Mr::<T>::alloc) {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// The `alloc_mr` op.
///
/// # Safety
///
/// `ibpd` is a live domain of driver `T` that the core holds for the call.
pub(crate) unsafe extern "C" fn alloc_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // SAFETY: The caller guarantees the domain is live.
    let pd = unsafe { Pd::<T>::from_raw(ibpd) };
    let Some(mr_type) = MrType::from_raw(mr_type) else {
        return EINVAL.to_ptr();
    };
    // `alloc_mr` is a verb of kernel consumers only.
    match T::Mr::alloc(pd, mr_type, max_num_sg, VirtDma::new()).and_then(Mr::<T>::alloc) {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// The `advise_mr` op.
///
/// # Safety
///
/// `ibpd` is a live domain of driver `T` that the core holds for the call; `sg_list` points to
/// `num_sge` entries, valid for the call (or `num_sge` is zero).
pub(crate) unsafe extern "C" fn advise_mr<T: Driver>(
    ibpd: *mut bindings::ib_pd,
    advice: bindings::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut bindings::ib_sge,
    num_sge: u32,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    let Some(advice) = Advice::from_raw(advice) else {
        return EOPNOTSUPP.to_errno();
    };
    if flags & !bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0 {
        return EOPNOTSUPP.to_errno();
    }
    let sges: &[Sge] = if num_sge == 0 || sg_list.is_null() {
        &[]
    } else {
        // SAFETY: The caller guarantees `num_sge` valid entries; `Sge` is a transparent
        // wrapper of `ib_sge`.
        unsafe { core::slice::from_raw_parts(sg_list.cast::<Sge>(), num_sge as usize) }
    };
    // SAFETY: The caller guarantees the domain is live.
    let pd = unsafe { Pd::<T>::from_raw(ibpd) };
    let flush = flags & bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
    match T::Mr::advise(pd, advice, flush, sges) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `map_mr_sg` op.
///
/// # Safety
///
/// `ibmr` is a live fast-registration region of driver `T` from [`alloc_mr`], not posted in a
/// registration request meanwhile (the consumer's duty); `sg` is a DMA-mapped scatterlist of
/// `sg_nents` entries and `sg_offset` null or valid, for the call.
pub(crate) unsafe extern "C" fn map_mr_sg<T: Driver>(
    ibmr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    // SAFETY: The caller guarantees the region is live.
    if let Err(e) = T::Mr::map_sg_start(unsafe { Mr::<T>::from_raw(ibmr) }) {
        return e.to_errno();
    }
    // SAFETY: The caller guarantees the region, the scatterlist and the offset; `set_page`
    // matches the callback type and is called only for this region.
    unsafe { bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(set_page::<T>)) }
}

/// The page callback of `ib_sg_to_pages`, called from [`map_mr_sg`].
///
/// # Safety
///
/// `ibmr` is the live region of driver `T` that [`map_mr_sg`] passed.
unsafe extern "C" fn set_page<T: Driver>(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: The caller guarantees the region is live.
    match T::Mr::map_sg_page(unsafe { Mr::<T>::from_raw(ibmr) }, addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
