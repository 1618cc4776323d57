#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory region protection, against both drivers.

- An unprivileged user (uid 65534) maps a root-owned, mode 0444 file
  read-only and registers it with no access rights. A raw uverbs REREG_MR
  that adds local and remote write must fail with EACCES
  (ib_umem_check_rereg: the pages were pinned read-only), and an RDMA WRITE
  to the region must not change the file.
- rereg_user_mr with IB_MR_REREG_PD moves a region to another protection
  domain: a QP of the new domain may then use its R_Key, a QP of the old
  one gets IBV_WC_REM_ACCESS_ERR, and a QP of a third one that gathers
  from it with its L_Key gets IBV_WC_LOC_PROT_ERR (rdma_rxe_rust; rdma_rxe
  7.2 reports another error, a comment in the KTAP output).
- Memory windows bound by work requests (type 2): a WRITE through the
  window's R_Key lands in the window; the region cannot be deregistered
  while the window is bound (EINVAL); only the queue pair the window is
  bound to may be reached through it; a zero-based window is reached by
  offsets from its start. rdma_rxe_rust also refuses an access
  outside the window but inside its region (IBA o10-37.2), which rdma_rxe
  lets through (it checks only the region's range), and completes a bind to
  a region without IBV_ACCESS_MW_BIND with IBV_WC_MW_BIND_ERR, where
  rdma_rxe 7.2 reports the WQE as flushed.
- A zero-length RDMA WRITE or READ with an invalid R_Key: rdma_rxe_rust
  answers with a remote access error; rdma_rxe does not look at the key.
KTAP output.
"""

import ctypes
import errno
import json
import os
import resource
import struct
import sys

from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBindInfo
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, SendWR
import pyverbs.enums as e

from rxe_rust_ktap import DEV, Results, on_device
from rxe_rust_traffic import ACCESS, Pair, poll, send_wr

RES = Results()
check = RES.check

NOBODY = 65534
PAGE = 4096
# enum ib_uverbs_write_cmds, enum ib_mr_rereg_flags
CMD_REREG_MR = 11
REREG_PD = 1 << 1
REREG_ACCESS = 1 << 2


def raw_rereg(ctx, mr, flags, access=0, pd=None):
    """REREG_MR through the write() ABI; returns 0 or the errno."""
    resp = ctypes.create_string_buffer(8)
    cmd = struct.pack("=IHH", CMD_REREG_MR, 56 // 4, 8 // 4)
    cmd += struct.pack("=QIIQQQII", ctypes.addressof(resp), mr.handle, flags,
                       0, 0, 0, pd.handle if pd else 0, access)
    try:
        os.write(ctx.cmd_fd, cmd)
    except OSError as ex:
        return ex.errno
    return 0


def map_readonly(fd, length):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    import mmap
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    return addr


def unprivileged(path, out):
    """The child: as nobody, tries to make the device write into `path`."""
    res = {}
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    try:
        os.open(path, os.O_RDWR)
        res["can_open_rw"] = True
    except PermissionError:
        res["can_open_rw"] = False
    fd = os.open(path, os.O_RDONLY)
    addr = map_readonly(fd, PAGE)
    ctx = Context(name=DEV)
    p = Pair(ctx)
    ro = MR(p.pd, PAGE, 0, address=addr)
    res["rereg"] = raw_rereg(ctx, ro, REREG_ACCESS,
                             e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    src = MR(p.pd, PAGE, ACCESS)
    src.write(b"B" * PAGE, PAGE)
    p.a.post_send(send_wr(src, PAGE, e.IBV_WR_RDMA_WRITE, 1, addr, ro.rkey))
    w = poll(p.cq, 1)
    res["write"] = [x.status for x in w]
    os.write(out, json.dumps(res).encode())
    os._exit(0)


def readonly_scenario(drv):
    path = f"/tmp/rxe_rust_mr_ro.{os.getpid()}"
    with open(path, "wb") as f:
        f.write(b"A" * PAGE)
    os.chown(path, 0, 0)
    os.chmod(path, 0o444)
    nodes = [f"/dev/infiniband/{n}" for n in os.listdir("/dev/infiniband")
             if n.startswith("uverbs")]
    modes = {n: os.stat(n).st_mode & 0o777 for n in nodes}
    for n in nodes:
        os.chmod(n, 0o666)
    resource.setrlimit(resource.RLIMIT_MEMLOCK,
                       (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    r, w = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                unprivileged(path, w)
            except BaseException as ex:
                os.write(w, json.dumps({"error": repr(ex)}).encode())
            os._exit(1)
        os.close(w)
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
        os.waitpid(pid, 0)
    finally:
        os.close(r)
        for n, m in modes.items():
            os.chmod(n, m)
    res = json.loads(data or b"{}")
    with open(path, "rb") as f:
        after = f.read()
    os.unlink(path)
    check(f"{drv}: nobody ran the scenario to its end", "rereg" in res, f"{res}")
    check(f"{drv}: nobody cannot open the file for writing",
          res.get("can_open_rw") is False, f"{res}")
    check(f"{drv}: REREG_MR adding write to read-only pinned pages fails with EACCES",
          res.get("rereg") == errno.EACCES, f"{res}")
    check(f"{drv}: the RDMA WRITE to that region does not complete successfully",
          res.get("write") and e.IBV_WC_SUCCESS not in res["write"], f"{res}")
    check(f"{drv}: the file is unchanged", after == b"A" * PAGE,
          f"first bytes now {after[:16]!r}")


def pd_scenario(drv):
    ctx = Context(name=DEV)
    old, new = Pair(ctx), Pair(ctx)
    for p in (old, new):
        p.connect(p.a, p.b.qp_num)
        p.connect(p.b, p.a.qp_num)
    target = old.mr(PAGE)
    rc = raw_rereg(ctx, target, REREG_PD, pd=new.pd)
    check(f"{drv}: REREG_MR to another PD succeeds", rc == 0, f"errno {rc}")

    src = new.mr(PAGE)
    blob = os.urandom(PAGE)
    src.write(blob, PAGE)
    new.a.post_send(send_wr(src, PAGE, e.IBV_WR_RDMA_WRITE, 1, target.buf, target.rkey))
    w = poll(new.cq, 1)
    check(f"{drv}: a QP of the new PD writes with the region's R_Key",
          [x.status for x in w] == [e.IBV_WC_SUCCESS], f"{[x.status for x in w]}")
    check(f"{drv}: the bytes arrived", target.read(PAGE, 0) == blob)

    src_old = old.mr(PAGE)
    old.a.post_send(send_wr(src_old, PAGE, e.IBV_WR_RDMA_WRITE, 2, target.buf,
                            target.rkey))
    w = poll(old.cq, 1)
    check(f"{drv}: a QP of the old PD gets IBV_WC_REM_ACCESS_ERR",
          [x.status for x in w] == [e.IBV_WC_REM_ACCESS_ERR], f"{[x.status for x in w]}")

    # The L_Key too: a QP of a third PD may not gather from the region.
    third = Pair(ctx)
    third.connect(third.a, third.b.qp_num)
    third.connect(third.b, third.a.qp_num)
    sink = third.mr(PAGE)
    third.a.post_send(send_wr(target, PAGE, e.IBV_WR_RDMA_WRITE, 3, sink.buf, sink.rkey))
    w = poll(third.cq, 1)
    if drv == "rdma_rxe_rust":
        check(f"{drv}: a QP of another PD gathering with the region's L_Key gets "
              "IBV_WC_LOC_PROT_ERR", [x.status for x in w] == [e.IBV_WC_LOC_PROT_ERR],
              f"{[x.status for x in w]}")
    else:
        # rdma_rxe 7.2 does not report a local protection error: IBV_WC_REM_ACCESS_ERR (10)
        # in one run, IBV_WC_WR_FLUSH_ERR (5) in another.
        RES.note(f"{drv}: a QP of another PD gathering with the region's L_Key: status "
                 f"{[x.status for x in w]}")
    for o in (old.a, old.b, new.a, new.b, third.a, third.b, target, src, src_old, sink,
              old.cq, new.cq, third.cq):
        o.close()
    for p in (old, new, third):
        p.pd.close()
    ctx.close()


def bind(qp, mw, mr, addr, length, access):
    """Posts a signaled BIND_MW work request; returns it (its rkey is the new key)."""
    wr = SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW)
    wr.set_bind_wr(mw, MWBindInfo(mr, addr, length, access))
    qp.post_send(wr)
    return wr


def statuses(cq, n):
    return [(w.status, w.opcode) for w in poll(cq, n)]


def connected(ctx):
    p = Pair(ctx)
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    return p


def mw_scenario(drv):
    ctx = Context(name=DEV)
    remote = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
    bindable = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND

    # The window is the middle page of a three-page region, bound to b.
    p = connected(ctx)
    target = MR(p.pd, 3 * PAGE, bindable)
    target.write(bytes(3 * PAGE), 3 * PAGE)
    mw = MW(p.pd, e.IBV_MW_TYPE_2)
    wr = bind(p.b, mw, target, target.buf + PAGE, PAGE, remote)
    check(f"{drv}: a type 2 window bind completes as IBV_WC_BIND_MW",
          statuses(p.cq, 1) == [(e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW)])
    src = p.mr(PAGE)
    blob = os.urandom(PAGE)
    src.write(blob, PAGE)
    p.a.post_send(send_wr(src, PAGE, e.IBV_WR_RDMA_WRITE, 1, target.buf + PAGE, wr.rkey))
    check(f"{drv}: an RDMA WRITE through the window's R_Key completes",
          [s for s, _ in statuses(p.cq, 1)] == [e.IBV_WC_SUCCESS])
    check(f"{drv}: its bytes are in the window's page of the region",
          target.read(PAGE, PAGE) == blob and target.read(PAGE, 0) == bytes(PAGE))
    try:
        target.close()
        err = 0
    except PyverbsRDMAError as ex:
        err = ex.error_code
    check(f"{drv}: deregistering the region while the window is bound fails with EINVAL",
          err == errno.EINVAL, f"errno {err}")
    if drv == "rdma_rxe_rust":
        p.a.post_send(send_wr(src, 64, e.IBV_WR_RDMA_WRITE, 2, target.buf + 2 * PAGE,
                              wr.rkey))
        check(f"{drv}: a WRITE past the window, inside its region, gets "
              "IBV_WC_REM_ACCESS_ERR", [s for s, _ in statuses(p.cq, 1)] ==
              [e.IBV_WC_REM_ACCESS_ERR])
        check(f"{drv}: and leaves the region's last page alone",
              target.read(PAGE, 2 * PAGE) == bytes(PAGE))
    else:
        RES.note(f"{drv} lets a WRITE past the window, inside its region, through "
                 "(it checks the region's range only): not checked")
    mw.close()
    for o in (p.a, p.b, target, src):
        o.close()

    # A zero-based window over the second page: addresses are offsets into it.
    z = connected(ctx)
    target = MR(z.pd, 2 * PAGE, bindable)
    target.write(bytes(2 * PAGE), 2 * PAGE)
    mw = MW(z.pd, e.IBV_MW_TYPE_2)
    zero_based = getattr(e, "IBV_ACCESS_ZERO_BASED", 1 << 5)
    wr = bind(z.b, mw, target, target.buf + PAGE, PAGE, remote | zero_based)
    got = statuses(z.cq, 1)
    check(f"{drv}: a zero-based type 2 window bind completes",
          got == [(e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW)], f"(status, opcode): {got}")
    src = z.mr(PAGE)
    blob = os.urandom(64)
    src.write(blob, 64)
    z.a.post_send(send_wr(src, 64, e.IBV_WR_RDMA_WRITE, 4, 128, wr.rkey))
    got = statuses(z.cq, 1)
    check(f"{drv}: a WRITE to offset 128 of the zero-based window completes",
          [s for s, _ in got] == [e.IBV_WC_SUCCESS], f"(status, opcode): {got}")
    check(f"{drv}: and lands at byte 128 of the window's page",
          target.read(64, PAGE + 128) == blob and target.read(PAGE, 0) == bytes(PAGE))
    mw.close()
    for o in (z.a, z.b, target, src, z.cq):
        o.close()
    z.pd.close()

    # Bound to b, the window is not reached through a, the other end.
    q = connected(ctx)
    target = MR(q.pd, PAGE, bindable)
    mw = MW(q.pd, e.IBV_MW_TYPE_2)
    wr = bind(q.b, mw, target, target.buf, PAGE, remote)
    statuses(q.cq, 1)
    src = q.mr(PAGE)
    q.b.post_send(send_wr(src, 64, e.IBV_WR_RDMA_WRITE, 3, target.buf, wr.rkey))
    check(f"{drv}: a WRITE through a type 2 window to a queue pair it is not bound to "
          "gets IBV_WC_REM_ACCESS_ERR",
          [s for s, _ in statuses(q.cq, 1)] == [e.IBV_WC_REM_ACCESS_ERR])
    mw.close()
    for o in (q.a, q.b, target, src):
        o.close()

    # A region without IBV_ACCESS_MW_BIND.
    r = connected(ctx)
    plain = r.mr(PAGE)
    mw = MW(r.pd, e.IBV_MW_TYPE_2)
    bind(r.a, mw, plain, plain.buf, PAGE, remote)
    got = statuses(r.cq, 1)
    if drv == "rdma_rxe_rust":
        check(f"{drv}: a bind to a region without MW_BIND access gets IBV_WC_MW_BIND_ERR",
              got == [(e.IBV_WC_MW_BIND_ERR, e.IBV_WC_BIND_MW)], f"(status, opcode): {got}")
    else:
        # rdma_rxe 7.2 sets IBV_WC_MW_BIND_ERR on the WQE, but its error path
        # then completes it as flushed.
        RES.note(f"{drv} completes a bind refused for want of MW_BIND as (status, "
                 f"opcode) {got}: not checked")
    mw.close()
    for o in (r.a, r.b, plain, p.cq, q.cq, r.cq):
        o.close()
    for x in (p, q, r):
        x.pd.close()
    ctx.close()


def zero_length_scenario(drv):
    ctx = Context(name=DEV)
    for opcode, name in ((e.IBV_WR_RDMA_WRITE, "WRITE"), (e.IBV_WR_RDMA_READ, "READ")):
        p = connected(ctx)
        target = p.mr(PAGE)
        bogus = target.rkey ^ 0xff
        local = p.mr(PAGE)
        wr = SendWR(wr_id=5, opcode=opcode, num_sge=1, sg=[SGE(local.buf, 0, local.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(bogus, target.buf)
        p.a.post_send(wr)
        got = [s for s, _ in statuses(p.cq, 1)]
        if drv == "rdma_rxe_rust":
            check(f"{drv}: a zero-length RDMA {name} with an invalid R_Key gets "
                  "IBV_WC_REM_ACCESS_ERR", got == [e.IBV_WC_REM_ACCESS_ERR], f"{got}")
        else:
            RES.note(f"{drv} completes a zero-length RDMA {name} with an invalid R_Key "
                     f"with status {got} (it does not look at the key): not checked")
        for o in (p.a, p.b, target, local, p.cq, p.pd):
            o.close()
    ctx.close()


def scenario(drv):
    readonly_scenario(drv)
    pd_scenario(drv)
    mw_scenario(drv)
    zero_length_scenario(drv)


def main():
    for drv in ("rdma_rxe", "rdma_rxe_rust"):
        on_device(RES, drv, scenario)
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
