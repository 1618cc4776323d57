// SPDX-License-Identifier: GPL-2.0

//! Requests that arrive ahead of their turn, held briefly in case those before them are only
//! late, not lost.
//!
//! Two CPUs that transmit for one queue pair in turn can deliver its packets out of order: on
//! a veth, a packet sent from softirq waits in that CPU's backlog while one sent a moment later
//! from process context on another CPU is received at once. An RC responder answers a request
//! after a gap with a PSN sequence error NAK (IBTA 9.7.5.2.2), and the requester sends again
//! everything from the gap on (go-back-N): a reordering then costs as much as a loss. Holding
//! the early requests until the gap fills turns it into a short wait. A gap that does not fill
//! (a packet was lost) is released when the oldest request has waited long enough or the
//! holder is full, and the requests are then handled as without it.
//!
//! The holder keeps the caller's packet handles, in place: it allocates nothing.

use super::io::Instant;
use super::psn::Psn;

/// How far ahead of the expected PSN a request may be and still be held.
pub const MAX_GAP: u32 = 64;

/// Returns true if `psn` is early while `epsn` is expected, by no more than [`MAX_GAP`].
pub fn is_early(psn: Psn, epsn: Psn) -> bool {
    psn.is_after(epsn) && psn.distance_from(epsn) <= MAX_GAP
}

/// Early requests of one queue pair, at most `N`, each with its PSN and when it came.
///
/// # Invariants
///
/// No two held requests have the same PSN, and `count` is the number of slots that hold one.
pub struct Held<T, const N: usize> {
    slots: [Option<(Psn, Instant, T)>; N],
    /// How many slots hold a request: an empty holder, the common case, is known without a
    /// scan.
    count: usize,
}

impl<T, const N: usize> Default for Held<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const N: usize> Held<T, N> {
    /// Returns an empty holder.
    pub fn new() -> Self {
        // INVARIANT: No slot holds a request.
        Self {
            slots: core::array::from_fn(|_| None),
            count: 0,
        }
    }

    /// Returns the number of requests held.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Returns true if no request is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Holds `item`, the request at `psn`, which came at `now` while `epsn` was expected.
    ///
    /// Hands `item` back if it is not early (see [`is_early`]), if one is held for that
    /// PSN already (a duplicate: the held one stays), or if the holder is full.
    pub fn hold(&mut self, psn: Psn, epsn: Psn, item: T, now: Instant) -> Result<(), T> {
        if !is_early(psn, epsn) || self.slots.iter().flatten().any(|s| s.0 == psn) {
            return Err(item);
        }
        match self.slots.iter_mut().find(|s| s.is_none()) {
            Some(slot) => {
                // INVARIANT: No request with this PSN is held (checked above), and the slot
                // was empty.
                *slot = Some((psn, now, item));
                self.count = self.count.saturating_add(1);
                Ok(())
            }
            None => Err(item),
        }
    }

    /// Takes the request held for `psn`, if there is one.
    pub fn take(&mut self, psn: Psn) -> Option<T> {
        if self.count == 0 {
            return None;
        }
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.0 == psn))?;
        let (_, _, item) = slot.take()?;
        // INVARIANT: The slot held a request and holds none now.
        self.count = self.count.saturating_sub(1);
        Some(item)
    }

    /// Takes the held request that comes first from `epsn` on, to release them all in order.
    pub fn take_first(&mut self, epsn: Psn) -> Option<T> {
        let slot = self
            .slots
            .iter_mut()
            .filter(|s| s.is_some())
            .min_by_key(|s| s.as_ref().map_or(u32::MAX, |s| s.0.distance_from(epsn)))?;
        let (_, _, item) = slot.take()?;
        // INVARIANT: The slot held a request and holds none now.
        self.count = self.count.saturating_sub(1);
        Some(item)
    }

    /// Returns when the requests held are to be released if their gap has not filled: `hold`
    /// nanoseconds after the oldest came.
    pub fn deadline(&self, hold: u64) -> Option<Instant> {
        if self.count == 0 {
            return None;
        }
        self.slots
            .iter()
            .flatten()
            .map(|s| s.1 .0)
            .min()
            .map(|oldest| Instant(oldest).after_nanos(hold))
    }

    /// Returns true if a request is held and the holder cannot take another.
    pub fn is_full(&self) -> bool {
        self.count == N
    }
}
