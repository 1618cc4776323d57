#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side: for each driver, two namespaces joined by a veth with one RDMA
# device each, and for each perftest latency run every step of a message's
# chain, timed with the TSC: the client's doorbell (write(2): the rxe
# provider's post_send), the allocations along the way (kmalloc, kfree,
# kmem_cache_alloc: uverbs' command buffer, each skb), the stack's own events
# (net_dev_queue, net_dev_start_xmit, netif_rx, netif_receive_skb,
# fib_table_lookup), context switches, work items, and this driver's
# rxe_rust_xmit, rxe_rust_recv and rxe_rust_complete. Written to
# $VM_OUT/chain-N.txt for tools/qprof/chain.py, which says how long each step
# takes per driver, for the same kernel code as well as for each driver's own.
# Tracing slows both drivers: compare the drivers in one boot, and take speed
# from make bench.
#
#   scripts/vm-run --plain --out DIR -- bash tools/qprof/guest_chain.sh
#   python3 tools/qprof/chain.py DIR/chain-*.txt
#
# DRIVERS (module names, or .ko paths of rdma_rxe_rust builds) and RUNS
# (";"-separated perftest command lines) override the defaults.
set -u
DRIVERS=${DRIVERS:-"rdma_rxe rdma_rxe_rust"}
RUNS=${RUNS:-"ib_read_lat -s 2 -n 1000;ib_send_lat -s 2 -n 1000"}
TRACE_EVENTS="raw_syscalls/sys_enter raw_syscalls/sys_exit net/net_dev_queue
	net/net_dev_start_xmit net/netif_rx net/netif_receive_skb kmem/kmalloc kmem/kfree
	kmem/kmem_cache_alloc fib/fib_table_lookup sched/sched_switch
	workqueue/workqueue_execute_start rxe_rust/rxe_rust_xmit rxe_rust/rxe_rust_recv
	rxe_rust/rxe_rust_complete"
. "$(dirname "$0")/veth.sh"
tracefs_up 65536 || exit 1
# Nanoseconds, one clock for all CPUs: the TSC (chain.py converts with its rate).
echo x86-tsc >$T/trace_clock || exit 1
# The rate the guest calibrated, for chain.py.
dmesg | grep -o 'Refined TSC clocksource calibration: [0-9.]* MHz' | tail -1 >$VM_OUT/tsc.txt
# Of the system calls, write(2) only: the provider's doorbell, and what perftest prints.
echo 'id == 1' >$T/events/raw_syscalls/sys_enter/filter
echo 'id == 1' >$T/events/raw_syscalls/sys_exit/filter
each_traced_run chain 19100 || exit 1
