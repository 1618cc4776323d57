#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""An idle reliable connection learns at once that its netdevice went.

Two namespaces joined by a veth pair, a device on each side, as in rxe_rust_drops.py. An RC
queue pair of B, connected to one of A, has receive WQEs posted and nothing to send. Then B's
veth is deleted (A's end goes with it), while the devices' unregistration is held back by a
client that takes UNREG_MS to remove each (rxe_slow_client): the queue pair must go to ERR and
its receive WQEs complete with IBV_WC_WR_FLUSH_ERR within FLUSH_S, long before the
unregistration destroys it. Until 2026-12-07 an idle connection failed only when the
unregistration destroyed it (or at its next transmit); now the driver fails every connection
to another host at NETDEV_UNREGISTER. The kernel log must stay clean.

Usage: rxe_rust_unplug.py
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_drops import (  # noqa: E402
    DEV_A, DEV_B, NS_B, VETH_B, run, setup, teardown)
from rxe_rust_failslab import close, connect, with_ends  # noqa: E402
from rxe_rust_ktap import Results, log_marker, log_reports  # noqa: E402

DRV = "rdma_rxe_rust"
RECVS = 8
FLUSH_S = 5
UNREG_MS = 20000
RES = Results()


def gone(dev):
    return not os.path.exists(f"/sys/class/infiniband/{dev}")


def scenario(a, b):
    from pyverbs.wr import RecvWR, SGE
    from rxe_rust_traffic import poll
    import pyverbs.enums as e

    (qa, cqa), (qb, cqb) = a.fresh(e.IBV_QPT_RC), b.fresh(e.IBV_QPT_RC)
    connect(a, qa, b, qb, e.IBV_QPT_RC)
    for i in range(RECVS):
        qb.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(b.mr.buf, 64, b.mr.lkey)]))
    early = poll(cqb, 1, timeout=0.5)
    start = time.monotonic()
    r = run("ip", "-n", NS_B, "link", "del", VETH_B)
    took = time.monotonic() - start
    wcs = poll(cqb, RECVS, timeout=FLUSH_S)
    flushed = time.monotonic() - start
    state = qb.query(e.IBV_QP_STATE)[0].qp_state
    held = not gone(DEV_B)
    statuses = sorted({wc.status for wc in wcs})
    RES.check(f"{DRV}: an idle RC queue pair of a netdevice being deleted goes to ERR, its "
              f"{RECVS} receive WQEs flushed, within {FLUSH_S} s",
              not early and r.returncode == 0 and len(wcs) == RECVS and
              statuses == [e.IBV_WC_WR_FLUSH_ERR] and state == e.IBV_QPS_ERR and held,
              f"ip link del: exit {r.returncode} after {took:.1f} s; {len(wcs)} completions "
              f"in {flushed:.1f} s, statuses {statuses} (flush error: "
              f"{e.IBV_WC_WR_FLUSH_ERR}); QP state {state}; device's unregistration still "
              f"held: {held}; completions before: {len(early)}")
    close(qa, cqa, qb, cqb)


def main():
    mark = log_marker()
    teardown()
    r = run("modprobe", "rxe_slow_client", f"remove_ms={UNREG_MS}")
    err = r.stderr.strip() if r.returncode else setup()
    RES.check(f"{DRV}: set up two namespaces, a veth, {DEV_A} and {DEV_B}, and a client slow "
              "to remove them", not err, err)
    if err:
        teardown()
        run("rmmod", "rxe_slow_client")
        return RES.report()
    with_ends(RES, DRV, scenario)
    deadline = time.monotonic() + UNREG_MS / 1000 + 60
    while not (gone(DEV_A) and gone(DEV_B)) and time.monotonic() < deadline:
        time.sleep(0.5)
    RES.check(f"{DRV}: both devices went with their netdevices",
              gone(DEV_A) and gone(DEV_B))
    teardown()
    r = run("rmmod", "rxe_slow_client")
    RES.check("rxe_slow_client unloaded", r.returncode == 0, r.stderr.strip())
    bad = log_reports(mark)
    RES.check(f"{DRV}: no warning in the kernel log", not bad, "; ".join(bad[:5]))
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
