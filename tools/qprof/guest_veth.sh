#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side of tools/qprof/profile: loads DRIVER, joins two namespaces by a
# veth pair with one RDMA device each, and runs PROG (a perftest program)
# with ARGS twice, N1 then N2 iterations. Each client run is bracketed by
# sync(2), whose entry the plugin uses as its marker: dump 1 holds the N1
# run, dump 3 the N2 run.
set -u
DRIVER=${DRIVER:-rdma_rxe_rust}
PROG=${PROG:-ib_write_bw}
ARGS=${ARGS:--s 64}
N1=${N1:-2000}
N2=${N2:-12000}
. "$(dirname "$0")/veth.sh"
veth_up "$DRIVER" || exit 1
port=18600
run() { # iterations
	port=$((port + 1))
	ip netns exec qpb $PROG $ARGS -n $1 -p $port -d qrxb -x $GB >/tmp/srv.out 2>&1 &
	local spid=$! t rc
	for t in $(seq 100); do
		ip netns exec qpb ss -ltn | grep -q ":$port " && break
		sleep 0.1
	done
	sync
	ip netns exec qpa $PROG $ARGS -n $1 -p $port -d qrxa -x $GA ${ADDR[1]} >/tmp/cli.out 2>&1
	rc=$?
	wait $spid
	sync
	echo "run n=$1 rc=$rc: $(grep -E '^ *[0-9]+ +[0-9]+' /tmp/cli.out | tail -1)"
	[ $rc = 0 ] || { cat /tmp/cli.out /tmp/srv.out; exit 1; }
}
run $N1
run $N2
for m in rdma_rxe rdma_rxe_rust; do
	[ -e /sys/module/$m/sections/.text ] && echo "TEXT $m $(cat /sys/module/$m/sections/.text)"
done
exit 0
