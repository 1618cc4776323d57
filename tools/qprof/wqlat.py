#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Work items of one perftest run, from guest_wqlat.sh's workqueue events.

For each work function: executions, the wait from queueing to the start of
its execution (the wake-up of a worker), how long it ran, and on which CPUs,
per perftest run (one file each). A work item queued again while it runs
(as rdma_rxe_rust's run does for more work) counts the rest of that run in
its wait. Long (Rust) names show their last 40 characters.

    python3 tools/qprof/wqlat.py DIR/wq-*.txt
"""
import collections
import re
import statistics
import sys

EVENT = re.compile(r"\[(\d+)\]\s.*?\s(\d+\.\d+): (workqueue_\w+): work struct[= ]?(\S+?):?\s.*?"
                   r"function[= ]?(\S+)")


def pct(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def read_trace(path):
    """Returns the title line (the run) of a trace guest_wqlat.sh or guest_hops.sh wrote, and
    its lines."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    return (lines[0] if lines and lines[0].startswith("#") else path), lines


def report(path):
    title, lines = read_trace(path)
    queued = collections.defaultdict(collections.deque)
    started = {}
    waits = collections.defaultdict(list)
    runs = collections.defaultdict(list)
    cpus = collections.defaultdict(collections.Counter)
    for line in lines:
        m = EVENT.search(line)
        if not m:
            continue
        cpu, ts, event, work, fn = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4), m.group(5)
        fn = fn.split("+")[0]
        if event == "workqueue_queue_work":
            queued[work].append(ts)
        elif event == "workqueue_execute_start":
            if queued[work]:
                waits[fn].append(ts - queued[work].popleft())
            started[work] = (ts, fn)
            cpus[fn][cpu] += 1
        elif event == "workqueue_execute_end" and work in started:
            t0, f0 = started.pop(work)
            runs[f0].append(ts - t0)
    print(title)
    print(f"  {'function':40} {'runs':>7} {'wait us p50/p90':>17} {'run us p50/mean':>17} "
          f"{'busy ms':>8}  cpus")
    for fn in sorted(runs, key=lambda f: -sum(runs[f])):
        r = runs[fn]
        w = waits[fn]
        print(f"  {fn[-40:]:40} {len(r):7} {pct(w, .5) * 1e6:8.0f}/{pct(w, .9) * 1e6:<8.0f} "
              f"{statistics.median(r) * 1e6:8.0f}/{statistics.mean(r) * 1e6:<8.0f} "
              f"{sum(r) * 1e3:8.1f}  "
              + " ".join(f"{c}:{n}" for c, n in sorted(cpus[fn].items())))


def main():
    for path in sys.argv[1:]:
        report(path)


if __name__ == "__main__":
    main()
