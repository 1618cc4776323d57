#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A queue pair and its completion queue destroyed while its packets wait in a slow qdisc.

Two namespaces joined by a veth pair, a device on each side, as in rxe_rust_drops.py; a
token bucket of RATE on A's veth. A UC queue pair of A, with a completion queue of its own,
posts WRITES RDMA WRITEs of LEN bytes to B: the bucket holds its socket buffers (a queue pair
keeps up to 64 in flight), for seconds. Then the queue pair is destroyed (which waits for
them up to a second, then goes on) and its completion queue too, and the socket buffers
drain. Each holds a reference on the queue pair, so the last one frees it, and with it the
completion queue's ring, in the destructor of a socket buffer: in softirq, or with softirqs
off. Nothing freed there may sleep: until 2026-12-07 the ring's offer to user space was
withdrawn there, under a mutex ("BUG: sleeping function called from invalid context" on the
debug kernel); its owner withdraws it now, in destroy_cq. The kernel log must stay clean,
the bucket must have held the buffers past the destroy (else nothing was tested), and the
devices must hold as many objects as before.

Usage: rxe_rust_inflight.py
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_drops import (  # noqa: E402
    DEV_A, DEV_B, NS_A, VETH_A, run, setup, teardown)
from rxe_rust_failslab import close, connect, resources, with_ends  # noqa: E402
from rxe_rust_ktap import Results, log_marker, log_reports  # noqa: E402

DRV = "rdma_rxe_rust"
RATE = "100kbit"
WRITES = 32
LEN = 4096
RES = Results()


def backlog():
    """Packets waiting in A's veth qdisc."""
    out = subprocess.run(["ip", "netns", "exec", NS_A, "tc", "-s", "qdisc", "show", "dev",
                          VETH_A], capture_output=True, text=True).stdout
    for line in out.splitlines():
        words = line.split()
        if "backlog" in words:
            return int(words[words.index("backlog") + 2].rstrip("p"))
    return 0


def scenario(a, b):
    from rxe_rust_traffic import send_wr
    import pyverbs.enums as e

    (qa, cqa), (qb, cqb) = a.fresh(e.IBV_QPT_UC), b.fresh(e.IBV_QPT_UC)
    connect(a, qa, b, qb, e.IBV_QPT_UC)
    for i in range(WRITES):
        qa.post_send(send_wr(a.mr, LEN, e.IBV_WR_RDMA_WRITE, wr_id=i, raddr=b.mr.buf + i * LEN,
                             rkey=b.mr.rkey))
    deadline = time.monotonic() + 10
    while backlog() < 32 and time.monotonic() < deadline:
        time.sleep(0.05)
    held = backlog()
    start = time.monotonic()
    close(qa, cqa)
    took = time.monotonic() - start
    held_after = backlog()
    deadline = time.monotonic() + 60
    while backlog() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = backlog()
    # The last destructor ran as the last packet left the bucket; give it time to be logged.
    time.sleep(1)
    RES.check(f"{DRV}: a queue pair and its CQ destroyed while {RATE} holds their packets, "
              "which then drain",
              held >= 32 and held_after > 0 and left == 0,
              f"{held} packets waited before the destroy, {held_after} after it "
              f"({took:.1f} s), {left} left at the end")
    close(qb, cqb)


def main():
    mark = log_marker()
    teardown()
    err = setup()
    if not err:
        r = run("ip", "netns", "exec", NS_A, "tc", "qdisc", "add", "dev", VETH_A, "root",
                "tbf", "rate", RATE, "burst", "2kb", "limit", "2mb")
        err = r.stderr.strip() if r.returncode else ""
    RES.check(f"{DRV}: set up two namespaces, a veth with a {RATE} token bucket, {DEV_A} and "
              f"{DEV_B}", not err, err)
    if err:
        teardown()
        return RES.report()
    before = resources()
    with_ends(RES, DRV, scenario)
    after = resources()
    RES.check(f"{DRV}: the devices hold as many objects as before (rdma resource)",
              len(before) == 2 and after == before, f"before {before}, after {after}")
    bad = log_reports(mark)
    RES.check(f"{DRV}: no warning in the kernel log (nothing slept in a socket buffer's "
              "destructor)", not bad, "; ".join(bad[:5]))
    teardown()
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
