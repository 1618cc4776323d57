// SPDX-License-Identifier: GPL-2.0

//! The AETH syndrome: ACK with credit count, RNR NAK, NAK (IBTA 9.3.5).
//!
//! Bit 7 of the syndrome is reserved and must be zero, bits 6..5 give the
//! kind (ACK, RNR NAK, reserved, NAK) and bits 4..0 its argument.

use super::timer::RnrTimer;

const KIND_MASK: u8 = 0xe0;
const VALUE_MASK: u8 = 0x1f;
const KIND_ACK: u8 = 0x00;
const KIND_RNR_NAK: u8 = 0x20;
const KIND_NAK: u8 = 0x60;

/// Number of receive WQEs a credit count code stands for (IBTA table 44).
const CREDITS: [u16; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// The credit count of an ACK: how many more messages the responder can take.
///
/// # Invariants
///
/// The code is less than 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CreditCount(u8);

impl CreditCount {
    /// Code 31: no end-to-end flow control, as the C driver always sends.
    pub const UNLIMITED: Self = Self(VALUE_MASK);

    /// Creates a credit count from the low five bits of `code`.
    pub const fn from_bits(code: u8) -> Self {
        // INVARIANT: masked to five bits.
        Self(code & VALUE_MASK)
    }

    /// Returns the largest code that grants at most `credits` receive WQEs.
    pub fn at_most(credits: u32) -> Self {
        let mut best = 0u8;
        for (code, &n) in (0u8..).zip(CREDITS.iter()) {
            if u32::from(n) <= credits {
                best = code;
            }
        }
        Self(best)
    }

    /// Returns the 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// Returns the number of credits, or `None` for [`Self::UNLIMITED`].
    pub fn credits(self) -> Option<u32> {
        CREDITS.get(usize::from(self.0)).map(|&n| u32::from(n))
    }
}

/// The reason given by a NAK (IBTA table 43).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error: the requester must resend from the AETH's PSN.
    PsnSequenceError = 0,
    /// Invalid request: unsupported opcode or bad length.
    InvalidRequest = 1,
    /// Remote access error: R_Key, range or access rights.
    RemoteAccessError = 2,
    /// Remote operational error: the responder could not complete the request.
    RemoteOperationalError = 3,
    /// Invalid RD request (reliable datagram only).
    InvalidRdRequest = 4,
}

impl NakCode {
    /// Returns the NAK code for the five-bit value `code`, if defined.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::PsnSequenceError),
            1 => Some(Self::InvalidRequest),
            2 => Some(Self::RemoteAccessError),
            3 => Some(Self::RemoteOperationalError),
            4 => Some(Self::InvalidRdRequest),
            _ => None,
        }
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement, with the responder's credit count.
    Ack(CreditCount),
    /// Receiver not ready: retry after the given delay.
    RnrNak(RnrTimer),
    /// Negative acknowledgement.
    Nak(NakCode),
}

/// Error returned for a syndrome byte with a reserved encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReservedSyndrome(pub u8);

impl Syndrome {
    /// The syndrome of an ACK without end-to-end credits (`AETH_ACK_UNLIMITED`).
    pub const ACK_UNLIMITED: Self = Self::Ack(CreditCount::UNLIMITED);

    /// Decodes a syndrome byte.
    pub const fn decode(raw: u8) -> Result<Self, ReservedSyndrome> {
        let value = raw & VALUE_MASK;
        match raw & KIND_MASK {
            KIND_ACK => Ok(Self::Ack(CreditCount::from_bits(value))),
            KIND_RNR_NAK => Ok(Self::RnrNak(RnrTimer::from_bits(value))),
            KIND_NAK => match NakCode::from_code(value) {
                Some(code) => Ok(Self::Nak(code)),
                None => Err(ReservedSyndrome(raw)),
            },
            _ => Err(ReservedSyndrome(raw)),
        }
    }

    /// Encodes the syndrome byte.
    pub const fn encode(self) -> u8 {
        match self {
            Self::Ack(credits) => KIND_ACK | credits.code(),
            Self::RnrNak(timer) => KIND_RNR_NAK | timer.code(),
            Self::Nak(code) => KIND_NAK | code as u8,
        }
    }

    /// Returns true for an ACK, false for either kind of NAK.
    pub const fn is_ack(self) -> bool {
        matches!(self, Self::Ack(_))
    }
}
