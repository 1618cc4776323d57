#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Repeats rxe_rust_traffic.py's 256 MiB whole-region WRITE and READ, watching the slab.

A debugging aid for the open whole-region failure (datapath document), not a
test. Each argument is DRIVER*N: load DRIVER, add rxe0 on eth0, run the
scenario N times, remove both. Without FULL=1 a scenario is the big-region
one alone (1 MiB WRITEs and READs at both ends of a 256 MiB region, then the
whole region); with FULL=1 it is the traffic suite's whole scenario for that
driver. Once a second it samples the slab and, whenever it rose by 100 MiB,
prints the eight largest caches of /proc/slabinfo; after each scenario it
prints the port counters and the queue pairs. Checks print as they happen.

Run in the debug VM from the repository's top (about 3 minutes per scenario
of rdma_rxe_rust, 5 of rdma_rxe):

  scripts/vm-run --timeout 3000 --out DIR -- \
      env FULL=1 python3 tools/rxe-debug/whole_region.py 'rdma_rxe*1' 'rdma_rxe_rust*8'

With VM_APPEND=slub_debug=U,kmalloc-2k in scripts/vm-run's environment, each
rise also prints the allocation sites of kmalloc-2k with the most live objects
(/sys/kernel/debug/slab/kmalloc-2k/alloc_traces), with their stacks.
"""
import os, sys, time, subprocess, threading
sys.path.insert(0, "tools/testing/selftests/rdma")
import rxe_rust_traffic as T
from pyverbs.device import Context

def slabinfo_top():
    rows = []
    for line in open("/proc/slabinfo").read().splitlines()[2:]:
        f = line.split()
        rows.append((int(f[2]) * int(f[3]), f[0], int(f[1]), int(f[2])))
    rows.sort(reverse=True)
    return "\n".join(f"  {n:>24} active {a:>8} total {t:>8} {b>>20} MiB" for b, n, a, t in rows[:8])

TRACES = "/sys/kernel/debug/slab/kmalloc-2k/alloc_traces"


def alloc_traces(n=3, depth=10):
    """The n allocation sites of kmalloc-2k with the most live objects, each with its stack
    (only with slub_debug=U,kmalloc-2k; empty otherwise)."""
    if not os.path.exists(TRACES):
        return ""
    entries, cur = [], None
    for line in open(TRACES).read().splitlines():
        head = line.split(maxsplit=1)
        if len(line) - len(line.lstrip()) < 8 and head and head[0].isdigit():
            cur = [int(head[0]), [line.strip()]]
            entries.append(cur)
        elif cur is not None and len(cur[1]) <= depth:
            cur[1].append("    " + line.strip())
    entries.sort(key=lambda e: -e[0])
    return "\n".join("   alloc " + "\n         ".join(e[1]) for e in entries[:n])


def dump(tag):
    print(f"## {tag} slab {T.slab_kib()>>10} MiB", flush=True)
    print(slabinfo_top(), flush=True)
    print(subprocess.run(["rdma", "statistic", "show", "link", f"{T.DEV}/1"], capture_output=True, text=True).stdout, flush=True)
    print(subprocess.run(["rdma", "res", "show", "qp", "link", f"{T.DEV}/1", "-d"], capture_output=True, text=True).stdout, flush=True)

def one(drv, i):
    ctx = Context(name=T.DEV)
    p = T.Pair(ctx)
    p.connect(p.a, p.b.qp_num)
    p.connect(p.b, p.a.qp_num)
    fails0 = T.RES.failed if hasattr(T.RES, "failed") else None
    t0 = time.time()
    stop = threading.Event()
    def watch():
        high = 0
        while not stop.wait(1.0):
            s = T.slab_kib() >> 10
            if s > high + 100:
                high = s
                print(f"   [t+{time.time()-t0:.0f}s] slab {s} MiB", flush=True)
                print(slabinfo_top(), flush=True)
                print(alloc_traces(), flush=True)
    th = threading.Thread(target=watch); th.start()
    try:
        if os.environ.get("FULL"):
            for o in (p.a, p.b, p.cq, p.pd):
                o.close()
            T.scenario(drv)
            p = None
        else:
            T.big_region_scenario(drv, p)
    finally:
        stop.set(); th.join()
    dump(f"iteration {i} end (QPs alive)")
    if p:
        for o in (p.a, p.b, p.cq, p.pd):
            o.close()
    ctx.close()
    print(f"## iteration {i} done in {time.time()-t0:.0f} s, slab after destroy {T.slab_kib()>>10} MiB", flush=True)

orig = T.RES.check
def check(desc, ok, diag=""):
    print(f"{'ok' if ok else 'NOT OK'}: {desc} {diag if not ok else ''}", flush=True)
    orig(desc, ok, diag)
T.check = check
for spec in sys.argv[1:]:
    drv, _, n = spec.partition("*")
    subprocess.run(["modprobe", drv], check=True)
    subprocess.run(["rdma", "link", "add", T.DEV, "type", "rxe", "netdev", "eth0"], check=True)
    dump(f"start {drv}")
    for i in range(int(n or 1)):
        one(drv, i)
    subprocess.run(["rdma", "link", "del", T.DEV])
    subprocess.run(["rmmod", drv])
T.RES.report()
