#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The KUnit suites built into rdma_rxe_rust: they run when the module loads.
# Each test case of each suite becomes one KTAP line; a suite that reports
# no case fails.

source "$(dirname "$0")/rxe_rust_lib.sh"

# Prints "suite<TAB>ok|not ok<TAB>case" for each case of the suite in $1.
suite_cases() {
	awk -v s="$(basename "$1")" '
		/^ +(ok|not ok) [0-9]+ / {
			r = ($1 == "ok") ? "ok" : "not ok"
			sub(/^ +(ok|not ok) [0-9]+ /, "")
			print s "\t" r "\t" $0
			n++
		}
		END { if (n == 0) print s "\tnot ok\t(no test case ran)" }' "$1/results"
}

unload_all
modprobe $RXE_RUST
# With the driver's: the built-in suites of the kernel crate's abstractions it
# relies on (they ran at boot). Each must be there: one that is not built
# fails here rather than passing unseen.
BUILTIN_SUITES="rust_kernel_spinlock_irq rust_kernel_rdma_wc_sink
	rust_kernel_rdma_virt_dma rust_kernel_rdma_user_buffer rust_kernel_rcu_xarray
	rust_kernel_append"
suites=$(ls -d /sys/kernel/debug/kunit/rdma_rxe_rust* 2>/dev/null)
missing=""
for b in $BUILTIN_SUITES; do
	if [ -d /sys/kernel/debug/kunit/$b ]; then
		suites="$suites /sys/kernel/debug/kunit/$b"
	else
		missing="$missing $b"
	fi
done
ktap_print_header
if [ -z "$suites" ]; then
	ktap_set_plan 1
	ktap_test_fail "rdma_rxe_rust KUnit suites are present in debugfs"
	ktap_finished
fi

for s in $suites; do
	sed 's/^/# /' "$s/results"
done
cases=$(for s in $suites; do suite_cases "$s"; done
	for b in $missing; do printf '%s\tnot ok\t%s\n' "$b" "(suite not built)"; done)
ktap_set_plan "$(printf '%s\n' "$cases" | grep -c .)"
while IFS=$'\t' read -r suite result case; do
	if [ "$result" = ok ]; then
		ktap_test_pass "KUnit $suite: $case"
	else
		ktap_test_fail "KUnit $suite: $case"
	fi
done <<<"$cases"
rmmod $RXE_RUST
ktap_finished
