#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Teardown under traffic, TEARDOWN_ROUNDS rounds of each kind, rdma_rxe_rust:
# ib_write_bw runs from B to A over the veth of rxe_rust_veth.sh (whose
# set-up and helpers this sources), and once rxeB has sent TRAFFIC_PKTS
# packets, one of
# - rdma link del rxeB (the port);
# - ip link del vB (the netdevice: vA and both devices go with it);
# - ip netns del of B (vB goes, and vA and both devices with it);
# - rmmod rdma_rxe_rust (the module; the C driver's refuses while the
#   devices are in use, which are then deleted, and it must go).
# This driver's removals do not wait for the programs that use the device
# (the RDMA core disassociates their contexts); the C driver's wait until
# the programs close it. So the programs get REMOVAL_GRACE s, then are
# stopped; the removal must be done
# REMOVAL_TIMEOUT s after that, with what it removes gone, and the next
# round sets up again what it needs and must carry traffic (after the rmmod
# round, that the driver works after an unload; after the last round, a
# check of its own does the same). Nothing may be stuck in
# the kernel and the kernel log must stay clean; kmemleak's scan at the end
# of the selftest run covers leaks.
#
# A round costs 20 to 50 s on the debug kernel under TCG (most of it in
# starting programs and registering devices: `rdma link add` over a veth in
# a namespace takes 4 to 6 s there, for either driver), so make test runs
# one round of each kind, each after the last kind's removal, so the next
# set-up still has to work; make long runs TEARDOWN_ROUNDS=100 (hours). A
# round rebuilds only what the last one removed. (rxe_rust_removal.sh, which
# removed the port, the netdevice and the module under ib_write_bw with a
# fresh set-up each, was folded into this on 2026-12-02: the two ran the same
# removals, and CI's time ran short.)
#
# When the netdevice goes (ip link del), the client's queue pair must fail
# at once, before the programs are stopped, with an error other than its
# retries running out: nothing it sends can arrive, and the C driver fails
# it at its first failed transmit. (ip netns del takes the netdevice only
# once the programs in the namespace, the client among them, are gone.)
#
# TEARDOWN_DRIVER=rdma_rxe runs the same rounds on the C driver, to tell a
# hang of the RDMA core or the network stack from one of this driver.
#
# Usage: [TEARDOWN_ROUNDS=N] [TEARDOWN_KINDS="link netdev netns rmmod"]
#        [TEARDOWN_DRIVER=rdma_rxe] rxe_rust_teardown.sh

RXE_VETH_HELPERS=1 source "$(dirname "$0")/rxe_rust_veth.sh"

TEARDOWN_ROUNDS=${TEARDOWN_ROUNDS:-1}
TRAFFIC_PKTS=1000
TRAFFIC_SECONDS=60
REMOVAL_GRACE=2
REMOVAL_TIMEOUT=60
DRV=${TEARDOWN_DRIVER:-$RXE_RUST}
case $DRV in
rdma_rxe | "$RXE_RUST") ;;
*)
	echo "rxe_rust_teardown: TEARDOWN_DRIVER is rdma_rxe or $RXE_RUST, not $DRV" >&2
	exit 2
	;;
esac
# TEARDOWN_KINDS picks some of the kinds (a full run is split by kind: 100
# rounds of one take under an hour).
read -r -a KINDS <<<"${TEARDOWN_KINDS:-link netdev netns rmmod}"
for kind in "${KINDS[@]}"; do
	case $kind in
	link | netdev | netns | rmmod) ;;
	*)
		echo "rxe_rust_teardown: unknown kind $kind (link, netdev, netns, rmmod)" >&2
		exit 2
		;;
	esac
done
CHECKS=$((${#KINDS[@]} + 3))
TRAFFIC_PIDS=

# Brings back whatever of setup() is missing: the module, the namespaces,
# the veth with its addresses, both devices ACTIVE. Prints where the time
# went. (It runs under bounded, in a subshell: find_gids4 runs after it.)
ensure_setup() {
	local t=$SECONDS times=
	lap() {
		times="$times $1 $((SECONDS - t)) s,"
		t=$SECONDS
	}
	module_loaded $DRV || modprobe $DRV || return 1
	lap module
	if ! ip netns exec $NS_A true 2>/dev/null || ! ip netns exec $NS_B true 2>/dev/null ||
		! ip -n $NS_A link show $VETH_A >/dev/null 2>&1; then
		ip netns del $NS_A 2>/dev/null
		ip netns del $NS_B 2>/dev/null
		WAIT_SECONDS=10 wait_for devices_gone || { echo "devices left from the last round"; return 1; }
		lap "old netns"
		setup_net || return 1
		lap "new netns"
		ip netns exec $NS_B ping -c 1 -W 5 $IP4_A >/dev/null || return 1
		lap ping
	fi
	rdma_dev_exists $DEV_A || ip netns exec $NS_A rdma link add $DEV_A type rxe netdev $VETH_A || return 1
	rdma_dev_exists $DEV_B || ip netns exec $NS_B rdma link add $DEV_B type rxe netdev $VETH_B || return 1
	lap "link add"
	wait_for port_state $DEV_A ACTIVE && wait_for port_state $DEV_B ACTIVE || return 1
	lap active
	echo "set-up:$times"
}

# Sets GA4 and GB4 as find_gids does, waiting for the IPv4 GIDs only (the
# IPv6 ones take longer to appear, and the rounds do not use them).
find_gids4() {
	local tables i
	for i in $(seq 80); do
		tables=$(gid_table $DEV_A; gid_table $DEV_B)
		GA4=$(gid_in "$tables" $DEV_A $GID4_A)
		GB4=$(gid_in "$tables" $DEV_B $GID4_B)
		[ -n "$GA4" ] && [ -n "$GB4" ] && return 0
		nap 0.25
	done
	echo "no RoCE v2 GID of the IPv4 addresses:"
	printf '%s\n' "$tables"
	return 1
}

devices_gone() {
	! rdma_dev_exists $DEV_A && ! rdma_dev_exists $DEV_B
}

# Starts ib_write_bw from B to A, for up to TRAFFIC_SECONDS (pids in
# TRAFFIC_PIDS); succeeds once rxeB has sent TRAFFIC_PKTS packets.
traffic_start() {
	local port=$((PORT += 1))
	traffic_run $TRAFFIC_PKTS $port \
		"ib_write_bw -F -D $TRAFFIC_SECONDS -s 4096 -p $port -d $DEV_A -x $GA4" \
		"ib_write_bw -F -D $TRAFFIC_SECONDS -s 4096 -p $port -d $DEV_B -x $GB4 $IP4_A"
}

# The removal of kind $1, as the checks name it.
removal_name() {
	case $1 in
	link) echo "rdma link del" ;;
	netdev) echo "ip link del" ;;
	netns) echo "ip netns del" ;;
	rmmod) echo "rmmod" ;;
	esac
}

# The removal of kind $1 as a command.
removal_cmd() {
	case $1 in
	link) echo "rdma link del $DEV_B" ;;
	netdev) echo "ip -n $NS_B link del $VETH_B" ;;
	netns) echo "ip netns del $NS_B" ;;
	rmmod) echo "rmmod $DRV || echo 'refused (in use)'" ;;
	esac
}

# What must be gone after a removal of kind $1.
removed() {
	case $1 in
	link) ! rdma_dev_exists $DEV_B ;;
	netdev | netns) devices_gone ;;
	rmmod)
		if module_loaded $DRV; then
			rdma link del $DEV_A 2>/dev/null
			rdma link del $DEV_B 2>/dev/null
			rmmod $DRV || return 1
		fi
		devices_gone
		;;
	esac
}

# Succeeds if the client saw an error completion other than
# IBV_WC_RETRY_EXC_ERR (12) before it was stopped: its netdevice went.
# perftest writes it to stderr, unbuffered, as it polls it; the exit may
# take longer than the grace (closing the device is slow on the debug
# kernel), and a program stopped by the signal writes nothing more.
client_failed() {
	local status
	status=$(sed -n 's/.*Failed status \([0-9]*\):.*/\1/p' "$tmp/client" | head -n 1)
	case $status in
	"")
		echo "the client saw no error completion before it was stopped:"
		tail -n 3 "$tmp/client" | sed 's/^/client| /'
		return 1
		;;
	12)
		echo "the client's queue pair failed only when its retries ran out (status 12)"
		return 1
		;;
	esac
	echo "the client's queue pair failed with its netdevice (status $status)"
}

# One round of kind $1: set-up, traffic, the removal under it, the check.
round() {
	local kind=$1 t0=$SECONDS t1 t2
	bounded 120 ensure_setup || { echo "set-up failed"; return 1; }
	t1=$SECONDS
	find_gids4 || return 1
	echo "GIDs after $((SECONDS - t1)) s"
	t1=$SECONDS
	traffic_start || {
		stop_all $TRAFFIC_PIDS || WEDGED=1
		TRAFFIC_PIDS=
		return 1
	}
	t2=$SECONDS
	remove_under_traffic "$(removal_cmd "$kind")" || return 1
	if [ "$kind" = netdev ]; then
		client_failed || return 1
	fi
	WAIT_SECONDS=30 wait_for removed "$kind" || { echo "not removed"; rdma dev; return 1; }
	echo "set-up $((t1 - t0)) s, traffic start $((t2 - t1)) s, removal $((SECONDS - t2)) s"
}

# TEARDOWN_ROUNDS rounds of kind $1; stops at the first that fails.
rounds() {
	local i start=$SECONDS t slowest=0 took=()
	for ((i = 1; i <= TEARDOWN_ROUNDS; i++)); do
		echo "rxe_rust_teardown: $(removal_name "$1") round $i" >/dev/kmsg
		t=$SECONDS
		round "$1" >"$tmp/round" 2>&1 || {
			echo "round $i of $TEARDOWN_ROUNDS failed:"
			cat "$tmp/round"
			return 1
		}
		[ $((SECONDS - t)) -gt $slowest ] && slowest=$((SECONDS - t))
		took+=($(sed -n 's/^removal done \([0-9.]*\) s after the stop$/\1/p' "$tmp/round"))
	done
	echo "$TEARDOWN_ROUNDS rounds in $((SECONDS - start)) s (the slowest $slowest s); the last:"
	# How long the removal took once the programs were stopped, over the
	# rounds: the core's unregistration of the device waits for them.
	[ ${#took[@]} -gt 0 ] && printf "%s\n" "${took[@]}" | sort -n |
		awk '{ v[NR] = $1 } END { printf "removal done after the stop: median %s s, slowest %s s, %d rounds\n", v[int((NR + 1) / 2)], v[NR], NR }'
	cat "$tmp/round"
}

# After the last round's removal, as a next round would: set up again what it
# removed, and traffic must flow (after rmmod, the module loads and works).
traffic_after() {
	# Programs a failed round left.
	stop_all $TRAFFIC_PIDS || { WEDGED=1; return 1; }
	TRAFFIC_PIDS=
	bounded 120 ensure_setup || { echo "set-up failed"; return 1; }
	find_gids4 || return 1
	traffic_start || {
		stop_all $TRAFFIC_PIDS || WEDGED=1
		TRAFFIC_PIDS=
		return 1
	}
	stop_all $TRAFFIC_PIDS || { WEDGED=1; return 1; }
	TRAFFIC_PIDS=
}

final_teardown() {
	teardown_steps
	! module_loaded $DRV
}

ktap_print_header
ktap_set_plan $CHECKS
MARKER="rxe_rust_teardown: start $$"
echo "$MARKER" >/dev/kmsg
TIMEOUTS=0
NOT_RUN=
teardown
for kind in "${KINDS[@]}"; do
	[ -n "$WEDGED" ] && NOT_RUN="a process is stuck in the kernel"
	run_check "$TEARDOWN_ROUNDS rounds of $(removal_name "$kind") under ib_write_bw" \
		rounds "$kind"
done
[ -n "$WEDGED" ] && NOT_RUN="a process is stuck in the kernel"
run_check "after the last removal ($(removal_name "${KINDS[-1]}")), set up again: ib_write_bw across" \
	traffic_after
NOT_RUN=
[ -n "$WEDGED" ] && NOT_RUN="a process is stuck in the kernel"
run_check "everything removed, $DRV unloaded" bounded 120 final_teardown
kernel_log_clean
ktap_finished
