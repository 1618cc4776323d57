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
    alloc::Flags,
    prelude::*,
    sync::{
        rcu,
        Arc,
        ArcBorrow, //
    },
    xarray::{
        AllocKind,
        RcuXArray,
        StoreError,
        XArray, //
    },
};

/// Where a table keeps its entries: an [`XArray`], or an [`RcuXArray`] for tables read in
/// softirq.
pub(crate) trait Slots<T: Send + Sync + 'static>: Send + Sync + Sized {
    /// Creates an empty array.
    fn new() -> impl PinInit<Self>;
    /// Returns a reference to the entry at `n`.
    fn get(&self, n: usize) -> Option<Arc<T>>;
    /// Stores `value` at a free index in `min..=max` after `*next`.
    fn alloc_cyclic(
        &self,
        min: u32,
        max: u32,
        next: &mut u32,
        value: Arc<T>,
        gfp: Flags,
    ) -> Result<u32, StoreError<Arc<T>>>;
    /// Stores `value` at the free index `n`.
    fn insert(&self, n: usize, value: Arc<T>) -> Result;
    /// Removes the entry at `n`.
    fn remove(&self, n: usize) -> Option<Arc<T>>;
    /// Removes the entry at `n` and drops it once no reader can hold it; process context.
    fn remove_deferred(&self, n: usize) {
        drop(self.remove(n));
    }
}

impl<T: Send + Sync + 'static> Slots<T> for XArray<Arc<T>> {
    fn new() -> impl PinInit<Self> {
        XArray::new(AllocKind::Alloc)
    }

    fn get(&self, n: usize) -> Option<Arc<T>> {
        self.lock().get(n).map(|v| v.into())
    }

    fn alloc_cyclic(
        &self,
        min: u32,
        max: u32,
        next: &mut u32,
        value: Arc<T>,
        gfp: Flags,
    ) -> Result<u32, StoreError<Arc<T>>> {
        self.lock().alloc_cyclic(min, max, next, value, gfp)
    }

    fn insert(&self, n: usize, value: Arc<T>) -> Result {
        let mut xa = self.lock();
        if xa.get(n).is_some() {
            return Err(EINVAL);
        }
        xa.store(n, value, GFP_KERNEL).map_err(|e| e.error)?;
        Ok(())
    }

    fn remove(&self, n: usize) -> Option<Arc<T>> {
        self.lock().remove(n)
    }
}

impl<T: Send + Sync + 'static> Slots<T> for RcuXArray<Arc<T>> {
    fn new() -> impl PinInit<Self> {
        kernel::new_rcu_xarray!(AllocKind::Alloc)
    }

    fn get(&self, n: usize) -> Option<Arc<T>> {
        self.lock().get(n).map(|v| v.into())
    }

    fn alloc_cyclic(
        &self,
        min: u32,
        max: u32,
        next: &mut u32,
        value: Arc<T>,
        gfp: Flags,
    ) -> Result<u32, StoreError<Arc<T>>> {
        self.lock().alloc_cyclic(min, max, next, value, gfp)
    }

    fn insert(&self, n: usize, value: Arc<T>) -> Result {
        self.lock().insert(n, value, GFP_KERNEL).map_err(|e| {
            if e.error == EBUSY {
                EINVAL
            } else {
                e.error
            }
        })
    }

    /// Waits for an RCU grace period: process context only.
    fn remove(&self, n: usize) -> Option<Arc<T>> {
        RcuXArray::remove(self, n)
    }

    /// Does not wait: the entry is dropped by a later removal once a grace period has passed.
    fn remove_deferred(&self, n: usize) {
        RcuXArray::remove_deferred(self, n);
    }
}

/// Numbers in `min..=max`, each mapped to an `Arc<T>`.
#[pin_data]
pub(crate) struct IndexTable<T: Send + Sync + 'static, S: Slots<T> = XArray<Arc<T>>> {
    #[pin]
    xa: S,
    next: AtomicU32,
    min: u32,
    max: u32,
    _entries: core::marker::PhantomData<T>,
}

impl<T: Send + Sync + 'static, S: Slots<T>> IndexTable<T, S> {
    /// Creates an empty table of numbers in `min..=max`.
    pub(crate) fn new(min: u32, max: u32) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                xa <- S::new(),
                next: AtomicU32::new(min),
                min,
                max,
                _entries: core::marker::PhantomData,
            }),
            GFP_KERNEL,
        )
    }

    /// Maps the next free number to `value`; fails with `EINVAL` when all are taken.
    pub(crate) fn insert(self: &Arc<Self>, value: Arc<T>, gfp: Flags) -> Result<Index<T, S>> {
        // The hint is only a starting point: a stale one just searches a little longer.
        let mut next = self.next.load(Relaxed);
        let n = self
            .xa
            .alloc_cyclic(self.min, self.max, &mut next, value, gfp)
            .map_err(|e| if e.error == EBUSY { EINVAL } else { e.error })?;
        self.next.store(next, Relaxed);
        Ok(Index {
            table: self.clone(),
            n,
            deferred: false,
        })
    }

    /// Returns what number `n` maps to, if anything.
    ///
    /// Drop the result outside spinlocks: the last reference may free memory that sleeps.
    pub(crate) fn get(&self, n: u32) -> Option<Arc<T>> {
        self.xa.get(n as usize)
    }

    /// Maps the fixed number `n` (outside the cyclic range, e.g. QP1) to `value`.
    pub(crate) fn insert_at(self: &Arc<Self>, n: u32, value: Arc<T>) -> Result<Index<T, S>> {
        self.xa.insert(n as usize, value)?;
        Ok(Index {
            table: self.clone(),
            n,
            deferred: false,
        })
    }
}

impl<T: Send + Sync + 'static> IndexTable<T, RcuXArray<Arc<T>>> {
    /// Borrows what number `n` maps to while the RCU read lock `rcu` is held (any context).
    pub(crate) fn load<'a>(&'a self, n: u32, rcu: &'a rcu::Guard) -> Option<ArcBorrow<'a, T>> {
        self.xa.load(n as usize, rcu)
    }

    /// Returns the first number of at least `start` that maps to something, with what it maps
    /// to (any context).
    pub(crate) fn find_from(&self, start: u32) -> Option<(u32, Arc<T>)> {
        let rcu = rcu::read_lock();
        let (n, v) = self.xa.find_from(start as usize, &rcu)?;
        // Numbers are stored from `u32`s.
        Some((u32::try_from(n).ok()?, v.into()))
    }
}

/// A number taken from an [`IndexTable`]; dropping it frees the number.
pub(crate) struct Index<T: Send + Sync + 'static, S: Slots<T> = XArray<Arc<T>>> {
    table: Arc<IndexTable<T, S>>,
    n: u32,
    /// Whether the table's reference is dropped later, after the readers are gone, instead
    /// of waiting for them when the number is freed ([`Index::release_later`]).
    deferred: bool,
}

impl<T: Send + Sync + 'static, S: Slots<T>> Index<T, S> {
    /// Returns the number.
    pub(crate) fn get(&self) -> u32 {
        self.n
    }

    /// Frees the number without waiting for the table's readers: the table drops its
    /// reference later. For values whose drop need not have happened when this one's owner
    /// is gone (no pinned user memory).
    pub(crate) fn release_later(&mut self) {
        self.deferred = true;
    }
}

impl<T: Send + Sync + 'static, S: Slots<T>> Drop for Index<T, S> {
    fn drop(&mut self) {
        if self.deferred {
            self.table.xa.remove_deferred(self.n as usize);
            return;
        }
        // The value is dropped after the lock: it may free rings, which may sleep.
        let value = self.table.xa.remove(self.n as usize);
        drop(value);
    }
}
