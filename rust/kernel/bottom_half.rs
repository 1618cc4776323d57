// SPDX-License-Identifier: GPL-2.0

//! Bottom halves (softirqs) of the current CPU.
//!
//! C header: [`include/linux/bottom_half.h`](srctree/include/linux/bottom_half.h)

use crate::bindings;
use core::marker::PhantomData;

/// Bottom halves disabled on this CPU for as long as the guard lives.
///
/// Softirqs raised meanwhile run when the last such guard on the CPU drops, in one pass: a
/// sender that transmits a batch of packets to a virtual device (a veth, whose receive is a
/// softirq on the sending CPU) has them all received together, not one at a time between its
/// transmits. Guards nest. Do not sleep while one lives, and drop it with interrupts enabled
/// (`local_bh_enable` warns otherwise, as it runs the pending softirqs): take it before an
/// interrupt-disabling lock and drop it after.
///
/// # Invariants
///
/// `local_bh_disable` was called on the CPU the guard was created on and is not yet matched
/// by its `local_bh_enable`; the guard never leaves that thread (it is neither `Send` nor
/// `Sync`), and a thread in a bottom-half-disabled section does not migrate.
///
/// # Examples
///
/// ```
/// use kernel::bottom_half::BottomHalvesDisabled;
///
/// let bh = BottomHalvesDisabled::disable();
/// // Packets sent here are received when `bh` drops.
/// drop(bh);
/// ```
pub struct BottomHalvesDisabled(PhantomData<*mut ()>);

impl BottomHalvesDisabled {
    /// Disables bottom halves on this CPU until the returned guard drops.
    #[inline]
    pub fn disable() -> Self {
        // SAFETY: `local_bh_disable` may be called in any context; the guard's drop calls
        // `local_bh_enable` on this same CPU, as the guard cannot leave this thread.
        unsafe { bindings::local_bh_disable() };
        // INVARIANT: Disabled just above, on this thread's CPU.
        Self(PhantomData)
    }
}

impl Drop for BottomHalvesDisabled {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `disable` disabled bottom halves on this CPU and
        // nothing has enabled them for it since.
        unsafe { bindings::local_bh_enable() };
    }
}
