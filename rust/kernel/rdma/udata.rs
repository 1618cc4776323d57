// SPDX-License-Identifier: GPL-2.0

//! User data of a verb: the driver-specific input and output of a user-space call.

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    rdma::{
        driver::Driver,
        ucontext::UContext, //
    },
};
use core::marker::PhantomData;
use zerocopy::{
    FromBytes,
    Immutable,
    IntoBytes, //
};

/// The driver-specific part of a verb's request and response (`struct ib_udata`) of a call
/// to a device of driver `T`.
///
/// Absent (`None` inside) when the verb comes from a kernel caller. The second field tells
/// whether the udata is the `driver_udata` of a uverbs call's attribute bundle (the core also
/// passes udata of its own, e.g. to `query_device` at registration).
///
/// # Invariants
///
/// If the second field is `true`, the udata is the `driver_udata` of the attribute bundle of
/// a uverbs call on a device of driver `T`, so the bundle's user context is a context of `T`.
pub struct UData<'a, T: Driver>(Option<&'a mut bindings::ib_udata>, bool, PhantomData<T>);

impl<'a, T: Driver> UData<'a, T> {
    /// Wraps a raw pointer, which may be null.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or valid and unaliased for `'a`.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::ib_udata) -> Self {
        // INVARIANT: The second field is `false`.
        // SAFETY: The caller guarantees validity and uniqueness for `'a`.
        Self(unsafe { ptr.as_mut() }, false, PhantomData)
    }

    /// Wraps a raw pointer, which may be null, to the `driver_udata` of a uverbs call.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or the `driver_udata` of a `struct uverbs_attr_bundle` of a call on
    /// a device of driver `T`, valid and unaliased for `'a`.
    pub(crate) unsafe fn from_bundle(ptr: *mut bindings::ib_udata) -> Self {
        // INVARIANT: The caller guarantees the bundle is of a call on a device of `T`.
        // SAFETY: The caller guarantees validity and uniqueness for `'a`.
        Self(unsafe { ptr.as_mut() }, true, PhantomData)
    }

    /// Returns whether the call came from user space.
    pub fn is_user(&self) -> bool {
        self.0.is_some()
    }

    /// Returns whether this is the udata of a uverbs system call: the current task is then
    /// the calling process, with its memory.
    pub(crate) fn is_uverbs_call(&self) -> bool {
        self.0.is_some() && self.1
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

    /// Returns the length of the driver input user space sent, in bytes.
    pub fn inlen(&self) -> usize {
        self.0.as_deref().map_or(0, |u| u.inlen)
    }

    /// Returns the space user space offered for the driver's response, in bytes.
    pub fn outlen(&self) -> usize {
        self.0.as_deref().map_or(0, |u| u.outlen)
    }

    /// Returns the user context of the call, if it came from user space.
    ///
    /// The context's driver is the driver of the call's device, fixed by the type: a driver
    /// cannot view another driver's context as its own.
    pub fn ucontext(&self) -> Option<&UContext<T>> {
        if !self.1 {
            return None;
        }
        let u = self.0.as_deref()?;
        // SAFETY: By the type invariant `u` is the `driver_udata` of an attribute bundle, which
        // is what `rdma_udata_to_ucontext` takes.
        let ctx = unsafe { bindings::rdma_udata_to_ucontext(core::ptr::from_ref(u).cast_mut()) };
        if ctx.is_null() {
            return None;
        }
        // SAFETY: The context outlives the call (the core holds it for the call's duration) and,
        // by the type invariant, belongs to a device of driver `T`, so it is a `UContext<T>`.
        Some(unsafe { UContext::from_raw(ctx) })
    }

    /// Reads the driver's request, `S`, from user space.
    ///
    /// A shorter input is refused (`EINVAL`), a longer one only if the excess is not zero
    /// (`EOPNOTSUPP`), as `ib_copy_validate_udata_in` does. A kernel call gets zeroes.
    pub fn read_in<S: FromBytes + IntoBytes>(&mut self) -> Result<S> {
        let mut req = S::new_zeroed();
        if let Some(u) = self.0.as_deref_mut() {
            let size = core::mem::size_of::<S>();
            // SAFETY: `u` is valid; `req` is valid for writes of its size.
            to_result(unsafe {
                bindings::_ib_copy_validate_udata_in(
                    u,
                    req.as_mut_bytes().as_mut_ptr().cast(),
                    size,
                    size,
                )
            })?;
        }
        Ok(req)
    }

    /// Writes the driver's response `rep`, truncated to the space offered and zero padded.
    pub fn respond<S: IntoBytes + Immutable>(&mut self, rep: &S) -> Result {
        match self.0.as_deref_mut() {
            None => Ok(()),
            Some(u) => {
                let b = rep.as_bytes();
                // SAFETY: `u` is valid; `b` is valid for reads of its length.
                to_result(unsafe { bindings::_ib_respond_udata(u, b.as_ptr().cast(), b.len()) })
            }
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
