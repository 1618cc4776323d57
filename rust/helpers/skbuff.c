// SPDX-License-Identifier: GPL-2.0

#include <linux/skbuff.h>
#include <net/dst.h>
#include <net/ip6_fib.h>

__rust_helper void rust_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

__rust_helper struct sk_buff *rust_helper_alloc_skb(unsigned int size, gfp_t priority)
{
	return alloc_skb(size, priority);
}

__rust_helper void rust_helper_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

__rust_helper unsigned int rust_helper_skb_headroom(const struct sk_buff *skb)
{
	return skb_headroom(skb);
}

__rust_helper int rust_helper_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

__rust_helper void rust_helper_skb_reset_network_header(struct sk_buff *skb)
{
	skb_reset_network_header(skb);
}

__rust_helper void rust_helper_skb_reset_transport_header(struct sk_buff *skb)
{
	skb_reset_transport_header(skb);
}

__rust_helper int rust_helper_skb_network_offset(const struct sk_buff *skb)
{
	return skb_network_offset(skb);
}

__rust_helper bool rust_helper_pskb_may_pull(struct sk_buff *skb, unsigned int len)
{
	return pskb_may_pull(skb, len);
}

__rust_helper bool rust_helper_skb_has_shared_frag(const struct sk_buff *skb)
{
	return skb_has_shared_frag(skb);
}

__rust_helper int rust_helper_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

__rust_helper bool rust_helper_skb_cloned(const struct sk_buff *skb)
{
	return skb_cloned(skb);
}

__rust_helper bool rust_helper_skb_is_nonlinear(const struct sk_buff *skb)
{
	return skb_is_nonlinear(skb);
}

__rust_helper void rust_helper_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst)
{
	skb_dst_set(skb, dst);
}

__rust_helper struct dst_entry *rust_helper_dst_clone(struct dst_entry *dst)
{
	return dst_clone(dst);
}

__rust_helper u32 rust_helper_dst_mtu(const struct dst_entry *dst)
{
	return dst_mtu(dst);
}

__rust_helper void *rust_helper_skb_put_data(struct sk_buff *skb, const void *data,
					     unsigned int len)
{
	return skb_put_data(skb, data, len);
}

/* consume_skb() is a function or an inline, depending on CONFIG_TRACEPOINTS. */
__rust_helper void rust_helper_skb_consume(struct sk_buff *skb)
{
	consume_skb(skb);
}

__rust_helper struct dst_entry *rust_helper_dst_check(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie);
}

__rust_helper struct net *rust_helper_dst_dev_net_rcu(const struct dst_entry *dst)
{
	return dst_dev_net_rcu(dst);
}

__rust_helper u32 rust_helper_dst_rt6_cookie(const struct dst_entry *dst)
{
	return rt6_get_cookie(dst_rt6_info(dst));
}

__rust_helper bool rust_helper_skb_has_destructor(const struct sk_buff *skb)
{
	return skb->destructor;
}

__rust_helper void rust_helper_skb_set_destructor(struct sk_buff *skb,
						   void (*destructor)(struct sk_buff *),
						   void *arg)
{
	skb_shinfo(skb)->destructor_arg = arg;
	skb->destructor = destructor;
}

__rust_helper void *rust_helper_skb_destructor_arg(const struct sk_buff *skb)
{
	return skb_shinfo(skb)->destructor_arg;
}
