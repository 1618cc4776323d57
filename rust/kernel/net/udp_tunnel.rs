// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets: kernel UDP sockets whose datagrams go to an encapsulation handler.
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h)

use crate::{
    bindings,
    error::to_result,
    net::{
        device::NetDevice,
        namespace::{
            Namespace,
            NamespaceId, //
        },
        skbuff::SkBuff, //
    },
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// The receive handler of a UDP tunnel socket.
pub trait EncapRecv: 'static {
    /// Handles one datagram; the UDP header has not been pulled.
    ///
    /// Called in softirq context. The handler owns `skb`; `dev` is the device it arrived on,
    /// valid for this call only (the buffer holds no reference on it): take a reference
    /// ([`ARef::from`](crate::sync::aref::ARef)) to keep it.
    fn recv(skb: SkBuff, dev: Option<&NetDevice>);
}

/// An address family for a tunnel socket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Family {
    /// IPv4.
    Ipv4,
    /// IPv6 only (`IPV6_V6ONLY`).
    Ipv6,
}

/// A kernel UDP socket bound to a local port, whose datagrams go to `R::recv`.
///
/// # Invariants
///
/// `sock` is a socket created by `udp_sock_create` and set up as a tunnel, owned by `self`.
pub struct UdpTunnelSocket<R: EncapRecv> {
    sock: NonNull<bindings::socket>,
    _p: PhantomData<R>,
}

// SAFETY: The socket can be released from any thread.
unsafe impl<R: EncapRecv> Send for UdpTunnelSocket<R> {}
// SAFETY: No `&self` method touches the socket.
unsafe impl<R: EncapRecv> Sync for UdpTunnelSocket<R> {}

impl<R: EncapRecv> UdpTunnelSocket<R> {
    /// Creates a socket in `net` bound to the wildcard address and `port`.
    pub fn new(net: &Namespace, family: Family, port: u16) -> Result<Self> {
        let mut cfg: bindings::udp_port_cfg = pin_init::zeroed();
        cfg.local_udp_port = port.to_be();
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        match family {
            Family::Ipv4 => {
                cfg.family = bindings::AF_INET as u8;
                // SAFETY: `net` is valid, `cfg` and `sock` are valid for the call.
                to_result(unsafe {
                    bindings::udp_sock_create4(net.as_raw(), &mut cfg, &mut sock)
                })?;
            }
            Family::Ipv6 => {
                cfg.family = bindings::AF_INET6 as u8;
                cfg.set_ipv6_v6only(1);
                // SAFETY: `net` is valid, `cfg` and `sock` are valid for the call.
                to_result(unsafe {
                    bindings::udp_sock_create6(net.as_raw(), &mut cfg, &mut sock)
                })?;
            }
        }
        let sock = NonNull::new(sock).ok_or(ENOMEM)?;

        let mut tnl: bindings::udp_tunnel_sock_cfg = pin_init::zeroed();
        // Any non-zero type makes UDP hand datagrams to `encap_rcv`.
        tnl.encap_type = 1;
        tnl.encap_rcv = Some(Self::encap_rcv);
        // SAFETY: `sock` was just created in `net`; `tnl` is valid for the call.
        unsafe { bindings::setup_udp_tunnel_sock(net.as_raw(), (*sock.as_ptr()).sk, &mut tnl) };
        // INVARIANT: The socket is created and set up as a tunnel.
        Ok(Self {
            sock,
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by UDP only, as `encap_rcv` of a tunnel socket, with a buffer it hands over.
    unsafe extern "C" fn encap_rcv(_sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
        if let Some(skb) = NonNull::new(skb) {
            // SAFETY: Returning 0 tells UDP the handler consumed the buffer: it is ours. UDP
            // hands over a buffer it received, trimmed to the UDP length, whose bytes (linear
            // from the network header on, and paged) all came from the device or the sender.
            let skb = unsafe { SkBuff::from_raw(skb) };
            let dev = skb.dev_ptr();
            let dev = if dev.is_null() {
                None
            } else {
                // SAFETY: UDP calls `encap_rcv` on the receive path of the buffer's device,
                // inside the RCU read-side section of that path (`__netif_receive_skb` and
                // `ip_local_deliver` hold `rcu_read_lock`). Unregistering a device waits for a
                // grace period (`synchronize_net`) after purging its backlog, before its last
                // reference can go: the device stays valid, with a non-zero count, for this
                // call, which is all the reference handed to `R::recv` may live (its lifetime is
                // the call's).
                let dev = unsafe { NetDevice::from_raw(dev) };
                Some(dev)
            };
            R::recv(skb, dev);
        }
        0
    }
}

impl<R: EncapRecv> Drop for UdpTunnelSocket<R> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the socket. This waits for readers (RCU).
        unsafe { bindings::udp_tunnel_sock_release((*self.sock.as_ptr()).sk) };
    }
}

struct NetSockets<R: EncapRecv> {
    net: NamespaceId,
    users: usize,
    _v4: UdpTunnelSocket<R>,
    _v6: Option<UdpTunnelSocket<R>>,
}

/// Tunnel sockets on one UDP port, one IPv4 and one IPv6 socket per network namespace, shared
/// by reference count.
///
/// [`SharedSockets::get`] opens the sockets of a namespace at its first user; the last
/// [`SharedSocketsRef`] to go closes them. The sockets hold no reference on the namespace: the
/// users must drop their references before the namespace goes, as RoCE links do when their
/// netdevice is unregistered (which happens before a namespace is torn down).
#[pin_data]
pub struct SharedSockets<R: EncapRecv> {
    port: u16,
    #[pin]
    nets: Mutex<KVec<NetSockets<R>>>,
}

impl<R: EncapRecv> SharedSockets<R> {
    /// Creates an empty set of sockets for `port`.
    pub fn new(port: u16) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                port,
                nets <- crate::new_mutex!(KVec::new()),
            }),
            GFP_KERNEL,
        )
    }

    /// Returns the number of namespaces that have sockets open.
    pub fn open_namespaces(&self) -> usize {
        self.nets.lock().len()
    }

    /// Takes a reference on the sockets of `net`, opening them if it is the first.
    ///
    /// A namespace without IPv6 gets only the IPv4 socket.
    pub fn get(self: &Arc<Self>, net: &Namespace) -> Result<SharedSocketsRef<R>> {
        let id = net.id();
        let mut nets = self.nets.lock();
        if let Some(n) = nets.iter_mut().find(|n| n.net == id) {
            n.users += 1;
        } else {
            let v4 = UdpTunnelSocket::new(net, Family::Ipv4, self.port)?;
            let v6 = match UdpTunnelSocket::new(net, Family::Ipv6, self.port) {
                Ok(s) => Some(s),
                Err(e) if e.to_errno() == -(bindings::EAFNOSUPPORT as i32) => None,
                Err(e) => return Err(e),
            };
            nets.push(
                NetSockets {
                    net: id,
                    users: 1,
                    _v4: v4,
                    _v6: v6,
                },
                GFP_KERNEL,
            )?;
        }
        Ok(SharedSocketsRef {
            owner: self.clone(),
            net: id,
        })
    }
}

/// A reference on the sockets of one namespace; see [`SharedSockets`].
pub struct SharedSocketsRef<R: EncapRecv> {
    owner: Arc<SharedSockets<R>>,
    net: NamespaceId,
}

impl<R: EncapRecv> Drop for SharedSocketsRef<R> {
    fn drop(&mut self) {
        let mut nets = self.owner.nets.lock();
        if let Some(i) = nets.iter().position(|n| n.net == self.net) {
            if let Some(n) = nets.get_mut(i) {
                n.users -= 1;
                if n.users == 0 {
                    // Closing the sockets may sleep (`sock_release`); fine under this mutex.
                    drop(nets.remove(i));
                }
            }
        }
    }
}
