# SPDX-License-Identifier: GPL-2.0
#
# Shared helpers of the rdma_rxe_rust selftests (sourced, bash).
#
# Each test file prints KTAP: a plan, one "ok"/"not ok" line per check, and
# exits with the kselftest status. Helpers never hide a failure: a check
# that cannot run is a failure, not a skip.

source "$(dirname "$0")/../kselftest/ktap_helpers.sh"

# Each result line is followed by the seconds since the previous one
# ("# took N s"): tests/run lists the slowest checks of a run.
RXE_LAST_RESULT=$SECONDS
eval "__rxe_ktap_test() $(declare -f __ktap_test | tail -n +2)"
__ktap_test() {
	__rxe_ktap_test "$@"
	echo "# took $((SECONDS - RXE_LAST_RESULT)) s"
	RXE_LAST_RESULT=$SECONDS
}

RXE_PORT=4791
RXE_RUST=rdma_rxe_rust
RXE_C=rdma_rxe

# Run a check; its output goes to the KTAP stream as diagnostics on failure.
# Usage: check "description" command [args...]
check() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		ktap_test_pass "$desc"
	else
		printf '%s\n' "$out" | sed 's/^/# /'
		ktap_test_fail "$desc"
	fi
}

# Succeeds on a KASAN kernel (the debug test kernel). Its quarantine keeps
# freed objects allocated for a while, so kernel memory growth says nothing
# about leaks there; kmemleak's scan at the end of the run covers them.
kasan_kernel() {
	zgrep -q '^CONFIG_KASAN=y' /proc/config.gz 2>/dev/null
}

# Kernel log lines after the last one holding the marker $1 (written to
# /dev/kmsg by the caller); the whole log if none holds it. One snapshot of
# the log, and linear in its length: the awk string grown line by line that
# this replaces was quadratic, and took minutes on a log of megabytes.
log_since() {
	local log n
	log=$(dmesg)
	n=$(printf '%s\n' "$log" | grep -nF -- "$1" | tail -n 1 | cut -d: -f1)
	printf '%s\n' "$log" | tail -n +$((${n:-0} + 1))
}

# Succeeds if the command fails and its output contains the expected text.
# Usage: fails_with "text" command [args...]
fails_with() {
	local want=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "unexpected success: $*: $out"
		return 1
	fi
	if ! printf '%s' "$out" | grep -qi -- "$want"; then
		echo "failed, but not with '$want': $out"
		return 1
	fi
}

module_loaded() {
	grep -q "^$1 " /proc/modules
}

# Unload both drivers, whatever is loaded.
unload_all() {
	local d
	for d in $(rdma -j link show 2>/dev/null | grep -o '"ifname":"[^"]*"' | cut -d'"' -f4 | cut -d/ -f1 | sort -u); do
		rdma link del "$d" 2>/dev/null
	done
	module_loaded $RXE_RUST && rmmod $RXE_RUST
	module_loaded $RXE_C && rmmod $RXE_C
	return 0
}

# Succeeds if the RDMA device exists. A query that gets no answer in 20 s
# (the core's device lock held by an unregistration that does not end) counts
# as "exists" and prints the state of the teardown (teardown_state); the
# query is left behind, not waited for: a task in uninterruptible sleep does
# not die of timeout(1)'s signals. A polling loop must not hang on it for
# good, as a 100-round netdev teardown of session 52 did; while that query
# stays stuck, the next ones answer "exists" at once.
rdma_dev_exists() {
	local pid i
	# While an earlier query is still stuck, so would this one be.
	if [ -n "${RXE_STUCK_QUERY:-}" ]; then
		kill -0 "$RXE_STUCK_QUERY" 2>/dev/null && return 0
		RXE_STUCK_QUERY=
	fi
	rdma dev show "$1" >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 200); do
		kill -0 $pid 2>/dev/null || break
		nap 0.1
	done
	if kill -0 $pid 2>/dev/null; then
		RXE_STUCK_QUERY=$pid
		echo "rdma dev show $1: no answer in 20 s" >&2
		teardown_state >&2
		return 0
	fi
	wait $pid
}

# Prints what tells a device teardown that does not end apart: the module's
# references (one per open uverbs file), the devices still in sysfs, the
# processes with a uverbs file open, and every task in uninterruptible sleep
# or whose kernel stack is in the RDMA core, with its stack; where the kernel
# has sysrq (the debug kernel), the locks held and blocked tasks too.
teardown_state() {
	local d p stack
	echo "rdma_rxe_rust refcnt: $(cat /sys/module/rdma_rxe_rust/refcnt 2>/dev/null)"
	echo "infiniband: $(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
	echo "infiniband_verbs: $(ls /sys/class/infiniband_verbs 2>/dev/null | tr '\n' ' ')"
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		stack=$(cat "$d/stack" 2>/dev/null)
		if ls -l "$d/fd" 2>/dev/null | grep -q /dev/infiniband ||
			grep -q '^State:[[:space:]]*D' "$d/status" 2>/dev/null ||
			printf '%s' "$stack" | grep -q 'ib_\|rdma\|uverbs\|rxe'; then
			echo "task $p $(grep '^State:' "$d/status" 2>/dev/null | tr -s '\t ' ' '):" \
				"$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)$(cat "$d/comm" 2>/dev/null | sed 's/^/ [/;s/$/]/')"
			printf '%s\n' "$stack" | sed 's/^/    /'
		fi
	done
	# Every lock held (lockdep) and every blocked task with its stack, into
	# the kernel log, which the harness keeps: they name who holds what the
	# stuck tasks wait for.
	if [ -w /proc/sysrq-trigger ]; then
		echo d >/proc/sysrq-trigger
		echo w >/proc/sysrq-trigger
		echo "locks held and blocked tasks: in the kernel log (sysrq d, w)"
	fi
}

# Pauses for $1 seconds (a decimal fraction) without starting a program:
# on the debug kernel each program started costs 0.2 s of CPU time or more
# (KASAN and kmemleak record a stack trace for every allocation and free),
# which a polling loop of sleep(1) takes from the processes it waits for.
# A read with a timeout on a FIFO that nobody writes to is a shell built-in
# (the FIFO is open for reading and writing, so the read never sees its end).
rxe_nap_fifo=${TMPDIR:-/tmp}/rxe_rust_nap.$$.$RANDOM
mkfifo -m 600 "$rxe_nap_fifo" 2>/dev/null && exec {RXE_NAP_FD}<>"$rxe_nap_fifo" || RXE_NAP_FD=
rm -f "$rxe_nap_fifo"
nap() {
	if [ -n "$RXE_NAP_FD" ]; then
		read -r -t "$1" -u "$RXE_NAP_FD" _ 2>/dev/null
	else
		sleep "$1"
	fi
	return 0
}

# Seconds (one decimal) since $1, a value of EPOCHREALTIME.
since() {
	local us=$((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}))
	printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

# Waits for a condition command to succeed: WAIT_SECONDS (default 10) times
# ten tries, a tenth of a second apart (longer where each try takes time).
wait_for() {
	local t=${WAIT_SECONDS:-10} i=0
	while [ $i -lt $((t * 10)) ]; do
		"$@" && return 0
		nap 0.1
		i=$((i + 1))
	done
	"$@"
}

# Succeeds if UDP port 4791 is bound in the current (or given) namespace.
# Usage: udp_port_open [netns] [4|6]
udp_port_open() {
	local ns=$1 fam=${2:-} exec=
	[ -n "$ns" ] && exec="ip netns exec $ns"
	$exec ss -Huln${fam:+ -$fam} "sport = :$RXE_PORT" | grep -q ":$RXE_PORT"
}

udp_port_closed() {
	! udp_port_open "$@"
}

# Port attribute of an RDMA device as printed by ibv_devinfo -v (first match).
devinfo_field() {
	ibv_devinfo -v -d "$1" | awk -v k="$2:" '$1 == k { print $2; exit }'
}

# Prints the first GID_SLOTS entries of device $1's GID table (index, type,
# GID), empty entries aside. The core fills the lowest free index first, so
# a device with a few addresses has them all there. Shell built-ins only:
# reading all 1024 entries with grep and cat took seconds per device on the
# debug kernel, where each program started costs a tenth of a second or more.
GID_SLOTS=16
GID_EMPTY=0000:0000:0000:0000:0000:0000:0000:0000
gid_table() {
	local base=/sys/class/infiniband/$1/ports/1 i g t
	for ((i = 0; i < GID_SLOTS; i++)); do
		read -r g 2>/dev/null <"$base/gids/$i" || continue
		[ "$g" = $GID_EMPTY ] && continue
		t=
		read -r t 2>/dev/null <"$base/gid_attrs/types/$i" || continue
		echo "$1 gid $i $t: $g"
	done
}

# The index of device $2's RoCE v2 GID $3 in the GID tables $1.
gid_in() {
	local line
	while IFS= read -r line; do
		if [[ $line == "$2 gid "*" RoCE v2: $3" ]]; then
			line=${line#"$2 gid "}
			echo "${line%% *}"
			return
		fi
	done <<<"$1"
}
