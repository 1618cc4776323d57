// SPDX-License-Identifier: GPL-2.0

//! A kernel spinlock that also disables local interrupts while held.
//!
//! This module allows Rust code to lock a `spinlock_t` with interrupts off: data shared with code
//! that may run in interrupt or softirq context (a completion polled from a softirq, say) must
//! be locked this way, or an interrupt on the CPU holding the lock would deadlock on it.

use crate::bindings;

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

/// A spinlock that disables local interrupts while held.
///
/// Exposes the kernel's [`spinlock_t`] with a counted interrupt disable (the shape of
/// `spin_lock_irq_disable()` upstream): locking disables interrupts on the CPU and counts the
/// locks held there; unlocking re-enables them, as they were before the first lock, only when
/// the count returns to zero. The guard keeps no interrupt state, so guards may be dropped in
/// any order: interrupts stay off while any lock of this type is held on the CPU. (With
/// `spin_lock_irqsave()`, whose flags a guard would keep, dropping the outer guard first would
/// re-enable interrupts while the inner lock is still held.)
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
/// Guards released out of order keep interrupts off until the last one goes:
///
/// ```
/// use kernel::sync::{lock::spinlock_irq::irqs_disabled, SpinLockIrq};
///
/// fn out_of_order(a: &SpinLockIrq<u32>, b: &SpinLockIrq<u32>) {
///     let ga = a.lock();
///     let gb = b.lock();
///     drop(ga);
///     assert!(irqs_disabled());
///     drop(gb);
/// }
/// ```
///
/// [`spinlock_t`]: srctree/include/linux/spinlock.h
pub type SpinLockIrq<T> = super::Lock<T, SpinLockIrqBackend>;

/// A kernel `spinlock_t` lock backend that disables local interrupts, counted per CPU.
pub struct SpinLockIrqBackend;

/// A [`Guard`] acquired from locking a [`SpinLockIrq`].
///
/// [`Guard`]: super::Guard
pub type SpinLockIrqGuard<'a, T> = super::Guard<'a, T, SpinLockIrqBackend>;

/// Returns whether interrupts are disabled on the current CPU.
pub fn irqs_disabled() -> bool {
    // SAFETY: Reads the CPU's interrupt state; no requirement.
    unsafe { bindings::irqs_disabled() }
}

/// Returns how many [`SpinLockIrq`]s the current CPU holds (0 on `PREEMPT_RT`, where they do
/// not disable interrupts).
///
/// Meaningful only while the caller cannot migrate (interrupts off, which holding one ensures).
pub fn irq_disable_count() -> usize {
    // SAFETY: Reads a per-CPU counter; no requirement.
    unsafe { bindings::local_interrupt_disable_count() as usize }
}

// SAFETY: The underlying kernel `spinlock_t` object ensures mutual exclusion. The interrupt
// state is kept per CPU by the counted disable, not in the guard, so `relock` (the default:
// `lock` again) needs nothing restored, and unlocks in any order leave interrupts off while
// any such lock is held on the CPU.
unsafe impl super::Backend for SpinLockIrqBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

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
        unsafe { bindings::spin_lock_irq_disable(ptr) }
    }

    #[inline]
    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The safety requirements of this function ensure that `ptr` is valid and that the
        // caller is the owner of the spinlock, so it took one count of the interrupt disable.
        unsafe { bindings::spin_unlock_irq_enable(ptr) }
    }

    #[inline]
    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use; on
        // failure the helper gives the interrupt disable count back.
        if unsafe { bindings::spin_trylock_irq_disable(ptr) } {
            Some(())
        } else {
            None
        }
    }

    #[inline]
    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // Without lockdep the assertion is empty: no call into the C helper for it (every
        // guard made asks), since the helpers are not inlined into modules.
        #[cfg(CONFIG_LOCKDEP)]
        {
            // SAFETY: The `ptr` pointer is guaranteed to be valid and initialized before use.
            unsafe { bindings::spin_assert_is_held(ptr) }
        }
        #[cfg(not(CONFIG_LOCKDEP))]
        let _ = ptr;
    }
}

#[cfg(CONFIG_KUNIT = "y")]
#[macros::kunit_tests(rust_kernel_spinlock_irq)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn out_of_order_release_keeps_interrupts_off() -> Result {
        let a = KBox::pin_init(new_spinlock_irq!(0u32), GFP_KERNEL)?;
        let b = KBox::pin_init(new_spinlock_irq!(0u32), GFP_KERNEL)?;
        let before = irqs_disabled();
        let ga = a.lock();
        let gb = b.lock();
        // The outer guard goes first: the inner lock is still held, interrupts must stay off.
        drop(ga);
        let still_off = irqs_disabled() || cfg!(CONFIG_PREEMPT_RT);
        drop(gb);
        assert!(still_off);
        assert_eq!(irqs_disabled(), before);
        Ok(())
    }

    #[test]
    fn nested_locks_count() -> Result {
        let a = KBox::pin_init(new_spinlock_irq!(0u32), GFP_KERNEL)?;
        let b = KBox::pin_init(new_spinlock_irq!(0u32), GFP_KERNEL)?;
        let base = irq_disable_count();
        let ga = a.lock();
        let gb = b.lock();
        let two = irq_disable_count();
        drop(gb);
        let one = irq_disable_count();
        drop(ga);
        if !cfg!(CONFIG_PREEMPT_RT) {
            assert_eq!(two, base + 2);
            assert_eq!(one, base + 1);
        }
        assert_eq!(irq_disable_count(), base);
        // A failed try_lock gives its count back.
        let ga = a.lock();
        let failed = a.try_lock().is_none();
        let count = irq_disable_count();
        drop(ga);
        assert!(failed);
        if !cfg!(CONFIG_PREEMPT_RT) {
            assert_eq!(count, base + 1);
        }
        Ok(())
    }
}
