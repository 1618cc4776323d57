#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side: for each driver, two namespaces joined by a veth with one RDMA
# device each, and for each perftest run the workqueue events of the client's
# run (queue, start, end of every work item, from tracefs), written to
# $VM_OUT/wq-N.txt for tools/qprof/wqlat.py. Says how long a driver's work
# items wait for a worker and how long they run; it is not a speed claim
# (that takes make bench). It needs tracefs, which both kernels have (boot the
# plain one, without the checkers that slow both drivers).
#
#   scripts/vm-run --plain --out DIR -- bash tools/qprof/guest_wqlat.sh
#   python3 tools/qprof/wqlat.py DIR/wq-*.txt
#
# DRIVERS (module names, or .ko paths of rdma_rxe_rust builds) and RUNS
# (";"-separated perftest command lines) override the defaults.
set -u
DRIVERS=${DRIVERS:-"rdma_rxe rdma_rxe_rust"}
RUNS=${RUNS:-"ib_atomic_bw -n 5000;ib_read_bw -s 65536 -n 1000"}
TRACE_EVENTS="workqueue/workqueue_queue_work workqueue/workqueue_execute_start
	workqueue/workqueue_execute_end"
. "$(dirname "$0")/veth.sh"
tracefs_up 65536 || exit 1
each_traced_run wq 18800 || exit 1
