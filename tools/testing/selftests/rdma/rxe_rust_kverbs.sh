#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel-verbs KUnit suite rxe_kverbs (module rxe_kverbs_test, built
# out of tree by scripts/build-test-modules from kverbs/) against each
# driver in turn: load it, add rxe0 on a new veth, load the test module (the
# suite runs at load time), report each case of the suite as one KTAP line
# named after the driver, then tear everything down. A suite that runs no
# case fails, and so does a kernel warning logged during a driver's run.
# The plan comes last: the number of cases is known only once they ran.

source "$(dirname "$0")/rxe_rust_lib.sh"

SUITE=rxe_kverbs
TESTMOD=rxe_kverbs_test
DEV=rxe0
# A fresh veth per driver: the C driver leaves multicast addresses behind.
NETDEV=kv0
RESULTS=/sys/kernel/debug/kunit/$SUITE/results
BAD_LOG='WARNING:|BUG:|Oops|general protection|refcount_t:|list_(add|del) corruption|UBSAN|KASAN|INFO: task .* blocked'

# Prints "ok|not ok|skip<TAB>case" for each case of the results in $1.
suite_cases() {
	awk '
		/^ +(ok|not ok) [0-9]+ / {
			r = ($1 == "ok") ? "ok" : "not ok"
			sub(/^ +(ok|not ok) [0-9]+ /, "")
			if ($0 ~ /# SKIP/) {
				r = "skip"
				sub(/ *# SKIP.*/, "")
			}
			print r "\t" $0
			n++
		}
		END { if (n == 0) print "not ok\t(no test case ran)" }' "$1"
}

# Runs the suite against driver $1; prints its KTAP lines.
run_driver() {
	local drv=$1 out marker cases
	marker="rxe_rust_kverbs: start $drv $$"
	echo "$marker" >/dev/kmsg

	# A test module left loaded would not run the suite again.
	module_loaded $TESTMOD && rmmod $TESTMOD
	unload_all
	if ! out=$(modprobe "$drv" 2>&1 &&
		ip link add "$NETDEV" type veth peer name kv1 2>&1 &&
		ip link set "$NETDEV" up && ip link set kv1 up &&
		rdma link add "$DEV" type rxe netdev "$NETDEV" 2>&1 &&
		wait_for rdma_dev_exists "$DEV" 2>&1 &&
		wait_for bash -c "rdma link show $DEV/1 | grep -q 'state ACTIVE'" 2>&1); then
		printf '%s\n' "$out" | sed 's/^/# /'
		ktap_test_fail "$drv: set up $DEV on $NETDEV"
		unload_all
		ip link del "$NETDEV" 2>/dev/null
		return
	fi
	if ! out=$(modprobe "$TESTMOD" dev="$DEV" 2>&1); then
		printf '%s\n' "$out" | sed 's/^/# /'
		ktap_test_fail "$drv: modprobe $TESTMOD (built by scripts/build-test-modules?)"
	elif [ ! -r "$RESULTS" ]; then
		ktap_test_fail "$drv: KUnit $SUITE: results in debugfs"
	else
		sed 's/^/# /' "$RESULTS"
		cases=$(suite_cases "$RESULTS")
		while IFS=$'\t' read -r result case; do
			case $result in
			ok) ktap_test_pass "$drv: KUnit $SUITE: $case" ;;
			skip) ktap_test_skip "$drv: KUnit $SUITE: $case" ;;
			*) ktap_test_fail "$drv: KUnit $SUITE: $case" ;;
			esac
		done <<<"$cases"
	fi

	# The module holds no device reference once loaded: these must not hang.
	check "$drv: rmmod $TESTMOD, rdma link del $DEV, rmmod $drv" \
		bash -c "! grep -q '^$TESTMOD ' /proc/modules || rmmod $TESTMOD
			rdma link del $DEV && rmmod $drv && ip link del $NETDEV"
	unload_all
	ip link del "$NETDEV" 2>/dev/null

	out=$(log_since "$marker" | grep -E "$BAD_LOG")
	if [ -n "$out" ]; then
		printf '%s\n' "$out" | sed 's/^/# /'
		ktap_test_fail "$drv: no kernel warning"
	else
		ktap_test_pass "$drv: no kernel warning"
	fi
}

ktap_print_header
for drv in $RXE_C $RXE_RUST; do
	run_driver "$drv"
done
ktap_set_plan $((KTAP_TESTNO - 1))
ktap_finished
