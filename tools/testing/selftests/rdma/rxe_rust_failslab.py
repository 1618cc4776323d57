#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Allocations that fail inside the driver: every verb's error paths, and traffic.

The debug kernel fails slab and page allocations on demand (failslab,
fail_page_alloc) where a return address on the stack lies in a range: here
the driver's text, so that the driver's own allocations fail (and those of
the kernel functions it calls, ib_umem_get's included) while the rest of the
kernel allocates as usual. Two namespaces joined by a veth pair, a device on
each side, as in rxe_rust_drops.py; this process uses both devices.

- Each verb, alone: its Nth allocation in the driver fails (the task's
  fail-nth), for N = 1, 2, ... until it runs without reaching an Nth. Each
  attempt whose allocation failed must fail with ENOMEM or succeed (an
  allocation the driver can do without), and the verb must succeed in the end.
- Destroying each kind of object, with each of its allocations in the
  driver failed in turn: it must succeed.
- Every atomic allocation of the driver in this process fails while it posts
  a SEND across, on a UC and on an RC queue pair: the doorbell's run gets no
  buffer for the packet, not even one to drop it in, and the message must
  still arrive, byte for byte, the failed send counted in send_err (the
  queue pair runs again a jiffy later, from its worker). Before 2026-12-06
  the run stopped there with nothing to wake it, and the message never
  left.
- One in FAIL_PERCENT of the driver's atomic allocations, in any context,
  fails while RC traffic runs across (RDMA WRITE then READ of 1 MiB, SENDs,
  fetch-and-adds): every work request completes with success, the bytes
  compare, each fetch-and-add returns a value of its own (a lost response is
  answered again, not executed again) and the sum is right, send_err moved,
  and failures were injected.
- With FAILSLAB_RPING=1 only (open, see rxe_rust.rst "Allocation
  failures"): the same while rping -V connects across over rdma_cm (its
  MADs through both devices' QP1, a kernel queue pair) and verifies PINGS
  pings, uverbs' completion handler left alone. It passed 7 of 10 runs.
- Afterwards, with nothing failing, traffic across works, and once this
  process closed its objects, `rdma resource` counts as many of each on
  both devices as before it opened them; the run's kmemleak scan at the end
  covers what the error paths might leak.

Usage: [FAILSLAB_RPING=1] rxe_rust_failslab.py
"""

import errno
import os
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_drops import (  # noqa: E402
    DEV_A, DEV_B, IP_A, IP_B, NS_A, NS_B, counter, gid_index, run, setup, teardown)
from rxe_rust_ktap import Results, log_marker, log_reports  # noqa: E402

DRV = "rdma_rxe_rust"
DEBUGFS = "/sys/kernel/debug"
FAULTS = ("failslab", "fail_page_alloc")
# The attributes this test sets, saved before and put back after (a later suite of the same
# boot must find them as they were); probability first, so that nothing fails meanwhile.
ATTRS = ("probability", "interval", "times", "space", "verbose", "task-filter",
         "stacktrace-depth", "require-start", "require-end", "reject-start", "reject-end",
         "ignore-gfp-wait")
PAGE_ATTRS = ("min-order", "ignore-gfp-highmem")
# A verb whose allocations all failed in turn runs within this many.
MAX_NTH = 400
FAIL_PERCENT = 5
# Injected failures allowed in the traffic round (fault_attr's times).
TIMES = 1000000
RC_BYTES = 1 << 20
RC_CHUNK = 64 << 10
SENDS = 50
SEND_LEN = 4000
ATOMICS = 50
TRAFFIC_TIMEOUT = 300
# rping across over rdma_cm while allocations fail: its connection's MADs go through both
# devices' QP1, a kernel queue pair.
PINGS = 20
RPING_PORT = "18750"
RPING_TIMEOUT = 60

RES = Results()


def fault_write(name, attr, value):
    with open(f"{DEBUGFS}/{name}/{attr}", "w") as f:
        f.write(str(value))


def fault_read(name, attr):
    with open(f"{DEBUGFS}/{name}/{attr}") as f:
        return f.read().strip()


def elf_section_size(path, want):
    """The size of section want of the ELF64 little-endian file at path, or None."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    names = header(shstrndx)[4]
    for i in range(shnum):
        name, size = header(i)[0], header(i)[5]
        at = names + name
        if data[at:data.index(b"\0", at)] == want.encode():
            return size
    return None


def module_text():
    """The driver's .text as [start, end): where it was loaded, and its size in the module
    file. Exact, so that no other module's code next to it counts as the driver's."""
    try:
        with open(f"/sys/module/{DRV}/sections/.text") as f:
            start = int(f.read().strip(), 16)
    except (OSError, ValueError):
        return None
    path = run("modinfo", "-n", DRV).stdout.strip()
    size = elf_section_size(path, ".text") if path.endswith(".ko") else None
    if not start or not size:
        return None
    return start, start + size


def function_range(name):
    """[start, end) of kernel function name: its address in /proc/kallsyms to the next
    symbol's, or None."""
    addrs, start = set(), None
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            a = int(parts[0], 16)
            addrs.add(a)
            if parts[2] == name and parts[1] in "tT":
                start = a
    if not start:
        return None
    return start, min(a for a in addrs if a > start)


def faults_save():
    """[(fault, attribute, value)] of every attribute this test sets."""
    return [(name, attr, fault_read(name, attr)) for name in FAULTS
            for attr in ATTRS + (PAGE_ATTRS if name == "fail_page_alloc" else ())]


def faults_restore(saved):
    for name in FAULTS:
        fault_write(name, "probability", 0)
    for name, attr, value in saved:
        fault_write(name, attr, value)


def faults_setup(text):
    """Both faults limited to the driver's text, quiet, nothing failing yet."""
    for name in FAULTS:
        fault_write(name, "probability", 0)
        fault_write(name, "interval", 1)
        fault_write(name, "times", -1)
        fault_write(name, "space", 0)
        fault_write(name, "verbose", 0)
        fault_write(name, "task-filter", "N")
        fault_write(name, "stacktrace-depth", 32)
        fault_write(name, "require-start", text[0])
        fault_write(name, "require-end", text[1])
        fault_write(name, "ignore-gfp-wait", "N")
    fault_write("fail_page_alloc", "min-order", 0)
    fault_write("fail_page_alloc", "ignore-gfp-highmem", "N")


def faults_off():
    """Nothing fails any more (what is left of times stays, for the caller to read)."""
    for name in FAULTS:
        try:
            fault_write(name, "probability", 0)
            fault_write(name, "task-filter", "N")
        except OSError:
            pass
    try:
        with open("/proc/self/make-it-fail", "w") as f:
            f.write("0")
    except OSError:
        pass


class FailNth:
    """The calling thread's fail-nth: its Nth allocation under the driver fails."""

    def __init__(self):
        self.fd = os.open(f"/proc/self/task/{threading.get_native_id()}/fail-nth", os.O_RDWR)

    def arm(self, n):
        os.pwrite(self.fd, str(n).encode(), 0)

    def injected(self):
        """Whether the armed failure happened (and disarms it)."""
        left = int(os.pread(self.fd, 32, 0).decode().strip() or 0)
        self.arm(0)
        return left == 0


def attempt(op):
    """Runs op; returns (its result, None) or (None, the exception it raised)."""
    from pyverbs.pyverbs_error import PyverbsError
    try:
        return op(), None
    except PyverbsError as ex:
        return None, ex


def errno_of(ex):
    """The errno of a pyverbs exception (-1 if it has none)."""
    return getattr(ex, "error_code", -1)


def sweep(nth, name, prepare, op, undo):
    """Runs op(prepare()) with its Nth allocation in the driver failed, N = 1, 2, ... until one
    run reaches no Nth; undo(prepared, result) after each. A check in RES."""
    errnos, tolerated, odd = {}, 0, None
    for n in range(1, MAX_NTH + 1):
        prepared = prepare()
        nth.arm(n)
        result, err = attempt(lambda: op(prepared))
        hit = nth.injected()
        undo(prepared, result)
        if not hit:
            # A verb that allocates nothing in the driver (n == 1) need only succeed.
            RES.check(f"{DRV}: {name}: each of its allocations in the driver failed in turn "
                      "(ENOMEM each time, or done without it), then success",
                      err is None and set(errnos) <= {errno.ENOMEM},
                      f"{n - 1} allocations; "
                      f"failed with {errnos or 'nothing'} ({tolerated} succeeded anyway"
                      f"{f'; e.g. {odd}' if odd else ''}); "
                      f"then {'success' if err is None else err} with none failed")
            return
        if err is None:
            tolerated += 1
        else:
            code = errno_of(err)
            errnos[code] = errnos.get(code, 0) + 1
            if code != errno.ENOMEM and odd is None:
                odd = f"{err} at N={n}"
    RES.check(f"{DRV}: {name}: each of its allocations in the driver failed in turn", False,
              f"still reaching a {MAX_NTH}th allocation; failed with {errnos}")


def close(*objs):
    for o in objs:
        if o is not None:
            o.close()


class End:
    """One side: a context on a device, a PD, a CQ, a 1 MiB region, its GID of ip."""

    def __init__(self, dev, ip):
        from pyverbs.cq import CQ
        from pyverbs.device import Context
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from rxe_rust_traffic import ACCESS
        import pyverbs.enums as e

        self.gid_index = gid_index(dev, ip)
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 512)
        self.mr = MR(self.pd, RC_BYTES, ACCESS | e.IBV_ACCESS_REMOTE_ATOMIC)
        self.gid = self.ctx.query_gid(1, self.gid_index)

    def qp(self, qp_type, cq=None):
        """A queue pair of qp_type, its completions in cq (the side's own by default)."""
        from pyverbs.qp import QP, QPCap, QPInitAttr
        cq = cq or self.cq
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
        return QP(self.pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, cap=cap))

    def fresh(self, qp_type):
        """A queue pair of qp_type with a CQ of its own: (qp, cq). No completion of an
        earlier check can then be taken for one of its own."""
        from pyverbs.cq import CQ
        cq = CQ(self.ctx, 512)
        return self.qp(qp_type, cq), cq

    def route_to(self, peer):
        from pyverbs.addr import AHAttr, GlobalRoute
        return AHAttr(gr=GlobalRoute(dgid=peer.gid, sgid_index=self.gid_index),
                      is_global=1, port_num=1)

    def close(self):
        close(self.mr, self.cq, self.pd, self.ctx)


def with_ends(res, drv, scenario):
    """Runs scenario(a, b) on an End of each device, closed afterwards; a crash of the
    scenario is a failed check of res."""
    a = b = None
    try:
        a, b = End(DEV_A, IP_A), End(DEV_B, IP_B)
        scenario(a, b)
    except Exception as ex:  # a crash of the test is a failure, reported
        res.check(f"{drv}: the test ran to its end", False, repr(ex))
    finally:
        close(a, b)


def connect(a, qa, b, qb, qp_type):
    """Connects queue pair qa of a and qb of b to each other (RTS)."""
    from rxe_rust_traffic import ACCESS, rc_connect
    from pyverbs.qp import QPAttr
    import pyverbs.enums as e
    access = ACCESS | e.IBV_ACCESS_REMOTE_ATOMIC
    if qp_type == e.IBV_QPT_RC:
        rc_connect(qa, qb.qp_num, a.route_to(b), access=access)
        rc_connect(qb, qa.qp_num, b.route_to(a), access=access)
        return
    for q, end, peer, pq in ((qa, a, b, qb), (qb, b, a, qa)):
        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_INIT
        attr.pkey_index = 0
        attr.port_num = 1
        attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = pq.qp_num
        attr.rq_psn = 0
        attr.sq_psn = 0
        attr.ah_attr = end.route_to(peer)
        q.to_rts(attr)


def verb_sweeps(nth, a, b):
    """Every verb of A's device with each of its allocations failed in turn."""
    from pyverbs.addr import AH
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR, MW
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPCap, QPInitAttr
    from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
    from rxe_rust_traffic import ACCESS, rc_connect
    import pyverbs.enums as e

    nothing = lambda: None  # noqa: E731
    dispose = lambda prepared, result: close(result)  # noqa: E731
    sweep(nth, "open the device", nothing, lambda _: Context(name=DEV_A), dispose)
    sweep(nth, "allocate a PD", nothing, lambda _: PD(a.ctx), dispose)
    sweep(nth, "create a CQ", nothing, lambda _: CQ(a.ctx, 256), dispose)
    sweep(nth, "resize a CQ", lambda: CQ(a.ctx, 16), lambda cq: cq.resize(300),
          lambda cq, _: close(cq))
    sweep(nth, "register a 1 MiB MR", nothing, lambda _: MR(a.pd, RC_BYTES, ACCESS), dispose)
    sweep(nth, "allocate a type 2 MW", nothing, lambda _: MW(a.pd, e.IBV_MW_TYPE_2), dispose)
    sweep(nth, "create an AH", nothing, lambda _: AH(a.pd, attr=a.route_to(b)), dispose)
    sweep(nth, "create an SRQ", nothing,
          lambda _: SRQ(a.pd, SrqInitAttr(SrqAttr(max_wr=64, max_sge=2))), dispose)
    for kind, t in (("RC", e.IBV_QPT_RC), ("UC", e.IBV_QPT_UC), ("UD", e.IBV_QPT_UD)):
        sweep(nth, f"create a {kind} QP", nothing, lambda _, t=t: a.qp(t), dispose)
    srq = SRQ(a.pd, SrqInitAttr(SrqAttr(max_wr=64, max_sge=1)))
    sweep(nth, "create an RC QP on an SRQ", nothing,
          lambda _: QP(a.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=a.cq, rcq=a.cq, srq=srq,
                                        cap=QPCap(max_send_wr=16, max_send_sge=1))),
          dispose)
    sweep(nth, "take an RC QP to RTS", lambda: a.qp(e.IBV_QPT_RC),
          lambda qp: rc_connect(qp, 0x12, a.route_to(b)), lambda qp, _: close(qp))
    close(srq)

    # Destroying: with each of its allocations under the driver failed in turn, it succeeds.
    for kind, make in (("PD", lambda: PD(a.ctx)), ("CQ", lambda: CQ(a.ctx, 64)),
                       ("MR", lambda: MR(a.pd, 4096, ACCESS)),
                       ("MW", lambda: MW(a.pd, e.IBV_MW_TYPE_2)),
                       ("AH", lambda: AH(a.pd, attr=a.route_to(b))),
                       ("SRQ", lambda: SRQ(a.pd, SrqInitAttr(SrqAttr(max_wr=16)))),
                       ("RC QP", lambda: a.qp(e.IBV_QPT_RC))):
        destroy_sweep(nth, kind, make)


def destroy_sweep(nth, kind, make):
    """Destroys an object of kind (made by make()) with its Nth allocation under the driver
    failed, N = 1, 2, ... until one destroy reaches no Nth. A check in RES."""
    desc = (f"{DRV}: destroy a {kind} with each of its allocations in the driver failed in "
            "turn: it succeeds")
    for n in range(1, MAX_NTH + 1):
        obj = make()
        nth.arm(n)
        _, err = attempt(obj.close)
        hit = nth.injected()
        if err is not None:
            RES.check(desc, False, f"with its allocation {n} failed: {err}")
            return
        if not hit:
            RES.check(desc, True, f"{n - 1} allocations")
            return
    RES.check(desc, False, f"still reaching a {MAX_NTH}th allocation")


def wait_for(cq, n, timeout):
    from rxe_rust_traffic import poll
    return poll(cq, n, timeout)


def doorbell_without_memory(a, b, qp_type, kind):
    """Posts a SEND from b to a while every atomic allocation of the driver in this task fails;
    the receive must complete with the bytes."""
    from pyverbs.wr import SGE, RecvWR
    from rxe_rust_traffic import send_wr
    import pyverbs.enums as e

    (qa, cqa), (qb, cqb) = a.fresh(qp_type), b.fresh(qp_type)
    connect(a, qa, b, qb, qp_type)
    recv = RecvWR(wr_id=7, num_sge=1, sg=[SGE(a.mr.buf, SEND_LEN, a.mr.lkey)])
    # One message first, with nothing failing: a doorbell after a poll runs its queue pair
    # in the system call (a ping-pong), where the failures below are this task's.
    qa.post_recv(recv)
    qb.post_send(send_wr(b.mr, SEND_LEN))
    warm = len(wait_for(cqa, 1, 10)) + len(wait_for(cqb, 1, 10))
    payload = os.urandom(SEND_LEN)
    a.mr.write(bytes(SEND_LEN), SEND_LEN, 0)
    b.mr.write(payload, SEND_LEN, 0)
    qa.post_recv(recv)
    send_err = counter(DEV_B, "send_err")
    for name in FAULTS:
        fault_write(name, "ignore-gfp-wait", "Y")
        fault_write(name, "task-filter", "Y")
        fault_write(name, "times", 1000)
        fault_write(name, "probability", 100)
    with open("/proc/self/make-it-fail", "w") as f:
        f.write("1")
    try:
        start = time.monotonic()
        qb.post_send(send_wr(b.mr, SEND_LEN))
        got = wait_for(cqa, 1, 10)
        took = time.monotonic() - start
    finally:
        faults_off()
        injected = sum(1000 - int(fault_read(name, "times")) for name in FAULTS)
        for name in FAULTS:
            fault_write(name, "times", -1)
            fault_write(name, "ignore-gfp-wait", "N")
    sent = wait_for(cqb, 1, 10)
    landed = a.mr.read(SEND_LEN, 0) == payload
    # The packet's skb was not allocated (counted), and neither was the buffer to drop it in.
    failed_sends = counter(DEV_B, "send_err") - send_err
    RES.check(f"{DRV}: a {kind} SEND posted while every atomic allocation of the driver in the "
              "posting task fails arrives, byte for byte",
              warm == 2 and injected > 0 and failed_sends > 0 and len(got) == 1
              and got[0].status == e.IBV_WC_SUCCESS and landed
              and len(sent) == 1 and sent[0].status == e.IBV_WC_SUCCESS,
              f"{warm} of 2 completions of the first message; {injected} allocations failed, "
              f"{DEV_B} send_err +{failed_sends}; "
              f"receive {[w.status for w in got] or 'none in 10 s'} after {took:.2f} s, send "
              f"{[w.status for w in sent] or 'none'}, bytes {'equal' if landed else 'differ'}")
    close(qa, qb, cqa, cqb)


def rc_traffic(a, b):
    """RC traffic from b to a: WRITE then READ of RC_BYTES, SENDs, fetch-and-adds. Returns
    (ok, diagnostics)."""
    from pyverbs.wr import SGE, RecvWR, SendWR
    from rxe_rust_traffic import poll
    import pyverbs.enums as e

    (qa, cqa), (qb, cqb) = a.fresh(e.IBV_QPT_RC), b.fresh(e.IBV_QPT_RC)
    connect(a, qa, b, qb, e.IBV_QPT_RC)
    deadline = time.time() + TRAFFIC_TIMEOUT
    bad = []

    def complete(cq, n):
        wcs = poll(cq, n, max(1.0, deadline - time.time()))
        bad.extend(w.status for w in wcs if w.status != e.IBV_WC_SUCCESS)
        if len(wcs) < n:
            bad.append(f"{n - len(wcs)} missing")
        return wcs

    def rdma(opcode, off):
        wr = SendWR(wr_id=off, opcode=opcode, num_sge=1,
                    sg=[SGE(b.mr.buf + off, RC_CHUNK, b.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(a.mr.rkey, a.mr.buf + off)
        return wr

    try:
        data = os.urandom(RC_BYTES)
        b.mr.write(data, RC_BYTES, 0)
        a.mr.write(bytes(RC_BYTES), RC_BYTES, 0)
        for off in range(0, RC_BYTES, RC_CHUNK):
            qb.post_send(rdma(e.IBV_WR_RDMA_WRITE, off))
        complete(cqb, RC_BYTES // RC_CHUNK)
        written = a.mr.read(RC_BYTES, 0) == data
        b.mr.write(bytes(RC_BYTES), RC_BYTES, 0)
        for off in range(0, RC_BYTES, RC_CHUNK):
            qb.post_send(rdma(e.IBV_WR_RDMA_READ, off))
        complete(cqb, RC_BYTES // RC_CHUNK)
        read = b.mr.read(RC_BYTES, 0) == data

        msgs = [os.urandom(SEND_LEN) for _ in range(SENDS)]
        for i in range(SENDS):
            qa.post_recv(RecvWR(wr_id=i, num_sge=1,
                                sg=[SGE(a.mr.buf + i * SEND_LEN, SEND_LEN, a.mr.lkey)]))
        for i, m in enumerate(msgs):
            b.mr.write(m, SEND_LEN, i * SEND_LEN)
            qb.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(b.mr.buf + i * SEND_LEN, SEND_LEN, b.mr.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED))
            if i % 16 == 15:
                complete(cqb, 16)
        complete(cqb, SENDS % 16)
        complete(cqa, SENDS)
        sent = all(a.mr.read(SEND_LEN, i * SEND_LEN) == m for i, m in enumerate(msgs))

        # The counter at offset 0 of A's region, each result at 8 * (i + 1) of B's.
        a.mr.write(bytes(8), 8, 0)
        olds = []
        for i in range(ATOMICS):
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                        sg=[SGE(b.mr.buf + 8 * (i + 1), 8, b.mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_atomic(a.mr.rkey, a.mr.buf, 1, 0)
            qb.post_send(wr)
            complete(cqb, 1)
            olds.append(int.from_bytes(b.mr.read(8, 8 * (i + 1)), "little"))
        total = int.from_bytes(a.mr.read(8, 0), "little")
        atomics = sorted(olds) == list(range(ATOMICS)) and total == ATOMICS
    finally:
        close(qa, qb, cqa, cqb)
    ok = written and read and sent and atomics and not bad
    return ok, (f"WRITE {'equal' if written else 'differs'}, READ "
                f"{'equal' if read else 'differs'}, SENDs {'equal' if sent else 'differ'}, "
                f"fetch-and-add {'right' if atomics else f'returned {olds}, sum {total}'}; "
                f"bad completions {bad[:8] or 'none'}")


def traffic_with_failures(a, b):
    """RC traffic while one in FAIL_PERCENT of the driver's atomic allocations fails."""
    send_err = counter(DEV_A, "send_err") + counter(DEV_B, "send_err")
    for name in FAULTS:
        fault_write(name, "ignore-gfp-wait", "Y")
        fault_write(name, "times", TIMES)
        fault_write(name, "probability", FAIL_PERCENT)
    try:
        ok, diag = rc_traffic(a, b)
    finally:
        faults_off()
    injected = sum(TIMES - int(fault_read(name, "times")) for name in FAULTS)
    for name in FAULTS:
        fault_write(name, "times", -1)
    moved = counter(DEV_A, "send_err") + counter(DEV_B, "send_err") - send_err
    RES.check(f"{DRV}: RC WRITE and READ of {RC_BYTES >> 20} MiB, {SENDS} SENDs and {ATOMICS} "
              f"fetch-and-adds across while {FAIL_PERCENT} % of the driver's atomic "
              "allocations fail: all complete, the bytes compare, each fetch-and-add once",
              ok and injected > 0 and moved > 0,
              f"{diag}; {injected} allocations failed, send_err +{moved}")


def cm_listening():
    r = run("ip", "netns", "exec", NS_A, "rdma", "resource", "show", "cm_id")
    return any("state LISTEN" in ln and f":{RPING_PORT}" in ln for ln in r.stdout.splitlines())


def rping_with_failures():
    """rping -V across over rdma_cm while one in FAIL_PERCENT of the driver's atomic
    allocations fails, in any context: the connection's MADs through QP1 (a kernel queue
    pair), then PINGS pings verified."""
    # uverbs drops a completion event whose entry it cannot allocate (GFP_ATOMIC, in
    # ib_uverbs_comp_handler, which the driver calls): rping, which waits for events, then
    # waits for good, under either driver. Those allocations are left alone.
    comp = function_range("ib_uverbs_comp_handler")
    for name in FAULTS:
        fault_write(name, "reject-start", comp[0])
        fault_write(name, "reject-end", comp[1])
    # Line-buffered: a side stopped by its time-out still shows what it printed.
    cmd = ["stdbuf", "-oL", "rping", "-v", "-V", "-a", IP_A, "-p", RPING_PORT, "-C", str(PINGS),
           "-S", "1000"]
    # In a session of its own: a kill reaches rping itself, not only the timeout(1) above it,
    # which would leave rping holding the output pipe.
    server = subprocess.Popen(["ip", "netns", "exec", NS_A, "timeout", "-k", "5",
                               str(RPING_TIMEOUT), *cmd, "-s"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 30
    while not cm_listening() and server.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    for name in FAULTS:
        fault_write(name, "ignore-gfp-wait", "Y")
        fault_write(name, "times", TIMES)
        fault_write(name, "probability", FAIL_PERCENT)
    try:
        client = run("ip", "netns", "exec", NS_B, "timeout", "-k", "5", str(RPING_TIMEOUT),
                     *cmd, "-c")
        try:
            out, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            out, _ = server.communicate()
    finally:
        faults_off()
    injected = sum(TIMES - int(fault_read(name, "times")) for name in FAULTS)
    for name in FAULTS:
        fault_write(name, "times", -1)
    pings = client.stdout.count("ping data: ")
    stats = {d: {c: counter(d, c) for c in ("completer_retry_err", "rcvd_rnr_err", "send_err",
                                            "retry_exceeded_err", "retry_rnr_exceeded_err",
                                            "duplicate_request", "out_of_seq_request",
                                            "rcvd_seq_err", "send_rnr_err")}
             for d in (DEV_A, DEV_B)}
    ok = (client.returncode == 0 and server.returncode == 0 and pings == PINGS
          and "mismatch" not in client.stdout + out)
    RES.check(f"{DRV}: rping -V -C {PINGS} across over rdma_cm while {FAIL_PERCENT} % of the "
              "driver's atomic allocations fail: connected, every ping verified",
              ok and injected > 0,
              f"client exit {client.returncode}, {pings} pings; server exit "
              f"{server.returncode}; {injected} allocations failed; client: "
              f"{' | '.join(ln[:120] for ln in (client.stdout + client.stderr).strip().splitlines()[-4:])}"
              f"; server: {' | '.join(ln[:120] for ln in out.strip().splitlines()[-6:])}; {stats}")


def resources():
    """Both devices' lines of `rdma resource show` (how many of each object they have)."""
    r = run("rdma", "resource", "show")
    return sorted(ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines()
                  if f" {DEV_A}:" in ln or f" {DEV_B}:" in ln)


def main():
    # A time-out's SIGTERM ends the test through its finally blocks: the faults are put back.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    mark = log_marker()
    teardown()
    err = setup()
    RES.check(f"{DRV}: set up two namespaces, a veth, {DEV_A} and {DEV_B}", not err, err)
    text = module_text() if not err else None
    have = (all(os.path.exists(f"{DEBUGFS}/{n}/require-start") for n in FAULTS)
            and os.path.exists("/proc/self/make-it-fail"))
    RES.check(f"{DRV}: the kernel fails allocations on demand under the driver's text",
              text is not None and have,
              f"text {text and [hex(x) for x in text]}; failslab and fail_page_alloc with the "
              f"stack-trace filter {'in' if have else 'not in'} debugfs")
    if err or text is None or not have:
        teardown()
        return RES.report()
    import pyverbs.enums as e

    saved = faults_save()
    before = resources()
    a = b = None
    try:
        faults_setup(text)
        a, b = End(DEV_A, IP_A), End(DEV_B, IP_B)
        nth = FailNth()
        verb_sweeps(nth, a, b)
        doorbell_without_memory(a, b, e.IBV_QPT_UC, "UC")
        doorbell_without_memory(a, b, e.IBV_QPT_RC, "RC")
        traffic_with_failures(a, b)
        if os.environ.get("FAILSLAB_RPING") == "1":
            rping_with_failures()
        ok, diag = rc_traffic(a, b)
        RES.check(f"{DRV}: the same traffic afterwards, nothing failing", ok, diag)
    except Exception as ex:  # a crash of the test is a failure, reported
        RES.check(f"{DRV}: the test ran to its end", False, repr(ex))
    finally:
        faults_restore(saved)
        close(a, b)
    after = resources()
    RES.check(f"{DRV}: the devices hold as many objects as before (rdma resource)",
              len(before) == 2 and after == before, f"before {before}, after {after}")
    bad = log_reports(mark)
    RES.check(f"{DRV}: no warning in the kernel log", not bad, "; ".join(bad[:5]))
    teardown()
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
