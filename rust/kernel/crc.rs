// SPDX-License-Identifier: GPL-2.0

//! Cyclic redundancy checks from the kernel's CRC library.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h)

use crate::bindings;

/// Continues the little-endian (reflected) IEEE 802.3 CRC-32 `crc` over `data` (`crc32_le`).
///
/// No inversion is applied on input or output: callers seed with `!0` and invert the result
/// for the standard CRC-32.
#[inline]
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of its length.
    unsafe { bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}
