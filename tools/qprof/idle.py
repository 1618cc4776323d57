#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where each CPU idles during one perftest run, from guest_hops.sh's events.

Only the traffic counts, from the run's first packet event to its last. An
idle interval runs from a switch to the idle task until the next event
on that CPU (a packet received in the idle task's softirq, or a switch to a
task). For each CPU: the time idle, and by what ended the intervals (the
next event, and for a switch the task it ran), how often and for how long.
A CPU that waits, idle, for the other's work shows which hand-off it waits
for: a worker woken, a packet, the user's process. It is not a speed claim
(tracing slows both drivers); compare the drivers in one boot.

    scripts/vm-run --plain --out DIR -- env RUNS="ib_atomic_bw -n 3000" \\
        bash tools/qprof/guest_hops.sh
    python3 tools/qprof/idle.py DIR/hops-*.txt
"""
import collections
import re
import sys

from wqlat import pct, read_trace

LINE = re.compile(r"\[(\d+)\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")


def task(comm):
    """A task's name without its number (kworker/u8:3 -> kworker)."""
    return re.sub(r"[/:-]?\d.*$", "", comm) or comm


def report(path):
    title, lines = read_trace(path)
    events = []  # (time, cpu, what, next task or None)
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        cpu, ts, event, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        nxt = None
        if event == "sched_switch":
            f = dict(FIELD.findall(rest.replace(" ==> ", " ")))
            nxt = f.get("next_comm", "?")
        events.append((ts, cpu, event, nxt))
    print(title)
    if len(events) < 2:
        print("  no events")
        return
    events.sort()
    # The run's traffic: from its first packet to its last (the set-up before is idle too).
    packets = [e[0] for e in events if e[2] in ("net_dev_start_xmit", "netif_receive_skb")]
    if len(packets) < 2:
        print("  no packets")
        return
    lo, hi = packets[0], packets[-1]
    events = [e for e in events if lo <= e[0] <= hi]
    span = hi - lo
    idle_since = {}
    ended = collections.defaultdict(list)  # (cpu, ender) -> [durations]
    for ts, cpu, event, nxt in events:
        start = idle_since.pop(cpu, None)
        if start is not None:
            ender = f"switch to {task(nxt)}" if event == "sched_switch" else event
            ended[(cpu, ender)].append(ts - start)
        if event == "sched_switch" and nxt.startswith("swapper"):
            idle_since[cpu] = ts
    print(f"  {len(events)} events in {span * 1e3:.1f} ms of traffic ({len(packets)} packet events)")
    for cpu in sorted({c for c, _ in ended}):
        total = sum(sum(v) for (c, _), v in ended.items() if c == cpu)
        print(f"  cpu{cpu}: idle {total / span * 100:.0f} % of the run")
        rows = sorted(((sum(v), e, v) for (c, e), v in ended.items() if c == cpu), reverse=True)
        for t, e, v in rows[:6]:
            print(f"    ended by {e:32s} {len(v):6d} x, median {pct(v, 0.5) * 1e6:7.1f} us, "
                  f"90% {pct(v, 0.9) * 1e6:7.1f} us, {t / span * 100:4.1f} % of the run")


def main():
    for path in sys.argv[1:]:
        report(path)


if __name__ == "__main__":
    main()
