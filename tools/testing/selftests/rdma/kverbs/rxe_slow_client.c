// SPDX-License-Identifier: GPL-2.0
/*
 * rxe_slow_client: an RDMA client whose remove() takes remove_ms
 * milliseconds, for every device of driver id RDMA_DRIVER_RXE. It makes a
 * device's unregistration slow on purpose, as a kernel ULP tearing down
 * its queues does: rxe_rust_netdev.sh checks that a netdevice's deletion
 * does not wait for the unregistration of the RDMA device on it.
 */

#include <linux/delay.h>
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static unsigned int remove_ms = 15000;
module_param(remove_ms, uint, 0644);
MODULE_PARM_DESC(remove_ms, "how long remove() sleeps, in milliseconds");

static int slow_add(struct ib_device *ibdev)
{
	/* An error means no remove() call for that device. */
	return ibdev->ops.driver_id == RDMA_DRIVER_RXE ? 0 : -EOPNOTSUPP;
}

static void slow_remove(struct ib_device *ibdev, void *client_data)
{
	unsigned int ms = READ_ONCE(remove_ms);

	dev_info(&ibdev->dev, "rxe_slow_client: removing in %u ms\n", ms);
	msleep(ms);
	dev_info(&ibdev->dev, "rxe_slow_client: removed\n");
}

static struct ib_client slow_client = {
	.name = "rxe_slow_client",
	.add = slow_add,
	.remove = slow_remove,
	/* See the device even if it lacks mandatory kverbs. */
	.no_kverbs_req = true,
};

static int __init slow_init(void)
{
	return ib_register_client(&slow_client);
}

static void __exit slow_exit(void)
{
	ib_unregister_client(&slow_client);
}

module_init(slow_init);
module_exit(slow_exit);
MODULE_DESCRIPTION("An RDMA client that is slow to remove a device, for tests");
MODULE_LICENSE("GPL");
