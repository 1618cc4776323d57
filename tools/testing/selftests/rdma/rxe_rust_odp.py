#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""On-demand paging, against both drivers.

Memory registered with IBV_ACCESS_ON_DEMAND is not pinned: the process keeps
its pages, the kernel may free them, and the device faults them in when it
needs them. Each check runs on rdma_rxe (C) and rdma_rxe_rust:

- Both report the same ODP capabilities (explicit ODP; RC send, receive,
  write, read, atomic, SRQ receive, flush, atomic write; UD send, receive,
  SRQ receive).
- Pages never touched (not present at registration): an RDMA WRITE into
  them, a SEND into a receive buffer over them, a SEND from them, an RDMA
  READ into them and from them, a fetch-and-add on them all complete with
  success, and the bytes (the added value, once) are where they belong.
- Invalidation: after madvise(MADV_DONTNEED) frees the region's pages, the
  process reads zeros; an RDMA WRITE then lands in the pages the process
  sees (not in the freed ones), and an RDMA READ returns what the process
  wrote after that.
- ibv_advise_mr (through the ioctl ABI: rdma-core 44's rxe provider has no
  advise_mr): registering an untouched ODP region faults no page in
  (mincore(2)); a synchronous PREFETCH_WRITE faults every page in, a
  PREFETCH_NO_FAULT none, an asynchronous PREFETCH every page soon; a key that names no region gets EINVAL, an unknown advice
  EOPNOTSUPP, and a region that is not ODP EINVAL (rdma_rxe does not check).
- rdma_rxe_rust answers a request that meets a page not present with an RNR
  NAK: its send_rnr_err counter moves.
- A page of the region the process unmapped cannot be faulted in: an RDMA
  WRITE to it completes with IBV_WC_REM_ACCESS_ERR, it does not wait for
  the page forever.

Only the capabilities are checked on rdma_rxe; its other outcomes are
listed as "#" lines. Its ODP copy in 7.2 (__rxe_odp_mr_copy) ignores the
offset in the page and does not move on in the packet: a transfer that is
not one aligned page lands at the start of each page, so most of these
checks fail there (found here, session 52).
KTAP output.
"""

import ctypes
import errno
import mmap
import os
import struct
import sys
import time

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.wr import SGE, RecvWR, SendWR
import pyverbs.enums as e

from rxe_rust_ktap import DEV, Results, on_device
from rxe_rust_traffic import ACCESS, Pair, counters, poll, send_wr

RES = Results()
RUST = "rdma_rxe_rust"


def check(desc, ok, diag=""):
    """A check of rdma_rxe_rust; for rdma_rxe, whose ODP copies are broken in 7.2 (see
    the module's text), the outcome is only noted."""
    if desc.startswith(RUST):
        RES.check(desc, ok, diag)
    else:
        RES.note(f"{'passes' if ok else 'FAILS'}: {desc}" + (f" ({diag})" if diag and not ok else ""))

PAGE = 4096
PAGES = 16
ODP = ACCESS | e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_REMOTE_ATOMIC

# enum ib_odp_general_cap_bits, enum ib_odp_transport_cap_bits
ODP_SUPPORT = 1
SEND, RECV, WRITE, READ, ATOMIC, SRQ_RECV, FLUSH, ATOMIC_WRITE = (
    1 << n for n in range(8))
RC_CAPS = SEND | RECV | WRITE | READ | ATOMIC | SRQ_RECV | FLUSH | ATOMIC_WRITE
UD_CAPS = SEND | RECV | SRQ_RECV


class Anon:
    """Anonymous private memory, untouched: no page is present until used."""

    def __init__(self, size):
        self.size = size
        self.map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.map))

    def read(self, length, offset=0):
        return self.map[offset:offset + length]

    def write(self, data, offset=0):
        self.map[offset:offset + len(data)] = data

    def drop_pages(self):
        self.map.madvise(mmap.MADV_DONTNEED)

    def resident(self):
        """How many of its pages are present (mincore(2))."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        vec = ctypes.create_string_buffer(self.size // PAGE)
        if libc.mincore(ctypes.c_void_p(self.addr), self.size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(b & 1 for b in vec.raw)


def statuses(cq, n):
    return [w.status for w in poll(cq, n)]


def connected(ctx):
    p = Pair(ctx)
    access = ACCESS | e.IBV_ACCESS_REMOTE_ATOMIC
    p.connect(p.a, p.b.qp_num, access=access)
    p.connect(p.b, p.a.qp_num, access=access)
    return p


def diff(got, want):
    """Where two byte strings first differ, for a diagnostic."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            zeros = got == bytes(len(got))
            return f"first difference at byte {i}: {g:#x} for {w:#x}; all zeros: {zeros}"
    return f"lengths {len(got)} and {len(want)}"


# The uverbs ioctl ABI (include/uapi/rdma/rdma_user_ioctl_cmds.h,
# ib_user_ioctl_cmds.h): UVERBS_METHOD_ADVISE_MR of UVERBS_OBJECT_MR. rdma-core
# 44's rxe provider has no ibv_advise_mr, so it is called here directly.
RDMA_VERBS_IOCTL = (3 << 30) | (24 << 16) | (0x1b << 8) | 1
OBJECT_MR, METHOD_ADVISE_MR = 7, 2
DRIVER_RXE = 14  # enum rdma_driver_id: the header must name the device's driver
ADVICE_PREFETCH, ADVICE_PREFETCH_WRITE, ADVICE_PREFETCH_NO_FAULT = 0, 1, 2
ADVISE_FLAG_FLUSH = 1


def advise_mr(ctx, pd, advice, flags, sges):
    """ibv_advise_mr through the ioctl ABI; returns 0 or the errno."""
    import fcntl
    sge_buf = ctypes.create_string_buffer(b"".join(
        struct.pack("=QII", addr, length, lkey) for addr, length, lkey in sges))
    attrs = [
        struct.pack("=HHHHQ", 0, 0, 0, 0, pd.handle),
        struct.pack("=HHHHQ", 1, 8, 0, 0, advice),
        struct.pack("=HHHHQ", 2, 4, 0, 0, flags),
        struct.pack("=HHHHQ", 3, 16 * len(sges), 0, 0, ctypes.addressof(sge_buf)),
    ]
    hdr = struct.pack("=HHHHQII", 24 + 16 * len(attrs), OBJECT_MR, METHOD_ADVISE_MR,
                      len(attrs), 0, DRIVER_RXE, 0)
    buf = bytearray(hdr + b"".join(attrs))
    try:
        fcntl.ioctl(ctx.cmd_fd, RDMA_VERBS_IOCTL, buf)
    except OSError as ex:
        return ex.errno
    return 0


def caps_scenario(drv, ctx):
    caps = ctx.query_device_ex().odp_caps
    got = (caps.general_caps, caps.rc_odp_caps, caps.ud_odp_caps, caps.uc_odp_caps)
    # Checked for both: the list is the C driver's (rxe_init_device_param).
    RES.check(f"{drv}: ODP capabilities (general, RC, UD, UC) are the C driver's",
              got == (ODP_SUPPORT, RC_CAPS, UD_CAPS, 0), f"{got}")


def untouched_scenario(drv, ctx):
    p = connected(ctx)
    src = p.mr(PAGES * PAGE)
    blob = os.urandom(PAGES * PAGE)
    src.write(blob, len(blob))

    # RDMA WRITE of four pages into untouched ODP memory.
    mem = Anon(PAGES * PAGE)
    odp = MR(p.pd, mem.size, ODP, address=mem.addr)
    before = counters().get("send_rnr_err", 0)
    p.a.post_send(send_wr(src, 4 * PAGE, e.IBV_WR_RDMA_WRITE, 1, mem.addr, odp.rkey))
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA WRITE into untouched ODP pages completes",
          got == [e.IBV_WC_SUCCESS], f"{got}")
    check(f"{drv}: and its bytes are in the process's pages",
          mem.read(4 * PAGE) == blob[:4 * PAGE], diff(mem.read(4 * PAGE), blob[:4 * PAGE]))
    if drv == "rdma_rxe_rust":
        after = counters().get("send_rnr_err", 0)
        check(f"{drv}: the responder answered the page fault with an RNR NAK",
              after > before, f"send_rnr_err {before} -> {after}")

    # SEND into a receive buffer over untouched pages, from untouched pages.
    rmem, smem = Anon(2 * PAGE), Anon(2 * PAGE)
    rmr = MR(p.pd, rmem.size, ODP, address=rmem.addr)
    smr = MR(p.pd, smem.size, ODP, address=smem.addr)
    p.b.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(rmem.addr, 2 * PAGE, rmr.lkey)]))
    wr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(smem.addr, 2 * PAGE, smr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    p.a.post_send(wr)
    got = sorted(statuses(p.cq, 2))
    check(f"{drv}: a SEND from untouched ODP pages into untouched ODP pages completes",
          got == [e.IBV_WC_SUCCESS] * 2, f"{got}")
    check(f"{drv}: and the receiver's pages hold the sender's (zeros)",
          rmem.read(2 * PAGE) == bytes(2 * PAGE))
    smem.write(blob[:2 * PAGE])
    p.b.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(rmem.addr, 2 * PAGE, rmr.lkey)]))
    p.a.post_send(wr)
    got = sorted(statuses(p.cq, 2))
    check(f"{drv}: a second SEND between the same ODP buffers completes",
          got == [e.IBV_WC_SUCCESS] * 2, f"{got}")
    check(f"{drv}: and carries what the sender's process wrote",
          rmem.read(2 * PAGE) == blob[:2 * PAGE], diff(rmem.read(2 * PAGE), blob[:2 * PAGE]))

    # RDMA READ from untouched ODP memory into untouched ODP memory.
    far, near = Anon(4 * PAGE), Anon(4 * PAGE)
    far_mr = MR(p.pd, far.size, ODP, address=far.addr)
    near_mr = MR(p.pd, near.size, ODP, address=near.addr)
    near.write(b"\xa5" * (4 * PAGE))
    near.drop_pages()
    far.write(blob[PAGE:3 * PAGE], PAGE)
    rd = SendWR(wr_id=10, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                sg=[SGE(near.addr, 4 * PAGE, near_mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    rd.set_wr_rdma(far_mr.rkey, far.addr)
    p.a.post_send(rd)
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA READ between ODP regions with pages not present completes",
          got == [e.IBV_WC_SUCCESS], f"{got}")
    want = bytes(PAGE) + blob[PAGE:3 * PAGE] + bytes(PAGE)
    check(f"{drv}: and reads what the remote process has", near.read(4 * PAGE) == want,
          diff(near.read(4 * PAGE), want))

    # Fetch-and-add on an untouched ODP page: applied once.
    amem = Anon(PAGE)
    amr = MR(p.pd, amem.size, ODP, address=amem.addr)
    res = p.mr(8)
    at = SendWR(wr_id=11, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                sg=[SGE(res.buf, 8, res.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    at.set_wr_atomic(rkey=amr.rkey, addr=amem.addr + 64, compare_add=5, swap=0)
    p.a.post_send(at)
    got = statuses(p.cq, 1)
    check(f"{drv}: a fetch-and-add on an untouched ODP page completes",
          got == [e.IBV_WC_SUCCESS], f"{got}")
    value = struct.unpack("=Q", amem.read(8, 64))[0]
    orig = struct.unpack("=Q", res.read(8, 0))[0]
    check(f"{drv}: the add was applied once, to zero", (value, orig) == (5, 0),
          f"value {value}, original {orig}")
    for o in (p.a, p.b, odp, rmr, smr, far_mr, near_mr, amr, res, src, p.cq):
        o.close()
    p.pd.close()


def invalidation_scenario(drv, ctx):
    p = connected(ctx)
    src = p.mr(PAGES * PAGE)
    mem = Anon(PAGES * PAGE)
    mem.write(b"\x11" * mem.size)
    odp = MR(p.pd, mem.size, ODP, address=mem.addr)
    first, second = os.urandom(mem.size), os.urandom(mem.size)

    src.write(first, mem.size)
    p.a.post_send(send_wr(src, mem.size, e.IBV_WR_RDMA_WRITE, 1, mem.addr, odp.rkey))
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA WRITE into a present ODP region completes",
          got == [e.IBV_WC_SUCCESS], f"{got}")
    check(f"{drv}: and lands in the process's pages", mem.read(mem.size) == first,
          diff(mem.read(mem.size), first))

    mem.drop_pages()
    check(f"{drv}: after MADV_DONTNEED the process reads zeros",
          mem.read(mem.size) == bytes(mem.size))
    src.write(second, mem.size)
    p.a.post_send(send_wr(src, mem.size, e.IBV_WR_RDMA_WRITE, 2, mem.addr, odp.rkey))
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA WRITE after the invalidation completes",
          got == [e.IBV_WC_SUCCESS], f"{got}")
    check(f"{drv}: and lands in the pages the process sees now",
          mem.read(mem.size) == second, diff(mem.read(mem.size), second))

    third = os.urandom(mem.size)
    mem.write(third)
    dst = p.mr(mem.size)
    rd = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                sg=[SGE(dst.buf, mem.size, dst.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    rd.set_wr_rdma(odp.rkey, mem.addr)
    p.a.post_send(rd)
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA READ of the region completes", got == [e.IBV_WC_SUCCESS], f"{got}")
    check(f"{drv}: and returns what the process wrote last",
          dst.read(mem.size, 0) == third, diff(dst.read(mem.size, 0), third))
    for o in (p.a, p.b, odp, src, dst, p.cq):
        o.close()
    p.pd.close()


def advise_scenario(drv, ctx):
    p = connected(ctx)
    mem = Anon(4 * PAGE)
    odp = MR(p.pd, mem.size, ODP, address=mem.addr)
    whole = [(mem.addr, mem.size, odp.lkey)]
    pages = mem.size // PAGE
    check(f"{drv}: registering an untouched ODP region faults no page in",
          mem.resident() == 0, f"{mem.resident()} of {pages} present")
    err = advise_mr(ctx, p.pd, ADVICE_PREFETCH_WRITE, ADVISE_FLAG_FLUSH, whole)
    check(f"{drv}: a synchronous PREFETCH_WRITE of an ODP region succeeds and faults "
          "every page in", err == 0 and mem.resident() == pages,
          f"errno {err}, {mem.resident()} of {pages} present")
    mem.drop_pages()
    err = advise_mr(ctx, p.pd, ADVICE_PREFETCH_NO_FAULT, ADVISE_FLAG_FLUSH, whole)
    check(f"{drv}: a PREFETCH_NO_FAULT of it, its pages dropped, succeeds and faults none in",
          err == 0 and mem.resident() == 0, f"errno {err}, {mem.resident()} of {pages} present")
    err = advise_mr(ctx, p.pd, ADVICE_PREFETCH, 0, whole)
    deadline = time.time() + 5
    while mem.resident() < pages and time.time() < deadline:
        time.sleep(0.01)
    check(f"{drv}: an asynchronous PREFETCH of it succeeds and its pages come in",
          err == 0 and mem.resident() == pages,
          f"errno {err}, {mem.resident()} of {pages} present after 5 s")
    err = advise_mr(ctx, p.pd, ADVICE_PREFETCH, ADVISE_FLAG_FLUSH,
                    [(mem.addr, mem.size, odp.lkey ^ 0x80)])
    check(f"{drv}: a prefetch with a key that names no region fails with EINVAL",
          err == errno.EINVAL, f"errno {err}")
    err = advise_mr(ctx, p.pd, 7, ADVISE_FLAG_FLUSH, whole)
    check(f"{drv}: an unknown advice fails with EOPNOTSUPP", err == errno.EOPNOTSUPP,
          f"errno {err}")
    pinned = p.mr(PAGE)
    if drv == "rdma_rxe_rust":
        err = advise_mr(ctx, p.pd, ADVICE_PREFETCH, ADVISE_FLAG_FLUSH,
                        [(pinned.buf, PAGE, pinned.lkey)])
        check(f"{drv}: a prefetch of a region that is not ODP fails with EINVAL",
              err == errno.EINVAL, f"errno {err}")
    else:
        RES.note(f"{drv} does not check that a prefetched region is ODP: not tried")
    for o in (p.a, p.b, odp, pinned, p.cq):
        o.close()
    p.pd.close()


def unmapped_scenario(drv, ctx):
    """A WRITE to a page of the region the process unmapped fails; it does not wait forever."""
    p = connected(ctx)
    src = p.mr(PAGE)
    mem = Anon(4 * PAGE)
    odp = MR(p.pd, mem.size, ODP, address=mem.addr)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    rc = libc.munmap(ctypes.c_void_p(mem.addr + 2 * PAGE), PAGE)
    check(f"{drv}: the process unmaps the third page of an ODP region", rc == 0,
          f"errno {ctypes.get_errno()}")
    p.a.post_send(send_wr(src, 64, e.IBV_WR_RDMA_WRITE, 1, mem.addr + 2 * PAGE, odp.rkey))
    got = statuses(p.cq, 1)
    check(f"{drv}: an RDMA WRITE to the unmapped page gets IBV_WC_REM_ACCESS_ERR",
          got == [e.IBV_WC_REM_ACCESS_ERR], f"{got}")
    for o in (p.a, p.b, odp, src, p.cq):
        o.close()
    p.pd.close()


def scenario(drv):
    ctx = Context(name=DEV)
    caps_scenario(drv, ctx)
    untouched_scenario(drv, ctx)
    invalidation_scenario(drv, ctx)
    advise_scenario(drv, ctx)
    unmapped_scenario(drv, ctx)
    ctx.close()


def main():
    for drv in ("rdma_rxe", "rdma_rxe_rust"):
        on_device(RES, drv, scenario)
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
