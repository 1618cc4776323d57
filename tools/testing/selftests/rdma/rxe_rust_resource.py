#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""`rdma resource show`: our objects listed with the C driver's details.

For each driver: a process creates a PD, a CQ, an MR, an SRQ and two RC
QPs of rxe0 (one on the SRQ) and connects the QPs to each other (RTS, with
set PSNs), then reads `rdma -j -dd resource show` for pd, cq, mr, srq and
qp. Each object of the process must be listed once, with what the process
knows about it: QP numbers, peer, type, state and PSNs; the CQ's size;
the MR's keys and length; the PD and CQ each object names; the use counts.
Then the details of both drivers must be the same, once the numbers that
differ between any two runs (object numbers, keys, process ids) are
replaced by what they name.

KTAP output.
"""

import json
import os
import subprocess
import sys

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_ktap import DEV, Results, on_device  # noqa: E402
from rxe_rust_traffic import rc_connect  # noqa: E402

GID_INDEX = 1
MR_LEN = 3 * 4096 + 100
CQE = 100
PSN_A, PSN_B = 0x123456, 0x654321
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)
RES = Results()
# Per driver: {kind: [normalised entries]}.
SEEN = {}


def show(kind):
    where = ["link", f"{DEV}/1"] if kind == "qp" else ["dev", DEV]
    r = subprocess.run(["rdma", "-j", "-dd", "resource", "show", kind] + where,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"rdma resource show {kind}: {r.stderr.strip()}")
    return [x for x in json.loads(r.stdout or "[]")
            if x.get("pid") == os.getpid()]


def connect(qp, gid, dest_qpn, sq_psn, rq_psn):
    rc_connect(qp, dest_qpn, AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=GID_INDEX),
                                    is_global=1, port_num=1),
               access=ACCESS, sq_psn=sq_psn, rq_psn=rq_psn)


def normalise(entry, names):
    """entry without the fields that differ from run to run: numbers that
    name an object become the object's role (names maps them)."""
    out = {}
    for k, v in entry.items():
        if k in ("ifindex", "pid", "comm", "ctxn"):
            continue
        if k in ("rkey", "lkey"):
            v = "key"
        elif isinstance(v, int) and (k, v) in names:
            v = names[(k, v)]
        elif isinstance(v, list):
            v = [names.get((k, int(x)), x) for x in v]
        out[k] = v
    return out


def scenario(drv):
    check = RES.check
    ctx = Context(name=DEV)
    gid = ctx.query_gid(1, GID_INDEX)
    pd = PD(ctx)
    cq = CQ(ctx, CQE)
    mr = MR(pd, MR_LEN, ACCESS)
    srq = SRQ(pd, SrqInitAttr(attr=SrqAttr(max_wr=16, max_sge=1)))
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    b = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq,
                          cap=QPCap(max_send_wr=8, max_send_sge=1)))
    connect(a, gid, b.qp_num, PSN_A, PSN_B)
    connect(b, gid, a.qp_num, PSN_B, PSN_A)

    pds, cqs, mrs = show("pd"), show("cq"), show("mr")
    srqs, qps = show("srq"), show("qp")
    raw = {"pd": pds, "cq": cqs, "mr": mrs, "srq": srqs, "qp": qps}
    check(f"{drv}: one PD, CQ, MR and SRQ and two QPs of the process listed",
          [len(pds), len(cqs), len(mrs), len(srqs), len(qps)] ==
          [1, 1, 1, 1, 2], json.dumps(raw))
    if not (pds and cqs and mrs and srqs and len(qps) == 2):
        return
    pdn, cqn = pds[0].get("pdn"), cqs[0].get("cqn")
    by_qpn = {q.get("lqpn"): q for q in qps}
    qa, qb = by_qpn.get(a.qp_num, {}), by_qpn.get(b.qp_num, {})
    check(f"{drv}: each QP with its number, peer, type, state, PSNs and PD",
          qa.get("rqpn") == b.qp_num and qb.get("rqpn") == a.qp_num and
          all(q.get("type") == "RC" and q.get("state") == "RTS" and
              q.get("pdn") == pdn for q in (qa, qb)) and
          (qa.get("sq-psn"), qa.get("rq-psn")) == (PSN_A, PSN_B) and
          (qb.get("sq-psn"), qb.get("rq-psn")) == (PSN_B, PSN_A),
          json.dumps(qps))
    m = mrs[0]
    check(f"{drv}: the MR with its keys, length and PD",
          (int(m.get("lkey", "-1"), 16), int(m.get("rkey", "-1"), 16),
           m.get("mrlen"), m.get("pdn")) == (mr.lkey, mr.rkey, MR_LEN, pdn),
          json.dumps(m))
    c = cqs[0]
    # rxe rounds a queue up to a power of two, less the slot kept empty.
    check(f"{drv}: the CQ with its size (100 asked, 127 given) and users "
          f"(two QPs, send and receive)",
          c.get("cqe") == 127 and c.get("users") == 4, json.dumps(c))
    s = srqs[0]
    check(f"{drv}: the SRQ with its PD and the QP on it",
          s.get("pdn") == pdn and str(b.qp_num) in str(s.get("lqpn")),
          json.dumps(s))
    p = pds[0]
    check(f"{drv}: the PD with its users (MR, SRQ, two QPs)",
          p.get("users") == 4, json.dumps(p))

    names = {("pdn", pdn): "pd", ("cqn", cqn): "cq",
             ("lqpn", a.qp_num): "qp a", ("lqpn", b.qp_num): "qp b",
             ("rqpn", a.qp_num): "qp a", ("rqpn", b.qp_num): "qp b",
             ("mrn", m.get("mrn")): "mr", ("srqn", s.get("srqn")): "srq"}
    SEEN[drv] = {k: sorted((normalise(x, names) for x in v),
                           key=lambda x: json.dumps(x, sort_keys=True))
                 for k, v in raw.items()}
    for o in (a, b, srq, mr, cq, pd, ctx):
        o.close()


def main():
    for drv in ("rdma_rxe", "rdma_rxe_rust"):
        on_device(RES, drv, scenario)
    c, r = SEEN.get("rdma_rxe"), SEEN.get("rdma_rxe_rust")
    for kind in ("pd", "cq", "mr", "srq", "qp"):
        RES.check(f"rdma resource show {kind}: the same details for both "
                  f"drivers",
                  c is not None and r is not None and c[kind] == r[kind],
                  f"rdma_rxe {json.dumps(c and c[kind])}; rdma_rxe_rust "
                  f"{json.dumps(r and r[kind])}")
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
