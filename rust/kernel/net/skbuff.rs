// SPDX-License-Identifier: GPL-2.0

//! Socket buffers.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::bindings;
use core::ptr::NonNull;

/// An owned socket buffer (`struct sk_buff`).
///
/// Dropping it frees the buffer (`kfree_skb`, counted as a drop).
///
/// # Invariants
///
/// `self.0` points to a valid `sk_buff` that this object owns.
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: An owned `sk_buff` can be handed to and freed from any thread.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of a socket buffer.
    ///
    /// # Safety
    ///
    /// `skb` must be a valid socket buffer whose ownership the caller transfers.
    pub unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: The caller transfers ownership of a valid buffer.
        Self(skb)
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Returns the length of the data, linear and paged.
    pub fn len(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Returns whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the length of the linear part.
    pub fn headlen(&self) -> u32 {
        // SAFETY: The buffer is valid and owned.
        unsafe { bindings::skb_headlen(self.as_raw()) }
    }

    /// Returns the device pointer of the buffer (`skb->dev`), null if none.
    ///
    /// The buffer holds no reference on its device: whoever dereferences the pointer must know
    /// the device alive by other means (e.g. [`EncapRecv::recv`] gets the device of a
    /// received buffer as a reference valid for the call).
    ///
    /// [`EncapRecv::recv`]: crate::net::udp_tunnel::EncapRecv::recv
    pub(crate) fn dev_ptr(&self) -> *mut bindings::net_device {
        // SAFETY: The buffer is valid and owned.
        unsafe {
            (*self.as_raw())
                .__bindgen_anon_1
                .__bindgen_anon_1
                .__bindgen_anon_1
                .dev
        }
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the buffer.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}
