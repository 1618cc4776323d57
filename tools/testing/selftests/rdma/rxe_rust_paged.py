#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Datagrams whose payload arrives in pages are received without being made linear.

Two network namespaces joined by a veth pair, as in rxe_rust_drops.py. In
A, a UD queue pair with receives posted and an RC queue pair (ready to
receive, PSN 0) with a region that grants remote write. From B, a UDP
socket sends RoCEv2 packets to A's port 4791 in two parts, the BTH and its
extended header first with MSG_MORE, then the payload and ICRC: the veth can
gather, so the second part goes into page fragments of the socket buffer,
and that is how the datagram reaches A's driver (as from a NIC that puts
payloads in pages).

Checked: each packet reaches its queue pair with fewer bytes in one piece
than it has (the linear field of rxe_rust:rxe_rust_recv), so its ICRC was
checked and its payload placed from the pages; the UD receives complete with
the payloads byte for byte (1,000 bytes, and 1,001 with three bytes of pad)
and the RDMA WRITE of 1,024 bytes lands byte for byte; a packet whose
payload B splices in from a file (sendfile: pages the sender may still
write) is made linear before its ICRC is checked, and lands byte for byte;
a packet whose payload has one bit flipped in a fragment is dropped,
counted in drop_icrc, and completes nothing.

Usage: rxe_rust_paged.py [--receive | --send CUT:HEX... | --splice HEAD PAYLOAD]
(--receive runs in A, --send and --splice in B: each HEX is a UDP payload to
send in two parts, cut after CUT bytes; --splice sends one with its payload
spliced from a file.)
"""

import os
import random
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_capture import icrc  # noqa: E402
from rxe_rust_drops import (  # noqa: E402
    DEV_A, IP_A, IP_B, NS_A, NS_B, ROCE_PORT, VETH_B, bth, drop_counters,
    enable_drop_counters, gid_index, ip_header, setup, teardown, trace_read,
    trace_write)
from rxe_rust_ktap import Results  # noqa: E402

DRV = "rdma_rxe_rust"
QKEY = 0x11223344
GRH = 40
UD_SIZES = [1000, 1001]
WRITE_LEN = 1024
# The UD SEND_ONLY and RC RDMA_WRITE_ONLY opcodes, and their header lengths.
UD_SEND_ONLY, RC_WRITE_ONLY = 0x64, 0x0A
DETH_LEN, RETH_LEN = 8, 16
RECV_EVENT = "events/rxe_rust/rxe_rust_recv/enable"
TRACING = "/sys/kernel/tracing"
# B's UDP source port: the ICRC covers it, so B binds it.
SPORT = 49877
# Not named in every Python's socket module.
IP_MTU_DISCOVER, IP_PMTUDISC_DO, UDP_CORK = 10, 2, 1
ETH_P_ALL, ETH_P_IP = 0x0003, 0x0800
SPLICED = 900

RES = Results()


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def packet(head, payload, corrupt=False, ident=0, sport=SPORT):
    """The UDP payload of a RoCEv2 packet from B to A: headers, payload, pad
    and ICRC; with corrupt, one payload bit flipped after the ICRC was made.
    ident is the IP identification B's kernel will give it: 0 from an
    unconnected socket with DF set."""
    pad = -len(payload) % 4
    head = bytearray(head)
    head[1] |= pad << 4
    body = bytes(head) + payload + b"\0" * pad
    n = len(body) + 4
    ip = ip_header(n, ident)
    udp = struct.pack("!HHHH", sport, ROCE_PORT, 8 + n, 0)
    crc = icrc(ip, udp, body)
    if corrupt:
        body = bytearray(body)
        body[len(head) + len(payload) // 2] ^= 0x08
        body = bytes(body)
    return body + crc, len(head)


def send(hexes):
    """Sends each packet in two parts, cut after its headers (run in B)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    s.bind((IP_B, SPORT))
    for h in hexes:
        cut, data = h.split(":")
        data = bytes.fromhex(data)
        cut = int(cut)
        s.sendto(data[:cut], socket.MSG_MORE, (IP_A, ROCE_PORT))
        s.sendto(data[cut:], 0, (IP_A, ROCE_PORT))
    s.close()
    return 0


def next_ident(s, tap):
    """The IP identification the connected socket s gives its next datagram:
    one more than that of a probe it sends now (which A drops, too short),
    read from the packet socket tap on B's veth."""
    sport = s.getsockname()[1]
    s.send(b"probe")
    tap.settimeout(5)
    while True:
        ip, addr = tap.recvfrom(2048)
        if (addr[1] == ETH_P_IP and ip[9] == socket.IPPROTO_UDP
                and struct.unpack("!H", ip[20:22])[0] == sport):
            return (struct.unpack("!H", ip[4:6])[0] + 1) & 0xFFFF


def send_spliced(head, payload):
    """Sends one packet with its headers written and its payload spliced from
    a file (sendfile), corked into one datagram (run in B): its pages are the
    file's, shared with the sender (SKBFL_SHARED_FRAG)."""
    import tempfile
    # A packet socket sees what leaves only if it takes every protocol.
    tap = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    tap.bind((VETH_B, ETH_P_ALL))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    s.bind((IP_B, SPORT + 1))
    s.connect((IP_A, ROCE_PORT))
    data, cut = packet(head, payload, ident=next_ident(s, tap), sport=SPORT + 1)
    with tempfile.TemporaryFile() as f:
        f.write(data[cut:])
        f.flush()
        s.setsockopt(socket.IPPROTO_UDP, UDP_CORK, 1)
        s.send(data[:cut])
        os.sendfile(s.fileno(), f.fileno(), 0, len(data) - cut)
        s.setsockopt(socket.IPPROTO_UDP, UDP_CORK, 0)
    s.close()
    tap.close()
    return 0


def send_from_b(pkts):
    """Has B send pkts, (bytes, cut) each; returns the sender's result."""
    args = [f"{cut}:{data.hex()}" for data, cut in pkts]
    return run("ip", "netns", "exec", NS_B, sys.executable,
               os.path.abspath(__file__), "--send", *args, timeout=60)


def recv_events():
    """(len, linear) of each rxe_rust_recv traced for A's device."""
    out = []
    for ln in trace_read().splitlines():
        if "rxe_rust_recv:" not in ln:
            continue
        f = dict(kv.split("=", 1) for kv in ln.split("rxe_rust_recv:", 1)[1].split()
                 if "=" in kv)
        if "len" in f and "linear" in f:
            out.append((int(f["len"]), int(f["linear"])))
    return out


def rc_from_b(pd, cq, ga, access, max_recv_wr=1):
    """An RC queue pair of A ready to receive from B (RTR, PSN 0, path MTU
    1024, B's QP number 0x12) through A's GID index ga."""
    from pyverbs.addr import AHAttr, GID, GlobalRoute
    from pyverbs.qp import QP, QPCap, QPInitAttr
    import pyverbs.enums as e
    from rxe_rust_traffic import rc_connect

    rc = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=1, max_recv_wr=max_recv_wr)))
    b_gid = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(
        socket.inet_aton(IP_B))
    rc_connect(rc, 0x12, AHAttr(gr=GlobalRoute(dgid=GID(b_gid), sgid_index=ga),
                                is_global=1, port_num=1),
               rts=False, access=access)
    return rc


def a_side(res, cq_depth):
    """In A: the GID index of IP_A (a check in res), and a context, protection
    domain and completion queue of cq_depth on DEV_A; None without the GID."""
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.pd import PD

    ga = gid_index(DEV_A, IP_A)
    res.check(f"{DRV}: {DEV_A} has a RoCE v2 GID of {IP_A}", ga is not None, "")
    if ga is None:
        return None
    ctx = Context(name=DEV_A)
    return ga, ctx, PD(ctx), CQ(ctx, cq_depth)


def receive():
    """In A: the queue pairs, the packets from B, the checks."""
    from pyverbs.mr import MR
    from pyverbs.qp import QP, QPCap, QPInitAttr
    from pyverbs.wr import SGE, RecvWR
    import pyverbs.enums as e
    from rxe_rust_traffic import poll, ud_to_rts

    a = a_side(RES, 16)
    if a is None:
        return
    ga, ctx, pd, cq = a
    ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=1, max_recv_wr=8)))
    ud_to_rts(ud, QKEY)
    slot = GRH + max(UD_SIZES)
    rmr = MR(pd, slot * 8, e.IBV_ACCESS_LOCAL_WRITE)
    for i in range(8):
        ud.post_recv(RecvWR(wr_id=i, num_sge=1,
                            sg=[SGE(rmr.buf + i * slot, slot, rmr.lkey)]))

    access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    wmr = MR(pd, 2 * WRITE_LEN, access)
    wmr.write(b"\0" * 2 * WRITE_LEN, 2 * WRITE_LEN)
    rc = rc_from_b(pd, cq, ga, access)

    rng = random.Random(4791)
    payloads = [bytes(rng.randrange(256) for _ in range(n)) for n in UD_SIZES]
    deth = struct.pack("!II", QKEY, 0x12)
    ud_pkts = [packet(bth(UD_SEND_ONLY, ud.qp_num, i) + deth, p)
               for i, p in enumerate(payloads)]
    wdata = bytes(rng.randrange(256) for _ in range(WRITE_LEN))
    reth = struct.pack("!QII", wmr.buf + 512, wmr.rkey, WRITE_LEN)
    write_pkt = packet(bth(RC_WRITE_ONLY, rc.qp_num, 0) + reth, wdata)
    bad = packet(bth(UD_SEND_ONLY, ud.qp_num, 7) + deth, payloads[0], corrupt=True)

    cerr = enable_drop_counters()
    # `ip netns exec` mounted a sysfs of its own, without tracefs.
    if not os.path.exists(os.path.join(TRACING, RECV_EVENT)):
        run("mount", "-t", "tracefs", "nodev", TRACING)
    trace_write("trace", "")
    trace_write(RECV_EVENT, "1")
    try:
        r = send_from_b(ud_pkts + [write_pkt])
        wcs = poll(cq, len(ud_pkts), timeout=10)
        time.sleep(0.5)
        events = recv_events()
    finally:
        trace_write(RECV_EVENT, "0")
    RES.check(f"{DRV}: B sent {len(ud_pkts) + 1} datagrams in two parts",
              r.returncode == 0, r.stderr.strip())
    sizes = {len(d) for d, _ in ud_pkts + [write_pkt]}
    paged = [(n, lin) for n, lin in events if n in sizes and lin < n]
    RES.check(f"{DRV}: each reached its queue pair with its payload in pages "
              f"(linear bytes fewer than its length)",
              len(paged) == len(ud_pkts) + 1,
              f"rxe_rust_recv (len, linear): {events}")
    ok = len(wcs) == len(ud_pkts) and all(
        wc.status == e.IBV_WC_SUCCESS and wc.byte_len == GRH + len(payloads[wc.wr_id])
        for wc in wcs)
    got = [rmr.read(len(payloads[wc.wr_id]), wc.wr_id * slot + GRH) for wc in wcs]
    RES.check(f"{DRV}: the UD receives of {UD_SIZES} bytes hold the payloads "
              f"byte for byte", ok and got == [payloads[wc.wr_id] for wc in wcs],
              f"{[(wc.wr_id, wc.status, wc.byte_len) for wc in wcs]}")
    landed = wmr.read(WRITE_LEN, 512)
    untouched = wmr.read(512, 0) + wmr.read(512, 512 + WRITE_LEN)
    RES.check(f"{DRV}: the RDMA WRITE of {WRITE_LEN} bytes landed byte for byte",
              landed == wdata and untouched == b"\0" * 1024,
              f"{sum(a != b for a, b in zip(landed, wdata))} bytes differ")

    # Pages the sender spliced in may change while the datagram waits: read in
    # place, the bytes placed could differ from those the ICRC was checked
    # over. Such a datagram is made linear first.
    spliced = bytes(rng.randrange(256) for _ in range(SPLICED))
    head = bth(UD_SEND_ONLY, ud.qp_num, 9) + deth
    trace_write("trace", "")
    trace_write(RECV_EVENT, "1")
    try:
        r = run("ip", "netns", "exec", NS_B, sys.executable, os.path.abspath(__file__),
                "--splice", head.hex(), spliced.hex(), timeout=60)
        wcs = poll(cq, 1, timeout=10)
        time.sleep(0.5)
        events = recv_events()
    finally:
        trace_write(RECV_EVENT, "0")
    n = len(head) + SPLICED + 4
    ok = (r.returncode == 0 and len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS
          and rmr.read(SPLICED, wcs[0].wr_id * slot + GRH) == spliced)
    RES.check(f"{DRV}: a datagram whose payload B spliced in (sendfile) is made "
              f"linear before its ICRC is checked, and lands byte for byte",
              ok and (n, n) in events and not [ev for ev in events if ev[0] == n and ev[1] < n],
              f"sender: {r.returncode} {r.stderr.strip()[-300:]}; "
              f"completions {[(wc.wr_id, wc.status, wc.byte_len) for wc in wcs]}; "
              f"rxe_rust_recv (len, linear): {events}")

    before = drop_counters()
    r = send_from_b([bad])
    time.sleep(1)
    after = drop_counters()
    late = poll(cq, 1, timeout=1)
    moved = {k: after[k] - before[k] for k in after
             if k in before and after[k] != before[k]}
    RES.check(f"{DRV}: a bit flipped in a fragment fails the ICRC: counted in "
              f"drop_icrc, nothing completes",
              r.returncode == 0 and not cerr and moved == {"drop_icrc": 1} and not late,
              cerr or f"counters that moved: {moved}; completions: {len(late)}")


def checks_in_a(res, script, receive):
    """The main of a test whose checks run in A: with --receive, runs them
    (receive, reporting to res); otherwise sets up the namespaces, runs
    script --receive in A and tears down. Returns the exit status."""
    if len(sys.argv) > 1 and sys.argv[1] == "--receive":
        try:
            receive()
        except Exception as exc:  # a pyverbs error is a failed check, not a crash
            res.check(f"{DRV}: the receiving side ran", False, repr(exc))
        return res.report()
    teardown()
    err = setup()
    if err:
        res.check(f"{DRV}: set up the namespaces, veth and devices", False, err)
        teardown()
        return res.report()
    r = subprocess.run(["ip", "netns", "exec", NS_A, sys.executable,
                        os.path.abspath(script), "--receive"], timeout=300)
    teardown()
    return r.returncode


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--send":
        return send(sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "--splice":
        return send_spliced(bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]))
    return checks_in_a(RES, __file__, receive)


if __name__ == "__main__":
    sys.exit(main())
