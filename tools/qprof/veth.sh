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

# For guest_wqlat.sh and guest_hops.sh: the perftest run "$@" of driver $2
# (server on port $3 in qpb, client in qpa) with the tracefs events of
# TRACE_EVENTS ("subsystem/event ...") on during the client's run; writes a
# title line (the run and perftest's last figures) and the trace to $1.
T=/sys/kernel/tracing
traced_run() { # output file, driver, port, then the perftest command line
	local out=$1 drv=$2 port=$3 prog=$4 e
	shift 4
	serve $port $prog "$@"
	echo >$T/trace
	# An event of one driver only (rxe_rust:*) is skipped for the other.
	for e in $TRACE_EVENTS; do [ -e $T/events/$e ] && echo 1 >$T/events/$e/enable; done
	ip netns exec qpa $prog "$@" -p $port -d qrxa -x $GA ${ADDR[1]} >/tmp/cli.out 2>&1
	for e in $TRACE_EVENTS; do [ -e $T/events/$e ] && echo 0 >$T/events/$e/enable; done
	wait $SPID
	{
		echo "# $drv $prog $*: $(grep -E '^ *[0-9]+ +[0-9]+' /tmp/cli.out | tail -1)"
		grep -v '^#' $T/trace
	} >"$out"
}

# Mounts tracefs (if it is not) with a buffer of $1 KiB per CPU.
tracefs_up() {
	mountpoint -q $T || mount -t tracefs nodev $T || { echo "no tracefs"; return 1; }
	echo "$1" >$T/buffer_size_kb
}

# traced_run for each driver and run of each_run, into $VM_OUT/$1-N.txt, with
# servers from port $2 on.
each_traced_run() { # file prefix, first port
	TRACED_PREFIX=$1 TRACED_PORT=$2 TRACED_K=0
	each_run traced_one
}
traced_one() { # driver, then the perftest command line
	local drv=$1 out
	shift
	TRACED_PORT=$((TRACED_PORT + 1))
	TRACED_K=$((TRACED_K + 1))
	out=$VM_OUT/$TRACED_PREFIX-$TRACED_K.txt
	traced_run "$out" $drv $TRACED_PORT "$@"
	echo "== $TRACED_PREFIX-$TRACED_K: $drv $*: $(grep -c . "$out") lines," \
		"lost: $(grep -h overrun $T/per_cpu/cpu*/stats | tr '\n' ' ')"
}
