// SPDX-License-Identifier: GPL-2.0

//! Completions and asynchronous events, delivered to the owners of verbs objects.
//!
//! A driver's data path finds its objects by number, not through the core, so it may still
//! hold a reference to a queue's state while the core destroys the queue. It reaches the core's
//! object only through a handle ([`CqHandle`], [`QpHandle`], [`SrqHandle`]) that the create op
//! hands out and the destroy op revokes before the core frees the object: a completion
//! notification or an event on a destroyed object is dropped instead of touching freed memory.
//!
//! The core's handlers (`comp_handler`, `event_handler`) run with the handle's lock held and
//! local interrupts off, as they would from a hardware driver's interrupt: they must not sleep,
//! which the core's own handlers (uverbs, `ib_alloc_cq` polling contexts) respect.

use crate::{
    alloc::Flags,
    bindings,
    error::Result,
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        SpinLockIrq, //
    },
};
use core::ptr::NonNull;

/// A pointer to a core object, sendable because the handle's lock guards every use.
struct Live<C>(NonNull<C>);

// SAFETY: The pointer is only dereferenced under the handle's lock, from any thread.
unsafe impl<C> Send for Live<C> {}

/// The shared part of a handle.
///
/// # Invariants
///
/// While `ptr` holds `Some`, it points to a live core object: the destroy op of the object
/// sets `None` (taking the lock, so waiting for any delivery in progress) before the core
/// frees it.
#[pin_data]
struct Inner<C> {
    #[pin]
    ptr: SpinLockIrq<Option<Live<C>>>,
}

macro_rules! handle {
    ($(#[$m:meta])* $name:ident, $c:ident) => {
        $(#[$m])*
        #[derive(Clone)]
        pub struct $name(Arc<Inner<bindings::$c>>);

        impl $name {
            /// Creates a live handle on the object at `ptr`.
            ///
            /// # Safety
            ///
            /// `ptr` must point to a core object that stays allocated until [`Self::revoke`]
            /// is called on this handle (or one of its clones).
            pub(crate) unsafe fn new(ptr: *mut bindings::$c, flags: Flags) -> Result<Self> {
                let ptr = NonNull::new(ptr).ok_or(EINVAL)?;
                // INVARIANT: The caller guarantees `ptr` is live until `revoke`.
                let inner = Arc::pin_init(
                    pin_init!(Inner {
                        ptr <- new_spinlock_irq!(Some(Live(ptr))),
                    }),
                    flags,
                )?;
                Ok(Self(inner))
            }

            /// Marks the object as gone; waits for a delivery in progress to end.
            pub(crate) fn revoke(&self) {
                *self.0.ptr.lock() = None;
            }

            /// Runs `f` on the object if it is still alive, with the handle's lock held.
            pub(crate) fn with<R>(&self, f: impl FnOnce(*mut bindings::$c) -> R) -> Option<R> {
                let guard = self.0.ptr.lock();
                guard.as_ref().map(|live| f(live.0.as_ptr()))
            }

            /// Returns whether the object has not been destroyed yet.
            pub fn is_alive(&self) -> bool {
                self.with(|_| ()).is_some()
            }
        }
    };
}

handle!(
    /// A handle on a completion queue (`struct ib_cq`): completion notifications and events.
    CqHandle,
    ib_cq
);

handle!(
    /// A handle on a queue pair (`struct ib_qp`): events, and the queue pair of a completion.
    QpHandle,
    ib_qp
);

handle!(
    /// A handle on a shared receive queue (`struct ib_srq`): events.
    SrqHandle,
    ib_srq
);

/// An asynchronous event on a completion queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqEvent {
    /// The queue overflowed (`IB_EVENT_CQ_ERR`).
    Error,
}

/// An asynchronous event on a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The first packet arrived on a queue pair in RTR (`IB_EVENT_COMM_EST`).
    CommEstablished,
    /// Send queue drained (`IB_EVENT_SQ_DRAINED`).
    SqDrained,
    /// The last WQE of a queue pair on an SRQ was consumed (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
    /// A local work queue catastrophic error (`IB_EVENT_QP_FATAL`).
    Fatal,
    /// An invalid request from the remote side (`IB_EVENT_QP_REQ_ERR`).
    RequestError,
    /// A local access violation (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
}

/// An asynchronous event on a shared receive queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqEvent {
    /// Fewer receive WQEs than the armed limit remain (`IB_EVENT_SRQ_LIMIT_REACHED`).
    LimitReached,
    /// A catastrophic error (`IB_EVENT_SRQ_ERR`).
    Error,
}

/// The handler type of `ib_cq`, `ib_qp` and `ib_srq`.
type EventHandler = Option<unsafe extern "C" fn(*mut bindings::ib_event, *mut crate::ffi::c_void)>;

/// Calls `handler` with an event of type `event` on the object `set_element` records.
///
/// # Safety
///
/// `handler` and `context` must be those of a live object of `device`.
unsafe fn deliver(
    handler: EventHandler,
    context: *mut crate::ffi::c_void,
    device: *mut bindings::ib_device,
    event: bindings::ib_event_type,
    set_element: impl FnOnce(&mut bindings::ib_event),
) {
    let Some(handler) = handler else {
        return;
    };
    let mut ev: bindings::ib_event = pin_init::zeroed();
    ev.device = device;
    ev.event = event;
    set_element(&mut ev);
    // SAFETY: The caller guarantees the handler belongs to a live object, and `ev` is valid for
    // the call.
    unsafe { handler(&mut ev, context) };
}

impl CqHandle {
    /// Calls the owner's completion handler, as an interrupt would for a hardware queue.
    ///
    /// The driver calls this when a completion it added matches the armed notification.
    pub fn notify(&self) {
        self.with(|cq| {
            // SAFETY: `cq` is live (the handle's invariant, lock held); the core sets
            // `comp_handler` and `cq_context` before the queue can receive completions.
            unsafe {
                if let Some(handler) = (*cq).comp_handler {
                    handler(cq, (*cq).cq_context);
                }
            }
        });
    }

    /// Reports an asynchronous event on the queue to its owner.
    pub fn event(&self, event: CqEvent) {
        let event = match event {
            CqEvent::Error => bindings::ib_event_type_IB_EVENT_CQ_ERR,
        };
        self.with(|cq| {
            // SAFETY: `cq` is live (the handle's invariant, lock held).
            unsafe {
                deliver(
                    (*cq).event_handler,
                    (*cq).cq_context,
                    (*cq).device,
                    event,
                    |ev| ev.element.cq = cq,
                )
            }
        });
    }
}

impl QpHandle {
    /// Reports an asynchronous event on the queue pair to its owner.
    pub fn event(&self, event: QpEvent) {
        let event = match event {
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
        };
        self.with(|qp| {
            // SAFETY: `qp` is live (the handle's invariant, lock held).
            unsafe {
                deliver(
                    (*qp).event_handler,
                    (*qp).qp_context,
                    (*qp).device,
                    event,
                    |ev| ev.element.qp = qp,
                )
            }
        });
    }
}

impl SrqHandle {
    /// Reports an asynchronous event on the queue to its owner.
    pub fn event(&self, event: SrqEvent) {
        let event = match event {
            SrqEvent::LimitReached => bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            SrqEvent::Error => bindings::ib_event_type_IB_EVENT_SRQ_ERR,
        };
        self.with(|srq| {
            // SAFETY: `srq` is live (the handle's invariant, lock held).
            unsafe {
                deliver(
                    (*srq).event_handler,
                    (*srq).srq_context,
                    (*srq).device,
                    event,
                    |ev| ev.element.srq = srq,
                )
            }
        });
    }
}
