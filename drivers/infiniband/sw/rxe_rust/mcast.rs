// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD queue pairs receive what is sent to a multicast GID.
//!
//! A group exists while a queue pair is attached to it; its Ethernet address is in the
//! netdevice's filter for that time. Limits and errnos are the C driver's: `ENOMEM` past
//! `max_mcast_grp` groups, `max_mcast_qp_attach` queue pairs per group or
//! `max_total_mcast_qp_attach` in all; attaching twice succeeds once; detaching what is not
//! attached is `EINVAL`; a queue pair cannot be destroyed while attached (`EBUSY`).
//!
//! Receive looks groups up in softirq context, so the table is under a spinlock that never
//! waits for an allocation: a group's queue pairs are a fixed array, and the group list grows
//! outside the lock. Attach and detach, which also change the netdevice's filter, are
//! ordered by a mutex of their own.

use crate::{
    device::RxeDev,
    param,
    qp::RxeQp,
    tx::ipv4_of, //
};
use kernel::{
    alloc::KVVec,
    prelude::*, //
};

/// The Ethernet address a multicast GID maps to (`ipv6_eth_mc_map`), as the C driver maps
/// every multicast GID, IPv4-mapped ones included.
pub(crate) fn mgid_to_mac(mgid: &[u8; 16]) -> [u8; 6] {
    [0x33, 0x33, mgid[12], mgid[13], mgid[14], mgid[15]]
}

/// Returns whether `gid` is a multicast address: an IPv4-mapped one in 224.0.0.0/4, or an
/// IPv6 one in ff00::/8.
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    match ipv4_of(gid) {
        Some(addr) => addr[0] & 0xf0 == 0xe0,
        None => gid[0] == 0xff,
    }
}

/// The most queue pairs a group holds.
const GROUP_QPS: usize = param::MAX_MCAST_QP_ATTACH as usize;

/// The queue pairs attached to a group.
#[derive(Clone, Copy)]
pub(crate) struct Members {
    qpns: [u32; GROUP_QPS],
    len: usize,
}

impl Members {
    /// Returns the QP numbers.
    pub(crate) fn qpns(&self) -> &[u32] {
        self.qpns.get(..self.len).unwrap_or(&[])
    }

    /// Adds `qpn`; returns `false` if the group is full.
    fn push(&mut self, qpn: u32) -> bool {
        let Some(slot) = self.qpns.get_mut(self.len) else {
            return false;
        };
        *slot = qpn;
        self.len += 1;
        true
    }

    /// Removes `qpn`; returns `false` if it is not there.
    fn remove(&mut self, qpn: u32) -> bool {
        let Some(i) = self.qpns().iter().position(|&n| n == qpn) else {
            return false;
        };
        let last = self.len - 1;
        self.qpns.swap(i, last);
        self.len = last;
        true
    }
}

/// A multicast group and the queue pairs attached to it.
struct Group {
    mgid: [u8; 16],
    members: Members,
}

/// The device's multicast groups.
///
/// # Invariants
///
/// No group is empty, no two have the same GID; `attached` is the sum of the groups' queue
/// pairs.
pub(crate) struct McastTable {
    groups: KVVec<Group>,
    attached: usize,
}

impl McastTable {
    /// Creates an empty table.
    pub(crate) fn new() -> Self {
        Self {
            groups: KVVec::new(),
            attached: 0,
        }
    }

    fn find(&self, mgid: &[u8; 16]) -> Option<&Group> {
        self.groups.iter().find(|g| &g.mgid == mgid)
    }
}

/// Returns the queue pairs attached to the group `mgid` of `dev`, if it has that group.
///
/// Called from softirq context by receive: a linear search over the groups, which the
/// C driver's default of 8192 bounds.
pub(crate) fn members(dev: &RxeDev, mgid: &[u8; 16]) -> Option<Members> {
    dev.mcast.lock().find(mgid).map(|g| g.members)
}

/// Makes room in the table of `dev` for one more group, allocating outside its lock.
///
/// The caller holds `dev.mcast_control`, so the table does not grow meanwhile.
fn reserve_group(dev: &RxeDev) -> Result {
    let (len, capacity) = {
        let t = dev.mcast.lock();
        (t.groups.len(), t.groups.capacity())
    };
    if len < capacity {
        return Ok(());
    }
    let mut bigger = KVVec::with_capacity((capacity * 2).max(4), GFP_KERNEL)?;
    let mut t = dev.mcast.lock();
    for g in t.groups.drain_all() {
        // Cannot fail: `bigger` has room for twice the groups there were.
        let _ = bigger.push_within_capacity(g);
    }
    let old = core::mem::replace(&mut t.groups, bigger);
    drop(t);
    drop(old);
    Ok(())
}

/// Attaches `qp` to the group `mgid` of `dev`, creating the group if needed.
pub(crate) fn attach(dev: &RxeDev, qp: &RxeQp, mgid: &[u8; 16]) -> Result {
    let qpn = qp.number();
    let _control = dev.mcast_control.lock();
    let is_new = {
        let t = dev.mcast.lock();
        match t.find(mgid) {
            Some(g) if g.members.qpns().contains(&qpn) => return Ok(()),
            Some(g) if g.members.len >= GROUP_QPS => return Err(ENOMEM),
            _ if t.attached >= param::MAX_TOT_MCAST_QP_ATTACH as usize => return Err(ENOMEM),
            Some(_) => false,
            None if t.groups.len() >= param::MAX_MCAST_GRP as usize => return Err(ENOMEM),
            None => true,
        }
    };
    let mac = mgid_to_mac(mgid);
    if is_new {
        reserve_group(dev)?;
        // A new group: its address goes into the netdevice's filter first.
        dev.engine
            .with_netdev(|ndev| ndev.mc_add(&mac))
            .unwrap_or(Err(ENODEV))?;
    }
    let mut t = dev.mcast.lock();
    let added = if is_new {
        let mut members = Members {
            qpns: [0; GROUP_QPS],
            len: 0,
        };
        members.push(qpn);
        t.groups
            .push_within_capacity(Group {
                mgid: *mgid,
                members,
            })
            .is_ok()
    } else {
        t.groups
            .iter_mut()
            .find(|g| &g.mgid == mgid)
            .is_some_and(|g| g.members.push(qpn))
    };
    // INVARIANT: The queue pair went into a group, new or not, and is counted.
    if added {
        t.attached += 1;
        return Ok(());
    }
    drop(t);
    // Not reached while the control lock keeps the table as checked above.
    if is_new {
        let _ = dev.engine.with_netdev(|ndev| ndev.mc_del(&mac));
    }
    Err(ENOMEM)
}

/// Detaches `qp` from the group `mgid` of `dev`; the last queue pair takes the group along.
pub(crate) fn detach(dev: &RxeDev, qp: &RxeQp, mgid: &[u8; 16]) -> Result {
    let qpn = qp.number();
    let _control = dev.mcast_control.lock();
    let emptied = {
        let mut t = dev.mcast.lock();
        let pos = t
            .groups
            .iter()
            .position(|g| &g.mgid == mgid)
            .ok_or(EINVAL)?;
        let group = t.groups.get_mut(pos).ok_or(EINVAL)?;
        if !group.members.remove(qpn) {
            return Err(EINVAL);
        }
        let empty = group.members.len == 0;
        t.attached -= 1;
        if empty {
            // INVARIANT: No empty group stays.
            let last = t.groups.len() - 1;
            t.groups.swap(pos, last);
            t.groups.pop();
        }
        empty
    };
    if emptied {
        // The group is gone whatever the netdevice says.
        // A netdevice that unregistered took its filter along.
        if let Some(Err(e)) = dev
            .engine
            .with_netdev(|ndev| ndev.mc_del(&mgid_to_mac(mgid)))
        {
            pr_warn!("multicast address removal failed: {:?}\n", e);
        }
    }
    Ok(())
}
