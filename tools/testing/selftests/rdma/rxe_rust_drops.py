#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Unwanted and malformed RoCEv2 datagrams from the wire, dropped with a reason.

Two network namespaces joined by a veth pair, an rdma_rxe_rust device on
each side. From B, a raw IPv4 socket sends datagrams to UDP 4791 of A: too
short for a BTH, a valid packet with a wrong ICRC, an opcode the driver does
not implement, and a valid packet (ICRC right) for a QP number that does not
exist, a valid packet sent to an address of A's loopback device, which
A takes in but which is none of its device's GIDs (those are the veth's), a
valid packet under an IPv4 header with options, and a valid packet for the
queue pair of an ibv_rc_pingpong server still in INIT (waiting for its
client). Each must be freed by the driver with its drop reason
(PKT_TOO_SMALL, SKB_CSUM, UNHANDLED_PROTO, NO_SOCKET, OTHERHOST,
UNHANDLED_PROTO, NOT_SPECIFIED), as the skb:kfree_skb tracepoint reports it
(reason, and a location in the module), once per datagram sent, and
counted once in the optional port counter of that reason (drop_truncated,
drop_icrc, drop_malformed, drop_no_qp, drop_not_ours, drop_network_header,
drop_qp_state, enabled with `rdma statistic
set ... optional-counters`), the drop counters together moving by
exactly what was sent; none may count as received (rcvd_pkts stays); and
afterwards ibv_rc_pingpong -c across still works.

The C driver frees such datagrams without a reason (NOT_SPECIFIED), so this
test runs against rdma_rxe_rust only.

Usage: rxe_rust_drops.py [--send CASE COUNT [QPN]]  (--send: the sender, run in B)
"""

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rxe_rust_capture import icrc  # noqa: E402
from rxe_rust_ktap import Results  # noqa: E402

DRV = "rdma_rxe_rust"
NS_A, NS_B = "rxe_drop_a", "rxe_drop_b"
VETH_A, VETH_B = "dA", "dB"
DEV_A, DEV_B = "rxdA", "rxdB"
IP_A, IP_B = "10.78.0.1", "10.78.0.2"
# An address of A's loopback device, routed from B through A: A takes datagrams to it in,
# but its RDMA device, on the veth, has no GID of it.
IP_A_LO = "10.79.0.1"
ROCE_PORT = 4791
TRACING = "/sys/kernel/tracing"
COUNT = 5
# A QP number no QP has: numbers are handed out from 16 upwards.
NO_QPN = 0xABCDE

RES = Results()


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


def ip_header(payload_len, ident, dst=IP_A):
    """An IPv4 header without options, DF set, from B to A (or to dst)."""
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + payload_len, ident,
                       0x4000, 64, socket.IPPROTO_UDP, 0,
                       socket.inet_aton(IP_B), socket.inet_aton(dst))


def bth(opcode, qpn, psn=0):
    """A BTH: no SE, no pad, transport version 0, the default P_Key."""
    return struct.pack("!BBHII", opcode, 0, 0xFFFF, qpn & 0xFFFFFF,
                       psn & 0xFFFFFF)


def datagram(case, ident, qpn=None):
    """The IP datagram of case number ident (qpn: the destination QP of case
    qpstate)."""
    if case == "short":
        packet = b"\x04\x00\xff\xff\x00\x00"
    elif case == "icrc":
        # RC SEND_ONLY, four bytes of payload, the ICRC off by one bit.
        body = bth(0x04, 17) + b"abcd"
        packet = None
    elif case == "opcode":
        # 0x1f: reserved in the RC range.
        body = bth(0x1F, 17) + b"abcd"
        packet = body + b"\0\0\0\0"
    elif case == "noqp":
        body = bth(0x04, NO_QPN) + b"abcd"
        packet = None
    elif case == "notours":
        body = bth(0x04, 17) + b"abcd"
        packet = None
    elif case == "ipopts":
        body = bth(0x04, 17) + b"abcd"
        packet = None
    elif case == "qpstate":
        body = bth(0x04, qpn) + b"abcd"
        packet = None
    else:
        raise ValueError(case)
    dst = IP_A_LO if case == "notours" else IP_A
    if packet is None:
        n = len(body) + 4
        ip = ip_header(n, ident, dst)
        udp = struct.pack("!HHHH", 0xC000 + ident, ROCE_PORT, 8 + n, 0)
        crc = bytearray(icrc(ip, udp, body))
        if case == "icrc":
            crc[0] ^= 1
        packet = body + bytes(crc)
    ip = ip_header(len(packet), ident, dst)
    udp = struct.pack("!HHHH", 0xC000 + ident, ROCE_PORT, 8 + len(packet), 0)
    if case == "ipopts":
        # One word of options (four NOPs): the ICRC has no rule for them.
        ip = bytearray(ip)
        ip[0] = 0x46
        struct.pack_into("!H", ip, 2, 24 + 8 + len(packet))
        ip = bytes(ip) + b"\x01\x01\x01\x01"
    return ip + udp + packet


def send(case, count, qpn=None):
    """Sends count datagrams of case from this namespace to A."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    dst = IP_A_LO if case == "notours" else IP_A
    for i in range(count):
        s.sendto(datagram(case, i + 1, qpn), (dst, 0))
    s.close()


def counter(dev, name):
    with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}") as f:
        return int(f.read())


# rdma_rxe_rust's optional counters of dropped datagrams, one per reason.
DROP_COUNTERS = ["drop_no_memory", "drop_network_header", "drop_udp_length",
                 "drop_truncated", "drop_malformed", "drop_icrc", "drop_not_ours",
                 "drop_no_qp", "drop_qp_gone", "drop_busy", "drop_qp_state",
                 "drop_purge", "drop_transport"]


def enable_drop_counters():
    """Shows A's optional drop counters; returns an error."""
    r = run("ip", "netns", "exec", NS_A, "rdma", "statistic", "set", "link",
            f"{DEV_A}/1", "optional-counters", ",".join(DROP_COUNTERS))
    return f"rdma statistic set: {r.stderr.strip()}" if r.returncode else ""


def drop_counters():
    """{name: value} of A's drop counters as `rdma statistic show` gives them."""
    r = run("ip", "netns", "exec", NS_A, "rdma", "-j", "statistic", "show",
            "link", f"{DEV_A}/1")
    try:
        entry = json.loads(r.stdout)[0]
    except (ValueError, IndexError):
        return {}
    return {k: v for k, v in entry.items() if k in DROP_COUNTERS}


def trace_write(path, value):
    with open(os.path.join(TRACING, path), "w") as f:
        f.write(value)


def trace_read():
    with open(os.path.join(TRACING, "trace")) as f:
        return f.read()


def tracing():
    """Mounts tracefs if needed and enables skb:kfree_skb; returns an error."""
    event = os.path.join(TRACING, "events/skb/kfree_skb/enable")
    if not os.path.exists(event):
        run("mount", "-t", "tracefs", "nodev", TRACING)
    if not os.path.exists(event):
        return f"no {event}: tracefs or the skb events missing"
    trace_write("events/skb/kfree_skb/enable", "1")
    return ""


def teardown():
    run("ip", "netns", "exec", NS_A, "rdma", "link", "del", DEV_A)
    run("ip", "netns", "exec", NS_B, "rdma", "link", "del", DEV_B)
    run("ip", "netns", "del", NS_A)
    run("ip", "netns", "del", NS_B)
    run("rmmod", DRV)


def setup():
    steps = [
        ["modprobe", DRV],
        ["ip", "netns", "add", NS_A],
        ["ip", "netns", "add", NS_B],
        ["ip", "link", "add", VETH_A, "netns", NS_A, "type", "veth", "peer",
         "name", VETH_B, "netns", NS_B],
        ["ip", "-n", NS_A, "addr", "add", IP_A + "/24", "dev", VETH_A],
        ["ip", "-n", NS_B, "addr", "add", IP_B + "/24", "dev", VETH_B],
        ["ip", "-n", NS_A, "link", "set", VETH_A, "up"],
        ["ip", "-n", NS_B, "link", "set", VETH_B, "up"],
        ["ip", "-n", NS_A, "addr", "add", IP_A_LO + "/32", "dev", "lo"],
        ["ip", "-n", NS_A, "link", "set", "lo", "up"],
        ["ip", "-n", NS_B, "route", "add", IP_A_LO + "/32", "via", IP_A],
        ["ip", "netns", "exec", NS_A, "rdma", "link", "add", DEV_A, "type",
         "rxe", "netdev", VETH_A],
        ["ip", "netns", "exec", NS_B, "rdma", "link", "add", DEV_B, "type",
         "rxe", "netdev", VETH_B],
        ["ip", "netns", "exec", NS_B, "ping", "-c", "1", "-W", "5", IP_A],
    ]
    for cmd in steps:
        r = run(*cmd)
        if r.returncode:
            return f"{' '.join(cmd)}: {r.stderr.strip()}"
    return ""


def gid_index(dev, ipv4):
    """The GID index of the RoCE v2 GID of an IPv4 address."""
    want = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(
        socket.inet_aton(ipv4))
    base = f"/sys/class/infiniband/{dev}/ports/1"
    for _ in range(40):
        for i in range(16):
            try:
                with open(f"{base}/gids/{i}") as f:
                    gid = f.read().strip()
                with open(f"{base}/gid_attrs/types/{i}") as f:
                    kind = f.read().strip()
            except OSError:
                continue
            if gid == want and kind == "RoCE v2":
                return i
        time.sleep(0.25)
    return None


def pingpong():
    """ibv_rc_pingpong -c from B to A; returns (ok, output)."""
    ga, gb = gid_index(DEV_A, IP_A), gid_index(DEV_B, IP_B)
    if ga is None or gb is None:
        return False, f"no RoCE v2 GID: {ga} {gb}"
    srv = subprocess.Popen(
        ["ip", "netns", "exec", NS_A, "timeout", "60", "ibv_rc_pingpong",
         "-d", DEV_A, "-g", str(ga), "-c", "-n", "20", "-p", "18700"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2)
    cli = run("ip", "netns", "exec", NS_B, "timeout", "60", "ibv_rc_pingpong",
              "-d", DEV_B, "-g", str(gb), "-c", "-n", "20", "-p", "18700",
              IP_A)
    out, _ = srv.communicate(timeout=90)
    ok = cli.returncode == 0 and srv.returncode == 0
    return ok, (cli.stdout + cli.stderr + out).strip().replace("\n", " | ")


CASES = [
    ("short", "PKT_TOO_SMALL", "shorter than a BTH", "drop_truncated"),
    ("icrc", "SKB_CSUM", "a wrong ICRC", "drop_icrc"),
    ("opcode", "UNHANDLED_PROTO", "a reserved opcode", "drop_malformed"),
    ("noqp", "NO_SOCKET", "a QP number no QP has", "drop_no_qp"),
    ("notours", "OTHERHOST", "a destination none of A's GIDs", "drop_not_ours"),
    ("ipopts", "UNHANDLED_PROTO", "IPv4 options", "drop_network_header"),
    ("qpstate", "NOT_SPECIFIED", "the QP number of a queue pair in INIT",
     "drop_qp_state"),
]


def init_qp():
    """Starts an ibv_rc_pingpong server in A, whose queue pair waits in INIT
    for its client; returns (process, its QP number) or (process, None)."""
    ga = gid_index(DEV_A, IP_A)
    # A session of its own: `timeout` cannot pass SIGKILL on to the program.
    srv = subprocess.Popen(
        ["ip", "netns", "exec", NS_A, "timeout", "120", "ibv_rc_pingpong",
         "-d", DEV_A, "-g", str(ga), "-p", "18702"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(40):
        time.sleep(0.25)
        r = run("ip", "netns", "exec", NS_A, "rdma", "-j", "resource", "show",
                "qp", "link", f"{DEV_A}/1")
        try:
            qps = [q for q in json.loads(r.stdout)
                   if q.get("type") == "RC" and q.get("state") == "INIT"]
        except ValueError:
            qps = []
        if qps:
            return srv, int(qps[0]["lqpn"])
    return srv, None


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) == 5 else None)
        return 0
    teardown()
    err = setup()
    RES.check(f"{DRV}: set up {NS_A}/{NS_B}, veth, {DEV_A} and {DEV_B}",
              not err, err)
    if err:
        for _, reason, what, name in CASES:
            RES.check(f"{DRV}: {COUNT} datagrams with {what} dropped as "
                      f"{reason}", False, "not run: the setup failed")
            RES.check(f"{DRV}: ... and counted in {name}", False, "not run")
        RES.check(f"{DRV}: the drop counters moved by what was sent", False,
                  "not run")
        RES.check(f"{DRV}: none counted as received", False, "not run")
        RES.check(f"{DRV}: ibv_rc_pingpong -c across afterwards", False,
                  "not run")
        teardown()
        return RES.report()

    rcvd = counter(DEV_A, "rcvd_pkts")
    cerr = enable_drop_counters()
    first = drop_counters()
    err = tracing()
    try:
        for case, reason, what, name in CASES:
            before = drop_counters()
            if err:
                RES.check(f"{DRV}: {COUNT} datagrams with {what} dropped as "
                          f"{reason}", False, err)
                RES.check(f"{DRV}: ... and counted in {name}", False, err)
                continue
            srv, qpn = init_qp() if case == "qpstate" else (None, None)
            try:
                if srv and qpn is None:
                    RES.check(f"{DRV}: {COUNT} datagrams with {what} dropped as "
                              f"{reason}", False, "no RC queue pair in INIT in A")
                    RES.check(f"{DRV}: ... and counted in {name}", False, "not run")
                    continue
                trace_write("trace", "")
                r = run("ip", "netns", "exec", NS_B, sys.executable,
                        os.path.abspath(__file__), "--send", case, str(COUNT),
                        *([str(qpn)] if qpn is not None else []))
                time.sleep(1)
            finally:
                if srv:
                    os.killpg(srv.pid, signal.SIGKILL)
                    srv.wait()
            lines = [ln for ln in trace_read().splitlines()
                     if "kfree_skb:" in ln]
            ours = [ln for ln in lines if f"reason: {reason}" in ln
                    and f"[{DRV}]" in ln]
            diag = (f"sender: {r.returncode} {r.stderr.strip()}; "
                    f"{len(ours)} {reason} of {len(lines)} drops traced")
            if ours:
                diag += "; e.g. " + ours[0].strip()
            RES.check(f"{DRV}: {COUNT} datagrams with {what} dropped as "
                      f"{reason}", r.returncode == 0 and len(ours) == COUNT,
                      diag)
            after = drop_counters()
            moved = {k: after[k] - before[k] for k in after
                     if k in before and after[k] != before[k]}
            RES.check(f"{DRV}: ... and counted in {name}",
                      not cerr and moved == {name: COUNT},
                      cerr or f"counters that moved: {moved}")
    finally:
        if not err:
            trace_write("events/skb/kfree_skb/enable", "0")
            trace_write("trace", "")
    last = drop_counters()
    total = sum(last.get(k, 0) - first.get(k, 0) for k in DROP_COUNTERS)
    RES.check(f"{DRV}: the drop counters moved by what was sent",
              len(first) == len(last) == len(DROP_COUNTERS)
              and total == COUNT * len(CASES),
              f"{len(last)} of {len(DROP_COUNTERS)} shown; moved by {total}, "
              f"sent {COUNT * len(CASES)}")
    now = counter(DEV_A, "rcvd_pkts")
    RES.check(f"{DRV}: none counted as received", now == rcvd,
              f"{DEV_A} rcvd_pkts {rcvd} -> {now}")
    ok, out = pingpong()
    RES.check(f"{DRV}: ibv_rc_pingpong -c across afterwards", ok, out)
    teardown()
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
