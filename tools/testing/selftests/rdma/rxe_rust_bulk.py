#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Bulk RDMA WRITE then READ between two hosts, compared byte for byte.

The client fills a region of SIZE bytes with random data, RDMA WRITEs it
into the server's region in 1 MiB work requests (a few in flight), asks the
server whether its region now holds the same bytes (SHA-256 of each side),
then clears its own region, RDMA READs the server's back and compares it
with what it wrote, byte for byte. Work requests are 1 MiB (-c to change).
With -w PATH the client repeats that round, with new random bytes each time,
on the same queue pairs while PATH exists (once at least), so that they stay
in use for as long as a test needs. Both sides exit 0 only if every work
request completed with success and every comparison held.

Arguments in perftest's shape, so that a test can run it as it runs
ib_write_bw: rxe_rust_bulk.py [-s SIZE] [-c CHUNK] [-m MTU] [-w PATH] -p PORT
-d DEVICE -x GID_INDEX [SERVER_ADDRESS] (without an address it is the
server). Queue pair attributes and addresses go over TCP on PORT.
"""

import argparse
import hashlib
import json
import os
import socket
import sys
import time

from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
import pyverbs.enums as e

from rxe_rust_traffic import rc_connect

DEPTH = 8
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)
# Seconds one work request may take before the run is declared stuck.
WR_TIMEOUT = 120
# Path MTUs (-m), in bytes.
MTUS = {256: e.IBV_MTU_256, 512: e.IBV_MTU_512, 1024: e.IBV_MTU_1024,
        2048: e.IBV_MTU_2048, 4096: e.IBV_MTU_4096}


def say(msg):
    print(msg, flush=True)


class Link:
    """JSON lines over one TCP connection."""

    def __init__(self, sock):
        self.sock = sock
        self.rfile = sock.makefile("r")

    def send(self, **msg):
        self.sock.sendall((json.dumps(msg) + "\n").encode())

    def recv(self):
        line = self.rfile.readline()
        if not line:
            raise ConnectionError("the peer closed the connection")
        return json.loads(line)


class End:
    def __init__(self, dev, gid_index, size, mtu):
        self.mtu = mtu
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 2 * DEPTH)
        self.mr = MR(self.pd, size, ACCESS)
        cap = QPCap(max_send_wr=2 * DEPTH, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)

    def info(self):
        return {"qpn": self.qp.qp_num, "gid": str(self.gid), "addr": self.mr.buf,
                "rkey": self.mr.rkey}

    def connect(self, peer):
        rc_connect(self.qp, peer["qpn"],
                   AHAttr(gr=GlobalRoute(dgid=GID(val=peer["gid"]), sgid_index=self.gid_index),
                          is_global=1, port_num=1),
                   access=ACCESS, path_mtu=self.mtu, rd_atomic=DEPTH)

    def transfer(self, opcode, peer, size, chunk):
        """Posts `size` bytes of `opcode` in work requests of `chunk` bytes, DEPTH at a
        time; returns None, or why it failed."""
        posted = done = 0
        chunks = (size + chunk - 1) // chunk
        deadline = time.time() + WR_TIMEOUT
        while done < chunks:
            while posted < chunks and posted - done < DEPTH:
                off = posted * chunk
                n = min(chunk, size - off)
                wr = SendWR(wr_id=posted, opcode=opcode, num_sge=1,
                            sg=[SGE(self.mr.buf + off, n, self.mr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(peer["rkey"], peer["addr"] + off)
                self.qp.post_send(wr)
                posted += 1
            k, wcs = self.cq.poll(DEPTH)
            for wc in wcs:
                if wc.status != e.IBV_WC_SUCCESS:
                    return f"work request {wc.wr_id} completed with status {wc.status}"
                done += 1
                deadline = time.time() + WR_TIMEOUT
            if not k:
                if time.time() > deadline:
                    return f"no completion in {WR_TIMEOUT} s ({done} of {chunks} done)"
                time.sleep(0.001)
        return None


def first_difference(a, b):
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi if len(a) != len(b) else None
    # Halve the range that differs.
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] != b[lo:mid]:
            hi = mid
        else:
            lo = mid
    return lo


def server(args):
    end = End(args.d, args.x, args.s, MTUS[args.m])
    lsock = socket.create_server(("", args.p), family=socket.AF_INET)
    sock, _ = lsock.accept()
    link = Link(sock)
    peer = link.recv()
    link.send(**end.info())
    end.connect(peer)
    link.send(ready=True)
    rounds = 0
    while True:
        msg = link.recv()
        if "written" not in msg:
            say(f"server: round {rounds + 1}: the client's WRITE failed: {msg}")
            return 1
        mine = hashlib.sha256(end.mr.read(args.s, 0)).hexdigest()
        same = mine == msg["written"]
        link.send(same=same)
        rounds += 1
        if not same:
            say(f"server: round {rounds}: {args.s} bytes written into this region: "
                "DIFFERENT bytes from the client's")
        result = link.recv()
        if not same or not result.get("ok"):
            say(f"server: round {rounds}: the client reports: {result}")
            return 1
        if not result.get("again"):
            say(f"server: {rounds} round(s) of {args.s} bytes written into this region: "
                "the same bytes as the client's")
            return 0


def client(args):
    end = End(args.d, args.x, args.s, MTUS[args.m])
    sock = socket.create_connection((args.server, args.p), timeout=WR_TIMEOUT)
    link = Link(sock)
    link.send(**end.info())
    peer = link.recv()
    end.connect(peer)
    link.recv()
    rounds = 0
    while True:
        rounds += 1
        why = one_round(end, link, peer, args, rounds)
        if why:
            say(f"client: round {rounds}: {why}")
            return 1
        again = args.w is not None and os.path.exists(args.w)
        link.send(ok=True, again=again)
        if not again:
            break
    say(f"client: {rounds} round(s): every READ gave back the bytes written")
    return 0


def one_round(end, link, peer, args, n):
    """RDMA WRITEs new random bytes, has the server compare them, READs them back and
    compares; returns None, or why it failed (the server told)."""
    blob = os.urandom(args.s)
    end.mr.write(blob, args.s, 0)
    start = time.time()
    why = end.transfer(e.IBV_WR_RDMA_WRITE, peer, args.s, args.c)
    if why:
        link.send(failed=why)
        return f"RDMA WRITE failed: {why}"
    took = time.time() - start
    if n == 1:
        say(f"client: RDMA WRITE of {args.s} bytes in {took:.1f} s")
    link.send(written=hashlib.sha256(blob).hexdigest())
    if not link.recv()["same"]:
        link.send(ok=False, why="written bytes differ")
        return "the server's region does not hold the bytes written"
    end.mr.write(bytes(args.s), args.s, 0)
    start = time.time()
    why = end.transfer(e.IBV_WR_RDMA_READ, peer, args.s, args.c)
    if why:
        link.send(ok=False, why=why)
        return f"RDMA READ failed: {why}"
    took = time.time() - start
    at = first_difference(end.mr.read(args.s, 0), blob)
    if at is not None:
        link.send(ok=False, why=f"read back differs at {at}")
        return (f"RDMA READ of {args.s} bytes in {took:.1f} s: the bytes read back "
                f"differ from those written, first at offset {at}")
    if n == 1:
        say(f"client: RDMA READ of {args.s} bytes in {took:.1f} s, the same bytes as written")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-s", type=int, default=64 << 20, help="bytes (default 64 MiB)")
    ap.add_argument("-c", type=int, default=1 << 20, help="bytes per work request (1 MiB)")
    ap.add_argument("-m", type=int, default=1024, choices=sorted(MTUS),
                    help="path MTU in bytes (1024; both sides must agree)")
    ap.add_argument("-w", metavar="PATH",
                    help="client: repeat the round while PATH exists")
    ap.add_argument("-p", type=int, required=True, help="TCP port")
    ap.add_argument("-d", required=True, help="RDMA device")
    ap.add_argument("-x", type=int, required=True, help="GID index")
    ap.add_argument("server", nargs="?", help="the server's address (client only)")
    args = ap.parse_args()
    if args.s <= 0 or args.c <= 0:
        ap.error("-s and -c must be positive")
    return client(args) if args.server else server(args)


if __name__ == "__main__":
    sys.exit(main())
