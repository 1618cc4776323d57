// SPDX-License-Identifier: GPL-2.0

//! Network namespaces.
//!
//! C header: [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use crate::{
    bindings,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};
use core::ptr::NonNull;

/// A network namespace (`struct net`).
///
/// Reference counted with `get_net`/`put_net`: an [`ARef<Namespace>`] keeps the namespace
/// alive (see [`NetDevice::net`](super::device::NetDevice::net)).
///
/// # Invariants
///
/// `self.0` is a valid `struct net` with a non-zero reference count for the lifetime of any
/// reference to it (or the initial namespace, which lives forever).
#[repr(transparent)]
pub struct Namespace(Opaque<bindings::net>);

// SAFETY: `get_net` and `put_net` keep the namespace alive while the count is positive.
unsafe impl AlwaysRefCounted for Namespace {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the reference count is non-zero.
        unsafe { bindings::get_net(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns an increment of the reference count.
        unsafe { bindings::put_net(obj.as_ptr().cast()) };
    }
}

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

    /// Takes ownership of a reference count the caller holds (e.g. from `maybe_get_net`).
    ///
    /// Returns `None` for a null pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or a valid `struct net` on which the caller owns one reference,
    /// which moves into the returned [`ARef`].
    pub unsafe fn from_raw_owned(ptr: *mut bindings::net) -> Option<ARef<Self>> {
        let ptr = NonNull::new(ptr)?;
        // SAFETY: The caller transfers one reference to us.
        Some(unsafe { ARef::from_raw(ptr.cast()) })
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
