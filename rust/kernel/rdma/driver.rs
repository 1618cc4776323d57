// SPDX-License-Identifier: GPL-2.0

//! RDMA device drivers: the device and port verbs, and the ops table built from a driver's
//! traits.

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        ah::{
            self,
            AhOps, //
        },
        attr::{
            DeviceAttr,
            DeviceModifyFlags,
            DriverId,
            LinkLayer,
            PortAttr,
            PortImmutable,
            PortModifyFlags, //
        },
        cq::{
            self,
            CqOps, //
        },
        device::Device,
        mr::{
            self,
            MrOps, //
        },
        mw::{
            self,
            MwOps, //
        },
        pd::{
            self,
            PdOps, //
        },
        qp::{
            self,
            QpOps, //
        },
        srq::{
            self,
            SrqOps, //
        },
        stats::StatDesc,
        sysfs,
        ucontext::{
            self,
            UContextOps, //
        },
        udata::UData, //
    },
};
use core::marker::PhantomData;

/// An RDMA device driver: the verbs of its devices and ports, and the driver's data for each
/// kind of object, whose verbs are the traits of those kinds.
///
/// Each method is called by the RDMA core with the device (or object) it concerns; the core
/// serialises nothing: methods may run concurrently, on any thread, in process context.
#[vtable]
pub trait Driver: Sized + 'static {
    /// The driver's data in each device.
    type Data: Send + Sync;

    /// The driver's data in each user context.
    type UContext: UContextOps<Driver = Self>;

    /// The driver's data in each protection domain.
    type Pd: PdOps<Driver = Self>;

    /// The driver's data in each completion queue.
    type Cq: CqOps<Driver = Self>;

    /// The driver's data in each queue pair.
    type Qp: QpOps<Driver = Self>;

    /// The driver's data in each address handle.
    type Ah: AhOps<Driver = Self>;

    /// The driver's data in each shared receive queue.
    type Srq: SrqOps<Driver = Self>;

    /// The driver's data in each memory window.
    type Mw: MwOps<Driver = Self>;

    /// The driver's data in each memory region.
    type Mr: MrOps<Driver = Self>;

    /// Whether the device shows the C Soft-RoCE driver's `parent` attribute in sysfs: the
    /// name of the netdevice behind port 1.
    const PARENT_ATTRIBUTE: bool = false;

    /// The names of the port counters, in the order [`Driver::get_hw_stats`] fills them.
    const HW_STATS: &'static [StatDesc] = &[];

    /// The uverbs driver id (`enum rdma_driver_id`), which user-space providers match.
    const DRIVER_ID: DriverId;

    /// The uverbs ABI version the user-space provider expects.
    const UVERBS_ABI_VERSION: u32;

    /// Fills the device attributes.
    fn query_device(
        dev: &Device<Self>,
        attr: &mut DeviceAttr,
        udata: &mut UData<'_, Self>,
    ) -> Result;

    /// Fills the attributes of `port` (numbered from 1).
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result;

    /// Fills the immutable properties of `port`, read once at registration.
    fn get_port_immutable(dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result;

    /// Returns the link layer of `port`.
    fn get_link_layer(dev: &Device<Self>, port: u32) -> LinkLayer;

    /// Returns the P_Key at `index` of `port`'s table.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// Accepts a change of the device's identity, as `mask` selects.
    ///
    /// `sys_image_guid` is the new system image GUID (host order). When the driver accepts
    /// [`DeviceModifyFlags::NODE_DESC`], the abstraction stores `node_desc` in the device.
    fn modify_device(
        _dev: &Device<Self>,
        _mask: DeviceModifyFlags,
        _sys_image_guid: u64,
        _node_desc: &[u8],
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes the capability flags of `port` (`set` then `clear`), and resets the Q_Key
    /// violation counter with [`PortModifyFlags::RESET_QKEY_CNTR`] in `mask`.
    fn modify_port(
        _dev: &Device<Self>,
        _port: u32,
        _mask: PortModifyFlags,
        _set: u32,
        _clear: u32,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads the counters of `port` into `values`, one per [`Driver::HW_STATS`] entry.
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Processes the management datagram `in_mad` that arrived at, or is asked of, `port`
    /// (`process_mad`): the core asks the performance manager's counters this way (the
    /// port's `counters` in sysfs), and the MAD layer hands every MAD received on QP1 here
    /// first. Answers in `out_mad` with [`MadResult::Reply`], or lets the MAD layer pass it
    /// on with [`MadResult::Ignored`].
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _in_mad: &[u8; MAD_SIZE],
        _out_mad: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Finishes registration once clients may use the device: reports the port's state.
    fn enable_driver(_dev: &Device<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The size of an InfiniBand management datagram (`struct ib_mad`).
pub const MAD_SIZE: usize = core::mem::size_of::<bindings::ib_mad>();

/// What [`Driver::process_mad`] did with a management datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadResult {
    /// Not for the driver: the MAD layer handles it (`IB_MAD_RESULT_SUCCESS`).
    Ignored,
    /// The answer is in the output datagram (`IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY`).
    Reply,
}

/// The C ops table of driver `T`.
pub(crate) struct OpsTable<T: Driver>(PhantomData<T>);

impl<T: Driver> OpsTable<T> {
    /// Fails the build for a driver whose object containers need more alignment than the
    /// core's allocations give: it allocates them with `kzalloc`, aligned to
    /// `ARCH_KMALLOC_MINALIGN`, at least that of `u64`.
    const ALIGNED: () = {
        let min = core::mem::align_of::<u64>();
        assert!(
            core::mem::align_of::<Device<T>>() <= min
                && core::mem::align_of::<ucontext::UContext<T>>() <= min
                && core::mem::align_of::<pd::Pd<T>>() <= min
                && core::mem::align_of::<cq::Cq<T>>() <= min
                && core::mem::align_of::<qp::Qp<T>>() <= min
                && core::mem::align_of::<srq::Srq<T>>() <= min
                && core::mem::align_of::<ah::Ah<T>>() <= min
                && core::mem::align_of::<mw::Mw<T>>() <= min,
            "an RDMA object's data needs more alignment than kmalloc gives"
        );
    };

    pub(crate) const OPS: bindings::ib_device_ops = {
        #[allow(clippy::let_unit_value)]
        let () = Self::ALIGNED;
        Self::TABLE
    };

    const TABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID.raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        dealloc_driver: Some(dealloc_driver::<T>),
        query_device: Some(query_device::<T>),
        query_port: Some(query_port::<T>),
        get_port_immutable: Some(get_port_immutable::<T>),
        get_link_layer: Some(get_link_layer::<T>),
        query_pkey: Some(query_pkey::<T>),
        modify_device: if T::HAS_MODIFY_DEVICE {
            Some(modify_device::<T>)
        } else {
            None
        },
        alloc_ucontext: Some(ucontext::alloc_ucontext::<T>),
        dealloc_ucontext: Some(ucontext::dealloc_ucontext::<T>),
        mmap: Some(ucontext::mmap),
        mmap_free: Some(ucontext::mmap_free),
        disassociate_ucontext: Some(ucontext::disassociate_ucontext),
        create_cq: Some(cq::create_cq::<T>),
        destroy_cq: Some(cq::destroy_cq::<T>),
        resize_user_cq: if T::Cq::HAS_RESIZE {
            Some(cq::resize_cq::<T>)
        } else {
            None
        },
        req_notify_cq: if T::Cq::HAS_REQ_NOTIFY {
            Some(cq::req_notify_cq::<T>)
        } else {
            None
        },
        poll_cq: if T::Cq::HAS_POLL {
            Some(cq::poll_cq::<T>)
        } else {
            None
        },
        peek_cq: if T::Cq::HAS_PEEK {
            Some(cq::peek_cq::<T>)
        } else {
            None
        },
        size_ib_cq: core::mem::size_of::<cq::Cq<T>>(),
        create_qp: Some(qp::create_qp::<T>),
        modify_qp: Some(qp::modify_qp::<T>),
        query_qp: Some(qp::query_qp::<T>),
        destroy_qp: Some(qp::destroy_qp::<T>),
        attach_mcast: if T::Qp::HAS_ATTACH_MCAST {
            Some(qp::attach_mcast::<T>)
        } else {
            None
        },
        detach_mcast: if T::Qp::HAS_ATTACH_MCAST {
            Some(qp::detach_mcast::<T>)
        } else {
            None
        },
        post_send: Some(qp::post_send::<T>),
        post_recv: Some(qp::post_recv::<T>),
        size_ib_qp: core::mem::size_of::<qp::Qp<T>>(),
        create_ah: if T::Ah::HAS_CREATE {
            Some(ah::create_ah::<T>)
        } else {
            None
        },
        create_user_ah: if T::Ah::HAS_CREATE {
            Some(ah::create_ah::<T>)
        } else {
            None
        },
        destroy_ah: if T::Ah::HAS_CREATE {
            Some(ah::destroy_ah::<T>)
        } else {
            None
        },
        query_ah: if T::Ah::HAS_QUERY {
            Some(ah::query_ah::<T>)
        } else {
            None
        },
        size_ib_ah: if T::Ah::HAS_CREATE {
            core::mem::size_of::<ah::Ah<T>>()
        } else {
            0
        },
        alloc_mw: if T::Mw::HAS_ALLOC {
            Some(mw::alloc_mw::<T>)
        } else {
            None
        },
        dealloc_mw: if T::Mw::HAS_ALLOC {
            Some(mw::dealloc_mw::<T>)
        } else {
            None
        },
        create_srq: Some(srq::create_srq::<T>),
        destroy_srq: Some(srq::destroy_srq::<T>),
        modify_srq: if T::Srq::HAS_MODIFY {
            Some(srq::modify_srq::<T>)
        } else {
            None
        },
        query_srq: if T::Srq::HAS_QUERY {
            Some(srq::query_srq::<T>)
        } else {
            None
        },
        post_srq_recv: Some(srq::post_srq_recv::<T>),
        size_ib_srq: core::mem::size_of::<srq::Srq<T>>(),
        get_dma_mr: if T::Mr::HAS_GET_DMA {
            Some(mr::get_dma_mr::<T>)
        } else {
            None
        },
        alloc_mr: if T::Mr::HAS_ALLOC {
            Some(mr::alloc_mr::<T>)
        } else {
            None
        },
        map_mr_sg: if T::Mr::HAS_MAP_SG_PAGE {
            Some(mr::map_mr_sg::<T>)
        } else {
            None
        },
        alloc_hw_port_stats: if T::HAS_GET_HW_STATS {
            Some(alloc_hw_port_stats::<T>)
        } else {
            None
        },
        get_hw_stats: if T::HAS_GET_HW_STATS {
            Some(get_hw_stats::<T>)
        } else {
            None
        },
        modify_hw_stat: if T::HAS_GET_HW_STATS && StatDesc::any_optional(T::HW_STATS) {
            Some(modify_hw_stat)
        } else {
            None
        },
        device_group: if T::PARENT_ATTRIBUTE {
            sysfs::PARENT_GROUP.as_ptr()
        } else {
            core::ptr::null()
        },
        process_mad: if T::HAS_PROCESS_MAD {
            Some(process_mad::<T>)
        } else {
            None
        },
        modify_port: if T::HAS_MODIFY_PORT {
            Some(modify_port::<T>)
        } else {
            None
        },
        enable_driver: if T::HAS_ENABLE_DRIVER {
            Some(enable_driver::<T>)
        } else {
            None
        },
        reg_user_mr: if T::Mr::HAS_REG_USER {
            Some(mr::reg_user_mr::<T>)
        } else {
            None
        },
        rereg_user_mr: if T::Mr::HAS_REREG_USER {
            Some(mr::rereg_user_mr::<T>)
        } else {
            None
        },
        advise_mr: if T::Mr::HAS_ADVISE {
            Some(mr::advise_mr::<T>)
        } else {
            None
        },
        dereg_mr: if T::Mr::HAS_REG_USER || T::Mr::HAS_GET_DMA || T::Mr::HAS_ALLOC {
            Some(mr::dereg_mr::<T>)
        } else {
            None
        },
        size_ib_mw: if T::Mw::HAS_ALLOC {
            core::mem::size_of::<mw::Mw<T>>()
        } else {
            0
        },
        size_ib_ucontext: core::mem::size_of::<ucontext::UContext<T>>(),
        alloc_pd: if T::Pd::HAS_ALLOC {
            Some(pd::alloc_pd::<T>)
        } else {
            None
        },
        dealloc_pd: if T::Pd::HAS_ALLOC {
            Some(pd::dealloc_pd::<T>)
        } else {
            None
        },
        size_ib_pd: if T::Pd::HAS_ALLOC {
            core::mem::size_of::<pd::Pd<T>>()
        } else {
            0
        },
        ..pin_init::zeroed()
    };
}

/// Returns the device of a callback.
///
/// # Safety
///
/// `ibdev` must be a device of driver `T` whose data is initialised for `'a`: the core calls
/// the device ops only in that window.
unsafe fn dev<'a, T: Driver>(ibdev: *mut bindings::ib_device) -> &'a Device<T> {
    // SAFETY: The caller guarantees the device and its data.
    unsafe { Device::from_raw(ibdev) }
}

/// The `dealloc_driver` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` whose data is initialised; the core calls this once,
/// after unregistration and the last reference, and frees the memory after.
pub(crate) unsafe extern "C" fn dealloc_driver<T: Driver>(ibdev: *mut bindings::ib_device) {
    // SAFETY: The core calls this exactly once, last; nothing uses the data afterwards.
    unsafe { core::ptr::drop_in_place(Device::<T>::data_ptr(ibdev)) };
}

/// The `query_device` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` with initialised data; `attr` is a zeroed structure
/// valid for writes for the call; `udata` is null or the call's udata.
pub(crate) unsafe extern "C" fn query_device<T: Driver>(
    ibdev: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The core passes a valid device, attribute buffer and optional udata.
    let (dev, attr, mut udata) = unsafe {
        (
            dev::<T>(ibdev),
            DeviceAttr::from_raw(attr),
            UData::from_raw(udata),
        )
    };
    match T::query_device(dev, attr, &mut udata) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `query_port` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` with initialised data; `attr` is a zeroed structure
/// valid for writes for the call.
pub(crate) unsafe extern "C" fn query_port<T: Driver>(
    ibdev: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> c_int {
    // SAFETY: The core passes a valid device and attribute buffer.
    let (dev, attr) = unsafe { (dev::<T>(ibdev), PortAttr::from_raw(attr)) };
    match T::query_port(dev, port, attr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `get_port_immutable` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` with initialised data, being registered; `imm` is a
/// zeroed structure valid for writes for the call.
pub(crate) unsafe extern "C" fn get_port_immutable<T: Driver>(
    ibdev: *mut bindings::ib_device,
    port: u32,
    imm: *mut bindings::ib_port_immutable,
) -> c_int {
    // SAFETY: The core passes a valid device and buffer.
    let (dev, imm) = unsafe { (dev::<T>(ibdev), PortImmutable::from_raw(imm)) };
    match T::get_port_immutable(dev, port, imm) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `get_link_layer` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` with initialised data.
pub(crate) unsafe extern "C" fn get_link_layer<T: Driver>(
    ibdev: *mut bindings::ib_device,
    port: u32,
) -> bindings::rdma_link_layer {
    // SAFETY: The core passes a valid device.
    T::get_link_layer(unsafe { dev::<T>(ibdev) }, port) as bindings::rdma_link_layer
}

/// The `query_pkey` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` with initialised data; `pkey` is valid for writes.
pub(crate) unsafe extern "C" fn query_pkey<T: Driver>(
    ibdev: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    // SAFETY: The core passes a valid device.
    match T::query_pkey(unsafe { dev::<T>(ibdev) }, port, index) {
        Ok(p) => {
            // SAFETY: The core passes a valid output pointer.
            unsafe { pkey.write(p) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `modify_device` op.
///
/// # Safety
///
/// `ibdev` is a registered device of driver `T`; `attr` is valid for reads for the call.
pub(crate) unsafe extern "C" fn modify_device<T: Driver>(
    ibdev: *mut bindings::ib_device,
    mask: c_int,
    attr: *mut bindings::ib_device_modify,
) -> c_int {
    // SAFETY: The core passes a live device and the new values.
    let (dev, attr) = unsafe { (dev::<T>(ibdev), &*attr) };
    let desc: &[u8] = &attr.node_desc;
    let len = desc.iter().position(|&c| c == 0).unwrap_or(desc.len());
    let mask = DeviceModifyFlags::from_bits_retain(mask as u32);
    if let Err(e) = T::modify_device(
        dev,
        mask,
        attr.sys_image_guid,
        desc.get(..len).unwrap_or(desc),
    ) {
        return e.to_errno();
    }
    if mask.contains(DeviceModifyFlags::NODE_DESC) {
        // SAFETY: `node_desc` is a plain array in the live device. The C drivers store it
        // the same way; sysfs readers tolerate a description that is being rewritten.
        unsafe { (*ibdev).node_desc = attr.node_desc };
    }
    0
}

/// The `alloc_hw_port_stats` op.
///
/// # Safety
///
/// `_ibdev` is a device of driver `T`, being registered.
pub(crate) unsafe extern "C" fn alloc_hw_port_stats<T: Driver>(
    _ibdev: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    // The core's sysfs code skips optional counters only after the regular ones (it warns and
    // shows wrong values otherwise): a table that mixes them is refused, and so is the device.
    if !StatDesc::optional_last(T::HW_STATS) {
        pr_err!("rdma: optional port counters must come after the others\n");
        return core::ptr::null_mut();
    }
    let Ok(n) = c_int::try_from(T::HW_STATS.len()) else {
        return core::ptr::null_mut();
    };
    // SAFETY: The descriptor table is static; the core frees the result.
    let stats = unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            StatDesc::as_raw(T::HW_STATS),
            n,
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as crate::ffi::c_ulong,
        )
    };
    if stats.is_null() {
        return stats;
    }
    // Optional counters start hidden: the core starts with every counter enabled.
    let bits = crate::ffi::c_ulong::BITS as usize;
    for (i, desc) in T::HW_STATS.iter().enumerate() {
        if desc.is_optional() {
            // SAFETY: `rdma_alloc_hw_stats_struct` returned `stats` with an `is_disabled` bitmap
            // of `BITS_TO_LONGS(n)` words, `i < n`, and nothing else can see `stats` yet.
            unsafe { *(*stats).is_disabled.add(i / bits) |= 1 << (i % bits) };
        }
    }
    stats
}

/// The `get_hw_stats` op.
///
/// # Safety
///
/// `ibdev` is a registered device of driver `T`; `stats` is null or the structure
/// [`alloc_hw_port_stats`] returned for `port`, whose lock the core holds for the call.
pub(crate) unsafe extern "C" fn get_hw_stats<T: Driver>(
    ibdev: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    if stats.is_null() || port == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: `stats` came from `alloc_hw_port_stats`: its values array holds
    // `num_counters` entries, locked by the core for this call.
    let values = unsafe {
        let n = usize::try_from((*stats).num_counters).unwrap_or(0);
        (*stats).value.as_mut_slice(n)
    };
    let n = values.len();
    // SAFETY: The core reads counters of a registered device of ours.
    match T::get_hw_stats(unsafe { dev::<T>(ibdev) }, port, values) {
        Ok(()) => n as c_int,
        Err(e) => e.to_errno(),
    }
}

/// The `modify_hw_stat` op: a user enables or disables an optional counter.
///
/// The driver counts optional counters all the time ([`Driver::get_hw_stats`] fills every entry
/// of [`Driver::HW_STATS`]); enabling one only has the core show it, so there is nothing to do.
extern "C" fn modify_hw_stat(
    _ibdev: *mut bindings::ib_device,
    _port: u32,
    _counter_index: crate::ffi::c_uint,
    _enable: bool,
) -> c_int {
    0
}

/// The `process_mad` op.
///
/// # Safety
///
/// `ibdev` is a registered device of driver `T`; `in_mad` is valid for reads and `out_mad`
/// for writes of `*out_mad_size` bytes, which is at least the size of `struct ib_mad` (the
/// core and the MAD layer pass `struct ib_mad` buffers to a device of InfiniBand MADs), for
/// the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn process_mad<T: Driver>(
    ibdev: *mut bindings::ib_device,
    _flags: c_int,
    port: u32,
    _in_wc: *const bindings::ib_wc,
    _in_grh: *const bindings::ib_grh,
    in_mad: *const bindings::ib_mad,
    out_mad: *mut bindings::ib_mad,
    out_mad_size: *mut usize,
    _out_mad_pkey_index: *mut u16,
) -> c_int {
    let ignored = bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
    // SAFETY: The caller passes a valid size.
    if in_mad.is_null() || out_mad.is_null() || unsafe { *out_mad_size } < MAD_SIZE {
        return ignored;
    }
    // SAFETY: Both buffers hold a `struct ib_mad` (`MAD_SIZE` bytes of plain data) for the
    // call, the input read-only; they are distinct.
    let (dev, input, output) = unsafe {
        (
            dev::<T>(ibdev),
            &*in_mad.cast::<[u8; MAD_SIZE]>(),
            &mut *out_mad.cast::<[u8; MAD_SIZE]>(),
        )
    };
    match T::process_mad(dev, port, input, output) {
        MadResult::Ignored => ignored,
        MadResult::Reply => {
            // SAFETY: As above; the answer is one `struct ib_mad`.
            unsafe { *out_mad_size = MAD_SIZE };
            (bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS
                | bindings::ib_mad_result_IB_MAD_RESULT_REPLY) as c_int
        }
    }
}

/// The `modify_port` op.
///
/// # Safety
///
/// `ibdev` is a registered device of driver `T`; `modify` is valid for reads for the call.
pub(crate) unsafe extern "C" fn modify_port<T: Driver>(
    ibdev: *mut bindings::ib_device,
    port: u32,
    mask: c_int,
    modify: *mut bindings::ib_port_modify,
) -> c_int {
    // SAFETY: The core passes a registered device of ours and a valid request.
    let (dev, set, clear) = unsafe {
        (
            dev::<T>(ibdev),
            (*modify).set_port_cap_mask,
            (*modify).clr_port_cap_mask,
        )
    };
    let mask = PortModifyFlags::from_bits_retain(mask as u32);
    match T::modify_port(dev, port, mask, set, clear) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `enable_driver` op.
///
/// # Safety
///
/// `ibdev` is a device of driver `T` at the end of its registration.
pub(crate) unsafe extern "C" fn enable_driver<T: Driver>(ibdev: *mut bindings::ib_device) -> c_int {
    // SAFETY: The core enables a registered device of ours.
    match T::enable_driver(unsafe { dev::<T>(ibdev) }) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
