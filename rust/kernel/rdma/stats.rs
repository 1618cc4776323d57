// SPDX-License-Identifier: GPL-2.0

//! Port counters (`struct rdma_hw_stats`), shown by `rdma statistic` and in sysfs.
//!
//! A driver names its counters once, in a static table of [`StatDesc`]; the core allocates the
//! values array from that table and asks the driver to fill it on each read (at most once per
//! lifespan, 10 ms).

use crate::{
    bindings,
    str::{
        as_char_ptr_in_const_context,
        CStr, //
    },
};

/// The name of one counter (`struct rdma_stat_desc`).
///
/// # Invariants
///
/// `name` points to a static, NUL-terminated string; `priv_` is null.
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: By the type invariant the descriptor only points to static, immutable data.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// Describes a counter named `name`.
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is static and NUL-terminated.
        Self(bindings::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }

    /// Returns the descriptors of `table` as the C array the core expects.
    pub(crate) fn as_raw(table: &'static [StatDesc]) -> *const bindings::rdma_stat_desc {
        // `StatDesc` is a transparent wrapper.
        table.as_ptr().cast()
    }
}
