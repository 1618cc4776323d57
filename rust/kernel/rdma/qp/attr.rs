// SPDX-License-Identifier: GPL-2.0

//! Queue pair attributes: what `create_qp`, `modify_qp` and `query_qp` pass and report.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    rdma::{
        ah::AhAttr,
        cq::Cq,
        device::Device,
        driver::Driver,
        srq::Srq, //
    },
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// The Q_Key of the general services queue pair (QP1).
pub const QP1_QKEY: u32 = bindings::IB_QP1_QKEY;

c_enum! {
    /// The type of a queue pair (`enum ib_qp_type`).
    pub enum QpType: u32 {
        /// Subnet management QP (QP0).
        Smi = bindings::ib_qp_type_IB_QPT_SMI,
        /// General services QP (QP1).
        Gsi = bindings::ib_qp_type_IB_QPT_GSI,
        /// Reliable connection.
        Rc = bindings::ib_qp_type_IB_QPT_RC,
        /// Unreliable connection.
        Uc = bindings::ib_qp_type_IB_QPT_UC,
        /// Unreliable datagram.
        Ud = bindings::ib_qp_type_IB_QPT_UD,
        /// Raw Ethernet packets.
        RawPacket = bindings::ib_qp_type_IB_QPT_RAW_PACKET,
        /// XRC initiator.
        XrcIni = bindings::ib_qp_type_IB_QPT_XRC_INI,
        /// XRC target.
        XrcTgt = bindings::ib_qp_type_IB_QPT_XRC_TGT,
        /// A driver-specific type.
        Driver = bindings::ib_qp_type_IB_QPT_DRIVER,
    }
}

c_enum! {
    /// The state of a queue pair (`enum ib_qp_state`), in the order of the C values.
    pub enum QpState: u32 {
        /// Reset.
        Reset = bindings::ib_qp_state_IB_QPS_RESET,
        /// Initialised.
        Init = bindings::ib_qp_state_IB_QPS_INIT,
        /// Ready to receive.
        Rtr = bindings::ib_qp_state_IB_QPS_RTR,
        /// Ready to send.
        Rts = bindings::ib_qp_state_IB_QPS_RTS,
        /// Send queue drained.
        Sqd = bindings::ib_qp_state_IB_QPS_SQD,
        /// Send queue error.
        Sqe = bindings::ib_qp_state_IB_QPS_SQE,
        /// Error.
        Err = bindings::ib_qp_state_IB_QPS_ERR,
    }
}

/// A set of `modify_qp` attributes (`enum ib_qp_attr_mask` bits).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct QpAttrMask(u32);

impl QpAttrMask {
    /// `IB_QP_STATE`.
    pub const STATE: Self = Self(bindings::ib_qp_attr_mask_IB_QP_STATE);
    /// `IB_QP_CUR_STATE`.
    pub const CUR_STATE: Self = Self(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE);
    /// `IB_QP_EN_SQD_ASYNC_NOTIFY`.
    pub const EN_SQD_ASYNC_NOTIFY: Self = Self(bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY);
    /// `IB_QP_ACCESS_FLAGS`.
    pub const ACCESS_FLAGS: Self = Self(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS);
    /// `IB_QP_PKEY_INDEX`.
    pub const PKEY_INDEX: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX);
    /// `IB_QP_PORT`.
    pub const PORT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PORT);
    /// `IB_QP_QKEY`.
    pub const QKEY: Self = Self(bindings::ib_qp_attr_mask_IB_QP_QKEY);
    /// `IB_QP_AV`.
    pub const AV: Self = Self(bindings::ib_qp_attr_mask_IB_QP_AV);
    /// `IB_QP_PATH_MTU`.
    pub const PATH_MTU: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU);
    /// `IB_QP_TIMEOUT`.
    pub const TIMEOUT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT);
    /// `IB_QP_RETRY_CNT`.
    pub const RETRY_CNT: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT);
    /// `IB_QP_RNR_RETRY`.
    pub const RNR_RETRY: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY);
    /// `IB_QP_RQ_PSN`.
    pub const RQ_PSN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN);
    /// `IB_QP_MAX_QP_RD_ATOMIC`.
    pub const MAX_QP_RD_ATOMIC: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC);
    /// `IB_QP_ALT_PATH`.
    pub const ALT_PATH: Self = Self(bindings::ib_qp_attr_mask_IB_QP_ALT_PATH);
    /// `IB_QP_MIN_RNR_TIMER`.
    pub const MIN_RNR_TIMER: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER);
    /// `IB_QP_SQ_PSN`.
    pub const SQ_PSN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN);
    /// `IB_QP_MAX_DEST_RD_ATOMIC`.
    pub const MAX_DEST_RD_ATOMIC: Self = Self(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC);
    /// `IB_QP_PATH_MIG_STATE`.
    pub const PATH_MIG_STATE: Self = Self(bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE);
    /// `IB_QP_CAP`.
    pub const CAP: Self = Self(bindings::ib_qp_attr_mask_IB_QP_CAP);
    /// `IB_QP_DEST_QPN`.
    pub const DEST_QPN: Self = Self(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN);
    /// Every standard attribute (`IB_QP_ATTR_STANDARD_BITS`).
    pub const STANDARD: Self = Self(bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS);

    /// Creates a mask from the C bits (unknown bits are kept).
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// Returns the C bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Returns whether every attribute of `other` is in the mask.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Returns whether the mask holds only standard attributes.
    pub const fn is_standard(self) -> bool {
        self.0 & !Self::STANDARD.0 == 0
    }
}

impl core::ops::BitOr for QpAttrMask {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl core::ops::BitAnd for QpAttrMask {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Self(self.0 & rhs.0)
    }
}

impl core::ops::Not for QpAttrMask {
    type Output = Self;
    fn not(self) -> Self {
        Self(!self.0)
    }
}

/// The capabilities of a queue pair's work queues (`struct ib_qp_cap`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send request.
    pub max_inline_data: u32,
    /// `rdma_rw` contexts (computed by the core).
    pub max_rdma_ctxs: u32,
}

impl From<bindings::ib_qp_cap> for QpCap {
    fn from(c: bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
            max_rdma_ctxs: c.max_rdma_ctxs,
        }
    }
}

impl From<QpCap> for bindings::ib_qp_cap {
    fn from(c: QpCap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
            max_rdma_ctxs: c.max_rdma_ctxs,
        }
    }
}

/// The attributes a queue pair is created with (`struct ib_qp_init_attr`), in `create_qp`.
///
/// The structure holds pointers the core dereferences after the call (the completion queues,
/// the shared receive queue, the handler): the driver reads them only through the accessors
/// below, which check them, and writes nothing but the capabilities it really gives
/// ([`QpInitAttr::set_cap`]).
///
/// # Invariants
///
/// `self.0` is the core's initialised creation attributes of the call in progress: its queue
/// pointers are null or live objects, kept alive while the queue pair uses them (`usecnt`).
#[repr(transparent)]
pub struct QpInitAttr(bindings::ib_qp_init_attr);

impl QpInitAttr {
    /// Creates a mutable reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be the creation attributes of a `create_qp` call, initialised, valid and not
    /// aliased for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_qp_init_attr) -> &'a mut Self {
        // SAFETY: Transparent wrapper; the caller guarantees validity and uniqueness.
        unsafe { &mut *ptr.cast() }
    }

    /// Returns the queue pair type, `None` for one without a [`QpType`] variant.
    pub fn qp_type(&self) -> Option<QpType> {
        QpType::from_raw(self.0.qp_type)
    }

    /// Returns the `IB_QP_CREATE_*` flags.
    pub fn create_flags(&self) -> u32 {
        self.0.create_flags
    }

    /// Returns the port number (meaningful for the special queue pairs).
    pub fn port_num(&self) -> u32 {
        self.0.port_num
    }

    /// Returns whether every send request completes with a completion (`IB_SIGNAL_ALL_WR`).
    pub fn sq_sig_all(&self) -> bool {
        self.0.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR
    }

    /// Returns the capabilities asked for.
    pub fn cap(&self) -> QpCap {
        self.0.cap.into()
    }

    /// Reports the capabilities really given, which may exceed those asked for.
    pub fn set_cap(&mut self, cap: QpCap) {
        self.0.cap = cap.into();
    }

    /// Returns whether the queue pair receives through a shared receive queue.
    pub fn has_srq(&self) -> bool {
        !self.0.srq.is_null()
    }

    /// Returns whether both completion queues are given.
    pub fn has_cqs(&self) -> bool {
        !self.0.send_cq.is_null() && !self.0.recv_cq.is_null()
    }

    /// Returns the send completion queue, if it is one of `dev`'s.
    pub fn send_cq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Cq<T>> {
        // SAFETY: By the type invariant the queue is null or live, and kept alive while the
        // queue pair uses it; a queue of `dev` belongs to driver `T`.
        unsafe { own_object(self.0.send_cq, dev).map(|p| Cq::<T>::from_raw(p)) }
    }

    /// Returns the receive completion queue, if it is one of `dev`'s.
    pub fn recv_cq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Cq<T>> {
        // SAFETY: As in `send_cq`.
        unsafe { own_object(self.0.recv_cq, dev).map(|p| Cq::<T>::from_raw(p)) }
    }

    /// Returns the shared receive queue, if there is one and it is `dev`'s.
    pub fn srq<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<&'a Srq<T>> {
        // SAFETY: As in `send_cq`.
        unsafe { own_object(self.0.srq, dev).map(|p| Srq::<T>::from_raw(p)) }
    }
}

/// What `query_qp` reports of a queue pair's creation parameters.
#[derive(Clone, Copy, Debug)]
pub struct QpInitInfo {
    /// The queue pair type.
    pub qp_type: QpType,
    /// The port (of the special queue pairs; the only port otherwise).
    pub port_num: u32,
    /// The capabilities given.
    pub cap: QpCap,
    /// Whether every send request completes with a completion.
    pub sq_sig_all: bool,
}

impl QpInitInfo {
    /// Writes the report into the caller's creation attributes, leaving the fields the core
    /// fills (handler, context, queues) alone.
    ///
    /// # Safety
    ///
    /// `init` must be valid for writes (it may be uninitialised).
    pub(crate) unsafe fn write_to(&self, init: *mut bindings::ib_qp_init_attr) {
        let sig = if self.sq_sig_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        // SAFETY: The caller guarantees `init` valid for writes; only writes, no reads.
        unsafe {
            (&raw mut (*init).qp_type).write(self.qp_type as u32);
            (&raw mut (*init).port_num).write(self.port_num);
            (&raw mut (*init).cap).write(self.cap.into());
            (&raw mut (*init).sq_sig_type).write(sig);
        }
    }
}

/// A core object with a `device` field.
trait HasDevice {
    /// Reads the `device` field of the object at `p`, through the pointer: the core changes
    /// other fields (use counts) concurrently, so no reference to the object is made.
    ///
    /// # Safety
    ///
    /// `p` must point to a live object.
    unsafe fn device(p: *const Self) -> *mut bindings::ib_device;
}

impl HasDevice for bindings::ib_cq {
    unsafe fn device(p: *const Self) -> *mut bindings::ib_device {
        // SAFETY: The caller guarantees `p` is live; `device` is set at creation.
        unsafe { (&raw const (*p).device).read() }
    }
}

impl HasDevice for bindings::ib_srq {
    unsafe fn device(p: *const Self) -> *mut bindings::ib_device {
        // SAFETY: As above.
        unsafe { (&raw const (*p).device).read() }
    }
}

/// Returns `ptr` if it is non-null and an object of `dev`.
///
/// # Safety
///
/// `ptr` must be null or point to a live object.
unsafe fn own_object<O: HasDevice, T: Driver>(ptr: *mut O, dev: &Device<T>) -> Option<*mut O> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: The caller guarantees a non-null `ptr` is live.
    (unsafe { O::device(ptr) } == dev.as_raw()).then_some(ptr)
}

/// The attributes of a `modify_qp` call (`struct ib_qp_attr` and its mask).
///
/// Callers set only the attributes their mask selects (kernel callers commonly leave the rest
/// of the structure uninitialised), so each accessor returns `None` unless its attribute is
/// in the mask, and nothing else of the structure is ever read.
///
/// # Invariants
///
/// `attr` is valid for reads for `'a`, and the fields of the attributes in `mask` are
/// initialised (the address vectors whole, their `sgid_attr` a reference the core holds for
/// the call).
pub struct QpAttr<'a> {
    attr: NonNull<bindings::ib_qp_attr>,
    mask: QpAttrMask,
    _p: PhantomData<&'a bindings::ib_qp_attr>,
}

macro_rules! masked_getters {
    ($($(#[$m:meta])* $vis:vis $name:ident => $field:ident: $ty:ty = $bit:ident;)*) => {
        $(
            $(#[$m])*
            $vis fn $name(&self) -> Option<$ty> {
                if !self.mask.contains(QpAttrMask::$bit) {
                    return None;
                }
                // SAFETY: By the type invariant the field of an attribute in the mask is
                // initialised; the read goes through a raw pointer to that field only.
                Some(unsafe { (&raw const (*self.attr.as_ptr()).$field).read() })
            }
        )*
    };
}

impl<'a> QpAttr<'a> {
    /// Wraps the attributes of a `modify_qp` call.
    ///
    /// # Safety
    ///
    /// `attr` must be valid for reads for `'a`, with the fields of the attributes in `mask`
    /// initialised, as the core passes them to `modify_qp`.
    pub(crate) unsafe fn from_raw(attr: *mut bindings::ib_qp_attr, mask: u32) -> Option<Self> {
        // INVARIANT: The caller guarantees validity and the initialised fields.
        Some(Self {
            attr: NonNull::new(attr)?,
            mask: QpAttrMask::from_bits(mask),
            _p: PhantomData,
        })
    }

    /// Returns the attributes being set.
    pub fn mask(&self) -> QpAttrMask {
        self.mask
    }

    /// Returns the state the queue pair is to move to (`None` also for a value out of the
    /// enumeration).
    pub fn qp_state(&self) -> Option<QpState> {
        self.qp_state_raw().and_then(QpState::from_raw)
    }

    /// Returns the state the caller believes the queue pair is in.
    pub fn cur_qp_state(&self) -> Option<QpState> {
        self.cur_qp_state_raw().and_then(QpState::from_raw)
    }

    /// Returns the capabilities asked for.
    pub fn cap(&self) -> Option<QpCap> {
        self.cap_raw().map(QpCap::from)
    }

    /// Returns the primary address vector.
    pub fn ah_attr(&self) -> Option<&AhAttr> {
        // SAFETY: With `IB_QP_AV` the vector is initialised (type invariant); `AhAttr` is a
        // transparent wrapper that only reads it, for no longer than `self` borrows it.
        self.mask
            .contains(QpAttrMask::AV)
            .then(|| unsafe { &*(&raw const (*self.attr.as_ptr()).ah_attr).cast::<AhAttr>() })
    }

    /// Returns the alternate address vector.
    pub fn alt_ah_attr(&self) -> Option<&AhAttr> {
        // SAFETY: As in `ah_attr`, with `IB_QP_ALT_PATH`.
        self.mask
            .contains(QpAttrMask::ALT_PATH)
            .then(|| unsafe { &*(&raw const (*self.attr.as_ptr()).alt_ah_attr).cast::<AhAttr>() })
    }

    masked_getters! {
        qp_state_raw => qp_state: u32 = STATE;
        cur_qp_state_raw => cur_qp_state: u32 = CUR_STATE;
        cap_raw => cap: bindings::ib_qp_cap = CAP;
        /// Returns whether to report the send queue drained (`IB_QP_EN_SQD_ASYNC_NOTIFY`).
        pub en_sqd_async_notify => en_sqd_async_notify: u8 = EN_SQD_ASYNC_NOTIFY;
        /// Returns the remote access rights (`IB_ACCESS_*`) of an RC or UC queue pair.
        pub qp_access_flags => qp_access_flags: i32 = ACCESS_FLAGS;
        /// Returns the P_Key index.
        pub pkey_index => pkey_index: u16 = PKEY_INDEX;
        /// Returns the port number.
        pub port_num => port_num: u32 = PORT;
        /// Returns the Q_Key (datagram queue pairs).
        pub qkey => qkey: u32 = QKEY;
        /// Returns the path MTU (`enum ib_mtu`).
        pub path_mtu => path_mtu: u32 = PATH_MTU;
        /// Returns the local ACK timeout exponent.
        pub timeout => timeout: u8 = TIMEOUT;
        /// Returns the retry count.
        pub retry_cnt => retry_cnt: u8 = RETRY_CNT;
        /// Returns the RNR retry count.
        pub rnr_retry => rnr_retry: u8 = RNR_RETRY;
        /// Returns the receive queue's first PSN.
        pub rq_psn => rq_psn: u32 = RQ_PSN;
        /// Returns the outstanding RDMA READ and atomic requests as initiator.
        pub max_rd_atomic => max_rd_atomic: u8 = MAX_QP_RD_ATOMIC;
        /// Returns the alternate path's port.
        pub alt_port_num => alt_port_num: u32 = ALT_PATH;
        /// Returns the alternate path's P_Key index.
        pub alt_pkey_index => alt_pkey_index: u16 = ALT_PATH;
        /// Returns the alternate path's ACK timeout exponent.
        pub alt_timeout => alt_timeout: u8 = ALT_PATH;
        /// Returns the minimum RNR NAK timer code.
        pub min_rnr_timer => min_rnr_timer: u8 = MIN_RNR_TIMER;
        /// Returns the send queue's first PSN.
        pub sq_psn => sq_psn: u32 = SQ_PSN;
        /// Returns the outstanding RDMA READ and atomic requests as responder.
        pub max_dest_rd_atomic => max_dest_rd_atomic: u8 = MAX_DEST_RD_ATOMIC;
        /// Returns the path migration state (`enum ib_mig_state`).
        pub path_mig_state => path_mig_state: u32 = PATH_MIG_STATE;
        /// Returns the destination QP number.
        pub dest_qp_num => dest_qp_num: u32 = DEST_QPN;
    }
}

/// Returns whether moving a queue pair of type `qp_type` from `cur` to `next` with the
/// attributes in `mask` is a legal transition (IBTA table 91, `ib_modify_qp_is_ok`).
pub fn modify_qp_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: QpAttrMask) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur as u32, next as u32, qp_type as u32, mask.bits()) }
}

/// The fields of a kept copy of queue pair attributes ([`QpAttrCopy::update`]).
pub type QpAttrFields = bindings::ib_qp_attr;

/// A copy of queue pair attributes that a driver keeps (`struct ib_qp_attr`).
///
/// # Invariants
///
/// The copy's pointers (the address vectors' `sgid_attr`, `xmit_slave`) are null: they are
/// references the core owns and lends for one call only.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct QpAttrCopy(bindings::ib_qp_attr);

// SAFETY: By the type invariant the copy holds no pointer; the rest is plain data.
unsafe impl Send for QpAttrCopy {}
// SAFETY: See `Send`.
unsafe impl Sync for QpAttrCopy {}

impl Default for QpAttrCopy {
    fn default() -> Self {
        // INVARIANT: All pointers are null.
        Self(pin_init::zeroed())
    }
}

impl QpAttrCopy {
    /// Returns the primary address vector.
    pub fn ah(&self) -> &AhAttr {
        // SAFETY: `AhAttr` is a transparent wrapper of `rdma_ah_attr`; the copy is initialised
        // and its `sgid_attr` null.
        unsafe { AhAttr::from_raw(&raw const self.0.ah_attr) }
    }

    /// Returns the attributes.
    pub fn get(&self) -> &bindings::ib_qp_attr {
        &self.0
    }

    /// Changes the attributes with `f`; the core's pointers are dropped from the result.
    pub fn update(&mut self, f: impl FnOnce(&mut QpAttrFields)) {
        f(&mut self.0);
        // INVARIANT: The pointers `f` may have copied in are cleared.
        self.0.ah_attr.grh.sgid_attr = core::ptr::null();
        self.0.alt_ah_attr.grh.sgid_attr = core::ptr::null();
        self.0.xmit_slave = core::ptr::null_mut();
    }

    /// Writes the copy into a caller's attributes (`query_qp`).
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes (it may be uninitialised).
    pub(crate) unsafe fn write_to(&self, dst: *mut bindings::ib_qp_attr) {
        // SAFETY: The caller guarantees `dst` valid for writes; the copy's pointers are null
        // (type invariant), so the core finds no reference it did not take.
        unsafe { dst.write(self.0) };
    }
}

/// What `query_qp` reports: the attributes and the creation parameters.
#[derive(Clone, Copy)]
pub struct QpReport {
    /// The attributes (`struct ib_qp_attr`).
    pub attr: QpAttrCopy,
    /// The creation parameters (part of `struct ib_qp_init_attr`).
    pub init: QpInitInfo,
}
