// SPDX-License-Identifier: GPL-2.0

#include <linux/percpu.h>
#include <linux/spinlock.h>

/*
 * A counted interrupt disable for Rust's SpinLockIrq, the shape of the
 * local_interrupt_disable()/spin_lock_irq_disable() series for upstream Rust:
 * the first disable on a CPU saves the interrupt state, nested ones only
 * count, and the last enable restores the saved state. Guards can then be
 * released in any order: interrupts stay off until every lock taken this way
 * on the CPU is released.
 *
 * The count is per CPU and only changes with interrupts off, so no migration
 * or interrupt handler sees it half-updated: a handler that runs when the
 * count is 0 brings it back to 0 before it returns, and none runs while it is
 * not.
 */

#ifdef CONFIG_RUST_INLINE_HELPERS
/*
 * Inlined helpers are copied into each Rust crate, which would give each
 * crate its own count: the state must live in one place.
 */
#error "SpinLockIrq's counted interrupt disable needs out-of-line Rust helpers"
#endif

#ifndef CONFIG_PREEMPT_RT

struct rust_interrupt_disable_state {
	unsigned long flags;
	unsigned long count;
};

/* Not static: the helpers are inline functions with external linkage. */
DECLARE_PER_CPU(struct rust_interrupt_disable_state,
		rust_interrupt_disable_state);
DEFINE_PER_CPU(struct rust_interrupt_disable_state,
	       rust_interrupt_disable_state);

__rust_helper void rust_helper_local_interrupt_disable(void)
{
	unsigned long flags;

	local_irq_save(flags);
	if (raw_cpu_inc_return(rust_interrupt_disable_state.count) == 1)
		raw_cpu_write(rust_interrupt_disable_state.flags, flags);
}

__rust_helper void rust_helper_local_interrupt_enable(void)
{
	lockdep_assert_irqs_disabled();
	if (WARN_ON_ONCE(!raw_cpu_read(rust_interrupt_disable_state.count)))
		return;
	if (raw_cpu_dec_return(rust_interrupt_disable_state.count) == 0)
		local_irq_restore(raw_cpu_read(rust_interrupt_disable_state.flags));
}

__rust_helper unsigned long rust_helper_local_interrupt_disable_count(void)
{
	return raw_cpu_read(rust_interrupt_disable_state.count);
}

__rust_helper void rust_helper_spin_lock_irq_disable(spinlock_t *lock)
{
	rust_helper_local_interrupt_disable();
	spin_lock(lock);
}

__rust_helper void rust_helper_spin_unlock_irq_enable(spinlock_t *lock)
{
	spin_unlock(lock);
	rust_helper_local_interrupt_enable();
}

__rust_helper bool rust_helper_spin_trylock_irq_disable(spinlock_t *lock)
{
	rust_helper_local_interrupt_disable();
	if (spin_trylock(lock))
		return true;
	rust_helper_local_interrupt_enable();
	return false;
}

#else /* CONFIG_PREEMPT_RT */

/*
 * On PREEMPT_RT a spinlock_t sleeps and spin_lock_irqsave() leaves interrupts
 * on: there is nothing to count.
 */

__rust_helper unsigned long rust_helper_local_interrupt_disable_count(void)
{
	return 0;
}

__rust_helper void rust_helper_spin_lock_irq_disable(spinlock_t *lock)
{
	spin_lock(lock);
}

__rust_helper void rust_helper_spin_unlock_irq_enable(spinlock_t *lock)
{
	spin_unlock(lock);
}

__rust_helper bool rust_helper_spin_trylock_irq_disable(spinlock_t *lock)
{
	return spin_trylock(lock);
}

#endif /* CONFIG_PREEMPT_RT */

__rust_helper bool rust_helper_irqs_disabled(void)
{
	return irqs_disabled();
}
