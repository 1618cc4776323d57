// SPDX-License-Identifier: GPL-2.0

//! Memory that kernel consumers hand to a device using virtual DMA addresses.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//! (`ib_uses_virt_dma`, `ib_virt_dma_to_page`).
//!
//! A software RDMA device has no DMA device of its own: `ib_dma_map_*` and `ib_sg_to_pages`
//! give it the kernel virtual addresses of a consumer's buffers as their DMA addresses. It
//! copies to and from them with the CPU where hardware would use DMA.

use crate::{
    append::{
        Append,
        SliceAppender, //
    },
    bindings,
    page::PAGE_SIZE,
    prelude::*, //
};

/// Access, by virtual DMA address, to the memory kernel consumers map for the device.
///
/// The core's verbs for kernel consumers hand one to the driver: `get_dma_mr` (a region over
/// all of memory, behind every kernel protection domain's `local_dma_lkey`) and `alloc_mr`
/// (fast registration). User space cannot reach either verb. [`super::wr::SendWr`] uses one
/// to copy the data of an inline request.
///
/// # Invariants
///
/// It exists only for a memory region a kernel consumer allocated, or for the buffers of an
/// inline send request a kernel consumer posts. Under the verbs contract such a consumer
/// names, in its work requests and registrations, only memory it mapped for the device
/// (`ib_dma_map_*`), which is the device's to read and write until the request completes or
/// the mapping ends, and inline buffers readable for the post. Remote access to all of
/// memory (a domain's unsafe global R_Key) is the consumer's explicit choice.
pub struct VirtDma(());

impl VirtDma {
    /// Creates the access of a region the core allocated for a kernel consumer.
    pub(crate) fn new() -> Self {
        Self(())
    }

    /// Copies `dst.len()` bytes from virtual DMA address `addr`.
    ///
    /// Fails with `EFAULT`, having copied a prefix at most, if a page of the span is not
    /// directly mapped memory. The consumer may write the same memory at the same time (a
    /// buffer it reuses too early): its bytes are plain data.
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        self.read_to(addr, dst.len(), &mut SliceAppender::new(dst))
    }

    /// Appends to `dst` the `len` bytes at virtual DMA address `addr`.
    ///
    /// Fails with `EINVAL` (appending nothing) if they do not fit in `dst`, and with `EFAULT`,
    /// having appended a prefix at most, if a page of the span is not directly mapped memory.
    /// The consumer may write the same memory at the same time: its bytes are plain data.
    pub fn read_to(&self, addr: u64, len: usize, dst: &mut (impl Append + ?Sized)) -> Result {
        if dst.room() < len {
            return Err(EINVAL);
        }
        Self::for_each_piece(addr, len, |va, range| {
            // SAFETY: `va` maps `range.len()` bytes of a page of the span (the callback's
            // contract): memory the consumer mapped for the device (type invariant), not the
            // free space of a buffer the device allocated for itself. (Under a domain's
            // unsafe global R_Key a peer may name any address; the type invariant leaves that
            // to the consumer's explicit choice.)
            unsafe { dst.append_raw(va, range.len()) }
        })
    }

    /// Copies `src` to virtual DMA address `addr`.
    ///
    /// Fails with `EFAULT`, having copied a prefix at most, if a page of the span is not
    /// directly mapped memory.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result {
        Self::for_each_piece(addr, src.len(), |va, range| {
            let s = src.get(range).ok_or(EINVAL)?;
            // SAFETY: `va` maps `s.len()` bytes of a page of the span (the callback's
            // contract), which the consumer mapped for the device (type invariant).
            unsafe { core::ptr::copy_nonoverlapping(s.as_ptr(), va, s.len()) };
            Ok(())
        })
    }

    /// Calls `f(va, range)` for each piece of `len` bytes at `addr` that lies in one page:
    /// `va` maps that piece, for the call only, and `range` is its place in the span.
    fn for_each_piece(
        addr: u64,
        len: usize,
        mut f: impl FnMut(*mut u8, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let end = addr.checked_add(len as u64).ok_or(EFAULT)?;
        if end > usize::MAX as u64 {
            return Err(EFAULT);
        }
        let mut done = 0usize;
        while done < len {
            let pos = addr + done as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let chunk = (PAGE_SIZE - in_page).min(len - done);
            // SAFETY: Any address may be asked about; NULL comes back unless it is directly
            // mapped memory, whose page is returned.
            let page = unsafe { bindings::ib_virt_dma_to_valid_page(pos) };
            if page.is_null() {
                return Err(EFAULT);
            }
            // SAFETY: `page` is a valid page, mapped for the call and unmapped right after;
            // `chunk` bytes from `in_page` are inside it. The consumer mapped it for the
            // device (type invariant).
            unsafe {
                let va = bindings::kmap_local_page(page).cast::<u8>();
                let r = f(va.add(in_page), done..done + chunk);
                bindings::kunmap_local(va.cast());
                r?;
            }
            done += chunk;
        }
        Ok(())
    }
}

#[macros::kunit_tests(rust_kernel_rdma_virt_dma)]
mod tests {
    use super::*;
    use crate::alloc::{
        KVec,
        VVec, //
    };

    /// Copies reach a kmalloc buffer by its address, across a page boundary too.
    #[test]
    fn copies_by_address() -> Result {
        let dma = VirtDma::new();
        let mut buf = KVec::from_elem(0u8, 3 * PAGE_SIZE, GFP_KERNEL)?;
        let base = buf.as_mut_ptr() as u64;
        let at = base + PAGE_SIZE as u64 - 3;
        let src: [u8; 7] = [1, 2, 3, 4, 5, 6, 7];
        dma.write(at, &src)?;
        let mut back = [0u8; 7];
        dma.read(at, &mut back)?;
        assert_eq!(back, src);
        assert_eq!(buf.get(PAGE_SIZE - 3..PAGE_SIZE + 4), Some(&src[..]));
        assert_eq!(buf.get(PAGE_SIZE - 4), Some(&0));
        Ok(())
    }

    /// Addresses outside directly mapped memory fail with `EFAULT` and are not touched.
    #[test]
    fn refuses_what_is_not_directly_mapped() -> Result {
        let dma = VirtDma::new();
        let mut b = [0u8; 8];
        assert_eq!(dma.read(0, &mut b), Err(EFAULT));
        assert_eq!(dma.write(u64::MAX - 3, &b), Err(EFAULT));
        // vmalloc memory has no direct mapping: a consumer must not hand it to the device.
        let v = VVec::from_elem(0u8, 2 * PAGE_SIZE, GFP_KERNEL)?;
        assert_eq!(dma.read(v.as_ptr() as u64, &mut b), Err(EFAULT));
        Ok(())
    }
}
