// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of an RXE device (Soft-RoCE) through kernel verbs, the API
 * kernel ULPs use. The same suite runs against the C driver rdma_rxe and
 * the Rust driver rdma_rxe_rust: both register driver id RDMA_DRIVER_RXE.
 *
 * Load with "modprobe rxe_kverbs_test dev=rxe0" once the device exists; the
 * suite runs at load time, its results are in
 * /sys/kernel/debug/kunit/rxe_kverbs/results.
 *
 * Every object a case creates is released by a KUnit deferred action, so
 * a failed assertion cleans up too; a last action compares the device's
 * restrack counts with those before the case, which catches leaks.
 */

#include <kunit/test.h>
#include <kunit/resource.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>
#include <rdma/restrack.h>

static char *rxe_kverbs_dev = "rxe0";
module_param_named(dev, rxe_kverbs_dev, charp, 0444);
MODULE_PARM_DESC(dev, "name of the RDMA device to test (driver rxe)");

/* The C driver flushes from a work item: wait this long for completions. */
#define KV_WAIT_MS	2000
#define KV_PORT		1
#define KV_BUF_LEN	256

struct kv_ctx {
	struct kunit *test;
	struct ib_device *dev;
	int res_count[RDMA_RESTRACK_MAX];
};

static struct kv_ctx *kv_ctx(struct kunit *test)
{
	return test->priv;
}

/* A failing assertion, not a NULL dereference, when an op is missing. */
#define KV_NEED_OP(test, ibdev, op)				\
	KUNIT_ASSERT_TRUE_MSG(test, !!(ibdev)->ops.op,		\
			      "%s has no ib_device_ops." #op,	\
			      dev_name(&(ibdev)->dev))

/* Device lookup: ib_device_get_by_name() is not exported, a client is. */

static DEFINE_MUTEX(kv_lookup_lock);
static struct ib_device *kv_found;

static int kv_client_add(struct ib_device *ibdev)
{
	if (!kv_found && ibdev->ops.driver_id == RDMA_DRIVER_RXE &&
	    !strcmp(dev_name(&ibdev->dev), rxe_kverbs_dev) &&
	    ib_device_try_get(ibdev))
		kv_found = ibdev;
	/* Nothing to keep per device: an error means no remove() call. */
	return -EOPNOTSUPP;
}

static struct ib_client kv_client = {
	.name = "rxe_kverbs_test",
	.add = kv_client_add,
	/* See the device even if it lacks mandatory kverbs (Rust, for now). */
	.no_kverbs_req = true,
};

/* Returns the device with a registration reference held, or NULL. */
static struct ib_device *kv_get_device(void)
{
	struct ib_device *ibdev;

	mutex_lock(&kv_lookup_lock);
	kv_found = NULL;
	if (!ib_register_client(&kv_client))
		ib_unregister_client(&kv_client);
	ibdev = kv_found;
	kv_found = NULL;
	mutex_unlock(&kv_lookup_lock);
	return ibdev;
}

KUNIT_DEFINE_ACTION_WRAPPER(kv_put_device, ib_device_put, struct ib_device *);

static const enum rdma_restrack_type kv_tracked[] = {
	RDMA_RESTRACK_PD, RDMA_RESTRACK_CQ, RDMA_RESTRACK_QP,
	RDMA_RESTRACK_MR, RDMA_RESTRACK_SRQ,
};

static const char *const kv_tracked_name[] = {
	[RDMA_RESTRACK_PD] = "PD", [RDMA_RESTRACK_CQ] = "CQ",
	[RDMA_RESTRACK_QP] = "QP", [RDMA_RESTRACK_MR] = "MR",
	[RDMA_RESTRACK_SRQ] = "SRQ",
};

/* Runs last (registered first): every object of the case is gone by now. */
static void kv_check_leaks(void *data)
{
	struct kv_ctx *ctx = data;
	int i;

	for (i = 0; i < ARRAY_SIZE(kv_tracked); i++) {
		enum rdma_restrack_type t = kv_tracked[i];

		KUNIT_EXPECT_EQ_MSG(ctx->test,
				    rdma_restrack_count(ctx->dev, t, false),
				    ctx->res_count[t], "%s leaked",
				    kv_tracked_name[t]);
	}
}

static int kv_init(struct kunit *test)
{
	struct kv_ctx *ctx;
	int i;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->test = test;
	ctx->dev = kv_get_device();
	KUNIT_ASSERT_NOT_NULL_MSG(test, ctx->dev,
				  "no RDMA device '%s' of driver rxe: load rdma_rxe or rdma_rxe_rust, then 'rdma link add %s type rxe netdev IF'",
				  rxe_kverbs_dev, rxe_kverbs_dev);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_put_device,
						  ctx->dev));
	for (i = 0; i < ARRAY_SIZE(kv_tracked); i++)
		ctx->res_count[kv_tracked[i]] =
			rdma_restrack_count(ctx->dev, kv_tracked[i], false);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_check_leaks, ctx));
	test->priv = ctx;
	return 0;
}

/* Object helpers: each registers the matching release as a deferred action. */

KUNIT_DEFINE_ACTION_WRAPPER(kv_pd_release, ib_dealloc_pd, struct ib_pd *);

static struct ib_pd *kv_alloc_pd(struct kunit *test, unsigned int flags)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_pd *pd;

	KV_NEED_OP(test, ibdev, alloc_pd);
	KV_NEED_OP(test, ibdev, dealloc_pd);
	/* rxe has no local DMA lkey: the core asks the driver for a DMA MR. */
	KV_NEED_OP(test, ibdev, get_dma_mr);
	KV_NEED_OP(test, ibdev, dereg_mr);
	pd = ib_alloc_pd(ibdev, flags);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pd);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_pd_release, pd));
	return pd;
}

KUNIT_DEFINE_ACTION_WRAPPER(kv_free_cq, ib_free_cq, struct ib_cq *);
KUNIT_DEFINE_ACTION_WRAPPER(kv_destroy_cq, ib_destroy_cq, struct ib_cq *);

/* New API, polled by the caller. */
static struct ib_cq *kv_alloc_cq(struct kunit *test, int nr_cqe)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_cq *cq;

	KV_NEED_OP(test, ibdev, create_cq);
	KV_NEED_OP(test, ibdev, destroy_cq);
	KV_NEED_OP(test, ibdev, poll_cq);
	cq = ib_alloc_cq(ibdev, NULL, nr_cqe, 0, IB_POLL_DIRECT);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, cq);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_free_cq, cq));
	return cq;
}

/* Old API, with the caller's completion handler. */
static struct ib_cq *kv_create_cq(struct kunit *test, ib_comp_handler handler,
				  void *cq_context, int nr_cqe)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_cq_init_attr attr = { .cqe = nr_cqe };
	struct ib_cq *cq;

	KV_NEED_OP(test, ibdev, create_cq);
	KV_NEED_OP(test, ibdev, destroy_cq);
	KV_NEED_OP(test, ibdev, poll_cq);
	KV_NEED_OP(test, ibdev, req_notify_cq);
	cq = ib_create_cq(ibdev, handler, NULL, cq_context, &attr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, cq);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_destroy_cq, cq));
	return cq;
}

static void kv_qp_release(void *qp)
{
	ib_destroy_qp(qp);
}

/*
 * RC QP with the caps of the brief and @max_inline bytes of inline data;
 * init->cap holds what the driver gave.
 */
static struct ib_qp *kv_create_rc_qp_inline(struct kunit *test,
					    struct ib_pd *pd, struct ib_cq *cq,
					    struct ib_qp_init_attr *init,
					    u32 max_inline)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_qp *qp;

	KV_NEED_OP(test, ibdev, modify_qp);
	KV_NEED_OP(test, ibdev, destroy_qp);
	memset(init, 0, sizeof(*init));
	init->qp_type = IB_QPT_RC;
	init->sq_sig_type = IB_SIGNAL_ALL_WR;
	init->send_cq = cq;
	init->recv_cq = cq;
	init->cap.max_send_wr = 8;
	init->cap.max_recv_wr = 8;
	init->cap.max_send_sge = 2;
	init->cap.max_recv_sge = 2;
	init->cap.max_inline_data = max_inline;
	qp = ib_create_qp(pd, init);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qp);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_qp_release, qp));
	return qp;
}

static struct ib_qp *kv_create_rc_qp(struct kunit *test, struct ib_pd *pd,
				     struct ib_cq *cq,
				     struct ib_qp_init_attr *init)
{
	return kv_create_rc_qp_inline(test, pd, cq, init, 0);
}

/* Destroys now, checking the result; the deferred action is dropped. */
static void kv_destroy_qp(struct kunit *test, struct ib_qp *qp)
{
	kunit_remove_action(test, kv_qp_release, qp);
	KUNIT_EXPECT_EQ(test, ib_destroy_qp(qp), 0);
}

static int kv_modify_state(struct ib_qp *qp, enum ib_qp_state state)
{
	struct ib_qp_attr attr = { .qp_state = state };

	return ib_modify_qp(qp, &attr, IB_QP_STATE);
}

static void kv_to_init(struct kunit *test, struct ib_qp *qp)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = KV_PORT,
		.qp_access_flags = IB_ACCESS_REMOTE_WRITE |
				   IB_ACCESS_REMOTE_READ,
	};

	KUNIT_ASSERT_EQ(test, ib_modify_qp(qp, &attr, IB_QP_STATE |
					   IB_QP_PKEY_INDEX | IB_QP_PORT |
					   IB_QP_ACCESS_FLAGS), 0);
}

struct kv_buf {
	struct ib_device *dev;
	void *cpu;
	u64 dma;
	size_t len;
};

static void kv_buf_release(void *data)
{
	struct kv_buf *buf = data;

	ib_dma_unmap_single(buf->dev, buf->dma, buf->len, DMA_FROM_DEVICE);
	kfree(buf->cpu);
}

/* A receive buffer, mapped for the device. */
static struct kv_buf *kv_alloc_buf(struct kunit *test, size_t len)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct kv_buf *buf;

	buf = kunit_kzalloc(test, sizeof(*buf), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	buf->dev = ibdev;
	buf->len = len;
	buf->cpu = kzalloc(len, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf->cpu);
	buf->dma = ib_dma_map_single(ibdev, buf->cpu, len, DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(ibdev, buf->dma)) {
		kfree(buf->cpu);
		KUNIT_FAIL_AND_ABORT(test, "ib_dma_map_single failed");
	}
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_buf_release, buf));
	return buf;
}

/*
 * Fills @n receive WRs, chained, with wr_id first_id, first_id + 1, ...,
 * each with one SGE over its own slice of @buf.
 */
static void kv_fill_recv(struct ib_recv_wr *wr, struct ib_sge *sge, int n,
			 u64 first_id, struct kv_buf *buf, u32 lkey)
{
	size_t slice = buf->len / n;
	int i;

	for (i = 0; i < n; i++) {
		sge[i].addr = buf->dma + i * slice;
		sge[i].length = slice;
		sge[i].lkey = lkey;
		wr[i].wr_id = first_id + i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
}

/*
 * Polls until @want completions arrived or KV_WAIT_MS passed; returns the
 * number polled. Then checks that nothing more is pending.
 */
static int kv_poll_wait(struct kunit *test, struct ib_cq *cq, struct ib_wc *wc,
			int want, unsigned int *elapsed_ms)
{
	unsigned long start = jiffies;
	unsigned long deadline = start + msecs_to_jiffies(KV_WAIT_MS);
	struct ib_wc extra;
	int got = 0, n;

	for (;;) {
		n = ib_poll_cq(cq, want - got, wc + got);
		KUNIT_ASSERT_GE_MSG(test, n, 0, "ib_poll_cq failed");
		got += n;
		if (got >= want || time_after(jiffies, deadline))
			break;
		msleep(20);
	}
	if (elapsed_ms)
		*elapsed_ms = jiffies_to_msecs(jiffies - start);
	KUNIT_EXPECT_EQ_MSG(test, ib_poll_cq(cq, 1, &extra), 0,
			    "more completions than the %d expected", want);
	return got;
}

/* Checks @n flush completions of @qp with wr_id first_id, first_id + 1, ... */
static void kv_expect_flushed(struct kunit *test, struct ib_wc *wc, int n,
			      struct ib_qp *qp, u64 first_id)
{
	int i;

	for (i = 0; i < n; i++) {
		KUNIT_EXPECT_EQ_MSG(test, wc[i].wr_id, first_id + i,
				    "completion %d out of order", i);
		KUNIT_EXPECT_EQ_MSG(test, wc[i].status, IB_WC_WR_FLUSH_ERR,
				    "completion %d: %s", i,
				    ib_wc_status_msg(wc[i].status));
		KUNIT_EXPECT_PTR_EQ(test, wc[i].qp, qp);
	}
}

/* pd_and_dma_mr: the core gets the PD's DMA MR from the driver. */
static void pd_and_dma_mr(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_pd *pd, *upd;

	/* What makes the core call get_dma_mr; the C driver does not set it. */
	KUNIT_ASSERT_FALSE(test, ibdev->attrs.kernel_cap_flags &
			   IBK_LOCAL_DMA_LKEY);

	pd = kv_alloc_pd(test, 0);
	KUNIT_ASSERT_NOT_NULL(test, pd->__internal_mr);
	KUNIT_EXPECT_NE(test, pd->local_dma_lkey, 0);
	KUNIT_EXPECT_EQ(test, pd->local_dma_lkey, pd->__internal_mr->lkey);
	KUNIT_EXPECT_EQ(test, pd->__internal_mr->type, IB_MR_TYPE_DMA);
	KUNIT_EXPECT_PTR_EQ(test, pd->__internal_mr->pd, pd);
	KUNIT_EXPECT_EQ(test, pd->unsafe_global_rkey, 0);

	upd = kv_alloc_pd(test, IB_PD_UNSAFE_GLOBAL_RKEY);
	KUNIT_ASSERT_NOT_NULL(test, upd->__internal_mr);
	KUNIT_EXPECT_NE(test, upd->local_dma_lkey, 0);
	KUNIT_EXPECT_NE(test, upd->unsafe_global_rkey, 0);
	KUNIT_EXPECT_EQ(test, upd->unsafe_global_rkey,
			upd->__internal_mr->rkey);
	/* Two DMA MRs: two different keys. */
	KUNIT_EXPECT_NE(test, upd->local_dma_lkey, pd->local_dma_lkey);
	/* restrack sees kernel PDs: the leak check is not blind. */
	KUNIT_EXPECT_EQ(test,
			rdma_restrack_count(ibdev, RDMA_RESTRACK_PD, false),
			kv_ctx(test)->res_count[RDMA_RESTRACK_PD] + 2);
}

static void kv_count_comp(struct ib_cq *cq, void *cq_context)
{
	atomic_inc(cq_context);
}

/* cq_create_and_poll_empty: both CQ APIs, an empty CQ, a too big CQ. */
static void cq_create_and_poll_empty(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_cq_init_attr big = { .cqe = ibdev->attrs.max_cqe + 1 };
	struct ib_wc wc[4];
	atomic_t *calls;
	struct ib_cq *cq;

	cq = kv_alloc_cq(test, 16);
	KUNIT_EXPECT_GE(test, cq->cqe, 16);
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, ARRAY_SIZE(wc), wc), 0);
	KV_NEED_OP(test, ibdev, req_notify_cq);
	KUNIT_EXPECT_EQ(test, ib_req_notify_cq(cq, IB_CQ_NEXT_COMP |
					       IB_CQ_REPORT_MISSED_EVENTS), 0);
	KUNIT_EXPECT_EQ(test, ib_req_notify_cq(cq, IB_CQ_SOLICITED), 0);
	kunit_release_action(test, kv_free_cq, cq);

	calls = kunit_kzalloc(test, sizeof(*calls), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, calls);
	cq = kv_create_cq(test, kv_count_comp, calls, 16);
	KUNIT_EXPECT_GE(test, cq->cqe, 16);
	KUNIT_EXPECT_PTR_EQ(test, cq->cq_context, (void *)calls);
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, ARRAY_SIZE(wc), wc), 0);
	KUNIT_EXPECT_EQ(test, ib_req_notify_cq(cq, IB_CQ_NEXT_COMP |
					       IB_CQ_REPORT_MISSED_EVENTS), 0);
	kunit_release_action(test, kv_destroy_cq, cq);
	KUNIT_EXPECT_EQ(test, atomic_read(calls), 0);

	/* More entries than the device allows. */
	cq = ib_create_cq(ibdev, kv_count_comp, NULL, calls, &big);
	if (!IS_ERR(cq))
		ib_destroy_cq(cq);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(cq), -EINVAL);
}

/* rc_qp_states: create, RESET->INIT, an illegal transition, query. */
static void rc_qp_states(struct kunit *test)
{
	struct ib_qp_init_attr init, qinit;
	struct ib_qp_attr attr;
	struct ib_cq *cq;
	struct ib_pd *pd;
	struct ib_qp *qp;

	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 16);
	qp = kv_create_rc_qp(test, pd, cq, &init);
	/* QPNs 0 and 1 are the special QPs, rxe starts others at 16. */
	KUNIT_EXPECT_GE(test, qp->qp_num, 16);
	KUNIT_EXPECT_EQ(test, qp->qp_type, IB_QPT_RC);
	KUNIT_EXPECT_GE(test, init.cap.max_send_wr, 8);
	KUNIT_EXPECT_GE(test, init.cap.max_recv_wr, 8);
	KUNIT_EXPECT_GE(test, init.cap.max_send_sge, 2);
	KUNIT_EXPECT_GE(test, init.cap.max_recv_sge, 2);

	memset(&attr, 0, sizeof(attr));
	KUNIT_ASSERT_EQ(test, ib_query_qp(qp, &attr, IB_QP_STATE, &qinit), 0);
	KUNIT_EXPECT_EQ(test, attr.qp_state, IB_QPS_RESET);

	kv_to_init(test, qp);
	/* INIT->RTS skips RTR: IBA 10.3.1 does not allow it. */
	KUNIT_EXPECT_EQ(test, kv_modify_state(qp, IB_QPS_RTS), -EINVAL);
	/* Nor INIT->SQD. */
	KUNIT_EXPECT_EQ(test, kv_modify_state(qp, IB_QPS_SQD), -EINVAL);

	memset(&attr, 0, sizeof(attr));
	memset(&qinit, 0, sizeof(qinit));
	KUNIT_ASSERT_EQ(test, ib_query_qp(qp, &attr, IB_QP_STATE |
					  IB_QP_PKEY_INDEX | IB_QP_PORT |
					  IB_QP_ACCESS_FLAGS | IB_QP_CAP,
					  &qinit), 0);
	KUNIT_EXPECT_EQ(test, attr.qp_state, IB_QPS_INIT);
	KUNIT_EXPECT_EQ(test, attr.pkey_index, 0);
	KUNIT_EXPECT_EQ(test, attr.port_num, KV_PORT);
	KUNIT_EXPECT_EQ(test, attr.qp_access_flags,
			IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ);
	KUNIT_EXPECT_EQ(test, attr.cap.max_send_wr, init.cap.max_send_wr);
	KUNIT_EXPECT_EQ(test, attr.cap.max_recv_wr, init.cap.max_recv_wr);
	KUNIT_EXPECT_EQ(test, attr.cap.max_send_sge, init.cap.max_send_sge);
	KUNIT_EXPECT_EQ(test, attr.cap.max_recv_sge, init.cap.max_recv_sge);
	KUNIT_EXPECT_EQ(test, qinit.qp_type, IB_QPT_RC);
	KUNIT_EXPECT_PTR_EQ(test, qinit.send_cq, cq);
	KUNIT_EXPECT_PTR_EQ(test, qinit.recv_cq, cq);
	KUNIT_EXPECT_EQ(test, qinit.sq_sig_type, IB_SIGNAL_ALL_WR);
	KUNIT_EXPECT_EQ(test, qinit.cap.max_recv_wr, init.cap.max_recv_wr);

	/* Any state may go back to RESET. */
	KUNIT_EXPECT_EQ(test, kv_modify_state(qp, IB_QPS_RESET), 0);
	memset(&attr, 0, sizeof(attr));
	KUNIT_ASSERT_EQ(test, ib_query_qp(qp, &attr, IB_QP_STATE, &qinit), 0);
	KUNIT_EXPECT_EQ(test, attr.qp_state, IB_QPS_RESET);

	kv_destroy_qp(test, qp);
}

/*
 * Posts wr_id 1, 2, 3 on an RC QP in INIT over @cq, moves it to ERR and
 * checks the three flush completions. Returns the time the flush took.
 */
static unsigned int kv_post3_and_flush(struct kunit *test, struct ib_pd *pd,
				       struct ib_cq *cq,
				       int (*before_err)(struct ib_cq *cq))
{
	const struct ib_recv_wr *bad = NULL;
	struct ib_qp_init_attr init;
	struct ib_recv_wr wr[3] = {};
	struct ib_sge sge[3];
	struct ib_wc wc[3];
	unsigned int ms;
	struct kv_buf *buf;
	struct ib_qp *qp;

	qp = kv_create_rc_qp(test, pd, cq, &init);
	kv_to_init(test, qp);
	buf = kv_alloc_buf(test, 3 * KV_BUF_LEN);
	kv_fill_recv(wr, sge, 3, 1, buf, pd->local_dma_lkey);
	KUNIT_ASSERT_EQ(test, ib_post_recv(qp, wr, &bad), 0);
	KUNIT_EXPECT_NULL(test, bad);
	/* Nothing completes while the QP waits in INIT. */
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, 3, wc), 0);
	if (before_err)
		KUNIT_ASSERT_EQ(test, before_err(cq), 0);

	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);
	KUNIT_ASSERT_EQ_MSG(test, kv_poll_wait(test, cq, wc, 3, &ms), 3,
			    "flush completions within %d ms", KV_WAIT_MS);
	kv_expect_flushed(test, wc, 3, qp, 1);
	kv_destroy_qp(test, qp);
	return ms;
}

/* recv_flush: a QP entering ERR completes its RQ with flush errors. */
static void recv_flush(struct kunit *test)
{
	struct ib_pd *pd = kv_alloc_pd(test, 0);
	struct ib_cq *cq = kv_alloc_cq(test, 16);

	KV_NEED_OP(test, kv_ctx(test)->dev, post_recv);
	kunit_info(test, "flush completions after %u ms\n",
		   kv_post3_and_flush(test, pd, cq, NULL));
}

static int kv_arm(struct ib_cq *cq)
{
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
}

/* comp_handler: an armed CQ calls its handler for the flush completions. */
static void comp_handler(struct kunit *test)
{
	unsigned long deadline;
	struct ib_pd *pd;
	struct ib_cq *cq;
	atomic_t *calls;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_recv);
	calls = kunit_kzalloc(test, sizeof(*calls), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, calls);
	pd = kv_alloc_pd(test, 0);
	cq = kv_create_cq(test, kv_count_comp, calls, 16);
	kv_post3_and_flush(test, pd, cq, kv_arm);
	/* The flush polled the three completions: the handler ran before. */
	deadline = jiffies + msecs_to_jiffies(KV_WAIT_MS);
	while (!atomic_read(calls) && time_before(jiffies, deadline))
		msleep(20);
	KUNIT_EXPECT_GE(test, atomic_read(calls), 1);
	kunit_info(test, "completion handler called %d times, 3 completions\n",
		   atomic_read(calls));
}

/* post_recv_errors: errnos and bad_wr of ib_post_recv. */
static void post_recv_errors(struct kunit *test)
{
	const struct ib_recv_wr *bad;
	struct ib_qp_init_attr init;
	struct ib_recv_wr two[2] = {}, *wr;
	struct ib_sge *sge, *many;
	struct kv_buf *buf;
	struct ib_wc *wc;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	int cap, nsge, i;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_recv);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 64);
	qp = kv_create_rc_qp(test, pd, cq, &init);
	cap = init.cap.max_recv_wr;
	nsge = init.cap.max_recv_sge;
	/* Bounds for the arrays below; rxe gives 15 and 2. */
	KUNIT_ASSERT_GE(test, cap, 8);
	KUNIT_ASSERT_LT(test, cap, cq->cqe);
	KUNIT_ASSERT_GE(test, nsge, 2);
	KUNIT_ASSERT_LE(test, nsge, 64);

	buf = kv_alloc_buf(test, (cap + 1) * KV_BUF_LEN);
	wr = kunit_kcalloc(test, cap, sizeof(*wr), GFP_KERNEL);
	sge = kunit_kcalloc(test, cap, sizeof(*sge), GFP_KERNEL);
	many = kunit_kcalloc(test, nsge + 1, sizeof(*many), GFP_KERNEL);
	wc = kunit_kcalloc(test, cap + 1, sizeof(*wc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, wr);
	KUNIT_ASSERT_NOT_NULL(test, sge);
	KUNIT_ASSERT_NOT_NULL(test, many);
	KUNIT_ASSERT_NOT_NULL(test, wc);

	/* In RESET the RQ takes nothing (IBA C10-97.2.1). */
	kv_fill_recv(two, sge, 1, 99, buf, pd->local_dma_lkey);
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_recv(qp, two, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_recv_wr *)&two[0]);

	kv_to_init(test, qp);

	/* A good WR, then one with a SGE more than the QP allows. */
	kv_fill_recv(two, sge, 2, 100, buf, pd->local_dma_lkey);
	for (i = 0; i <= nsge; i++)
		many[i] = sge[1];
	two[1].sg_list = many;
	two[1].num_sge = nsge + 1;
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_recv(qp, two, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_recv_wr *)&two[1]);

	/* WR 100 is queued: cap - 1 more fit, the cap-th does not. */
	kv_fill_recv(wr, sge, cap, 1, buf, pd->local_dma_lkey);
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_recv(qp, wr, &bad), -ENOMEM);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_recv_wr *)&wr[cap - 1]);

	/* The flush shows what was queued: 100, then 1 .. cap - 1. */
	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, cq, wc, cap, NULL), cap);
	kv_expect_flushed(test, wc, 1, qp, 100);
	kv_expect_flushed(test, wc + 1, cap - 1, qp, 1);
	kv_destroy_qp(test, qp);
}

struct kv_sg {
	struct ib_device *dev;
	struct scatterlist *sgl;
	struct page **pages;
	int n;
	bool mapped;
};

static void kv_sg_release(void *data)
{
	struct kv_sg *s = data;
	int i;

	if (s->mapped)
		ib_dma_unmap_sg(s->dev, s->sgl, s->n, DMA_BIDIRECTIONAL);
	for (i = 0; i < s->n; i++)
		if (s->pages[i])
			__free_page(s->pages[i]);
}

/* A scatterlist of @n separate pages, DMA-mapped for the device. */
static struct kv_sg *kv_alloc_sg(struct kunit *test, int n)
{
	struct kv_sg *s;
	int i;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	s->dev = kv_ctx(test)->dev;
	s->n = n;
	s->sgl = kunit_kcalloc(test, n, sizeof(*s->sgl), GFP_KERNEL);
	s->pages = kunit_kcalloc(test, n, sizeof(*s->pages), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s->sgl);
	KUNIT_ASSERT_NOT_NULL(test, s->pages);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, kv_sg_release,
							   s));
	sg_init_table(s->sgl, n);
	for (i = 0; i < n; i++) {
		s->pages[i] = alloc_page(GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, s->pages[i]);
		sg_set_page(&s->sgl[i], s->pages[i], PAGE_SIZE, 0);
	}
	KUNIT_ASSERT_EQ(test, ib_dma_map_sg(s->dev, s->sgl, n,
					    DMA_BIDIRECTIONAL), n);
	s->mapped = true;
	return s;
}

static void kv_mr_release(void *mr)
{
	ib_dereg_mr(mr);
}

/* fast_reg_mr: ib_alloc_mr and ib_map_mr_sg. */
static void fast_reg_mr(struct kunit *test)
{
	struct ib_pd *pd = kv_alloc_pd(test, 0);
	struct kv_sg *three, *six;
	struct ib_mr *mr, *gaps;

	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 4);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, mr);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, kv_mr_release,
							   mr));
	KUNIT_EXPECT_NE(test, mr->lkey, 0);
	KUNIT_EXPECT_NE(test, mr->rkey, 0);
	/* key = index << 8 | variant; the PD's DMA MR has another index. */
	KUNIT_EXPECT_NE(test, mr->lkey >> 8, 0);
	KUNIT_EXPECT_EQ(test, mr->rkey >> 8, mr->lkey >> 8);
	KUNIT_EXPECT_NE(test, mr->lkey >> 8, pd->local_dma_lkey >> 8);
	KUNIT_EXPECT_EQ(test, mr->type, IB_MR_TYPE_MEM_REG);
	KUNIT_EXPECT_PTR_EQ(test, mr->pd, pd);

	/* rxe registers no SG gaps (no IBK_SG_GAPS_REG). */
	gaps = ib_alloc_mr(pd, IB_MR_TYPE_SG_GAPS, 4);
	if (!IS_ERR(gaps))
		ib_dereg_mr(gaps);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(gaps), -EINVAL);

	three = kv_alloc_sg(test, 3);
	KUNIT_EXPECT_EQ(test, ib_map_mr_sg(mr, three->sgl, 3, NULL, PAGE_SIZE),
			3);
	KUNIT_EXPECT_EQ(test, mr->iova, sg_dma_address(&three->sgl[0]));
	KUNIT_EXPECT_EQ(test, mr->length, 3 * PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, mr->page_size, PAGE_SIZE);

	/* Only as many pages as the MR was allocated for. */
	six = kv_alloc_sg(test, 6);
	KUNIT_EXPECT_EQ(test, ib_map_mr_sg(mr, six->sgl, 6, NULL, PAGE_SIZE),
			4);
	KUNIT_EXPECT_EQ(test, mr->iova, sg_dma_address(&six->sgl[0]));
	KUNIT_EXPECT_EQ(test, mr->length, 4 * PAGE_SIZE);

	kunit_remove_action(test, kv_mr_release, mr);
	KUNIT_EXPECT_EQ(test, ib_dereg_mr(mr), 0);
}

static void kv_srq_release(void *srq)
{
	ib_destroy_srq(srq);
}

/* srq: create, query, post (good, past full, bad), modify the limit, destroy. */
static void srq(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_srq_init_attr init = {
		.attr = { .max_wr = 8, .max_sge = 2 },
		.srq_type = IB_SRQT_BASIC,
	};
	const struct ib_recv_wr *bad;
	struct ib_recv_wr wr[2] = {};
	struct ib_srq_attr attr;
	struct ib_sge sge[2], *many;
	struct kv_buf *buf;
	struct ib_srq *shared;
	struct ib_pd *pd;
	int i;

	KV_NEED_OP(test, ibdev, destroy_srq);
	KV_NEED_OP(test, ibdev, post_srq_recv);
	pd = kv_alloc_pd(test, 0);
	shared = ib_create_srq(pd, &init);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, shared);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, kv_srq_release,
							   shared));
	KUNIT_EXPECT_GE(test, init.attr.max_wr, 8);

	memset(&attr, 0, sizeof(attr));
	KUNIT_ASSERT_EQ(test, ib_query_srq(shared, &attr), 0);
	KUNIT_EXPECT_GE(test, attr.max_wr, 8);
	KUNIT_EXPECT_EQ(test, attr.max_wr, init.attr.max_wr);
	KUNIT_EXPECT_GE(test, attr.max_sge, 2);
	KUNIT_EXPECT_EQ(test, attr.srq_limit, 0);
	KUNIT_ASSERT_LE(test, attr.max_sge, 64);

	buf = kv_alloc_buf(test, 2 * KV_BUF_LEN);
	kv_fill_recv(wr, sge, 2, 1, buf, pd->local_dma_lkey);
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_srq_recv(shared, wr, &bad), 0);
	KUNIT_EXPECT_NULL(test, bad);

	/* One SGE more than the SRQ holds. */
	many = kunit_kcalloc(test, attr.max_sge + 1, sizeof(*many), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, many);
	for (i = 0; i <= attr.max_sge; i++)
		many[i] = sge[0];
	wr[0].next = NULL;
	wr[0].sg_list = many;
	wr[0].num_sge = attr.max_sge + 1;
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_srq_recv(shared, wr, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_recv_wr *)&wr[0]);

	/* It holds attr.max_wr WRs: two are in, the rest fit, one more does not. */
	wr[0].sg_list = sge;
	wr[0].num_sge = 1;
	for (i = 2; i < attr.max_wr; i++)
		KUNIT_ASSERT_EQ(test, ib_post_srq_recv(shared, wr, &bad), 0);
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_srq_recv(shared, wr, &bad), -ENOMEM);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_recv_wr *)&wr[0]);

	attr.srq_limit = 4;
	KUNIT_EXPECT_EQ(test, ib_modify_srq(shared, &attr, IB_SRQ_LIMIT), 0);
	memset(&attr, 0, sizeof(attr));
	KUNIT_ASSERT_EQ(test, ib_query_srq(shared, &attr), 0);
	KUNIT_EXPECT_EQ(test, attr.srq_limit, 4);
	/* A limit above the queue's size cannot be reached. */
	attr.srq_limit = attr.max_wr + 1;
	KUNIT_EXPECT_EQ(test, ib_modify_srq(shared, &attr, IB_SRQ_LIMIT),
			-EINVAL);

	kunit_remove_action(test, kv_srq_release, shared);
	KUNIT_EXPECT_EQ(test, ib_destroy_srq_user(shared, NULL), 0);
}

/* ah: a RoCE AH to our own GID 0; RoCE requires a GRH. */
static void ah(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct rdma_ah_attr attr = {}, qattr = {};
	struct net_device *ndev;
	union ib_gid gid;
	struct ib_pd *pd;
	struct ib_ah *av;

	KV_NEED_OP(test, ibdev, destroy_ah);
	pd = kv_alloc_pd(test, 0);
	KUNIT_ASSERT_EQ(test, rdma_query_gid(ibdev, KV_PORT, 0, &gid), 0);
	ndev = ib_device_get_netdev(ibdev, KV_PORT);
	KUNIT_ASSERT_NOT_NULL(test, ndev);

	attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	KUNIT_EXPECT_EQ(test, rdma_ah_find_type(ibdev, KV_PORT),
			RDMA_AH_ATTR_TYPE_ROCE);
	rdma_ah_set_port_num(&attr, KV_PORT);
	rdma_ah_set_grh(&attr, &gid, 0, 0, 1, 0);
	memcpy(attr.roce.dmac, ndev->dev_addr, ETH_ALEN);
	dev_put(ndev);

	av = rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, av);
	KUNIT_EXPECT_EQ(test, av->type, RDMA_AH_ATTR_TYPE_ROCE);
	KUNIT_EXPECT_PTR_EQ(test, av->pd, pd);
	KUNIT_EXPECT_NOT_NULL(test, av->sgid_attr);
	if (ibdev->ops.query_ah) {
		KUNIT_EXPECT_EQ(test, rdma_query_ah(av, &qattr), 0);
		KUNIT_EXPECT_TRUE(test, rdma_ah_get_ah_flags(&qattr) &
				  IB_AH_GRH);
		KUNIT_EXPECT_MEMEQ(test, qattr.grh.dgid.raw, gid.raw,
				   sizeof(gid.raw));
		KUNIT_EXPECT_EQ(test, qattr.grh.hop_limit, 1);
	}
	rdma_destroy_ah(av, RDMA_DESTROY_AH_SLEEPABLE);

	/* Without a GRH: the core refuses a RoCE AH. */
	attr.ah_flags = 0;
	av = rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	if (!IS_ERR(av))
		rdma_destroy_ah(av, RDMA_DESTROY_AH_SLEEPABLE);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(av), -EINVAL);
}

/* gsi_qp_exists: the MAD layer opened QP1 on port 1 and moved it to RTS. */
static void gsi_qp_exists(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct rdma_restrack_entry *res;
	struct ib_qp_init_attr qinit;
	struct ib_port_attr pattr;
	struct ib_qp_attr attr;
	struct ib_qp *qp;

	KUNIT_ASSERT_EQ(test, ib_query_port(ibdev, KV_PORT, &pattr), 0);
	KUNIT_EXPECT_EQ(test, pattr.state, IB_PORT_ACTIVE);
	KUNIT_EXPECT_GE(test, pattr.gid_tbl_len, 1);
	KUNIT_EXPECT_GE(test, pattr.pkey_tbl_len, 1);
	KUNIT_EXPECT_TRUE(test, rdma_protocol_roce(ibdev, KV_PORT));
	KUNIT_ASSERT_TRUE(test, rdma_cap_ib_mad(ibdev, KV_PORT));
	/* RoCE has no subnet manager: no QP0. */
	KUNIT_EXPECT_FALSE(test, rdma_cap_ib_smi(ibdev, KV_PORT));
	KUNIT_ASSERT_TRUE_MSG(test, ibdev->kverbs_provider,
			      "%s lacks mandatory kverbs: no MAD layer on it",
			      dev_name(&ibdev->dev));

	/* restrack files GSI QPs under qp_num | port << 24. */
	res = rdma_restrack_get_byid(ibdev, RDMA_RESTRACK_QP,
				     1 | KV_PORT << 24);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(res), "no QP1 on port %d",
			       KV_PORT);
	qp = container_of(res, struct ib_qp, res);
	KUNIT_EXPECT_EQ(test, qp->qp_type, IB_QPT_GSI);
	KUNIT_EXPECT_EQ(test, qp->qp_num, 1);
	KUNIT_EXPECT_EQ(test, qp->port, KV_PORT);
	memset(&attr, 0, sizeof(attr));
	KUNIT_EXPECT_EQ(test, ib_query_qp(qp, &attr, IB_QP_STATE, &qinit), 0);
	KUNIT_EXPECT_EQ(test, attr.qp_state, IB_QPS_RTS);
	rdma_restrack_put(res);

	res = rdma_restrack_get_byid(ibdev, RDMA_RESTRACK_QP, KV_PORT << 24);
	if (!IS_ERR(res))
		rdma_restrack_put(res);
	KUNIT_EXPECT_EQ_MSG(test, PTR_ERR_OR_ZERO(res), -ENOENT,
			    "RoCE port with a QP0");
}

/*
 * modify_port: capability bits are set and cleared as asked; the only
 * supported mask bit is the Q_Key violation counter reset.
 */
static void modify_port(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_port_modify pm = { .set_port_cap_mask = IB_PORT_SM_DISABLED };
	struct ib_port_attr pattr;
	u32 before;

	KUNIT_ASSERT_EQ(test, ib_query_port(ibdev, KV_PORT, &pattr), 0);
	before = pattr.port_cap_flags;
	KUNIT_ASSERT_EQ(test, ib_modify_port(ibdev, KV_PORT, 0, &pm), 0);
	KUNIT_ASSERT_EQ(test, ib_query_port(ibdev, KV_PORT, &pattr), 0);
	KUNIT_EXPECT_EQ(test, pattr.port_cap_flags,
			before | IB_PORT_SM_DISABLED);

	pm.set_port_cap_mask = 0;
	pm.clr_port_cap_mask = IB_PORT_SM_DISABLED;
	KUNIT_ASSERT_EQ(test, ib_modify_port(ibdev, KV_PORT,
					     IB_PORT_RESET_QKEY_CNTR, &pm), 0);
	KUNIT_ASSERT_EQ(test, ib_query_port(ibdev, KV_PORT, &pattr), 0);
	KUNIT_EXPECT_EQ(test, pattr.port_cap_flags,
			before & ~IB_PORT_SM_DISABLED);
	KUNIT_EXPECT_EQ(test, pattr.qkey_viol_cntr, 0);

	/* Restore what other clients (the CM) set. */
	pm.set_port_cap_mask = before & IB_PORT_SM_DISABLED;
	pm.clr_port_cap_mask = 0;
	KUNIT_EXPECT_EQ(test, ib_modify_port(ibdev, KV_PORT, 0, &pm), 0);

	KUNIT_EXPECT_EQ(test, ib_modify_port(ibdev, KV_PORT, IB_PORT_SHUTDOWN,
					     &pm), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, ib_modify_port(ibdev, KV_PORT + 1, 0, &pm),
			-EINVAL);
}

/* Async events seen, by type (enum ib_event_type is below 32). */
#define KV_NR_EVENTS 32

static void kv_count_event(struct ib_event *ev, void *context)
{
	atomic_t *seen = context;

	if (ev->event < KV_NR_EVENTS)
		atomic_inc(&seen[ev->event]);
}

static atomic_t *kv_alloc_seen(struct kunit *test)
{
	atomic_t *seen = kunit_kcalloc(test, KV_NR_EVENTS, sizeof(*seen),
				       GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, seen);
	return seen;
}

/* Waits up to KV_WAIT_MS for an event of @type; returns how many came. */
static int kv_wait_event(atomic_t *seen, enum ib_event_type type)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KV_WAIT_MS);

	while (!atomic_read(&seen[type]) && time_before(jiffies, deadline))
		msleep(10);
	return atomic_read(&seen[type]);
}

/*
 * cq_overrun: flushing more receives than the CQ holds overruns it: the
 * owner gets one IB_EVENT_CQ_ERR, the CQ keeps what fitted, and the rest of
 * the queue is dropped.
 */
static void cq_overrun(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_cq_init_attr cattr = { .cqe = 1 };
	const struct ib_recv_wr *bad = NULL;
	struct ib_qp_init_attr init;
	struct ib_recv_wr wr[3] = {};
	struct ib_sge sge[3];
	struct ib_wc wc[4];
	struct kv_buf *buf;
	atomic_t *seen;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_cq *cq;

	KV_NEED_OP(test, ibdev, post_recv);
	seen = kv_alloc_seen(test);
	pd = kv_alloc_pd(test, 0);
	cq = ib_create_cq(ibdev, NULL, kv_count_event, seen, &cattr);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, cq);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_destroy_cq, cq));
	KUNIT_ASSERT_EQ(test, cq->cqe, 1);

	qp = kv_create_rc_qp(test, pd, cq, &init);
	kv_to_init(test, qp);
	buf = kv_alloc_buf(test, 3 * KV_BUF_LEN);
	kv_fill_recv(wr, sge, 3, 1, buf, pd->local_dma_lkey);
	KUNIT_ASSERT_EQ(test, ib_post_recv(qp, wr, &bad), 0);
	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);

	KUNIT_EXPECT_EQ(test, kv_wait_event(seen, IB_EVENT_CQ_ERR), 1);
	KUNIT_ASSERT_EQ(test, ib_poll_cq(cq, 4, wc), 1);
	kv_expect_flushed(test, wc, 1, qp, 1);
	/* The dropped requests never complete. */
	msleep(50);
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, 4, wc), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&seen[IB_EVENT_CQ_ERR]), 1);
	kv_destroy_qp(test, qp);
}

/*
 * srq_last_wqe: a QP on an SRQ that enters ERR reports
 * IB_EVENT_QP_LAST_WQE_REACHED; the SRQ's requests stay for other QPs.
 */
static void srq_last_wqe(struct kunit *test)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_srq_init_attr sinit = {
		.attr = { .max_wr = 8, .max_sge = 1 },
		.srq_type = IB_SRQT_BASIC,
	};
	const struct ib_recv_wr *bad = NULL;
	struct ib_qp_init_attr init = {};
	struct ib_recv_wr wr[2] = {};
	struct ib_srq *shared;
	struct ib_sge sge[2];
	struct kv_buf *buf;
	struct ib_wc wc[2];
	atomic_t *seen;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_cq *cq;

	KV_NEED_OP(test, ibdev, post_srq_recv);
	seen = kv_alloc_seen(test);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 16);
	shared = ib_create_srq(pd, &sinit);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, shared);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, kv_srq_release,
							   shared));
	buf = kv_alloc_buf(test, 2 * KV_BUF_LEN);
	kv_fill_recv(wr, sge, 2, 1, buf, pd->local_dma_lkey);
	KUNIT_ASSERT_EQ(test, ib_post_srq_recv(shared, wr, &bad), 0);

	init.qp_type = IB_QPT_RC;
	init.sq_sig_type = IB_SIGNAL_ALL_WR;
	init.send_cq = cq;
	init.recv_cq = cq;
	init.srq = shared;
	init.cap.max_send_wr = 4;
	init.cap.max_send_sge = 1;
	init.event_handler = kv_count_event;
	init.qp_context = seen;
	qp = ib_create_qp(pd, &init);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qp);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_qp_release, qp));
	kv_to_init(test, qp);
	KUNIT_EXPECT_EQ(test, atomic_read(&seen[IB_EVENT_QP_LAST_WQE_REACHED]),
			0);
	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);
	KUNIT_EXPECT_GE(test,
			kv_wait_event(seen, IB_EVENT_QP_LAST_WQE_REACHED), 1);
	/* The SRQ's receives are not the QP's to flush. */
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, 2, wc), 0);
	kv_destroy_qp(test, qp);
}

/*
 * post_send_flush: send requests are refused before RTS and checked as the
 * C driver checks them (opcode for the QP type, SGE count, atomic length
 * and alignment, inline size); in ERR a valid one completes with
 * IB_WC_WR_FLUSH_ERR.
 */
static void post_send_flush(struct kunit *test)
{
	const struct ib_send_wr *bad;
	struct ib_qp_init_attr init;
	struct ib_atomic_wr aw = {};
	struct ib_rdma_wr rw = {};
	struct ib_send_wr sw = {};
	struct ib_sge sge[4];
	struct ib_wc wc[2];
	struct kv_buf *buf;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_cq *cq;
	int i;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_send);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 16);
	qp = kv_create_rc_qp(test, pd, cq, &init);
	KUNIT_ASSERT_LT(test, init.cap.max_send_sge, 4);
	buf = kv_alloc_buf(test, 4 * KV_BUF_LEN);
	for (i = 0; i < 4; i++) {
		sge[i].addr = buf->dma + i * KV_BUF_LEN;
		sge[i].length = 8;
		sge[i].lkey = pd->local_dma_lkey;
	}
	sw.wr_id = 9;
	sw.opcode = IB_WR_SEND;
	sw.sg_list = sge;
	sw.num_sge = 1;

	/* RESET, then INIT: not ready to send. */
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &sw, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_send_wr *)&sw);
	kv_to_init(test, qp);
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &sw, &bad), -EINVAL);
	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);

	sw.num_sge = init.cap.max_send_sge + 1;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &sw, &bad), -EINVAL);
	sw.num_sge = 1;
	sw.send_flags = IB_SEND_INLINE;
	sge[0].length = init.cap.max_inline_data + 1;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &sw, &bad), -EINVAL);
	sge[0].length = 8;
	sw.send_flags = 0;

	aw.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	aw.wr.sg_list = &sge[1];
	aw.wr.num_sge = 1;
	aw.remote_addr = 0x1004;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &aw.wr, &bad), -EINVAL);
	aw.remote_addr = 0x1000;
	sge[1].length = 16;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &aw.wr, &bad), -EINVAL);
	sge[1].length = 8;

	/* A chain: the first two go, the third (bad opcode) stops it. */
	rw.wr.wr_id = 10;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	rw.wr.sg_list = &sge[2];
	rw.wr.num_sge = 1;
	rw.wr.next = &aw.wr;
	aw.wr.wr_id = 11;
	aw.wr.next = &sw;
	sw.opcode = 0xff;
	sw.next = NULL;
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &rw.wr, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_send_wr *)&sw);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, cq, wc, 2, NULL), 2);
	kv_expect_flushed(test, wc, 2, qp, 10);
	kv_destroy_qp(test, qp);
}

/* drain: ib_drain_qp (what ULPs run before destroying a QP) returns. */
static void drain(struct kunit *test)
{
	struct ib_qp_init_attr init;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_cq *cq;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_send);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 16);
	qp = kv_create_rc_qp(test, pd, cq, &init);
	kv_to_init(test, qp);
	ib_drain_qp(qp);
	KUNIT_EXPECT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);
	kv_destroy_qp(test, qp);
}

/*
 * Moves @qp, in INIT, to RTS connected to @dest_qpn on this device, with
 * local ACK timeout @timeout.
 */
static void kv_connect_self_timeout(struct kunit *test, struct ib_qp *qp,
				    u32 dest_qpn, u8 timeout)
{
	struct ib_device *ibdev = kv_ctx(test)->dev;
	struct ib_qp_attr attr = {};
	struct net_device *ndev;
	union ib_gid gid;

	KUNIT_ASSERT_EQ(test, rdma_query_gid(ibdev, KV_PORT, 0, &gid), 0);
	ndev = ib_device_get_netdev(ibdev, KV_PORT);
	KUNIT_ASSERT_NOT_NULL(test, ndev);
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = 100;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, KV_PORT);
	rdma_ah_set_grh(&attr.ah_attr, &gid, 0, 0, 1, 0);
	memcpy(attr.ah_attr.roce.dmac, ndev->dev_addr, ETH_ALEN);
	dev_put(ndev);
	KUNIT_ASSERT_EQ(test, ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_AV |
					   IB_QP_PATH_MTU | IB_QP_DEST_QPN |
					   IB_QP_RQ_PSN |
					   IB_QP_MAX_DEST_RD_ATOMIC |
					   IB_QP_MIN_RNR_TIMER), 0);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 100;
	attr.timeout = timeout;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	KUNIT_ASSERT_EQ(test, ib_modify_qp(qp, &attr, IB_QP_STATE |
					   IB_QP_SQ_PSN | IB_QP_TIMEOUT |
					   IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
					   IB_QP_MAX_QP_RD_ATOMIC), 0);
}

/* Moves @qp, in INIT, to RTS connected to @dest_qpn on this device. */
static void kv_connect_self(struct kunit *test, struct ib_qp *qp, u32 dest_qpn)
{
	kv_connect_self_timeout(test, qp, dest_qpn, 14);
}

/*
 * send_queue_full: posting past a full send queue fails with -ENOMEM, @bad
 * at the first WR that did not fit, and nothing of it is queued. The QP
 * sends to a QP number no QP has, with a local ACK timeout of seconds, so
 * no slot frees while the test posts; the flush then completes exactly the
 * WRs that fit, in order.
 */
static void send_queue_full(struct kunit *test)
{
	const struct ib_send_wr *bad;
	struct ib_qp_init_attr init;
	struct ib_send_wr *wr;
	struct kv_buf *buf;
	struct ib_sge sge;
	struct ib_wc *wc;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_cq *cq;
	int cap, i;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_send);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 64);
	qp = kv_create_rc_qp(test, pd, cq, &init);
	cap = init.cap.max_send_wr;
	/* Bounds for the arrays below; rxe gives 15. */
	KUNIT_ASSERT_GE(test, cap, 8);
	KUNIT_ASSERT_LT(test, cap, cq->cqe);
	buf = kv_alloc_buf(test, KV_BUF_LEN);
	wr = kunit_kcalloc(test, cap + 2, sizeof(*wr), GFP_KERNEL);
	wc = kunit_kcalloc(test, cap + 2, sizeof(*wc), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, wr);
	KUNIT_ASSERT_NOT_NULL(test, wc);
	sge.addr = buf->dma;
	sge.length = 8;
	sge.lkey = pd->local_dma_lkey;
	for (i = 0; i < cap + 2; i++) {
		wr[i].wr_id = i + 1;
		wr[i].opcode = IB_WR_SEND;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < cap + 2 ? &wr[i + 1] : NULL;
	}

	kv_to_init(test, qp);
	/* Timeout 20: about 4 s per try, 8 tries. */
	kv_connect_self_timeout(test, qp, 0xfffff0, 20);
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, wr, &bad), -ENOMEM);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_send_wr *)&wr[cap]);
	/* Still full. */
	bad = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_send(qp, &wr[cap + 1], &bad), -ENOMEM);
	KUNIT_EXPECT_PTR_EQ(test, bad, (const struct ib_send_wr *)&wr[cap + 1]);

	KUNIT_ASSERT_EQ(test, kv_modify_state(qp, IB_QPS_ERR), 0);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, cq, wc, cap, NULL), cap);
	kv_expect_flushed(test, wc, cap, qp, 1);
	kv_destroy_qp(test, qp);
}

/* Posts @wr on @qp and waits for its one completion, which must succeed. */
static void kv_send_and_wait(struct kunit *test, struct ib_qp *qp,
			     struct ib_send_wr *wr, struct ib_cq *cq,
			     enum ib_wc_opcode opcode)
{
	const struct ib_send_wr *bad = NULL;
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, ib_post_send(qp, wr, &bad), 0);
	KUNIT_ASSERT_EQ_MSG(test, kv_poll_wait(test, cq, &wc, 1, NULL), 1,
			    "completion of WR %llu within %d ms", wr->wr_id,
			    KV_WAIT_MS);
	KUNIT_EXPECT_EQ(test, wc.wr_id, wr->wr_id);
	KUNIT_EXPECT_EQ_MSG(test, wc.status, IB_WC_SUCCESS, "%s",
			    ib_wc_status_msg(wc.status));
	KUNIT_EXPECT_EQ(test, wc.opcode, opcode);
}

/*
 * rc_kernel_traffic: two kernel RC QPs of the device, connected to each
 * other, move kernel memory: a SEND into a posted receive, an inline SEND,
 * an RDMA WRITE and an RDMA READ through the domain's global R_Key. Every
 * byte is compared.
 */
static void rc_kernel_traffic(struct kunit *test)
{
	const struct ib_recv_wr *rbad = NULL;
	struct ib_qp_init_attr init;
	struct ib_rdma_wr rw = {};
	struct ib_send_wr sw = {};
	struct ib_recv_wr rwr = {};
	struct ib_sge sge, rsge;
	struct ib_cq *scq, *rcq;
	struct kv_buf *src, *dst;
	struct ib_qp *qa, *qb;
	struct ib_pd *pd;
	struct ib_wc wc;
	u8 *s, *d, *inl;
	int i;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_send);
	pd = kv_alloc_pd(test, IB_PD_UNSAFE_GLOBAL_RKEY);
	scq = kv_alloc_cq(test, 16);
	rcq = kv_alloc_cq(test, 16);
	qa = kv_create_rc_qp_inline(test, pd, scq, &init, 64);
	qb = kv_create_rc_qp(test, pd, rcq, &init);
	kv_to_init(test, qa);
	kv_to_init(test, qb);
	kv_connect_self(test, qa, qb->qp_num);
	kv_connect_self(test, qb, qa->qp_num);
	/* A page and a half: copies cross a page boundary. */
	src = kv_alloc_buf(test, 3 * PAGE_SIZE / 2);
	dst = kv_alloc_buf(test, 3 * PAGE_SIZE / 2);
	s = src->cpu;
	d = dst->cpu;
	for (i = 0; i < src->len; i++)
		s[i] = i * 7 + 3;

	/* SEND of 3000 bytes from offset 100 into a receive at offset 900. */
	rsge.addr = dst->dma + 900;
	rsge.length = 3000;
	rsge.lkey = pd->local_dma_lkey;
	rwr.wr_id = 7;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	KUNIT_ASSERT_EQ(test, ib_post_recv(qb, &rwr, &rbad), 0);
	sge.addr = src->dma + 100;
	sge.length = 3000;
	sge.lkey = pd->local_dma_lkey;
	sw.wr_id = 1;
	sw.opcode = IB_WR_SEND;
	sw.send_flags = IB_SEND_SIGNALED;
	sw.sg_list = &sge;
	sw.num_sge = 1;
	kv_send_and_wait(test, qa, &sw, scq, IB_WC_SEND);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, rcq, &wc, 1, NULL), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 7);
	KUNIT_EXPECT_EQ_MSG(test, wc.status, IB_WC_SUCCESS, "%s",
			    ib_wc_status_msg(wc.status));
	KUNIT_EXPECT_EQ(test, wc.byte_len, 3000);
	KUNIT_EXPECT_MEMEQ(test, d + 900, s + 100, 3000);

	/*
	 * An inline SEND of 60 bytes: copied at post time, so the buffer may
	 * change as soon as the post returns.
	 */
	inl = kunit_kmalloc(test, 60, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, inl);
	memcpy(inl, s + 7, 60);
	rsge.addr = dst->dma;
	rsge.length = 100;
	rwr.wr_id = 8;
	KUNIT_ASSERT_EQ(test, ib_post_recv(qb, &rwr, &rbad), 0);
	sge.addr = (uintptr_t)inl;
	sge.length = 60;
	sge.lkey = 0;
	sw.wr_id = 11;
	sw.send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE;
	KUNIT_ASSERT_EQ(test, ib_post_send(qa, &sw, NULL), 0);
	memset(inl, 0xee, 60);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, scq, &wc, 1, NULL), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 11);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, rcq, &wc, 1, NULL), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 8);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 60);
	KUNIT_EXPECT_MEMEQ(test, d, s + 7, 60);
	sge.lkey = pd->local_dma_lkey;
	sw.send_flags = IB_SEND_SIGNALED;

	/* RDMA WRITE of 2000 bytes to offset 10 of the other buffer. */
	memset(d, 0, dst->len);
	sge.addr = src->dma + 50;
	sge.length = 2000;
	rw.wr.wr_id = 2;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	rw.wr.send_flags = IB_SEND_SIGNALED;
	rw.wr.sg_list = &sge;
	rw.wr.num_sge = 1;
	rw.remote_addr = dst->dma + 10;
	rw.rkey = pd->unsafe_global_rkey;
	kv_send_and_wait(test, qa, &rw.wr, scq, IB_WC_RDMA_WRITE);
	KUNIT_EXPECT_MEMEQ(test, d + 10, s + 50, 2000);
	KUNIT_EXPECT_EQ(test, d[9], 0);
	KUNIT_EXPECT_EQ(test, d[2010], 0);

	/* RDMA READ of 1500 bytes from the first buffer into the second. */
	memset(d, 0, dst->len);
	sge.addr = dst->dma + 200;
	sge.length = 1500;
	rw.wr.wr_id = 3;
	rw.wr.opcode = IB_WR_RDMA_READ;
	rw.remote_addr = src->dma + 1000;
	kv_send_and_wait(test, qa, &rw.wr, scq, IB_WC_RDMA_READ);
	KUNIT_EXPECT_MEMEQ(test, d + 200, s + 1000, 1500);

	/* A bad R_Key: a remote access error, and the QP goes to ERR. */
	rw.wr.wr_id = 4;
	rw.rkey = pd->unsafe_global_rkey ^ 0x80;
	KUNIT_ASSERT_EQ(test, ib_post_send(qa, &rw.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, scq, &wc, 1, NULL), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 4);
	KUNIT_EXPECT_EQ_MSG(test, wc.status, IB_WC_REM_ACCESS_ERR, "%s",
			    ib_wc_status_msg(wc.status));
	kv_destroy_qp(test, qa);
	kv_destroy_qp(test, qb);
}

/* Two kernel RC QPs of @pd, connected to each other: @qa on @scq, @qb on @rcq. */
static void kv_rc_pair(struct kunit *test, struct ib_pd *pd, struct ib_cq *scq,
		       struct ib_cq *rcq, struct ib_qp **qa, struct ib_qp **qb)
{
	struct ib_qp_init_attr init;

	*qa = kv_create_rc_qp(test, pd, scq, &init);
	*qb = kv_create_rc_qp(test, pd, rcq, &init);
	kv_to_init(test, *qa);
	kv_to_init(test, *qb);
	kv_connect_self(test, *qa, (*qb)->qp_num);
	kv_connect_self(test, *qb, (*qa)->qp_num);
}

/* Posts @wr on @qp; its one completion must end with @status. */
static void kv_send_expect(struct kunit *test, struct ib_qp *qp,
			   struct ib_send_wr *wr, struct ib_cq *cq,
			   enum ib_wc_status status)
{
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, ib_post_send(qp, wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, kv_poll_wait(test, cq, &wc, 1, NULL), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, wr->wr_id);
	KUNIT_EXPECT_EQ_MSG(test, wc.status, status, "%s",
			    ib_wc_status_msg(wc.status));
}

/*
 * frmr_kernel_traffic: a fast-registration region over three separate
 * pages. Its R_Key names nothing before a REG_MR work request; after one,
 * an RDMA WRITE across its page boundaries lands in the right pages and an
 * RDMA READ reads them back; after a LOCAL_INV it names nothing again.
 */
static void frmr_kernel_traffic(struct kunit *test)
{
	struct ib_reg_wr reg = {};
	struct ib_send_wr inv = {};
	struct ib_rdma_wr rw = {};
	struct ib_cq *scq, *rcq;
	struct ib_qp *qa, *qb;
	struct kv_buf *src;
	struct kv_sg *pages;
	struct ib_sge sge;
	struct ib_pd *pd;
	struct ib_mr *mr;
	u8 *s;
	int i;

	KV_NEED_OP(test, kv_ctx(test)->dev, post_send);
	pd = kv_alloc_pd(test, 0);
	scq = kv_alloc_cq(test, 16);
	rcq = kv_alloc_cq(test, 16);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 4);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, mr);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, kv_mr_release,
							   mr));
	pages = kv_alloc_sg(test, 3);
	KUNIT_ASSERT_EQ(test, ib_map_mr_sg(mr, pages->sgl, 3, NULL, PAGE_SIZE),
			3);
	src = kv_alloc_buf(test, 2 * PAGE_SIZE);
	s = src->cpu;
	for (i = 0; i < src->len; i++)
		s[i] = i * 13 + 1;
	sge.addr = src->dma;
	sge.length = PAGE_SIZE + 200;
	sge.lkey = pd->local_dma_lkey;
	rw.wr.opcode = IB_WR_RDMA_WRITE;
	rw.wr.send_flags = IB_SEND_SIGNALED;
	rw.wr.sg_list = &sge;
	rw.wr.num_sge = 1;
	rw.remote_addr = mr->iova + PAGE_SIZE - 100;

	/* Not registered yet: a remote access error. */
	kv_rc_pair(test, pd, scq, rcq, &qa, &qb);
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	rw.wr.wr_id = 1;
	rw.rkey = mr->rkey;
	kv_send_expect(test, qa, &rw.wr, scq, IB_WC_REM_ACCESS_ERR);
	kv_destroy_qp(test, qa);
	kv_destroy_qp(test, qb);

	kv_rc_pair(test, pd, scq, rcq, &qa, &qb);
	reg.wr.wr_id = 2;
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.mr = mr;
	reg.key = mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		     IB_ACCESS_REMOTE_READ;
	kv_send_and_wait(test, qb, &reg.wr, rcq, IB_WC_REG_MR);

	/* PAGE_SIZE + 200 bytes from 100 bytes before the end of page 0. */
	rw.wr.wr_id = 3;
	kv_send_and_wait(test, qa, &rw.wr, scq, IB_WC_RDMA_WRITE);
	KUNIT_EXPECT_MEMEQ(test, (u8 *)page_address(pages->pages[0]) +
			   PAGE_SIZE - 100, s, 100);
	KUNIT_EXPECT_MEMEQ(test, page_address(pages->pages[1]), s + 100,
			   PAGE_SIZE);
	KUNIT_EXPECT_MEMEQ(test, page_address(pages->pages[2]),
			   s + PAGE_SIZE + 100, 100);

	/* Read back 300 bytes across the boundary of pages 1 and 2. */
	memset(s, 0, src->len);
	sge.length = 300;
	rw.wr.wr_id = 4;
	rw.wr.opcode = IB_WR_RDMA_READ;
	rw.remote_addr = mr->iova + 2 * PAGE_SIZE - 150;
	kv_send_and_wait(test, qa, &rw.wr, scq, IB_WC_RDMA_READ);
	KUNIT_EXPECT_MEMEQ(test, s, (u8 *)page_address(pages->pages[1]) +
			   PAGE_SIZE - 150, 150);
	KUNIT_EXPECT_MEMEQ(test, s + 150, page_address(pages->pages[2]), 150);

	/* Invalidated: its key names nothing again. */
	inv.wr_id = 5;
	inv.opcode = IB_WR_LOCAL_INV;
	inv.send_flags = IB_SEND_SIGNALED;
	inv.ex.invalidate_rkey = mr->rkey;
	kv_send_and_wait(test, qb, &inv, rcq, IB_WC_LOCAL_INV);
	rw.wr.wr_id = 6;
	kv_send_expect(test, qa, &rw.wr, scq, IB_WC_REM_ACCESS_ERR);
	kv_destroy_qp(test, qa);
	kv_destroy_qp(test, qb);
}

/* Whether the netdevice of port 1 filters for the multicast address @mac. */
static bool kv_has_mc(struct ib_device *ibdev, const u8 *mac)
{
	struct net_device *ndev = ib_device_get_netdev(ibdev, KV_PORT);
	struct netdev_hw_addr *ha;
	bool found = false;

	if (!ndev)
		return false;
	netif_addr_lock_bh(ndev);
	netdev_for_each_mc_addr(ha, ndev)
		if (ether_addr_equal(ha->addr, mac))
			found = true;
	netif_addr_unlock_bh(ndev);
	dev_put(ndev);
	return found;
}

/*
 * mcast: a UD QP joins and leaves a group; the group's Ethernet address
 * (33:33 + the GID's last 4 bytes) is filtered while the group exists, and
 * the QP cannot be destroyed while attached.
 */
static void mcast(struct kunit *test)
{
	static const u8 mac[ETH_ALEN] = { 0x33, 0x33, 0x00, 0x00, 0x12, 0x34 };
	struct ib_device *ibdev = kv_ctx(test)->dev;
	union ib_gid mgid = { .raw = { 0xff, 0x0e, [14] = 0x12, [15] = 0x34 } };
	union ib_gid ucast = { .raw = { 0xfe, 0x80, [15] = 1 } };
	struct ib_qp_init_attr init = {};
	struct ib_qp *qp, *qp2, *rc;
	struct ib_pd *pd;
	struct ib_cq *cq;

	KV_NEED_OP(test, ibdev, attach_mcast);
	KV_NEED_OP(test, ibdev, detach_mcast);
	pd = kv_alloc_pd(test, 0);
	cq = kv_alloc_cq(test, 16);
	init.qp_type = IB_QPT_UD;
	init.sq_sig_type = IB_SIGNAL_ALL_WR;
	init.send_cq = cq;
	init.recv_cq = cq;
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = 4;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ib_create_qp(pd, &init);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qp);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_qp_release, qp));
	qp2 = ib_create_qp(pd, &init);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, qp2);
	KUNIT_ASSERT_EQ(test, 0,
			kunit_add_action_or_reset(test, kv_qp_release, qp2));

	KUNIT_EXPECT_FALSE(test, kv_has_mc(ibdev, mac));
	KUNIT_ASSERT_EQ(test, ib_attach_mcast(qp, &mgid, 0), 0);
	KUNIT_EXPECT_TRUE(test, kv_has_mc(ibdev, mac));
	/*
	 * (Attaching a QP twice succeeds in both drivers, but the core counts
	 * each attach in qp->usecnt and the drivers need one detach: the QP
	 * could then never be destroyed. Not exercised.)
	 */
	KUNIT_EXPECT_EQ(test, ib_attach_mcast(qp2, &mgid, 0), 0);
	/* Not multicast: the core refuses it. */
	KUNIT_EXPECT_EQ(test, ib_attach_mcast(qp, &ucast, 0), -EINVAL);

	KUNIT_EXPECT_EQ(test, ib_destroy_qp(qp), -EBUSY);

	KUNIT_EXPECT_EQ(test, ib_detach_mcast(qp, &mgid, 0), 0);
	/* The group stays while qp2 is in it. */
	KUNIT_EXPECT_TRUE(test, kv_has_mc(ibdev, mac));
	KUNIT_EXPECT_EQ(test, ib_detach_mcast(qp, &mgid, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, ib_detach_mcast(qp2, &mgid, 0), 0);
	/*
	 * The last QP takes the group and its address along. The C driver
	 * leaves the address in the netdevice's filter (its __rxe_destroy_mcg
	 * never calls dev_mc_del): checked for the others only.
	 */
	if (strcmp(module_name(ibdev->ops.owner), "rdma_rxe"))
		KUNIT_EXPECT_FALSE(test, kv_has_mc(ibdev, mac));
	KUNIT_EXPECT_EQ(test, ib_detach_mcast(qp2, &mgid, 0), -EINVAL);

	kv_destroy_qp(test, qp);
	kv_destroy_qp(test, qp2);

	/* Only UD QPs join groups (checked by the core). */
	rc = kv_create_rc_qp(test, pd, cq, &init);
	KUNIT_EXPECT_EQ(test, ib_attach_mcast(rc, &mgid, 0), -EINVAL);
}

static struct kunit_case rxe_kverbs_cases[] = {
	KUNIT_CASE(pd_and_dma_mr),
	KUNIT_CASE(cq_create_and_poll_empty),
	KUNIT_CASE(rc_qp_states),
	KUNIT_CASE(recv_flush),
	KUNIT_CASE(comp_handler),
	KUNIT_CASE(post_recv_errors),
	KUNIT_CASE(fast_reg_mr),
	KUNIT_CASE(srq),
	KUNIT_CASE(ah),
	KUNIT_CASE(gsi_qp_exists),
	KUNIT_CASE(modify_port),
	KUNIT_CASE(mcast),
	KUNIT_CASE(cq_overrun),
	KUNIT_CASE(srq_last_wqe),
	KUNIT_CASE(post_send_flush),
	KUNIT_CASE(send_queue_full),
	KUNIT_CASE(drain),
	KUNIT_CASE(rc_kernel_traffic),
	KUNIT_CASE(frmr_kernel_traffic),
	{}
};

static struct kunit_suite rxe_kverbs_suite = {
	.name = "rxe_kverbs",
	.init = kv_init,
	.test_cases = rxe_kverbs_cases,
};

kunit_test_suite(rxe_kverbs_suite);

MODULE_DESCRIPTION("KUnit tests of an rxe RDMA device through kernel verbs");
MODULE_LICENSE("GPL");
