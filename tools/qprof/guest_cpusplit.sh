#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side: for each driver, two namespaces joined by a veth with one RDMA
# device each, and for each perftest run the split of every CPU's time
# (user, system, softirq and hard irq, idle) from /proc/stat around the
# client's run, with the context switches. Shows which CPUs a driver's
# kernel work runs on; it is not a speed claim (that takes make bench).
#
#   scripts/vm-run --plain --out DIR -- bash tools/qprof/guest_cpusplit.sh
#
# DRIVERS and RUNS (";"-separated perftest command lines) override the
# defaults.
set -u
DRIVERS=${DRIVERS:-"rdma_rxe rdma_rxe_rust"}
RUNS=${RUNS:-"ib_read_bw -s 65536 -n 3000;ib_read_bw -s 64 -n 30000;ib_send_lat -s 4096 -n 3000;ib_read_lat -s 4096 -n 3000;ib_write_bw -s 4096 -n 10000"}
. "$(dirname "$0")/veth.sh"
# cpuN user system softirq+irq idle (jiffies), then the context switches, then
# the rescheduling and function-call IPIs (all CPUs): the cross-CPU wake-ups.
snap() {
	awk '/^cpu[0-9]/ { print $1, $2 + $3, $4, $7 + $8, $5 + $6 } /^ctxt/ { print }' /proc/stat
	awk '$1 == "RES:" || $1 == "CAL:" { n = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i; print $1, n }' /proc/interrupts
	# net_rx_action out of budget (the third column, hex), and the time the
	# ksoftirqd threads ran (user and system, in USER_HZ ticks): softirq work
	# left to a thread, which waits for a CPU like any other.
	local n=0 t=0 squeeze pid f
	while read -r _ _ squeeze _; do n=$((n + 16#$squeeze)); done </proc/net/softnet_stat
	for pid in $(pgrep ksoftirqd); do
		read -r -a f <"/proc/$pid/stat" && t=$((t + f[13] + f[14]))
	done
	echo "squeeze $n"
	echo "ksoftirqd $t"
}
port=18700
run() { # driver, then the perftest command line
	local drv=$1 prog
	shift
	prog=$1
	shift
	port=$((port + 1))
	serve $port $prog "$@"
	snap >/tmp/s0
	ip netns exec qpa $prog "$@" -p $port -d qrxa -x $GA ${ADDR[1]} >/tmp/cli.out 2>&1
	snap >/tmp/s1
	wait $SPID
	echo "== $drv $prog $*: $(grep -E '^ *[0-9]+ +[0-9]+' /tmp/cli.out | tail -1)"
	paste -d' ' /tmp/s0 /tmp/s1 | awk '
		/^cpu/ { u = $7 - $2; s = $8 - $3; q = $9 - $4; i = $10 - $5; t = u + s + q + i
			if (t == 0) t = 1
			printf "  %s user %3d%% sys %3d%% irq %3d%% idle %3d%%\n", $1, 100 * u / t, 100 * s / t, 100 * q / t, 100 * i / t }
		/^ctxt/ { print "  context switches", $4 - $2 }
		/^RES:/ { print "  rescheduling IPIs", $4 - $2 }
		/^CAL:/ { print "  function-call IPIs", $4 - $2 }
		/^squeeze/ { print "  net_rx_action out of budget", $4 - $2 }
		/^ksoftirqd/ { print "  ksoftirqd ran", ($4 - $2) * 10, "ms" }'
}
each_run run || exit 1
