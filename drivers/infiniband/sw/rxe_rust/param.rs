// SPDX-License-Identifier: GPL-2.0

//! Device and port parameters: the limits and capabilities the device reports.
//!
//! They equal the C driver's (`rxe_param.h`) so that rdma-core sees the same device.

use kernel::bindings;

/// The uverbs ABI version of the rxe user-space provider.
pub(crate) const UVERBS_ABI_VERSION: u32 = 2;

/// IBTA vendor id (none assigned).
pub(crate) const VENDOR_ID: u32 = 0xff_ffff;

/// The common limit of object counts and queue depths.
const DEFAULT_MAX_VALUE: i32 = 1 << 20;

/// First QP number handed to users; 0 and 1 are the special QPs.
pub(crate) const MIN_QP_INDEX: i32 = 16;

/// Memory region indices (the upper 24 bits of an lkey/rkey).
pub(crate) const MAX_MR_INDEX: i32 = DEFAULT_MAX_VALUE >> 1;
pub(crate) const MIN_MR_INDEX: i32 = 1;
pub(crate) const MIN_MW_INDEX: i32 = MAX_MR_INDEX + 1;
pub(crate) const MAX_MW_INDEX: i32 = DEFAULT_MAX_VALUE;
pub(crate) const MIN_SRQ_INDEX: i32 = 0x0002_0001;

/// Scatter/gather entries per work request.
pub(crate) const MAX_SGE: i32 = 32;

/// Size of `struct rxe_send_wqe` without its SGEs (rxe user ABI).
pub(crate) const SEND_WQE_SIZE: usize = core::mem::size_of::<bindings::rxe_send_wqe>();
/// Size of `struct rxe_recv_wqe` without its SGEs (rxe user ABI).
pub(crate) const RECV_WQE_SIZE: usize = core::mem::size_of::<bindings::rxe_recv_wqe>();
/// Size of `struct ib_sge` / `struct rxe_sge`.
pub(crate) const SGE_SIZE: usize = core::mem::size_of::<bindings::ib_sge>();

/// Inline data a send WQE can carry in place of its SGEs.
pub(crate) const MAX_INLINE_DATA: i32 = SGE_SIZE as i32 * MAX_SGE;
const _: () = assert!(SEND_WQE_SIZE == 208 && RECV_WQE_SIZE == 40 && MAX_INLINE_DATA == 512);

/// Device capability flags (`enum ib_device_cap_flags`).
pub(crate) const DEVICE_CAP_FLAGS: u64 = (bindings::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR
    | bindings::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR
    | bindings::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG
    | bindings::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT
    | bindings::ib_device_cap_flags_IB_DEVICE_UD_AV_PORT_ENFORCE
    | bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT
    | bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
    | bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
    | bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE
    | bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
    | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
    | bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL
    | bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT
    | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B
    | bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE)
    as u64;

pub(crate) const MAX_MR_SIZE: u64 = u64::MAX;
pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;
pub(crate) const MAX_QP: i32 = DEFAULT_MAX_VALUE - MIN_QP_INDEX;
pub(crate) const MAX_QP_WR: i32 = DEFAULT_MAX_VALUE;
pub(crate) const MAX_SGE_RD: i32 = 32;
pub(crate) const MAX_CQ: i32 = DEFAULT_MAX_VALUE;
pub(crate) const MAX_LOG_CQE: i32 = 15;
/// The largest completion queue.
pub(crate) const MAX_CQE: u32 = (1 << MAX_LOG_CQE) - 1;
pub(crate) const MAX_MR: i32 = MAX_MR_INDEX - MIN_MR_INDEX;
pub(crate) const MAX_MW: i32 = DEFAULT_MAX_VALUE - MIN_MW_INDEX;
pub(crate) const MAX_PD: i32 = DEFAULT_MAX_VALUE;
pub(crate) const MAX_QP_RD_ATOM: i32 = 128;
pub(crate) const MAX_RES_RD_ATOM: i32 = 0x3f000;
pub(crate) const MAX_QP_INIT_RD_ATOM: i32 = 128;
pub(crate) const MAX_MCAST_GRP: i32 = 8192;
pub(crate) const MAX_MCAST_QP_ATTACH: i32 = 56;
pub(crate) const MAX_TOT_MCAST_QP_ATTACH: i32 = 0x70000;
pub(crate) const MAX_AH: i32 = (1 << 15) - 1;
pub(crate) const MAX_SRQ: i32 = DEFAULT_MAX_VALUE - MIN_SRQ_INDEX;
pub(crate) const MAX_SRQ_WR: i32 = DEFAULT_MAX_VALUE;
pub(crate) const MAX_SRQ_SGE: i32 = 27;
pub(crate) const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 512;
pub(crate) const MAX_PKEYS: u16 = 64;
pub(crate) const LOCAL_CA_ACK_DELAY: u8 = 15;

/// The one port; IB ports are numbered from 1.
pub(crate) const PORT: u32 = 1;
pub(crate) const PORT_GID_TBL_LEN: i32 = 1024;
pub(crate) const PORT_CAP_FLAGS: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
pub(crate) const PORT_MAX_MSG_SZ: u32 = 1 << 31;
pub(crate) const PORT_MAX_VL_NUM: u8 = 1;
pub(crate) const PORT_PKEY_TBL_LEN: u16 = 1;
/// The default partition key, full membership.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// Remote access rights (`RXE_ACCESS_REMOTE`).
pub(crate) const ACCESS_REMOTE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

/// Access flags a memory region may have (`RXE_ACCESS_SUPPORTED_MR`).
pub(crate) const ACCESS_SUPPORTED_MR: u32 = ACCESS_REMOTE
    | bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_MW_BIND
    | bindings::ib_access_flags_IB_ACCESS_ON_DEMAND
    | bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL
    | bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT
    | bindings::ib_access_flags_IB_ACCESS_OPTIONAL;

/// Access flags a queue pair may have (`RXE_ACCESS_SUPPORTED_QP`).
pub(crate) const ACCESS_SUPPORTED_QP: u32 = ACCESS_SUPPORTED_MR;
