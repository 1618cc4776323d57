#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Hops of one perftest run over the veth, from guest_hops.sh's events.

Each packet event is labelled by what it is: "tx DEV LEN" (its transmit on
the veth end DEV) or "rx DEV LEN" (its receive at DEV; LEN without the
Ethernet header). For each pair of labels that follow each other in time,
the table gives how often, the time between them (median and 90th
percentile) and how often the two were on different CPUs: in a ping-pong,
"tx qva -> rx qvb" is the wire, "rx qvb -> tx qvb" the responder's answer
and "rx qva -> tx qva" the requester's turn, from a response to its next
request (completion, the user's poll and post, the doorbell). Then, per
most frequent label (one per message, or per packet of a stream), the
context switches and the work items started in the run.

    python3 tools/qprof/hops.py DIR/hops-*.txt
"""
import collections
import re
import sys

from wqlat import pct, read_trace

LINE = re.compile(r"\[(\d+)\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
WORK = re.compile(r"function (\S+)")


def report(path):
    title, lines = read_trace(path)
    packets = []  # (time, cpu, label)
    switches = 0
    work = collections.Counter()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        cpu, ts, event, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if event in ("net_dev_start_xmit", "netif_receive_skb"):
            f = dict(FIELD.findall(rest))
            kind = "tx" if event == "net_dev_start_xmit" else "rx"
            packets.append((ts, cpu, f"{kind} {f.get('dev', '?')} {f.get('len', '?')}"))
        elif event == "sched_switch":
            switches += 1
        elif event == "workqueue_execute_start":
            w = WORK.search(rest)
            work[(w.group(1) if w else "?").split("+")[0][-40:]] += 1
    print(title)
    if len(packets) < 2:
        print("  no packets")
        return
    packets.sort()
    labels = collections.Counter(p[2] for p in packets)
    top, n = labels.most_common(1)[0]
    span = packets[-1][0] - packets[0][0]
    print(f"  {len(packets)} packet events in {span:.3f} s; most frequent: {top} ({n}), "
          f"one every {span / n * 1e6:.1f} us")
    hops = collections.defaultdict(list)
    cross = collections.Counter()
    for a, b in zip(packets, packets[1:]):
        key = (a[2], b[2])
        hops[key].append(b[0] - a[0])
        cross[key] += a[1] != b[1]
    print(f"  {'from':>18} -> {'to':18} {'count':>7} {'us p50':>8} {'p90':>8} {'other CPU':>9}")
    for key in sorted(hops, key=lambda k: -len(hops[k]))[:12]:
        v = hops[key]
        print(f"  {key[0]:>18} -> {key[1]:18} {len(v):7} {pct(v, .5) * 1e6:8.1f} "
              f"{pct(v, .9) * 1e6:8.1f} {100 * cross[key] / len(v):8.0f}%")
    print(f"  per {top}: {switches / n:.2f} context switches", end="")
    for fn, c in work.most_common(4):
        print(f", {c / n:.2f} {fn}", end="")
    print()


def main():
    for path in sys.argv[1:]:
        report(path)


if __name__ == "__main__":
    main()
