# SPDX-License-Identifier: GPL-2.0
"""Shared helpers of the rdma_rxe_rust python selftests: results and KTAP."""

import os
import re
import subprocess
import time

DEV = "rxe0"
# What the kernel must not print (tests/run fails the whole run on the same), a Rust panic
# and a BUG_ON included.
BAD_LOG = re.compile(
    r"WARNING:|BUG:|Oops|general protection|refcount_t:|list_(add|del) corruption|"
    r"UBSAN|KASAN|Kernel panic|INFO: task .* blocked|ODEBUG:|"
    r"possible (circular|recursive) locking|inconsistent lock state|"
    r"suspicious RCU usage|unreferenced object|panicked at|stack-protector|kernel BUG|"
    r"rust_panic")


class Results:
    """Checks recorded in order and printed as KTAP."""

    def __init__(self):
        self.results = []
        self.last = time.monotonic()

    def check(self, desc, ok, diag=""):
        # The time since the previous check: tests/run lists the slowest.
        now = time.monotonic()
        self.results.append((bool(ok), desc, diag, now - self.last))
        self.last = now

    def skip(self, desc, reason):
        """A check not made, and why: KTAP's SKIP, which counts as neither passed nor failed."""
        self.results.append(("skip", desc, reason, 0))
        self.last = time.monotonic()

    def note(self, text):
        """A diagnostic line, printed in order among the results; not a check."""
        self.results.append((None, text, "", 0))

    def report(self):
        """Prints the KTAP report; returns the exit status."""
        print("TAP version 13")
        checks = [r for r in self.results if r[0] is not None]
        print(f"1..{len(checks)}")
        i = 0
        for ok, desc, diag, took in self.results:
            if ok is None:
                print(f"# {desc}")
                continue
            i += 1
            if ok == "skip":
                print(f"ok {i} {desc} # SKIP {diag}")
                continue
            print(f"{'ok' if ok else 'not ok'} {i} {desc}")
            print(f"# took {took:.0f} s")
            if diag:
                print(f"# {diag}")
        return 0 if all(r[0] for r in checks) else 1


def on_device(res, drv, scenario, netdev="eth0"):
    """Loads driver drv, adds DEV on netdev, runs scenario(drv), tears down.

    A scenario that raises is a failure, reported, not a crash of the test."""
    subprocess.run(["modprobe", drv], check=True)
    subprocess.run(["rdma", "link", "add", DEV, "type", "rxe", "netdev", netdev],
                   check=True)
    try:
        scenario(drv)
    except Exception as ex:
        res.check(f"{drv}: the scenario ran to its end", False, repr(ex))
    finally:
        subprocess.run(["rdma", "link", "del", DEV])
        subprocess.run(["rmmod", drv])


def log_marker():
    """Writes a marker into the kernel log; returns it."""
    mark = f"rxe_rust selftest: start {os.getpid()} {time.time()}"
    with open("/dev/kmsg", "w") as f:
        f.write(mark + "\n")
    return mark


def log_reports(mark):
    """Lines of the kernel log after mark that report a problem."""
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
    at = max((i for i, ln in enumerate(log) if mark in ln), default=-1)
    return [ln for ln in log[at + 1:] if BAD_LOG.search(ln)]
