#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust follows its netdevice: the port state follows up/down (and
# user space gets the port events), and deleting the netdevice (or its
# namespace) removes the RDMA device and closes the UDP port.

source "$(dirname "$0")/rxe_rust_lib.sh"

events=$(mktemp)
cleanup() {
	[ -n "${watch_pid:-}" ] && kill "$watch_pid" 2>/dev/null
	rm -f "$events"
	rdma link del rxn0 2>/dev/null
	ip link del pn0 2>/dev/null
	ip netns del rxe_n 2>/dev/null
	unload_all
}
trap cleanup EXIT

port_state() {
	rdma link show "$1/1" | grep -q "state $2"
}

ktap_print_header
ktap_set_plan 13
unload_all
modprobe $RXE_RUST

check "set up namespace rxe_n with veth vn0/pn0" bash -c "
	ip netns add rxe_n && ip link add vn0 type veth peer name pn0 &&
	ip link set vn0 netns rxe_n && ip -n rxe_n link set vn0 up && ip link set pn0 up &&
	ip -n rxe_n addr add 198.18.4.1/24 dev vn0"
check "link rxn0 on vn0" ip netns exec rxe_n rdma link add rxn0 type rxe netdev vn0
check "port is ACTIVE while the veth has carrier" wait_for port_state rxn0 ACTIVE
# Line-buffered: the events must reach the file before the watcher is killed.
ip netns exec rxe_n stdbuf -oL ibv_asyncwatch -d rxn0 >"$events" 2>&1 &
watch_pid=$!
wait_for grep -q 'async event FD' "$events"
check "peer down (no carrier): port goes DOWN" \
	bash -c "ip link set pn0 down && $(declare -f wait_for port_state); wait_for port_state rxn0 DOWN"
check "ibv_devinfo reports PORT_DOWN" bash -c "ibv_devinfo -d rxn0 | grep -q 'PORT_DOWN'"
check "peer up again: port ACTIVE" \
	bash -c "ip link set pn0 up && $(declare -f wait_for port_state); wait_for port_state rxn0 ACTIVE"
check "user space got IBV_EVENT_PORT_ERR, then IBV_EVENT_PORT_ACTIVE, for port 1" \
	bash -c "$(declare -f wait_for); wait_for grep -q 'PORT_ACTIVE (9), port 1' '$events' &&
		grep -o 'IBV_EVENT_PORT_[A-Z]* ([0-9]*), port 1' '$events' | tr '\n' ' ' |
		grep -qx 'IBV_EVENT_PORT_ERR (10), port 1 IBV_EVENT_PORT_ACTIVE (9), port 1 '"
kill "$watch_pid"
wait "$watch_pid" 2>/dev/null
watch_pid=
check "no other async event reached user space" \
	bash -c "! grep 'event_type' '$events' | grep -v 'IBV_EVENT_PORT_\(ERR\|ACTIVE\)'"
check "delete the netdevice: the RDMA device goes" \
	bash -c "ip -n rxe_n link del vn0 && $(declare -f wait_for rdma_dev_exists); wait_for bash -c '! rdma dev show rxn0 2>/dev/null'"
check "the namespace's UDP port 4791 is closed" udp_port_closed rxe_n
check "a link in a namespace that is then deleted goes with it" bash -c "
	ip link add vn1 type veth peer name pn1 && ip link set vn1 netns rxe_n &&
	ip -n rxe_n link set vn1 up && ip link set pn1 up &&
	ip netns exec rxe_n rdma link add rxn1 type rxe netdev vn1 &&
	ip netns del rxe_n && $(declare -f wait_for); wait_for bash -c '! rdma dev show rxn1 2>/dev/null'"
check "the driver still works afterwards (add/del on eth0)" \
	bash -c "rdma link add rxe0 type rxe netdev eth0 && ibv_devinfo -d rxe0 >/dev/null && rdma link del rxe0"
check "rmmod succeeds" rmmod $RXE_RUST
ktap_finished
