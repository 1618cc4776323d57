// SPDX-License-Identifier: GPL-2.0

//! Verbs objects that the RDMA core allocates at the driver's size.
//!
//! For each of these the driver declares a size in its ops (`INIT_RDMA_OBJ_SIZE`); the core
//! allocates that much zeroed memory, fills in the C structure at its start and calls the
//! driver's create op, which initialises the driver's part; the destroy op drops it, and the
//! core frees the memory. The containers here have that layout: the C structure first (so
//! the core's pointer is the container's), the driver's data after it.

use crate::{
    alloc::KBox,
    bindings,
    error::Result,
    prelude::GFP_KERNEL,
    rdma::{
        device::Device,
        driver::Driver,
        event::{
            CqHandle,
            QpHandle,
            SrqHandle, //
        },
    },
    types::Opaque, //
};
use core::ops::Deref;

macro_rules! core_object {
    ($(#[$m:meta])* $name:ident, $c:ident, $data:ident $(, $handle:ident)?) => {
        $(#[$m])*
        ///
        /// # Invariants
        ///
        /// The C structure is at offset 0 of an allocation of the size of `Self`, made by the
        /// core. The data is initialised from the driver's create op returning success until
        /// the destroy op, the only window in which a reference to `Self` is handed out. A
        /// queue's handle is `Some` over the same window and is revoked by the destroy op
        /// before the data is dropped, so no completion or event reaches a freed object.
        #[repr(C)]
        pub struct $name<T: Driver> {
            raw: Opaque<bindings::$c>,
            $(
                /// The handle the driver's asynchronous paths reach the object through;
                /// `Some` from before the create op to the destroy op.
                handle: Option<$handle>,
            )?
            data: T::$data,
        }

        impl<T: Driver> Deref for $name<T> {
            type Target = T::$data;

            fn deref(&self) -> &T::$data {
                &self.data
            }
        }

        impl<T: Driver> $name<T> {
            /// Returns the raw pointer.
            pub fn as_raw(&self) -> *mut bindings::$c {
                self.raw.get()
            }

            /// Returns the device this object belongs to.
            pub fn device(&self) -> &Device<T> {
                // SAFETY: An object never outlives its device, which is of driver `T` since
                // the core sized this object from `T`'s ops.
                unsafe { Device::from_raw((*self.as_raw()).device) }
            }

            /// Creates a reference from a raw pointer.
            ///
            /// # Safety
            ///
            /// `ptr` must be an object of driver `T` whose data is initialised for `'a`.
            #[allow(dead_code, reason = "not every object kind is looked up from C yet")]
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::$c) -> &'a Self {
                // SAFETY: The C structure is the first field of the `repr(C)` container.
                unsafe { &*ptr.cast() }
            }

            /// Returns a pointer to the data field of the object at `ptr`.
            ///
            /// # Safety
            ///
            /// `ptr` must point to an allocation of the size of `Self`.
            pub(crate) unsafe fn data_ptr(ptr: *mut bindings::$c) -> *mut T::$data {
                // SAFETY: The caller guarantees the allocation covers `Self`.
                unsafe { &raw mut (*ptr.cast::<Self>()).data }
            }

            /// Returns the device of the object at `ptr`, whose data may be uninitialised.
            ///
            /// # Safety
            ///
            /// `ptr` must be an object the core allocated for a device of driver `T`, with
            /// its `device` field set.
            pub(crate) unsafe fn device_of<'a>(ptr: *mut bindings::$c) -> &'a Device<T> {
                // SAFETY: The core sets `device` before calling the driver, and the device
                // outlives its objects.
                unsafe { Device::from_raw((*ptr).device) }
            }

            $(
                /// Returns the object's handle.
                pub fn handle(&self) -> &$handle {
                    // By the type invariant the handle is set while a reference exists.
                    self.handle.as_ref().unwrap_or_else(|| unreachable!())
                }

                /// Creates the handle of the new object at `ptr`; returns a clone for the
                /// driver.
                ///
                /// # Safety
                ///
                /// `ptr` must be an object the core allocated for driver `T`, before its
                /// create op; [`Self::drop_handle`] must be called before it is freed.
                pub(crate) unsafe fn init_handle(ptr: *mut bindings::$c) -> Result<$handle> {
                    // SAFETY: The caller guarantees `drop_handle` (which revokes) runs before
                    // the core frees the object.
                    let handle = unsafe { $handle::new(ptr, GFP_KERNEL)? };
                    // SAFETY: The field is valid for writes and holds nothing yet.
                    unsafe { (&raw mut (*ptr.cast::<Self>()).handle).write(Some(handle.clone())) };
                    Ok(handle)
                }

                /// Revokes and drops the handle of the object at `ptr`.
                ///
                /// # Safety
                ///
                /// [`Self::init_handle`] succeeded for `ptr`, and this is called once.
                pub(crate) unsafe fn drop_handle(ptr: *mut bindings::$c) {
                    // SAFETY: The caller guarantees the field was initialised and is dropped
                    // once.
                    let field = unsafe { &raw mut (*ptr.cast::<Self>()).handle };
                    // SAFETY: See above.
                    if let Some(h) = unsafe { &*field } {
                        h.revoke();
                    }
                    // SAFETY: See above.
                    unsafe { core::ptr::drop_in_place(field) };
                }
            )?
        }
    };
}

core_object!(
    /// A user context (`struct ib_ucontext`): one per open of the device by a process.
    UContext,
    ib_ucontext,
    UContext
);

core_object!(
    /// A protection domain (`struct ib_pd`).
    Pd,
    ib_pd,
    Pd
);

core_object!(
    /// A completion queue (`struct ib_cq`).
    Cq,
    ib_cq,
    Cq,
    CqHandle
);

core_object!(
    /// A queue pair (`struct ib_qp`).
    Qp,
    ib_qp,
    Qp,
    QpHandle
);

core_object!(
    /// A shared receive queue (`struct ib_srq`).
    Srq,
    ib_srq,
    Srq,
    SrqHandle
);

core_object!(
    /// An address handle (`struct ib_ah`).
    Ah,
    ib_ah,
    Ah
);

core_object!(
    /// A memory window (`struct ib_mw`).
    Mw,
    ib_mw,
    Mw
);

/// A memory region (`struct ib_mr`) of driver `T`.
///
/// Unlike the objects above, the driver allocates memory regions: the container is a
/// [`KBox`] that the driver's `reg_user_mr` creates and `dereg_mr` frees.
///
/// # Invariants
///
/// `raw` is at offset 0; the data is initialised for the lifetime of the container.
#[repr(C)]
pub struct Mr<T: Driver> {
    raw: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

impl<T: Driver> Mr<T> {
    /// Returns the page size a kernel consumer chose for a fast-registration region.
    ///
    /// Meaningful in `map_mr_sg`, where the core has just set it.
    pub fn page_size(&self) -> u32 {
        // SAFETY: The region is live; `page_size` is plain data the core writes before calling
        // `map_mr_sg`, and not concurrently with it.
        unsafe { (*self.raw.get()).page_size }
    }

    /// Allocates a region holding `data`, with keys `lkey` and `rkey`.
    pub(crate) fn alloc(data: T::Mr, lkey: u32, rkey: u32) -> Result<*mut bindings::ib_mr> {
        let mr = KBox::new(
            Self {
                raw: Opaque::zeroed(),
                data,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(mr).cast::<bindings::ib_mr>();
        // SAFETY: `raw` is the zeroed `ib_mr` at the start of the new container, ours alone.
        unsafe {
            (*raw).lkey = lkey;
            (*raw).rkey = rkey;
        }
        Ok(raw)
    }

    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`Mr::alloc`] for driver `T` and not be freed for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: `ib_mr` is the first field of the `repr(C)` container.
        unsafe { &*ptr.cast() }
    }

    /// Frees a region.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`Mr::alloc`] for driver `T`; nothing may use it afterwards.
    pub(crate) unsafe fn free(ptr: *mut bindings::ib_mr) {
        // SAFETY: The container was leaked from a `KBox` in `alloc`.
        drop(unsafe { KBox::from_raw(ptr.cast::<Self>()) });
    }
}
