#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One end of NVMe over RDMA between two hosts: scripts/interop runs the
# target on one VM and the host on the other, through rxe_rust_interop.py,
# with each driver at each end. Not a suite of its own (not executable):
# run it with bash, from the overlay (it sources the kselftest helpers).
#
#   bash rxe_rust_nvme_peer.sh target ADDR
#       exports a memory-backed null_blk as $NQN over rdma on ADDR:$SVC.
#   bash rxe_rust_nvme_peer.sh host ADDR CYCLES
#       connects to the target at ADDR; writes DATA_MIB MiB of random bytes
#       through the namespace with O_DIRECT, reads them back and compares;
#       disconnects; then CYCLES connect/disconnect cycles, each reading a
#       block back; checks that the device holds no more queue pairs than
#       before and that nvme-rdma unloads. Prints "pattern sha256 HEX".
#   bash rxe_rust_nvme_peer.sh holds ADDR SHA256
#       on the target, once the host is done: the null_blk holds the bytes
#       whose hash the host printed, the target's queue pairs are gone; then
#       the target goes, $DEV first (see rxe_rust_nvme.sh's teardown_steps),
#       and $DEV comes back on $NETDEV with the same GID index for ADDR.
#
# DEV (rxe0) and NETDEV (eth1) name the RDMA device and its netdevice.

source "$(dirname "$0")/rxe_rust_lib.sh"
source "$(dirname "$0")/rxe_rust_nvme_lib.sh"

DEV=${DEV:-rxe0}
NETDEV=${NETDEV:-eth1}
DATA_MIB=4
# The target's queue pairs while it listens, for `holds` to compare with.
LISTEN_QPS=/tmp/rxe_rust_nvme_peer.qps

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

qps() {
	resources | sed -n 's/.* qp \([0-9]*\) .*/\1/p'
}

# The index of the RoCE v2 GID of IPv4 address $1 on $DEV's port; fails if
# there is none.
gid_index_of() {
	local i
	# shellcheck disable=SC2086 # the address's four bytes, split at the dots
	i=$(gid_in "$(gid_table "$DEV")" "$DEV" \
		"$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ })")
	[ -n "$i" ] && echo "$i"
}

gid_index_is() {
	[ "$(gid_index_of "$IP4")" = "$1" ]
}

port_active() {
	rdma link show "$DEV/1" | grep -q 'state ACTIVE'
}

target() {
	IP4=$1
	modprobe null_blk nr_devices=1 memory_backed=1 gb=1 &&
		WAIT_SECONDS=10 wait_for test -b /dev/nullb0 &&
		target_setup || { echo "target set-up failed"; return 1; }
	qps >"$LISTEN_QPS"
	echo "$DEV: target on $IP4:$SVC, $NQN on /dev/nullb0, $(cat "$LISTEN_QPS") queue pairs"
}

host() {
	local n=$2 qps0 i t0 d
	IP4=$1
	modprobe nvme-rdma || return 1
	qps0=$(qps)
	nvme_connect || return 1
	d=$NSDEV
	echo "controller $CTRL, namespace $d"
	dd if=/dev/urandom of="$tmp/pattern" bs=1M count=$DATA_MIB status=none &&
		dd if="$tmp/pattern" of="$d" bs=1M oflag=direct conv=fsync status=none &&
		dd if="$d" of="$tmp/back" bs=1M count=$DATA_MIB iflag=direct status=none &&
		cmp "$tmp/pattern" "$tmp/back" || { echo "$d: what was read back differs"; return 1; }
	echo "$DATA_MIB MiB through $d: identical"
	echo "pattern sha256 $(sha256sum <"$tmp/pattern" | cut -d' ' -f1)"
	nvme_disconnect || return 1
	t0=$SECONDS
	for i in $(seq "$n"); do
		fabrics_connect >"$tmp/cycle" 2>&1 || { echo "cycle $i: connect failed"; cat "$tmp/cycle"; return 1; }
		dd if="$NSDEV" of="$tmp/block" bs=4k count=1 iflag=direct status=none &&
			cmp -n 4096 "$tmp/pattern" "$tmp/block" || { echo "cycle $i: $NSDEV read back wrong"; return 1; }
		fabrics_disconnect >"$tmp/cycle" 2>&1 || { echo "cycle $i: disconnect failed"; cat "$tmp/cycle"; return 1; }
	done
	echo "$n connect/disconnect cycles, each reading a block back: $((SECONDS - t0)) s"
	WAIT_SECONDS=20 wait_for qps_are "$qps0" ||
		{ echo "$DEV has $(qps) queue pairs, $qps0 before the first connect"; return 1; }
	echo "$DEV: $qps0 queue pairs, as before the first connect"
	rmmod nvme_rdma || { echo "nvme_rdma does not unload"; return 1; }
}

holds() {
	local want=$2 got gid status=0 m
	IP4=$1
	got=$(dd if=/dev/nullb0 bs=1M count=$DATA_MIB iflag=direct status=none | sha256sum | cut -d' ' -f1)
	if [ "$got" = "$want" ]; then
		echo "/dev/nullb0 holds the host's $DATA_MIB MiB"
	else
		echo "/dev/nullb0's first $DATA_MIB MiB hash to $got; the host wrote $want"
		status=1
	fi
	# The target frees a queue's pair in a work item after the host goes.
	if WAIT_SECONDS=20 wait_for qps_are "$(cat "$LISTEN_QPS")"; then
		echo "$DEV: $(qps) queue pairs, as while it listened before the host came"
	else
		echo "$DEV has $(qps) queue pairs, $(cat "$LISTEN_QPS") while it listened"
		status=1
	fi
	gid=$(gid_index_of "$IP4") || { echo "$DEV has no RoCE v2 GID of $IP4"; return 1; }
	rdma link del "$DEV" && target_teardown || { echo "teardown failed"; return 1; }
	for m in nvmet_rdma nvmet null_blk; do
		module_loaded $m && ! rmmod $m && { echo "rmmod $m failed"; status=1; }
	done
	rdma link add "$DEV" type rxe netdev "$NETDEV" &&
		WAIT_SECONDS=20 wait_for port_active && WAIT_SECONDS=20 wait_for gid_index_is "$gid" ||
		{ echo "$DEV is not back on $NETDEV with GID index $gid for $IP4"; return 1; }
	echo "target gone; $DEV back on $NETDEV, GID index $gid"
	return $status
}

case ${1:-} in
target) target "$2" ;;
host) host "$2" "$3" ;;
holds) holds "$2" "$3" ;;
*) echo "usage: $0 target ADDR | host ADDR CYCLES | holds ADDR SHA256"; exit 2 ;;
esac
