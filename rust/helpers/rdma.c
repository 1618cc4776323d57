// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#ifdef CONFIG_RUST_RDMA_ABSTRACTIONS

__rust_helper int rust_helper_ib_is_udata_in_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

__rust_helper int rust_helper_ib_respond_empty_udata(struct ib_udata *udata)
{
	return ib_respond_empty_udata(udata);
}

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper void rust_helper_ib_mark_name_assigned_by_user(struct ib_device *ibdev)
{
	ib_mark_name_assigned_by_user(ibdev);
}

__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_ucontext(struct ib_udata *udata)
{
	if (!udata)
		return NULL;
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

__rust_helper struct ib_udata *
rust_helper_uverbs_attr_bundle_driver_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

/*
 * The page behind the virtual DMA address of a device that uses virtual DMA
 * (ib_uses_virt_dma), or NULL if the address is not in directly mapped memory.
 */
__rust_helper struct page *rust_helper_ib_virt_dma_to_valid_page(u64 dma_addr)
{
	void *ptr = ib_virt_dma_to_ptr(dma_addr);

	if (!virt_addr_valid(ptr))
		return NULL;
	return virt_to_page(ptr);
}

#endif

__rust_helper struct page *rust_helper_sg_page(struct scatterlist *sg)
{
	return sg_page(sg);
}

__rust_helper u16 rust_helper_rdma_get_udp_sport(u32 fl, u32 lqpn, u32 rqpn)
{
	return rdma_get_udp_sport(fl, lqpn, rqpn);
}

#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING

#include <linux/hmm.h>
#include <linux/mmu_notifier.h>

__rust_helper bool
rust_helper_mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

__rust_helper void rust_helper_mmu_interval_set_seq(struct mmu_interval_notifier *mni,
						    unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
}

__rust_helper struct page *rust_helper_hmm_pfn_to_page(unsigned long hmm_pfn)
{
	return hmm_pfn_to_page(hmm_pfn);
}

#endif
