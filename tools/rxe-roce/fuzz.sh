#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Runs each cargo-fuzz target of the RoCEv2 core for a bounded time and
# prints how many inputs each executed. New inputs go to a scratch corpus;
# the committed seed corpus (fuzz/corpus/<target>) is only read.
#
#   tools/rxe-roce/fuzz.sh               # 60 s per target
#   FUZZ_TIME=600 tools/rxe-roce/fuzz.sh packet
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). libFuzzer wants a
# nightly compiler; RUSTC_BOOTSTRAP=1 lets the stable toolchain build it.
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the script.

set -eu

cd "$(dirname "$0")/fuzz"
time=${FUZZ_TIME:-60}
targets=${*:-packet wqe qp}
export RUSTC_BOOTSTRAP=1
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
	exit 1
fi

for t in $targets; do
	cargo fuzz build "$t"
done

status=0
for t in $targets; do
	work=$(mktemp -d)
	log="$work.log"
	if cargo fuzz run "$t" "$work" "corpus/$t" -- \
		-max_total_time="$time" -print_final_stats=1 >"$log" 2>&1; then
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
		echo "$t: ${execs:-?} execs in ${time} s (${cov:-cov: ?}), no crash"
	else
		echo "$t: FAILED; last lines of the log:" >&2
		tail -n 30 "$log" >&2
		status=1
	fi
	rm -rf "$work" "$log"
done
exit $status
