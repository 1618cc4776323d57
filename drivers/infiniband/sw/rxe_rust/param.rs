// SPDX-License-Identifier: GPL-2.0

//! Device and port parameters: the limits and capabilities the device reports.
//!
//! They equal the C driver's (`rxe_param.h`) so that rdma-core sees the same device.

use kernel::{
    rdma::{
        attr::{
            DeviceCapFlags,
            OdpTransportCaps,
            PortCapFlags, //
        },
        mr::AccessFlags,
        wr::Sge, //
    },
    uapi, //
};

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
pub(crate) const SEND_WQE_SIZE: usize = core::mem::size_of::<uapi::rxe_send_wqe>();
/// Size of `struct rxe_recv_wqe` without its SGEs (rxe user ABI).
pub(crate) const RECV_WQE_SIZE: usize = core::mem::size_of::<uapi::rxe_recv_wqe>();
/// Size of `struct ib_sge` / `struct rxe_sge`.
pub(crate) const SGE_SIZE: usize = Sge::SIZE;

/// Inline data a send WQE can carry in place of its SGEs.
pub(crate) const MAX_INLINE_DATA: i32 = SGE_SIZE as i32 * MAX_SGE;
const _: () = assert!(SEND_WQE_SIZE == 208 && RECV_WQE_SIZE == 40 && MAX_INLINE_DATA == 512);

/// Device capability flags (`enum ib_device_cap_flags`).
pub(crate) const DEVICE_CAP_FLAGS: DeviceCapFlags = DeviceCapFlags::BAD_PKEY_CNTR
    .union(DeviceCapFlags::BAD_QKEY_CNTR)
    .union(DeviceCapFlags::AUTO_PATH_MIG)
    .union(DeviceCapFlags::CHANGE_PHY_PORT)
    .union(DeviceCapFlags::UD_AV_PORT_ENFORCE)
    .union(DeviceCapFlags::PORT_ACTIVE_EVENT)
    .union(DeviceCapFlags::SYS_IMAGE_GUID)
    .union(DeviceCapFlags::RC_RNR_NAK_GEN)
    .union(DeviceCapFlags::SRQ_RESIZE)
    .union(DeviceCapFlags::MEM_MGT_EXTENSIONS)
    .union(DeviceCapFlags::MEM_WINDOW)
    .union(DeviceCapFlags::FLUSH_GLOBAL)
    .union(DeviceCapFlags::FLUSH_PERSISTENT)
    .union(DeviceCapFlags::MEM_WINDOW_TYPE_2B)
    .union(DeviceCapFlags::ATOMIC_WRITE);

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
/// RDMA READs and atomics a queue pair's responder takes outstanding (`max_dest_rd_atomic`),
/// the C driver's 128: as many as it keeps responses of for duplicates (the transport's
/// responder resources). A duplicate atomic older than those cannot be answered (carrying it
/// out again would apply it twice), so the requester's retries of it would run out: 128
/// advertised with 16 kept failed `ib_atomic_bw` with `IBV_WC_RETRY_EXC_ERR` after a timeout
/// under load.
pub(crate) const MAX_QP_RD_ATOM: i32 = 128;
pub(crate) const MAX_RES_RD_ATOM: i32 = 0x3f000;
/// RDMA READs and atomics a queue pair's requester may have outstanding (`max_rd_atomic`),
/// within what the peer's responder takes.
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

/// Socket buffers a queue pair may have sent to other hosts and not yet freed (waiting in a
/// queueing discipline or a device's ring) before it stops sending requests and READ
/// responses, as the C driver's `RXE_INFLIGHT_SKBS_PER_QP_HIGH`: a slow link then holds a
/// bounded number, instead of a full queue that drops what comes next.
pub(crate) const MAX_SKBS_IN_FLIGHT: u32 = 64;
/// Fewer buffers in flight than this, and a queue pair that stopped sends again
/// (`RXE_INFLIGHT_SKBS_PER_QP_LOW`).
pub(crate) const SKBS_IN_FLIGHT_RESUME: u32 = 16;

/// The one port; IB ports are numbered from 1.
pub(crate) const PORT: u32 = 1;
pub(crate) const PORT_GID_TBL_LEN: i32 = 1024;
pub(crate) const PORT_CAP_FLAGS: PortCapFlags = PortCapFlags::CM_SUP;
pub(crate) const PORT_MAX_MSG_SZ: u32 = 1 << 31;
pub(crate) const PORT_MAX_VL_NUM: u8 = 1;
pub(crate) const PORT_PKEY_TBL_LEN: u16 = 1;
/// The default partition key, full membership.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// Remote access rights (`RXE_ACCESS_REMOTE`).
pub(crate) const ACCESS_REMOTE: AccessFlags = AccessFlags::REMOTE_READ
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_ATOMIC);

/// Access flags a memory region may have (`RXE_ACCESS_SUPPORTED_MR`).
pub(crate) const ACCESS_SUPPORTED_MR: AccessFlags = ACCESS_REMOTE
    .union(AccessFlags::LOCAL_WRITE)
    .union(AccessFlags::MW_BIND)
    .union(AccessFlags::ON_DEMAND)
    .union(AccessFlags::FLUSH_GLOBAL)
    .union(AccessFlags::FLUSH_PERSISTENT)
    .union(AccessFlags::OPTIONAL);

/// Whether memory may be registered for on-demand paging: only in a kernel built with it, as
/// the C driver.
pub(crate) const ON_DEMAND_PAGING: bool = cfg!(CONFIG_INFINIBAND_ON_DEMAND_PAGING);

/// What RC queue pairs may do with on-demand-paging memory, as the C driver (`rxe_init_device_param`).
pub(crate) const ODP_RC_CAPS: OdpTransportCaps = OdpTransportCaps::SEND
    .union(OdpTransportCaps::RECV)
    .union(OdpTransportCaps::WRITE)
    .union(OdpTransportCaps::READ)
    .union(OdpTransportCaps::ATOMIC)
    .union(OdpTransportCaps::SRQ_RECV)
    .union(OdpTransportCaps::FLUSH)
    .union(OdpTransportCaps::ATOMIC_WRITE);

/// What UD queue pairs may do with on-demand-paging memory, as the C driver.
pub(crate) const ODP_UD_CAPS: OdpTransportCaps = OdpTransportCaps::SEND
    .union(OdpTransportCaps::RECV)
    .union(OdpTransportCaps::SRQ_RECV);

/// Access flags a queue pair may have (`RXE_ACCESS_SUPPORTED_QP`).
pub(crate) const ACCESS_SUPPORTED_QP: AccessFlags = ACCESS_SUPPORTED_MR;
