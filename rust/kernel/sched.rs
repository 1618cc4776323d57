// SPDX-License-Identifier: GPL-2.0

//! The scheduler's view of the current CPU.
//!
//! C header: [`include/linux/sched/stat.h`](srctree/include/linux/sched/stat.h)

use crate::bindings;

/// Returns whether the current task is the only one runnable on its CPU
/// (`single_task_running`).
///
/// A task that polls for an event rather than sleeping (KVM's halt polling does) stops once
/// this is false: another task wants the CPU. The answer may be stale as soon as it is
/// returned, unless preemption is off.
#[inline]
pub fn single_task_running() -> bool {
    // SAFETY: Reads the current CPU's run queue count; callable from any context.
    unsafe { bindings::single_task_running() }
}
