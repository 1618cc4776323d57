// SPDX-License-Identifier: GPL-2.0

//! Network namespaces.
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use crate::{
    bindings,
    types::Opaque, //
};

/// A network namespace (`struct net`).
///
/// Only borrowed here: a `&Namespace` is valid as long as the object it was
/// reached from (for example a [`NetDevice`](super::device::NetDevice)) is.
///
/// # Invariants
///
/// `self.0` is a valid `struct net` for the lifetime of any reference to it.
#[repr(transparent)]
pub struct Namespace(Opaque<bindings::net>);

// SAFETY: `struct net` is designed to be used from any thread.
unsafe impl Send for Namespace {}
// SAFETY: `struct net` is designed to be used from any thread.
unsafe impl Sync for Namespace {}

impl Namespace {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct net` that stays valid for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: `Namespace` is a transparent wrapper of `struct net`; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// Returns an identity for this namespace, usable as a key while it lives.
    ///
    /// It holds no reference: two namespaces alive at the same time have different ids, but an
    /// id can be reused after its namespace is freed.
    pub fn id(&self) -> NamespaceId {
        NamespaceId(self.as_raw() as usize)
    }

    /// Returns the initial network namespace.
    pub fn init_ns() -> &'static Self {
        // SAFETY: `init_net` is a static that lives forever.
        unsafe { Self::from_raw(&raw mut bindings::init_net) }
    }
}

/// The identity of a live network namespace, see [`Namespace::id`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NamespaceId(usize);
