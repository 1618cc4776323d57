#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Port counters: rdma_rxe_rust names the same counters as the C driver, in
# the same order, and after the same link flaps both show the same values
# (link_downed moves; nothing else does without traffic).

source "$(dirname "$0")/rxe_rust_lib.sh"

tmp=$(mktemp -d)
cleanup() {
	rdma link del rxv 2>/dev/null
	ip link del va 2>/dev/null
	rm -rf "$tmp"
	unload_all
}
trap cleanup EXIT

port_state() {
	rdma link show "$1/1" | grep -q "state $2"
}

# Flaps the link of a device of driver $1 on a veth and prints its counters.
counters_after_flaps() {
	modprobe "$1" &&
		ip link add va type veth peer name vb && ip link set va up && ip link set vb up &&
		rdma link add rxv type rxe netdev va &&
		wait_for port_state rxv ACTIVE &&
		ip link set vb down && wait_for port_state rxv DOWN &&
		ip link set vb up && wait_for port_state rxv ACTIVE &&
		ip link set va down && wait_for port_state rxv DOWN &&
		ip link set va up && wait_for port_state rxv ACTIVE &&
		rdma statistic show link rxv/1 &&
		rdma link del rxv && ip link del va && rmmod "$1"
}

ktap_print_header
ktap_set_plan 5
unload_all

fns="$(declare -f wait_for port_state counters_after_flaps)"
check "counters of rdma_rxe (C) after link flaps" \
	bash -c "$fns; counters_after_flaps $RXE_C >$tmp/c"
check "counters of rdma_rxe_rust after the same flaps" \
	bash -c "$fns; counters_after_flaps $RXE_RUST >$tmp/rust"
check "the C driver's counters include link_downed" grep -q 'link_downed [1-9]' "$tmp/c"
check "rdma_rxe_rust counted the port going down (link_downed > 0)" \
	grep -q 'link_downed [1-9]' "$tmp/rust"
check "same counter names, order and values as the C driver" diff -u "$tmp/c" "$tmp/rust"
ktap_finished
