// SPDX-License-Identifier: GPL-2.0

//! Memory regions: memory the device may access, named by an L_Key and R_Key.

use crate::{
    device::ObjectCount,
    index::{
        Index,
        IndexTable, //
    },
    mw::key,
    param,
    Rxe, //
};
use core::sync::atomic::{
    AtomicU32,
    Ordering::Relaxed, //
};
use kernel::{
    bindings, new_spinlock_irq,
    page::PAGE_SIZE,
    prelude::*,
    rdma::{
        code,
        object::Pd,
        udata::UData,
        umem::Umem, //
    },
    sync::{
        Arc,
        SpinLockIrq, //
    },
};

/// Checks requested access rights (`RXE_ACCESS_SUPPORTED_MR`, no on-demand paging).
fn check_access(access: u32) -> Result {
    if access & !param::ACCESS_SUPPORTED_MR != 0
        || access & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND != 0
    {
        pr_debug!("unsupported access flags {:#x}\n", access);
        return Err(code::eopnotsupp());
    }
    Ok(())
}

/// What the data path will need to find by key index.
pub(crate) struct MrShared {
    /// The `IB_ACCESS_*` rights of the region.
    #[expect(dead_code, reason = "the data path (next step) checks keys and rights")]
    pub(crate) access: u32,
}

/// The device's memory region indices (below those of memory windows).
pub(crate) type MrTable = IndexTable<MrShared>;

/// Creates the device's memory region table.
pub(crate) fn new_mr_table() -> Result<Arc<MrTable>> {
    MrTable::new(param::MIN_MR_INDEX as u32, param::MAX_MR_INDEX as u32)
}

/// The pages of a fast-registration region, as the last `map_mr_sg` set them.
struct PageList {
    /// DMA (here: kernel virtual) addresses of the pages, of the region's page size each.
    pages: KVec<u64>,
    /// The region's page size then.
    page_size: u32,
}

/// What memory a region covers.
enum Memory {
    /// Pinned user pages (unpinned when dropped).
    User { _umem: Umem },
    /// All of kernel memory, addressed by DMA address (`get_dma_mr`).
    Dma,
    /// Pages a kernel consumer maps with `map_mr_sg` (`alloc_mr`).
    Fast(Pin<KBox<SpinLockIrq<PageList>>>),
}

/// A memory region.
pub(crate) struct Mr {
    /// The `IB_ACCESS_*` rights (changed by `rereg_user_mr`; read by the data path).
    access: AtomicU32,
    _memory: Memory,
    _index: Index<MrShared>,
    _count: ObjectCount,
}

/// Allocates a key index for a region with `access`; returns it with the key.
fn new_key(pd: &Pd<Rxe>, access: u32) -> Result<(Index<MrShared>, u32)> {
    let index = pd
        .device()
        .mr_table
        .insert(Arc::new(MrShared { access }, GFP_KERNEL)?, GFP_KERNEL)?;
    let mut b = [0u8; 1];
    kernel::random::fill_bytes(&mut b);
    let k = key(index.get(), b[0]);
    Ok((index, k))
}

impl Mr {
    /// Registers `len` bytes at `start` of the calling process for `access`.
    ///
    /// Returns the region with its L_Key and R_Key (equal, as for the C driver).
    pub(crate) fn new_user(
        pd: &Pd<Rxe>,
        start: u64,
        len: u64,
        access: u32,
        udata: &mut UData<'_>,
    ) -> Result<(Self, u32, u32)> {
        udata.check_in_empty()?;
        check_access(access)?;
        let dev = pd.device();
        let count = dev.mrs.take()?;
        // Pins the pages: fails with EFAULT for memory the process has not mapped.
        let umem = Umem::get(dev, start, len, access)?;
        let (index, k) = new_key(pd, access)?;
        Ok((
            Self {
                access: AtomicU32::new(access),
                _memory: Memory::User { _umem: umem },
                _index: index,
                _count: count,
            },
            k,
            k,
        ))
    }

    /// Creates the region over all of kernel memory that `ib_alloc_pd` asks for.
    pub(crate) fn new_dma(pd: &Pd<Rxe>, access: u32) -> Result<(Self, u32, u32)> {
        let count = pd.device().mrs.take()?;
        let (index, k) = new_key(pd, access)?;
        Ok((
            Self {
                access: AtomicU32::new(access),
                _memory: Memory::Dma,
                _index: index,
                _count: count,
            },
            k,
            k,
        ))
    }

    /// Creates a fast-registration region for up to `max_pages` pages (`alloc_mr`).
    pub(crate) fn new_fast(pd: &Pd<Rxe>, mr_type: u32, max_pages: u32) -> Result<(Self, u32, u32)> {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            pr_debug!("MR type {} not supported\n", mr_type);
            return Err(EINVAL);
        }
        if max_pages > param::MAX_FAST_REG_PAGE_LIST_LEN {
            pr_debug!("fast-registration MR of {} pages\n", max_pages);
            return Err(EINVAL);
        }
        let count = pd.device().mrs.take()?;
        let pages = KBox::pin_init(
            new_spinlock_irq!(PageList {
                pages: KVec::with_capacity(max_pages as usize, GFP_KERNEL)?,
                page_size: 0,
            }),
            GFP_KERNEL,
        )?;
        // As the C driver: fast-registration regions always allow remote access.
        let access = param::ACCESS_REMOTE;
        let (index, k) = new_key(pd, access)?;
        Ok((
            Self {
                access: AtomicU32::new(access),
                _memory: Memory::Fast(pages),
                _index: index,
                _count: count,
            },
            k,
            k,
        ))
    }

    /// Returns the page list of a fast-registration region.
    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self._memory {
            Memory::Fast(p) => Ok(p),
            _ => Err(EINVAL),
        }
    }

    /// Starts `map_mr_sg` with the consumer's page size: forgets the old pages.
    pub(crate) fn map_start(&self, page_size: u32) -> Result {
        // The data path splits the region at both sizes: one must divide the other.
        let ps = page_size as usize;
        if ps == 0 || !(ps % PAGE_SIZE == 0 || PAGE_SIZE % ps == 0) {
            pr_debug!(
                "MR page size {} incompatible with {}\n",
                page_size,
                PAGE_SIZE
            );
            return Err(EINVAL);
        }
        let mut list = self.page_list()?.lock();
        list.pages.clear();
        list.page_size = page_size;
        Ok(())
    }

    /// Appends a page during `map_mr_sg`; `ENOMEM` past the region's size, as in C.
    pub(crate) fn map_page(&self, addr: u64) -> Result {
        let mut list = self.page_list()?.lock();
        list.pages.push_within_capacity(addr).map_err(|_| ENOMEM)
    }
}

impl Mr {
    /// Changes the domain (recorded by the core) and/or the access rights in place.
    ///
    /// Only these two are supported, as by the C driver; a new address range is refused.
    pub(crate) fn rereg(&self, flags: u32, access: u32) -> Result {
        let supported = bindings::ib_mr_rereg_flags_IB_MR_REREG_PD
            | bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
        if flags & !supported != 0 {
            return Err(code::eopnotsupp());
        }
        if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
            check_access(access)?;
            self.access.store(access, Relaxed);
        }
        Ok(())
    }
}
