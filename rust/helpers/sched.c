// SPDX-License-Identifier: GPL-2.0

#include <linux/sched/stat.h>

/* Not an inline, but its header is not among the bindings' headers. */
__rust_helper bool rust_helper_single_task_running(void)
{
	return single_task_running();
}
