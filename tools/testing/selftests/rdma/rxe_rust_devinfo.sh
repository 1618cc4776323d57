#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust reports the same device as the C driver rdma_rxe: the
# `ibv_devinfo -v` output of both on the same netdevice is equal (node GUID
# aside), so is the sysfs `parent` attribute, and the active MTU follows the
# netdevice MTU. max_qp_rd_atom, 128 for both, is checked on its own: the
# responder keeps that many READ and atomic responses for duplicates.

source "$(dirname "$0")/rxe_rust_lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; ip link set eth0 mtu 1500; unload_all' EXIT

# Output of `ibv_devinfo -v` and the sysfs parent of a device of driver $1
# on eth0.
devinfo_of() {
	modprobe "$1" &&
		rdma link add rxe0 type rxe netdev eth0 &&
		ibv_devinfo -v -d rxe0 | grep -v 'node_guid:' &&
		echo "parent: $(cat /sys/class/infiniband/rxe0/parent)" &&
		rdma link del rxe0 &&
		rmmod "$1"
}

ktap_print_header
ktap_set_plan 12
unload_all

check "ibv_devinfo -v with rdma_rxe (C)" bash -c "$(declare -f devinfo_of); devinfo_of $RXE_C >$tmp/c"
check "ibv_devinfo -v with rdma_rxe_rust" bash -c "$(declare -f devinfo_of); devinfo_of $RXE_RUST >$tmp/rust"
check "the output is not empty" grep -q 'max_qp:' "$tmp/rust"
check "max_qp_rd_atom: 128 with either driver" \
	bash -c "grep -q 'max_qp_rd_atom:[[:space:]]*128\$' $tmp/c &&
		grep -q 'max_qp_rd_atom:[[:space:]]*128\$' $tmp/rust"
check "ibv_devinfo -v is equal (node_guid aside)" diff -u "$tmp/c" "$tmp/rust"
check "sysfs parent is the netdevice, eth0" grep -qx 'parent: eth0' "$tmp/rust"

modprobe $RXE_RUST
rdma link add rxe0 type rxe netdev eth0
mtu_is() {
	ip link set eth0 mtu "$1" && [ "$(devinfo_field rxe0 active_mtu)" = "$2" ]
}
check "netdev MTU 1500 -> active_mtu 1024" mtu_is 1500 1024
check "netdev MTU 9000 -> active_mtu 4096" mtu_is 9000 4096
check "netdev MTU 4175 -> active_mtu 2048 (4096 + 80 > 4175)" mtu_is 4175 2048
check "netdev MTU 4176 -> active_mtu 4096" mtu_is 4176 4096
check "netdev MTU 600 -> active_mtu 512" mtu_is 600 512
check "netdev MTU 1280 -> active_mtu 1024" mtu_is 1280 1024
ktap_finished
