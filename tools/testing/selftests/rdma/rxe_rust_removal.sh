#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Removal while traffic runs across the veth of rxe_rust_veth.sh (whose
# set-up and helpers this sources), for each driver given (the C driver
# rdma_rxe first proves the test). Three removals, each in a fresh set-up while
# ib_write_bw runs from B to A, once packets flow:
# - the module: rmmod, which must either refuse at once because the
#   devices are in use, or go through;
# - the port: rdma link del rxeB;
# - the netdevice: ip link del vB (which takes vA, and both devices, along).
# A removal may wait for the programs that use the device (the RDMA core
# waits for user contexts of a driver that cannot disassociate them), so the
# programs get REMOVAL_GRACE s to notice, then are killed; then the removal
# must complete within REMOVAL_TIMEOUT s, the devices must be gone, the
# module must unload, and the next round's set-up must carry traffic again
# (the module is reloaded for each round, so each set-up after the first
# also shows that the driver works after an unload). Nothing
# may be stuck in the kernel and the kernel log must stay clean; kmemleak's
# scan at the end of the selftest run covers leaks.
#
# Usage: rxe_rust_removal.sh [DRIVER...]  (default: rdma_rxe_rust)
# The C driver passed every run of this test in CI from 2026-11-22 to
# 2026-11-27; it left the default list when CI's time ran short (it took
# about 330 s of it): rxe_rust_removal.sh rdma_rxe rdma_rxe_rust runs both.

RXE_VETH_HELPERS=1 source "$(dirname "$0")/rxe_rust_veth.sh"
[ $# -eq 0 ] && DRIVERS=($RXE_RUST)

REMOVAL_GRACE=4
REMOVAL_TIMEOUT=60
# ib_write_bw runs for this long unless it is stopped.
TRAFFIC_SECONDS=60
# Checks per driver.
REMOVAL_CHECKS=10

TRAFFIC_PIDS=

# Starts ib_write_bw -D TRAFFIC_SECONDS from B to A over the IPv4 GIDs in the
# background (pids in TRAFFIC_PIDS); succeeds once rxeB has sent 1000
# packets.
traffic_start() {
	local port=$((PORT += 1))
	traffic_run 1000 $port \
		"ib_write_bw -F -D $TRAFFIC_SECONDS -s 4096 -p $port -d $DEV_A -x $GA4" \
		"ib_write_bw -F -D $TRAFFIC_SECONDS -s 4096 -p $port -d $DEV_B -x $GB4 $IP4_A"
}

# The rmmod of driver $1 under traffic: it may refuse (the module is in
# use) but must not hang; once the programs are stopped it must go.
rmmod_under_traffic() {
	remove_under_traffic "rmmod $1 || { echo 'refused (fine while in use)'; exit 0; }" || return 1
	module_loaded $1 || return 0
	rdma link del $DEV_A && rdma link del $DEV_B && rmmod $1
}

# Succeeds once neither device exists.
devices_gone() {
	! rdma_dev_exists $DEV_A && ! rdma_dev_exists $DEV_B
}

# After a removal: both devices gone (deleting what is left), the
# namespaces deleted, the module unloaded, all within 120 s.
cleaned_up() {
	rdma link del $DEV_A 2>/dev/null
	rdma link del $DEV_B 2>/dev/null
	ip netns del $NS_A 2>/dev/null
	ip netns del $NS_B 2>/dev/null
	WAIT_SECONDS=30 wait_for devices_gone || { echo "devices still there"; return 1; }
	! module_loaded $1 || rmmod $1
}

# Sets up driver $1 and starts the traffic.
setup_with_traffic() {
	bounded 120 setup "$1" && find_gids && traffic_start
}

# One removal for driver $DRV: $1 names it, the rest is the command.
removal_round() {
	local what=$1 fails
	shift
	echo "rxe_rust_removal: $DRV: $what" >/dev/kmsg
	NOT_RUN=
	[ -n "$WEDGED" ] && NOT_RUN="a process is stuck in the kernel"
	fails=$KTAP_CNT_FAIL
	run_check "set up, ib_write_bw from $NS_B to $NS_A (for $what)" setup_with_traffic $DRV
	[ -z "$NOT_RUN" ] && [ "$KTAP_CNT_FAIL" != "$fails" ] && NOT_RUN="no traffic to remove under"
	run_check "$what while ib_write_bw runs" "$@"
	stop_all $TRAFFIC_PIDS >/dev/null || WEDGED=1
	TRAFFIC_PIDS=
	NOT_RUN=
	[ -n "$WEDGED" ] && NOT_RUN="a process is stuck in the kernel"
	run_check "after $what: devices gone, namespaces deleted, $DRV unloaded" bounded 120 cleaned_up $DRV
}

removal_driver() {
	DRV=$1
	TIMEOUTS=0
	MARKER="rxe_rust_removal: start $DRV $$"
	echo "$MARKER" >/dev/kmsg
	[ -z "$WEDGED" ] && teardown
	# rmmod first: the set-ups after it show the driver works again.
	removal_round "rmmod $DRV" rmmod_under_traffic $DRV
	removal_round "rdma link del $DEV_B" remove_under_traffic rdma link del $DEV_B
	removal_round "ip link del $VETH_B" remove_under_traffic ip -n $NS_B link del $VETH_B
	teardown

	kernel_log_clean
}

ktap_print_header
ktap_set_plan $((REMOVAL_CHECKS * ${#DRIVERS[@]}))
for drv in "${DRIVERS[@]}"; do
	removal_driver "$drv"
done
ktap_finished
