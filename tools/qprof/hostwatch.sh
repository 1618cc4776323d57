#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side: runs a guest command on the plain kernel (scripts/vm-run --plain)
# and samples every QEMU thread's CPU time and last host CPU each 0.5 s
# (DIR/threads.txt), with the console's lines stamped with host time
# (DIR/console.txt). Says whether a vCPU thread got less of a host CPU during
# a run (a guest script's "== " lines mark the runs): tools/qprof/hostwatch.py.
#
#   tools/qprof/hostwatch.sh DIR env RUNS="..." bash tools/qprof/guest_cpusplit.sh
#   python3 tools/qprof/hostwatch.py DIR
set -u
out=$1
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
("$top/scripts/vm-run" --plain --timeout 1800 --out "$out" -- "$@" 2>&1 |
	while IFS= read -r l; do echo "$(date +%s.%N) $l"; done >"$out/console.txt") &
sleep 3
q=$(pgrep -f "^qemu-system-x86_64" | head -1)
while [ -n "$q" ] && kill -0 "$q" 2>/dev/null; do
	now=$(date +%s.%N)
	for t in /proc/$q/task/*; do
		s=$(cat "$t/stat" 2>/dev/null) || continue
		# Fields after the command's closing parenthesis: utime is the 12th, stime
		# the 13th, the CPU it last ran on the 37th.
		read -r -a f <<<"${s##*) }"
		echo "$now ${t##*/} $((f[11] + f[12])) ${f[36]}"
	done
	sleep 0.5
done >"$out/threads.txt"
wait
