#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A UD datagram between two hosts: the receiver's GRH slot holds its network header.

The server posts one receive of a 40-byte GRH slot and 8 bytes; the client
sends it one datagram of 8 bytes with traffic class TCLASS through an address
handle to the server's GID. The server checks that the receive completed with
IBV_WC_GRH and that the slot holds the datagram's IP header as it came off the
wire (rxe_rust_traffic.grh_wrong: addresses, lengths, protocol, traffic class),
and for IPv4 that its checksum holds. Both sides exit 0 only if it does.

Arguments in perftest's shape, so that a test can run it as it runs
ibv_ud_pingpong: rxe_rust_udgrh.py -p PORT -d DEVICE -g GID_INDEX
[SERVER_ADDRESS] (without an address it is the server). The queue pair
numbers and GIDs go over TCP on PORT.
"""

import argparse
import socket
import sys

from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
import pyverbs.enums as e

from rxe_rust_bulk import Link, say
from rxe_rust_traffic import grh_wrong, poll, ud_to_rts

QKEY = 0x44444444
TCLASS = 0x48
PAYLOAD = b"udgrh-ok"
SLOT = 40 + len(PAYLOAD)


def raw(gid):
    return bytes.fromhex(str(gid).replace(":", ""))


def ip_checksum_holds(ip):
    total = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, len(ip), 2))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return total == 0xffff


class End:
    def __init__(self, dev, gid_index):
        self.ctx = Context(name=dev)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 4)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq,
                                         cap=QPCap(max_send_wr=1, max_recv_wr=1)))
        ud_to_rts(self.qp, QKEY)
        self.mr = MR(self.pd, SLOT, e.IBV_ACCESS_LOCAL_WRITE)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)


def server(args):
    end = End(args.d, args.g)
    end.qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(end.mr.buf, SLOT, end.mr.lkey)]))
    lsock = socket.create_server(("", args.p), family=socket.AF_INET)
    sock, _ = lsock.accept()
    link = Link(sock)
    link.send(qpn=end.qp.qp_num, gid=str(end.gid))
    peer = link.recv()
    w = poll(end.cq, 1, timeout=10)
    why = None
    if len(w) != 1 or w[0].status != e.IBV_WC_SUCCESS:
        why = f"no datagram within 10 s: {[(x.status, x.wc_flags) for x in w]}"
    elif not w[0].wc_flags & e.IBV_WC_GRH:
        why = f"the receive has no IBV_WC_GRH (flags {w[0].wc_flags:#x})"
    else:
        slot = end.mr.read(SLOT, 0)
        grh, data = slot[:40], slot[40:]
        bad = grh_wrong(grh, raw(peer["gid"]), raw(end.gid), TCLASS, len(PAYLOAD))
        if bad == [] and grh[20] >> 4 == 4 and not ip_checksum_holds(grh[20:]):
            bad = ["IPv4 checksum"]
        if data != PAYLOAD:
            why = f"the payload is {data!r}, not {PAYLOAD!r}"
        elif bad:
            why = f"wrong in the GRH slot: {bad}; slot {grh.hex()}"
        else:
            say(f"server: GRH slot {grh.hex()}: the datagram's "
                f"{'IPv4' if grh[20] >> 4 == 4 else 'IPv6'} header from {peer['gid']}")
    link.send(ok=why is None)
    if why:
        say(f"server: {why}")
        return 1
    return 0


def client(args):
    end = End(args.d, args.g)
    sock = socket.create_connection((args.server, args.p), timeout=30)
    link = Link(sock)
    peer = link.recv()
    link.send(gid=str(end.gid))
    route = GlobalRoute(dgid=GID(val=peer["gid"]), sgid_index=end.gid_index,
                        traffic_class=TCLASS)
    ah = AH(end.pd, attr=AHAttr(gr=route, is_global=1, port_num=1))
    end.mr.write(PAYLOAD, len(PAYLOAD))
    wr = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(end.mr.buf, len(PAYLOAD), end.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_ud(ah, peer["qpn"], QKEY)
    end.qp.post_send(wr)
    w = poll(end.cq, 1, timeout=10)
    if len(w) != 1 or w[0].status != e.IBV_WC_SUCCESS:
        say(f"client: the send did not complete: {[x.status for x in w]}")
        return 1
    ok = link.recv().get("ok")
    say(f"client: the server {'found' if ok else 'did not find'} the GRH right")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-p", type=int, required=True, help="TCP port")
    ap.add_argument("-d", required=True, help="RDMA device")
    ap.add_argument("-g", type=int, required=True, help="GID index")
    ap.add_argument("server", nargs="?", help="the server's address (client only)")
    args = ap.parse_args()
    return client(args) if args.server else server(args)


if __name__ == "__main__":
    sys.exit(main())
