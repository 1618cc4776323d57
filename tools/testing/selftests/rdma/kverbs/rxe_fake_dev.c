// SPDX-License-Identifier: GPL-2.0
/*
 * rxe_fake_dev: registers one RDMA device, "fake_rxe%d", with driver id
 * RDMA_DRIVER_RXE but ops of its own, standing for a device of another
 * driver of the same id (the C driver rdma_rxe). rxe_rust_unload.sh loads
 * it next to rdma_rxe_rust and checks that unloading the Rust driver
 * leaves this device registered: the Rust driver must unregister its own
 * devices only, not every device of its driver id (ib_unregister_driver).
 *
 * The device serves no verbs (it lacks the mandatory kernel verbs, so the
 * core shows it only to clients that ask for every device, and it has no
 * user context, so uverbs skips it); "rdma dev" lists it and sysfs
 * describes its one port.
 *
 * It uses the core's dealloc_driver flow, so that an unregistration by
 * someone else (ib_unregister_driver(RDMA_DRIVER_RXE)) is legitimate. The
 * module holds a reference on the struct device from before registration
 * until its exit: the memory stays valid even if someone else unregistered
 * the device, and ib_unregister_device() at exit is then a no-op (the core
 * fences unregistrations and skips a device already unregistered).
 */

#include <linux/module.h>
#include <rdma/ib_verbs.h>

#define FAKE_NAME	"fake_rxe%d"

struct fake_dev {
	struct ib_device ibdev;
};

static struct fake_dev *fake_dev;

static int fake_query_device(struct ib_device *ibdev,
			     struct ib_device_attr *attr,
			     struct ib_udata *udata)
{
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->vendor_id = 0xffffff;
	attr->sys_image_guid = ibdev->node_guid;
	return 0;
}

static int fake_query_port(struct ib_device *ibdev, u32 port_num,
			   struct ib_port_attr *attr)
{
	/* The core zeroed *attr (__ib_query_port). */
	attr->state = IB_PORT_DOWN;
	attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_1024;
	attr->active_mtu = IB_MTU_256;
	attr->active_width = IB_WIDTH_1X;
	attr->active_speed = IB_SPEED_SDR;
	/* Non-zero: the core need not read its cache for the prefix. */
	attr->subnet_prefix = 0xfe80000000000000ULL;
	return 0;
}

static int fake_get_port_immutable(struct ib_device *ibdev, u32 port_num,
				   struct ib_port_immutable *immutable)
{
	/* No protocol, no GID or P_Key table, no MAD: nothing to set up. */
	immutable->core_cap_flags = 0;
	immutable->gid_tbl_len = 0;
	immutable->pkey_tbl_len = 0;
	immutable->max_mad_size = 0;
	return 0;
}

static enum rdma_link_layer fake_get_link_layer(struct ib_device *ibdev,
						u32 port_num)
{
	return IB_LINK_LAYER_ETHERNET;
}

/* Called by the core once the device is unregistered (by anyone). */
static void fake_dealloc_driver(struct ib_device *ibdev)
{
	dev_info(&ibdev->dev, "rxe_fake_dev: device released by the core\n");
}

static const struct ib_device_ops fake_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_RXE,

	.dealloc_driver = fake_dealloc_driver,
	.get_link_layer = fake_get_link_layer,
	.get_port_immutable = fake_get_port_immutable,
	.query_device = fake_query_device,
	.query_port = fake_query_port,
};

static int __init fake_dev_init(void)
{
	struct fake_dev *dev;
	int ret;

	dev = ib_alloc_device(fake_dev, ibdev);
	if (!dev)
		return -ENOMEM;

	ib_set_device_ops(&dev->ibdev, &fake_dev_ops);
	dev->ibdev.node_type = RDMA_NODE_IB_CA;
	dev->ibdev.phys_port_cnt = 1;
	dev->ibdev.num_comp_vectors = 1;
	dev->ibdev.node_guid = cpu_to_be64(0x0200000000fa4e01ULL);
	strscpy(dev->ibdev.node_desc, "rxe_fake_dev",
		sizeof(dev->ibdev.node_desc));

	/* Ours until fake_dev_exit(), whoever unregisters the device. */
	get_device(&dev->ibdev.dev);
	ret = ib_register_device(&dev->ibdev, FAKE_NAME, NULL);
	if (ret) {
		pr_err("rxe_fake_dev: ib_register_device failed: %d\n", ret);
		ib_dealloc_device(&dev->ibdev);
		put_device(&dev->ibdev.dev);
		return ret;
	}
	fake_dev = dev;
	dev_info(&dev->ibdev.dev, "rxe_fake_dev: registered (driver id rxe)\n");
	return 0;
}

static void __exit fake_dev_exit(void)
{
	struct ib_device *ibdev = &fake_dev->ibdev;

	/*
	 * A no-op if the device was unregistered already; otherwise the core
	 * unregisters it and, through dealloc_driver, deallocates it.
	 */
	ib_unregister_device(ibdev);
	put_device(&ibdev->dev);
	fake_dev = NULL;
}

module_init(fake_dev_init);
module_exit(fake_dev_exit);

MODULE_DESCRIPTION("Test device with driver id RDMA_DRIVER_RXE and ops of its own");
MODULE_LICENSE("GPL");
