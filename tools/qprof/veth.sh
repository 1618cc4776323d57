# SPDX-License-Identifier: GPL-2.0
# Sourced by the guest scripts of tools/qprof: two namespaces joined by a veth
# pair with one RDMA device each, and the RoCEv2 GID of each end.
NS=(qpa qpb); VETH=(qva qvb); ADDR=(198.18.77.1 198.18.77.2); DEV=(qrxa qrxb)

gid() { # dev addr: the index of the RoCEv2 GID of an IPv4 address
	local want f t
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${2//./ })
	for t in $(seq 50); do
		for f in /sys/class/infiniband/$1/ports/1/gids/*; do
			[ "$(cat "$f" 2>/dev/null)" = "$want" ] && { basename "$f"; return 0; }
		done
		sleep 0.2
	done
	return 1
}

# A driver is a module name, or a build of rdma_rxe_rust (a .ko file: an A/B).
veth_up() { # driver: loads it and sets GA and GB, the GID indexes of the two ends
	local i
	case $1 in
	*.ko) insmod "$1" ;;
	*) modprobe "$1" ;;
	esac || return 1
	ip netns add qpa && ip netns add qpb || return 1
	ip link add qva netns qpa type veth peer name qvb netns qpb || return 1
	for i in 0 1; do
		ip -n ${NS[$i]} link set lo up
		ip -n ${NS[$i]} addr add ${ADDR[$i]}/24 dev ${VETH[$i]}
		ip -n ${NS[$i]} link set ${VETH[$i]} up
		ip netns exec ${NS[$i]} rdma link add ${DEV[$i]} type rxe netdev ${VETH[$i]} || return 1
	done
	GA=$(gid qrxa ${ADDR[0]}) && GB=$(gid qrxb ${ADDR[1]}) || { echo "no GID"; return 1; }
}

veth_down() { # driver: removes both devices and namespaces, unloads it
	local i
	for i in 0 1; do ip netns exec ${NS[$i]} rdma link del ${DEV[$i]}; done
	ip netns del qpa
	ip netns del qpb
	sleep 1
	case $1 in
	*.ko) rmmod rdma_rxe_rust ;;
	*) rmmod "$1" ;;
	esac
}

# Starts the perftest server "$@" in qpb on port $1 and waits until it
# listens; SPID is its process.
serve() { # port, then the perftest command line
	local port=$1 t
	shift
	ip netns exec qpb "$@" -p $port -d qrxb -x $GB >/tmp/srv.out 2>&1 &
	SPID=$!
	for t in $(seq 100); do
		ip netns exec qpb ss -ltn | grep -q ":$port " && break
		sleep 0.1
	done
}

# For each driver of DRIVERS, over the veth: calls the function $1 with the
# driver and each ';'-separated perftest command line of RUNS.
each_run() { # function
	local drv c cmds argv
	for drv in $DRIVERS; do
		veth_up "$drv" || return 1
		IFS=';' read -ra cmds <<<"$RUNS"
		for c in "${cmds[@]}"; do
			read -ra argv <<<"$c"
			"$1" "$drv" "${argv[@]}"
		done
		veth_down "$drv"
	done
}
