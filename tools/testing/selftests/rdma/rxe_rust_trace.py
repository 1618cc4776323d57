#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The driver's tracepoints (events/rxe_rust in tracefs) on real traffic.

Two network namespaces joined by a veth pair, an rdma_rxe_rust device on
each side (the setup of rxe_rust_drops.py), every rxe_rust event enabled:
- malformed and unwanted datagrams sent to A each give one rxe_rust_drop
  event on A with the reason (truncated, icrc, malformed, no_qp, not_ours)
  and, when it could be read, the destination QP number;
- ibv_rc_pingpong -c across: every SEND that B's rxe_rust_xmit reports
  reaches A's rxe_rust_recv with the same PSN and A's QP number, A reports
  one successful receive completion (rxe_rust_complete) per message with
  the message's length, and the SENDs' PSNs are consecutive;
- ib_send_bw of messages of four packets over a lossy wire (netem on the
  sender's side): rxe_rust_retransmit events, those of the transport
  retries (cause nak, timeout or reorder) as many as the
  completer_retry_err counters moved, at least one, the rest tail probes,
  as many as the optional counter tail_probe moved;
- a SEND to a queue pair of A with no receive buffer yet (two QPs of A,
  loopback): A's rxe_rust_rnr_nak events, sent and received, match the
  send_rnr_err and rcvd_rnr_err counters and name the SEND's PSN, and each
  RNR NAK received is followed by a retransmission (cause rnr) of it;
- the same events through perf: `perf record -e rxe_rust:rxe_rust_complete`
  during ibv_rc_pingpong -c, then `perf script`, shows A's receive
  completions, one per message.

The C driver has no tracepoints: this test runs against rdma_rxe_rust only.

Usage: rxe_rust_trace.py [--rnr DEV GID_INDEX]  (--rnr: the RNR traffic,
run in A's namespace)
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rxe_rust_drops as net  # noqa: E402
from rxe_rust_ktap import Results  # noqa: E402

DRV = net.DRV
EVENTS = "events/rxe_rust/enable"
MSG = 1000
ITERS = 20
RES = Results()
EVENT_RE = re.compile(r"\s(rxe_rust_\w+): (.*)$")


def events():
    """The rxe_rust events in the trace buffer: a list of (name, fields)."""
    out = []
    for line in net.trace_read().splitlines():
        m = EVENT_RE.search(line)
        if m:
            out.append((m.group(1), dict(re.findall(r"(\w+)=(\S+)",
                                                    m.group(2)))))
    return out


def dev_index(ns, dev):
    r = net.run("ip", "netns", "exec", ns, "rdma", "-j", "dev", "show", dev)
    try:
        return str(json.loads(r.stdout)[0]["ifindex"])
    except (ValueError, LookupError):
        return None


def counters(dev):
    return {n: net.counter(dev, n) for n in
            ("completer_retry_err", "send_rnr_err", "rcvd_rnr_err")}


def tail_probes():
    """The sum of both devices' optional counter tail_probe (shown here), or None."""
    total = 0
    for ns, dev in ((net.NS_A, net.DEV_A), (net.NS_B, net.DEV_B)):
        net.run("ip", "netns", "exec", ns, "rdma", "statistic", "set", "link", f"{dev}/1",
                "optional-counters", "tail_probe")
        r = net.run("ip", "netns", "exec", ns, "rdma", "-j", "statistic", "show", "link",
                    f"{dev}/1")
        try:
            total += int(json.loads(r.stdout)[0]["tail_probe"])
        except (ValueError, IndexError, KeyError, TypeError):
            return None
    return total


def drops(idx_a):
    cases = [
        ("short", "truncated", None),
        ("icrc", "icrc", None),
        ("opcode", "malformed", None),
        ("noqp", "no_qp", str(net.NO_QPN)),
        ("notours", "not_ours", None),
        ("ipopts", "network_header", None),
    ]
    for case, reason, qpn in cases:
        net.trace_write("trace", "")
        r = net.run("ip", "netns", "exec", net.NS_B, sys.executable,
                    os.path.abspath(net.__file__), "--send", case,
                    str(net.COUNT))
        time.sleep(1)
        ev = [f for n, f in events() if n == "rxe_rust_drop"]
        ours = [f for f in ev if f.get("dev") == idx_a and
                f.get("reason") == reason and
                (qpn is None or f.get("qpn") == qpn)]
        RES.check(f"{DRV}: {net.COUNT} datagrams ({case}) give as many "
                  f"rxe_rust_drop events with reason={reason}",
                  r.returncode == 0 and len(ours) == net.COUNT == len(ev),
                  f"sender: {r.returncode} {r.stderr.strip()}; {len(ours)} "
                  f"of {len(ev)} drop events match; e.g. {ev[:1]}")


def across(prog, gid_opt, args):
    """prog from B (client) to A (server), each with its device and RoCE v2
    GID (gid_opt names it); returns (ok, output: the last lines of each)."""
    ga = net.gid_index(net.DEV_A, net.IP_A)
    gb = net.gid_index(net.DEV_B, net.IP_B)
    if ga is None or gb is None:
        return False, f"no RoCE v2 GID: {ga} {gb}"
    srv = subprocess.Popen(
        ["ip", "netns", "exec", net.NS_A, "timeout", "120", prog,
         "-d", net.DEV_A, gid_opt, str(ga)] + args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2)
    cli = net.run("ip", "netns", "exec", net.NS_B, "timeout", "120", prog,
                  "-d", net.DEV_B, gid_opt, str(gb), *args, net.IP_A)
    out, _ = srv.communicate(timeout=150)
    ok = cli.returncode == 0 and srv.returncode == 0
    lines = ((cli.stdout + cli.stderr).strip().splitlines()[-4:] +
             out.strip().splitlines()[-4:])
    return ok, " | ".join(lines)


def pingpong(iters, size=MSG):
    """ibv_rc_pingpong -c from B to A, size bytes; returns (ok, output)."""
    return across("ibv_rc_pingpong", "-g",
                  ["-c", "-n", str(iters), "-s", str(size), "-p", "18701"])


def traffic(idx_a, idx_b):
    net.trace_write("trace", "")
    ok, out = pingpong(ITERS)
    RES.check(f"{DRV}: ibv_rc_pingpong -c -s {MSG} across with tracing on",
              ok, out)
    ev = events()
    sent = [f for n, f in ev if n == "rxe_rust_xmit" and
            f.get("dev") == idx_b and f.get("opcode") == "RC_SEND_ONLY"]
    recvd = [f for n, f in ev if n == "rxe_rust_recv" and
             f.get("dev") == idx_a and f.get("opcode") == "RC_SEND_ONLY"]
    psns = {int(f["psn"]) for f in sent}
    first = int(sent[0]["psn"]) if sent else 0
    a_qpns = {f["qpn"] for f in recvd}
    RES.check(f"{DRV}: B's rxe_rust_xmit reports {ITERS} SENDs of "
              f"{MSG} bytes with consecutive PSNs",
              psns == {(first + i) % (1 << 24) for i in range(ITERS)} and
              all(f["len"] == str(12 + MSG + 4) for f in sent),
              f"{len(sent)} events, PSNs {sorted(psns)}; e.g. {sent[:1]}")
    RES.check(f"{DRV}: A's rxe_rust_recv reports each of them, for the QP "
              f"they were sent to",
              {int(f["psn"]) for f in recvd} == set(psns) and
              len(a_qpns) == 1 and
              {f["dest_qpn"] for f in sent} == a_qpns,
              f"recv PSNs {sorted({int(f['psn']) for f in recvd})}, "
              f"A's QPs {a_qpns}, sent to {({f['dest_qpn'] for f in sent})}")
    done = [f for n, f in ev if n == "rxe_rust_complete" and
            f.get("dev") == idx_a and f.get("recv") == "1"]
    good = [f for f in done if f.get("status") == "SUCCESS" and
            f.get("byte_len") == str(MSG) and f.get("qpn") in a_qpns]
    RES.check(f"{DRV}: A's rxe_rust_complete reports {ITERS} successful "
              f"receives of {MSG} bytes",
              len(good) == len(done) == ITERS,
              f"{len(good)} of {len(done)}; e.g. {done[:1]}")


def perf(idx_a):
    """rxe_rust_complete through perf: recorded system-wide while the pingpong
    runs, then listed by perf script."""
    desc = (f"{DRV}: perf record -e rxe_rust:rxe_rust_complete, perf script: A's "
            f"{ITERS} receive completions of {MSG} bytes")
    if not shutil.which("perf"):
        RES.check(desc, False, "perf is not installed (scripts/install-deps installs linux-perf)")
        return
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        rec = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "rxe_rust:rxe_rust_complete",
                                "-o", data], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        # perf has its events open once it has written the file's header.
        deadline = time.time() + 60
        while not os.path.exists(data) and time.time() < deadline and rec.poll() is None:
            time.sleep(0.2)
        time.sleep(1)
        ok, out = pingpong(ITERS)
        rec.send_signal(signal.SIGINT)
        try:
            rout, _ = rec.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            rec.kill()
            rout, _ = rec.communicate()
        script = net.run("perf", "script", "-i", data, timeout=300)
    done = [dict(re.findall(r"(\w+)=(\S+)", line.split("rxe_rust_complete:", 1)[1]))
            for line in script.stdout.splitlines() if "rxe_rust:rxe_rust_complete:" in line]
    ours = [f for f in done if f.get("dev") == idx_a and f.get("recv") == "1"]
    good = [f for f in ours if f.get("status") == "SUCCESS" and f.get("byte_len") == str(MSG)]
    # perf record writes its file on SIGINT, then dies of it as it would have.
    RES.check(desc, ok and rec.returncode in (0, -signal.SIGINT) and script.returncode == 0 and
              len(good) == len(ours) == ITERS,
              f"pingpong: {out}; perf record exit {rec.returncode}: {rout.strip()[-300:]}; "
              f"perf script exit {script.returncode}: {script.stderr.strip()[-300:]}; "
              f"{len(good)} of {len(ours)} of A's receive completions good, "
              f"{len(done)} events; e.g. {done[:1]}")


def send_bw(iters, size):
    """ib_send_bw from B to A, size bytes; returns (ok, output)."""
    return across("ib_send_bw", "-x",
                  ["-F", "-n", str(iters), "-s", str(size), "-p", "18702"])


def lossy(idx_a, idx_b):
    before = (counters(net.DEV_A), counters(net.DEV_B))
    probes_before = tail_probes()
    net.trace_write("trace", "")
    # ib_send_bw, not ibv_rc_pingpong: pingpong has no closing handshake, so
    # whichever side sends the last message may exit while the other still
    # retries a request whose acknowledgement was lost (retry counter
    # exceeded: seen in CI with the loss on either side). perftest's server
    # waits over its TCP connection until the client has its completions.
    # The loss is on the sender's side: its data packets are lost.
    r = net.run("ip", "netns", "exec", net.NS_B, "tc", "qdisc", "add", "dev",
                net.VETH_B, "root", "netem", "loss", "20%")
    try:
        # Four packets a message: a lost one before the last is NAKed.
        ok, out = send_bw(30, 4000)
    finally:
        net.run("ip", "netns", "exec", net.NS_B, "tc", "qdisc", "del", "dev",
                net.VETH_B, "root")
    after = (counters(net.DEV_A), counters(net.DEV_B))
    probes_after = tail_probes()
    moved = sum(a["completer_retry_err"] - b["completer_retry_err"]
                for a, b in zip(after, before))
    ev = [f for n, f in events() if n == "rxe_rust_retransmit" and
          f.get("dev") in (idx_a, idx_b)]
    retries = [f for f in ev if f.get("cause") in ("nak", "timeout",
                                                     "reorder")]
    probes = [f for f in ev if f.get("cause") == "tail_probe"]
    RES.check(f"{DRV}: ib_send_bw -s 4000 across 20% loss",
              r.returncode == 0 and ok, f"netem: {r.stderr.strip()}; {out}")
    RES.check(f"{DRV}: rxe_rust_retransmit reports the transport retries, as "
              f"many as counted (completer_retry_err, at least one), and "
              f"tail probes",
              moved >= 1 and len(retries) == moved and
              len(retries) + len(probes) == len(ev),
              f"{len(retries)} retries (counters moved by {moved}), "
              f"{len(probes)} tail probes, {len(ev)} events; e.g. {ev[:2]}")
    RES.check(f"{DRV}: the optional counter tail_probe moved by the tail probes reported",
              None not in (probes_before, probes_after) and
              probes_after - probes_before == len(probes),
              f"tail_probe {probes_before} -> {probes_after}, {len(probes)} events")


def rnr(idx_a):
    before = counters(net.DEV_A)
    net.trace_write("trace", "")
    ga = net.gid_index(net.DEV_A, net.IP_A)
    r = net.run("ip", "netns", "exec", net.NS_A, sys.executable,
                os.path.abspath(__file__), "--rnr", net.DEV_A, str(ga),
                timeout=120)
    after = counters(net.DEV_A)
    RES.check(f"{DRV}: a SEND before the receive buffer completes after the "
              f"RNR retry", r.returncode == 0,
              (r.stdout + r.stderr).strip().replace("\n", " | "))
    # Pair.connect starts both queue pairs at PSN 0: the SEND is the first.
    psn = "0"
    trace = events()
    ev = [f for n, f in trace if n == "rxe_rust_rnr_nak" and
          f.get("dev") == idx_a]
    resent = [f for n, f in trace if n == "rxe_rust_retransmit" and
              f.get("dev") == idx_a and f.get("cause") == "rnr"]
    sent = [f for f in ev if f.get("sent") == "1"]
    rcvd = [f for f in ev if f.get("sent") == "0"]
    ds = after["send_rnr_err"] - before["send_rnr_err"]
    dr = after["rcvd_rnr_err"] - before["rcvd_rnr_err"]
    RES.check(f"{DRV}: rxe_rust_rnr_nak reports each RNR NAK sent and "
              f"received, as counted, for the SEND's PSN",
              len(sent) == ds >= 1 and len(rcvd) == dr >= 1 and
              all(f.get("psn") == psn and f.get("timer") == "12"
                  for f in ev),
              f"sent {len(sent)} (send_rnr_err +{ds}), received {len(rcvd)} "
              f"(rcvd_rnr_err +{dr}), PSN {psn}; e.g. {ev[:1]}")
    # One resend per RNR wait: a NAK that comes during a wait (for a copy of
    # the SEND sent before the first NAK came) starts none.
    RES.check(f"{DRV}: rxe_rust_retransmit reports the SEND sent again "
              f"after RNR NAK timers",
              1 <= len(resent) <= len(rcvd) and
              all(f.get("psn") == psn for f in resent),
              f"{len(resent)} resent after {len(rcvd)} RNR NAKs; "
              f"e.g. {resent[:1]}")


def rnr_traffic(dev, gid_index):
    """Two QPs of dev: a SEND before the receive; prints its PSN as JSON."""
    import rxe_rust_traffic as t
    from pyverbs.device import Context
    from pyverbs.wr import SGE, RecvWR
    t.GID_INDEX = gid_index
    p = t.Pair(Context(name=dev))
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    src, dst = p.mr(4096), p.mr(4096)
    src.write(b"x" * 64, 64)
    p.a.post_send(t.send_wr(src, 64, wr_id=11))
    time.sleep(0.3)
    p.b.post_recv(RecvWR(wr_id=22, num_sge=1,
                         sg=[SGE(dst.buf, 4096, dst.lkey)]))
    wcs = t.poll(p.cq, 2)
    st = sorted((w.wr_id, w.status) for w in wcs)
    if st != [(11, 0), (22, 0)]:
        print(f"completions {st}", file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--rnr":
        return rnr_traffic(sys.argv[2], int(sys.argv[3]))
    net.teardown()
    err = net.setup()
    if not err:
        event = os.path.join(net.TRACING, EVENTS)
        if not os.path.exists(event):
            net.run("mount", "-t", "tracefs", "nodev", net.TRACING)
        if not os.path.exists(event):
            err = f"no {event}: tracefs or the rxe_rust events missing"
    RES.check(f"{DRV}: set up the veth, both devices and tracefs with the "
              f"rxe_rust events", not err, err)
    if err:
        net.teardown()
        return RES.report()
    idx_a = dev_index(net.NS_A, net.DEV_A)
    idx_b = dev_index(net.NS_B, net.DEV_B)
    # Room for every event of a scenario (the RNR one makes hundreds).
    net.trace_write("buffer_size_kb", "4096")
    net.trace_write(EVENTS, "1")
    try:
        drops(idx_a)
        traffic(idx_a, idx_b)
        lossy(idx_a, idx_b)
        rnr(idx_a)
        perf(idx_a)
    except Exception as ex:
        RES.check(f"{DRV}: the scenario ran to its end", False, repr(ex))
    finally:
        net.trace_write(EVENTS, "0")
        net.trace_write("trace", "")
        net.teardown()
    return RES.report()


if __name__ == "__main__":
    sys.exit(main())
