// SPDX-License-Identifier: GPL-2.0

//! Page faults of memory registered for on-demand paging.
//!
//! A run copies in softirq, or in process context with its transport locked: it cannot sleep
//! for a page fault. A page it finds not present stops the operation without a trace (the
//! core's [`AccessError::NotPresent`]) and the run notes the range here ([`note`]). When the
//! run ends, the queue pair's fault work is queued; it faults the range in, in process
//! context, and runs the queue pair again. Meanwhile the peer retries what was refused: the
//! responder answered with an RNR NAK (as hardware RNICs do for their page faults), or the
//! requester took a response it could not place as lost. A send the requester could not
//! gather waits in the send queue for that run.
//!
//! A fault that fails (the process unmapped the memory, or maps it read-only where the
//! device writes) is not tried forever: the next access of the queue pair to that range
//! fails as out of range, and the operation completes with an error as on a pinned region.

use crate::{
    mr::MrShared,
    qp::QpShared,
    roce::memory::AccessError, //
};
use kernel::{
    error::code::EFAULT,
    sync::Arc,
    workqueue::{
        self,
        WorkItem, //
    },
};

/// The work item of a queue pair's page faults ([`QpShared`]'s third).
pub(crate) const FAULT: u64 = 2;

/// Bytes a fault brings in, at most, for one access that met a page not present: a request's
/// check ([`note_request`]) asks for its first this many bytes, and a packet's copy
/// ([`note`]) for this many from its own on, the rest of its message likely among them.
const FAULT_AHEAD: usize = 8 << 20;

/// A range of a region to fault in.
#[derive(Clone, Copy)]
pub(crate) struct FaultRequest {
    /// The region's key.
    key: u32,
    /// The first byte, an offset in the region.
    off: u64,
    /// The bytes the access needs: a fault that fails them fails the access.
    len: usize,
    /// The bytes after them brought in too if they can be, failures ignored: a region may
    /// have holes beyond what its accesses reach.
    ahead: usize,
    /// For writing.
    write: bool,
}

impl FaultRequest {
    /// Returns whether `len` bytes at `off` of the region `key` meet the bytes this request
    /// needs.
    fn meets(&self, key: u32, off: u64, len: usize) -> bool {
        let end = |o: u64, n: usize| o.saturating_add(n as u64);
        key == self.key && off < end(self.off, self.len) && self.off < end(off, len.max(1))
    }
}

/// Notes, for queue pair `qp`'s fault work, that a copy of `len` bytes at byte `off` of `mr`
/// (a write if `write`) met a page not present; returns what the copy fails with.
pub(crate) fn note(qp: &QpShared, mr: &MrShared, off: u64, len: usize, write: bool) -> AccessError {
    let rest = usize::try_from(mr.length().saturating_sub(off)).unwrap_or(usize::MAX);
    let ahead = rest.min(FAULT_AHEAD).saturating_sub(len);
    note_range(qp, mr, off, len, ahead, write)
}

/// Notes, as [`note`] does, that the first bytes of a request's `len` at byte `off` of `mr`
/// are not all present; returns what the request's check fails with.
pub(crate) fn note_request(
    qp: &QpShared,
    mr: &MrShared,
    off: u64,
    len: usize,
    write: bool,
) -> AccessError {
    note_range(qp, mr, off, len.min(FAULT_AHEAD), 0, write)
}

/// Returns how many bytes of a request's `len` its check looks at ([`note_request`]).
pub(crate) fn request_span(len: usize) -> usize {
    len.min(FAULT_AHEAD)
}

/// Notes a range to fault in; returns [`AccessError::NotPresent`], or, for an access that
/// meets a range whose fault failed, [`AccessError::OutOfRange`]: the operation then fails
/// as on a pinned region rather than wait for a page that does not come.
fn note_range(
    qp: &QpShared,
    mr: &MrShared,
    off: u64,
    len: usize,
    ahead: usize,
    write: bool,
) -> AccessError {
    let key = mr.key();
    let mut inbox = qp.inbox.lock();
    if inbox.fault_failed.is_some_and(|f| f.meets(key, off, len)) {
        inbox.fault_failed = None;
        return AccessError::OutOfRange;
    }
    // One range at a time: an access that meets another is refused again after this fault,
    // and noted then.
    inbox.fault.get_or_insert(FaultRequest {
        key,
        off,
        len,
        ahead,
        write,
    });
    AccessError::NotPresent
}

impl QpShared {
    /// Queues the fault work; the caller saw a range noted ([`note`]) and the queue pair not
    /// dying, under the inbox's lock.
    pub(crate) fn queue_fault(this: &Arc<Self>) {
        // A fault is the process's: its queue pair runs on the system's queue, which has no
        // rescuer (a fault may allocate, and must not run from memory reclaim).
        let _ = workqueue::system_dfl().enqueue::<Arc<Self>, FAULT>(this.clone());
    }

    /// Faults in the range noted for this queue pair, then runs it again.
    fn fault(this: Arc<Self>) {
        let Some(req) = this.inbox.lock().fault.take() else {
            // Taken by an earlier run of this work, or dropped by `stop`.
            return;
        };
        let done = match this.engine.region(req.key) {
            Some(mr) => {
                let fault = |off: u64, len: usize| mr.fault(off, len, req.write, false);
                // A page invalidated right after its fault fails it (`EFAULT`): once more.
                let done = fault(req.off, req.len)
                    .or_else(|e| {
                        if e == EFAULT {
                            fault(req.off, req.len)
                        } else {
                            Err(e)
                        }
                    })
                    .is_ok();
                if done && req.ahead > 0 {
                    // Best effort: a hole beyond what the access needs is no failure.
                    let _ = fault(req.off.saturating_add(req.len as u64), req.ahead);
                }
                done
            }
            // Gone meanwhile: the access finds no region now.
            None => true,
        };
        {
            let mut inbox = this.inbox.lock();
            if inbox.is_dying() {
                return;
            }
            if !done {
                inbox.fault_failed = Some(req);
            } else if inbox
                .fault_failed
                .is_some_and(|f| f.meets(req.key, req.off, req.len))
            {
                inbox.fault_failed = None;
            }
            // A send that found its buffer not present waits for a run that sends.
            inbox.kick();
        }
        Self::schedule(this.as_arc_borrow());
    }
}

impl WorkItem<FAULT> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        Self::fault(this);
    }
}
