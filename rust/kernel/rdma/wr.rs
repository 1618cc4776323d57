// SPDX-License-Identifier: GPL-2.0

//! Work requests of kernel consumers (`struct ib_send_wr`, `struct ib_recv_wr`), read from
//! the core's lists into typed values.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    prelude::*,
    rdma::{
        ah::Ah,
        driver::Driver,
        mr::{
            AccessFlags,
            Mr, //
        },
        virt_dma::VirtDma,
    },
};

/// A scatter/gather entry of a work request (`struct ib_sge`).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Sge(bindings::ib_sge);

impl Sge {
    /// The size of one entry, which user ABIs share (`struct ib_uverbs_sge`).
    pub const SIZE: usize = core::mem::size_of::<bindings::ib_sge>();

    /// Returns the address (virtual, in the region of the key).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }

    /// Returns the length in bytes.
    pub fn length(&self) -> u32 {
        self.0.length
    }

    /// Returns the local key of the region.
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

c_enum! {
    /// What a send work request does (`enum ib_wr_opcode`).
    pub enum WrOpcode: u32 {
        /// RDMA WRITE.
        RdmaWrite = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
        /// RDMA WRITE with immediate data.
        RdmaWriteWithImm = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
        /// SEND.
        Send = bindings::ib_wr_opcode_IB_WR_SEND,
        /// SEND with immediate data.
        SendWithImm = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
        /// RDMA READ.
        RdmaRead = bindings::ib_wr_opcode_IB_WR_RDMA_READ,
        /// Atomic compare and swap.
        AtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
        /// Atomic fetch and add.
        AtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
        /// Large send offload.
        Lso = bindings::ib_wr_opcode_IB_WR_LSO,
        /// SEND with invalidate.
        SendWithInv = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
        /// RDMA READ with invalidate.
        RdmaReadWithInv = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
        /// Local invalidate.
        LocalInv = bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
        /// Fast registration of a region.
        RegMr = bindings::ib_wr_opcode_IB_WR_REG_MR,
        /// Masked compare and swap.
        MaskedAtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
        /// Masked fetch and add.
        MaskedAtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
        /// FLUSH.
        Flush = bindings::ib_wr_opcode_IB_WR_FLUSH,
        /// ATOMIC WRITE.
        AtomicWrite = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    }
}

c_flags! {
    /// How a send work request is carried out (`enum ib_send_flags`).
    pub struct SendFlags: u32 {
        /// Wait for earlier RDMA READs and atomics.
        const FENCE = bindings::ib_send_flags_IB_SEND_FENCE;
        /// Complete with a completion.
        const SIGNALED = bindings::ib_send_flags_IB_SEND_SIGNALED;
        /// Solicit an event at the receiver.
        const SOLICITED = bindings::ib_send_flags_IB_SEND_SOLICITED;
        /// The data is copied from the buffers at post time.
        const INLINE = bindings::ib_send_flags_IB_SEND_INLINE;
        /// Offload the IP checksum.
        const IP_CSUM = bindings::ib_send_flags_IB_SEND_IP_CSUM;
    }
}

/// A send work request of a kernel consumer (`struct ib_send_wr` and the structure around it
/// that its opcode and the queue pair's type select).
pub struct SendWr<'a, T: Driver> {
    /// The consumer's id for the request (or its `struct ib_cqe` address).
    pub wr_id: u64,
    /// What to do.
    pub opcode: WrOpcode,
    /// How to do it.
    pub send_flags: SendFlags,
    /// Immediate data (network order) or the R_Key to invalidate.
    pub ex: u32,
    /// The local buffers.
    pub sges: &'a [Sge],
    /// What the opcode adds.
    pub detail: SendWrDetail<'a, T>,
}

/// The opcode-specific part of a [`SendWr`].
pub enum SendWrDetail<'a, T: Driver> {
    /// Nothing more (a SEND on a connected queue pair, a local invalidate).
    None,
    /// RDMA READ or WRITE (`struct ib_rdma_wr`).
    Rdma {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// Compare-and-swap or fetch-and-add (`struct ib_atomic_wr`).
    Atomic {
        /// Remote virtual address.
        remote_addr: u64,
        /// Value to compare with, or to add.
        compare_add: u64,
        /// Value to swap in.
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// A datagram (`struct ib_ud_wr`).
    Ud {
        /// The destination's address handle.
        ah: &'a Ah<T>,
        /// The destination queue pair.
        remote_qpn: u32,
        /// Its Q_Key.
        remote_qkey: u32,
    },
    /// Fast registration of a region's mapped pages (`struct ib_reg_wr`).
    Reg {
        /// The region.
        mr: &'a Mr<T>,
        /// Its new key.
        key: u32,
        /// Its new access rights.
        access: AccessFlags,
    },
}

impl<'a, T: Driver> SendWr<'a, T> {
    /// Reads the request at `wr` posted to `ibqp`.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid request of the core's caller and `ibqp` a live queue pair of
    /// driver `T`, both for `'a`.
    pub(crate) unsafe fn from_raw(
        wr: &'a bindings::ib_send_wr,
        ibqp: *mut bindings::ib_qp,
    ) -> Result<Self> {
        let op = WrOpcode::from_raw(wr.opcode).ok_or(EINVAL)?;
        // Registration and invalidation carry no data: their consumers need not set the list.
        let n = match op {
            WrOpcode::RegMr | WrOpcode::LocalInv => 0,
            _ => usize::try_from(wr.num_sge).map_err(|_| EINVAL)?,
        };
        let sges = if n == 0 || wr.sg_list.is_null() {
            &[][..]
        } else {
            // SAFETY: A request's `sg_list` holds `num_sge` entries; `Sge` is a transparent
            // wrapper of `ib_sge`.
            unsafe { core::slice::from_raw_parts(wr.sg_list.cast::<Sge>(), n) }
        };
        let wr_ptr: *const bindings::ib_send_wr = wr;
        // SAFETY: The caller guarantees the queue pair is live.
        let (qp_type, dev) = unsafe { ((*ibqp).qp_type, (*ibqp).device) };
        let ud =
            qp_type == bindings::ib_qp_type_IB_QPT_UD || qp_type == bindings::ib_qp_type_IB_QPT_GSI;
        let detail = match wr.opcode {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: The verbs API embeds RDMA requests in `struct ib_rdma_wr`, whose first
                // field is the `ib_send_wr`.
                let r = unsafe { &*wr_ptr.cast::<bindings::ib_rdma_wr>() };
                SendWrDetail::Rdma {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: Atomic requests are `struct ib_atomic_wr`s, as above.
                let a = unsafe { &*wr_ptr.cast::<bindings::ib_atomic_wr>() };
                SendWrDetail::Atomic {
                    remote_addr: a.remote_addr,
                    compare_add: a.compare_add,
                    swap: a.swap,
                    rkey: a.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_REG_MR => {
                // SAFETY: Registration requests are `struct ib_reg_wr`s, as above.
                let r = unsafe { &*wr_ptr.cast::<bindings::ib_reg_wr>() };
                // SAFETY: A non-null `mr` is a live region of its consumer; only its `device`
                // (set at creation) is read, through the pointer (no reference to an object
                // the core changes concurrently).
                let mr_dev =
                    (!r.mr.is_null()).then(|| unsafe { (&raw const (*r.mr).device).read() });
                if mr_dev != Some(dev) {
                    return Err(EINVAL);
                }
                SendWrDetail::Reg {
                    // SAFETY: A region of a device of driver `T` came from `Mr::alloc` and
                    // lives while the request is posted.
                    mr: unsafe { Mr::<T>::from_raw(r.mr) },
                    key: r.key,
                    access: AccessFlags::from_bits_retain(r.access as u32),
                }
            }
            bindings::ib_wr_opcode_IB_WR_SEND | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                if ud =>
            {
                // SAFETY: Sends on datagram queue pairs are `struct ib_ud_wr`s, as above.
                let u = unsafe { &*wr_ptr.cast::<bindings::ib_ud_wr>() };
                // SAFETY: A non-null `ah` is a live address handle of its consumer; read as the
                // region's device above.
                let ah_dev =
                    (!u.ah.is_null()).then(|| unsafe { (&raw const (*u.ah).device).read() });
                if ah_dev != Some(dev) {
                    return Err(EINVAL);
                }
                SendWrDetail::Ud {
                    // SAFETY: An address handle of a device of driver `T` is `T`'s container,
                    // initialised, and lives while the request is posted.
                    ah: unsafe { Ah::<T>::from_raw(u.ah) },
                    remote_qpn: u.remote_qpn,
                    remote_qkey: u.remote_qkey,
                }
            }
            _ => SendWrDetail::None,
        };
        Ok(Self {
            // SAFETY: Both union members are 64 bits of plain data to the driver.
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            opcode: op,
            send_flags: SendFlags::from_bits_retain(wr.send_flags as u32),
            // SAFETY: Both members of `ex` are 32 bits of plain data.
            ex: unsafe { wr.ex.imm_data },
            sges,
            detail,
        })
    }
}

impl<T: Driver> SendWr<'_, T> {
    /// Copies the data of an inline request (`IB_SEND_INLINE`) into `dst`; returns its
    /// length.
    ///
    /// An inline request's entries name the consumer's memory by address (virtual DMA
    /// address, as `copy_inline_data_to_wqe` of the C driver reads it), readable for the call:
    /// the data is copied now, not when the request runs. Fails with `EINVAL` for a request
    /// without the flag or data longer than `dst`, and with `EFAULT` for an address outside
    /// directly mapped memory.
    pub fn copy_inline(&self, dst: &mut [u8]) -> Result<usize> {
        if !self.send_flags.contains(SendFlags::INLINE) {
            return Err(EINVAL);
        }
        // A kernel consumer names memory for the device (the type's invariant).
        let dma = VirtDma::new();
        let mut at = 0usize;
        for sge in self.sges {
            let end = at.checked_add(sge.length() as usize).ok_or(EINVAL)?;
            dma.read(sge.addr(), dst.get_mut(at..end).ok_or(EINVAL)?)?;
            at = end;
        }
        Ok(at)
    }
}

/// A receive work request of a kernel consumer (`struct ib_recv_wr`).
pub struct RecvWr<'a> {
    /// The consumer's id for the request (or its `struct ib_cqe` address).
    pub wr_id: u64,
    /// Where to place the received data.
    pub sges: &'a [Sge],
}

impl RecvWr<'_> {
    /// Walks the C list of work requests at `wr`, calling `post` for each.
    ///
    /// On failure, stores the request that failed in `bad_wr` and returns the error.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid list of work requests, `bad_wr` null or valid for writes.
    pub(crate) unsafe fn post_list(
        mut wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
        mut post: impl FnMut(&RecvWr<'_>) -> Result,
    ) -> c_int {
        while !wr.is_null() {
            // SAFETY: The caller guarantees the list is valid.
            let w = unsafe { &*wr };
            let ret = usize::try_from(w.num_sge)
                .map_err(|_| EINVAL)
                .and_then(|n| {
                    let sges = if n == 0 || w.sg_list.is_null() {
                        &[][..]
                    } else {
                        // SAFETY: A request's `sg_list` holds `num_sge` entries; `Sge` is a
                        // transparent wrapper of `ib_sge`.
                        unsafe { core::slice::from_raw_parts(w.sg_list.cast::<Sge>(), n) }
                    };
                    post(&RecvWr {
                        // SAFETY: Both union members are 64 bits of plain data to the driver.
                        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
                        sges,
                    })
                });
            if let Err(e) = ret {
                if !bad_wr.is_null() {
                    // SAFETY: The caller guarantees `bad_wr` is valid for writes.
                    unsafe { bad_wr.write(wr) };
                }
                return e.to_errno();
            }
            wr = w.next;
        }
        0
    }
}
