#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""rdma_rxe_rust verbs objects through unmodified rdma-core (pyverbs).

Bad sizes and transitions get the C driver's errno, queue buffers are mapped
once and only at offsets the driver offered, and creating and destroying
10,000 of each object leaves kernel memory (slab and vmalloc) where it was.
KTAP output.
"""

import errno
import gzip
import mmap
import os
import subprocess
import sys

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
import pyverbs.enums as e

DEV = "rxe0"
# The debug test kernel (KASAN, lockdep, kmemleak) under TCG is slow: 10000
# cycles outran the test's 600 s. 1000 leaked CQ rings (two pages each) are
# still 8 MB; single leaked objects are kmemleak's to find. On a KASAN kernel
# the memory check is skipped (see below) and kmemleak finds a leak of one
# cycle as well as of a thousand: 100 there.
LOOPS_ENV = os.environ.get("RXE_LEAK_LOOPS")
results = []


def kasan_kernel():
    """True on a KASAN kernel, whose quarantine keeps freed memory allocated."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "CONFIG_KASAN=y\n" in f.read()
    except OSError:
        return False


def check(desc, fn):
    try:
        fn()
        results.append((True, desc, ""))
    except Exception as e:  # a failed check, whatever raised
        results.append((False, desc, f"{type(e).__name__}: {e}"))


def fails_with(err, fn):
    try:
        fn()
    except PyverbsRDMAError as e:
        if e.error_code != err:
            raise AssertionError(f"errno {e.error_code}, wanted {err}") from e
        return
    except OSError as e:
        if e.errno != err:
            raise AssertionError(f"errno {e.errno}, wanted {err}") from e
        return
    raise AssertionError(f"succeeded, wanted errno {err}")


def uverbs_mappings():
    """(offset, length) of this process's mappings of the uverbs device."""
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/infiniband/uverbs"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps.append((int(parts[2], 16), hi - lo))
    return maps


def kernel_memory_kb():
    m = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            m[k] = int(v.split()[0])
    return m["Slab"] + m["VmallocUsed"]


def main():
    subprocess.run(["modprobe", "rdma_rxe_rust"], check=True)
    subprocess.run(["rdma", "link", "add", DEV, "type", "rxe", "netdev", "eth0"], check=True)
    try:
        run()
    finally:
        subprocess.run(["rdma", "link", "del", DEV])
        subprocess.run(["rmmod", "rdma_rxe_rust"])
    print("TAP version 13")
    print(f"1..{len(results)}")
    for i, (ok, desc, diag) in enumerate(results, 1):
        if ok is None:
            print(f"ok {i} {desc} # SKIP {diag}")
            continue
        print(f"{'ok' if ok else 'not ok'} {i} {desc}")
        if diag:
            print(f"# {diag}")
    return 0 if all(r[0] is not False for r in results) else 1


def run():
    ctx = Context(name=DEV)
    pd = PD(ctx)

    check("CQ of 0 entries: EINVAL", lambda: fails_with(errno.EINVAL, lambda: CQ(ctx, 0)))
    check("CQ of 32768 entries (max_cqe + 1): EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: CQ(ctx, 32768)))

    def max_cq():
        cq = CQ(ctx, 32767)
        assert cq.cqe >= 32767, cq.cqe
        cq.close()
    check("CQ of max_cqe (32767) entries", max_cq)

    def capacity_rounding():
        cq = CQ(ctx, 10)
        # 11 slots round up to 16, one stays empty.
        assert cq.cqe == 15, cq.cqe
        cq.close()
    check("CQ capacity is the ring's (10 -> 15)", capacity_rounding)

    cq = CQ(ctx, 100)
    maps = uverbs_mappings()
    check("the provider mapped the CQ ring", lambda: _assert(maps, "no uverbs mapping"))
    off, length = maps[-1] if maps else (0, 4096)
    check("mapping the CQ ring a second time: EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: mmap.mmap(ctx.cmd_fd, length, offset=off)))
    check("mapping an offset never offered: EINVAL",
          lambda: fails_with(errno.EINVAL,
                             lambda: mmap.mmap(ctx.cmd_fd, 4096, offset=off + (1 << 30))))

    def resize():
        cq.resize(1000)
        assert cq.cqe >= 1000, cq.cqe
        assert len(uverbs_mappings()) == len(maps), "resize left a stale mapping"
    check("resize a CQ: the provider remaps the new ring", resize)
    check("resize below 1: EINVAL", lambda: fails_with(errno.EINVAL, lambda: cq.resize(0)))
    cq.close()

    qcq = CQ(ctx, 16)

    def qp_attr(qp_type, **cap):
        c = dict(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        c.update(cap)
        return QPInitAttr(qp_type=qp_type, scq=qcq, rcq=qcq, cap=QPCap(**c))

    check("QP with 33 send SGEs (max 32): EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: QP(pd, qp_attr(e.IBV_QPT_RC, max_send_sge=33))))
    check("QP with 2^20 + 1 receive WRs: EINVAL",
          lambda: fails_with(errno.EINVAL,
                             lambda: QP(pd, qp_attr(e.IBV_QPT_UD, max_recv_wr=(1 << 20) + 1))))
    check("QP with 513 bytes inline (max 512): EINVAL",
          lambda: fails_with(errno.EINVAL,
                             lambda: QP(pd, qp_attr(e.IBV_QPT_UC, max_inline_data=513))))

    def qp_caps():
        qp = QP(pd, qp_attr(e.IBV_QPT_RC, max_send_wr=10, max_send_sge=3, max_recv_wr=20))
        attr, init = qp.query(e.IBV_QP_CAP)
        # Rings of 16 and 32 slots; the SQ WQE holds 3 SGEs (48 bytes) of inline data.
        assert (init.cap.max_send_wr, init.cap.max_recv_wr) == (15, 31), init.cap
        assert init.cap.max_inline_data == 48, init.cap.max_inline_data
        assert qp.qp_num >= 16, qp.qp_num
        qp.close()
    check("QP capabilities come back rounded as the rxe provider expects", qp_caps)

    def illegal_transition():
        qp = QP(pd, qp_attr(e.IBV_QPT_RC))
        attr = QPAttr(qp_state=e.IBV_QPS_RTR)
        try:
            fails_with(errno.EINVAL, lambda: qp.modify(attr, e.IBV_QP_STATE))
        finally:
            qp.close()
    check("RESET -> RTR: EINVAL", illegal_transition)

    def ah_attr(is_global=1):
        gr = GlobalRoute(dgid=ctx.query_gid(1, 1), sgid_index=1)
        return AHAttr(gr=gr, is_global=is_global, port_num=1)

    def ah_numbers():
        a, b = AH(pd, attr=ah_attr()), AH(pd, attr=ah_attr())
        a.close()
        b.close()
    check("two address handles at once", ah_numbers)
    check("address handle without a GRH on RoCE: EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: AH(pd, attr=ah_attr(is_global=0))))
    check("memory window of type 3: EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: MW(pd, 3)))

    def mw_keys():
        w1, w2 = MW(pd, e.IBV_MW_TYPE_1), MW(pd, e.IBV_MW_TYPE_2)
        # Window indices start above those of memory regions (2^19).
        assert w1.rkey >> 8 >= (1 << 19) and w2.rkey >> 8 >= (1 << 19), (w1.rkey, w2.rkey)
        assert w1.rkey >> 8 != w2.rkey >> 8
        w1.close()
        w2.close()
    check("memory windows of types 1 and 2 get distinct R_Keys above the MR range", mw_keys)

    def srq_attr(max_wr=10, max_sge=2, limit=0):
        return SrqInitAttr(attr=SrqAttr(max_wr=max_wr, max_sge=max_sge, srq_limit=limit))

    check("SRQ of 0 WRs: EINVAL", lambda: fails_with(errno.EINVAL, lambda: SRQ(pd, srq_attr(0))))
    check("SRQ of 28 SGEs (max 27): EINVAL",
          lambda: fails_with(errno.EINVAL, lambda: SRQ(pd, srq_attr(max_sge=28))))

    def srq_life():
        srq = SRQ(pd, srq_attr(10, 2))
        a = srq.query()
        assert (a.max_wr, a.max_sge, a.srq_limit) == (15, 2, 0), (a.max_wr, a.max_sge)
        # Resize: the provider maps the new ring from the mminfo the kernel wrote to it.
        srq.modify(SrqAttr(max_wr=100), e.IBV_SRQ_MAX_WR)
        assert srq.query().max_wr == 127, srq.query().max_wr
        srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
        assert srq.query().srq_limit == 5
        fails_with(errno.EINVAL, lambda: srq.modify(SrqAttr(srq_limit=1000), e.IBV_SRQ_LIMIT))
        fails_with(errno.EINVAL, lambda: srq.modify(SrqAttr(max_wr=4), e.IBV_SRQ_MAX_WR))
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=qcq, rcq=qcq, srq=srq,
                               cap=QPCap(max_send_wr=4, max_send_sge=1)))
        qp.close()
        srq.close()
    check("SRQ create, query, resize, limit, QP on it, destroy", srq_life)

    def srq_of_another_pd():
        other = PD(ctx)
        srq = SRQ(other, srq_attr(10, 1))
        try:
            fails_with(errno.EINVAL, lambda: QP(pd, QPInitAttr(
                qp_type=e.IBV_QPT_RC, scq=qcq, rcq=qcq, srq=srq,
                cap=QPCap(max_send_wr=4, max_send_sge=1))))
        finally:
            srq.close()
            other.close()
    check("QP on an SRQ of another PD: EINVAL (rdma_rxe creates it)", srq_of_another_pd)

    rw = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ

    def mr_keys():
        m = MR(pd, 65536, rw)
        idx = m.lkey >> 8
        assert m.lkey == m.rkey, (m.lkey, m.rkey)
        assert 1 <= idx < (1 << 19), hex(m.lkey)
        m.close()
    check("a user MR gets equal L_Key and R_Key, index in the MR range", mr_keys)
    check("MR over memory the process has not mapped: EFAULT",
          lambda: fails_with(errno.EFAULT, lambda: MR(pd, 4096, rw, address=0x1000)))

    # Leak check: warm up (slab caches grow once), then measure.
    def cycle(n):
        for _ in range(n):
            p = PD(ctx)
            p.close()
            c = CQ(ctx, 16)
            c.close()
            q = QP(pd, qp_attr(e.IBV_QPT_UD))
            q.close()
            a = AH(pd, attr=ah_attr())
            a.close()
            w = MW(pd, e.IBV_MW_TYPE_2)
            w.close()
            m = MR(pd, 4096, rw)
            m.close()
            r = SRQ(pd, srq_attr())
            r.close()
        for _ in range(max(1, n // 10)):
            Context(name=DEV).close()
    loops = int(LOOPS_ENV) if LOOPS_ENV else 100 if kasan_kernel() else 1000
    cycle(20)
    before = kernel_memory_kb()
    cycle(loops)
    after = kernel_memory_kb()
    growth = after - before

    def no_leak():
        # A leaked CQ ring alone is two pages: 1000 of them would be tens of MB.
        assert growth < 2048, f"slab+vmalloc grew by {growth} kB"
    desc = (f"{loops} PDs, CQs, QPs, SRQs, AHs, MWs and MRs, {max(1, loops // 10)} contexts: "
            f"no kernel memory growth ({growth} kB)")
    if kasan_kernel():
        results.append((None, desc, "KASAN's quarantine holds freed memory; "
                        "kmemleak checks leaks on this kernel"))
    else:
        check(desc, no_leak)
    qcq.close()
    pd.close()
    ctx.close()


def _assert(cond, msg):
    if not cond:
        raise AssertionError(msg)


if __name__ == "__main__":
    sys.exit(main())
