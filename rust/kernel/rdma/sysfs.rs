// SPDX-License-Identifier: GPL-2.0

//! Device attributes in sysfs (`/sys/class/infiniband/<dev>/`).

use crate::{
    bindings,
    ffi::c_char,
    str::as_char_ptr_in_const_context as c_ptr, //
};

/// A C structure the core only reads, shareable between threads.
#[repr(transparent)]
pub(crate) struct Shared<T>(T);

// SAFETY: The wrapped structures are never written after initialisation (by Rust or C); they
// only hold pointers to other statics and to functions.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// Returns a pointer to the structure, for the core.
    pub(crate) const fn as_ptr(&'static self) -> *const T {
        &raw const self.0
    }
}

/// `parent`: the name of the netdevice behind port 1, as the C Soft-RoCE driver shows it.
#[allow(
    clippy::needless_update,
    reason = "`struct attribute` has more fields with lockdep"
)]
static PARENT: Shared<bindings::device_attribute> = Shared(bindings::device_attribute {
    attr: bindings::attribute {
        name: c_ptr(c"parent"),
        mode: 0o444,
        // Lockdep's fields, when configured: a static attribute needs no key.
        ..pin_init::zeroed()
    },
    __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 {
        show: Some(parent_show),
    },
    __bindgen_anon_2: bindings::device_attribute__bindgen_ty_2 { store: None },
});

/// The null-terminated attribute list of [`PARENT_GROUP`].
static PARENT_ATTRS: Shared<[*const bindings::attribute; 2]> =
    Shared([&raw const PARENT.0.attr, core::ptr::null()]);

/// An attribute group with the `parent` attribute, for `device_group` of a RoCE device.
pub(crate) static PARENT_GROUP: Shared<bindings::attribute_group> =
    Shared(bindings::attribute_group {
        __bindgen_anon_2: bindings::attribute_group__bindgen_ty_2 {
            attrs_const: PARENT_ATTRS.as_ptr().cast(),
        },
        ..pin_init::zeroed()
    });

/// # Safety
///
/// Called by sysfs only, for an attribute of [`PARENT_GROUP`] of a registered RDMA device,
/// with a page-sized buffer.
unsafe extern "C" fn parent_show(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: The device attributes of an RDMA device live in its `ib_core_device`, which
    // starts with the `struct device` (`rdma_device_to_ibdev`).
    let ibdev = unsafe { (*dev.cast::<bindings::ib_core_device>()).owner };
    // SAFETY: The RDMA device is registered while its attributes exist.
    let ndev = unsafe { bindings::ib_device_get_netdev(ibdev, 1) };
    if ndev.is_null() {
        return -(bindings::ENODEV as isize);
    }
    // SAFETY: `buf` is sysfs's page; the netdevice is held and its name NUL-terminated.
    let n = unsafe { bindings::sysfs_emit(buf, c_ptr(c"%s\n"), (*ndev).name.as_ptr()) };
    // SAFETY: `ib_device_get_netdev` returned a held reference.
    unsafe { bindings::dev_put(ndev) };
    n as isize
}
