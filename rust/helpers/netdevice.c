// SPDX-License-Identifier: GPL-2.0

#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <net/net_namespace.h>

__rust_helper void rust_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

/*
 * A reference on the namespace dev is in now, or NULL if that namespace is
 * being dismantled. The namespace's memory outlives the RCU read section
 * (cleanup_net waits for a grace period before freeing it).
 */
__rust_helper struct net *rust_helper_dev_net_get(const struct net_device *dev)
{
	struct net *net;

	rcu_read_lock();
	net = maybe_get_net(dev_net_rcu(dev));
	rcu_read_unlock();
	return net;
}

__rust_helper struct net *rust_helper_get_net(struct net *net)
{
	return get_net(net);
}

__rust_helper void rust_helper_put_net(struct net *net)
{
	put_net(net);
}

__rust_helper bool rust_helper_is_vlan_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev);
}

__rust_helper bool rust_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

__rust_helper bool rust_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

__rust_helper struct net_device *
rust_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

__rust_helper unsigned int rust_helper_ll_reserved_space(const struct net_device *dev)
{
	return LL_RESERVED_SPACE(dev);
}
