// SPDX-License-Identifier: GPL-2.0

#include <linux/bottom_half.h>

__rust_helper void rust_helper_local_bh_disable(void)
{
	local_bh_disable();
}

__rust_helper void rust_helper_local_bh_enable(void)
{
	local_bh_enable();
}
