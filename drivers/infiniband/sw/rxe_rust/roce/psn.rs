// SPDX-License-Identifier: GPL-2.0

//! 24-bit sequence numbers: PSN, MSN and SSN.
//!
//! All three wrap modulo 2^24 (IBTA 9.7.1, 9.7.5.1.1). Ordering is serial
//! number arithmetic: `a` is before `b` when the forward distance from `a` to
//! `b` is less than half the space. Half-way apart is ambiguous; it compares
//! as "before", as the C driver's `psn_compare()` does, so both drivers agree
//! on every pair.

use core::cmp::Ordering;

/// Number of distinct values of a 24-bit sequence number.
pub const SEQ24_MODULUS: u32 = 1 << 24;

/// Mask of the 24 significant bits of a sequence number.
pub const SEQ24_MASK: u32 = SEQ24_MODULUS - 1;

macro_rules! seq24 {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        ///
        /// # Invariants
        ///
        /// The value is less than 2^24.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(u32);

        impl $name {
            /// The zero value.
            pub const ZERO: Self = Self(0);

            /// The largest value, after which the sequence wraps to zero.
            pub const MAX: Self = Self(SEQ24_MASK);

            /// Creates a value from the low 24 bits of `raw`; higher bits are ignored.
            #[inline]
            pub const fn new(raw: u32) -> Self {
                // INVARIANT: masked to 24 bits.
                Self(raw & SEQ24_MASK)
            }

            /// Returns the value as an integer below 2^24.
            #[inline]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// Returns the value `n` steps after this one, modulo 2^24.
            #[inline]
            pub const fn add(self, n: u32) -> Self {
                Self::new(self.0.wrapping_add(n))
            }

            /// Returns the value `n` steps before this one, modulo 2^24.
            #[inline]
            pub const fn sub(self, n: u32) -> Self {
                Self::new(self.0.wrapping_sub(n))
            }

            /// Returns the next value, wrapping from [`Self::MAX`] to zero.
            #[inline]
            pub const fn next(self) -> Self {
                self.add(1)
            }

            /// Returns the previous value, wrapping from zero to [`Self::MAX`].
            #[inline]
            pub const fn prev(self) -> Self {
                self.sub(1)
            }

            /// Returns how many steps forward lead from `from` to `self`, modulo 2^24.
            #[inline]
            pub const fn distance_from(self, from: Self) -> u32 {
                self.0.wrapping_sub(from.0) & SEQ24_MASK
            }

            /// Compares two values in serial number arithmetic.
            ///
            /// `Less` means `self` comes before `other` within half the sequence
            /// space. This is not a total order, so the type does not implement
            /// `Ord`.
            #[inline]
            pub const fn serial_cmp(self, other: Self) -> Ordering {
                // Shifting the 24-bit difference into the top of an i32 makes
                // its sign the answer, exactly as the C `psn_compare()`.
                let diff = (self.0.wrapping_sub(other.0) << 8) as i32;
                if diff < 0 {
                    Ordering::Less
                } else if diff > 0 {
                    Ordering::Greater
                } else {
                    Ordering::Equal
                }
            }

            /// Returns true if `self` comes strictly before `other`.
            #[inline]
            pub const fn is_before(self, other: Self) -> bool {
                matches!(self.serial_cmp(other), Ordering::Less)
            }

            /// Returns true if `self` comes strictly after `other`.
            #[inline]
            pub const fn is_after(self, other: Self) -> bool {
                matches!(self.serial_cmp(other), Ordering::Greater)
            }

            /// Returns true if `self` lies in the `len` values starting at `start`.
            #[inline]
            pub const fn in_window(self, start: Self, len: u32) -> bool {
                self.distance_from(start) < len
            }
        }
    };
}

seq24!(
    /// Packet Sequence Number, carried in the BTH (IBTA 9.2).
    Psn
);

seq24!(
    /// Message Sequence Number, carried in the AETH of responses (IBTA 9.7.5.1.1).
    Msn
);

seq24!(
    /// Send Sequence Number, counted by the requester per message (IBTA 9.7.7.2).
    ///
    /// The SSN is never transmitted; the requester compares it with the MSN
    /// and credit count of each AETH to decide how many messages it may send.
    Ssn
);
