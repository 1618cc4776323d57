// SPDX-License-Identifier: GPL-2.0

//! The verbs of the Soft-RoCE device: what the RDMA core calls.

use crate::{
    ah::RxeAh,
    cq::RxeCq,
    device::RxeDev,
    mr::RxeMr,
    mw::RxeMw,
    param,
    pd::RxePd,
    pma,
    qp::RxeQp,
    roce::mtu::{
        ib_mtu_for_netdev_mtu,
        IbMtu, //
    },
    srq::RxeSrq,
    stats::{
        self,
        Counter, //
    },
};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{
    prelude::*,
    rdma::{
        attr::{
            AtomicCap,
            CoreCapFlags,
            DeviceAttr,
            DeviceModifyFlags,
            DriverId,
            KernelCapFlags,
            LinkLayer,
            OdpGeneralCaps,
            PortAttr,
            PortImmutable,
            PortModifyFlags,
            PortPhysState,
            PortState,
            PortWidth,
            MGMT_MAD_SIZE, //
        },
        device::Device,
        driver::{
            Driver,
            MadResult,
            MAD_SIZE, //
        },
        stats::StatDesc,
        ucontext::UContextOps,
        udata::UData, //
    },
};

/// The Soft-RoCE driver.
pub(crate) struct Rxe;

/// A user context: the rxe ABI keeps nothing per context beyond what the core does.
pub(crate) struct RxeUContext;

impl UContextOps for RxeUContext {
    type Driver = Rxe;

    fn alloc(_dev: &Device<Rxe>, udata: &mut UData<'_, Rxe>) -> Result<Self> {
        // The rxe ABI has no driver data in this call; refuse input we do not know.
        udata.check_in_empty()?;
        Ok(Self)
    }
}

/// Fails with `EINVAL` unless `port` is the device's one port.
fn check_port(port: u32) -> Result {
    if port == param::PORT {
        Ok(())
    } else {
        pr_debug!("bad port_num = {}\n", port);
        Err(EINVAL)
    }
}

#[vtable]
impl Driver for Rxe {
    type Data = RxeDev;
    type UContext = RxeUContext;
    type Pd = RxePd;
    type Cq = RxeCq;
    type Qp = RxeQp;
    type Ah = RxeAh;
    type Srq = RxeSrq;
    type Mw = RxeMw;
    type Mr = RxeMr;

    const DRIVER_ID: DriverId = DriverId::Rxe;
    const UVERBS_ABI_VERSION: u32 = param::UVERBS_ABI_VERSION;
    const HW_STATS: &'static [StatDesc] = &stats::NAMES;
    const PARENT_ATTRIBUTE: bool = true;

    fn query_device(
        dev: &Device<Self>,
        attr: &mut DeviceAttr,
        udata: &mut UData<'_, Self>,
    ) -> Result {
        udata.check_in_empty()?;
        attr.sys_image_guid = dev.sys_image_guid.load(Relaxed);
        attr.vendor_id = param::VENDOR_ID;
        attr.max_mr_size = param::MAX_MR_SIZE;
        attr.page_size_cap = param::PAGE_SIZE_CAP;
        attr.max_qp = param::MAX_QP;
        attr.max_qp_wr = param::MAX_QP_WR;
        attr.set_device_cap_flags(param::DEVICE_CAP_FLAGS);
        if param::ON_DEMAND_PAGING {
            attr.set_kernel_cap_flags(
                KernelCapFlags::ALLOW_USER_UNREG | KernelCapFlags::ON_DEMAND_PAGING,
            );
            attr.set_odp_caps(
                OdpGeneralCaps::SUPPORT,
                param::ODP_RC_CAPS,
                param::ODP_UD_CAPS,
            );
        } else {
            attr.set_kernel_cap_flags(KernelCapFlags::ALLOW_USER_UNREG);
        }
        attr.max_send_sge = param::MAX_SGE;
        attr.max_recv_sge = param::MAX_SGE;
        attr.max_sge_rd = param::MAX_SGE_RD;
        attr.max_cq = param::MAX_CQ;
        attr.max_cqe = param::MAX_CQE as i32;
        attr.max_mr = param::MAX_MR;
        attr.max_mw = param::MAX_MW;
        attr.max_pd = param::MAX_PD;
        attr.max_qp_rd_atom = param::MAX_QP_RD_ATOM;
        attr.max_res_rd_atom = param::MAX_RES_RD_ATOM;
        attr.max_qp_init_rd_atom = param::MAX_QP_INIT_RD_ATOM;
        attr.set_atomic_cap(AtomicCap::Hca);
        attr.max_mcast_grp = param::MAX_MCAST_GRP;
        attr.max_mcast_qp_attach = param::MAX_MCAST_QP_ATTACH;
        attr.max_total_mcast_qp_attach = param::MAX_TOT_MCAST_QP_ATTACH;
        attr.max_ah = param::MAX_AH;
        attr.max_srq = param::MAX_SRQ;
        attr.max_srq_wr = param::MAX_SRQ_WR;
        attr.max_srq_sge = param::MAX_SRQ_SGE;
        attr.max_fast_reg_page_list_len = param::MAX_FAST_REG_PAGE_LIST_LEN;
        attr.max_pkeys = param::MAX_PKEYS;
        attr.local_ca_ack_delay = param::LOCAL_CA_ACK_DELAY;
        udata.respond_empty()
    }

    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr) -> Result {
        check_port(port)?;
        // None once the netdevice unregistered (the device is going): the port is then down,
        // and a query (the core's cache refresh after the port's last event) still succeeds.
        let ndev = dev.netdev(port);

        attr.max_mtu = IbMtu::Mtu4096.raw();
        attr.active_mtu = ndev
            .as_ref()
            .map_or(IbMtu::Mtu256, |ndev| ib_mtu_for_netdev_mtu(ndev.mtu()))
            .raw();
        attr.gid_tbl_len = param::PORT_GID_TBL_LEN;
        attr.port_cap_flags = dev.port_cap_flags.load(Relaxed);
        attr.qkey_viol_cntr = dev.qkey_violations.load(Relaxed);
        attr.max_msg_sz = param::PORT_MAX_MSG_SZ;
        attr.pkey_tbl_len = param::PORT_PKEY_TBL_LEN;
        attr.max_vl_num = param::PORT_MAX_VL_NUM;
        // A failed speed query (the netdevice unregistering, or gone) reports 1X SDR. The C
        // driver fails the query then, and the core's cache refresh after the netdevice's
        // last port event (it queries the port) logs the failure and drops the event.
        attr.set_active_width(PortWidth::X1);
        attr.active_speed = 1;
        if let Ok((speed, width)) = dev.eth_speed(port) {
            attr.active_speed = speed;
            attr.active_width = width;
        }

        let (state, phys) = match ndev {
            Some(ndev) if ndev.is_operational() => (PortState::Active, PortPhysState::LinkUp),
            Some(ndev) if ndev.is_up() => (PortState::Down, PortPhysState::Polling),
            _ => (PortState::Down, PortPhysState::Disabled),
        };
        attr.set_state(state, phys);
        Ok(())
    }

    fn get_port_immutable(_dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result {
        check_port(port)?;
        imm.set_core_cap_flags(CoreCapFlags::IBA_ROCE_UDP_ENCAP);
        imm.pkey_tbl_len = param::PORT_PKEY_TBL_LEN.into();
        imm.gid_tbl_len = param::PORT_GID_TBL_LEN;
        imm.max_mad_size = MGMT_MAD_SIZE;
        Ok(())
    }

    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            pr_debug!("bad pkey index = {}\n", index);
            return Err(EINVAL);
        }
        Ok(param::DEFAULT_PKEY)
    }

    fn modify_port(
        dev: &Device<Self>,
        port: u32,
        mask: PortModifyFlags,
        set: u32,
        clear: u32,
    ) -> Result {
        check_port(port)?;
        if !mask.difference(PortModifyFlags::RESET_QKEY_CNTR).is_empty() {
            pr_debug!("unsupported modify_port mask {:#x}\n", mask.bits());
            return Err(EOPNOTSUPP);
        }
        // As the C driver: set, then clear, under no lock (the core serialises nothing, but
        // each update is one atomic operation).
        dev.port_cap_flags.fetch_or(set, Relaxed);
        dev.port_cap_flags.fetch_and(!clear, Relaxed);
        if mask.contains(PortModifyFlags::RESET_QKEY_CNTR) {
            dev.qkey_violations.store(0, Relaxed);
        }
        Ok(())
    }

    fn enable_driver(dev: &Device<Self>) -> Result {
        // A port down at registration counts as a link that went down, as under the C driver;
        // a namespace move, which re-enables the device, does not take the link down.
        let first = !dev.enabled_once.swap(true, Relaxed);
        // The port's initial state; the core reports later changes of the netdevice itself.
        // After a namespace move the netdevice may have gone (the device's removal is queued).
        let Some(ndev) = dev.netdev(param::PORT) else {
            return Ok(());
        };
        if first && !ndev.is_operational() {
            dev.counters.inc(Counter::LinkDowned);
        }
        dev.dispatch_port_state(&ndev);
        Ok(())
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        input: &[u8; MAD_SIZE],
        out: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        if check_port(port).is_err() {
            return MadResult::Ignored;
        }
        pma::process_mad(&dev.counters, input, out)
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        check_port(port)?;
        dev.counters.read(values);
        Ok(())
    }

    fn modify_device(
        dev: &Device<Self>,
        mask: DeviceModifyFlags,
        sys_image_guid: u64,
        _desc: &[u8],
    ) -> Result {
        if !mask.difference(DeviceModifyFlags::ALL).is_empty() {
            pr_debug!("unsupported modify_device mask {:#x}\n", mask.bits());
            return Err(EOPNOTSUPP);
        }
        if mask.contains(DeviceModifyFlags::SYS_IMAGE_GUID) {
            dev.sys_image_guid.store(sys_image_guid.to_be(), Relaxed);
        }
        Ok(())
    }
}
