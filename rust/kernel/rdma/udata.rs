// SPDX-License-Identifier: GPL-2.0

//! User data of a verb: the driver-specific input and output of a user-space call.

use crate::{
    bindings,
    error::to_result,
    prelude::*, //
};

/// The driver-specific part of a verb's request and response (`struct ib_udata`).
///
/// Absent (`None` inside) when the verb comes from a kernel caller.
pub struct UData<'a>(Option<&'a mut bindings::ib_udata>);

impl<'a> UData<'a> {
    /// Wraps a raw pointer, which may be null.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or valid and unaliased for `'a`.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::ib_udata) -> Self {
        // SAFETY: The caller guarantees validity and uniqueness for `'a`.
        Self(unsafe { ptr.as_mut() })
    }

    /// Returns whether the call came from user space.
    pub fn is_user(&self) -> bool {
        self.0.is_some()
    }

    /// Fails with `EOPNOTSUPP` unless the input is absent or all zero.
    ///
    /// A verb that takes no driver input must refuse input it would otherwise ignore.
    pub fn check_in_empty(&mut self) -> Result {
        match self.0.as_deref_mut() {
            None => Ok(()),
            // SAFETY: `u` is a valid udata.
            Some(u) => to_result(unsafe { bindings::ib_is_udata_in_empty(u) }),
        }
    }

    /// Answers with an empty driver response, clearing any output space user space offered.
    pub fn respond_empty(&mut self) -> Result {
        match self.0.as_deref_mut() {
            None => Ok(()),
            // SAFETY: `u` is a valid udata.
            Some(u) => to_result(unsafe { bindings::ib_respond_empty_udata(u) }),
        }
    }
}
