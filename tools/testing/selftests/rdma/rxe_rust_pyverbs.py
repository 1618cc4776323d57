#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's python suite (pyverbs tests) against rdma_rxe and rdma_rxe_rust.

Runs inside the test VM, as root, with eth0 up. Copies the suite that
Debian's python3-pyverbs ships (/usr/share/doc/rdma-core/tests, partly
gzipped) to a temporary folder, then for each driver in turn (rdma_rxe, the
C reference, then rdma_rxe_rust): modprobe it, `rdma link add rxe0 type rxe
netdev eth0`, run `/usr/bin/python3 run_tests.py --dev rxe0 --gid 1 -v`
twice, each under a time-out (first the object-level modules of issue 3:
test_device, test_pd, test_cq, test_mr, test_qp, test_srq, test_cqex; then
the rest of the suite), record every test's outcome, `rdma link del rxe0`,
unload. Each test runs once per driver.

Prints KTAP: one test line per pyverbs test that the C driver passes, "ok"
when rdma_rxe_rust passes it too. A test named in the expected-failures file
(rxe_rust_pyverbs.xfail, one test id per line, each with a "# reason") is
reported "ok ... # XFAIL reason" while it fails, and "not ok" with a
diagnostic once it passes (remove it from the list then). Tests the C driver
does not pass are only listed as "#" diagnostics. A "#" table compares both
drivers per module; it is also written to $VM_OUT/pyverbs-summary.txt, next
to each driver's verbose log. Exit status 0 iff there is no "not ok".

The outcomes come from unittest itself: the suite's run_tests.py runs in a
child interpreter (this file with --child) that records each test's start
and result, one JSON line at a time, so a run cut by the time-out still
tells which test hung and which never ran.

Usage: rxe_rust_pyverbs.py [--scope objects|all] [--timeout S] [--xfail FILE]
                           [--modules M1,M2,...]
(RXE_PYVERBS_SCOPE and RXE_PYVERBS_TIMEOUT set the defaults of the first two.)
Under TCG the C driver needs about 16 s for the object modules and 11 s for
the rest.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUITE = "/usr/share/doc/rdma-core/tests"
PYTHON = "/usr/bin/python3"
DRIVERS = ("rdma_rxe", "rdma_rxe_rust")
C_DRIVER, RUST_DRIVER = DRIVERS
LABEL = {C_DRIVER: "C", RUST_DRIVER: "Rust"}
# The object-level modules of issue 3.
OBJECT_MODULES = ("test_device", "test_pd", "test_cq", "test_mr", "test_qp",
                  "test_srq", "test_cqex")
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_XFAIL = os.path.join(HERE, "rxe_rust_pyverbs.xfail")

PASS, FAIL, ERROR, SKIP, TIMEOUT, NOTRUN = (
    "ok", "FAIL", "ERROR", "skipped", "TIMEOUT", "not run")


# ---------------------------------------------------------------- child side

def child(results, argv):
    """Run the suite's run_tests.py with argv, appending outcomes to results."""
    import runpy
    import unittest

    out = open(results, "a", buffering=1)

    def emit(kind, test, detail=""):
        # A subtest or a class/module fixture error reports under its parent.
        case = getattr(test, "test_case", test)
        out.write(json.dumps({"id": case.id(), "kind": kind,
                              "detail": str(detail)[-4000:]}) + "\n")

    base = unittest.TextTestResult

    class Recording(base):
        def startTest(self, test):
            emit("start", test)
            super().startTest(test)

        def addSuccess(self, test):
            emit(PASS, test)
            super().addSuccess(test)

        def addFailure(self, test, err):
            emit(FAIL, test, self._exc_info_to_string(err, test))
            super().addFailure(test, err)

        def addError(self, test, err):
            emit(ERROR, test, self._exc_info_to_string(err, test))
            super().addError(test, err)

        def addSkip(self, test, reason):
            emit(SKIP, test, reason)
            super().addSkip(test, reason)

        def addExpectedFailure(self, test, err):
            emit(PASS, test, "expected failure")
            super().addExpectedFailure(test, err)

        def addUnexpectedSuccess(self, test):
            emit(FAIL, test, "unexpected success")
            super().addUnexpectedSuccess(test)

        def addSubTest(self, test, subtest, err):
            if err is not None:
                kind = FAIL if issubclass(err[0], test.failureException) else ERROR
                emit(kind, subtest, f"{subtest}: " + self._exc_info_to_string(err, test))
            super().addSubTest(test, subtest, err)

    unittest.TextTestRunner.resultclass = Recording
    # As `python3 run_tests.py` would: an absolute __file__, its folder first
    # on the path (run_tests.py finds the suite's __init__.py from __file__).
    argv = [os.path.abspath(argv[0])] + argv[1:]
    sys.path.insert(0, os.path.dirname(argv[0]))
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


# --------------------------------------------------------------- parent side

def sh(*cmd, check=True, timeout=60):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stdout.strip()}")
    return p.stdout


def loaded(module):
    with open("/proc/modules") as f:
        return any(line.split(" ", 1)[0] == module for line in f)


def unload_all():
    out = sh("rdma", "link", "show", check=False)
    for line in out.splitlines():
        # "link rxe0/1 state ACTIVE ..."
        parts = line.split()
        if len(parts) > 1 and parts[0] == "link":
            sh("rdma", "link", "del", parts[1].split("/")[0], check=False)
    for m in DRIVERS:
        if loaded(m):
            sh("rmmod", m, check=False)


def copy_suite(dst):
    """The suite as Debian ships it, with its .py.gz files unpacked."""
    tests = os.path.join(dst, "tests")
    os.makedirs(tests)
    for name in os.listdir(SUITE):
        src = os.path.join(SUITE, name)
        if name.endswith(".py.gz"):
            with gzip.open(src, "rb") as fi, open(os.path.join(tests, name[:-3]), "wb") as fo:
                shutil.copyfileobj(fi, fo)
        elif os.path.isfile(src):
            shutil.copy(src, tests)
    return tests


def run_pass(driver, tests, name, modules, timeout, outdir):
    """One run_tests.py run on rxe0 under a time-out.

    Returns (outcomes {id: (outcome, detail)}, ids in run order, seconds,
    problems)."""
    problems = []
    results = os.path.join(outdir, f"pyverbs-{driver}-{name}.jsonl")
    log = os.path.join(outdir, f"pyverbs-{driver}-{name}.log")
    open(results, "w").close()
    start = time.monotonic()
    cmd = [PYTHON, os.path.abspath(__file__), "--child", results, "--",
           "run_tests.py", "--dev", "rxe0", "--gid", "1", "-v", *modules]
    with open(log, "w") as lf:
        p = subprocess.Popen(cmd, cwd=tests, stdout=lf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
            # 0: all passed, 1: some failed; anything else, or no closing
            # "Ran N tests" line, is a crash of the suite.
            with open(log, errors="replace") as f:
                ran = re.search(r"^Ran \d+ tests? in ", f.read(), re.M)
            if rc not in (0, 1) or not ran:
                problems.append(f"{name}: run_tests.py exited {rc} without finishing "
                                f"(see {os.path.basename(log)})")
        except subprocess.TimeoutExpired:
            problems.append(f"{name}: time-out, the run was killed after {timeout} s")
        # Children the suite forked (multiprocessing) die with the group.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    elapsed = time.monotonic() - start

    outcomes, order, started = {}, [], None
    rank = {PASS: 0, SKIP: 1, FAIL: 2, ERROR: 3}
    with open(results) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            tid, kind = short(ev["id"]), ev["kind"]
            if kind == "start":
                started = tid
                continue
            if tid not in outcomes:
                order.append(tid)
            old = outcomes.get(tid)
            # Subtests: any failure fails the test; a pass beats a skip.
            if old is None or rank[kind] > rank[old[0]] or \
                    (old[0] == SKIP and kind == PASS):
                outcomes[tid] = (kind, ev["detail"])
            if tid == started:
                started = None
    if not outcomes and not problems:
        problems.append(f"{name}: no test ran")
    if started is not None and any("time-out" in p for p in problems):
        order.append(started)
        outcomes[started] = (TIMEOUT, "this test was running when the time-out hit")
    return outcomes, order, elapsed, problems


def run_driver(driver, tests, passes, timeout, outdir):
    """Load the driver, add rxe0, run every pass, remove rxe0, unload."""
    outcomes, order, problems, times = {}, [], [], {}
    try:
        unload_all()
        sh("modprobe", driver)
        sh("rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "eth0")
        sh("ibv_devinfo", "-d", "rxe0")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        problems.append(f"setup failed: {e}")
    else:
        for name, modules in passes:
            if not modules:  # no names would run the whole suite
                continue
            o, od, t, pr = run_pass(driver, tests, name, modules, timeout, outdir)
            outcomes.update(o)
            order += od
            problems += pr
            times[name] = t
    try:
        unload_all()
        if loaded(driver):
            problems.append(f"{driver} could not be unloaded")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        problems.append(f"teardown failed: {e}")
    return outcomes, order, times, problems


def read_xfail(path):
    """{test id: reason} from the expected-failures file."""
    xfail = {}
    if not os.path.exists(path):
        return xfail
    with open(path) as f:
        for line in f:
            tid, _, reason = line.partition("#")
            tid = tid.strip()
            if tid:
                xfail[short(tid)] = reason.strip() or "expected to fail"
    return xfail


def short(tid):
    return tid[len("tests."):] if tid.startswith("tests.") else tid


def module_of(tid):
    parts = short(tid).split(".")
    # ErrorHolder ids look like "setUpClass (tests.test_x.Class)".
    for p in parts:
        p = p.split("(")[-1]
        if p.startswith("test_"):
            return p
    return parts[0]


def first_line(detail):
    lines = [l.strip() for l in detail.strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def bucket(outcome):
    return {PASS: "pass", SKIP: "skip"}.get(outcome, "fail")


def suite_modules():
    names = set()
    for n in os.listdir(SUITE):
        for ext in (".py", ".py.gz"):
            if n.startswith("test_") and n.endswith(ext):
                names.add(n[:-len(ext)])
    return sorted(names)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scope", choices=("objects", "all"),
                    default=os.environ.get("RXE_PYVERBS_SCOPE", "all"),
                    help="only the object-level modules of issue 3, or then the rest "
                         "of the suite too (default)")
    ap.add_argument("--modules", help="comma-separated modules to run (overrides --scope)")
    ap.add_argument("--timeout", type=int,
                    default=int(os.environ.get("RXE_PYVERBS_TIMEOUT", 130)),
                    help="seconds for each run_tests.py run (default 130; there are "
                         "two per driver with --scope all)")
    ap.add_argument("--xfail", default=DEFAULT_XFAIL)
    args = ap.parse_args()

    print("TAP version 13", flush=True)
    if os.geteuid() != 0 or not os.path.isdir(SUITE):
        print(f"1..0 # SKIP needs root and {SUITE} (python3-pyverbs)")
        return 4
    present = suite_modules()
    if args.modules:
        wanted = [m.strip() for m in args.modules.split(",") if m.strip()]
        passes = [("modules", [m for m in wanted if m in present])]
    else:
        wanted = list(OBJECT_MODULES)
        passes = [("objects", [m for m in wanted if m in present])]
        if args.scope == "all":
            passes.append(("rest", [m for m in present if m not in OBJECT_MODULES]))
    # rdma-core 44 (Debian 12) has no test_srq yet.
    missing = [m for m in wanted if m not in present]
    if missing:
        print(f"# not in this rdma-core's suite, not run: {', '.join(missing)}")
    object_modules = set(OBJECT_MODULES)

    vm_out = os.environ.get("VM_OUT")
    tmp = tempfile.mkdtemp(prefix="rxe-pyverbs.")
    outdir = vm_out or tmp
    runs = {}
    try:
        tests = copy_suite(tmp)
        for drv in DRIVERS:
            runs[drv] = run_driver(drv, tests, passes, args.timeout, outdir)
            print(f"# {drv}: {len(runs[drv][0])} tests, "
                  + ", ".join(f"{n} {t:.0f} s" for n, t in runs[drv][2].items()), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            unload_all()
        except subprocess.TimeoutExpired:
            pass  # reported by run_driver's teardown check

    c_out, c_order, c_times, c_problems = runs[C_DRIVER]
    r_out, r_order, r_times, r_problems = runs[RUST_DRIVER]
    xfail = read_xfail(args.xfail)
    xname = os.path.basename(args.xfail)

    lines = []  # (KTAP test line, diagnostics)
    diags = []  # tests the C driver does not pass
    npass = nfail = nxfail = 0
    xfailed = {}  # module: count
    for tid in c_order:
        c, cdet = c_out[tid]
        r, rdet = r_out.get(tid, (NOTRUN, "the run stopped before it"))
        if c != PASS:
            why = cdet if c == SKIP else first_line(cdet)
            diags.append(f"# {C_DRIVER} {c}: {tid}" + (f": {why}" if why else "")
                         + f" [{RUST_DRIVER}: {r}]")
            continue
        n = len(lines) + 1
        if r == PASS and tid in xfail:
            nfail += 1
            lines.append((f"not ok {n} {tid}",
                          [f"# {tid} now passes on {RUST_DRIVER}: remove it from {xname}"]))
        elif r == PASS:
            npass += 1
            lines.append((f"ok {n} {tid}", []))
        elif tid in xfail:
            nxfail += 1
            xfailed[module_of(tid)] = xfailed.get(module_of(tid), 0) + 1
            lines.append((f"ok {n} {tid} # XFAIL {xfail[tid]}", []))
        else:
            nfail += 1
            if r in (SKIP, NOTRUN, TIMEOUT):
                det = [f"# {RUST_DRIVER}: {r}: {rdet}"]
            else:
                det = [f"# {RUST_DRIVER}: {r}"]
                det += [f"#   {l}" for l in rdet.rstrip().splitlines()[-12:]]
            lines.append((f"not ok {n} {tid}", det))

    # Each driver's runs must have happened in full.
    for drv, problems in ((C_DRIVER, c_problems), (RUST_DRIVER, r_problems)):
        desc = f"{drv}: rxe0 set up, the suite ran to its end, the driver unloaded"
        if problems:
            nfail += 1
            lines.append((f"not ok {len(lines) + 1} {desc}", [f"# {p}" for p in problems]))
        else:
            npass += 1
            lines.append((f"ok {len(lines) + 1} {desc}", []))

    def when(times):
        return ", ".join(f"{n} {t:.0f} s" for n, t in times.items()) or "did not run"
    print(f"1..{len(lines)}")
    print(f"# pyverbs in one VM: {C_DRIVER} {len(c_out)} tests ({when(c_times)}), "
          f"{RUST_DRIVER} {len(r_out)} tests ({when(r_times)})")
    for line, det in lines:
        print(line)
        for d in det:
            print(d)
    print(f"# tests {C_DRIVER} does not pass (not reported as tests):")
    for d in diags:
        print(d)
    ran = set(c_out) | set(r_out)
    modules = {m for _, ms in passes for m in ms}
    for tid in sorted(xfail):
        if tid not in ran and module_of(tid) in modules:
            print(f"# stale entry in {xname}: {tid} did not run")
        elif tid in c_out and c_out[tid][0] != PASS:
            print(f"# entry in {xname} that {C_DRIVER} does not pass: {tid}")

    # Per-module comparison; "*" marks the object-level modules of issue 3.
    zero = {"pass": 0, "fail": 0, "skip": 0}
    table = {}
    for drv, outcomes in ((C_DRIVER, c_out), (RUST_DRIVER, r_out)):
        for tid, (o, _) in outcomes.items():
            row = table.setdefault(module_of(tid), {d: dict(zero) for d in DRIVERS})
            row[drv][bucket(o)] += 1
    for tid in c_out:
        if tid not in r_out:  # never ran on ours: a failure
            table[module_of(tid)][RUST_DRIVER]["fail"] += 1

    def cell(c):
        return f"{c['pass']}/{c['fail']}/{c['skip']}"
    hdr = f"{'module':<24} {'C pass/fail/skip':>17} {'Rust pass/fail/skip':>20} {'xfail':>6}"
    summary = [f"pyverbs (rdma-core tests), both drivers in one VM run; * = issue 3 object module",
               f"time: {C_DRIVER} {when(c_times)}; {RUST_DRIVER} {when(r_times)}",
               hdr, "-" * len(hdr)]
    groups = [("object modules", lambda m: m in object_modules),
              ("other modules", lambda m: m not in object_modules)]
    for gname, member in groups:
        mods = [m for m in sorted(table) if member(m)]
        if not mods:
            continue
        tot = {d: dict(zero) for d in DRIVERS}
        for mod in mods:
            row = table[mod]
            for d in DRIVERS:
                for k in zero:
                    tot[d][k] += row[d][k]
            star = "*" if mod in object_modules else " "
            summary.append(f"{star}{mod:<23} {cell(row[C_DRIVER]):>17} "
                           f"{cell(row[RUST_DRIVER]):>20} {xfailed.get(mod, 0):>6}")
        nx = sum(xfailed.get(m, 0) for m in mods)
        summary.append(f" {'= ' + gname:<23} {cell(tot[C_DRIVER]):>17} "
                       f"{cell(tot[RUST_DRIVER]):>20} {nx:>6}")
        summary.append("-" * len(hdr))
    if missing:
        summary.append(f"not in this rdma-core's suite ({SUITE}), not run: {', '.join(missing)}")
    summary.append(f"KTAP: {npass} ok, {nxfail} xfail (listed in {xname}), {nfail} not ok")
    for line in summary:
        print(f"# {line}")
    if vm_out:
        with open(os.path.join(vm_out, "pyverbs-summary.txt"), "w") as f:
            f.write("\n".join(summary) + "\n")
    print(f"# Totals: pass:{npass} fail:{nfail} xfail:{nxfail} xpass:0 skip:0 error:0")
    return 1 if nfail else 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--child" and sys.argv[3] == "--":
        child(sys.argv[2], sys.argv[4:])
    else:
        sys.exit(main())
