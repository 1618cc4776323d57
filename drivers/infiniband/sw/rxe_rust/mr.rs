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
    AtomicBool,
    AtomicU32,
    AtomicUsize,
    Ordering::Acquire,
    Ordering::Relaxed, //
};
use kernel::{
    new_spinlock_irq,
    page::PAGE_SIZE,
    prelude::*,
    rdma::{
        mr::{
            AccessFlags,
            Mr,
            MrOps,
            MrType,
            NewMr,
            ReregFlags, //
        },
        pd::Pd,
        udata::UData,
        umem::Umem,
        virt_dma::VirtDma, //
    },
    sync::{
        Arc,
        SpinLockIrq, //
    },
    xarray::RcuXArray,
};

/// Checks requested access rights (`RXE_ACCESS_SUPPORTED_MR`, no on-demand paging).
fn check_access(access: AccessFlags) -> Result {
    if !access.difference(param::ACCESS_SUPPORTED_MR).is_empty()
        || access.contains(AccessFlags::ON_DEMAND)
    {
        pr_debug!("unsupported access flags {:#x}\n", access.bits());
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

/// A memory region as the data path finds it by key index.
pub(crate) struct MrShared {
    /// The L_Key (= R_Key), set once the index is known.
    key: AtomicU32,
    /// The `IB_ACCESS_*` rights (changed by `rereg_user_mr`).
    access: AtomicU32,
    /// The protection domain (its address: an identity, never dereferenced); changed by
    /// `rereg_user_mr`, as the core's `ib_mr.pd`.
    pd: AtomicUsize,
    /// The first device address of the region.
    iova: u64,
    /// The length in bytes.
    length: u64,
    /// The memory behind it.
    memory: Memory,
    /// Whether the key may be used (`RXE_MR_STATE_VALID`). A fast-registration region starts
    /// free (`RXE_MR_STATE_FREE`): its key names nothing until a registration work request.
    valid: AtomicBool,
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
        if !self.valid.load(Acquire) || key != self.key.load(Relaxed) || pd != self.pd.load(Relaxed)
        {
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
            // The region starts at address 0: the offset is the virtual DMA address.
            Memory::Dma(dma) => dma.read(off, dst).map_err(|_| AccessError::OutOfRange),
            // Valid only after a registration work request, which kernel QPs cannot post yet.
            Memory::Fast(_) => Err(AccessError::InvalidKey),
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
            Memory::Dma(dma) => dma.write(off, src).map_err(|_| AccessError::OutOfRange),
            Memory::Fast(_) => Err(AccessError::InvalidKey),
        }
    }
}

/// The device's memory region indices (below those of memory windows).
/// Memory regions by key index; read under the RCU read lock by the queue pairs' runs, which
/// may be in softirq.
pub(crate) type MrTable = IndexTable<MrShared, RcuXArray<Arc<MrShared>>>;

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
    /// All of kernel memory, addressed by virtual DMA address (`get_dma_mr`).
    Dma(VirtDma),
    /// Pages a kernel consumer maps with `map_mr_sg` (`alloc_mr`).
    Fast(Pin<KBox<SpinLockIrq<PageList>>>),
}

/// A memory region.
pub(crate) struct RxeMr {
    shared: Arc<MrShared>,
    _index: Index<MrShared, RcuXArray<Arc<MrShared>>>,
    _count: ObjectCount,
}

impl MrShared {
    /// Describes a valid region of domain `pd` (its address) over `memory`.
    fn new(access: AccessFlags, pd: usize, iova: u64, length: u64, memory: Memory) -> Self {
        Self {
            key: AtomicU32::new(0),
            access: AtomicU32::new(access.bits()),
            pd: AtomicUsize::new(pd),
            iova,
            length,
            memory,
            valid: AtomicBool::new(true),
        }
    }

    /// Describes a fast-registration region of domain `pd` (its address) for up to
    /// `max_pages` pages: free, with no pages, as `rxe_mr_init_fast`.
    fn new_fast(pd: usize, max_pages: u32) -> Result<Self> {
        let pages = KBox::pin_init(
            new_spinlock_irq!(PageList {
                pages: KVec::with_capacity(max_pages as usize, GFP_KERNEL)?,
                page_size: 0,
            }),
            GFP_KERNEL,
        )?;
        // As the C driver: fast-registration regions always allow remote access. Their
        // range is set, and the key made valid, by a registration work request (data path).
        Ok(Self {
            valid: AtomicBool::new(false),
            ..Self::new(param::ACCESS_REMOTE, pd, 0, 0, Memory::Fast(pages))
        })
    }
}

/// Registers `shared`, a region of `pd`; returns it with its key (L_Key = R_Key).
fn register(pd: &Pd<Rxe>, shared: MrShared) -> Result<NewMr<RxeMr>> {
    let dev = pd.device();
    let count = dev.mrs.take()?;
    let shared = Arc::new(shared, GFP_KERNEL)?;
    let index = dev.mr_table.insert(shared.clone(), GFP_KERNEL)?;
    let mut b = [0u8; 1];
    kernel::random::fill_bytes(&mut b);
    let k = key(index.get(), b[0]);
    shared.key.store(k, Relaxed);
    Ok(NewMr {
        data: RxeMr {
            shared,
            _index: index,
            _count: count,
        },
        lkey: k,
        rkey: k,
    })
}

#[vtable]
impl MrOps for RxeMr {
    type Driver = Rxe;

    /// Registers `len` bytes at `start` of the calling process for `access`.
    ///
    /// Returns the region with its L_Key and R_Key (equal, as for the C driver).
    fn reg_user(
        pd: &Pd<Rxe>,
        start: u64,
        len: u64,
        iova: u64,
        access: AccessFlags,
        udata: &mut UData<'_, Rxe>,
    ) -> Result<NewMr<Self>> {
        udata.check_in_empty()?;
        check_access(access)?;
        // Pins the pages: fails with EFAULT for memory the process has not mapped.
        let umem = Umem::get(pd.device(), udata, start, len, access)?;
        let pd_id = pd.as_raw() as usize;
        register(
            pd,
            MrShared::new(access, pd_id, iova, len, Memory::User { umem }),
        )
    }

    /// Creates the region over all of kernel memory that `ib_alloc_pd` asks for.
    fn get_dma(pd: &Pd<Rxe>, access: AccessFlags, dma: VirtDma) -> Result<NewMr<Self>> {
        let pd_id = pd.as_raw() as usize;
        register(
            pd,
            MrShared::new(access, pd_id, 0, u64::MAX, Memory::Dma(dma)),
        )
    }

    /// Creates a fast-registration region for up to `max_pages` pages (`alloc_mr`).
    fn alloc(pd: &Pd<Rxe>, mr_type: MrType, max_pages: u32, _dma: VirtDma) -> Result<NewMr<Self>> {
        if mr_type != MrType::MemReg {
            pr_debug!("MR type {:?} not supported\n", mr_type);
            return Err(EINVAL);
        }
        if max_pages > param::MAX_FAST_REG_PAGE_LIST_LEN {
            pr_debug!("fast-registration MR of {} pages\n", max_pages);
            return Err(EINVAL);
        }
        register(pd, MrShared::new_fast(pd.as_raw() as usize, max_pages)?)
    }

    fn map_sg_start(mr: &Mr<Rxe>) -> Result {
        mr.map_start(mr.page_size())
    }

    fn map_sg_page(mr: &Mr<Rxe>, addr: u64) -> Result {
        mr.map_page(addr)
    }

    /// Changes the domain to `pd` and/or the access rights in place (`rereg_user_mr`).
    ///
    /// Only these two are supported, as by the C driver; a new address range is refused, and
    /// so is a writable access to pages pinned read-only (`EACCES`, `ib_umem_check_rereg`).
    fn rereg_user(mr: &Mr<Rxe>, flags: ReregFlags, access: AccessFlags, pd: &Pd<Rxe>) -> Result {
        if !flags
            .difference(ReregFlags::PD | ReregFlags::ACCESS)
            .is_empty()
        {
            return Err(EOPNOTSUPP);
        }
        if let Memory::User { umem } = &mr.shared.memory {
            umem.check_rereg(flags, access)?;
        }
        let new_access = flags.contains(ReregFlags::ACCESS);
        if new_access {
            check_access(access)?;
        }
        if flags.contains(ReregFlags::PD) {
            mr.shared.pd.store(pd.as_raw() as usize, Relaxed);
        }
        if new_access {
            mr.shared.access.store(access.bits(), Relaxed);
        }
        Ok(())
    }
}

impl RxeMr {
    /// Returns the page list of a fast-registration region.
    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self.shared.memory {
            Memory::Fast(p) => Ok(p),
            _ => Err(EINVAL),
        }
    }

    /// Starts `map_mr_sg` with the consumer's page size: forgets the old pages.
    fn map_start(&self, page_size: u32) -> Result {
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
    fn map_page(&self, addr: u64) -> Result {
        let mut list = self.page_list()?.lock();
        list.pages.push_within_capacity(addr).map_err(|_| ENOMEM)
    }
}

#[kunit_tests(rdma_rxe_rust_mr)]
mod tests {
    use super::*;

    /// A fast-registration region's key names nothing before a registration: not even a
    /// zero-length remote access at its start passes.
    #[test]
    fn fast_region_starts_invalid() -> Result {
        const PD: usize = 0x1000;
        const KEY: u32 = 0x1234;
        let fast = MrShared::new_fast(PD, 4)?;
        fast.key.store(KEY, Relaxed);
        for need in [Access::REMOTE_WRITE, Access::REMOTE_READ, Access::NONE] {
            assert_eq!(
                fast.check(KEY, PD, 0, 0, need),
                Err(AccessError::InvalidKey)
            );
        }
        // The same access to a region made valid passes: the validity is what fails.
        let valid = MrShared::new_fast(PD, 4)?;
        valid.key.store(KEY, Relaxed);
        valid.valid.store(true, Relaxed);
        assert_eq!(valid.check(KEY, PD, 0, 0, Access::REMOTE_WRITE), Ok(0));
        Ok(())
    }
}
