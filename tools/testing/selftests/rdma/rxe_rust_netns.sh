#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust opens UDP port 4791 in a network namespace while a link
# there exists, and closes it after the last link of that namespace goes.
# Also: a namespace with IPv6 addresses only.

source "$(dirname "$0")/rxe_rust_lib.sh"

cleanup() {
	rdma link del rxa1 2>/dev/null
	rdma link del rxa2 2>/dev/null
	rdma link del rxb1 2>/dev/null
	rdma link del rx6 2>/dev/null
	ip netns del rxe_a 2>/dev/null
	ip netns del rxe_b 2>/dev/null
	ip netns del rxe_6 2>/dev/null
	unload_all
}
trap cleanup EXIT

# A namespace $1 with veth $2 (inside) paired to $3 (outside), both up.
make_ns() {
	ip netns add "$1" &&
		ip link add "$2" type veth peer name "$3" &&
		ip link set "$2" netns "$1" &&
		ip link set "$3" up &&
		ip -n "$1" link set lo up &&
		ip -n "$1" link set "$2" up
}

in_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

ktap_print_header
ktap_set_plan 17
unload_all
modprobe $RXE_RUST

check "set up namespaces rxe_a (two veths) and rxe_b" bash -c "
	$(declare -f make_ns)
	make_ns rxe_a va1 pa1 && make_ns rxe_b vb1 pb1 &&
	ip link add va2 type veth peer name pa2 && ip link set va2 netns rxe_a &&
	ip -n rxe_a link set va2 up && ip link set pa2 up &&
	ip -n rxe_a addr add 198.18.1.1/24 dev va1 &&
	ip -n rxe_a addr add 198.18.2.1/24 dev va2 &&
	ip -n rxe_b addr add 198.18.3.1/24 dev vb1"
check "no port 4791 anywhere before any link" \
	bash -c "$(declare -f udp_port_open udp_port_closed); RXE_PORT=$RXE_PORT; udp_port_closed && udp_port_closed rxe_a && udp_port_closed rxe_b"
check "link rxa1 on va1 (in rxe_a)" in_ns rxe_a rdma link add rxa1 type rxe netdev va1
check "port 4791 open in rxe_a (IPv4)" udp_port_open rxe_a 4
check "port 4791 open in rxe_a (IPv6)" udp_port_open rxe_a 6
check "port 4791 still closed in the initial namespace" udp_port_closed
check "port 4791 still closed in rxe_b" udp_port_closed rxe_b
check "second link rxa2 on va2 (same namespace)" in_ns rxe_a rdma link add rxa2 type rxe netdev va2
check "link rxb1 on vb1 (in rxe_b)" in_ns rxe_b rdma link add rxb1 type rxe netdev vb1
check "port 4791 open in rxe_b" udp_port_open rxe_b
check "delete rxa1: rxe_a keeps its port (rxa2 uses it)" \
	bash -c "rdma link del rxa1 && ip netns exec rxe_a ss -Huln 'sport = :$RXE_PORT' | grep -q :$RXE_PORT"
check "delete rxa2: rxe_a's port closes" \
	bash -c "rdma link del rxa2 && ! ip netns exec rxe_a ss -Huln 'sport = :$RXE_PORT' | grep -q :$RXE_PORT"
check "rxe_b's port is unaffected" udp_port_open rxe_b
check "delete rxb1: rxe_b's port closes" \
	bash -c "rdma link del rxb1 && ! ip netns exec rxe_b ss -Huln 'sport = :$RXE_PORT' | grep -q :$RXE_PORT"

# IPv6 only: the veth has only IPv6 addresses (IPv4 off on it).
check "IPv6-only namespace: link on a veth with only IPv6 addresses" bash -c "
	$(declare -f make_ns)
	make_ns rxe_6 v6a p6a &&
	ip -n rxe_6 -6 addr add 2001:db8::1/64 dev v6a nodad &&
	ip netns exec rxe_6 rdma link add rx6 type rxe netdev v6a"
check "IPv6-only namespace: the GID table has the IPv6 address and no IPv4 one" bash -c "
	g=\$(cat /sys/class/infiniband/rx6/ports/1/gids/* 2>/dev/null | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$');
	echo \"\$g\"; echo \"\$g\" | grep -q '^2001:0db8:0000:0000' && ! echo \"\$g\" | grep -q '^0000:0000:0000:0000:0000:ffff:'"
check "IPv6-only namespace: port 4791 open for IPv6" udp_port_open rxe_6 6
ktap_finished
