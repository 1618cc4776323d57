#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma_rxe against rdma_rxe_rust: perftest figures from one VM boot.

Not a test: it never fails on a slow figure, and `make test` does not run it
(its name is not rxe_rust_*.sh). `scripts/bench` (`make bench`) boots the VM
and calls `rxe_bench.py run` inside it, then `report` on the host.

    rxe_bench.py run [--quick] [--reps N] [--filter RE] [--paths ...] [--drivers ...]
        inside the VM: for the C driver rdma_rxe, then rdma_rxe_rust (never
        both loaded), run every selected perftest figure on every path,
        --reps times; write the raw results as JSON ($VM_OUT/bench-raw.json)
        and print the table.
    rxe_bench.py report RAW.json [--svg FILE] [--json FILE]
        the table (median of the repetitions, Rust/C ratio), a summary JSON
        and an SVG plot (one panel per figure, C and Rust side by side).
    rxe_bench.py plan [options]
        the figures a run would take and its estimated time.

Paths: "loopback" (one device rxe0 on eth0, server and client on it, the
client connecting to 127.0.0.1) and "veth" (two network namespaces joined by
a veth pair, one device in each). Every perftest run is bounded by a time-out;
a run that fails or times out is recorded as n/a and the harness carries on.
"""

import argparse
import functools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

DRIVERS = {"c": "rdma_rxe", "rust": "rdma_rxe_rust"}
PATHS = ("loopback", "veth")
REPS = 3
RUN_TIMEOUT = 120
PROBE_TIMEOUT = 30
# After this many failed runs in a row on one driver and path, the rest of
# that path is recorded n/a without running (a driver that cannot do the
# path would otherwise cost a time-out per figure).
MAX_FAILS_IN_A_ROW = 3
# A profiled run has this many times the iterations of a measured one.
PROFILE_SCALE = 10

# veth path: namespaces, interfaces, addresses, RDMA devices.
NS = ("rxbench_a", "rxbench_b")
VETH = ("rxbv_a", "rxbv_b")
ADDR = ("198.18.77.1", "198.18.77.2")
VETH_DEV = ("rxbench_a", "rxbench_b")
LO_NETDEV = "eth0"
LO_ADDR = "198.18.0.1"
LO_DEV = "rxe0"

KIB = 1024
MIB = 1024 * 1024


def size_name(size):
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB}M"
    if size >= KIB and size % KIB == 0:
        return f"{size // KIB}K"
    return str(size)


class Run:
    """One perftest invocation (client and server) and the figures it yields."""

    def __init__(self, prog, size, q, iters, kind):
        self.prog, self.size, self.q, self.iters, self.kind = prog, size, q, iters, kind
        short = prog[3:]  # ib_write_bw -> write_bw
        if prog == "ib_atomic_bw":
            self.id = f"{short}-q{q}"
        elif kind == "lat":
            self.id = f"{short}-{size_name(size)}"
        else:
            self.id = f"{short}-{size_name(size)}-q{q}"

    def figures(self):
        """(figure id, metric key, unit, higher is better)."""
        if self.kind == "lat":
            return [(f"{self.id}-median", "t_typical", "us", False),
                    (f"{self.id}-t_min", "t_min", "us", False)]
        if self.size < 4096:
            return [(self.id, "kmsgs", "kmsg/s", True)]
        return [(self.id, "mbs", "MB/s", True)]

    def args(self, iters):
        a = [self.prog, "-n", str(iters), "-F"]
        if self.prog != "ib_atomic_bw":
            a += ["-s", str(self.size)]
        if self.q != 1:
            a += ["-q", str(self.q)]
        return a


# Iterations sized so that a run moves data for about 1-2 s on the plain
# kernel under TCG (C driver: ~45k 64-byte messages/s, ~40 MB/s at 64 KiB,
# ~50 us 2-byte latency); with -q 4, -n counts per queue pair.
BW_ITERS = {64: 20000, 4 * KIB: 5000, 64 * KIB: 1000, MIB: 60}
LAT_ITERS = {2: 2000, 4 * KIB: 1000}
# Messages as large as the region, to show that the rate does not fall with the
# region's size (memory translation is constant-time per page): WRITE and READ
# at one queue pair, against the 1 MiB figure. perftest registers twice the
# message per process, so 256 MiB pins 1 GiB of the 2 GiB guest on one path.
REGION_ITERS = {64 * MIB: 5, 256 * MIB: 5}


def catalogue():
    runs = []
    for prog in ("ib_write_bw", "ib_read_bw", "ib_send_bw"):
        for q in (1, 4):
            for size, iters in BW_ITERS.items():
                runs.append(Run(prog, size, q, max(iters // q, 5), "bw"))
    for prog in ("ib_write_bw", "ib_read_bw"):
        for size, iters in REGION_ITERS.items():
            runs.append(Run(prog, size, 1, iters, "bw"))
    for q in (1, 4):
        runs.append(Run("ib_atomic_bw", 8, q, 20000 // q, "bw"))
    for prog in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
        for size, iters in LAT_ITERS.items():
            runs.append(Run(prog, size, 1, iters, "lat"))
    return runs


QUICK_RUNS = ("write_bw-64-q1", "write_bw-64K-q1", "write_bw-64K-q4", "read_bw-64K-q1",
              "send_bw-64K-q1", "atomic_bw-q1", "send_lat-2", "read_lat-2")
QUICK_SCALE = 0.25


def selected(opts):
    runs = catalogue()
    if opts.quick:
        runs = [r for r in runs if r.id in QUICK_RUNS]
    if opts.filter:
        pat = re.compile(opts.filter)
        runs = [r for r in runs
                if pat.search(r.id) or any(pat.search(f[0]) for f in r.figures())]
    return runs


# perftest signals one send in cq_mod (100 for messages up to 8 KiB, 1 above)
# and credits each send completion with a whole cq_mod, so a queue pair whose -n
# is not a multiple of it is credited more than it sent. With -q above 1 the
# client can then count all its completions while one queue pair still waits
# for one it never polls, and hangs (both drivers; perftest 4.5 stops at 4978
# of 4 x 1250 4 KiB messages). Fixed upstream in perftest 24.01 (commit
# 5ff3afa, "fix completion count with special combination of tx_depth/cq_mod/
# iterations"); until then -n is rounded up to a multiple of cq_mod.
PERFTEST_CQ_MOD = 100
PERFTEST_CQ_MOD_MAX_SIZE = 8 * KIB


def iters_of(run, opts):
    scale = opts.iters_scale * (QUICK_SCALE if opts.quick else 1.0)
    n = max(5, int(run.iters * scale))
    if run.kind == "bw" and run.q > 1 and run.size <= PERFTEST_CQ_MOD_MAX_SIZE:
        n = -(-n // PERFTEST_CQ_MOD) * PERFTEST_CQ_MOD
    return n


# --- the time estimate ------------------------------------------------------

# Rough model of a run on the plain kernel under TCG with 2 vCPUs: a fixed
# cost (two perftest processes, device open, memory registration, the TCP
# exchange) plus the transfer at the slower driver's rate.
RUN_OVERHEAD = 4.0
EST_RATE = {64: 0.9, 4 * KIB: 20.0, 64 * KIB: 35.0, MIB: 25.0,  # MB/s, the slower driver
            64 * MIB: 25.0, 256 * MIB: 25.0}
EST_LAT = {2: 80e-6, 4 * KIB: 250e-6}  # s per round trip


def estimate_run(run, iters):
    if run.kind == "lat":
        return RUN_OVERHEAD + iters * EST_LAT[run.size] * 2
    if run.prog == "ib_atomic_bw":
        return RUN_OVERHEAD + iters * run.q / 15000.0
    return RUN_OVERHEAD + iters * run.q * run.size / (EST_RATE[run.size] * MIB)


def estimate(opts, history=None):
    """Seconds a run with these options should take inside the VM.

    history (from history_from) replaces the model where an earlier run on
    the same kernel measured a figure; a driver's path that failed entirely
    then costs only its probe.
    """
    history = history or {}
    total = 0.0
    for drv in opts.drivers:
        for path in opts.paths:
            if (drv, path) in history.get("dead", ()):
                total += PROBE_TIMEOUT
                continue
            for r in selected(opts):
                n = iters_of(r, opts)
                per_iter = history.get("per_iter", {}).get((drv, path, r.id))
                total += (per_iter * n if per_iter else estimate_run(r, n)) * opts.reps
            total += 5  # the probe
    total += opts.reps * 1.5 + 20 * len(opts.drivers)  # memcpy, module and device setup
    return total


def history_from(raw):
    """Seconds per iteration of each driver, path and run of an earlier raw
    result, and the driver/path pairs on which every run failed."""
    per_iter, seen, ok = {}, set(), set()
    for r in raw.get("runs", []):
        dp = (r["driver"], r["path"])
        seen.add(dp)
        if r.get("ok") and r.get("iters") and r["run"] != "probe":
            ok.add(dp)
            k = (r["driver"], r["path"], r["run"])
            per_iter[k] = max(per_iter.get(k, 0.0), r["seconds"] / r["iters"])
    return {"per_iter": per_iter, "dead": seen - ok}


# --- inside the VM ------------------------------------------------------------

def sh(cmd, timeout=60, check=False):
    p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd}: {p.stderr.strip() or p.stdout.strip()}")
    return p


def log(msg):
    print(msg, flush=True)


def module_loaded(name):
    with open("/proc/modules") as f:
        return any(line.split()[0] == name for line in f)


def unload_all():
    """Delete every RDMA link and unload both drivers; bounded, never raises."""
    try:
        devs = os.listdir("/sys/class/infiniband")
    except OSError:
        devs = []
    cmds = [["rdma", "link", "del", dev] for dev in devs]
    cmds += [["rmmod", mod] for mod in DRIVERS.values() if module_loaded(mod)]
    for cmd in cmds:
        try:
            p = sh(cmd, timeout=120)
            if p.returncode != 0:
                log(f"bench: {' '.join(cmd)}: {p.stderr.strip()}")
        except subprocess.TimeoutExpired:
            log(f"bench: {' '.join(cmd)}: still running after 120 s")


def gid_of(addr):
    parts = [int(x) for x in addr.split(".")]
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(parts)


def gid_index(dev, addr, wait=10.0):
    """The GID table index of the RoCEv2 GID of an IPv4 address."""
    want = gid_of(addr)
    base = f"/sys/class/infiniband/{dev}/ports/1/gids"
    end = time.monotonic() + wait
    while True:
        try:
            for n in sorted(os.listdir(base), key=int):
                try:
                    with open(f"{base}/{n}") as f:
                        if f.read().strip() == want:
                            return int(n)
                except OSError:
                    continue
        except OSError:
            pass
        if time.monotonic() > end:
            raise RuntimeError(f"{dev}: no GID for {addr}")
        time.sleep(0.2)


def setup_netns():
    for ns in NS:
        sh(["ip", "netns", "del", ns])
    sh(["ip", "netns", "add", NS[0]], check=True)
    sh(["ip", "netns", "add", NS[1]], check=True)
    sh(["ip", "link", "add", VETH[0], "netns", NS[0], "type", "veth",
        "peer", "name", VETH[1], "netns", NS[1]], check=True)
    for ns, veth, addr in zip(NS, VETH, ADDR):
        sh(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        sh(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", veth], check=True)
        sh(["ip", "-n", ns, "link", "set", veth, "up"], check=True)


class Endpoint:
    """Where a perftest process runs: device, GID index, namespace."""

    def __init__(self, dev, gid, ns=None):
        self.dev, self.gid, self.ns = dev, gid, ns

    def here(self, args):
        """args as a command run in the endpoint's namespace."""
        return (["ip", "netns", "exec", self.ns] if self.ns else []) + args

    def argv(self, args):
        return self.here(args + ["-d", self.dev, "-x", str(self.gid)])


def setup_devices(paths):
    """Add the RDMA links of the loaded driver; endpoints per path."""
    eps = {}
    if "loopback" in paths:
        sh(["rdma", "link", "add", LO_DEV, "type", "rxe", "netdev", LO_NETDEV], check=True)
        g = gid_index(LO_DEV, LO_ADDR)
        eps["loopback"] = (Endpoint(LO_DEV, g), Endpoint(LO_DEV, g), "127.0.0.1")
    if "veth" in paths:
        ends = []
        for ns, veth, dev, addr in zip(NS, VETH, VETH_DEV, ADDR):
            sh(["ip", "netns", "exec", ns, "rdma", "link", "add", dev, "type", "rxe",
                "netdev", veth], check=True)
            ends.append(Endpoint(dev, gid_index(dev, addr), ns))
        eps["veth"] = (ends[0], ends[1], ADDR[0])
    return eps


# Counters that move only when a packet was lost, resent or refused: a run whose figure is
# low for that reason says so in the raw results and in the table.
RECOVERY_COUNTERS = ("duplicate_request", "out_of_seq_request", "rcvd_rnr_err", "send_rnr_err",
                     "rcvd_seq_err", "completer_retry_err")


def recovery_counts(eps):
    """RECOVERY_COUNTERS summed over the devices of an endpoint pair, by name (None if
    unread)."""
    totals = dict.fromkeys(RECOVERY_COUNTERS, 0)
    for dev in sorted({eps[0].dev, eps[1].dev}):
        for name in RECOVERY_COUNTERS:
            try:
                with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}") as f:
                    totals[name] += int(f.read())
            except (OSError, ValueError):
                return None
    return totals


def probe_count(eps):
    """The sum of the optional counter tail_probe over the devices of an endpoint pair,
    shown first if need be (None where the driver has no such counter: the C driver).

    A tail-loss probe resends one packet without a retry: on a lossless wire it is a
    duplicate_request at the responder, which the recovery sum counts. Showing it replaces
    the device's list of optional counters shown: the bench shows no other."""
    total = 0
    for ep in {(e.dev, e.ns): e for e in eps[:2]}.values():
        show = ep.here(["rdma", "-j", "statistic", "show", "link", f"{ep.dev}/1"])
        enable = ep.here(["rdma", "statistic", "set", "link", f"{ep.dev}/1",
                          "optional-counters", "tail_probe"])
        try:
            entry = json.loads(sh(show).stdout)[0]
            if "tail_probe" not in entry:
                if sh(enable).returncode != 0:
                    return None
                entry = json.loads(sh(show).stdout)[0]
            total += int(entry["tail_probe"])
        except (ValueError, IndexError, KeyError, TypeError, subprocess.TimeoutExpired):
            return None
    return total


def listening(pid, port):
    """Whether process pid's network namespace has a TCP listener on port."""
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, StopIteration, IndexError, ValueError):
            pass
    return False


def kill(p):
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log(f"bench: process {p.pid} does not die (stuck in the kernel?)")


def result_line(out):
    """perftest's result line (the first numeric line after "#bytes"), or None."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            for data in lines[i + 1:]:
                f = data.split()
                if len(f) >= 5 and re.fullmatch(r"\d+", f[0]):
                    return data.strip()
            return None
    return None


def parse(line, kind):
    """Figures from perftest's result line, or None."""
    try:
        v = [float(x) for x in line.split()[:9]]
    except ValueError:
        return None
    if kind == "lat":
        if len(v) < 5:
            return None
        return {"t_min": v[2], "t_max": v[3], "t_typical": v[4],
                "t_avg": v[5] if len(v) > 5 else None}
    return {"mbs": v[3], "mbs_peak": v[2], "kmsgs": v[4] * 1000.0}


class Runner:
    def __init__(self, opts):
        self.opts = opts
        self.port = 18515
        self.results = []
        self.done = 0
        self.start = time.monotonic()
        self.total = 0

    def next_port(self):
        self.port = 18515 + (self.port - 18515 + 1) % 2000
        return self.port

    def perftest(self, args, eps, timeout):
        """Run one perftest pair; (figures or None, error, seconds, client output)."""
        server, client, host = eps
        port = self.next_port()
        argv = args + ["-p", str(port)]
        t0 = time.monotonic()
        srv = subprocess.Popen(server.argv(argv), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
        cli = None
        try:
            end = t0 + min(timeout, 30)
            while not listening(srv.pid, port):
                if srv.poll() is not None:
                    out, err = srv.communicate()
                    return (None, "server exited: " + last_line(err, out), time.monotonic() - t0,
                            out + err)
                if time.monotonic() > end:
                    return None, "server did not listen", time.monotonic() - t0, ""
                time.sleep(0.05)
            cli = subprocess.Popen(client.argv(argv + [host]), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                out, err = cli.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                return None, f"timed out after {timeout} s", time.monotonic() - t0, ""
            secs = time.monotonic() - t0
            if cli.returncode != 0:
                return (None, f"client exit {cli.returncode}: {last_line(err, out)}", secs,
                        out + err)
            line = result_line(out)
            vals = parse(line, "lat" if "_lat" in args[0] else "bw") if line else None
            if vals is None:
                return None, "no result line: " + last_line(err, out), secs, out + err
            if not any(v for k, v in vals.items() if k != "t_avg"):
                # It did run (for seconds), so zeros are not a measurement.
                return None, f"perftest printed zeros: {line}", secs, out + err
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            vals["line"] = line
            return vals, None, secs, out
        finally:
            if cli is not None:
                kill(cli)
            kill(srv)

    def record(self, **kw):
        self.results.append(kw)

    def progress(self, msg):
        self.done += 1
        el = time.monotonic() - self.start
        log(f"[{self.done}/{self.total} {int(el // 60)}:{int(el % 60):02d}] {msg}")

    def path_runs(self, drv, path, eps, runs, rep, state):
        for run in runs:
            key = (drv, path, run.id)
            if state["dead"].get((drv, path)):
                self.record(driver=drv, path=path, run=run.id, rep=rep, ok=False,
                            error=state["dead"][(drv, path)], seconds=0, iters=None)
                self.progress(f"{drv} {path} {run.id} rep {rep + 1}: n/a (skipped)")
                continue
            if key in state["failed"]:
                self.record(driver=drv, path=path, run=run.id, rep=rep, ok=False,
                            error="failed in an earlier repetition: " + state["failed"][key],
                            seconds=0, iters=None)
                self.progress(f"{drv} {path} {run.id} rep {rep + 1}: n/a (failed before)")
                continue
            iters = iters_of(run, self.opts)
            before, probes_before = recovery_counts(eps), probe_count(eps)
            vals, err, secs, out = self.perftest(run.args(iters), eps, self.opts.run_timeout)
            after, probes_after = recovery_counts(eps), probe_count(eps)
            # Which counters moved, for the raw results: an RNR wait and a loss cost apart.
            by_counter = ({k: after[k] - before[k] for k in after if after[k] != before[k]}
                          if before is not None and after is not None else None)
            recovered = sum(by_counter.values()) if by_counter is not None else None
            probes = (probes_after - probes_before
                      if None not in (probes_before, probes_after) else None)
            self.record(driver=drv, path=path, run=run.id, rep=rep, ok=vals is not None,
                        values=vals, error=err, seconds=round(secs, 2), iters=iters,
                        recovery=recovered, recovery_by_counter=by_counter,
                        tail_probes=probes)
            if vals is None:
                state["failed"][key] = err
                n = state["in_a_row"].get((drv, path), 0) + 1
                state["in_a_row"][(drv, path)] = n
                if n >= MAX_FAILS_IN_A_ROW:
                    state["dead"][(drv, path)] = f"{n} runs in a row failed on this path"
                self.progress(f"{drv} {path} {run.id} rep {rep + 1}: n/a ({err}) {secs:.1f} s")
                if self.opts.verbose and out:
                    log("\n".join("  | " + x for x in out.splitlines()[-15:]))
            else:
                state["in_a_row"][(drv, path)] = 0
                shown = ", ".join(f"{k} {vals[k]:.2f}" for _, k, _, _ in run.figures())
                lost = f", recovery counters +{recovered}" if recovered else ""
                if recovered and probes:
                    lost += f" (tail probes {probes})"
                self.progress(f"{drv} {path} {run.id} rep {rep + 1}: {shown} ({secs:.1f} s"
                              f"{lost})")
                if self.opts.profile and rep == 0:
                    self.profile(drv, path, run, eps, iters)

    def profile(self, drv, path, run, eps, iters):
        """Runs `run` once more under `perf record -a` (not counted) and keeps its report.

        The whole system is sampled (cpu-clock: TCG has no hardware counters), since the
        work of one perftest pair is spread over its processes, workers and softirqs."""
        out = os.path.join(os.environ.get("VM_OUT", "."), "profile")
        os.makedirs(out, exist_ok=True)
        stem = os.path.join(out, f"{drv}-{path}-{run.id}")
        # Not on the 9p share of $VM_OUT: perf record writes nothing usable there.
        data = f"/tmp/rxe-bench-{drv}-{path}-{run.id}.data"
        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-e", "cpu-clock", "-F", "997",
                                 "-o", data], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        counts = f"/tmp/rxe-bench-{drv}-{path}-{run.id}.stat"
        stat = subprocess.Popen(["perf", "stat", "-a", "-x", ",", "-o", counts,
                                 "-e", ",".join(stat_events())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(1)
        # Ten times the iterations, so that the transfer, not the set-up, fills the profile.
        vals, err, secs, _ = self.perftest(run.args(iters * PROFILE_SCALE), eps,
                                           self.opts.run_timeout)
        for p in (perf, stat):
            p.send_signal(signal.SIGINT)
        try:
            _, perr = perf.communicate(timeout=120)
            stat.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill(perf)
            kill(stat)
            perr = "perf did not stop"
        shown = err or ", ".join(f"{k} {vals[k]:.2f}" for _, k, _, _ in run.figures())
        with open(stem + ".txt", "w") as f:
            f.write(f"# {DRIVERS[drv]} {path} {run.id} under perf record -a -g "
                    f"(cpu-clock, 997 Hz), {PROFILE_SCALE}x the iterations: {shown} ({secs:.1f} s)\n")
            # How often the machine switched, woke and deferred work per iteration (all
            # CPUs, the whole run, perf record's own share included).
            n = (iters or 1) * PROFILE_SCALE
            for event, count in read_stat(counts):
                f.write(f"# per iteration: {event} {count / n:.2f}\n")
            # Self time per symbol, then time including callees: where the cycles go, and
            # which paths they go through.
            # Then by process and object: which context (worker, softirq in whichever
            # task it interrupted, the perftest processes) pays. Last, who spins on a lock
            # and who was running when interrupts came back on: the paths into them.
            none = ["-g", "none"]
            for what in (none + ["--sort", "sym", "--no-children", "--percent-limit", "0.2"],
                         none + ["--sort", "sym", "--children", "--percent-limit", "2"],
                         none + ["--sort", "comm,dso", "--no-children", "--percent-limit", "0.5"],
                         ["-g", "caller,2,callee,function,percent", "--sort", "sym",
                          "--no-children", "--symbols",
                          "queued_spin_lock_slowpath,_raw_spin_unlock_irqrestore"]):
                try:
                    p = sh(["perf", "report", "-i", data, "--stdio"] + what, timeout=600)
                    f.write(p.stdout if p.returncode == 0 else f"# perf report: {p.stderr}\n")
                except subprocess.TimeoutExpired:
                    f.write("# perf report timed out\n")
        if not os.path.exists(data):
            log(f"bench: perf record wrote nothing: {last_line(perr)}")
        try:
            os.unlink(data)
        except OSError:
            pass
        log(f"bench: profile of {drv} {path} {run.id}: {stem}.txt")

    def probe(self, drv, path, eps, state):
        """A short write: can this driver do this path at all?"""
        vals, err, secs, out = self.perftest(["ib_write_bw", "-n", "20", "-F", "-s", "4096"],
                                             eps, PROBE_TIMEOUT)
        ok = vals is not None
        log(f"bench: probe {drv} {path}: {'ok' if ok else 'FAILED: ' + err} ({secs:.1f} s)")
        if not ok:
            if self.opts.verbose and out:
                log("\n".join("  | " + x for x in out.splitlines()[-15:]))
            state["dead"][(drv, path)] = f"probe failed: {err}"
        self.record(driver=drv, path=path, run="probe", rep=0, ok=ok, values=vals,
                    error=err, seconds=round(secs, 2), iters=20)


# Events `perf stat` counts during a profiled run: context switches, wake-ups, work items
# queued and run, softirqs, and the IPIs that wake another CPU.
STAT_EVENTS = ("context-switches", "cpu-migrations", "sched:sched_wakeup",
               "workqueue:workqueue_queue_work", "workqueue:workqueue_execute_start",
               "irq:softirq_entry", "irq_vectors:reschedule_entry",
               "irq_vectors:call_function_single_entry")


@functools.cache
def stat_events():
    """The STAT_EVENTS this kernel has (perf stat refuses a list with one it lacks)."""
    return [e for e in STAT_EVENTS
            if sh(["perf", "stat", "-a", "-e", e, "true"], timeout=60).returncode == 0]


def read_stat(path):
    """(event, count) of a `perf stat -x ,` output file, which it removes."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                cols = line.strip().split(",")
                if len(cols) > 2 and cols[0].replace(".", "").isdigit():
                    rows.append((cols[2], float(cols[0])))
        os.unlink(path)
    except OSError:
        pass
    return rows


def last_line(err, out=""):
    """The line that best says why a perftest run failed."""
    for text in (err, out):
        lines = [x.strip() for x in (text or "").splitlines() if x.strip()]
        if lines:
            return lines[-1][:200]
    return "(no output)"


def memcpy_bw(opts):
    exe = opts.memcpy or os.path.join(os.environ.get("RXE_BUILD", "build"), "bench", "memcpy_bw")
    if not os.access(exe, os.X_OK):
        log(f"bench: no {exe} (scripts/bench builds it): memcpy bound n/a")
        return None
    try:
        p = sh([exe, "1"], timeout=60)
        return float(p.stdout.strip())
    except (subprocess.TimeoutExpired, ValueError):
        return None


def kernel_flavor():
    try:
        import gzip
        with gzip.open("/proc/config.gz", "rt") as f:
            cfg = f.read()
        return "debug" if "CONFIG_KASAN=y" in cfg else "plain"
    except OSError:
        return "unknown"


def perftest_version():
    # The VM hides /var/lib (dpkg's database) under a tmpfs: the package's
    # changelog names the version too.
    try:
        import gzip
        with gzip.open("/usr/share/doc/perftest/changelog.Debian.gz", "rt") as f:
            m = re.match(r"perftest \(([^)]*)\)", f.readline())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


def load_driver(drv, baseline):
    """Loads driver drv; with a baseline, "c" is that build of rdma_rxe_rust."""
    if drv == "c" and baseline:
        # modprobe loads what the module needs (insmod does not); the build under test
        # leaves at once, and the baseline, with the same name, takes its place.
        sh(["modprobe", DRIVERS["rust"]], check=True)
        sh(["rmmod", DRIVERS["rust"]], check=True)
        sh(["insmod", baseline], check=True)
    else:
        sh(["modprobe", DRIVERS[drv]], check=True)


def names(meta):
    """The two columns' names: (short, long) for "c" and for "rust"."""
    if meta.get("baseline"):
        return (("A", f"A: baseline {os.path.basename(meta['baseline'])}"),
                ("B", "B: rdma_rxe_rust of this build"))
    return (("C", "C rdma_rxe"), ("Rust", "Rust rdma_rxe_rust"))


def clocksource():
    """Returns the kernel's current clocksource."""
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def cmd_run(opts):
    runs = selected(opts)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "kernel": os.uname().release,
        "flavor": kernel_flavor(),
        "vcpus": os.cpu_count(),
        "perftest": perftest_version(),
        "reps": opts.reps,
        "quick": opts.quick,
        "filter": opts.filter,
        "iters_scale": opts.iters_scale,
        "paths": opts.paths,
        "drivers": opts.drivers,
        "run_timeout": opts.run_timeout,
        "label": opts.label,
        "clocksource": clocksource(),
        "baseline": opts.baseline,
    }
    log(f"bench: {len(runs)} runs x {opts.reps} reps x {len(opts.drivers)} drivers x "
        f"{len(opts.paths)} paths; kernel {meta['kernel']} ({meta['flavor']}), "
        f"{meta['vcpus']} vCPUs, perftest {meta['perftest']}; estimate for the plain "
        f"kernel {estimate(opts) / 60:.0f} min")
    r = Runner(opts)
    r.total = len(runs) * opts.reps * len(opts.drivers) * len(opts.paths)
    mem = []
    for rep in range(opts.reps):
        v = memcpy_bw(opts)
        log(f"bench: memcpy 64 MiB rep {rep + 1}: {v} MB/s")
        mem.append(v)
    state = {"failed": {}, "in_a_row": {}, "dead": {}}
    if "veth" in opts.paths:
        try:
            setup_netns()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"bench: veth setup failed: {e}")
            for drv in opts.drivers:
                state["dead"][(drv, "veth")] = f"veth setup failed: {e}"
    # Repetitions outside, drivers inside: the host's speed drifts within a boot (TCG on a
    # shared machine), and measuring all of one driver and then all of the other turned that
    # drift into a bias of every ratio. Interleaved, each repetition compares the drivers
    # minutes apart at most, and the medians take one figure of each repetition. The order
    # alternates: two identical builds, always in the same order, came out with the second
    # behind by up to 9 % in every repetition on some figures (session 59).
    for rep in range(opts.reps):
        for drv in opts.drivers if rep % 2 == 0 else opts.drivers[::-1]:
            mod = DRIVERS[drv]
            unload_all()
            try:
                load_driver(drv, opts.baseline)
                eps = setup_devices([p for p in opts.paths if (drv, p) not in state["dead"]])
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                log(f"bench: {mod}: setup failed: {e}")
                for path in opts.paths:
                    state["dead"][(drv, path)] = f"setup failed: {e}"
                eps = {}
            log(f"bench: rep {rep + 1}, driver {mod}: " + ", ".join(
                f"{p} {e[0].dev}/{e[1].dev} gid {e[0].gid}" for p, e in eps.items()))
            if rep == 0:
                for path in opts.paths:
                    if path in eps and not opts.no_probe:
                        r.probe(drv, path, eps[path], state)
            for path in opts.paths:
                r.path_runs(drv, path, eps.get(path), runs, rep, state)
            unload_all()
    if "veth" in opts.paths:
        for ns in NS:
            sh(["ip", "netns", "del", ns])
    # TCG may make the clocksource watchdog drop the TSC for the HPET, whose every read
    # is an emulated device access: the figures before and after do not compare.
    meta["clocksource_end"] = clocksource()
    if meta["clocksource_end"] != meta["clocksource"]:
        log(f"bench: the clocksource changed during the run: {meta['clocksource']} -> "
            f"{meta['clocksource_end']}")
    raw = {"meta": meta, "memcpy": mem, "runs": r.results,
           "catalogue": {x.id: {"prog": x.prog, "size": x.size, "q": x.q, "kind": x.kind}
                         for x in runs},
           "seconds": round(time.monotonic() - r.start, 1)}
    out = opts.out or os.path.join(os.environ.get("VM_OUT", "."), "bench-raw.json")
    with open(out, "w") as f:
        json.dump(raw, f, indent=1)
    log(f"bench: done in {raw['seconds'] / 60:.1f} min; raw results in {out}")
    if not opts.no_table:
        print(table(summarize(raw)))
    return 0


# --- the report ------------------------------------------------------------

def summarize(raw):
    """Median per figure, driver and path, and the Rust/C ratio."""
    cat = catalogue()
    by_id = {r.id: r for r in cat}
    figs = []
    order = [r.id for r in cat]
    run_ids = sorted({x["run"] for x in raw["runs"] if x["run"] in by_id}, key=order.index)
    paths = [p for p in PATHS if any(x["path"] == p for x in raw["runs"])]
    for path in paths:
        for rid in run_ids:
            run = by_id[rid]
            for fid, key, unit, higher in run.figures():
                row = {"path": path, "figure": fid, "run": rid, "unit": unit,
                       "higher_is_better": higher}
                for drv in ("c", "rust"):
                    mine = [x for x in raw["runs"]
                            if x["path"] == path and x["run"] == rid and x["driver"] == drv]
                    ok = [x for x in mine if x.get("ok")]
                    samples = [x["values"][key] for x in ok
                               if x.get("values") and x["values"].get(key) is not None]
                    errs = [x["error"] for x in mine if not x.get("ok")]
                    rec = [x["recovery"] for x in ok if x.get("recovery") is not None]
                    probes = [x["tail_probes"] for x in ok if x.get("tail_probes") is not None]
                    row[drv] = {"median": statistics.median(samples) if samples else None,
                                "samples": samples, "errors": errs,
                                "recovery": statistics.median(rec) if rec else None,
                                "tail_probes": statistics.median(probes) if probes else None}
                c, rs = row["c"]["median"], row["rust"]["median"]
                row["ratio"] = rs / c if c and rs is not None else None
                # The drivers run one after the other within each repetition: a pair of one
                # repetition was measured minutes apart, the medians up to a boot's length.
                row["paired"] = paired_ratios(raw["runs"], path, rid, key)
                row["reps_behind"] = sum(1 for q in row["paired"] if (q < 1 if higher else q > 1))
                if row["ratio"] is not None:
                    row["rust_behind"] = row["ratio"] < 1 if higher else row["ratio"] > 1
                else:
                    row["rust_behind"] = None
                figs.append(row)
    mem = [m for m in raw.get("memcpy", []) if m]
    return {"meta": raw["meta"], "seconds": raw.get("seconds"),
            "memcpy_mbs": statistics.median(mem) if mem else None,
            "memcpy_samples": raw.get("memcpy", []), "figures": figs}


def paired_ratios(runs, path, rid, key):
    """Rust/C of one figure in each repetition that has both values, in repetition order."""
    by_rep = {}
    for x in runs:
        if x["path"] != path or x["run"] != rid or not x.get("ok") or not x.get("values"):
            continue
        v = x["values"].get(key)
        if v is not None:
            by_rep.setdefault(x.get("rep"), {})[x["driver"]] = v
    return [d["rust"] / d["c"] for rep, d in sorted(by_rep.items(), key=lambda kv: kv[0] or 0)
            if d.get("c") and d.get("rust") is not None]


def fmt(v):
    if v is None:
        return "n/a"
    if v >= 1000:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def spread(samples):
    if len(samples) < 2:
        return ""
    m = statistics.median(samples)
    return f"±{(max(samples) - min(samples)) / 2 / m * 100:.0f}%" if m else ""


def table(summary):
    m = summary["meta"]
    (a, a_long), (b, b_long) = names(m)
    title = (f"{a_long} vs {b_long}" if m.get("baseline")
             else "rdma_rxe (C) vs rdma_rxe_rust (Rust)")
    out = [f"{title}, perftest {m['perftest']}, kernel "
           f"{m['kernel']} ({m['flavor']}), {m['vcpus']} vCPUs, median of {m['reps']} "
           f"rep(s){', quick' if m.get('quick') else ''}, clocksource "
           f"{m.get('clocksource', '?')}"
           + (f" -> {m['clocksource_end']}"
              if m.get("clocksource_end", m.get("clocksource")) != m.get("clocksource") else ""),
           f"{b}/{a}: ratio of the medians; '<' marks a figure where {b} is behind "
           "(lower bandwidth, higher latency). ± is half the spread of the repetitions.",
           f"behind: in how many repetitions {b} was behind {a} (the two run one after the "
           "other in each, in turn first); '<<' marks a figure behind in every one of at least three.",
           ""]
    hdr = (f"{'path':<9} {'figure':<22} {'unit':<7} {a:>9} {'':>5} {b:>9} {'':>5} "
           f"{b + '/' + a:>7}   {'behind':>6}")
    out.append(hdr)
    out.append("-" * len(hdr))
    behind = total = always = 0
    for f in summary["figures"]:
        c, r = f["c"], f["rust"]
        ratio = "n/a" if f["ratio"] is None else f"{f['ratio']:.2f}"
        paired = f.get("paired", [])
        every = len(paired) >= 3 and f.get("reps_behind") == len(paired)
        mark = " <<" if every else " < " if f["rust_behind"] else "   "
        if f["ratio"] is not None:
            total += 1
            behind += bool(f["rust_behind"])
            always += every
        reps = f"{f.get('reps_behind', 0)}/{len(paired)}" if paired else ""
        out.append(f"{f['path']:<9} {f['figure']:<22} {f['unit']:<7} {fmt(c['median']):>9} "
                   f"{spread(c['samples']):>5} {fmt(r['median']):>9} {spread(r['samples']):>5} "
                   f"{ratio:>7}{mark}{reps:>6}")
    out.append("")
    mem = summary["memcpy_mbs"]
    out.append(f"memcpy bound (64 MiB buffers, one CPU): {fmt(mem)} MB/s")
    out.append(f"{b} behind {a} on {behind} of {total} figures with both values, "
               f"in every repetition (of at least three) on {always}")
    errs = {}
    for f in summary["figures"]:
        for drv in ("c", "rust"):
            if f[drv]["median"] is None and f[drv]["errors"]:
                errs.setdefault((f["path"], drv, f[drv]["errors"][0]), []).append(f["figure"])
    lossy = [f"{f['path']} {f['figure']} {a if drv == 'c' else b} {f[drv]['recovery']:g}"
             + (f" ({f[drv]['tail_probes']:g} tail probes)" if f[drv].get("tail_probes") else "")
             for f in summary["figures"] for drv in ("c", "rust") if f[drv].get("recovery")]
    if lossy:
        out.append("median recovery counters per run (" + ", ".join(RECOVERY_COUNTERS)
                   + "), where not 0, with the median of tail probes among them: "
                   + "; ".join(lossy))
    for (path, drv, err), fl in errs.items():
        out.append(f"n/a: {a if drv == 'c' else b} {path}: {err} ({len(fl)} figure(s))")
    if summary.get("seconds"):
        out.append(f"in-VM run time: {summary['seconds'] / 60:.1f} min")
    return "\n".join(out)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(summary):
    """One panel per figure: for each path, C and Rust bars side by side."""
    figs = {}
    for f in summary["figures"]:
        figs.setdefault(f["figure"], {})[f["path"]] = f
    paths = [p for p in PATHS if any(p in v for v in figs.values())]
    cols = 6
    pw, ph = 210, 190
    top = 70
    rows = (len(figs) + cols - 1) // cols
    width, height = cols * pw + 20, top + rows * ph + 20
    color = {"c": "#4c78a8", "rust": "#f58518"}
    m = summary["meta"]
    (a, a_long), (b, b_long) = names(m)
    title = (f"{a_long} vs {b_long}" if m.get("baseline")
             else "rdma_rxe (C) vs rdma_rxe_rust (Rust)")
    # The legend's second entry after the first one's text (about 8 px a character).
    x2 = 30 + 8 * len(a_long)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="10" y="20" font-size="15" font-weight="bold">{esc(title)}: '
         f'perftest {esc(m["perftest"])}, same VM boot</text>',
         f'<text x="10" y="38">kernel {esc(m["kernel"])} ({esc(m["flavor"])}), {m["vcpus"]} '
         f'vCPUs, TCG; bars: median of {m["reps"]} rep(s), dots: repetitions; '
         f'memcpy bound {fmt(summary["memcpy_mbs"])} MB/s; {esc(m["date"])}</text>',
         f'<rect x="10" y="48" width="12" height="12" fill="{color["c"]}"/>'
         f'<text x="26" y="58">{esc(a_long)}</text>',
         f'<rect x="{x2}" y="48" width="12" height="12" fill="{color["rust"]}"/>'
         f'<text x="{x2 + 16}" y="58">{esc(b_long)}</text>',
         f'<text x="{x2 + 36 + 8 * len(b_long)}" y="58">x: {b}/{a} ratio of '
         f'medians; red = {b} behind</text>']
    for i, (fid, per) in enumerate(figs.items()):
        x0 = 10 + (i % cols) * pw
        y0 = top + (i // cols) * ph
        any_f = next(iter(per.values()))
        better = "higher" if any_f["higher_is_better"] else "lower"
        o.append(f'<rect x="{x0}" y="{y0}" width="{pw - 10}" height="{ph - 10}" '
                 f'fill="none" stroke="#ccc"/>')
        o.append(f'<text x="{x0 + 5}" y="{y0 + 14}" font-weight="bold">{esc(fid)}</text>')
        o.append(f'<text x="{x0 + 5}" y="{y0 + 27}" fill="#666">{esc(any_f["unit"])}, '
                 f'{better} is better</text>')
        vals = [v for f in per.values() for d in ("c", "rust") for v in f[d]["samples"]]
        vmax = max(vals) if vals else 1.0
        base = y0 + ph - 40
        hmax = ph - 85
        gw = (pw - 30) / max(len(paths), 1)
        for j, path in enumerate(paths):
            gx = x0 + 10 + j * gw
            f = per.get(path)
            o.append(f'<text x="{gx + gw / 2 - 5}" y="{base + 14}" text-anchor="middle">'
                     f'{path}</text>')
            if f is None:
                continue
            for k, drv in enumerate(("c", "rust")):
                bx = gx + 4 + k * (gw / 2 - 6)
                bw = gw / 2 - 12
                med = f[drv]["median"]
                if med is None:
                    o.append(f'<text x="{bx + bw / 2}" y="{base - 4}" text-anchor="middle" '
                             f'fill="#999">n/a</text>')
                    continue
                h = med / vmax * hmax if vmax else 0
                o.append(f'<rect x="{bx:.1f}" y="{base - h:.1f}" width="{bw:.1f}" '
                         f'height="{h:.1f}" fill="{color[drv]}"/>')
                o.append(f'<text x="{bx + bw / 2:.1f}" y="{base - h - 3:.1f}" '
                         f'text-anchor="middle" font-size="9">{fmt(med)}</text>')
                for s in f[drv]["samples"]:
                    sy = base - s / vmax * hmax
                    o.append(f'<circle cx="{bx + bw / 2:.1f}" cy="{sy:.1f}" r="1.8" '
                             f'fill="black" fill-opacity="0.6"/>')
            if f["ratio"] is not None:
                col = "#c00" if f["rust_behind"] else "#080"
                o.append(f'<text x="{gx + gw / 2 - 5:.1f}" y="{base + 28}" text-anchor="middle" '
                         f'fill="{col}">x{f["ratio"]:.2f}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def cmd_report(opts):
    with open(opts.raw) as f:
        raw = json.load(f)
    s = summarize(raw)
    print(table(s))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(s, f, indent=1)
    if opts.svg:
        with open(opts.svg, "w") as f:
            f.write(svg(s))
    return 0


def cmd_plan(opts):
    for r in selected(opts):
        print(f"{r.id:<18} {' '.join(r.args(iters_of(r, opts)))}"
              f"   ~{estimate_run(r, iters_of(r, opts)):.0f} s")
    print(f"estimate (plain kernel, TCG): {estimate(opts) / 60:.0f} min")
    return 0


def add_run_options(ap):
    ap.add_argument("--quick", action="store_true",
                    help=f"{len(QUICK_RUNS)} runs, 1 rep, {QUICK_SCALE}x iterations")
    ap.add_argument("--reps", type=int, help=f"repetitions of each figure (default {REPS}, quick 1)")
    ap.add_argument("--filter", help="regular expression over run/figure ids (see 'plan')")
    ap.add_argument("--paths", default=",".join(PATHS), help="loopback,veth")
    ap.add_argument("--drivers", default="c,rust", help="c,rust")
    ap.add_argument("--iters-scale", type=float, default=1.0, help="scale every -n")
    ap.add_argument("--run-timeout", type=int, default=RUN_TIMEOUT,
                    help=f"seconds before one perftest run is n/a (default {RUN_TIMEOUT})")
    ap.add_argument("--no-probe", action="store_true",
                    help="do not skip a path whose short probe write fails")
    ap.add_argument("--profile", action="store_true",
                    help="run each figure once more after its first repetition under "
                         "'perf record -a' (not counted); reports in $VM_OUT/profile")
    ap.add_argument("--baseline", metavar="KO",
                    help="a build of rdma_rxe_rust (.ko) in the C driver's place: an A/B of two "
                         "builds in one boot")


def fix_options(opts):
    if opts.reps is None:
        opts.reps = 1 if opts.quick else REPS
    opts.paths = [p for p in opts.paths.split(",") if p]
    opts.drivers = [d for d in opts.drivers.split(",") if d]
    bad = [p for p in opts.paths if p not in PATHS] + [d for d in opts.drivers if d not in DRIVERS]
    if bad or opts.reps < 1:
        sys.exit(f"rxe_bench: bad path/driver/reps: {bad or opts.reps}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="inside the VM: run the figures")
    add_run_options(r)
    r.add_argument("--out", help="raw JSON (default $VM_OUT/bench-raw.json)")
    r.add_argument("--memcpy", help="the memcpy_bw program (default $RXE_BUILD/bench/memcpy_bw)")
    r.add_argument("--label", default="", help="free text stored in the results")
    r.add_argument("-v", "--verbose", action="store_true", help="show output of failed runs")
    r.add_argument("--no-table", action="store_true", help="leave the table to 'report'")
    p = sub.add_parser("plan", help="list the runs and the time estimate")
    add_run_options(p)
    rep = sub.add_parser("report", help="table, JSON and SVG from a raw result")
    rep.add_argument("raw")
    rep.add_argument("--json")
    rep.add_argument("--svg")
    opts = ap.parse_args(argv)
    if opts.cmd == "report":
        return cmd_report(opts)
    fix_options(opts)
    return cmd_run(opts) if opts.cmd == "run" else cmd_plan(opts)


if __name__ == "__main__":
    sys.exit(main())
