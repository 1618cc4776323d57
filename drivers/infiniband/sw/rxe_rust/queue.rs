// SPDX-License-Identifier: GPL-2.0

//! The shared rings of the rxe user ABI (`struct rxe_queue_buf`).
//!
//! One layout serves every queue: a header with the element size (log2) at byte 0, the index
//! mask at 4, the producer index at 128 and the consumer index at 256, then the slots from
//! byte 384. Slots are a power of two and at least a cache line; one slot stays empty, so a
//! ring of `n` slots holds `n - 1` elements. Indices are stored masked and published with
//! release ordering, read with acquire ordering.
//!
//! Each side keeps a private copy of the index it owns and only trusts that copy: what the
//! other side writes is masked before use and may be garbage without harm. The kernel
//! produces into a completion queue ([`Producer`]) and consumes send, receive and shared
//! receive queues ([`Consumer`]).

use crate::Rxe;
use kernel::{
    prelude::*,
    rdma::{
        mmap::{
            MmapEntry,
            UserBuffer, //
        },
        ucontext::UContext,
    },
    sync::Arc, //
};
use zerocopy_derive::Immutable;

/// Offset of the header field `log2_elem_size`.
const LOG2_ELEM_SIZE: usize = 0;
/// Offset of the header field `index_mask`.
const INDEX_MASK: usize = 4;
/// Offset of the producer index (its own cache line).
const PRODUCER_INDEX: usize = 128;
/// Offset of the consumer index (its own cache line).
const CONSUMER_INDEX: usize = 256;
/// Offset of slot 0.
const DATA: usize = 384;
/// The smallest slot: one cache line.
const MIN_SLOT: usize = 64;

/// The geometry of a ring: pure index arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// log2 of the slot size.
    pub(crate) log2_slot: u32,
    /// Number of slots minus one (slots are a power of two).
    pub(crate) mask: u32,
}

impl Geometry {
    /// Returns the geometry of a ring for at least `elems` elements of `elem_size` bytes.
    ///
    /// Fails for element or ring sizes that do not fit in 32 bits of slots.
    pub(crate) fn new(elems: u32, elem_size: usize) -> Option<Self> {
        let slot = elem_size.max(MIN_SLOT).checked_next_power_of_two()?;
        let slots = elems.checked_add(1)?.checked_next_power_of_two()?;
        Some(Self {
            log2_slot: slot.trailing_zeros(),
            mask: slots - 1,
        })
    }

    /// Returns the number of elements the ring holds.
    pub(crate) fn capacity(self) -> u32 {
        self.mask
    }

    /// Returns the size of a slot in bytes.
    pub(crate) fn slot_size(self) -> usize {
        1 << self.log2_slot
    }

    /// Returns the size of the whole buffer, header included.
    pub(crate) fn buffer_size(self) -> Option<usize> {
        (self.mask as usize + 1)
            .checked_mul(self.slot_size())?
            .checked_add(DATA)
    }

    /// Returns the byte offset of the slot at `index` (masked first).
    pub(crate) fn slot_offset(self, index: u32) -> usize {
        DATA + (((index & self.mask) as usize) << self.log2_slot)
    }

    /// Returns the index after `index`.
    pub(crate) fn next(self, index: u32) -> u32 {
        index.wrapping_add(1) & self.mask
    }

    /// Returns the number of elements between the consumer and the producer index.
    pub(crate) fn count(self, producer: u32, consumer: u32) -> u32 {
        producer.wrapping_sub(consumer) & self.mask
    }

    /// Returns whether a ring with these indices is full.
    pub(crate) fn is_full(self, producer: u32, consumer: u32) -> bool {
        self.next(producer) == consumer & self.mask
    }
}

/// A ring's memory and geometry.
pub(crate) struct Ring {
    buf: Arc<UserBuffer>,
    geo: Geometry,
}

impl Ring {
    /// Allocates a zeroed ring for at least `elems` elements of `elem_size` bytes.
    pub(crate) fn new(elems: u32, elem_size: usize) -> Result<Self> {
        let geo = Geometry::new(elems, elem_size).ok_or(EINVAL)?;
        let buf = UserBuffer::new(geo.buffer_size().ok_or(EINVAL)?)?;
        buf.store_release(LOG2_ELEM_SIZE, geo.log2_slot)?;
        buf.store_release(INDEX_MASK, geo.mask)?;
        Ok(Self { buf, geo })
    }

    /// Returns the geometry.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Returns the memory, for mapping into user space.
    pub(crate) fn buffer(&self) -> &Arc<UserBuffer> {
        &self.buf
    }
}

/// Where user space maps a queue (`struct mminfo` of the rxe ABI).
#[derive(IntoBytes, Immutable, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct MmInfo {
    /// The `mmap` offset.
    pub(crate) offset: u64,
    /// The length to map.
    pub(crate) size: u32,
    pad: u32,
}

/// A ring offered to a user context for mapping (none for a kernel queue).
pub(crate) struct Offer {
    /// Withdraws the offer when dropped.
    _entry: Option<MmapEntry>,
    /// What the create (or resize) response tells user space; zero for a kernel queue.
    pub(crate) mminfo: MmInfo,
}

impl Offer {
    /// Offers `ring` to `ctx`, if the queue belongs to user space.
    pub(crate) fn new(ring: &Ring, ctx: Option<&UContext<Rxe>>) -> Result<Self> {
        let Some(ctx) = ctx else {
            return Ok(Self {
                _entry: None,
                mminfo: MmInfo::default(),
            });
        };
        let entry = MmapEntry::new(ctx, ring.buffer().clone())?;
        let mminfo = MmInfo {
            offset: entry.offset(),
            size: u32::try_from(entry.len())?,
            pad: 0,
        };
        Ok(Self {
            _entry: Some(entry),
            mminfo,
        })
    }

    /// Takes the offer out, leaving none in its place.
    ///
    /// A queue's owner withdraws its offer this way when it is destroyed, in process context:
    /// the ring itself may go later, with the last queue pair that uses it, perhaps in the
    /// destructor of a socket buffer (softirq), where withdrawing an offer may not happen (it
    /// takes a mutex, and the user context's table lock, which process context takes with
    /// softirqs on).
    pub(crate) fn take(&mut self) -> Self {
        Self {
            _entry: self._entry.take(),
            mminfo: self.mminfo,
        }
    }
}

/// The producing side of a ring, which the kernel owns (completion queues).
///
/// # Invariants
///
/// `index` is the published producer index, always masked.
pub(crate) struct Producer {
    ring: Ring,
    index: u32,
}

impl Producer {
    /// Takes the producing side of a new ring.
    pub(crate) fn new(ring: Ring) -> Self {
        Self { ring, index: 0 }
    }

    /// Takes the producing side of a ring the kernel filled (a moved kernel queue), resuming
    /// at its published producer index.
    pub(crate) fn resume(ring: Ring) -> Result<Self> {
        let index = ring.buf.load_acquire(PRODUCER_INDEX)? & ring.geo.mask;
        Ok(Self { ring, index })
    }

    /// Returns the ring.
    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Returns the slot the next element goes to.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// Returns whether no slot is free.
    pub(crate) fn is_full(&self) -> Result<bool> {
        Ok(self.ring.geo.is_full(self.index, self.consumer()?))
    }

    /// Reads the consumer's index: untrusted, hence masked.
    pub(crate) fn consumer(&self) -> Result<u32> {
        Ok(self.ring.buf.load_acquire(CONSUMER_INDEX)? & self.ring.geo.mask)
    }

    /// Returns the number of elements not consumed yet.
    pub(crate) fn count(&self) -> Result<u32> {
        Ok(self.ring.geo.count(self.index, self.consumer()?))
    }

    /// Appends `elem`; fails with `ENOSPC` when the ring is full.
    pub(crate) fn push(&mut self, elem: &[u8]) -> Result {
        let geo = self.ring.geo;
        if elem.len() > geo.slot_size() {
            return Err(EINVAL);
        }
        if geo.is_full(self.index, self.consumer()?) {
            return Err(ENOSPC);
        }
        self.ring.buf.write(geo.slot_offset(self.index), elem)?;
        self.index = geo.next(self.index);
        // Publishes the element written above.
        self.ring.buf.store_release(PRODUCER_INDEX, self.index)
    }

    /// Moves the unconsumed elements into `to`, which must hold them all, through `elem` (one
    /// element's worth of scratch space, so that no allocation happens under a lock).
    ///
    /// The consumer index of this ring is advanced past them, as the C driver does.
    pub(crate) fn move_into(&mut self, to: &mut Producer, elem: &mut [u8]) -> Result {
        let geo = self.ring.geo;
        let mut cons = self.consumer()?;
        if geo.count(self.index, cons) > to.ring.geo.capacity() {
            return Err(EINVAL);
        }
        while cons != self.index {
            self.ring.buf.read(geo.slot_offset(cons), elem)?;
            to.push(elem)?;
            cons = geo.next(cons);
        }
        self.ring.buf.store_release(CONSUMER_INDEX, cons)
    }
}

/// The consuming side of a ring the kernel reads (its own completion queues, and later the
/// send and receive queues user space fills).
///
/// # Invariants
///
/// `index` is the published consumer index, always masked.
pub(crate) struct Consumer {
    ring: SlotReader,
    index: u32,
}

impl Consumer {
    /// Takes the consuming side of `ring`.
    pub(crate) fn new(ring: &Ring) -> Self {
        Self {
            ring: SlotReader {
                buf: ring.buf.clone(),
                geo: ring.geo,
            },
            index: 0,
        }
    }

    /// Returns what reads the ring without the consumer's state (and so without its lock).
    ///
    /// Only for a ring that is never replaced (a send queue): the reader of a ring that a
    /// resize replaces ([`Consumer::move_into`]) would go on reading the old one.
    pub(crate) fn reader(&self) -> SlotReader {
        self.ring.clone()
    }

    /// Returns the producer's index: untrusted, hence masked.
    pub(crate) fn producer(&self) -> Result<u32> {
        self.ring.producer()
    }

    /// Returns the slot the next element is read from.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// Returns the number of elements waiting.
    pub(crate) fn count(&self) -> Result<u32> {
        Ok(self.ring.geo.count(self.producer()?, self.index))
    }

    /// Returns whether no element is waiting.
    pub(crate) fn is_empty(&self) -> Result<bool> {
        Ok(self.producer()? == self.index)
    }

    /// Copies the next element into `dst` (a snapshot: validate before use) and consumes it.
    ///
    /// Returns `false` if the ring is empty.
    pub(crate) fn pop(&mut self, dst: &mut [u8]) -> Result<bool> {
        if dst.len() > self.ring.geo.slot_size() {
            return Err(EINVAL);
        }
        if self.producer()? == self.index {
            return Ok(false);
        }
        self.ring
            .buf
            .read(self.ring.geo.slot_offset(self.index), dst)?;
        self.index = self.ring.geo.next(self.index);
        self.ring.buf.store_release(CONSUMER_INDEX, self.index)?;
        Ok(true)
    }
}

impl Consumer {
    /// Returns the ring's geometry.
    pub(crate) fn geometry(&self) -> Geometry {
        self.ring.geo
    }

    /// Copies slot `index` (masked) into `dst`, without consuming it: a snapshot, to be
    /// validated before use.
    pub(crate) fn read_slot(&self, index: u32, dst: &mut [u8]) -> Result {
        if dst.len() > self.ring.geo.slot_size() {
            return Err(EINVAL);
        }
        self.ring
            .buf
            .read(self.ring.geo.slot_offset(index & self.ring.geo.mask), dst)
    }

    /// Publishes `index` (masked) as the consumer index: the slots before it are free.
    pub(crate) fn release_to(&mut self, index: u32) -> Result {
        self.index = index & self.ring.geo.mask;
        self.ring.buf.store_release(CONSUMER_INDEX, self.index)
    }

    /// Moves the elements not consumed yet to the start of `to`, which must hold them all, and
    /// returns the consuming side of `to`. `elem` is scratch space of one element, so that no
    /// allocation happens under a lock.
    ///
    /// The producer's index is untrusted: at most a ring's worth is moved, and `to` gets a
    /// producer index the kernel computed.
    pub(crate) fn move_into(&mut self, to: &Ring, elem: &mut [u8]) -> Result<Consumer> {
        let prod = self.producer()?;
        let n = self.ring.geo.count(prod, self.index);
        if n > to.geo.capacity() {
            return Err(EINVAL);
        }
        let mut i = 0u32;
        while i < n {
            self.ring
                .buf
                .read(self.ring.geo.slot_offset(self.index.wrapping_add(i)), elem)?;
            to.buf.write(to.geo.slot_offset(i), elem)?;
            i += 1;
        }
        to.buf.store_release(PRODUCER_INDEX, n)?;
        self.index = prod;
        self.ring.buf.store_release(CONSUMER_INDEX, prod)?;
        Ok(Consumer::new(to))
    }
}

/// The consuming side's view of a ring that needs none of its state: the producer's index and
/// the slots' bytes.
///
/// A queue pair's run reads its send queue through it without the queue's lock: the slots it
/// reads lie between the consumer's index and the producer's, which the producer does not
/// rewrite until the consumer moves on. A flush may move the consumer on meanwhile (the queue
/// pair went to ERR), so a slot may change under a read: every read is a snapshot of untrusted
/// bytes, validated before use, as for a user's ring.
#[derive(Clone)]
pub(crate) struct SlotReader {
    buf: Arc<UserBuffer>,
    geo: Geometry,
}

impl SlotReader {
    /// Returns the producer's index: untrusted, hence masked.
    pub(crate) fn producer(&self) -> Result<u32> {
        Ok(self.buf.load_acquire(PRODUCER_INDEX)? & self.geo.mask)
    }

    /// Returns the ring's geometry.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Copies the bytes of slot `index` (masked) from `offset` on into `dst`: a snapshot, to
    /// be validated before use.
    pub(crate) fn read_slot_at(&self, index: u32, offset: usize, dst: &mut [u8]) -> Result {
        if offset.checked_add(dst.len()).ok_or(EINVAL)? > self.geo.slot_size() {
            return Err(EINVAL);
        }
        self.buf
            .read(self.geo.slot_offset(index & self.geo.mask) + offset, dst)
    }
}

#[kunit_tests(rdma_rxe_rust_queue)]
mod tests {
    use super::*;

    #[test]
    fn geometry_rounds_as_the_provider_expects() {
        // 48-byte completions take one cache line; 10 entries need 16 slots.
        let g = Geometry::new(10, 48).unwrap();
        assert_eq!(g.slot_size(), 64);
        assert_eq!(g.capacity(), 15);
        assert_eq!(g.buffer_size(), Some(384 + 16 * 64));
        // A power of two minus one fits exactly; a power of two needs twice the slots.
        assert_eq!(Geometry::new(15, 64).unwrap().capacity(), 15);
        assert_eq!(Geometry::new(16, 64).unwrap().capacity(), 31);
        // Element sizes round up to a power of two.
        assert_eq!(Geometry::new(1, 208 + 32 * 16).unwrap().slot_size(), 1024);
        // No element asked: one slot, no room (as the C driver: "allowed, but uninteresting").
        assert_eq!(Geometry::new(0, 1).unwrap().capacity(), 0);
        assert!(Geometry::new(u32::MAX, 64).is_none());
    }

    #[test]
    fn indices_wrap_and_mask() {
        let g = Geometry::new(3, 64).unwrap();
        assert_eq!(g.mask, 3);
        assert_eq!(g.next(3), 0);
        assert_eq!(g.count(1, 3), 2);
        assert_eq!(g.count(3, 3), 0);
        assert!(g.is_full(2, 3));
        assert!(!g.is_full(3, 3));
        // A hostile index is masked into the ring.
        assert_eq!(g.slot_offset(0xffff_fffd), DATA + 64);
    }

    #[test]
    fn produce_and_consume_through_shared_memory() {
        let ring = Ring::new(3, 64).unwrap();
        let mut cons = Consumer::new(&ring);
        let mut prod = Producer::new(ring);
        let mut out = [0u8; 64];
        assert_eq!(cons.pop(&mut out), Ok(false));
        for i in 0..3u8 {
            assert_eq!(prod.push(&[i; 64]), Ok(()));
        }
        assert_eq!(prod.push(&[9; 64]), Err(ENOSPC));
        assert_eq!(prod.count(), Ok(3));
        for i in 0..3u8 {
            assert_eq!(cons.pop(&mut out), Ok(true));
            assert_eq!(out, [i; 64]);
        }
        assert_eq!(cons.is_empty(), Ok(true));
        assert_eq!(prod.count(), Ok(0));
    }

    #[test]
    fn a_hostile_consumer_index_cannot_escape_the_ring() {
        let ring = Ring::new(3, 64).unwrap();
        let mut prod = Producer::new(ring);
        assert_eq!(
            prod.ring()
                .buffer()
                .store_release(CONSUMER_INDEX, 0xdead_beef),
            Ok(())
        );
        // Masked to 3: the ring looks as if three were consumed; a push still lands in a slot.
        assert!(prod.count().unwrap() <= 3);
        let _ = prod.push(&[1; 64]);
    }
}
