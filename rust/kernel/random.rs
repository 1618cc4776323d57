// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

use crate::bindings;

/// Fills `buf` with random bytes (`get_random_bytes`).
pub fn fill_bytes(buf: &mut [u8]) {
    // SAFETY: `buf` is valid for writes of its length.
    unsafe { bindings::get_random_bytes(buf.as_mut_ptr().cast(), buf.len()) };
}
