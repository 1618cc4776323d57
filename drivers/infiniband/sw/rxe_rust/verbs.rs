// SPDX-License-Identifier: GPL-2.0

//! The verbs of the Soft-RoCE device: what the RDMA core calls.

use crate::{
    ah::Ah,
    cq::Cq,
    device::RxeDev,
    mcast,
    mr::Mr,
    mw::Mw,
    param,
    pd::Pd,
    qp::Qp,
    roce::mtu::{
        ib_mtu_for_netdev_mtu,
        IbMtu, //
    },
    srq::Srq,
    stats::{
        self,
        Counter, //
    },
};
use core::sync::atomic::Ordering::Relaxed;
use kernel::{
    bindings,
    prelude::*,
    rdma::{
        attr::{
            AhAttr,
            AhAttrSink,
            DeviceAttr,
            LinkLayer,
            PortAttr,
            PortImmutable,
            PortPhysState,
            PortState,
            QpAttr,
            QpAttrMask,
            QpInitAttr,
            QpReport, //
        },
        code,
        device::Device,
        driver::{
            CqInitAttr,
            Driver,
            RecvWr,
            SendWr, //
        },
        event::{
            CqHandle,
            QpHandle,
            SrqHandle,
            WcSink, //
        },
        object,
        stats::StatDesc,
        udata::UData, //
    },
};

/// The Soft-RoCE driver.
pub(crate) struct Rxe;

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
    type UContext = ();
    type Pd = Pd;
    type Cq = Cq;
    type Qp = Qp;
    type Ah = Ah;
    type Srq = Srq;
    type Mw = Mw;
    type Mr = Mr;

    const DRIVER_ID: bindings::rdma_driver_id = bindings::rdma_driver_id_RDMA_DRIVER_RXE;
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
        attr.device_cap_flags = param::DEVICE_CAP_FLAGS;
        attr.kernel_cap_flags = u64::from(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
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
        attr.atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_HCA;
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
        let ndev = dev.netdev(port).ok_or(ENODEV)?;

        attr.max_mtu = IbMtu::Mtu4096.raw();
        attr.active_mtu = ib_mtu_for_netdev_mtu(ndev.mtu()).raw();
        attr.gid_tbl_len = param::PORT_GID_TBL_LEN;
        attr.port_cap_flags = dev.port_cap_flags.load(Relaxed);
        attr.qkey_viol_cntr = dev.qkey_violations.load(Relaxed);
        attr.max_msg_sz = param::PORT_MAX_MSG_SZ;
        attr.pkey_tbl_len = param::PORT_PKEY_TBL_LEN;
        attr.max_vl_num = param::PORT_MAX_VL_NUM;
        // Like the C driver, a failed speed query still reports the port (1X, SDR).
        attr.active_width = bindings::ib_port_width_IB_WIDTH_1X as u8;
        attr.active_speed = 1;
        let speed = dev.eth_speed(port);
        if let Ok((speed, width)) = speed {
            attr.active_speed = speed;
            attr.active_width = width;
        }

        let (state, phys) = if ndev.is_operational() {
            (PortState::Active, PortPhysState::LinkUp)
        } else if ndev.is_up() {
            (PortState::Down, PortPhysState::Polling)
        } else {
            (PortState::Down, PortPhysState::Disabled)
        };
        attr.state = state as u32;
        attr.phys_state = phys as u8;
        speed.map(|_| ())
    }

    fn get_port_immutable(_dev: &Device<Self>, port: u32, imm: &mut PortImmutable) -> Result {
        check_port(port)?;
        imm.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        imm.pkey_tbl_len = param::PORT_PKEY_TBL_LEN.into();
        imm.gid_tbl_len = param::PORT_GID_TBL_LEN;
        imm.max_mad_size = bindings::IB_MGMT_MAD_SIZE;
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

    fn alloc_ucontext(_dev: &Device<Self>, udata: &mut UData<'_, Self>) -> Result<()> {
        // The rxe ABI has no driver data in this call; refuse input we do not know.
        udata.check_in_empty()
    }

    fn alloc_pd(dev: &Device<Self>, udata: &mut UData<'_, Self>) -> Result<Pd> {
        udata.check_in_empty()?;
        Pd::new(dev)
    }

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        handle: CqHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<(impl PinInit<Cq, Error>, u32)> {
        Cq::new(dev, attr, handle, udata)
    }

    fn poll_cq(cq: &object::Cq<Self>, wc: &mut WcSink<'_>) -> Result {
        cq.poll(wc)
    }

    fn peek_cq(cq: &object::Cq<Self>, max: u32) -> u32 {
        cq.peek(max)
    }

    fn resize_cq(cq: &object::Cq<Self>, cqe: u32, udata: &mut UData<'_, Self>) -> Result<u32> {
        cq.resize(cqe, udata)
    }

    fn req_notify_cq(cq: &object::Cq<Self>, flags: u32) -> Result<bool> {
        cq.req_notify(flags)
    }

    fn create_qp(
        dev: &Device<Self>,
        pd: &object::Pd<Self>,
        init: &mut QpInitAttr,
        handle: QpHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<(impl PinInit<Qp, Error>, u32)> {
        Qp::new(dev, pd, init, handle, udata)
    }

    fn post_recv(qp: &object::Qp<Self>, wr: &RecvWr<'_>) -> Result {
        qp.post_recv(wr)
    }

    fn post_send(qp: &object::Qp<Self>, wr: &SendWr<'_, Self>) -> Result {
        qp.post_send(wr)
    }

    fn post_send_doorbell(qp: &object::Qp<Self>) -> Result {
        qp.doorbell(&qp.device().worker)
    }

    fn destroy_qp(qp: &object::Qp<Self>) -> Result {
        qp.destroy()
    }

    fn attach_mcast(qp: &object::Qp<Self>, mgid: &[u8; 16]) -> Result {
        mcast::attach(qp.device(), qp, mgid)
    }

    fn detach_mcast(qp: &object::Qp<Self>, mgid: &[u8; 16]) -> Result {
        mcast::detach(qp.device(), qp, mgid)
    }

    fn modify_qp(qp: &object::Qp<Self>, attr: &QpAttr<'_>, _udata: &mut UData<'_, Self>) -> Result {
        let dev = qp.device();
        let port_mtu = ib_mtu_for_netdev_mtu(dev.ndev.mtu());
        qp.modify(attr, &dev.worker, port_mtu)
    }

    fn query_qp(qp: &object::Qp<Self>, _mask: QpAttrMask) -> Result<QpReport> {
        Ok(qp.query())
    }

    fn create_ah(
        dev: &Device<Self>,
        pd: &object::Pd<Self>,
        attr: &AhAttr,
        sleepable: bool,
        udata: &mut UData<'_, Self>,
    ) -> Result<Ah> {
        Ah::new(dev, pd, attr, sleepable, udata)
    }

    fn query_ah(ah: &object::Ah<Self>, attr: &mut AhAttrSink<'_>) -> Result {
        ah.query(attr);
        Ok(())
    }

    fn alloc_mw(
        dev: &Device<Self>,
        mw_type: u32,
        udata: &mut UData<'_, Self>,
    ) -> Result<(Mw, u32)> {
        Mw::new(dev, mw_type, udata)
    }

    fn reg_user_mr(
        pd: &object::Pd<Self>,
        start: u64,
        len: u64,
        iova: u64,
        access: u32,
        udata: &mut UData<'_, Self>,
    ) -> Result<(Mr, u32, u32)> {
        Mr::new_user(pd, start, len, iova, access, udata)
    }

    fn create_srq(
        dev: &Device<Self>,
        srq_type: u32,
        attr: &mut bindings::ib_srq_attr,
        handle: SrqHandle,
        udata: &mut UData<'_, Self>,
    ) -> Result<impl PinInit<Srq, Error>> {
        Srq::new(dev, srq_type, attr, handle, udata)
    }

    fn post_srq_recv(srq: &object::Srq<Self>, wr: &RecvWr<'_>) -> Result {
        srq.post_recv(wr)
    }

    fn modify_srq(
        srq: &object::Srq<Self>,
        attr: &mut bindings::ib_srq_attr,
        mask: u32,
        udata: &mut UData<'_, Self>,
    ) -> Result {
        srq.modify(attr, mask, udata)
    }

    fn query_srq(srq: &object::Srq<Self>, attr: &mut bindings::ib_srq_attr) -> Result {
        srq.query(attr);
        Ok(())
    }

    fn rereg_user_mr(
        mr: &object::Mr<Self>,
        flags: u32,
        access: u32,
        pd: &object::Pd<Self>,
    ) -> Result {
        mr.rereg(flags, access, pd)
    }

    fn get_dma_mr(pd: &object::Pd<Self>, access: u32) -> Result<(Mr, u32, u32)> {
        Mr::new_dma(pd, access)
    }

    fn alloc_mr(pd: &object::Pd<Self>, mr_type: u32, max_num_sg: u32) -> Result<(Mr, u32, u32)> {
        Mr::new_fast(pd, mr_type, max_num_sg)
    }

    fn map_mr_sg_start(mr: &object::Mr<Self>) -> Result {
        mr.map_start(mr.page_size())
    }

    fn map_mr_sg_page(mr: &object::Mr<Self>, addr: u64) -> Result {
        mr.map_page(addr)
    }

    fn modify_port(dev: &Device<Self>, port: u32, mask: u32, set: u32, clear: u32) -> Result {
        check_port(port)?;
        if mask & !bindings::ib_port_modify_flags_IB_PORT_RESET_QKEY_CNTR != 0 {
            pr_debug!("unsupported modify_port mask {:#x}\n", mask);
            return Err(code::eopnotsupp());
        }
        // As the C driver: set, then clear, under no lock (the core serialises nothing, but
        // each update is one atomic operation).
        dev.port_cap_flags.fetch_or(set, Relaxed);
        dev.port_cap_flags.fetch_and(!clear, Relaxed);
        if mask & bindings::ib_port_modify_flags_IB_PORT_RESET_QKEY_CNTR != 0 {
            dev.qkey_violations.store(0, Relaxed);
        }
        Ok(())
    }

    fn enable_driver(dev: &Device<Self>) -> Result {
        // The port's initial state; the core reports later changes of the netdevice itself.
        let ndev = dev.netdev(param::PORT).ok_or(ENODEV)?;
        if !ndev.is_operational() {
            dev.counters.inc(Counter::LinkDowned);
        }
        dev.dispatch_port_state(&ndev);
        Ok(())
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        check_port(port)?;
        dev.counters.read(values);
        Ok(())
    }

    fn modify_device(dev: &Device<Self>, mask: u32, sys_image_guid: u64, _desc: &[u8]) -> Result {
        let supported = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID
            | bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC;
        if mask & !supported != 0 {
            pr_debug!("unsupported modify_device mask {:#x}\n", mask);
            return Err(code::eopnotsupp());
        }
        if mask & bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID != 0 {
            dev.sys_image_guid.store(sys_image_guid.to_be(), Relaxed);
        }
        Ok(())
    }
}
