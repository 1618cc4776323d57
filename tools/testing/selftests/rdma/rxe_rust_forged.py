#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Requests forged in sequence: what the responder checks beyond the PSN.

Two network namespaces joined by a veth pair, as in rxe_rust_drops.py. In
A, an RC queue pair ready to receive (PSN 0, path MTU 1024) with two
receive WQEs and a region that grants remote write. From B, a UDP socket
sends it requests with the PSN it expects and a valid ICRC (the AckReq bit
set), and a packet socket on B's veth reads what A answers:

- a SEND of 1,100 bytes, past the path MTU: dropped by the transport,
  counted once in drop_transport (and in no other drop counter), traced as
  rxe_rust_drop with reason=transport and the queue pair's number; A
  answers nothing and nothing completes;
- then a SEND of 100 bytes at the same PSN 0: it completes byte for byte
  (the drop moved nothing), and A acknowledges PSN 0;
- then an RDMA WRITE at PSN 1 whose R_Key is one off the region's: A
  answers a NAK with the remote access error syndrome (0x62) for PSN 1, the
  region stays untouched, the queue pair goes to ERR and its other receive
  WQE completes with a flush error.

The fuzz tool sends such packets far ahead of the window, where the PSN
alone refuses them (rxe_rust_fuzz.c): this is where the other checks run.
The C driver has no drop tracepoint nor drop counters (and its length check
NAKs an oversized SEND rather than drop it), so this test runs against
rdma_rxe_rust only.

Usage: rxe_rust_forged.py [--receive | --exchange HEX...]
(--receive runs in A; --exchange in B: sends each UDP payload and prints,
as JSON, the RoCEv2 datagrams A sent back after each.)
"""

import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_drops import (  # noqa: E402
    IP_A, IP_B, NS_B, ROCE_PORT, VETH_B, drop_counters, enable_drop_counters,
    trace_read, trace_write)
from rxe_rust_ktap import Results  # noqa: E402
from rxe_rust_paged import (  # noqa: E402
    SPORT, TRACING, a_side, checks_in_a, packet, rc_from_b, run)

DRV = "rdma_rxe_rust"
# RC SEND_ONLY, RDMA_WRITE_ONLY and ACKNOWLEDGE.
RC_SEND_ONLY, RC_WRITE_ONLY, RC_ACK = 0x04, 0x0A, 0x11
OVERSIZE, SEND_LEN, WRITE_LEN = 1100, 100, 64
NAK_REMOTE_ACCESS = 0x62
DROP_EVENT = "events/rxe_rust/rxe_rust_drop/enable"
ETH_P_ALL, ETH_P_IP = 0x0003, 0x0800
# How long B waits for A's answers after each packet, in seconds.
ANSWER_WAIT = 1.5

RES = Results()


def request(opcode, qpn, psn):
    """A BTH with the AckReq bit: no SE, no pad, the default P_Key."""
    return struct.pack("!BBHII", opcode, 0, 0xFFFF, qpn & 0xFFFFFF,
                       (1 << 31) | (psn & 0xFFFFFF))


def exchange(hexes):
    """In B: sends each UDP payload to A's port 4791 and collects the RoCEv2
    datagrams A sends back meanwhile; prints them as JSON, a list per packet."""
    tap = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    tap.bind((VETH_B, ETH_P_ALL))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER: IP_PMTUDISC_DO
    s.bind((IP_B, SPORT))
    answers = []
    a = socket.inet_aton(IP_A)
    for h in hexes:
        s.sendto(bytes.fromhex(h), (IP_A, ROCE_PORT))
        got = []
        end = time.monotonic() + ANSWER_WAIT
        while (left := end - time.monotonic()) > 0:
            tap.settimeout(left)
            try:
                ip, addr = tap.recvfrom(4096)
            except socket.timeout:
                break
            if (addr[1] != ETH_P_IP or addr[2] == socket.PACKET_OUTGOING
                    or ip[9] != socket.IPPROTO_UDP or ip[12:16] != a):
                continue
            udp = ip[(ip[0] & 0xF) * 4:]
            if struct.unpack("!H", udp[2:4])[0] == ROCE_PORT:
                got.append(udp[8:].hex())
        answers.append(got)
    s.close()
    tap.close()
    print(json.dumps(answers))
    return 0


def answers_to(pkts):
    """Has B send pkts (from packet()) one by one; returns (error, answers)."""
    r = run("ip", "netns", "exec", NS_B, sys.executable, os.path.abspath(__file__),
            "--exchange", *[data.hex() for data, _ in pkts], timeout=60)
    try:
        return "", [[bytes.fromhex(h) for h in got] for got in json.loads(r.stdout)]
    except ValueError:
        return f"sender: {r.returncode} {r.stderr.strip()[-300:]}", [[] for _ in pkts]


def acknowledgement(data):
    """(opcode, PSN, AETH syndrome) of a RoCEv2 packet, or None if too short."""
    if len(data) < 16:
        return None
    return data[0], struct.unpack("!I", data[8:12])[0] & 0xFFFFFF, data[12]


def drop_events():
    """The rxe_rust_drop events traced, as dicts of their fields."""
    out = []
    for ln in trace_read().splitlines():
        if "rxe_rust_drop:" in ln:
            out.append(dict(kv.split("=", 1) for kv in
                            ln.split("rxe_rust_drop:", 1)[1].split() if "=" in kv))
    return out


def receive():
    """In A: the queue pair, the packets from B, the checks."""
    import random
    from pyverbs.mr import MR
    from pyverbs.wr import SGE, RecvWR
    import pyverbs.enums as e
    from rxe_rust_traffic import poll

    a = a_side(RES, 8)
    if a is None:
        return
    ga, ctx, pd, cq = a
    access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    mr = MR(pd, 4096, access)
    mr.write(b"\0" * 4096, 4096)
    rc = rc_from_b(pd, cq, ga, access, max_recv_wr=2)
    for i in range(2):
        rc.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * 2048, 2048, mr.lkey)]))

    rng = random.Random(4792)
    big = bytes(rng.randrange(256) for _ in range(OVERSIZE))
    small = bytes(rng.randrange(256) for _ in range(SEND_LEN))
    wdata = bytes(rng.randrange(256) for _ in range(WRITE_LEN))
    bad_rkey = mr.rkey ^ 1
    reth = struct.pack("!QII", mr.buf + 1024, bad_rkey, WRITE_LEN)

    cerr = enable_drop_counters()
    if not os.path.exists(os.path.join(TRACING, DROP_EVENT)):
        run("mount", "-t", "tracefs", "nodev", TRACING)
    trace_write("trace", "")
    trace_write(DROP_EVENT, "1")
    try:
        before = drop_counters()
        err, ans = answers_to([packet(request(RC_SEND_ONLY, rc.qp_num, 0), big)])
        after = drop_counters()
        early = poll(cq, 1, timeout=0.5)
        events = drop_events()
    finally:
        trace_write(DROP_EVENT, "0")
    moved = {k: after[k] - before[k] for k in after
             if k in before and after[k] != before[k]}
    ours = [ev for ev in events if ev.get("reason") == "transport"
            and ev.get("qpn") == str(rc.qp_num)]
    RES.check(f"{DRV}: a SEND of {OVERSIZE} bytes (path MTU 1024) at the expected PSN is "
              f"dropped: drop_transport +1, traced with reason=transport, no answer, "
              f"nothing completes",
              not err and not cerr and moved == {"drop_transport": 1} and len(ours) == 1
              and len(events) == 1 and ans == [[]] and not early,
              err or cerr or f"counters that moved: {moved}; drop events: {events}; "
              f"answers: {[[a.hex() for a in got] for got in ans]}; completions: "
              f"{[(wc.wr_id, wc.status) for wc in early]}")

    err, ans = answers_to([packet(request(RC_SEND_ONLY, rc.qp_num, 0), small)])
    wcs = poll(cq, 1, timeout=5)
    acks = [acknowledgement(a) for a in ans[0]]
    ok = (len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS and wcs[0].wr_id == 0
          and wcs[0].byte_len == SEND_LEN and mr.read(SEND_LEN, 0) == small)
    RES.check(f"{DRV}: then a SEND of {SEND_LEN} bytes at the same PSN completes byte "
              f"for byte, and A acknowledges PSN 0",
              not err and ok and len(acks) == 1 and acks[0] is not None
              and acks[0][:2] == (RC_ACK, 0) and acks[0][2] >> 5 == 0,
              err or f"completions: {[(wc.wr_id, wc.status, wc.byte_len) for wc in wcs]}; "
              f"answers (opcode, PSN, syndrome): {acks}")

    err, ans = answers_to([packet(request(RC_WRITE_ONLY, rc.qp_num, 1) + reth, wdata)])
    flushed = poll(cq, 1, timeout=5)
    acks = [acknowledgement(a) for a in ans[0]]
    state = rc.query(e.IBV_QP_STATE)[0].qp_state
    untouched = mr.read(4096 - SEND_LEN, SEND_LEN) == b"\0" * (4096 - SEND_LEN)
    RES.check(f"{DRV}: an RDMA WRITE at PSN 1 with a wrong R_Key gets a NAK, remote "
              f"access error (0x62), for PSN 1; the region is untouched",
              not err and acks == [(RC_ACK, 1, NAK_REMOTE_ACCESS)] and untouched,
              err or f"answers (opcode, PSN, syndrome): {acks}; region untouched: "
              f"{untouched}")
    RES.check(f"{DRV}: the queue pair is then in ERR and its other receive WQE "
              f"completes with a flush error",
              state == e.IBV_QPS_ERR and len(flushed) == 1 and flushed[0].wr_id == 1
              and flushed[0].status == e.IBV_WC_WR_FLUSH_ERR,
              f"state {state}; completions {[(wc.wr_id, wc.status) for wc in flushed]}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--exchange":
        return exchange(sys.argv[2:])
    return checks_in_a(RES, __file__, receive)


if __name__ == "__main__":
    sys.exit(main())
