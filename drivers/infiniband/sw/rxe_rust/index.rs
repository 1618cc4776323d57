// SPDX-License-Identifier: GPL-2.0

//! Numbered objects: QP numbers, address handle numbers, memory key indices.
//!
//! A table hands out numbers in a fixed range, cyclically (a freed number is not reused
//! right away), and maps each number to what the data path needs to find by it.

use core::sync::atomic::{
    AtomicU32,
    Ordering::Relaxed, //
};
use kernel::{
    prelude::*,
    sync::Arc,
    xarray::{
        AllocKind,
        XArray, //
    },
};

/// Numbers in `min..=max`, each mapped to an `Arc<T>`.
#[pin_data]
pub(crate) struct IndexTable<T: Send + Sync + 'static> {
    #[pin]
    xa: XArray<Arc<T>>,
    next: AtomicU32,
    min: u32,
    max: u32,
}

impl<T: Send + Sync + 'static> IndexTable<T> {
    /// Creates an empty table of numbers in `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                xa <- XArray::new(AllocKind::Alloc),
                next: AtomicU32::new(min),
                min,
                max,
            }),
            GFP_KERNEL,
        )
    }

    /// Maps the next free number to `value`; fails with `EINVAL` when all are taken.
    pub(crate) fn insert(
        self: &Arc<Self>,
        value: Arc<T>,
        gfp: kernel::alloc::Flags,
    ) -> Result<Index<T>> {
        let mut xa = self.xa.lock();
        // The hint is only a starting point: a stale one just searches a little longer.
        let mut next = self.next.load(Relaxed);
        let n = xa
            .alloc_cyclic(self.min, self.max, &mut next, value, gfp)
            .map_err(|e| if e.error == EBUSY { EINVAL } else { e.error })?;
        self.next.store(next, Relaxed);
        Ok(Index {
            table: self.clone(),
            n,
        })
    }

    /// Returns what number `n` maps to, if anything.
    ///
    /// Drop the result outside spinlocks: the last reference may free memory that sleeps.
    pub(crate) fn get(&self, n: u32) -> Option<Arc<T>> {
        let xa = self.xa.lock();
        xa.get(n as usize).map(|v| v.into())
    }

    /// Maps the fixed number `n` (outside the cyclic range, e.g. QP1) to `value`.
    pub(crate) fn insert_at(self: &Arc<Self>, n: u32, value: Arc<T>) -> Result<Index<T>> {
        let mut xa = self.xa.lock();
        if xa.get(n as usize).is_some() {
            return Err(EINVAL);
        }
        xa.store(n as usize, value, GFP_KERNEL)
            .map_err(|e| e.error)?;
        Ok(Index {
            table: self.clone(),
            n,
        })
    }
}

/// A number taken from an [`IndexTable`]; dropping it frees the number.
pub(crate) struct Index<T: Send + Sync + 'static> {
    table: Arc<IndexTable<T>>,
    n: u32,
}

impl<T: Send + Sync + 'static> Index<T> {
    /// Returns the number.
    pub(crate) fn get(&self) -> u32 {
        self.n
    }
}

impl<T: Send + Sync + 'static> Drop for Index<T> {
    fn drop(&mut self) {
        // The value is dropped after the lock: it may free rings, which may sleep.
        let value = self.table.xa.lock().remove(self.n as usize);
        drop(value);
    }
}
