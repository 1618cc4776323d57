#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Where QEMU's host time goes while the guest runs one driver's perftest.
#
# Usage: tools/qprof/hostperf.sh DRIVER PROG "ARGS" N OUTDIR
#   e.g. tools/qprof/hostperf.sh rdma_rxe_rust ib_read_lat "-s 2" 200000 build/exp/hp
#
# Boots the plain kernel (make kernel-plain) running guest_veth.sh (a short
# run of 500 iterations, then one of N), and once the short run is done
# records the QEMU process with the host's perf for SECS seconds (default
# 10; N must keep the client busy that long). Then prints, per QEMU thread
# (one per vCPU, and the main loop), its samples and their split: code
# TCG generated ([JIT]), QEMU's helpers by name (helper_lookup_tb_ptr is
# the lookup of an indirect jump's or a return's target; tlb_set_page_full
# a guest TLB fill), and the host kernel. Samples are host time, so two
# drivers' figures compare only from one machine at one time, and not as a
# speed claim (that takes make bench).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 5 ] || { sed -n '4,5p' "$0" >&2; exit 2; }
DRIVER=$1 PROG=$2 ARGS=$3 N=$4 out=$5
command -v perf >/dev/null || { echo "hostperf: no perf on the host" >&2; exit 1; }
mkdir -p "$out"
"$top/scripts/vm-run" --plain --timeout 900 -- env DRIVER="$DRIVER" PROG="$PROG" \
	ARGS="$ARGS" N1=500 N2="$N" bash "$top/tools/qprof/guest_veth.sh" >"$out/console" 2>&1 &
vm=$!
for _ in $(seq 600); do
	grep -q 'run n=500 ' "$out/console" && break
	sleep 0.5
done
sleep 2
pid=$(pgrep -f '^qemu-system-x86_64' | head -1)
perf record -F 2000 -p "$pid" -o "$out/perf.data" -- sleep "${SECS:-10}" >"$out/perf.log" 2>&1
wait $vm || { tail -20 "$out/console"; exit 1; }
grep -E '^run n=' "$out/console"
perf script -i "$out/perf.data" -F tid,ip,sym,dso 2>/dev/null | awk '
{
	s = $3
	if ($0 ~ /perf-[0-9]+\.map/) s = "[JIT]"
	else if ($0 ~ /kernel/) s = "[host kernel]"
	else if (s ~ /^\[unknown/) s = "[QEMU, no symbol]"
	c[$1 " " s]++; n[$1]++
}
END {
	for (k in c) {
		split(k, a, " ")
		if (c[k] / n[a[1]] > 0.01)
			printf "thread %s %6d samples %6.2f%% %s\n", a[1], n[a[1]], 100 * c[k] / n[a[1]], a[2]
	}
}' | sort -k2,2n -k5,5nr
