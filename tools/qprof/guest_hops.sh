#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side: for each driver, two namespaces joined by a veth with one RDMA
# device each, and for each perftest run every packet's transmit on and
# receive from the veth (the net:net_dev_start_xmit and net:netif_receive_skb
# tracepoints, with their CPU and time), the context switches and the work
# items started, written to $VM_OUT/hops-N.txt for tools/qprof/hops.py. Says
# how long each hop of a ping-pong takes, per driver: the wire, each end's
# answer, and the requester's turn from a response to its next request. It is
# not a speed claim (that takes make bench), and tracing slows both drivers.
# Needs tracefs (kernel/configs/rxe_rust_vm.config has the event tracer).
#
#   scripts/vm-run --plain --out DIR -- bash tools/qprof/guest_hops.sh
#   python3 tools/qprof/hops.py DIR/hops-*.txt
#
# DRIVERS (module names, or .ko paths of rdma_rxe_rust builds), RUNS
# (";"-separated perftest command lines) and TRACE_EVENTS (tracefs events,
# "subsystem/event ..."; hops.py reads the two net ones) override the
# defaults.
set -u
DRIVERS=${DRIVERS:-"rdma_rxe rdma_rxe_rust"}
RUNS=${RUNS:-"ib_read_lat -s 2 -n 2000;ib_atomic_bw -n 3000;ib_read_bw -s 65536 -n 300"}
TRACE_EVENTS=${TRACE_EVENTS:-"net/net_dev_start_xmit net/netif_receive_skb sched/sched_switch
	workqueue/workqueue_execute_start"}
. "$(dirname "$0")/veth.sh"
tracefs_up 65536 || exit 1
# One clock for all CPUs: a hop from one CPU to the other is a difference of two of them.
echo global >$T/trace_clock
each_traced_run hops 18900 || exit 1
