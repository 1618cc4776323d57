// SPDX-License-Identifier: GPL-2.0

#include <linux/skbuff.h>

__rust_helper unsigned int rust_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

__rust_helper void rust_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}
