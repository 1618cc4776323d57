// SPDX-License-Identifier: GPL-2.0

//! RDMA device drivers: the verbs a driver implements and the ops table built from them.

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        attr::{
            AhAttr,
            AhAttrSink,
            DeviceAttr,
            LinkLayer,
            PortAttr,
            PortImmutable,
            QpAttr,
            QpAttrMask,
            QpInitAttr,
            QpReport, //
        },
        code,
        device::Device,
        event::{
            CqHandle,
            QpHandle,
            SrqHandle,
            WcSink, //
        },
        mmap::MmapEntry,
        object::{
            Ah,
            Cq,
            Mr,
            Mw,
            Pd,
            Qp,
            Srq,
            UContext, //
        },
        stats::StatDesc,
        sysfs,
        udata::UData, //
    },
};
use core::marker::PhantomData;

/// The verbs of an RDMA device driver.
///
/// Each method is called by the RDMA core with the device (or object) it concerns; the core
/// serialises nothing: methods may run concurrently, on any thread, in process context.
#[vtable]
pub trait Driver: Sized + 'static {
    /// The driver's data in each device.
    type Data: Send + Sync;

    /// The driver's data in each user context.
    type UContext: Send + Sync;

    /// The driver's data in each protection domain.
    type Pd: Send + Sync;

    /// The driver's data in each completion queue.
    type Cq: Send + Sync;

    /// The driver's data in each queue pair.
    type Qp: Send + Sync;

    /// The driver's data in each address handle.
    type Ah: Send + Sync;

    /// The driver's data in each shared receive queue.
    type Srq: Send + Sync;

    /// The driver's data in each memory window.
    type Mw: Send + Sync;

    /// The driver's data in each memory region.
    type Mr: Send + Sync;

    /// Whether the device shows the C Soft-RoCE driver's `parent` attribute in sysfs: the
    /// name of the netdevice behind port 1.
    const PARENT_ATTRIBUTE: bool = false;

    /// The names of the port counters, in the order [`Driver::get_hw_stats`] fills them.
    const HW_STATS: &'static [StatDesc] = &[];

    /// The uverbs driver id (`enum rdma_driver_id`), which user-space providers match.
    const DRIVER_ID: bindings::rdma_driver_id;

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

    /// Accepts a change of the device's identity (`IB_DEVICE_MODIFY_*` in `mask`).
    ///
    /// `sys_image_guid` is the new system image GUID (host order). When the driver accepts
    /// `IB_DEVICE_MODIFY_NODE_DESC`, the abstraction stores `node_desc` in the device.
    fn modify_device(
        _dev: &Device<Self>,
        _mask: u32,
        _sys_image_guid: u64,
        _node_desc: &[u8],
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's data for a new user context.
    fn alloc_ucontext(dev: &Device<Self>, udata: &mut UData<'_, Self>) -> Result<Self::UContext>;

    /// Creates the driver's data of a completion queue for at least `attr.cqe` completions.
    ///
    /// Returns it with the number of completions the queue really holds, which the core
    /// reports to the caller.
    ///
    /// `handle` stays valid for the queue's lifetime and is revoked when it is destroyed.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        handle: CqHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<(impl PinInit<Self::Cq, Error>, u32)>;

    /// Resizes a user completion queue to hold at least `cqe` completions.
    ///
    /// Returns the number of completions it now holds.
    fn resize_cq(_cq: &Cq<Self>, _cqe: u32, _udata: &mut UData<'_, Self>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Arms the completion notification (`IB_CQ_SOLICITED` or `IB_CQ_NEXT_COMP` in `flags`).
    ///
    /// With `IB_CQ_REPORT_MISSED_EVENTS`, returns whether completions are already waiting.
    fn req_notify_cq(_cq: &Cq<Self>, _flags: u32) -> Result<bool> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Moves completions of a kernel completion queue into `wc`, until it is full.
    ///
    /// The core learns how many were moved from `wc` itself ([`WcSink::len`]).
    fn poll_cq(_cq: &Cq<Self>, _wc: &mut WcSink<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns how many completions (at most `max`) wait in a kernel completion queue.
    fn peek_cq(_cq: &Cq<Self>, _max: u32) -> u32 {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's data of a queue pair as `init` describes.
    ///
    /// Writes the capabilities the queue pair really has into `init`, and returns the data
    /// with the queue pair number.
    fn create_qp(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        init: &mut QpInitAttr,
        handle: QpHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<(impl PinInit<Self::Qp, Error>, u32)>;

    /// Checks that a queue pair may be destroyed now (`EBUSY` while attached to a multicast
    /// group, say); the core then frees it.
    fn destroy_qp(_qp: &Qp<Self>) -> Result {
        Ok(())
    }

    /// Attaches a UD queue pair to the multicast group `mgid` (the core checked the type and
    /// that `mgid` is multicast; the LID is unused on RoCE).
    fn attach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a queue pair from the multicast group `mgid`.
    fn detach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts one send work request of a kernel consumer to a queue pair.
    fn post_send(_qp: &Qp<Self>, _wr: &SendWr<'_, Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Rings the send doorbell of a user queue pair (`post_send` with no work request): its
    /// process produced WQEs into the mapped send queue.
    fn post_send_doorbell(_qp: &Qp<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts one receive work request of a kernel consumer to a queue pair.
    fn post_recv(_qp: &Qp<Self>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes the attributes of a queue pair selected by the mask of `attr`.
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr<'_>, udata: &mut UData<'_, Self>) -> Result;

    /// Reports the attributes (at least those in `mask`) and creation parameters of a queue
    /// pair.
    fn query_qp(qp: &Qp<Self>, mask: QpAttrMask) -> Result<QpReport>;

    /// Creates the driver's data of a shared receive queue (`IB_SRQT_BASIC` only so far).
    ///
    /// Writes the capacity really given into `attr`; returns the data.
    fn create_srq(
        dev: &Device<Self>,
        srq_type: u32,
        attr: &mut bindings::ib_srq_attr,
        handle: SrqHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<impl PinInit<Self::Srq, Error>>;

    /// Posts one receive work request of a kernel consumer to a shared receive queue.
    fn post_srq_recv(_srq: &Srq<Self>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resizes (`IB_SRQ_MAX_WR`) or arms the limit (`IB_SRQ_LIMIT`) of a shared receive queue.
    fn modify_srq(
        _srq: &Srq<Self>,
        _attr: &mut bindings::ib_srq_attr,
        _mask: u32,
        _udata: &mut UData<'_, Self>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the attributes of a shared receive queue.
    fn query_srq(_srq: &Srq<Self>, _attr: &mut bindings::ib_srq_attr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's data of an address handle for `attr`.
    ///
    /// Unless `sleepable`, it runs in atomic context: allocate with `GFP_ATOMIC`.
    fn create_ah(
        _dev: &Device<Self>,
        _pd: &Pd<Self>,
        _attr: &AhAttr,
        _sleepable: bool,
        _udata: &mut UData<'_, Self>,
    ) -> Result<Self::Ah> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the address vector of an address handle.
    fn query_ah(_ah: &Ah<Self>, _attr: &mut AhAttrSink<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's data of a memory window of type `mw_type` (1 or 2).
    ///
    /// Returns it with the window's R_Key.
    fn alloc_mw(
        _dev: &Device<Self>,
        _mw_type: u32,
        _udata: &mut UData<'_, Self>,
    ) -> Result<(Self::Mw, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Registers `len` bytes of the caller's memory at `start`, seen by the device at `iova`.
    ///
    /// Returns the region's data with its L_Key and R_Key.
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _start: u64,
        _len: u64,
        _iova: u64,
        _access: u32,
        _udata: &mut UData<'_, Self>,
    ) -> Result<(Self::Mr, u32, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes a region in place (`IB_MR_REREG_*` in `flags`): a new domain `pd` (which the
    /// core records; the region's own domain without `IB_MR_REREG_PD`) and/or new `access`
    /// rights.
    fn rereg_user_mr(_mr: &Mr<Self>, _flags: u32, _access: u32, _pd: &Pd<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a region covering all of memory for kernel consumers (`access`: `IB_ACCESS_*`).
    ///
    /// Returns the region's data with its L_Key and R_Key.
    fn get_dma_mr(_pd: &Pd<Self>, _access: u32) -> Result<(Self::Mr, u32, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a fast-registration region of type `mr_type` for up to `max_num_sg` pages.
    ///
    /// Returns the region's data with its L_Key and R_Key.
    fn alloc_mr(_pd: &Pd<Self>, _mr_type: u32, _max_num_sg: u32) -> Result<(Self::Mr, u32, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Starts mapping a fast-registration region (`map_mr_sg`): forgets its pages.
    ///
    /// The core then calls [`Driver::map_mr_sg_page`] for each page, in order.
    fn map_mr_sg_start(_mr: &Mr<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Appends the page at DMA address `addr` to a fast-registration region being mapped.
    fn map_mr_sg_page(_mr: &Mr<Self>, _addr: u64) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes the capability flags of `port` (`set` then `clear`), and resets the Q_Key
    /// violation counter with `IB_PORT_RESET_QKEY_CNTR` in `mask`.
    fn modify_port(_dev: &Device<Self>, _port: u32, _mask: u32, _set: u32, _clear: u32) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads the counters of `port` into `values`, one per [`Driver::HW_STATS`] entry.
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Finishes registration once clients may use the device: reports the port's state.
    fn enable_driver(_dev: &Device<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Checks that a region may be deregistered now (no window bound to it, say).
    fn dereg_mr(_mr: &Mr<Self>) -> Result {
        Ok(())
    }

    /// Creates the driver's data for a new protection domain.
    ///
    /// The core drops it when the domain is destroyed, after every object in it.
    fn alloc_pd(_dev: &Device<Self>, _udata: &mut UData<'_, Self>) -> Result<Self::Pd> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// The attributes of a new completion queue (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqInitAttr {
    /// The minimum number of completions it must hold.
    pub cqe: u32,
    /// The completion vector (interrupt) it reports to.
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*` creation flags.
    pub flags: u32,
}

/// A send work request of a kernel consumer (`struct ib_send_wr` and the structure around it
/// that its opcode and the queue pair's type select).
pub struct SendWr<'a, T: Driver> {
    /// The consumer's id for the request (or its `struct ib_cqe` address).
    pub wr_id: u64,
    /// `enum ib_wr_opcode`.
    pub opcode: u32,
    /// `IB_SEND_*` flags.
    pub send_flags: u32,
    /// Immediate data (network order) or the R_Key to invalidate.
    pub ex: u32,
    /// The local buffers.
    pub sges: &'a [bindings::ib_sge],
    /// What the opcode adds.
    pub detail: SendWrDetail<'a, T>,
}

/// The opcode-specific part of a [`SendWr`].
pub enum SendWrDetail<'a, T: Driver> {
    /// Nothing more (a SEND on a connected queue pair, a local invalidate).
    None,
    /// RDMA READ or WRITE (`struct ib_rdma_wr`).
    Rdma {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// Compare-and-swap or fetch-and-add (`struct ib_atomic_wr`).
    Atomic {
        /// Remote virtual address.
        remote_addr: u64,
        /// Value to compare with, or to add.
        compare_add: u64,
        /// Value to swap in.
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// A datagram (`struct ib_ud_wr`).
    Ud {
        /// The destination's address handle.
        ah: &'a Ah<T>,
        /// The destination queue pair.
        remote_qpn: u32,
        /// Its Q_Key.
        remote_qkey: u32,
    },
    /// Fast registration of a region's mapped pages (`struct ib_reg_wr`).
    Reg {
        /// The region.
        mr: &'a Mr<T>,
        /// Its new key.
        key: u32,
        /// Its new access rights.
        access: u32,
    },
}

impl<'a, T: Driver> SendWr<'a, T> {
    /// Reads the request at `wr` posted to `ibqp`.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid request of the core's caller and `ibqp` a live queue pair of
    /// driver `T`, both for `'a`.
    unsafe fn from_raw(wr: &'a bindings::ib_send_wr, ibqp: *mut bindings::ib_qp) -> Result<Self> {
        let n = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
        let sges = if n == 0 || wr.sg_list.is_null() {
            &[][..]
        } else {
            // SAFETY: A request's `sg_list` holds `num_sge` entries.
            unsafe { core::slice::from_raw_parts(wr.sg_list, n) }
        };
        if sges.len() != n {
            return Err(EINVAL);
        }
        let wr_ptr: *const bindings::ib_send_wr = wr;
        // SAFETY: The caller guarantees the queue pair is live.
        let (qp_type, dev) = unsafe { ((*ibqp).qp_type, (*ibqp).device) };
        let ud =
            qp_type == bindings::ib_qp_type_IB_QPT_UD || qp_type == bindings::ib_qp_type_IB_QPT_GSI;
        let op = wr.opcode;
        let detail = match op {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: The verbs API embeds RDMA requests in `struct ib_rdma_wr`, whose first
                // field is the `ib_send_wr`.
                let r = unsafe { &*wr_ptr.cast::<bindings::ib_rdma_wr>() };
                SendWrDetail::Rdma {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: Atomic requests are `struct ib_atomic_wr`s, as above.
                let a = unsafe { &*wr_ptr.cast::<bindings::ib_atomic_wr>() };
                SendWrDetail::Atomic {
                    remote_addr: a.remote_addr,
                    compare_add: a.compare_add,
                    swap: a.swap,
                    rkey: a.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: Registration requests are `struct ib_reg_wr`s, as above.
                let r = unsafe { &*wr_ptr.cast::<bindings::ib_reg_wr>() };
                // SAFETY: A non-null `mr` is a live region of its consumer.
                let mr_dev = unsafe { r.mr.as_ref() }.map(|m| m.device);
                if mr_dev != Some(dev) {
                    return Err(EINVAL);
                }
                SendWrDetail::Reg {
                    // SAFETY: A region of a device of driver `T` came from `Mr::alloc` and
                    // lives while the request is posted.
                    mr: unsafe { Mr::<T>::from_raw(r.mr) },
                    key: r.key,
                    access: r.access as u32,
                }
            }
            bindings::ib_wr_opcode_IB_WR_SEND | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if ud =>
            {
                // SAFETY: Sends on datagram queue pairs are `struct ib_ud_wr`s, as above.
                let u = unsafe { &*wr_ptr.cast::<bindings::ib_ud_wr>() };
                // SAFETY: A non-null `ah` is a live address handle of its consumer.
                let ah_dev = unsafe { u.ah.as_ref() }.map(|a| a.device);
                if ah_dev != Some(dev) {
                    return Err(EINVAL);
                }
                SendWrDetail::Ud {
                    // SAFETY: An address handle of a device of driver `T` is `T`'s container,
                    // initialised, and lives while the request is posted.
                    ah: unsafe { Ah::<T>::from_raw(u.ah) },
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                }
            }
            _ => SendWrDetail::None,
        };
        Ok(Self {
            // SAFETY: Both union members are 64 bits of plain data to the driver.
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            opcode: op,
            send_flags: wr.send_flags as u32,
            // SAFETY: Both members of `ex` are 32 bits of plain data.
            ex: unsafe { wr.ex.imm_data },
            sges,
            detail,
        })
    }
}

/// A receive work request of a kernel consumer (`struct ib_recv_wr`).
pub struct RecvWr<'a> {
    /// The consumer's id for the request (or its `struct ib_cqe` address).
    pub wr_id: u64,
    /// Where to place the received data.
    pub sges: &'a [bindings::ib_sge],
}

impl RecvWr<'_> {
    /// Walks the C list of work requests at `wr`, calling `post` for each.
    ///
    /// On failure, stores the request that failed in `bad_wr` and returns the error.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid list of work requests, `bad_wr` null or valid for writes.
    unsafe fn post_list(
        mut wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
        mut post: impl FnMut(&RecvWr<'_>) -> Result,
    ) -> c_int {
        while !wr.is_null() {
            // SAFETY: The caller guarantees the list is valid.
            let w = unsafe { &*wr };
            let ret = usize::try_from(w.num_sge)
                .map_err(|_| EINVAL)
                .and_then(|n| {
                    let sges = if n == 0 || w.sg_list.is_null() {
                        &[][..]
                    } else {
                        // SAFETY: A request's `sg_list` holds `num_sge` entries.
                        unsafe { core::slice::from_raw_parts(w.sg_list, n) }
                    };
                    if sges.len() != n {
                        return Err(EINVAL);
                    }
                    post(&RecvWr {
                        // SAFETY: Both union members are 64 bits of plain data to the driver.
                        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
                        sges,
                    })
                });
            if let Err(e) = ret {
                if !bad_wr.is_null() {
                    // SAFETY: The caller guarantees `bad_wr` is valid for writes.
                    unsafe { bad_wr.write(wr) };
                }
                return e.to_errno();
            }
            wr = w.next;
        }
        0
    }
}

/// The C ops table of driver `T`.
pub(crate) struct OpsTable<T: Driver>(PhantomData<T>);

impl<T: Driver> OpsTable<T> {
    pub(crate) const OPS: bindings::ib_device_ops = bindings::ib_device_ops {
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,
        dealloc_driver: Some(Self::dealloc_driver),
        query_device: Some(Self::query_device),
        query_port: Some(Self::query_port),
        get_port_immutable: Some(Self::get_port_immutable),
        get_link_layer: Some(Self::get_link_layer),
        query_pkey: Some(Self::query_pkey),
        modify_device: if T::HAS_MODIFY_DEVICE {
            Some(Self::modify_device)
        } else {
            None
        },
        alloc_ucontext: Some(Self::alloc_ucontext),
        dealloc_ucontext: Some(Self::dealloc_ucontext),
        mmap: Some(Self::mmap),
        mmap_free: Some(Self::mmap_free),
        create_cq: Some(Self::create_cq),
        destroy_cq: Some(Self::destroy_cq),
        resize_user_cq: if T::HAS_RESIZE_CQ {
            Some(Self::resize_cq)
        } else {
            None
        },
        req_notify_cq: if T::HAS_REQ_NOTIFY_CQ {
            Some(Self::req_notify_cq)
        } else {
            None
        },
        poll_cq: if T::HAS_POLL_CQ {
            Some(Self::poll_cq)
        } else {
            None
        },
        peek_cq: if T::HAS_PEEK_CQ {
            Some(Self::peek_cq)
        } else {
            None
        },
        size_ib_cq: core::mem::size_of::<Cq<T>>(),
        create_qp: Some(Self::create_qp),
        modify_qp: Some(Self::modify_qp),
        query_qp: Some(Self::query_qp),
        destroy_qp: Some(Self::destroy_qp),
        attach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Self::attach_mcast)
        } else {
            None
        },
        detach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Self::detach_mcast)
        } else {
            None
        },
        post_send: Some(Self::post_send),
        post_recv: Some(Self::post_recv),
        size_ib_qp: core::mem::size_of::<Qp<T>>(),
        create_ah: if T::HAS_CREATE_AH {
            Some(Self::create_ah)
        } else {
            None
        },
        create_user_ah: if T::HAS_CREATE_AH {
            Some(Self::create_ah)
        } else {
            None
        },
        destroy_ah: if T::HAS_CREATE_AH {
            Some(Self::destroy_ah)
        } else {
            None
        },
        query_ah: if T::HAS_QUERY_AH {
            Some(Self::query_ah)
        } else {
            None
        },
        size_ib_ah: if T::HAS_CREATE_AH {
            core::mem::size_of::<Ah<T>>()
        } else {
            0
        },
        alloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::alloc_mw)
        } else {
            None
        },
        dealloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::dealloc_mw)
        } else {
            None
        },
        create_srq: Some(Self::create_srq),
        destroy_srq: Some(Self::destroy_srq),
        modify_srq: if T::HAS_MODIFY_SRQ {
            Some(Self::modify_srq)
        } else {
            None
        },
        query_srq: if T::HAS_QUERY_SRQ {
            Some(Self::query_srq)
        } else {
            None
        },
        post_srq_recv: Some(Self::post_srq_recv),
        size_ib_srq: core::mem::size_of::<Srq<T>>(),
        get_dma_mr: if T::HAS_GET_DMA_MR {
            Some(Self::get_dma_mr)
        } else {
            None
        },
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Self::alloc_mr)
        } else {
            None
        },
        map_mr_sg: if T::HAS_MAP_MR_SG_PAGE {
            Some(Self::map_mr_sg)
        } else {
            None
        },
        alloc_hw_port_stats: if T::HAS_GET_HW_STATS {
            Some(Self::alloc_hw_port_stats)
        } else {
            None
        },
        get_hw_stats: if T::HAS_GET_HW_STATS {
            Some(Self::get_hw_stats)
        } else {
            None
        },
        device_group: if T::PARENT_ATTRIBUTE {
            sysfs::PARENT_GROUP.as_ptr()
        } else {
            core::ptr::null()
        },
        modify_port: if T::HAS_MODIFY_PORT {
            Some(Self::modify_port)
        } else {
            None
        },
        enable_driver: if T::HAS_ENABLE_DRIVER {
            Some(Self::enable_driver)
        } else {
            None
        },
        reg_user_mr: if T::HAS_REG_USER_MR {
            Some(Self::reg_user_mr)
        } else {
            None
        },
        rereg_user_mr: if T::HAS_REREG_USER_MR {
            Some(Self::rereg_user_mr)
        } else {
            None
        },
        dereg_mr: if T::HAS_REG_USER_MR || T::HAS_GET_DMA_MR || T::HAS_ALLOC_MR {
            Some(Self::dereg_mr)
        } else {
            None
        },
        size_ib_mw: if T::HAS_ALLOC_MW {
            core::mem::size_of::<Mw<T>>()
        } else {
            0
        },
        size_ib_ucontext: core::mem::size_of::<UContext<T>>(),
        alloc_pd: if T::HAS_ALLOC_PD {
            Some(Self::alloc_pd)
        } else {
            None
        },
        dealloc_pd: if T::HAS_ALLOC_PD {
            Some(Self::dealloc_pd)
        } else {
            None
        },
        size_ib_pd: if T::HAS_ALLOC_PD {
            core::mem::size_of::<Pd<T>>()
        } else {
            0
        },
        ..pin_init::zeroed()
    };

    /// # Safety
    ///
    /// `ibdev` must be a device of driver `T` in a callback of the core.
    unsafe fn dev<'a>(ibdev: *mut bindings::ib_device) -> &'a Device<T> {
        // SAFETY: The core calls the ops of a device only while its data is initialised.
        unsafe { Device::from_raw(ibdev) }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        // SAFETY: The core calls this exactly once, last; nothing uses the data afterwards.
        unsafe { core::ptr::drop_in_place(Device::<T>::data_ptr(ibdev)) };
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a valid device, attribute buffer and optional udata.
        let (dev, attr, mut udata) = unsafe {
            (
                Self::dev(ibdev),
                DeviceAttr::from_raw(attr),
                UData::from_raw(udata),
            )
        };
        match T::query_device(dev, attr, &mut udata) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        // SAFETY: The core passes a valid device and attribute buffer.
        let (dev, attr) = unsafe { (Self::dev(ibdev), PortAttr::from_raw(attr)) };
        match T::query_port(dev, port, attr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn get_port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        // SAFETY: The core passes a valid device and buffer.
        let (dev, imm) = unsafe { (Self::dev(ibdev), PortImmutable::from_raw(imm)) };
        match T::get_port_immutable(dev, port, imm) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn get_link_layer(
        ibdev: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: The core passes a valid device.
        T::get_link_layer(unsafe { Self::dev(ibdev) }, port) as bindings::rdma_link_layer
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_pkey(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        // SAFETY: The core passes a valid device.
        match T::query_pkey(unsafe { Self::dev(ibdev) }, port, index) {
            Ok(p) => {
                // SAFETY: The core passes a valid output pointer.
                unsafe { pkey.write(p) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn modify_device(
        ibdev: *mut bindings::ib_device,
        mask: c_int,
        attr: *mut bindings::ib_device_modify,
    ) -> c_int {
        // SAFETY: The core passes a live device and the new values.
        let (dev, attr) = unsafe { (Self::dev(ibdev), &*attr) };
        let desc: &[u8] = &attr.node_desc;
        let len = desc.iter().position(|&c| c == 0).unwrap_or(desc.len());
        let mask = mask as u32;
        if let Err(e) = T::modify_device(
            dev,
            mask,
            attr.sys_image_guid,
            desc.get(..len).unwrap_or(desc),
        ) {
            return e.to_errno();
        }
        if mask & bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC != 0 {
            // SAFETY: `node_desc` is a plain array in the live device. The C drivers store it
            // the same way; sysfs readers tolerate a description that is being rewritten.
            unsafe { (*ibdev).node_desc = attr.node_desc };
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn alloc_ucontext(
        ibuc: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a context allocated with `size_ib_ucontext` (our container)
        // whose `device` is set, and a valid udata.
        let (dev, mut udata) = unsafe { (UContext::<T>::device_of(ibuc), UData::from_raw(udata)) };
        match T::alloc_ucontext(dev, &mut udata) {
            Ok(data) => {
                // SAFETY: The container's data field is valid for writes and uninitialised.
                unsafe { UContext::<T>::data_ptr(ibuc).write(data) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn dealloc_ucontext(ibuc: *mut bindings::ib_ucontext) {
        // Offers that outlive their queue's destroy op (state the driver's worker still holds)
        // are withdrawn now: the core checks that none is left, and frees the context next.
        // SAFETY: This is `dealloc_ucontext` of a context of driver `T`, whose entries are all
        // made by `MmapEntry::new` (the only way this abstraction inserts one).
        unsafe { MmapEntry::withdraw_all(ibuc) };
        // SAFETY: `alloc_ucontext` succeeded for this context, so its data is initialised; the
        // core calls this once, after the last use.
        unsafe { core::ptr::drop_in_place(UContext::<T>::data_ptr(ibuc)) };
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn alloc_pd(
        ibpd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a domain allocated with `size_ib_pd` (our container) whose
        // `device` is set, and an optional udata.
        let (dev, mut udata) = unsafe { (Pd::<T>::device_of(ibpd), UData::from_raw(udata)) };
        match T::alloc_pd(dev, &mut udata) {
            Ok(data) => {
                // SAFETY: The container's data field is valid for writes and uninitialised.
                unsafe { Pd::<T>::data_ptr(ibpd).write(data) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn dealloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `alloc_pd` succeeded for this domain; the core calls this once, after the
        // last object in the domain is gone.
        unsafe { core::ptr::drop_in_place(Pd::<T>::data_ptr(ibpd)) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a queue pair allocated with `size_ib_qp` (our container)
        // whose `device` is set, its creation attributes (ours to update) and the call's
        // `driver_udata` or null.
        let (dev, pd, init, mut udata) = unsafe {
            (
                Qp::<T>::device_of(ibqp),
                // The core sets the domain, a live one of this device, before calling us.
                Pd::<T>::from_raw((*ibqp).pd),
                QpInitAttr::from_raw(init),
                UData::from_bundle(udata),
            )
        };
        // SAFETY: The core frees the queue pair only after `destroy_qp`, or after this op
        // fails, and both drop the handle.
        let handle = match unsafe { Qp::<T>::init_handle(ibqp) } {
            Ok(h) => h,
            Err(e) => return e.to_errno(),
        };
        let ret = T::create_qp(dev, pd, init, handle, &mut udata).and_then(|(data, qpn)| {
            // SAFETY: The container's data field is valid for writes, uninitialised, and never
            // moves; the queue pair is not visible to anyone yet.
            unsafe {
                data.__pinned_init(Qp::<T>::data_ptr(ibqp))?;
                (*ibqp).qp_num = qpn;
            }
            Ok(())
        });
        match ret {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: `init_handle` succeeded; the core frees the object next.
                unsafe { Qp::<T>::drop_handle(ibqp) };
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a live queue pair, the attributes (those in `mask` set, the
        // address vectors with the source GID references it holds for the call) and the call's
        // udata.
        let (qp, attr, mut udata) = unsafe {
            (
                Qp::<T>::from_raw(ibqp),
                QpAttr::from_raw(attr, mask as u32),
                UData::from_raw(udata),
            )
        };
        let Some(attr) = attr else {
            return EINVAL.to_errno();
        };
        match T::modify_qp(qp, &attr, &mut udata) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: The core passes a live queue pair.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        let report = match T::query_qp(qp, QpAttrMask::from_bits(mask as u32)) {
            Ok(r) => r,
            Err(e) => return e.to_errno(),
        };
        // SAFETY: The core passes buffers to fill, which may be uninitialised (kernel callers'
        // stack variables): only whole fields are written, nothing is read.
        unsafe {
            report.attr.write_to(attr);
            report.init.write_to(init);
            // The creation attributes the core keeps: handler, context and the queues used
            // (set by the core at creation, pointers it owns).
            (&raw mut (*init).event_handler).write((*ibqp).event_handler);
            (&raw mut (*init).qp_context).write((*ibqp).qp_context);
            (&raw mut (*init).send_cq).write((*ibqp).send_cq);
            (&raw mut (*init).recv_cq).write((*ibqp).recv_cq);
            (&raw mut (*init).srq).write((*ibqp).srq);
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `create_qp` succeeded for this queue pair, which stays live until this op
        // succeeds.
        if let Err(e) = T::destroy_qp(unsafe { Qp::<T>::from_raw(ibqp) }) {
            return e.to_errno();
        }
        // SAFETY: The core calls this once more only if it failed above. The handle goes first
        // so that nothing reaches the queue pair through it any more.
        unsafe {
            Qp::<T>::drop_handle(ibqp);
            core::ptr::drop_in_place(Qp::<T>::data_ptr(ibqp));
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn attach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: The core passes a live queue pair and a GID; every GID is 16 raw bytes.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        match T::attach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn detach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: The core passes a live queue pair and a GID; every GID is 16 raw bytes.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        match T::detach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: The core passes a live queue pair.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        if wr.is_null() {
            return match T::post_send_doorbell(qp) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            };
        }
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: The core passes a valid list of requests.
            let w = unsafe { &*cur };
            // SAFETY: `w` is a request of the list, `ibqp` live.
            let ret = unsafe { SendWr::<T>::from_raw(w, ibqp) }.and_then(|w| T::post_send(qp, &w));
            if let Err(e) = ret {
                if !bad_wr.is_null() {
                    // SAFETY: The core passes a valid out pointer.
                    unsafe { bad_wr.write(cur) };
                }
                return e.to_errno();
            }
            cur = w.next;
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if !T::HAS_POST_RECV {
            if !bad_wr.is_null() {
                // SAFETY: The core passes a valid out pointer.
                unsafe { bad_wr.write(wr) };
            }
            return code::eopnotsupp().to_errno();
        }
        // SAFETY: The core passes a live queue pair, a list of requests and an out pointer.
        unsafe {
            let qp = Qp::<T>::from_raw(ibqp);
            RecvWr::post_list(wr, bad_wr, |w| T::post_recv(qp, w))
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if !T::HAS_POST_SRQ_RECV {
            if !bad_wr.is_null() {
                // SAFETY: The core passes a valid out pointer.
                unsafe { bad_wr.write(wr) };
            }
            return code::eopnotsupp().to_errno();
        }
        // SAFETY: The core passes a live queue, a list of requests and an out pointer.
        unsafe {
            let srq = Srq::<T>::from_raw(ibsrq);
            RecvWr::post_list(wr, bad_wr, |w| T::post_srq_recv(srq, w))
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a handle allocated with `size_ib_ah` (our container) whose
        // `device` is set, its attributes and an optional udata.
        let (dev, pd, attr, sleepable, mut udata) = unsafe {
            (
                Ah::<T>::device_of(ibah),
                // The core sets the domain, a live one of this device, before calling us.
                Pd::<T>::from_raw((*ibah).pd),
                AhAttr::from_raw((*init).ah_attr),
                (*init).flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0,
                UData::from_raw(udata),
            )
        };
        match T::create_ah(dev, pd, attr, sleepable, &mut udata) {
            Ok(data) => {
                // SAFETY: The container's data field is valid for writes and uninitialised.
                unsafe { Ah::<T>::data_ptr(ibah).write(data) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn destroy_ah(ibah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        // SAFETY: `create_ah` succeeded for this handle; the core calls this once.
        unsafe { core::ptr::drop_in_place(Ah::<T>::data_ptr(ibah)) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_ah(
        ibah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        // SAFETY: The core passes a live handle and a buffer to fill, which may be
        // uninitialised (the sink only writes).
        let (ah, attr) = unsafe { (Ah::<T>::from_raw(ibah), AhAttrSink::from_raw(attr)) };
        let Some(mut attr) = attr else {
            return EINVAL.to_errno();
        };
        match T::query_ah(ah, &mut attr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn alloc_mw(
        ibmw: *mut bindings::ib_mw,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a window allocated with `size_ib_mw` (our container) whose
        // `device` and `type` are set, and the call's udata.
        let (dev, mw_type, mut udata) = unsafe {
            (
                Mw::<T>::device_of(ibmw),
                (*ibmw).type_,
                UData::from_raw(udata),
            )
        };
        match T::alloc_mw(dev, mw_type, &mut udata) {
            Ok((data, rkey)) => {
                // SAFETY: The container's data field is valid for writes and uninitialised;
                // the window is not visible to anyone yet.
                unsafe {
                    Mw::<T>::data_ptr(ibmw).write(data);
                    (*ibmw).rkey = rkey;
                }
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: `alloc_mw` succeeded for this window; the core calls this once.
        unsafe { core::ptr::drop_in_place(Mw::<T>::data_ptr(ibmw)) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn reg_user_mr(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        len: u64,
        iova: u64,
        access: c_int,
        dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        if !dmah.is_null() {
            return code::eopnotsupp().to_ptr();
        }
        // SAFETY: The core passes a live domain of ours and the call's udata.
        let (pd, mut udata) = unsafe { (Pd::<T>::from_raw(ibpd), UData::from_raw(udata)) };
        let ret = T::reg_user_mr(pd, start, len, iova, access as u32, &mut udata)
            .and_then(|(data, lkey, rkey)| Mr::<T>::alloc(data, lkey, rkey));
        match ret {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn rereg_user_mr(
        ibmr: *mut bindings::ib_mr,
        flags: c_int,
        _start: u64,
        _len: u64,
        _iova: u64,
        access: c_int,
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The region came from `reg_user_mr` and is live. `ibpd` is the new domain
        // (or the region's own), a domain of this device that the core holds for the call.
        let (mr, pd) = unsafe { (Mr::<T>::from_raw(ibmr), Pd::<T>::from_raw(ibpd)) };
        match T::rereg_user_mr(mr, flags as u32, access as u32, pd) {
            // Changed in place: no new region.
            Ok(()) => core::ptr::null_mut(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The region came from `reg_user_mr` and is live.
        if let Err(e) = T::dereg_mr(unsafe { Mr::<T>::from_raw(ibmr) }) {
            return e.to_errno();
        }
        // SAFETY: The core is done with the region.
        unsafe { Mr::<T>::free(ibmr) };
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a queue allocated with `size_ib_srq` (our container) whose
        // `device` is set, its attributes (ours to update) and the call's `driver_udata`.
        let (dev, srq_type, attr, mut udata) = unsafe {
            (
                Srq::<T>::device_of(ibsrq),
                (*init).srq_type,
                &mut (*init).attr,
                UData::from_bundle(udata),
            )
        };
        // SAFETY: The core frees the queue only after `destroy_srq`, or after this op fails,
        // and both drop the handle.
        let handle = match unsafe { Srq::<T>::init_handle(ibsrq) } {
            Ok(h) => h,
            Err(e) => return e.to_errno(),
        };
        let ret = T::create_srq(dev, srq_type, attr, handle, &mut udata).and_then(|data| {
            // SAFETY: The container's data field is valid for writes, uninitialised, and never
            // moves; the queue is not visible to anyone yet.
            unsafe { data.__pinned_init(Srq::<T>::data_ptr(ibsrq)) }
        });
        match ret {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: `init_handle` succeeded; the core frees the object next.
                unsafe { Srq::<T>::drop_handle(ibsrq) };
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `create_srq` succeeded for this queue; the core calls this once, when no
        // queue pair uses it any more. The handle goes first.
        unsafe {
            Srq::<T>::drop_handle(ibsrq);
            core::ptr::drop_in_place(Srq::<T>::data_ptr(ibsrq));
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a live queue, the attributes and the call's `driver_udata`.
        let (srq, attr, mut udata) = unsafe {
            (
                Srq::<T>::from_raw(ibsrq),
                &mut *attr,
                UData::from_bundle(udata),
            )
        };
        match T::modify_srq(srq, attr, mask, &mut udata) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        // SAFETY: The core passes a live queue and a buffer to fill.
        match T::query_srq(unsafe { Srq::<T>::from_raw(ibsrq) }, unsafe { &mut *attr }) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn mmap(
        ibuc: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: These are the arguments of the core's `mmap` op.
        match unsafe { MmapEntry::mmap(ibuc, vma) } {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: This is the argument of the core's `mmap_free` op.
        unsafe { MmapEntry::free(entry) };
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        // SAFETY: The core passes a queue allocated with `size_ib_cq` (our container) whose
        // `device` is set, valid attributes, and the call's attribute bundle or null for a
        // kernel caller.
        let (dev, attr, mut udata) = unsafe {
            let udata = if attrs.is_null() {
                core::ptr::null_mut()
            } else {
                bindings::uverbs_attr_bundle_driver_udata(attrs)
            };
            (
                Cq::<T>::device_of(ibcq),
                CqInitAttr {
                    cqe: (*attr).cqe,
                    comp_vector: (*attr).comp_vector,
                    flags: (*attr).flags,
                },
                UData::from_bundle(udata),
            )
        };
        // SAFETY: The core frees the queue only after `destroy_cq`, or after this op fails, and
        // both drop the handle.
        let handle = match unsafe { Cq::<T>::init_handle(ibcq) } {
            Ok(h) => h,
            Err(e) => return e.to_errno(),
        };
        let ret = T::create_cq(dev, &attr, handle, &mut udata).and_then(|(init, cqe)| {
            // SAFETY: The container's data field is valid for writes, uninitialised, and never
            // moves (the core owns the allocation); the queue is not visible to anyone yet.
            unsafe {
                init.__pinned_init(Cq::<T>::data_ptr(ibcq))?;
                (*ibcq).cqe = cqe as c_int;
            }
            Ok(())
        });
        match ret {
            Ok(()) => 0,
            Err(e) => {
                // SAFETY: `init_handle` succeeded; the core frees the object next.
                unsafe { Cq::<T>::drop_handle(ibcq) };
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn destroy_cq(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `create_cq` succeeded for this queue; the core calls this once, when no
        // queue pair uses it any more. The handle goes first.
        unsafe {
            Cq::<T>::drop_handle(ibcq);
            core::ptr::drop_in_place(Cq::<T>::data_ptr(ibcq));
        }
        0
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn resize_cq(
        ibcq: *mut bindings::ib_cq,
        cqe: c_uint,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: The core passes a live queue and the call's `driver_udata`.
        let (cq, mut udata) = unsafe { (Cq::<T>::from_raw(ibcq), UData::from_bundle(udata)) };
        match T::resize_cq(cq, cqe, &mut udata) {
            Ok(cqe) => {
                // SAFETY: The core serialises resizes of one queue and reads `cqe` after.
                unsafe { (*ibcq).cqe = cqe as c_int };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: The core passes a live queue.
        match T::req_notify_cq(unsafe { Cq::<T>::from_raw(ibcq) }, flags) {
            Ok(missed) => c_int::from(missed),
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn poll_cq(
        ibcq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        let Ok(num) = usize::try_from(num) else {
            return EINVAL.to_errno();
        };
        if num == 0 {
            return 0;
        }
        // SAFETY: The core passes a live queue and an array of `num` completions to fill, which
        // it does not touch until the call returns (`ib_poll_cq`'s contract); the array need
        // not be initialised, which `WcSink` allows for.
        let (cq, mut sink) = unsafe { (Cq::<T>::from_raw(ibcq), WcSink::from_raw(wc, num)) };
        match T::poll_cq(cq, &mut sink) {
            // Only the entries the sink wrote are reported: the core reads no others. `num` fits
            // a `c_int`, so the count does too.
            Ok(()) => sink.len() as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn peek_cq(ibcq: *mut bindings::ib_cq, wc_cnt: c_int) -> c_int {
        let Ok(max) = u32::try_from(wc_cnt) else {
            return EINVAL.to_errno();
        };
        // SAFETY: The core passes a live queue.
        T::peek_cq(unsafe { Cq::<T>::from_raw(ibcq) }, max).min(max) as c_int
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn get_dma_mr(
        ibpd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The core passes a live domain of ours.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        match T::get_dma_mr(pd, access as u32)
            .and_then(|(data, lkey, rkey)| Mr::<T>::alloc(data, lkey, rkey))
        {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn alloc_mr(
        ibpd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // SAFETY: The core passes a live domain of ours.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        match T::alloc_mr(pd, mr_type, max_num_sg)
            .and_then(|(data, lkey, rkey)| Mr::<T>::alloc(data, lkey, rkey))
        {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: The region came from `alloc_mr` and is live.
        if let Err(e) = T::map_mr_sg_start(unsafe { Mr::<T>::from_raw(ibmr) }) {
            return e.to_errno();
        }
        // SAFETY: The core passes a live region, a mapped scatterlist of `sg_nents` entries and
        // an optional offset; `set_page` matches the callback type.
        unsafe { bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page)) }
    }

    /// # Safety
    ///
    /// Called by `ib_sg_to_pages` only, for a region of driver `T` in `map_mr_sg`.
    unsafe extern "C" fn set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: `map_mr_sg` passed a live region of ours.
        match T::map_mr_sg_page(unsafe { Mr::<T>::from_raw(ibmr) }, addr) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let Ok(n) = c_int::try_from(T::HW_STATS.len()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: The descriptor table is static; the core frees the result.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                StatDesc::as_raw(T::HW_STATS),
                n,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as crate::ffi::c_ulong,
            )
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn get_hw_stats(
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
        match T::get_hw_stats(unsafe { Self::dev(ibdev) }, port, values) {
            Ok(()) => n as c_int,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn modify_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        mask: c_int,
        modify: *mut bindings::ib_port_modify,
    ) -> c_int {
        // SAFETY: The core passes a registered device of ours and a valid request.
        let (dev, set, clear) = unsafe {
            (
                Self::dev(ibdev),
                (*modify).set_port_cap_mask,
                (*modify).clr_port_cap_mask,
            )
        };
        match T::modify_port(dev, port, mask as u32, set, clear) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the RDMA core only, with the arguments of this op of `struct ib_device_ops`.
    unsafe extern "C" fn enable_driver(ibdev: *mut bindings::ib_device) -> c_int {
        // SAFETY: The core enables a registered device of ours.
        match T::enable_driver(unsafe { Self::dev(ibdev) }) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}
