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
        AccessError,
        Registration, //
    },
    Rxe, //
};
use core::{
    ops::Range,
    sync::atomic::{
        AtomicBool,
        AtomicU32,
        AtomicU64,
        AtomicUsize,
        Ordering::Acquire,
        Ordering::Relaxed,
        Ordering::Release,
        Ordering::SeqCst, //
    },
};
use kernel::{
    append::Append,
    new_spinlock_irq,
    page::PAGE_SIZE,
    prelude::*,
    rdma::{
        mr::{
            AccessFlags,
            Advice,
            Mr,
            MrOps,
            MrType,
            NewMr,
            ReregFlags, //
        },
        pd::Pd,
        udata::UData,
        umem::Umem,
        virt_dma::VirtDma,
        wr::Sge, //
    },
    sync::{
        Arc,
        SpinLockIrq, //
    },
    xarray::RcuXArray,
};

#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
use kernel::rdma::umem_odp::OdpUmem;

/// Checks requested access rights (`RXE_ACCESS_SUPPORTED_MR`; on-demand paging only in a
/// kernel built with it).
fn check_access(access: AccessFlags) -> Result {
    if !access.difference(param::ACCESS_SUPPORTED_MR).is_empty()
        || (access.contains(AccessFlags::ON_DEMAND) && !param::ON_DEMAND_PAGING)
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
    /// The first device address of the region (set by a registration request for a
    /// fast-registration region, read after `valid`).
    iova: AtomicU64,
    /// The length in bytes (likewise).
    length: AtomicU64,
    /// The memory behind it.
    memory: Memory,
    /// Whether the key may be used (`RXE_MR_STATE_VALID`). A fast-registration region starts
    /// free (`RXE_MR_STATE_FREE`): its key names nothing until a registration work request.
    valid: AtomicBool,
    /// The memory windows bound to the region, or [`DEREGISTERED`] once it is going.
    windows: AtomicU32,
}

/// [`MrShared::windows`] of a region being deregistered: no window may be bound to it.
const DEREGISTERED: u32 = u32::MAX;

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
        let off = va
            .checked_sub(self.iova.load(Relaxed))
            .ok_or(AccessError::OutOfRange)?;
        let end = off.checked_add(len as u64).ok_or(AccessError::OutOfRange)?;
        if end > self.length.load(Relaxed) {
            return Err(AccessError::OutOfRange);
        }
        Ok(off)
    }

    /// Appends to `dst` the `len` bytes from byte `off` of the region (checked by
    /// [`MrShared::check`]).
    pub(crate) fn read(
        &self,
        off: u64,
        len: usize,
        dst: &mut dyn Append,
    ) -> core::result::Result<(), AccessError> {
        match &self.memory {
            Memory::User { umem } => umem
                .read_to(
                    usize::try_from(off).map_err(|_| AccessError::OutOfRange)?,
                    len,
                    dst,
                )
                .map_err(|_| AccessError::OutOfRange),
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Memory::Odp { umem, .. } => umem
                .read_to(
                    usize::try_from(off).map_err(|_| AccessError::OutOfRange)?,
                    len,
                    dst,
                )
                .map_err(odp_error),
            // The region starts at address 0: the offset is the virtual DMA address.
            Memory::Dma(dma) => dma
                .read_to(off, len, dst)
                .map_err(|_| AccessError::OutOfRange),
            Memory::Fast { pages, dma } => {
                pages
                    .lock()
                    .for_each_piece(self.iova.load(Relaxed), off, len, |addr, r| {
                        dma.read_to(addr, r.len(), dst)
                            .map_err(|_| AccessError::OutOfRange)
                    })
            }
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
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Memory::Odp { umem, .. } => umem
                .write(
                    usize::try_from(off).map_err(|_| AccessError::OutOfRange)?,
                    src,
                )
                .map_err(odp_error),
            Memory::Dma(dma) => dma.write(off, src).map_err(|_| AccessError::OutOfRange),
            Memory::Fast { pages, dma } => {
                pages
                    .lock()
                    .for_each_piece(self.iova.load(Relaxed), off, src.len(), |addr, r| {
                        let s = src.get(r).ok_or(AccessError::TooShort)?;
                        dma.write(addr, s).map_err(|_| AccessError::OutOfRange)
                    })
            }
        }
    }

    /// Returns whether `len` bytes at byte `off` of the region (checked by
    /// [`MrShared::check`]) are present now, and writable if `write`: always, but for pages
    /// registered for on-demand paging.
    pub(crate) fn is_present(&self, off: u64, len: usize, write: bool) -> bool {
        match &self.memory {
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Memory::Odp { umem, .. } => {
                usize::try_from(off).is_ok_and(|off| umem.is_present(off, len, write))
            }
            _ => {
                let _ = (off, len, write);
                true
            }
        }
    }

    /// Returns the key (L_Key = R_Key).
    pub(crate) fn key(&self) -> u32 {
        self.key.load(Relaxed)
    }

    /// Returns the length in bytes.
    pub(crate) fn length(&self) -> u64 {
        self.length.load(Relaxed)
    }

    /// Makes `len` bytes at byte `off` of the region present, for writing if `write` (only
    /// taking note of the pages present with `snapshot`); nothing to do but for on-demand
    /// paging. Process context: sleeps.
    pub(crate) fn fault(&self, off: u64, len: usize, write: bool, snapshot: bool) -> Result {
        match &self.memory {
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Memory::Odp { umem, .. } => umem.fault(
                usize::try_from(off).map_err(|_| EINVAL)?,
                len,
                write,
                snapshot,
            ),
            _ => {
                let _ = (off, len, write, snapshot);
                Ok(())
            }
        }
    }

    /// Registers a fast-registration region of domain `pd` as `reg` says (a registration
    /// work request), as the C driver's `rxe_reg_fast_mr`: only a free region, only with its
    /// own index in the new key, and only over pages mapped into it.
    pub(crate) fn register(&self, pd: usize, reg: &Registration) -> Result<(), AccessError> {
        let Memory::Fast { pages, .. } = &self.memory else {
            return Err(AccessError::InvalidKey);
        };
        if self.valid.load(Acquire)
            || pd != self.pd.load(Relaxed)
            || (reg.key ^ self.key.load(Relaxed)) >> 8 != 0
        {
            return Err(AccessError::InvalidKey);
        }
        {
            let list = pages.lock();
            let ps = u64::from(list.page_size);
            let mapped = (list.pages.len() as u64).saturating_mul(ps);
            let span = reg
                .iova
                .checked_rem(ps)
                .and_then(|o| o.checked_add(reg.length));
            if span.is_none_or(|n| n > mapped) {
                return Err(AccessError::OutOfRange);
            }
        }
        self.access.store(reg.access, Relaxed);
        self.iova.store(reg.iova, Relaxed);
        self.length.store(reg.length, Relaxed);
        self.key.store(reg.key, Relaxed);
        // Publishes the range and key with the validity.
        self.valid.store(true, Release);
        Ok(())
    }

    /// Invalidates the fast-registration region whose key is `key` (local invalidate, SEND
    /// with invalidate), as the C driver's `rxe_invalidate_mr`: it is free again. Not while
    /// memory windows are bound to it.
    pub(crate) fn invalidate(&self, key: u32) -> Result<(), AccessError> {
        if !matches!(self.memory, Memory::Fast { .. }) || key != self.key.load(Relaxed) {
            return Err(AccessError::InvalidKey);
        }
        if self.windows.load(SeqCst) != 0 {
            return Err(AccessError::AccessDenied);
        }
        self.valid.store(false, SeqCst);
        // A bind that counted itself meanwhile: it either sees the region invalid and undoes
        // its count ([`MrShared::take_window`]), or is seen here and the region stays valid.
        if self.windows.load(SeqCst) != 0 {
            self.valid.store(true, SeqCst);
            return Err(AccessError::AccessDenied);
        }
        Ok(())
    }
}

impl MrShared {
    /// Checks that a memory window may be bound to `length` bytes at `addr` of the region
    /// whose key is `key`, in domain `pd`, with `access` rights, as the C driver's
    /// `rxe_check_bind_mw` does (IBA C10-73 to C10-75).
    pub(crate) fn check_bind(
        &self,
        key: u32,
        pd: usize,
        access: Access,
        addr: u64,
        length: u64,
    ) -> Result<(), AccessError> {
        if !self.valid.load(Acquire) || key != self.key.load(Relaxed) || pd != self.pd.load(Relaxed)
        {
            return Err(AccessError::InvalidKey);
        }
        let own = Access::from_bits(self.access.load(Relaxed));
        if !own.contains(Access::MW_BIND) {
            return Err(AccessError::AccessDenied);
        }
        // A window that lets peers write needs a region the device may write.
        let writes = Access::REMOTE_WRITE.with(Access::REMOTE_ATOMIC);
        if access.bits() & writes.bits() != 0 && !own.contains(Access::LOCAL_WRITE) {
            return Err(AccessError::AccessDenied);
        }
        // The window's first address is one of the region's, zero based or not (a zero-based
        // window is then reached by offsets from it). The C driver checks only the length of
        // a zero-based window.
        let (iova, len) = (self.iova.load(Relaxed), self.length.load(Relaxed));
        let start = addr.checked_sub(iova).ok_or(AccessError::OutOfRange)?;
        let end = start.checked_add(length).ok_or(AccessError::OutOfRange)?;
        if end > len {
            return Err(AccessError::OutOfRange);
        }
        Ok(())
    }

    /// Counts a window bound to the region whose key is `key`; fails once the region is
    /// being deregistered, or if it is no longer valid under that key.
    pub(crate) fn take_window(&self, key: u32) -> Result<(), AccessError> {
        self.windows
            .fetch_update(SeqCst, SeqCst, |n| (n < DEREGISTERED - 1).then_some(n + 1))
            .map_err(|_| AccessError::InvalidKey)?;
        // Against a concurrent invalidation ([`MrShared::invalidate`]).
        if !self.valid.load(SeqCst) || self.key.load(Relaxed) != key {
            self.put_window();
            return Err(AccessError::InvalidKey);
        }
        Ok(())
    }

    /// Uncounts a window [`MrShared::take_window`] counted.
    pub(crate) fn put_window(&self) {
        let _ = self.windows.fetch_update(Relaxed, Relaxed, |n| {
            (n != 0 && n != DEREGISTERED).then(|| n - 1)
        });
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

impl PageList {
    /// Calls `f(addr, range)` for each piece of bytes `off..off + len` of a region starting
    /// at `iova` that lies in one page: `addr` is the piece's virtual DMA address, `range`
    /// its place in the span. The region's first byte is at offset `iova % page_size` of
    /// the first page, as `ib_sg_to_pages` maps it.
    fn for_each_piece(
        &self,
        iova: u64,
        off: u64,
        len: usize,
        mut f: impl FnMut(u64, Range<usize>) -> Result<(), AccessError>,
    ) -> Result<(), AccessError> {
        let ps = u64::from(self.page_size);
        let mut pos = iova
            .checked_rem(ps)
            .and_then(|o| o.checked_add(off))
            .ok_or(AccessError::OutOfRange)?;
        let mut done = 0usize;
        while done < len {
            let page = usize::try_from(pos / ps)
                .ok()
                .and_then(|i| self.pages.get(i))
                .ok_or(AccessError::OutOfRange)?;
            let in_page = pos % ps;
            let chunk = usize::try_from(ps - in_page).map_or(len - done, |n| n.min(len - done));
            let addr = page.checked_add(in_page).ok_or(AccessError::OutOfRange)?;
            f(addr, done..done + chunk)?;
            done += chunk;
            pos += chunk as u64;
        }
        Ok(())
    }
}

/// How many regions registered for on-demand paging exist, on any device.
static ON_DEMAND_REGIONS: AtomicUsize = AtomicUsize::new(0);

/// Returns whether a region registered for on-demand paging may exist: without one, every
/// page of every region is present, and a transport need not ask.
///
/// A region counts from before it can be named by a key until it is dropped, after the last
/// run that could use it.
pub(crate) fn any_on_demand() -> bool {
    ON_DEMAND_REGIONS.load(Relaxed) != 0
}

/// Counts a region registered for on-demand paging in [`ON_DEMAND_REGIONS`] while it lives.
#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
struct OnDemandLive;

#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
impl OnDemandLive {
    fn new() -> Self {
        ON_DEMAND_REGIONS.fetch_add(1, Relaxed);
        Self
    }
}

#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
impl Drop for OnDemandLive {
    fn drop(&mut self) {
        ON_DEMAND_REGIONS.fetch_sub(1, Relaxed);
    }
}

/// What memory a region covers.
enum Memory {
    /// Pinned user pages (unpinned when dropped).
    User { umem: Umem },
    /// User pages registered for on-demand paging: the process keeps them, and the region
    /// reaches those present ([`crate::odp`]).
    #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
    Odp { umem: OdpUmem, _live: OnDemandLive },
    /// All of kernel memory, addressed by virtual DMA address (`get_dma_mr`).
    Dma(VirtDma),
    /// Pages a kernel consumer maps with `map_mr_sg` (`alloc_mr`), reached by virtual DMA
    /// address.
    Fast {
        pages: Pin<KBox<SpinLockIrq<PageList>>>,
        dma: VirtDma,
    },
}

impl Memory {
    /// Returns whether the memory is registered for on-demand paging.
    fn is_on_demand(&self) -> bool {
        #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
        if let Self::Odp { .. } = self {
            return true;
        }
        false
    }

    /// Returns whether the process registered on-demand-paging memory for writing.
    fn is_writable(&self) -> bool {
        #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
        if let Self::Odp { umem, .. } = self {
            return umem.is_writable();
        }
        false
    }

    /// Returns whether the memory is a process's, released when `ib_dereg_mr` returns.
    fn is_user(&self) -> bool {
        match self {
            Self::User { .. } => true,
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Self::Odp { .. } => true,
            Self::Dma(_) | Self::Fast { .. } => false,
        }
    }
}

/// Maps what an on-demand-paging copy failed with: a page not present (`EAGAIN`) is faulted
/// in and the copy asked again; anything else is outside the region.
#[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
fn odp_error(e: Error) -> AccessError {
    if e == EAGAIN {
        AccessError::NotPresent
    } else {
        AccessError::OutOfRange
    }
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
            iova: AtomicU64::new(iova),
            length: AtomicU64::new(length),
            memory,
            valid: AtomicBool::new(true),
            windows: AtomicU32::new(0),
        }
    }

    /// Describes a fast-registration region of domain `pd` (its address) for up to
    /// `max_pages` pages: free, with no pages, as `rxe_mr_init_fast`.
    fn new_fast(pd: usize, max_pages: u32, dma: VirtDma) -> Result<Self> {
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
            ..Self::new(param::ACCESS_REMOTE, pd, 0, 0, Memory::Fast { pages, dma })
        })
    }
}

/// Registers `shared`, a region of `pd`; returns it with its key (L_Key = R_Key).
fn register(pd: &Pd<Rxe>, shared: MrShared) -> Result<NewMr<RxeMr>> {
    let dev = pd.device();
    let count = dev.mrs.take()?;
    let shared = Arc::new(shared, GFP_KERNEL)?;
    let mut index = dev.mr_table.insert(shared.clone(), GFP_KERNEL)?;
    // A kernel consumer's region (DMA, fast registration) is freed after the packet path's
    // readers are gone, as the C driver's `kfree_rcu`: deregistering it then costs no grace
    // period (nvme-rdma deregisters a pool of them per queue at disconnect). User pages stay
    // pinned until `ib_dereg_mr` returns, as user space expects.
    if !shared.memory.is_user() {
        index.release_later();
    }
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
        let pd_id = pd.as_raw() as usize;
        #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
        if access.contains(AccessFlags::ON_DEMAND) {
            // Pins nothing: notes the pages present, faults none in.
            let umem = OdpUmem::get(pd.device(), udata, start, len, access)?;
            return register(
                pd,
                MrShared::new(
                    access,
                    pd_id,
                    iova,
                    len,
                    Memory::Odp {
                        umem,
                        _live: OnDemandLive::new(),
                    },
                ),
            );
        }
        // Pins the pages: fails with EFAULT for memory the process has not mapped.
        let umem = Umem::get(pd.device(), udata, start, len, access)?;
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
    fn alloc(pd: &Pd<Rxe>, mr_type: MrType, max_pages: u32, dma: VirtDma) -> Result<NewMr<Self>> {
        if mr_type != MrType::MemReg {
            pr_debug!("MR type {:?} not supported\n", mr_type);
            return Err(EINVAL);
        }
        if max_pages > param::MAX_FAST_REG_PAGE_LIST_LEN {
            pr_debug!("fast-registration MR of {} pages\n", max_pages);
            return Err(EINVAL);
        }
        register(
            pd,
            MrShared::new_fast(pd.as_raw() as usize, max_pages, dma)?,
        )
    }

    /// Refuses while memory windows are bound to the region (`EINVAL`, as the C driver);
    /// otherwise no window may be bound to it any more.
    fn dereg(mr: &Mr<Rxe>) -> Result {
        mr.shared
            .windows
            .compare_exchange(0, DEREGISTERED, Relaxed, Relaxed)
            .map(|_| ())
            .map_err(|_| EINVAL)
    }

    /// Prefetches ranges of regions registered for on-demand paging (`ibv_advise_mr`), as
    /// the C driver: each local key must name a region of `pd` with local write access
    /// (`EINVAL`), registered for on-demand paging (`EINVAL`; the C driver does not check),
    /// writable for [`Advice::PrefetchWrite`] (`EPERM`), over the range (`EFAULT`).
    ///
    /// Always carried out before returning: a prefetch the caller does not wait for may be
    /// done at once. Only the caller that waits (`flush`) learns whether a fault failed, as
    /// with the C driver's work item.
    fn advise(pd: &Pd<Rxe>, advice: Advice, flush: bool, sges: &[Sge]) -> Result {
        if !param::ON_DEMAND_PAGING {
            return Err(EOPNOTSUPP);
        }
        let dev = pd.device();
        let pd_id = pd.as_raw() as usize;
        let write = advice == Advice::PrefetchWrite;
        let snapshot = advice == Advice::PrefetchNoFault;
        // Every key is checked before any fault, so that a bad list faults nothing.
        let mut regions = KVec::with_capacity(sges.len(), GFP_KERNEL)?;
        for sge in sges {
            let mr = dev.mr_table.get(sge.lkey() >> 8).ok_or(EINVAL)?;
            let off = match mr.check(
                sge.lkey(),
                pd_id,
                sge.addr(),
                sge.length() as usize,
                Access::LOCAL_WRITE,
            ) {
                Ok(off) => off,
                Err(AccessError::OutOfRange) => return Err(EFAULT),
                Err(_) => return Err(EINVAL),
            };
            if !mr.memory.is_on_demand() {
                return Err(EINVAL);
            }
            if write && !mr.memory.is_writable() {
                return Err(EPERM);
            }
            regions.push((mr, off, sge.length() as usize), GFP_KERNEL)?;
        }
        for (mr, off, len) in &regions {
            if *len == 0 {
                continue;
            }
            let r = mr.fault(*off, *len, write, snapshot);
            if flush {
                r?;
            }
        }
        Ok(())
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
        match &mr.shared.memory {
            Memory::User { umem } => umem.check_rereg(flags, access)?,
            #[cfg(CONFIG_INFINIBAND_ON_DEMAND_PAGING)]
            Memory::Odp { umem, .. } => {
                let writes = AccessFlags::LOCAL_WRITE
                    | AccessFlags::REMOTE_WRITE
                    | AccessFlags::REMOTE_ATOMIC;
                if flags.contains(ReregFlags::ACCESS)
                    && access.intersects(writes)
                    && !umem.is_writable()
                {
                    return Err(EACCES);
                }
            }
            Memory::Dma(_) | Memory::Fast { .. } => {}
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
    /// Returns the region's key (L_Key = R_Key) as last set.
    pub(crate) fn key(&self) -> u32 {
        self.shared.key.load(Relaxed)
    }

    /// Returns the page list of a fast-registration region.
    fn page_list(&self) -> Result<&SpinLockIrq<PageList>> {
        match &self.shared.memory {
            Memory::Fast { pages, .. } => Ok(pages),
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
