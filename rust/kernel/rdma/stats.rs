// SPDX-License-Identifier: GPL-2.0

//! Port counters (`struct rdma_hw_stats`), shown by `rdma statistic` and in sysfs.
//!
//! A driver names its counters once, in a static table of [`StatDesc`]; the core allocates the
//! values array from that table and asks the driver to fill it on each read (at most once per
//! lifespan, 10 ms).
//!
//! An optional counter ([`StatDesc::optional`]) comes after the regular ones; it is counted all
//! the time but shown only once a user enables it (`rdma statistic set link DEV/PORT optional-counters NAME,...`): sysfs and the
//! default `rdma statistic show` keep the counters every driver of the kind has.

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

    /// Describes an optional counter named `name`, shown only once a user enables it.
    pub const fn optional(name: &'static CStr) -> Self {
        // INVARIANT: `name` is static and NUL-terminated.
        Self(bindings::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: bindings::ib_stat_flag_IB_STAT_FLAG_OPTIONAL,
            priv_: core::ptr::null(),
        })
    }

    /// Returns whether the counter is optional.
    pub(crate) const fn is_optional(&self) -> bool {
        self.0.flags & bindings::ib_stat_flag_IB_STAT_FLAG_OPTIONAL != 0
    }

    /// Returns whether some counter of `table` is optional.
    pub(crate) const fn any_optional(table: &[StatDesc]) -> bool {
        let mut i = 0;
        while i < table.len() {
            if table[i].is_optional() {
                return true;
            }
            i += 1;
        }
        false
    }

    /// Returns whether no regular counter of `table` comes after an optional one.
    pub(crate) const fn optional_last(table: &[StatDesc]) -> bool {
        let mut i = 1;
        while i < table.len() {
            if table[i - 1].is_optional() && !table[i].is_optional() {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Returns the descriptors of `table` as the C array the core expects.
    pub(crate) fn as_raw(table: &'static [StatDesc]) -> *const bindings::rdma_stat_desc {
        // `StatDesc` is a transparent wrapper.
        table.as_ptr().cast()
    }
}
