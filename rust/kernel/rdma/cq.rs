// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`) and the work completions they hold.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    prelude::*,
    rdma::{
        device::Device,
        driver::Driver,
        event::{
            CqHandle,
            QpHandle, //
        },
        udata::UData, //
    },
};
use core::mem::MaybeUninit;

core_object!(
    /// A completion queue (`struct ib_cq`).
    Cq,
    ib_cq,
    Cq,
    CqHandle
);

/// The size of the core's work completion (`struct ib_wc`), for drivers that lay out rings
/// holding either it or the user ABI's.
pub const WC_SIZE: usize = core::mem::size_of::<bindings::ib_wc>();

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

/// A new completion queue's data, as [`CqOps::create`] returns it.
pub struct NewCq<I> {
    /// The initialiser of the driver's data.
    pub init: I,
    /// The number of completions the queue really holds, which the core reports.
    pub cqe: u32,
}

c_flags! {
    /// What arms a completion notification (`enum ib_cq_notify_flags`).
    pub struct CqNotifyFlags: u32 {
        /// Notify on the next solicited completion.
        const SOLICITED = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
        /// Notify on the next completion.
        const NEXT_COMP = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
        /// Report whether completions already wait.
        const REPORT_MISSED_EVENTS = bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;
    }
}

impl CqNotifyFlags {
    /// The flags that select what arms the notification.
    pub const ARM_MASK: Self = Self::SOLICITED.union(Self::NEXT_COMP);
}

c_enum! {
    /// How a work request ended (`enum ib_wc_status`).
    #[derive(Default)]
    pub enum WcStatus: u32 {
        /// Success.
        #[default]
        Success = bindings::ib_wc_status_IB_WC_SUCCESS,
        /// Local length error.
        LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
        /// Local queue pair operation error.
        LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
        /// Local EE context operation error.
        LocEecOpErr = bindings::ib_wc_status_IB_WC_LOC_EEC_OP_ERR,
        /// Local protection error.
        LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
        /// Flushed: the queue pair is in the error state.
        WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
        /// Memory window bind error.
        MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
        /// Bad response.
        BadRespErr = bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
        /// Local access error.
        LocAccessErr = bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
        /// Remote invalid request.
        RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
        /// Remote access error.
        RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
        /// Remote operation error.
        RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
        /// Transport retry counter exceeded.
        RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
        /// RNR retry counter exceeded.
        RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
        /// Local RDD violation.
        LocRddViolErr = bindings::ib_wc_status_IB_WC_LOC_RDD_VIOL_ERR,
        /// Remote invalid RD request.
        RemInvRdReqErr = bindings::ib_wc_status_IB_WC_REM_INV_RD_REQ_ERR,
        /// Remote aborted.
        RemAbortErr = bindings::ib_wc_status_IB_WC_REM_ABORT_ERR,
        /// Invalid EE context number.
        InvEecnErr = bindings::ib_wc_status_IB_WC_INV_EECN_ERR,
        /// Invalid EE context state.
        InvEecStateErr = bindings::ib_wc_status_IB_WC_INV_EEC_STATE_ERR,
        /// Fatal error.
        FatalErr = bindings::ib_wc_status_IB_WC_FATAL_ERR,
        /// Response timeout.
        RespTimeoutErr = bindings::ib_wc_status_IB_WC_RESP_TIMEOUT_ERR,
        /// General error.
        GeneralErr = bindings::ib_wc_status_IB_WC_GENERAL_ERR,
    }
}

c_enum! {
    /// The network header a RoCEv2 datagram came in (`enum rdma_network_type`), which a
    /// completion reports with `IB_WC_WITH_NETWORK_HDR_TYPE`.
    pub enum NetworkType: u32 {
        /// IPv4.
        Ipv4 = bindings::rdma_network_type_RDMA_NETWORK_IPV4,
        /// IPv6.
        Ipv6 = bindings::rdma_network_type_RDMA_NETWORK_IPV6,
    }
}

c_enum! {
    /// What a completed work request was (`enum ib_wc_opcode`).
    #[derive(Default)]
    pub enum WcOpcode: u32 {
        /// Send.
        #[default]
        Send = bindings::ib_wc_opcode_IB_WC_SEND,
        /// RDMA WRITE.
        RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
        /// RDMA READ.
        RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
        /// Compare and swap.
        CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
        /// Fetch and add.
        FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
        /// Memory window bind.
        BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
        /// Local invalidate.
        LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
        /// Large send offload.
        Lso = bindings::ib_wc_opcode_IB_WC_LSO,
        /// Atomic write.
        AtomicWrite = bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
        /// Fast registration.
        RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
        /// Masked compare and swap.
        MaskedCompSwap = bindings::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP,
        /// Masked fetch and add.
        MaskedFetchAdd = bindings::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD,
        /// Flush.
        Flush = bindings::ib_wc_opcode_IB_WC_FLUSH,
        /// Receive.
        Recv = bindings::ib_wc_opcode_IB_WC_RECV,
        /// Receive of an RDMA WRITE with immediate data.
        RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
    }
}

c_flags! {
    /// What else a work completion reports (`enum ib_wc_flags`).
    pub struct WcFlags: u32 {
        /// A GRH preceded the data.
        const GRH = bindings::ib_wc_flags_IB_WC_GRH;
        /// Immediate data is valid.
        const WITH_IMM = bindings::ib_wc_flags_IB_WC_WITH_IMM;
        /// The invalidated R_Key is valid.
        const WITH_INVALIDATE = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        /// The IP checksum was checked.
        const IP_CSUM_OK = bindings::ib_wc_flags_IB_WC_IP_CSUM_OK;
        /// The source MAC address is valid.
        const WITH_SMAC = bindings::ib_wc_flags_IB_WC_WITH_SMAC;
        /// The VLAN id is valid.
        const WITH_VLAN = bindings::ib_wc_flags_IB_WC_WITH_VLAN;
        /// The network header type is valid.
        const WITH_NETWORK_HDR_TYPE = bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
    }
}

/// The verbs of a completion queue, implemented by the driver's data for one.
#[vtable]
pub trait CqOps: Send + Sync + Sized {
    /// The driver whose queues these are.
    type Driver: Driver<Cq = Self>;

    /// Creates the driver's data of a completion queue for at least `attr.cqe` completions.
    ///
    /// `handle` stays valid for the queue's lifetime and is revoked when it is destroyed.
    fn create(
        dev: &Device<Self::Driver>,
        attr: &CqInitAttr,
        handle: CqHandle,
        udata: &mut UData<'_, Self::Driver>,
    ) -> Result<NewCq<impl PinInit<Self, Error>>>;

    /// Resizes a user completion queue to hold at least `cqe` completions.
    ///
    /// Returns the number of completions it now holds.
    fn resize(
        _cq: &Cq<Self::Driver>,
        _cqe: u32,
        _udata: &mut UData<'_, Self::Driver>,
    ) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Arms the completion notification.
    ///
    /// With [`CqNotifyFlags::REPORT_MISSED_EVENTS`], returns whether completions already
    /// wait.
    fn req_notify(_cq: &Cq<Self::Driver>, _flags: CqNotifyFlags) -> Result<bool> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Moves completions of a kernel completion queue into `wc`, until it is full.
    ///
    /// The core learns how many were moved from `wc` itself ([`WcSink::len`]).
    fn poll(_cq: &Cq<Self::Driver>, _wc: &mut WcSink<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns how many completions (at most `max`) wait in a kernel completion queue.
    fn peek(_cq: &Cq<Self::Driver>, _max: u32) -> u32 {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// A work completion as a driver records it: `struct ib_wc` without its pointers.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkCompletion {
    /// The work request's id (or, for `ib_alloc_cq` users, its `struct ib_cqe` address).
    pub wr_id: u64,
    /// How the work request ended.
    pub status: WcStatus,
    /// What the work request was.
    pub opcode: WcOpcode,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// Bytes transferred (receives).
    pub byte_len: u32,
    /// Immediate data (network order, as received) or the invalidated R_Key.
    pub ex: u32,
    /// The number of the local queue pair.
    pub qp_num: u32,
    /// The remote queue pair (UD).
    pub src_qp: u32,
    /// What else the completion reports.
    pub wc_flags: WcFlags,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Service level.
    pub sl: u8,
    /// Port number.
    pub port_num: u8,
    /// Source MAC address (with `IB_WC_WITH_SMAC`).
    pub smac: [u8; 6],
    /// VLAN id (with `IB_WC_WITH_VLAN`).
    pub vlan_id: u16,
    /// `enum rdma_network_type` (with `IB_WC_WITH_NETWORK_HDR_TYPE`).
    pub network_hdr_type: u8,
}

/// The work completion array of a `poll_cq` call (`struct ib_wc wc[num_entries]`).
///
/// The caller's array is not initialised: the driver appends completions one by one with
/// [`WcSink::push`], and `poll_cq` reports to the core exactly the number appended, so the
/// core never reads an entry that was not written.
///
/// # Invariants
///
/// `slots` is the caller's array, valid for writes for `'a`; its first `filled` entries are
/// initialised.
pub struct WcSink<'a> {
    slots: &'a mut [MaybeUninit<bindings::ib_wc>],
    filled: usize,
}

impl<'a> WcSink<'a> {
    /// Wraps the array of `len` work completions at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for writes of `len` entries, and not accessed otherwise, for `'a`
    /// (it may be uninitialised).
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::ib_wc, len: usize) -> Self {
        // INVARIANT: No entry is initialised yet.
        Self {
            // SAFETY: The caller guarantees validity and uniqueness for `'a`; `MaybeUninit`
            // has the layout of its content and makes no claim about initialisation.
            slots: unsafe { core::slice::from_raw_parts_mut(ptr.cast(), len) },
            filled: 0,
        }
    }

    /// Returns how many completions were appended.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Returns whether no completion was appended.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Returns whether the array is full.
    pub fn is_full(&self) -> bool {
        self.filled >= self.slots.len()
    }

    /// Appends the completion `c` of the queue pair `qp` (`None` if it no longer exists).
    ///
    /// Fails with `ENOSPC` if the array is full.
    pub fn push(&mut self, c: &WorkCompletion, qp: Option<&QpHandle>) -> Result {
        let slot = self.slots.get_mut(self.filled).ok_or(ENOSPC)?;
        let mut w: bindings::ib_wc = pin_init::zeroed();
        w.__bindgen_anon_1.wr_id = c.wr_id;
        w.status = c.status.raw();
        w.opcode = c.opcode.raw();
        w.vendor_err = c.vendor_err;
        w.byte_len = c.byte_len;
        // A destroyed queue pair is reported as none rather than as a dangling pointer.
        w.qp = qp
            .and_then(|h| h.with(|p| p))
            .unwrap_or(core::ptr::null_mut());
        w.ex.imm_data = c.ex;
        w.src_qp = c.src_qp;
        w.wc_flags = c.wc_flags.bits() as i32;
        w.pkey_index = c.pkey_index;
        w.sl = c.sl;
        w.port_num = u32::from(c.port_num);
        w.smac = c.smac;
        w.vlan_id = c.vlan_id;
        w.network_hdr_type = c.network_hdr_type;
        slot.write(w);
        // INVARIANT: Entry `filled` was just written.
        self.filled += 1;
        Ok(())
    }
}

/// The `create_cq` op.
///
/// # Safety
///
/// `ibcq` is a queue the core allocated with `size_ib_cq` of driver `T` (zeroed past the C
/// part) with `device` set, not yet visible to anyone, and freed by the core only after
/// [`destroy_cq`] or after this op fails; `attr` is valid for the call; `attrs` is null for a
/// kernel caller or the uverbs call's attribute bundle.
pub(crate) unsafe extern "C" fn create_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    // SAFETY: The caller guarantees the container's layout, the device, the attributes and
    // the bundle, whose `driver_udata` is the call's udata on a device of `T`.
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
    // SAFETY: The caller guarantees the core frees the queue only after `destroy_cq` or after
    // this op fails, and both drop the handle.
    let handle = match unsafe { Cq::<T>::init_handle(ibcq) } {
        Ok(h) => h,
        Err(e) => return e.to_errno(),
    };
    let ret = T::Cq::create(dev, &attr, handle, &mut udata).and_then(|new| {
        // SAFETY: The container's data field is valid for writes, uninitialised, and never
        // moves (the core owns the allocation); the queue is not visible to anyone yet.
        unsafe {
            new.init.__pinned_init(Cq::<T>::data_ptr(ibcq))?;
            (*ibcq).cqe = new.cqe as c_int;
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

/// The `destroy_cq` op.
///
/// # Safety
///
/// `ibcq` is a queue of driver `T` for which [`create_cq`] succeeded and that no queue pair
/// uses any more; the core calls this once and frees the memory after.
pub(crate) unsafe extern "C" fn destroy_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the handle and data are initialised and used no more by
    // the core. The handle goes first, so that no completion reaches the queue through it.
    unsafe {
        Cq::<T>::drop_handle(ibcq);
        core::ptr::drop_in_place(Cq::<T>::data_ptr(ibcq));
    }
    0
}

/// The `resize_user_cq` op.
///
/// # Safety
///
/// `ibcq` is a live user queue of driver `T`, whose resizes the core serialises (the uverbs
/// object lock), and `udata` the call's `driver_udata`.
pub(crate) unsafe extern "C" fn resize_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    cqe: c_uint,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: The caller guarantees the queue is live and the udata a bundle's.
    let (cq, mut udata) = unsafe { (Cq::<T>::from_raw(ibcq), UData::from_bundle(udata)) };
    match T::Cq::resize(cq, cqe, &mut udata) {
        Ok(cqe) => {
            // SAFETY: The caller guarantees resizes are serialised; the core reads `cqe` after.
            unsafe { (*ibcq).cqe = cqe as c_int };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The `req_notify_cq` op.
///
/// # Safety
///
/// `ibcq` is a live queue of driver `T`; the op may run in any context, interrupts off
/// included.
pub(crate) unsafe extern "C" fn req_notify_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: The caller guarantees the queue is live.
    let cq = unsafe { Cq::<T>::from_raw(ibcq) };
    match T::Cq::req_notify(cq, CqNotifyFlags::from_bits_retain(flags)) {
        Ok(missed) => c_int::from(missed),
        Err(e) => e.to_errno(),
    }
}

/// The `poll_cq` op.
///
/// # Safety
///
/// `ibcq` is a live kernel queue of driver `T`, and `wc` an array of `num` completions that
/// the caller does not touch until the call returns (`ib_poll_cq`'s contract); it need not be
/// initialised. The op may run in any context, interrupts off included.
pub(crate) unsafe extern "C" fn poll_cq<T: Driver>(
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
    // SAFETY: The caller guarantees the queue is live and the array valid for writes of `num`
    // entries for the call, which `WcSink` needs and allows uninitialised.
    let (cq, mut sink) = unsafe { (Cq::<T>::from_raw(ibcq), WcSink::from_raw(wc, num)) };
    match T::Cq::poll(cq, &mut sink) {
        // Only the entries the sink wrote are reported: the core reads no others. `num` fits a
        // `c_int`, so the count does too.
        Ok(()) => sink.len() as c_int,
        Err(e) => e.to_errno(),
    }
}

/// The `peek_cq` op.
///
/// # Safety
///
/// `ibcq` is a live kernel queue of driver `T`.
pub(crate) unsafe extern "C" fn peek_cq<T: Driver>(
    ibcq: *mut bindings::ib_cq,
    wc_cnt: c_int,
) -> c_int {
    let Ok(max) = u32::try_from(wc_cnt) else {
        return EINVAL.to_errno();
    };
    // SAFETY: The caller guarantees the queue is live.
    T::Cq::peek(unsafe { Cq::<T>::from_raw(ibcq) }, max).min(max) as c_int
}

#[cfg(CONFIG_KUNIT = "y")]
#[macros::kunit_tests(rust_kernel_rdma_wc_sink)]
mod tests {
    use super::*;
    use core::mem::MaybeUninit;

    #[test]
    fn reports_only_what_was_written() -> Result {
        let mut slots = [const { MaybeUninit::<bindings::ib_wc>::uninit() }; 2];
        // SAFETY: The array is valid for writes of two entries and only used through the sink.
        let mut sink = unsafe { WcSink::from_raw(slots.as_mut_ptr().cast(), slots.len()) };
        assert!(sink.is_empty());
        let c = WorkCompletion {
            wr_id: 7,
            ..Default::default()
        };
        sink.push(&c, None)?;
        assert_eq!(sink.len(), 1);
        assert!(!sink.is_full());
        sink.push(&c, None)?;
        assert!(sink.is_full());
        // A full sink refuses more, and its count stays the number of entries written.
        assert!(sink.push(&c, None).is_err());
        assert_eq!(sink.len(), 2);
        // SAFETY: The sink wrote both entries.
        let first = unsafe { slots[0].assume_init_ref() };
        // SAFETY: `wr_id` is the union member the sink wrote.
        assert_eq!(unsafe { first.__bindgen_anon_1.wr_id }, 7);
        assert!(first.qp.is_null());
        Ok(())
    }
}
