// SPDX-License-Identifier: GPL-2.0

//! IP routes and sending IP datagrams a driver built itself.
//!
//! C headers: [`include/net/route.h`](srctree/include/net/route.h),
//! [`include/net/ip6_route.h`](srctree/include/net/ip6_route.h),
//! [`include/net/dst.h`](srctree/include/net/dst.h)

use crate::{
    bindings,
    error::from_err_ptr,
    net::{
        namespace::Namespace,
        skbuff::TxSkb, //
    },
    prelude::*,
};
use core::ptr::NonNull;

/// A route: where a datagram goes and through which device (`struct dst_entry`).
///
/// # Invariants
///
/// `ptr` points to a valid `dst_entry` on which this object owns a reference; `cookie` is the
/// value its `check` operation compares (IPv6: `rt6_get_cookie`; IPv4: 0).
pub struct Dst {
    ptr: NonNull<bindings::dst_entry>,
    cookie: u32,
}

// SAFETY: A held `dst_entry` reference can be used and released from any thread.
unsafe impl Send for Dst {}
// SAFETY: The `&self` methods only read the entry or take another reference.
unsafe impl Sync for Dst {}

impl Dst {
    /// Looks up the IPv4 route from `saddr` to `daddr` out of device `oif` in `net`, for UDP.
    pub fn output_v4(net: &Namespace, oif: i32, saddr: [u8; 4], daddr: [u8; 4]) -> Result<Self> {
        let mut fl: bindings::flowi4 = pin_init::zeroed();
        fl.__fl_common.flowic_oif = oif;
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = u32::from_ne_bytes(saddr);
        fl.daddr = u32::from_ne_bytes(daddr);
        // SAFETY: `net` is valid and `fl` is an initialised flow for the call; a null socket is
        // allowed.
        let rt = from_err_ptr(unsafe {
            bindings::ip_route_output_flow(net.as_raw(), &mut fl, core::ptr::null())
        })?;
        let rt = NonNull::new(rt).ok_or(EHOSTUNREACH)?;
        // INVARIANT: The lookup returned a route with a reference we now own; its `dst_entry`
        // is its first member. IPv4 routes ignore the cookie.
        Ok(Self {
            ptr: rt.cast(),
            cookie: 0,
        })
    }

    /// Looks up the IPv6 route from `saddr` to `daddr` out of device `oif` in `net`, for UDP.
    pub fn output_v6(
        net: &Namespace,
        oif: i32,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        flow_label: u32,
    ) -> Result<Self> {
        let mut fl: bindings::flowi6 = pin_init::zeroed();
        fl.__fl_common.flowic_oif = oif;
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr.in6_u.u6_addr8 = *saddr;
        fl.daddr.in6_u.u6_addr8 = *daddr;
        fl.flowlabel = (flow_label & 0xf_ffff).to_be();
        // SAFETY: `net` is valid and `fl` is an initialised flow for the call; a null socket
        // and final destination are allowed. A route with an error is released and returned
        // as an error pointer.
        let dst = from_err_ptr(unsafe {
            bindings::ip6_dst_lookup_flow(
                net.as_raw(),
                core::ptr::null(),
                &mut fl,
                core::ptr::null(),
            )
        })?;
        let dst = NonNull::new(dst).ok_or(EHOSTUNREACH)?;
        // SAFETY: `dst` is a valid IPv6 route (an `rt6_info`) we hold a reference on.
        let cookie = unsafe { bindings::dst_rt6_cookie(dst.as_ptr()) };
        // INVARIANT: The lookup returned a route with a reference we now own.
        Ok(Self { ptr: dst, cookie })
    }

    /// Returns the path MTU of the route.
    pub fn mtu(&self) -> u32 {
        // SAFETY: The entry is valid.
        unsafe { bindings::dst_mtu(self.ptr.as_ptr()) }
    }

    /// Returns whether the route still holds (`dst_check`): a route that changed, or whose
    /// device went, must be looked up again.
    pub fn is_valid(&self) -> bool {
        // SAFETY: The entry is valid and we hold a reference; `cookie` is its own.
        !unsafe { bindings::dst_check(self.ptr.as_ptr(), self.cookie) }.is_null()
    }

    /// Runs `f` with the namespace of the route's device, under the RCU read lock that keeps it
    /// alive.
    fn with_net<R>(&self, f: impl FnOnce(*mut bindings::net) -> R) -> R {
        let _guard = crate::sync::rcu::read_lock();
        // SAFETY: The entry is valid; under the RCU read lock its device and that device's
        // namespace stay valid (a namespace is freed after a grace period).
        let net = unsafe { bindings::dst_dev_net_rcu(self.ptr.as_ptr()) };
        f(net)
    }

    /// Sends `skb`, whose network header holds a complete IPv4 or IPv6 header followed by the
    /// rest of the datagram, along this route (`ip_local_out` or `ip6_local_out` in the
    /// namespace of the route's device).
    ///
    /// The stack sets the IP lengths and the IPv4 checksum. `Ok` means the datagram was queued
    /// (perhaps with a congestion notice); `ENOBUFS` that it was dropped locally (a full
    /// queue), another error that it could not be sent. The buffer is consumed in every case.
    pub fn send(&self, mut skb: TxSkb) -> Result {
        let v6 = match skb.network_bytes_mut() {
            Some(h) if h.len() >= 20 && h[0] >> 4 == 4 => {
                let ihl = usize::from(h[0] & 0xf) * 4;
                if ihl < 20 || ihl > h.len() {
                    return Err(EINVAL);
                }
                false
            }
            Some(h) if h.len() >= 40 && h[0] >> 4 == 6 => true,
            _ => return Err(EINVAL),
        };
        let raw = skb.as_raw();
        // The stack owns the buffer from here on, whatever the result.
        core::mem::forget(skb);
        let ret = self.with_net(|net| {
            // SAFETY: `raw` is a valid linear buffer we owned, with a complete IP header at its
            // network header (checked above), and with no route or socket: `skb_dst_set` gives
            // it a reference of its own on our entry, and the output functions consume it. A new
            // buffer's control block is zeroed (`__alloc_skb`), as `IPCB`/`IP6CB` must be.
            // `net` is valid for the closure (`with_net`).
            unsafe {
                bindings::skb_dst_set(raw, bindings::dst_clone(self.ptr.as_ptr()));
                if v6 {
                    bindings::ip6_local_out(net, core::ptr::null_mut(), raw)
                } else {
                    bindings::ip_local_out(net, core::ptr::null_mut(), raw)
                }
            }
        });
        match ret {
            0 => Ok(()),
            // Queued, with a congestion notice.
            r if r == bindings::NET_XMIT_CN as i32 => Ok(()),
            r if r > 0 => Err(ENOBUFS),
            r => Err(Error::from_errno(r)),
        }
    }

    /// Writes an IPv4 identification into the IPv4 header at the network header of `skb`
    /// (`__ip_select_ident`), as the stack would for a datagram on this route.
    ///
    /// A driver that covers the identification with a checksum of its own (the RoCEv2 ICRC)
    /// calls this before computing it. Fails with `EINVAL` if the network header does not hold
    /// an IPv4 header.
    pub fn select_ipv4_ident(&self, skb: &mut TxSkb) -> Result {
        let h = skb.network_bytes_mut().ok_or(EINVAL)?;
        if h.len() < 20 || h[0] >> 4 != 4 {
            return Err(EINVAL);
        }
        self.with_net(|net| {
            // SAFETY: `h` holds at least a whole IPv4 header (checked) that we may write: the
            // function writes only its `id`, and reads nothing past the header. `net` is valid
            // for the closure (`with_net`).
            unsafe { bindings::__ip_select_ident(net, h.as_mut_ptr().cast(), 1) }
        });
        Ok(())
    }
}

impl Clone for Dst {
    fn clone(&self) -> Self {
        // SAFETY: The entry is valid and we hold a reference, so taking another is allowed.
        unsafe { bindings::dst_clone(self.ptr.as_ptr()) };
        // INVARIANT: We took a reference for the new object.
        Self {
            ptr: self.ptr,
            cookie: self.cookie,
        }
    }
}

impl Drop for Dst {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own a reference.
        unsafe { bindings::dst_release(self.ptr.as_ptr()) };
    }
}
