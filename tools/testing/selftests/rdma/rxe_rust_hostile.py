#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hostile values in the shared queues.

A process owns the memory of its queue pair's rings: it may write anything
there, indices included. This writes all-ones over the header of both rings
of an RC QP (element size, index mask, producer index) and garbage over the
WQEs, then moves the QP to ERR, which makes the kernel read both rings to
flush them. Each driver must complete exactly one ring's worth of requests
per queue (the indices are masked with the kernel's own copy of the mask),
all with IB_WC_WR_FLUSH_ERR, destroy the QP at once, stay usable and not log
a warning.

Run once against the C driver (rdma_rxe) as a reference, this gave the
same 30 completions, but destroying the QP then hung for 50 s and the C
driver logged a WARNING (__rxe_cleanup in rxe_pool.c: a reference never
dropped). It is not run here: the harness fails on any kernel warning.
KTAP output.
"""

import os
import struct
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
import pyverbs.enums as e

from rxe_rust_ktap import DEV, Results, on_device

DRIVERS = ["rdma_rxe_rust"]
# Offsets in struct rxe_queue_buf.
PRODUCER_INDEX = 128
SLOTS = 384
RES = Results()
check = RES.check


def mappings():
    """{offset: (address, length)} of this process's uverbs mappings."""
    maps = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/infiniband/uverbs"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps[int(parts[2], 16)] = (lo, hi - lo)
    return maps


def drain(cq):
    """Polls cq until it stays empty for 0.2 s (at most 5 s); returns the completions."""
    wcs, idle = [], 0
    deadline = time.time() + 5
    while time.time() < deadline and idle < 20:
        n, got = cq.poll(64)
        wcs += got
        idle = 0 if n else idle + 1
        time.sleep(0.01)
    return wcs


def poke(mem, addr, data):
    mem.seek(addr)
    mem.write(data)
    mem.flush()


def flush_hostile(drv):
    """Returns (number of flush completions, all FLUSH_ERR, QP count ok)."""
    ctx = Context(name=DEV)
    pd = PD(ctx)
    cq = CQ(ctx, 1000)
    before = mappings()
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    rings = [m for off, m in sorted(mappings().items()) if off not in before]
    check(f"{drv}: the QP's two rings are mapped", len(rings) == 2, f"{rings}")
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        for addr, length in rings:
            # Element size, index mask: all ones; producer index: all ones.
            poke(mem, addr, b"\xff" * 8)
            poke(mem, addr + PRODUCER_INDEX, b"\xff" * 4)
            poke(mem, addr + SLOTS, bytes(range(256)) * ((length - SLOTS) // 256))
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index = 0
    attr.port_num = 1
    qp.to_init(attr)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    wcs = drain(cq)
    flushed = all(wc.status == e.IBV_WC_WR_FLUSH_ERR for wc in wcs)
    start = time.time()
    qp.close()
    took = time.time() - start
    check(f"{drv}: destroying the QP takes under a second", took < 1, f"{took:.3f} s")
    cq.close()
    pd.close()
    ctx.close()
    return len(wcs), flushed


def send_hostile(drv):
    """Garbage WQEs in the send queue of an RC QP in RTS, then the doorbell.

    The transport reads them: each is decoded from a private copy and checked,
    so the QP goes to the error state and everything completes with an error."""
    ctx = Context(name=DEV)
    pd = PD(ctx)
    cq = CQ(ctx, 1000)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    peer = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    before = mappings()
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    rings = [m for off, m in sorted(mappings().items()) if off not in before]
    gid = ctx.query_gid(1, 1)
    for a, b in ((qp, peer), (peer, qp)):
        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_INIT
        attr.pkey_index = 0
        attr.port_num = 1
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = b.qp_num
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=1), is_global=1, port_num=1)
        a.to_rts(attr)
    # The send queue is mapped first (lower offset): garbage WQEs in its slots,
    # and a producer index of 5, so that the next post (librxe writes slot 5
    # and rings the doorbell) hands the kernel five garbage WQEs first. The
    # header stays: librxe itself reads the element size and mask from it.
    sq_addr, sq_len = rings[0]
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        poke(mem, sq_addr + SLOTS, bytes(range(256)) * ((sq_len - SLOTS) // 256))
        poke(mem, sq_addr + PRODUCER_INDEX, struct.pack("<I", 5))
    mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    qp.post_send(SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr.buf, 16, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
    wcs = drain(cq)
    state = qp.query(e.IBV_QP_STATE)[0].qp_state
    check(f"{drv}: garbage send WQEs put the QP in the error state", state == e.IBV_QPS_ERR,
          f"state {state}")
    statuses = [w.status for w in wcs]
    check(f"{drv}: the first garbage WQE completes with IBV_WC_LOC_QP_OP_ERR, the rest "
          "(the posted one too) with IBV_WC_WR_FLUSH_ERR",
          1 < len(statuses) <= 15 and statuses[0] == e.IBV_WC_LOC_QP_OP_ERR and
          all(st == e.IBV_WC_WR_FLUSH_ERR for st in statuses[1:]) and
          wcs[-1].wr_id == 7, f"{statuses}, last wr_id {wcs[-1].wr_id if wcs else None}")
    for o in (qp, peer, mr, cq, pd):
        o.close()
    ctx.close()


def scenario(drv):
    send_hostile(drv)
    n, flushed = flush_hostile(drv)
    # Rings of 8 WRs have 16 slots: 15 requests each.
    check(f"{drv}: hostile indices flush one ring's worth per queue (30)",
          n == 30, f"{n} completions")
    check(f"{drv}: every flushed request reports IB_WC_WR_FLUSH_ERR", flushed)
    ctx = Context(name=DEV)
    check(f"{drv}: the device still works (query_device)",
          ctx.query_device().max_qp > 0)
    ctx.close()


def main():
    for drv in DRIVERS:
        on_device(RES, drv, scenario)
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
