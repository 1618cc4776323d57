// SPDX-License-Identifier: GPL-2.0

//! Buffers that bytes are appended to.
//!
//! A byte becomes part of such a buffer only once it is written, so its free space needs no
//! clearing first. A copy out of memory that Rust code may not reference (a process's pinned
//! pages, which the process writes at any time) writes straight into that free space: a
//! packet's payload goes from a memory region into the socket buffer it leaves in, written
//! once.

use crate::{
    alloc::{
        Allocator,
        Vec, //
    },
    prelude::*, //
};

/// A buffer that bytes are appended to, within room set aside beforehand.
///
/// Its free space (the room) is reachable only through `&mut self`, and a byte there becomes
/// part of the buffer only once written: no reference can see one that was not.
pub trait Append {
    /// Returns how many more bytes fit.
    fn room(&self) -> usize;

    /// Appends `len` bytes copied from `src`; fails with `EINVAL`, appending nothing, if they
    /// do not fit.
    ///
    /// # Safety
    ///
    /// Unless `len` is zero, `src` must be valid for reads of `len` bytes for the duration of
    /// the call, and those bytes must not overlap the buffer's free space. Another thread may
    /// write them meanwhile (memory a process or a kernel consumer shares with the device):
    /// they are copied as plain data by `memcpy`, as the kernel copies such memory, and no
    /// reference to them is formed.
    unsafe fn append_raw(&mut self, src: *const u8, len: usize) -> Result;

    /// Appends `bytes`; fails with `EINVAL`, appending nothing, if they do not fit.
    fn append(&mut self, bytes: &[u8]) -> Result {
        // SAFETY: `bytes` is valid for reads of its length for the call; it cannot lie in the
        // free space, which only `&mut self` reaches (the trait's rule).
        unsafe { self.append_raw(bytes.as_ptr(), bytes.len()) }
    }
}

/// A vector is appended to within its capacity: appending never allocates.
impl<A: Allocator> Append for Vec<u8, A> {
    fn room(&self) -> usize {
        self.capacity() - self.len()
    }

    unsafe fn append_raw(&mut self, src: *const u8, len: usize) -> Result {
        if self.room() < len {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let spare = self.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        // SAFETY: The spare capacity holds at least `len` bytes (checked); `src` is readable
        // for `len` bytes and does not overlap it (the function's contract).
        unsafe { core::ptr::copy_nonoverlapping(src, spare, len) };
        // SAFETY: The `len` bytes after the current length were just initialised, within the
        // capacity.
        unsafe { self.inc_len(len) };
        Ok(())
    }
}

/// Appends to a slice from its start.
///
/// The slice's bytes are initialised already: this only lets a copy routine that appends
/// serve a caller with a plain slice too.
pub struct SliceAppender<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SliceAppender<'a> {
    /// Starts appending at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    /// Returns how many bytes were appended.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Append for SliceAppender<'_> {
    fn room(&self) -> usize {
        self.buf.len() - self.len
    }

    unsafe fn append_raw(&mut self, src: *const u8, len: usize) -> Result {
        let end = self.len.checked_add(len).ok_or(EINVAL)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(EINVAL)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: `src` is readable for `len` bytes and does not overlap the free space, which
        // `dst` is part of (the function's contract).
        unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), len) };
        self.len = end;
        Ok(())
    }
}

#[macros::kunit_tests(rust_kernel_append)]
mod tests {
    use super::*;
    use crate::alloc::KVec;

    /// A vector takes bytes up to its capacity, and refuses what does not fit whole.
    #[test]
    fn vector_appends_within_capacity() -> Result {
        let mut v = KVec::with_capacity(6, GFP_KERNEL)?;
        let cap = v.capacity();
        v.append(&[1, 2, 3])?;
        assert_eq!(&v[..], &[1, 2, 3]);
        assert_eq!(v.room(), cap - 3);
        let too_long = KVec::from_elem(9u8, cap - 2, GFP_KERNEL)?;
        assert_eq!(v.append(&too_long), Err(EINVAL));
        assert_eq!(&v[..], &[1, 2, 3]);
        assert_eq!(v.capacity(), cap);
        Ok(())
    }

    /// A slice is filled from its start, and what does not fit is refused whole.
    #[test]
    fn slice_appends_from_its_start() -> Result {
        let mut buf = [0u8; 5];
        let mut a = SliceAppender::new(&mut buf);
        a.append(&[7, 8])?;
        a.append(&[9])?;
        assert_eq!(a.len(), 3);
        assert_eq!(a.append(&[1, 2, 3]), Err(EINVAL));
        assert_eq!(a.room(), 2);
        assert_eq!(buf, [7, 8, 9, 0, 0]);
        Ok(())
    }
}
