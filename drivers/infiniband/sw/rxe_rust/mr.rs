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
    roce::memory::{
        Access,
        AccessError, //
    },
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

/// A memory region as the data path finds it by key index.
pub(crate) struct MrShared {
    /// The L_Key (= R_Key), set once the index is known.
    key: AtomicU32,
    /// The `IB_ACCESS_*` rights (changed by `rereg_user_mr`).
    access: AtomicU32,
    /// The protection domain (its address: an identity, never dereferenced).
    pd: usize,
    /// The first device address of the region.
    iova: u64,
    /// The length in bytes.
    length: u64,
    /// The memory behind it.
    memory: Memory,
}

impl MrShared {
    /// Checks that `key` names this region in domain `pd` with `need` rights on `len` bytes
    /// at `va`; returns the offset of `va` in the region.
    pub(crate) fn check(
        &self,
        key: u32,
        pd: usize,
        va: u64,
        len: usize,
        need: Access,
    ) -> core::result::Result<u64, AccessError> {
        if key != self.key.load(Relaxed) || pd != self.pd {
            return Err(AccessError::InvalidKey);
        }
        if !Access::from_bits(self.access.load(Relaxed)).contains(need) {
            return Err(AccessError::AccessDenied);
        }
        let off = va.checked_sub(self.iova).ok_or(AccessError::OutOfRange)?;
        let end = off.checked_add(len as u64).ok_or(AccessError::OutOfRange)?;
        if end > self.length {
            return Err(AccessError::OutOfRange);
        }
        Ok(off)
    }

    /// Copies from byte `off` of the region (checked by [`MrShared::check`]).
    pub(crate) fn read(&self, off: u64, dst: &mut [u8]) -> core::result::Result<(), AccessError> {
        match &self.memory {
            Memory::User { umem } => umem
                .read(
                    usize::try_from(off).map_err(|_| AccessError::OutOfRange)?,
                    dst,
                )
                .map_err(|_| AccessError::OutOfRange),
            // Kernel memory is reached once kernel consumers can post (data path, step 2).
            _ => Err(AccessError::InvalidKey),
        }
    }

    /// Copies to byte `off` of the region (checked by [`MrShared::check`]).
    pub(crate) fn write(&self, off: u64, src: &[u8]) -> core::result::Result<(), AccessError> {
        match &self.memory {
            Memory::User { umem } => umem
                .write(
                    usize::try_from(off).map_err(|_| AccessError::OutOfRange)?,
                    src,
                )
                .map_err(|_| AccessError::OutOfRange),
            _ => Err(AccessError::InvalidKey),
        }
    }
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
    User { umem: Umem },
    /// All of kernel memory, addressed by DMA address (`get_dma_mr`).
    Dma,
    /// Pages a kernel consumer maps with `map_mr_sg` (`alloc_mr`).
    Fast(Pin<KBox<SpinLockIrq<PageList>>>),
}

/// A memory region.
pub(crate) struct Mr {
    shared: Arc<MrShared>,
    _index: Index<MrShared>,
    _count: ObjectCount,
}

/// Registers a region of `pd` over `memory`; returns it with its key (L_Key = R_Key).
fn register(
    pd: &Pd<Rxe>,
    access: u32,
    iova: u64,
    length: u64,
    memory: Memory,
) -> Result<(Mr, u32, u32)> {
    let dev = pd.device();
    let count = dev.mrs.take()?;
    let shared = Arc::new(
        MrShared {
            key: AtomicU32::new(0),
            access: AtomicU32::new(access),
            pd: pd.as_raw() as usize,
            iova,
            length,
            memory,
        },
        GFP_KERNEL,
    )?;
    let index = dev.mr_table.insert(shared.clone(), GFP_KERNEL)?;
    let mut b = [0u8; 1];
    kernel::random::fill_bytes(&mut b);
    let k = key(index.get(), b[0]);
    shared.key.store(k, Relaxed);
    Ok((
        Mr {
            shared,
            _index: index,
            _count: count,
        },
        k,
        k,
    ))
}

impl Mr {
    /// Registers `len` bytes at `start` of the calling process for `access`.
    ///
    /// Returns the region with its L_Key and R_Key (equal, as for the C driver).
    pub(crate) fn new_user(
        pd: &Pd<Rxe>,
        start: u64,
        len: u64,
        iova: u64,
        access: u32,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<(Self, u32, u32)> {
        udata.check_in_empty()?;
        check_access(access)?;
        // Pins the pages: fails with EFAULT for memory the process has not mapped.
        let umem = Umem::get(pd.device(), start, len, access)?;
        register(pd, access, iova, len, Memory::User { umem })
    }

    /// Creates the region over all of kernel memory that `ib_alloc_pd` asks for.
    pub(crate) fn new_dma(pd: &Pd<Rxe>, access: u32) -> Result<(Self, u32, u32)> {
        register(pd, access, 0, u64::MAX, Memory::Dma)
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
        let pages = KBox::pin_init(
            new_spinlock_irq!(PageList {
                pages: KVec::with_capacity(max_pages as usize, GFP_KERNEL)?,
                page_size: 0,
            }),
            GFP_KERNEL,
        )?;
        // As the C driver: fast-registration regions always allow remote access. Their
        // range is set by a registration work request (data path).
        register(pd, param::ACCESS_REMOTE, 0, 0, Memory::Fast(pages))
    }

    /// Returns the page list of a fast-registration region.
    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self.shared.memory {
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
            self.shared.access.store(access, Relaxed);
        }
        Ok(())
    }
}
