// SPDX-License-Identifier: GPL-2.0

#include <linux/module.h>

__rust_helper bool rust_helper_try_module_get(struct module *module)
{
	return try_module_get(module);
}
