#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unloading rdma_rxe_rust unregisters its own devices only. Another driver
# with the same driver id (RDMA_DRIVER_RXE: the C driver rdma_rxe) may have
# devices registered at the same time; ib_unregister_driver(RDMA_DRIVER_RXE)
# would take them too. The test module rxe_fake_dev (built out of tree by
# scripts/build-test-modules from kverbs/) registers fake_rxe0, a device of
# that id with ops of its own; it must survive the Rust driver's unload.

source "$(dirname "$0")/rxe_rust_lib.sh"

FAKEMOD=rxe_fake_dev
FAKE=fake_rxe0
DEV=rxe0
BAD_LOG='WARNING:|BUG:|Oops|general protection|refcount_t:|list_(add|del) corruption|UBSAN|KASAN|INFO: task .* blocked'

# Whatever a failed step left behind: later tests start from nothing.
cleanup() {
	rdma link del $DEV 2>/dev/null
	module_loaded $RXE_RUST && rmmod $RXE_RUST
	module_loaded $FAKEMOD && rmmod $FAKEMOD
	unload_all
}
trap cleanup EXIT

# Succeeds if "rdma dev" lists device $1; prints the list otherwise.
rdma_dev_listed() {
	local list
	list=$(rdma dev 2>&1)
	printf '%s\n' "$list" | grep -q "^[0-9]*: $1:" && return 0
	printf 'rdma dev:\n%s\n' "$list"
	return 1
}

marker="rxe_rust_unload: start $$"
echo "$marker" >/dev/kmsg

ktap_print_header
ktap_set_plan 14
module_loaded $FAKEMOD && rmmod $FAKEMOD
unload_all

check "modprobe $FAKEMOD (built by scripts/build-test-modules)" modprobe $FAKEMOD
check "rdma dev lists $FAKE" \
	bash -c "$(declare -f wait_for rdma_dev_listed)
		wait_for rdma_dev_listed $FAKE >/dev/null || rdma_dev_listed $FAKE"
check "modprobe $RXE_RUST next to $FAKE" modprobe $RXE_RUST
check "link add $DEV on eth0" rdma link add $DEV type rxe netdev eth0
check "rdma dev lists $DEV and $FAKE" \
	bash -c "$(declare -f rdma_dev_listed); rdma_dev_listed $DEV && rdma_dev_listed $FAKE"
check "modprobe -r $RXE_RUST with $DEV present" modprobe -r $RXE_RUST
check "$DEV is gone" bash -c "! rdma dev show $DEV 2>/dev/null && ! rdma dev | grep -q ': $DEV:'"
check "$FAKE is still listed by rdma dev" rdma_dev_listed $FAKE
check "rdma dev show $FAKE answers" \
	bash -c "rdma dev show $FAKE | grep -q '^[0-9]*: $FAKE:'"
check "$FAKE's port still answers (sysfs, query_port)" \
	bash -c "grep -q DOWN /sys/class/infiniband/$FAKE/ports/1/state"
check "$DEV can be added again after reloading $RXE_RUST" \
	bash -c "modprobe $RXE_RUST && rdma link add $DEV type rxe netdev eth0 &&
		rdma link del $DEV && rmmod $RXE_RUST"
check "modprobe -r $FAKEMOD" modprobe -r $FAKEMOD
check "$FAKE is gone" bash -c "! rdma dev show $FAKE 2>/dev/null && ! rdma dev | grep -q ': $FAKE:'"

out=$(log_since "$marker" | grep -E "$BAD_LOG")
if [ -n "$out" ]; then
	printf '%s\n' "$out" | sed 's/^/# /'
	ktap_test_fail "no kernel warning"
else
	ktap_test_pass "no kernel warning"
fi
ktap_finished
