#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Processes killed in the middle of a transfer, on rdma_rxe_rust.

Each round forks two processes that each run RDMA WRITEs of 256 KiB between
two RC QPs of their own, both ways, so that the device's worker processes
one's queue pairs while the other rings its doorbell. They are killed with
SIGKILL once their traffic runs, both at once. The core then tears
down their objects and user contexts while the worker may still hold a
queue pair's state: nothing of a user context may be touched after it goes
(its mmap entries: WARNING in uverbs_main.c, use-after-free).

Checks: every round's processes ran and died; the kernel log has no new
warning, oops or KASAN report; the device still carries traffic after.
ROUNDS (environment) sets the number of rounds, 15 by default (50 took 142 s
of CI's debug VM run, 25 took 42-44 s on 2026-12-02). KTAP output.
"""

import os
import random
import signal
import subprocess
import sys
import time

from pyverbs.device import Context
import pyverbs.enums as e

from rxe_rust_ktap import BAD_LOG, DEV, Results, on_device
from rxe_rust_traffic import Pair, poll, send_wr

RES = Results()
check = RES.check
SIZE = 256 << 10
ROUNDS = int(os.environ.get("ROUNDS", "15"))


def kernel_log():
    return subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()


def traffic(ready):
    """The child: writes both ways until killed."""
    ctx = Context(name=DEV)
    p = Pair(ctx)
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    a, b = p.mr(SIZE), p.mr(SIZE)
    os.write(ready, b"r")
    while True:
        for i in range(4):
            p.a.post_send(send_wr(a, SIZE, e.IBV_WR_RDMA_WRITE, 1, b.buf, b.rkey))
            p.b.post_send(send_wr(b, SIZE, e.IBV_WR_RDMA_WRITE, 2, a.buf, a.rkey))
        poll(p.cq, 8, timeout=2)


def spawn():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            traffic(w)
        finally:
            os._exit(1)
    os.close(w)
    return pid, r


def reap(pid, seconds):
    """Waits up to `seconds` for pid; returns whether it died of SIGKILL."""
    deadline = time.time() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if time.time() > deadline:
            return False
        time.sleep(0.01)


def one_round():
    """Returns why the round failed, or None: both processes started their traffic and died
    of SIGKILL."""
    kids = [spawn(), spawn()]
    started = True
    for _, r in kids:
        started &= os.read(r, 1) == b"r"
        os.close(r)
    time.sleep(random.uniform(0.0, 0.03))
    # Both at once: one killed side's peer is the other process, which would otherwise keep
    # the device busy (and the killed one in its system call) with its own traffic.
    for pid, _ in kids:
        os.kill(pid, signal.SIGKILL)
    killed = [reap(pid, 20) for pid, _ in kids]
    if not started:
        return "a process did not start its traffic"
    if not all(killed):
        for pid, _ in kids:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return "a killed process did not exit within 20 s"
    return None


def scenario(drv):
    before = len(kernel_log())
    start = time.time()
    failed = [r for r in (one_round() for _ in range(ROUNDS)) if r]
    took = time.time() - start
    check(f"{drv}: {ROUNDS} rounds of two transfers killed mid-run",
          not failed, f"{len(failed)} rounds failed ({failed[:1]}); {took:.1f} s")
    # The core finishes tearing a killed process's context down as the file closes.
    time.sleep(0.5)
    new = [l for l in kernel_log()[before:] if BAD_LOG.search(l)]
    check(f"{drv}: no kernel warning or report after the kills", not new,
          " | ".join(new[:5]))

    ctx = Context(name=DEV)
    p = Pair(ctx)
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    a, b = p.mr(4096), p.mr(4096)
    blob = os.urandom(4096)
    a.write(blob, 4096)
    p.a.post_send(send_wr(a, 4096, e.IBV_WR_RDMA_WRITE, 1, b.buf, b.rkey))
    w = poll(p.cq, 1)
    check(f"{drv}: the device still carries an RDMA WRITE after",
          [x.status for x in w] == [e.IBV_WC_SUCCESS] and b.read(4096, 0) == blob,
          f"{[x.status for x in w]}")
    for o in (p.a, p.b, a, b, p.cq, p.pd):
        o.close()
    ctx.close()


def main():
    on_device(RES, "rdma_rxe_rust", scenario)
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
