// SPDX-License-Identifier: GPL-2.0

//! The container of a verbs object that the RDMA core allocates at the driver's size.
//!
//! For each of these the driver declares a size in its ops (`INIT_RDMA_OBJ_SIZE`); the core
//! allocates that much zeroed memory, fills in the C structure at its start and calls the
//! driver's create op, which initialises the driver's part; the destroy op drops it, and the
//! core frees the memory. The containers made by [`core_object!`] have that layout: the C
//! structure first (so the core's pointer is the container's), the driver's data after it.
//! Each object kind's file instantiates it ([`super::cq::Cq`], [`super::qp::Qp`], ...).

/// Defines the container `$name<T>` of the core's `struct $c` with the driver's data
/// `T::$data`, and optionally the handle type through which the driver reaches it.
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
        pub struct $name<T: $crate::rdma::driver::Driver> {
            raw: $crate::types::Opaque<$crate::bindings::$c>,
            $(
                /// The handle the driver's asynchronous paths reach the object through;
                /// `Some` from before the create op to the destroy op.
                handle: Option<$handle>,
            )?
            data: T::$data,
        }

        impl<T: $crate::rdma::driver::Driver> core::ops::Deref for $name<T> {
            type Target = T::$data;

            fn deref(&self) -> &T::$data {
                &self.data
            }
        }

        impl<T: $crate::rdma::driver::Driver> $name<T> {
            /// Returns the raw pointer.
            pub fn as_raw(&self) -> *mut $crate::bindings::$c {
                self.raw.get()
            }

            /// Returns the device this object belongs to.
            pub fn device(&self) -> &$crate::rdma::device::Device<T> {
                // SAFETY: An object never outlives its device, which is of driver `T` since
                // the core sized this object from `T`'s ops.
                unsafe { $crate::rdma::device::Device::from_raw((*self.as_raw()).device) }
            }

            /// Creates a reference from a raw pointer.
            ///
            /// # Safety
            ///
            /// `ptr` must be an object of driver `T` whose data is initialised for `'a`.
            #[allow(dead_code, reason = "not every object kind is looked up from C yet")]
            pub(crate) unsafe fn from_raw<'a>(ptr: *mut $crate::bindings::$c) -> &'a Self {
                // SAFETY: The C structure is the first field of the `repr(C)` container.
                unsafe { &*ptr.cast() }
            }

            /// Returns a pointer to the data field of the object at `ptr`.
            ///
            /// # Safety
            ///
            /// `ptr` must point to an allocation of the size of `Self`.
            pub(crate) unsafe fn data_ptr(ptr: *mut $crate::bindings::$c) -> *mut T::$data {
                // SAFETY: The caller guarantees the allocation covers `Self`.
                unsafe { &raw mut (*ptr.cast::<Self>()).data }
            }

            /// Returns the device of the object at `ptr`, whose data may be uninitialised.
            ///
            /// # Safety
            ///
            /// `ptr` must be an object the core allocated for a device of driver `T`, with
            /// its `device` field set.
            pub(crate) unsafe fn device_of<'a>(ptr: *mut $crate::bindings::$c) -> &'a $crate::rdma::device::Device<T> {
                // SAFETY: The core sets `device` before calling the driver, and the device
                // outlives its objects.
                unsafe { $crate::rdma::device::Device::from_raw((*ptr).device) }
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
                pub(crate) unsafe fn init_handle(ptr: *mut $crate::bindings::$c) -> $crate::error::Result<$handle> {
                    // SAFETY: The caller guarantees `drop_handle` (which revokes) runs before
                    // the core frees the object.
                    let handle = unsafe { $handle::new(ptr, $crate::alloc::flags::GFP_KERNEL)? };
                    // SAFETY: The field is valid for writes and holds nothing yet.
                    unsafe { (&raw mut (*ptr.cast::<Self>()).handle).write(Some(handle.clone())) };
                    Ok(handle)
                }

                /// Revokes and drops the handle of the object at `ptr`.
                ///
                /// # Safety
                ///
                /// [`Self::init_handle`] succeeded for `ptr`, and this is called once.
                pub(crate) unsafe fn drop_handle(ptr: *mut $crate::bindings::$c) {
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
