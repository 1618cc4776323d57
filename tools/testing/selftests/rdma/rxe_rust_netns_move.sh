#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust devices in the RDMA core's exclusive namespace mode
# (`rdma system set netns exclusive`), where `rdma dev set DEV netns NS`
# moves a device into another network namespace. The core allows the move
# only for drivers that let it disassociate their user contexts; this one
# does, the C rdma_rxe does not (it refuses with EOPNOTSUPP). The netdevice
# stays where it is: the device's packets still go through it and its
# namespace's UDP sockets.
#
# Checked: the move hides the device from the initial namespace and shows
# it in the other one, where a verbs program runs on it; the namespace's
# deletion gives it back to the initial namespace, working; the deletion of
# its netdevice removes it from the other namespace; and rmmod removes a
# device that is in another namespace (the module must not miss it while
# the core moves it). The mode can change only while no namespace but the
# initial one exists: the suite starts and ends in shared mode.

source "$(dirname "$0")/rxe_rust_lib.sh"

NS=rxe_mv
DEV=rxmv
PORT=18660

cleanup() {
	rdma link del $DEV 2>/dev/null
	ip netns del $NS 2>/dev/null
	ip link del mv0 2>/dev/null
	unload_all
	# The namespace's cleanup is asynchronous: until it ran, EBUSY.
	rdma system show | grep -q 'netns exclusive' &&
		WAIT_SECONDS=30 wait_for rdma system set netns shared
}
trap cleanup EXIT

in_ns() {
	ip netns exec $NS "$@"
}

# Succeeds if the RDMA device $1 is listed in namespace $2 ("" for the
# initial one), by the core's netlink (rdma) and by libibverbs.
visible_in() {
	local exec=
	[ -n "$2" ] && exec="ip netns exec $2"
	$exec rdma dev show "$1" >/dev/null 2>&1 &&
		$exec ibv_devices | grep -qw "$1"
}

# Succeeds if the RDMA device $1 is listed in neither way in namespace $2
# (which must exist: a failed query is not an absence).
hidden_in() {
	local exec= out
	[ -n "$2" ] && exec="ip netns exec $2"
	out=$($exec ibv_devices) || return 1
	grep -qw "$1" <<<"$out" && return 1
	out=$($exec rdma dev show "$1" 2>&1) && return 1
	[[ $out == *"Wrong device name"* ]]
}

# Succeeds if TCP port $2 is listened on in namespace $1 ("" as above).
listening_in() {
	local exec=
	[ -n "$1" ] && exec="ip netns exec $1"
	$exec ss -Hltn "sport = :$2" | grep -q .
}

# ibv_rc_pingpong -c (data checked) between two queue pairs of device $2
# in namespace $1 ("" for the initial one), over TCP port $3 there.
pingpong_in() {
	local ns=${1:-} exec= spid rc=0 out
	[ -n "$ns" ] && exec="ip netns exec $ns"
	out=$(mktemp)
	$exec timeout 120 ibv_rc_pingpong -d "$2" -g 1 -c -n 200 -p "$3" \
		>"$out.srv" 2>&1 &
	spid=$!
	if ! wait_for listening_in "$ns" "$3"; then
		echo "the server did not listen"
		kill $spid 2>/dev/null
		rc=1
	elif ! $exec timeout 120 ibv_rc_pingpong -d "$2" -g 1 -c -n 200 \
		-p "$3" 127.0.0.1 >"$out.cli" 2>&1; then
		echo "the client failed:"
		cat "$out.cli"
		kill $spid 2>/dev/null
		rc=1
	fi
	wait $spid || { echo "the server failed:"; cat "$out.srv"; rc=1; }
	[ $rc -eq 0 ] && ! grep -q "iters in" "$out.cli" && {
		echo "the client did not report its iterations:"
		cat "$out.cli"
		rc=1
	}
	rm -f "$out" "$out".*
	return $rc
}

# The namespace $NS, with its loopback up (the pingpongs' TCP exchange).
make_ns() {
	ip netns add $NS && ip -n $NS link set lo up
}

# A veth mv0/mv1, both up, mv0 with an IPv4 address.
make_veth() {
	ip link add mv0 type veth peer name mv1 && ip link set mv0 up &&
		ip link set mv1 up && ip addr add 198.18.9.1/24 dev mv0
}

# Succeeds if port 1 of device $1, in namespace $2, is in state $3.
port_state_in() {
	local exec=
	[ -n "$2" ] && exec="ip netns exec $2"
	$exec rdma link show "$1/1" | grep -q "state $3"
}

# The link_downed counter of port 1 of device $1 in namespace $2.
link_downed_in() {
	local exec=
	[ -n "$2" ] && exec="ip netns exec $2"
	$exec cat "/sys/class/infiniband/$1/ports/1/hw_counters/link_downed"
}

# Succeeds if that counter is at least $3.
link_downed_reaches() {
	local n
	n=$(link_downed_in "$1" "$2") && [ "$n" -ge "$3" ]
}

# The move re-enables the device (the core's enable_driver): a port that
# is down must not count as a link that went down once more. (The count of
# the carrier's loss follows the linkwatch worker's NETDEV_CHANGE.)
move_link_down() {
	local before after
	ip link set mv1 down && WAIT_SECONDS=10 wait_for port_state_in $DEV "" DOWN &&
		WAIT_SECONDS=10 wait_for link_downed_reaches $DEV "" 1 &&
		before=$(link_downed_in $DEV "") &&
		rdma dev set $DEV netns $NS && after=$(link_downed_in $DEV $NS) ||
		return 1
	if [ "$after" != "$before" ]; then
		echo "link_downed went from $before to $after in the move"
		return 1
	fi
	ip link set mv1 up && WAIT_SECONDS=10 wait_for port_state_in $DEV $NS ACTIVE
}

back_home() {
	ip netns del $NS && WAIT_SECONDS=20 wait_for visible_in $DEV ""
}

goes_with_netdev() {
	make_ns && rdma dev set $DEV netns $NS && visible_in $DEV $NS &&
		ip link del mv0 && WAIT_SECONDS=20 wait_for hidden_in $DEV $NS &&
		hidden_in $DEV ""
}

# The device gone with its netdevice may hold its name a little longer (the
# core frees it last): new names from here on.
two_devices() {
	make_veth && rdma link add ${DEV}2 type rxe netdev mv0 &&
		rdma link add ${DEV}b type rxe netdev mv1 &&
		rdma dev set ${DEV}2 netns $NS && visible_in ${DEV}2 $NS &&
		visible_in ${DEV}b ""
}

# While an ibv_rc_pingpong server holds ${DEV}b open (PD, MR, CQ, QP, waiting
# for its client), a move ends within MOVE_S: the core disassociates the
# process (which the C driver does not allow) and moves the device on.
MOVE_S=20
move_while_open() {
	local out spid start rc=0
	out=$(mktemp)
	ibv_rc_pingpong -d ${DEV}b -g 1 -p $((PORT + 2)) >"$out" 2>&1 &
	spid=$!
	if ! wait_for listening_in "" $((PORT + 2)); then
		echo "the server did not listen:"
		cat "$out"
		kill $spid 2>/dev/null
		rm -f "$out"
		return 1
	fi
	start=$SECONDS
	timeout $MOVE_S rdma dev set ${DEV}b netns $NS || rc=1
	[ $rc -eq 0 ] || echo "the move failed or took more than $MOVE_S s"
	kill -0 $spid 2>/dev/null || { echo "the server ended:"; cat "$out"; rc=1; }
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	rm -f "$out"
	[ $rc -eq 0 ] && visible_in ${DEV}b $NS && hidden_in ${DEV}b ""
}

rmmod_both() {
	local left
	timeout 60 rmmod $RXE_RUST && ! module_loaded $RXE_RUST &&
		hidden_in ${DEV}2 $NS && hidden_in ${DEV}b $NS || return 1
	left=$(ls /sys/class/infiniband/) && [ -z "$left" ] &&
		left=$(in_ns ls /sys/class/infiniband/) && [ -z "$left" ]
}

c_refuses() {
	local rc
	if module_loaded $RXE_RUST; then
		echo "$RXE_RUST is still loaded"
		return 1
	fi
	modprobe $RXE_C || return 1
	if rdma link add ${DEV}c type rxe netdev mv0; then
		fails_with "Operation not supported" rdma dev set ${DEV}c netns $NS &&
			visible_in ${DEV}c "" && hidden_in ${DEV}c $NS
		rc=$?
	else
		rc=1
	fi
	# The C driver's module stays in use while it has a device.
	rdma link del ${DEV}c || rc=1
	rmmod $RXE_C || rc=1
	return $rc
}

shared_everywhere() {
	unload_all
	modprobe $RXE_RUST && make_ns && make_veth &&
		rdma link add $DEV type rxe netdev mv0 &&
		visible_in $DEV "" && visible_in $DEV $NS || return 1
	rdma link del $DEV && ip link del mv0 && ip netns del $NS &&
		rmmod $RXE_RUST
}

# A deleted namespace leaves rdma_nets when its cleanup, asynchronous, has
# run: until then the mode cannot change (EBUSY).
set_mode() {
	WAIT_SECONDS=30 wait_for rdma system set netns "$1" &&
		rdma system show | grep -q "netns $1"
}

first_link() {
	modprobe $RXE_RUST && make_veth && rdma link add $DEV type rxe netdev mv0
}

ktap_print_header
ktap_set_plan 17
unload_all

check "no network namespace but the initial one (the mode can change)" \
	bash -c "[ -z \"\$(ip netns list)\" ]"
check "rdma system set netns exclusive" set_mode exclusive
check "veth mv0/mv1, link $DEV on mv0" first_link
check "namespace $NS" make_ns
check "rdma dev set $DEV netns $NS, its link down: link_downed does not move" \
	move_link_down
check "$DEV is gone from the initial namespace" hidden_in $DEV ""
check "$DEV is listed in $NS" visible_in $DEV $NS
check "ibv_rc_pingpong -c on $DEV in $NS" pingpong_in $NS $DEV $PORT
check "deleting $NS gives $DEV back to the initial namespace" back_home
check "ibv_rc_pingpong -c on $DEV back in the initial namespace" \
	pingpong_in "" $DEV $((PORT + 1))
check "moved again, $DEV goes with its netdevice" goes_with_netdev
check "a device in $NS, another in the initial namespace" two_devices
check "rdma dev set ${DEV}b netns $NS does not wait for a process holding it" \
	move_while_open
check "rmmod removes both, in $NS" rmmod_both
check "the C driver's device refuses the move (no disassociate_ucontext)" c_refuses
check "delete $NS and the veth, rdma system set netns shared" \
	eval "ip netns del $NS; ip link del mv0; set_mode shared"
check "in shared mode a link is listed in every namespace" shared_everywhere

ktap_finished
