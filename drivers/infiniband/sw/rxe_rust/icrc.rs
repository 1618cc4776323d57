// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC with the kernel's CRC-32.
//!
//! The protocol core ([`crate::roce::icrc`]) computes the ICRC over the RoCEv2 pseudo header
//! with an injected CRC-32 primitive; in the kernel that is `crc32_le`.

use crate::roce::icrc::Crc32;
use kernel::prelude::*;

/// The kernel's `crc32_le`, as the protocol core's CRC-32 primitive.
pub(crate) struct KernelCrc32;

impl Crc32 for KernelCrc32 {
    #[inline]
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        kernel::crc::crc32_le(seed, data)
    }
}

#[kunit_tests(rdma_rxe_rust_icrc)]
mod tests {
    use super::*;
    use crate::icrc_vectors::{
        RC_ACKNOWLEDGE,
        RC_RDMA_READ_REQUEST,
        UD_SEND_ONLY, //
    };
    use crate::roce::{
        icrc::{
            IpHeader,
            Ipv4Header,
            UdpHeader, //
        },
        packet::{
            parse,
            ParseError, //
        },
    };
    use zerocopy::FromBytes;

    const VECTORS: [&[u8]; 3] = [&RC_ACKNOWLEDGE, &RC_RDMA_READ_REQUEST, &UD_SEND_ONLY];

    /// Checks a captured IPv4 packet (IP header onwards) with the kernel's CRC.
    fn check(packet: &[u8]) -> Result<(), ParseError> {
        let (ip, rest) = Ipv4Header::ref_from_prefix(packet).map_err(|_| ParseError::Truncated)?;
        let (udp, payload) = UdpHeader::ref_from_prefix(rest).map_err(|_| ParseError::Truncated)?;
        parse(payload, IpHeader::V4(ip), udp, &KernelCrc32).map(|_| ())
    }

    #[test]
    fn crc32_le_is_the_ieee_crc() {
        assert_eq!(!KernelCrc32.crc32_le(!0, b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn captured_packets_verify() {
        for v in VECTORS {
            assert_eq!(check(v), Ok(()));
        }
    }

    #[test]
    fn a_flipped_bit_fails_the_check() {
        let mut buf = [0u8; 1100];
        for v in VECTORS {
            let n = v.len();
            let Some(p) = buf.get_mut(..n) else {
                panic!("vector longer than the buffer");
            };
            // A payload or header bit after the IP and UDP headers, the opcode's low bit, and
            // the last ICRC bit: none of them is masked.
            for (byte, bit) in [(n - 10, 3), (28, 0), (n - 1, 7)] {
                p.copy_from_slice(v);
                p[byte] ^= 1 << bit;
                assert!(check(p).is_err());
            }
        }
    }
}
