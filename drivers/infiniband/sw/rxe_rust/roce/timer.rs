// SPDX-License-Identifier: GPL-2.0

//! Transport timers and retry counters: local ACK timeout, RNR NAK timer,
//! retry and RNR retry counts.

/// The local ACK timeout of a QP, `4.096 us * 2^exponent` (IBTA 9.7.6.1.3).
///
/// # Invariants
///
/// The exponent is at most 31, the largest value `ib_modify_qp` accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AckTimeout(u8);

impl AckTimeout {
    /// The largest exponent.
    pub const MAX_EXPONENT: u8 = 31;

    /// Creates a timeout from the 5-bit `timeout` QP attribute.
    ///
    /// Returns `None` above 31. Zero means the timer never fires.
    pub const fn new(exponent: u8) -> Option<Self> {
        if exponent <= Self::MAX_EXPONENT {
            // INVARIANT: checked just above.
            Some(Self(exponent))
        } else {
            None
        }
    }

    /// Returns the attribute value this timeout was created from.
    pub const fn exponent(self) -> u8 {
        self.0
    }

    /// Returns the timeout in nanoseconds, or `None` if it is disabled (zero).
    pub const fn nanos(self) -> Option<u64> {
        if self.0 == 0 {
            None
        } else {
            // At most 4096 << 31 < 2^44: no overflow.
            Some(4096u64 << self.0)
        }
    }
}

/// Delay before retrying after an RNR NAK, in microseconds, by timer code
/// (IBTA table 45). Code 0 is the longest, 655.36 ms.
///
/// The C driver has 61410 for code 25; the specification says 61.44 ms.
const RNR_TIMER_MICROS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The 5-bit RNR NAK timer code sent in an RNR NAK and set as a QP attribute.
///
/// # Invariants
///
/// The code is less than 32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RnrTimer(u8);

impl RnrTimer {
    /// Creates a timer code from the low five bits of `code`.
    pub const fn from_bits(code: u8) -> Self {
        // INVARIANT: masked to five bits.
        Self(code & 0x1f)
    }

    /// Creates a timer code, or returns `None` if `code` does not fit in five bits.
    pub const fn new(code: u8) -> Option<Self> {
        if code < 32 {
            Some(Self::from_bits(code))
        } else {
            None
        }
    }

    /// Returns the 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// Returns the delay the code stands for, in microseconds.
    pub fn micros(self) -> u32 {
        // The invariant keeps the index in range; the fallback is the longest delay.
        RNR_TIMER_MICROS
            .get(usize::from(self.0))
            .copied()
            .unwrap_or(655_360)
    }

    /// Returns the shortest code whose delay is at least `micros`, or the longest code.
    pub fn at_least_micros(micros: u32) -> Self {
        // Codes 1..=31 are increasing; code 0 is the longest of all.
        let mut code = 1u8;
        while code < 32 {
            let t = Self(code);
            if t.micros() >= micros {
                return t;
            }
            code = code.wrapping_add(1);
        }
        Self(0)
    }
}

/// A retry budget: the transport retry count or the RNR retry count of a QP.
///
/// # Invariants
///
/// `remaining <= initial <= 7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryCounter {
    initial: u8,
    remaining: u8,
    infinite: bool,
}

impl RetryCounter {
    /// The largest count the 3-bit QP attributes can hold.
    pub const MAX: u8 = 7;

    /// Creates the counter for `retry_cnt`: `count` retries after a timeout or a
    /// sequence error NAK (IBTA 9.7.6.1.3).
    ///
    /// Seven means seven retries here, as in the specification. The C driver
    /// treats 7 as infinite for this counter too.
    pub const fn transport(count: u8) -> Option<Self> {
        Self::with(count, false)
    }

    /// Creates the counter for `rnr_retry`: `count` retries after an RNR NAK,
    /// where 7 means retry forever (IBTA 9.7.5.2.8).
    pub const fn rnr(count: u8) -> Option<Self> {
        Self::with(count, count == Self::MAX)
    }

    const fn with(count: u8, infinite: bool) -> Option<Self> {
        if count <= Self::MAX {
            // INVARIANT: remaining == initial == count <= 7.
            Some(Self {
                initial: count,
                remaining: count,
                infinite,
            })
        } else {
            None
        }
    }

    /// Uses one retry; returns false, using nothing, when the budget is spent.
    pub fn try_consume(&mut self) -> bool {
        if self.infinite {
            return true;
        }
        match self.remaining.checked_sub(1) {
            Some(left) => {
                self.remaining = left;
                true
            }
            None => false,
        }
    }

    /// Restores the full budget, as progress (an ACK that advances) does.
    pub fn reset(&mut self) {
        self.remaining = self.initial;
    }

    /// Returns the retries left, or `None` for an infinite budget.
    pub const fn remaining(&self) -> Option<u8> {
        if self.infinite {
            None
        } else {
            Some(self.remaining)
        }
    }

    /// Returns true if the budget never runs out.
    pub const fn is_infinite(&self) -> bool {
        self.infinite
    }
}
