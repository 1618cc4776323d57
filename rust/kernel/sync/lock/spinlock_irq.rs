// SPDX-License-Identifier: GPL-2.0

//! A kernel spinlock that also disables local interrupts while held.
//!
//! This module allows Rust code to use the kernel's `spin_lock_irqsave`: data shared with code
//! that may run in interrupt or softirq context (a completion polled from a softirq, say) must
//! be locked this way, or an interrupt on the CPU holding the lock would deadlock on it.

use crate::bindings;
use crate::ffi::c_ulong;

/// Creates a [`SpinLockIrq`] initialiser with the given name and a newly-created lock class.
///
/// It uses the name if one is given, otherwise it generates one based on the file name and line
/// number.
#[macro_export]
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sync::SpinLockIrq::new(
            $inner, $crate::optional_name!($($name)?), $crate::static_lock_class!())
    };
}
pub use new_spinlock_irq;

/// A spinlock that saves and disables local interrupts while held.
///
/// Exposes the kernel's [`spinlock_t`] through `spin_lock_irqsave()`; the saved interrupt state
/// lives in the guard and is restored when it is dropped.
///
/// # Examples
///
/// ```
/// use kernel::sync::SpinLockIrq;
///
/// fn bump(counter: &SpinLockIrq<u32>) {
///     *counter.lock() += 1;
/// }
/// ```
///
/// [`spinlock_t`]: srctree/include/linux/spinlock.h
pub type SpinLockIrq<T> = super::Lock<T, SpinLockIrqBackend>;

/// A kernel `spinlock_t` lock backend that disables local interrupts.
pub struct SpinLockIrqBackend;

/// A [`Guard`] acquired from locking a [`SpinLockIrq`].
///
/// [`Guard`]: super::Guard
pub type SpinLockIrqGuard<'a, T> = super::Guard<'a, T, SpinLockIrqBackend>;

// SAFETY: The underlying kernel `spinlock_t` object ensures mutual exclusion. `relock` uses the
// default implementation, which locks the same way and stores the new interrupt state.
unsafe impl super::Backend for SpinLockIrqBackend {
    type State = bindings::spinlock_t;
    type GuardState = c_ulong;

    #[inline]
    unsafe fn init(
        ptr: *mut Self::State,
        name: *const crate::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: The safety requirements ensure that `ptr` is valid for writes, and `name` and
        // `key` are valid for read indefinitely.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    #[inline]
    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The safety requirements of this function ensure that `ptr` points to valid
        // memory, and that it has been initialised before.
        unsafe { bindings::spin_lock_irqsave(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, guard_state: &Self::GuardState) {
        // SAFETY: The safety requirements of this function ensure that `ptr` is valid and that the
        // caller is the owner of the spinlock; `guard_state` is what locking it saved.
        unsafe { bindings::spin_unlock_irqrestore(ptr, *guard_state) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut flags: c_ulong = 0;
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use, and
        // `flags` is a valid place for the saved state.
        if unsafe { bindings::spin_trylock_irqsave(ptr, &mut flags) } {
            Some(flags)
        } else {
            None
        }
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use.
        unsafe { bindings::spin_assert_is_held(ptr) }
    }
}
