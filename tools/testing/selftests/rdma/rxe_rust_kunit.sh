#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The KUnit suites built into rdma_rxe_rust: they run when the module loads;
# report each suite's result from debugfs.

source "$(dirname "$0")/rxe_rust_lib.sh"

unload_all
modprobe $RXE_RUST
suites=$(ls -d /sys/kernel/debug/kunit/rdma_rxe_rust* 2>/dev/null)
ktap_print_header
if [ -z "$suites" ]; then
	ktap_set_plan 1
	ktap_test_fail "rdma_rxe_rust KUnit suites are present in debugfs"
	ktap_finished
fi
ktap_set_plan "$(echo "$suites" | wc -l)"
for s in $suites; do
	name=$(basename "$s")
	sed 's/^/# /' "$s/results"
	if grep -q "^ok [0-9]* $name" "$s/results"; then
		ktap_test_pass "KUnit suite $name"
	else
		ktap_test_fail "KUnit suite $name"
	fi
done
rmmod $RXE_RUST
ktap_finished
