#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Interoperation between two hosts: one runs rdma_rxe_rust, the other the C
driver rdma_rxe, joined by a wire (scripts/interop boots two VMs whose eth1
are joined by a QEMU socket netdev).

rxe_rust_interop.py agent DRIVER ADDRESS
    Sets up DRIVER on eth1 with ADDRESS (/24), then runs the commands the
    controller sends over TCP (port AGENT_PORT) until it says quit.
rxe_rust_interop.py controller DRIVER ADDRESS PEER
    Sets up DRIVER on eth1 with ADDRESS, connects to the agent at PEER and
    runs each exchange twice, with the server on either side: the
    pingpongs with -c (RC, UC, UD), ib_{write,read,send,atomic}_bw, rping -V
    over rdma_cm, and NVMe over RDMA (the kernel's nvmet and nvme-rdma,
    rxe_rust_nvme_peer.sh: the target on one side, the host on the other).
    Prints KTAP; exits 0 only if every exchange passed.

Every run is bounded by RUN_TIMEOUT s; both sides' exit codes count.
"""

import os
import re
import socket
import subprocess
import sys
import time

from rxe_rust_bulk import Link
from rxe_rust_drops import gid_index

AGENT_PORT = 18700
FIRST_PORT = 18710
RUN_TIMEOUT = 120
NETDEV = "eth1"
DEV = "rxe0"
# Connect/disconnect cycles of the NVMe host after its data check.
NVME_CYCLES = 50


def say(msg):
    print(msg, flush=True)


def sh(cmd, timeout=60):
    """Runs cmd; returns (exit code, output)."""
    try:
        p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        return 124, out + f"\n(still running after {timeout} s: killed)"


def set_up(driver, address):
    """Brings eth1 up with address, loads driver, adds rxe0 on eth1; returns
    rxe0's GID index of that IPv4 address, or raises."""
    steps = [f"ip link set {NETDEV} up", f"ip addr add {address}/24 dev {NETDEV}",
             f"modprobe {driver}", f"rdma link add {DEV} type rxe netdev {NETDEV}"]
    for s in steps:
        rc, out = sh(s)
        if rc:
            raise RuntimeError(f"{s}: exit {rc}: {out}")
    gid = gid_index(DEV, address)
    if gid is None:
        raise RuntimeError(f"{DEV} has no RoCE v2 GID of {address}")
    return gid


class Side:
    """Runs commands here; the agent runs them there, through the same calls."""

    def __init__(self, name, gid, address, link=None):
        self.name, self.gid, self.address, self.link = name, gid, address, link
        self.procs = {}

    def start(self, key, cmd):
        if self.link:
            self.link.send(op="start", key=key, cmd=cmd)
            return self.link.recv()["ok"]
        self.procs[key] = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
        return True

    def wait(self, key, timeout):
        if self.link:
            self.link.send(op="wait", key=key, timeout=timeout)
            r = self.link.recv()
            return r["rc"], r["out"]
        p = self.procs.pop(key)
        try:
            out, _ = p.communicate(timeout=timeout)
            return p.returncode, out
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            return 124, out + f"\n(still running after {timeout} s: killed)"

    def run(self, cmd, timeout):
        self.start("run", cmd)
        return self.wait("run", timeout)


def listening(side, port, cm):
    """Whether side has a TCP (perftest's handshake) or rdma_cm listener on port."""
    if cm:
        cmd = ["sh", "-c", f"rdma resource show cm_id | grep -q 'state LISTEN .*:{port}\\b'"]
    else:
        cmd = ["sh", "-c", f"ss -Hltn 'sport = :{port}' | grep -q ."]
    return side.run(cmd, 30)[0] == 0


def exchange(server, client, port, prog, args, kind):
    """Runs prog as the server on one side and as the client on the other;
    returns None, or why it failed."""
    if kind == "rping":
        scmd = ["rping", "-s", "-v", "-a", server.address, "-p", str(port)] + args
        ccmd = ["rping", "-c", "-v", "-a", server.address, "-p", str(port)] + args
    else:
        gopt = "-g" if kind == "pingpong" else "-x"
        scmd = [prog, "-d", DEV, gopt, str(server.gid), "-p", str(port)] + args
        ccmd = [prog, "-d", DEV, gopt, str(client.gid), "-p", str(port)] + args + [
            server.address]
    if not server.start("server", scmd):
        return "the server did not start"
    deadline = time.time() + 30
    while not listening(server, port, kind == "rping"):
        if time.time() > deadline:
            rc, out = server.wait("server", 1)
            return f"the server is not listening after 30 s (exit {rc}): {out[-600:]}"
        time.sleep(0.3)
    crc, cout = client.run(ccmd, RUN_TIMEOUT)
    src, sout = server.wait("server", RUN_TIMEOUT if crc == 0 else 5)
    why = []
    if crc != 0 or src != 0:
        why.append(f"server ({server.name}) exit {src}, client ({client.name}) exit {crc}")
    if kind == "rping":
        # rping exits 0 without a peer too: the pings must show, none mismatched.
        for name, out in (("server", sout), ("client", cout)):
            if "ping data: " not in out or "mismatch" in out:
                why.append(f"{name}: no verified ping data")
    if not why:
        return None
    tail = lambda s: "\n".join(s.splitlines()[-8:])
    return "; ".join(why) + f"\nserver: {' '.join(scmd)}\n{tail(sout)}\nclient: {' '.join(ccmd)}\n{tail(cout)}"


EXCHANGES = [
    ("ibv_rc_pingpong", ["-c", "-n", "100", "-s", "4096"], "pingpong"),
    ("ibv_uc_pingpong", ["-c", "-n", "100", "-s", "4096"], "pingpong"),
    ("ibv_ud_pingpong", ["-c", "-n", "100", "-s", "1024"], "pingpong"),
    ("ib_write_bw", ["-F", "-n", "200", "-s", "4096"], "perftest"),
    ("ib_read_bw", ["-F", "-n", "200", "-s", "4096"], "perftest"),
    ("ib_send_bw", ["-F", "-n", "200", "-s", "4096"], "perftest"),
    ("ib_atomic_bw", ["-F", "-n", "200"], "perftest"),
    ("rping", ["-V", "-C", "50", "-S", "1000"], "rping"),
]


def nvme_peer(*args):
    """The command that runs one end of NVMe over RDMA (rxe_rust_nvme_peer.sh),
    from the overlay, whose kselftest helpers it sources."""
    build = os.environ.get("RXE_BUILD")
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.join(build, "src/tools/testing/selftests/rdma") if build else here
    return ["env", f"DEV={DEV}", f"NETDEV={NETDEV}", "bash",
            os.path.join(d, "rxe_rust_nvme_peer.sh"), *args]


def nvme_exchange(target, host):
    """NVMe over RDMA: the target exports a null_blk, the host writes random
    bytes through it, reads them back and connects and disconnects
    NVME_CYCLES times; the target must hold the bytes the host wrote, and
    both must be left with the queue pairs they had. Returns (None, notes)
    or (why it failed, notes)."""
    notes = []
    rc, out = target.run(nvme_peer("target", target.address), 120)
    notes += out.strip().splitlines()[-1:]
    if rc:
        return f"target ({target.name}) set-up exit {rc}:\n{out[-800:]}", notes
    hrc, hout = host.run(nvme_peer("host", target.address, str(NVME_CYCLES)), 900)
    notes += [l for l in hout.splitlines() if "identical" in l or "cycles" in l or "queue pairs" in l]
    m = re.search(r"pattern sha256 ([0-9a-f]{64})", hout)
    # The target's check also takes it down, whether the host passed or not.
    trc, tout = target.run(nvme_peer("holds", target.address, m.group(1) if m else "none"), 180)
    notes += tout.strip().splitlines()
    why = []
    if hrc:
        why.append(f"host ({host.name}) exit {hrc}:\n{hout[-800:]}")
    if trc:
        why.append(f"target ({target.name}) check exit {trc}:\n{tout[-800:]}")
    return ("\n".join(why) or None), notes


def report(n, desc, why, start):
    """Prints check n's KTAP line (why it failed, or how long it took before);
    returns 1 if it failed."""
    if why:
        for line in why.splitlines():
            say(f"# {line}")
        say(f"not ok {n} {desc}")
        return 1
    say(f"# {time.time() - start:.0f} s")
    say(f"ok {n} {desc}")
    return 0


def controller(driver, address, peer):
    say("TAP version 13")
    say(f"1..{1 + 2 * (len(EXCHANGES) + 1)}")
    try:
        gid = set_up(driver, address)
        sock = None
        deadline = time.time() + 120
        while sock is None:
            try:
                sock = socket.create_connection((peer, AGENT_PORT), timeout=5)
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(1)
        sock.settimeout(None)
        link = Link(sock)
        hello = link.recv()
    except (OSError, RuntimeError, ConnectionError) as e:
        say(f"# {e}")
        say(f"not ok 1 set up {driver} here and reach the agent at {peer}")
        for i in range(2 * (len(EXCHANGES) + 1)):
            say(f"not ok {i + 2} # not run: no set-up")
        return 1
    say(f"ok 1 set up {driver} here ({address}, GID index {gid}); "
        f"{hello['driver']} at {peer} (GID index {hello['gid']})")
    here = Side(driver, gid, address)
    there = Side(hello["driver"], hello["gid"], peer, link)
    n, failed, port = 1, 0, FIRST_PORT
    for server, client in ((here, there), (there, here)):
        for prog, args, kind in EXCHANGES:
            n += 1
            port += 1
            start = time.time()
            why = exchange(server, client, port, prog, args, kind)
            desc = f"{prog} {' '.join(args)}: server {server.name}, client {client.name}"
            failed += report(n, desc, why, start)
        n += 1
        start = time.time()
        why, notes = nvme_exchange(server, client)
        for line in notes:
            say(f"# {line}")
        desc = (f"NVMe over RDMA, {NVME_CYCLES} connect/disconnect cycles: target {server.name}, "
                f"host {client.name}")
        failed += report(n, desc, why, start)
    link.send(op="quit")
    return 1 if failed else 0


def agent(driver, address):
    gid = set_up(driver, address)
    here = Side("agent", gid, address)
    lsock = socket.create_server((address, AGENT_PORT))
    sock, _ = lsock.accept()
    link = Link(sock)
    link.send(gid=gid, driver=driver)
    while True:
        msg = link.recv()
        if msg["op"] == "quit":
            return 0
        if msg["op"] == "start":
            try:
                link.send(ok=here.start(msg["key"], msg["cmd"]))
            except OSError as e:
                link.send(ok=False, why=str(e))
        elif msg["op"] == "wait":
            if msg["key"] not in here.procs:
                link.send(rc=127, out="not started")
            else:
                rc, out = here.wait(msg["key"], msg["timeout"])
                link.send(rc=rc, out=out)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "agent":
        return agent(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "controller":
        return controller(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
