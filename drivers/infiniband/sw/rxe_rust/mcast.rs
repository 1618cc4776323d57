// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD queue pairs receive what is sent to a multicast GID.
//!
//! A group exists while a queue pair is attached to it; its Ethernet address is in the
//! netdevice's filter for that time. Limits and errnos are the C driver's: `ENOMEM` past
//! `max_mcast_grp` groups, `max_mcast_qp_attach` queue pairs per group or
//! `max_total_mcast_qp_attach` in all; attaching twice succeeds once; detaching what is not
//! attached is `EINVAL`; a queue pair cannot be destroyed while attached (`EBUSY`).

use crate::{
    device::RxeDev,
    param,
    qp::RxeQp, //
};
use kernel::prelude::*;

/// The Ethernet address a multicast GID maps to (`ipv6_eth_mc_map`), as the C driver maps
/// every multicast GID, IPv4-mapped ones included.
pub(crate) fn mgid_to_mac(mgid: &[u8; 16]) -> [u8; 6] {
    [0x33, 0x33, mgid[12], mgid[13], mgid[14], mgid[15]]
}

/// A multicast group and the queue pairs attached to it.
struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// The device's multicast groups.
///
/// # Invariants
///
/// No group is empty; `attached` is the sum of the groups' queue pairs.
pub(crate) struct McastTable {
    groups: KVec<Group>,
    attached: usize,
}

impl McastTable {
    /// Creates an empty table.
    pub(crate) fn new() -> Self {
        Self {
            groups: KVec::new(),
            attached: 0,
        }
    }
}

/// Attaches `qp` to the group `mgid` of `dev`, creating the group if needed.
pub(crate) fn attach(dev: &RxeDev, qp: &RxeQp, mgid: &[u8; 16]) -> Result {
    let qpn = qp.number();
    let mut t = dev.mcast.lock();
    let pos = match t.groups.iter().position(|g| &g.mgid == mgid) {
        Some(pos) => pos,
        None => {
            if t.groups.len() >= param::MAX_MCAST_GRP as usize {
                return Err(ENOMEM);
            }
            t.groups.push(
                Group {
                    mgid: *mgid,
                    qpns: KVec::new(),
                },
                GFP_KERNEL,
            )?;
            t.groups.len() - 1
        }
    };
    let full = t.attached >= param::MAX_TOT_MCAST_QP_ATTACH as usize;
    let group = t.groups.get_mut(pos).ok_or(EINVAL)?;
    let ret = if group.qpns.contains(&qpn) {
        return Ok(());
    } else if full || group.qpns.len() >= param::MAX_MCAST_QP_ATTACH as usize {
        Err(ENOMEM)
    } else if group.qpns.is_empty() {
        // A new group: its address goes into the netdevice's filter first.
        dev.ndev
            .mc_add(&mgid_to_mac(mgid))
            .and_then(|()| group.qpns.push(qpn, GFP_KERNEL).map_err(Into::into))
    } else {
        group.qpns.push(qpn, GFP_KERNEL).map_err(Into::into)
    };
    match ret {
        Ok(()) => {
            t.attached += 1;
            Ok(())
        }
        Err(e) => {
            // INVARIANT: A group created for this attach goes again.
            if t.groups.get(pos).is_some_and(|g| g.qpns.is_empty()) {
                let _ = t.groups.remove(pos);
            }
            Err(e)
        }
    }
}

/// Detaches `qp` from the group `mgid` of `dev`; the last queue pair takes the group along.
pub(crate) fn detach(dev: &RxeDev, qp: &RxeQp, mgid: &[u8; 16]) -> Result {
    let qpn = qp.number();
    let mut t = dev.mcast.lock();
    let pos = t
        .groups
        .iter()
        .position(|g| &g.mgid == mgid)
        .ok_or(EINVAL)?;
    let group = t.groups.get_mut(pos).ok_or(EINVAL)?;
    let i = group.qpns.iter().position(|&n| n == qpn).ok_or(EINVAL)?;
    group.qpns.remove(i).map_err(|_| EINVAL)?;
    let empty = group.qpns.is_empty();
    t.attached -= 1;
    if empty {
        // INVARIANT: No empty group stays.
        let _ = t.groups.remove(pos);
        // The group is gone whatever the netdevice says.
        if let Err(e) = dev.ndev.mc_del(&mgid_to_mac(mgid)) {
            pr_warn!("multicast address removal failed: {:?}\n", e);
        }
    }
    Ok(())
}
