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
	ip link del rfc0 2>/dev/null
	ip link del rfr0 2>/dev/null
	ip link del rsl0 2>/dev/null
	ip link del rsl1 2>/dev/null
	ip link del rsl2 2>/dev/null
	unload_all
	module_loaded rxe_slow_client && rmmod rxe_slow_client
}
trap cleanup EXIT

port_state() {
	rdma link show "$1/1" | grep -q "state $2"
}

# Deletes netdevice $2 under device $3 of driver $1, which a process holds
# open. Prints "held N" if the deletion still waited HELD_S s later, with N
# the netdevice's usage count meanwhile (the kernel log's "waiting for ... to
# become free", after 1 s here): the C driver's unregistration waits for the
# process. Prints "done" if the deletion ended while the process still held
# the device: this driver's (the RDMA core disassociates the process).
held_netdev_refs() {
	local drv=$1 nd=$2 dev=$3 out n
	out=$(mktemp)
	n=$(held_netdev_count "$@" 3>"$out")
	rm -f "$out"
	rmmod "$drv" || echo "rmmod $drv failed" >&2
	echo "$n"
}

# held_netdev_refs's steps; fd 3 is a file for ibv_asyncwatch's output.
held_netdev_count() {
	local drv=$1 nd=$2 dev=$3 watch del n
	modprobe "$drv" && ip link add "$nd" type veth peer name "${nd}p" &&
		sysctl -qw "net.ipv6.conf.$nd.disable_ipv6=1" &&
		ip link set "$nd" up && ip link set "${nd}p" up &&
		rdma link add "$dev" type rxe netdev "$nd" || { echo "$drv: set-up failed" >&2; return 1; }
	# The default GID (without IP addresses, the only one) holds a reference too.
	wait_for bash -c "! grep -q '^0000:0000:0000:0000' /sys/class/infiniband/$dev/ports/1/gids/0" ||
		{ echo "$drv: no default GID" >&2; return 1; }
	stdbuf -oL ibv_asyncwatch -d "$dev" >&3 2>&1 &
	watch=$!
	wait_for grep -q 'async event FD' /proc/self/fd/3 ||
		{ echo "$drv: ibv_asyncwatch did not start" >&2; kill $watch; return 1; }
	ip link del "$nd" &
	del=$!
	if WAIT_SECONDS=$HELD_S wait_for bash -c "! kill -0 $del 2>/dev/null"; then
		n=done
	else
		n=$(dmesg | grep -o "waiting for $nd to become free. Usage count = [0-9]*" | tail -n 1)
		n="held ${n##* }"
	fi
	kill "$watch"
	wait "$watch" 2>/dev/null
	wait "$del"
	WAIT_SECONDS=30 wait_for bash -c "! rdma dev show $dev 2>/dev/null" ||
		echo "$drv: $dev still there" >&2
	echo "$n"
}
HELD_S=15

# While a process keeps the device, the deleted netdevice waits for it under
# the C driver (on the RDMA core's port reference, and the default GID's),
# and not at all under this one: the driver drops its own references at
# once, and the core does not wait for the process (disassociate_ucontext).
netdev_refs_as_c() {
	local c r timeout
	timeout=$(sysctl -n net.core.netdev_unregister_timeout_secs)
	sysctl -qw net.core.netdev_unregister_timeout_secs=1
	c=$(held_netdev_refs $RXE_C rfc0 rfcd)
	r=$(held_netdev_refs $RXE_RUST rfr0 rfrd)
	sysctl -qw net.core.netdev_unregister_timeout_secs="$timeout"
	echo "ip link del under a held device: $RXE_C ${c:-?}, $RXE_RUST ${r:-?} (after $HELD_S s)"
	[ "${c%% *}" = held ] && [ "$r" = done ]
}

# Deletes a netdevice whose RDMA device is slow to unregister (a client's
# remove() takes SLOW_MS, rxe_slow_client, as a kernel ULP tearing down its
# queues can): the deletion must end without waiting for the device, which
# goes later, and the kernel must not report the netdevice waiting for a
# reference (after 10 s). The C driver keeps the core's port reference
# until its device is unregistered; so did this one before it detached the
# port at NETDEV_UNREGISTER (the deletion took 10.6 s with SLOW_MS 10 s).
# Meanwhile a link of another name is added at once, and one of the same
# name once the device went (the core refuses the name, ENFILE, until then).
netdev_not_held() {
	local t0 took other added rc=0
	modprobe rxe_slow_client remove_ms=$SLOW_MS || return 1
	if modprobe $RXE_RUST && ip link add rsl0 type veth peer name rsl0p &&
		ip link set rsl0 up && ip link set rsl0p up &&
		ip link add rsl1 type veth peer name rsl1p &&
		ip link set rsl1 up && ip link set rsl1p up &&
		ip link add rsl2 type veth peer name rsl2p &&
		ip link set rsl2 up && ip link set rsl2p up &&
		rdma link add rsld type rxe netdev rsl0; then
		echo "rxe_rust_netdev: slow unregistration $$" >/dev/kmsg
		t0=$EPOCHREALTIME
		ip link del rsl0 || rc=1
		took=$(since "$t0")
		# The core hides a device from queries once its unregistration began;
		# its sysfs folder stays until the clients are removed.
		[ -d /sys/class/infiniband/rsld ] ||
			{ echo "rsld's unregistration ended before the deletion did"; rc=1; }
		# A link of another name meanwhile: nothing to wait for, so the first
		# rsld is still there once it is added.
		rdma link add rsle type rxe netdev rsl2 || { echo "rsle not added"; rc=1; }
		other=$(since "$t0")
		[ -d /sys/class/infiniband/rsld ] ||
			{ echo "rsle waited for the first rsld to go"; rc=1; }
		# The same name again at once, on another netdevice: the link waits for
		# the first rsld, which holds the name (before, the core refused it:
		# ENFILE, "Too many open files in system").
		rdma link add rsld type rxe netdev rsl1 || { echo "rsld not added again"; rc=1; }
		added=$(since "$t0")
		# A name a live device holds is refused at once.
		fails_with "Too many open files" rdma link add rsld type rxe netdev rsl1p || rc=1
		ip link del rsl1
		ip link del rsl2
		WAIT_SECONDS=$((SLOW_MS / 500 + 30)) wait_for \
			test ! -d /sys/class/infiniband/rsld -a ! -d /sys/class/infiniband/rsle ||
			{ echo "rsld or rsle still there"; rc=1; }
		echo "ip link del took $took s, rsle added after $other s, rsld added again after $added s, gone after $(since "$t0") s (remove() $SLOW_MS ms)"
		log_since "rxe_rust_netdev: slow unregistration $$" >"$events"
		[ "$(grep -c "rxe_slow_client: removed" "$events")" = 3 ] ||
			{ echo "rxe_slow_client's remove() did not run three times"; rc=1; }
		grep "waiting for rsl[012] to" "$events" && rc=1
		[ "${took%.*}" -lt $((SLOW_MS / 2000)) ] || { echo "the deletion waited"; rc=1; }
	else
		echo "set-up failed"
		rc=1
	fi
	ip link del rsl0 2>/dev/null
	ip link del rsl1 2>/dev/null
	ip link del rsl2 2>/dev/null
	unload_all
	rmmod rxe_slow_client || rc=1
	return $rc
}
SLOW_MS=15000

ktap_print_header
ktap_set_plan 15
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
refs=$(netdev_refs_as_c 2>&1)
refs_rc=$?
printf '%s\n' "$refs" | sed 's/^/# /'
check "a netdevice deleted under an open device waits for it with $RXE_C, not with $RXE_RUST" \
	test $refs_rc = 0
check "a netdevice's deletion does not wait for its device's slow unregistration; a link of another name is added at once, of its name as soon as it went" netdev_not_held
ktap_finished
