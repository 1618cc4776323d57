// SPDX-License-Identifier: GPL-2.0

//! Buffers of packets between queue pairs of one device (loopback), reused from packet to
//! packet rather than allocated and freed for each.
//!
//! A packet for a queue pair of this device is built in a vector that its receiver frees once
//! handled. Allocated and freed per packet, that is two allocator calls per packet and, under
//! KASAN, a freed object per packet kept in its quarantine, which only allocations that may
//! sleep trim: a run allocates with `GFP_ATOMIC`, so a long loopback transfer grew it by
//! every packet (hundreds of MiB for 256 MiB written), until atomic allocations failed.
//!
//! The device keeps idle buffers in a [`BufferPool`]; each queue pair's runs take a few at a
//! time into its [`RunBuffers`], get back those of the packets they handle, and return to the
//! pool what they hold past [`KEEP`] at the end of a run. A ping-pong builds each packet in a
//! buffer its queue pair got back from the last one, and takes no lock; a one-way stream takes
//! two lock acquisitions per [`BATCH`] packets at most, none per packet.

use crate::{
    engine::drop_unallocated,
    transport::Packet, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::SpinLockIrq, //
};

/// The most idle buffers a device keeps; the rest are freed. Four queue pairs' runs of
/// [`SEND_BUDGET`](crate::engine) packets each find theirs here.
pub(crate) const POOL_MAX: usize = 256;

/// Buffers a run takes from the pool at a time.
const BATCH: usize = 16;

/// Buffers a run holds before it gives them to the pool, mid-run.
const RUN_MAX: usize = 64;

/// Buffers a queue pair keeps from one run to the next; the rest go back to the pool.
const KEEP: usize = 8;

/// The least capacity of a buffer: packets of an IB MTU of 1024 and their headers fit, so a
/// buffer an acknowledgement had serves a full packet next.
const MIN_CAPACITY: usize = 2048;

/// The idle loopback packet buffers of one device.
///
/// # Invariants
///
/// It holds at most [`POOL_MAX`] buffers, in a vector with room for that many: putting one
/// back never allocates.
#[pin_data]
pub(crate) struct BufferPool {
    #[pin]
    idle: SpinLockIrq<KVec<KVec<u8>>>,
}

impl BufferPool {
    /// Returns an initialiser of an empty pool (process context).
    pub(crate) fn new() -> Result<impl PinInit<Self>> {
        let idle = KVec::with_capacity(POOL_MAX, GFP_KERNEL)?;
        Ok(pin_init!(Self {
            idle <- new_spinlock_irq!(idle, "BufferPool::idle"),
        }))
    }

    /// Returns how many buffers are idle.
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().len()
    }
}

/// The loopback packet buffers one run of a queue pair holds, and the buffer of the packets
/// that go nowhere; kept by the queue pair from run to run, with at most [`KEEP`] loopback
/// buffers ([`RunBuffers::trim`]).
///
/// # Invariants
///
/// `free` holds at most [`RUN_MAX`] buffers.
#[derive(Default)]
pub(crate) struct RunBuffers {
    /// The buffer a packet that goes nowhere (no skb, no address handle) is built in.
    pub(crate) discard: KVec<u8>,
    /// Loopback buffers taken from the pool or from packets handled, empty.
    free: KVec<KVec<u8>>,
}

impl RunBuffers {
    /// Returns an empty buffer with room for `len` bytes, from those the run holds, the pool's,
    /// or a new one.
    pub(crate) fn take(&mut self, pool: &BufferPool, len: usize) -> Result<KVec<u8>> {
        if self.free.is_empty() {
            self.refill(pool);
        }
        let mut v = self.free.pop().unwrap_or_default();
        v.clear();
        v.reserve(len.max(MIN_CAPACITY), GFP_ATOMIC)?;
        Ok(v)
    }

    /// Takes up to [`BATCH`] buffers from `pool`.
    fn refill(&mut self, pool: &BufferPool) {
        // Reserved before the lock: under it, only pointers move.
        if self.free.reserve(BATCH, GFP_ATOMIC).is_err() {
            return;
        }
        let mut idle = pool.idle.lock();
        while self.free.len() < BATCH {
            let Some(v) = idle.pop() else {
                break;
            };
            // Room was reserved above.
            let _ = self.free.push(v, GFP_ATOMIC);
        }
    }

    /// Keeps `v`, the buffer of a packet handled or not sent, for the next packet.
    pub(crate) fn recycle(&mut self, pool: &BufferPool, v: KVec<u8>) {
        if self.free.len() >= RUN_MAX {
            self.give_back(pool);
        }
        // No room (no memory): freed.
        let _ = self.free.push(v, GFP_ATOMIC);
    }

    /// Frees `pkt`, handled: the buffer of a loopback packet is kept for the next packet.
    pub(crate) fn consume(&mut self, pool: &BufferPool, pkt: Packet) {
        match pkt.into_local() {
            Ok(v) => self.recycle(pool, v),
            Err(pkt) => pkt.consume(),
        }
    }

    /// Gives the buffers the run holds to `pool`; those it has no room for are freed.
    pub(crate) fn give_back(&mut self, pool: &BufferPool) {
        self.keep(pool, 0);
    }

    /// Gives the buffers the run holds past [`KEEP`] to `pool`, at the end of a run: the next
    /// run of the queue pair builds in those it kept.
    pub(crate) fn trim(&mut self, pool: &BufferPool) {
        self.keep(pool, KEEP);
    }

    /// Gives the buffers the run holds past `n` to `pool`; those it has no room for are freed.
    fn keep(&mut self, pool: &BufferPool, n: usize) {
        if self.free.len() <= n {
            return;
        }
        {
            let mut idle = pool.idle.lock();
            while self.free.len() > n && idle.len() < POOL_MAX {
                let Some(v) = self.free.pop() else {
                    break;
                };
                // INVARIANT: below `POOL_MAX`, within the capacity reserved: no allocation.
                let _ = idle.push(v, GFP_ATOMIC);
            }
        }
        // Freed after the unlock: the pool is full.
        self.free.truncate(n);
    }

    /// Drops the buffers, without the allocator calls of vectors that never allocated.
    pub(crate) fn drop_unallocated(self) {
        drop_unallocated(self.discard);
        drop_unallocated(self.free);
    }
}

#[kunit_tests(rdma_rxe_rust_buffers)]
mod tests {
    use super::*;
    use kernel::sync::Arc;

    fn pool() -> Result<Arc<BufferPool>> {
        Arc::pin_init(BufferPool::new()?, GFP_KERNEL)
    }

    #[test]
    fn a_buffer_handled_is_the_next_one_built() -> Result {
        let pool = pool()?;
        let mut run = RunBuffers::default();
        let mut v = run.take(&pool, 100)?;
        assert!(v.capacity() >= MIN_CAPACITY);
        v.extend_from_slice(&[1; 100], GFP_KERNEL)?;
        let first = v.as_ptr();
        run.consume(&pool, Packet::Local(v));
        let v = run.take(&pool, 1000)?;
        assert_eq!(v.as_ptr(), first);
        assert!(v.is_empty());
        Ok(())
    }

    #[test]
    fn buffers_go_between_runs_through_the_pool() -> Result {
        let pool = pool()?;
        let (mut sender, mut receiver) = (RunBuffers::default(), RunBuffers::default());
        let mut sent = KVec::new();
        for _ in 0..40 {
            sent.push(sender.take(&pool, 1040)?, GFP_KERNEL)?;
        }
        sender.give_back(&pool);
        let mut ptrs = KVec::new();
        for v in &sent {
            ptrs.push(v.as_ptr(), GFP_KERNEL)?;
        }
        for v in sent.drain_all() {
            receiver.recycle(&pool, v);
        }
        receiver.give_back(&pool);
        assert_eq!(pool.idle(), 40);
        // The sender's next 40 packets are built in the same 40 buffers: none allocated.
        for _ in 0..40 {
            let v = sender.take(&pool, 1040)?;
            assert!(ptrs.contains(&v.as_ptr()));
            sent.push(v, GFP_KERNEL)?;
        }
        assert_eq!(pool.idle(), 0);
        Ok(())
    }

    #[test]
    fn a_run_keeps_a_few_for_the_next_and_gives_back_the_rest() -> Result {
        let pool = pool()?;
        let mut run = RunBuffers::default();
        for _ in 0..KEEP + 5 {
            run.recycle(&pool, KVec::with_capacity(MIN_CAPACITY, GFP_KERNEL)?);
        }
        run.trim(&pool);
        assert_eq!(run.free.len(), KEEP);
        assert_eq!(pool.idle(), 5);
        // The next run builds in what was kept: the pool is not touched.
        let v = run.take(&pool, 100)?;
        assert_eq!(run.free.len(), KEEP - 1);
        assert_eq!(pool.idle(), 5);
        run.recycle(&pool, v);
        run.trim(&pool);
        assert_eq!((run.free.len(), pool.idle()), (KEEP, 5));
        Ok(())
    }

    #[test]
    fn the_pool_keeps_at_most_its_bound() -> Result {
        let pool = pool()?;
        let mut run = RunBuffers::default();
        for _ in 0..POOL_MAX + 100 {
            let v = KVec::with_capacity(16, GFP_KERNEL)?;
            run.recycle(&pool, v);
            assert!(run.free.len() <= RUN_MAX);
        }
        run.give_back(&pool);
        assert_eq!(pool.idle(), POOL_MAX);
        assert!(run.free.is_empty());
        Ok(())
    }
}
