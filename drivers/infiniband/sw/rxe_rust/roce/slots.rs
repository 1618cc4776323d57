// SPDX-License-Identifier: GPL-2.0

//! Fixed-size storage for the transport's slots, owned by the caller.

use core::borrow::{
    Borrow,
    BorrowMut, //
};

/// Storage for a fixed number of slots, each empty or holding a `T`: anything that lends
/// itself as a slice of them.
///
/// An array serves where the count is small and known at build time; the kernel passes a
/// vector it allocated once, so that a large transport state is never built on a stack. The
/// number of slots is the length of the slice, and the core never changes it.
pub trait Slots<T>: Borrow<[Option<T>]> + BorrowMut<[Option<T>]> {}

impl<T, S> Slots<T> for S where S: Borrow<[Option<T>]> + BorrowMut<[Option<T>]> {}
