#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side: for each driver, two namespaces joined by a veth with one RDMA
# device each, and for each perftest run the workqueue events of the client's
# run (queue, start, end of every work item, from tracefs), written to
# $VM_OUT/wq-N.txt for tools/qprof/wqlat.py. Says how long a driver's work
# items wait for a worker and how long they run; it is not a speed claim
# (that takes make bench). It needs tracefs: the debug kernel (the plain one is
# built without tracing), whose checkers slow both drivers.
#
#   scripts/vm-run --out DIR -- bash tools/qprof/guest_wqlat.sh
#   python3 tools/qprof/wqlat.py DIR/wq-*.txt
#
# DRIVERS (module names, or .ko paths of rdma_rxe_rust builds) and RUNS
# (";"-separated perftest command lines) override the defaults.
set -u
DRIVERS=${DRIVERS:-"rdma_rxe rdma_rxe_rust"}
RUNS=${RUNS:-"ib_atomic_bw -n 5000;ib_read_bw -s 65536 -n 1000"}
T=/sys/kernel/tracing
. "$(dirname "$0")/veth.sh"
mountpoint -q $T || mount -t tracefs nodev $T || { echo "no tracefs: boot the debug kernel"; exit 1; }
echo 65536 >$T/buffer_size_kb
port=18800
k=0
run() { # driver, then the perftest command line
	local drv=$1 prog e
	shift
	prog=$1
	shift
	port=$((port + 1))
	k=$((k + 1))
	serve $port $prog "$@"
	echo >$T/trace
	for e in workqueue_queue_work workqueue_execute_start workqueue_execute_end; do
		echo 1 >$T/events/workqueue/$e/enable
	done
	ip netns exec qpa $prog "$@" -p $port -d qrxa -x $GA ${ADDR[1]} >/tmp/cli.out 2>&1
	for e in workqueue_queue_work workqueue_execute_start workqueue_execute_end; do
		echo 0 >$T/events/workqueue/$e/enable
	done
	wait $SPID
	{
		echo "# $drv $prog $*: $(grep -E '^ *[0-9]+ +[0-9]+' /tmp/cli.out | tail -1)"
		grep -v '^#' $T/trace
	} >"$VM_OUT/wq-$k.txt"
	echo "== wq-$k: $drv $prog $*"
}
each_run run || exit 1
