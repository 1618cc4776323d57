#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Times each step of a ping-pong's chain from the traces of guest_chain.sh.

Usage: chain.py DIR/chain-N.txt... [--mhz F] [--show K]

For each trace: the client (the perftest process with the most write(2)
calls), then every event in time order that is the client's write(2) or any
other traced event, each labelled (an allocation by its call site, a packet
event by its netdevice, this driver's by its opcode). Prints, for each pair
of labels that follow each other at least a tenth as often as the doorbells,
how often and how long the step takes (median, 10th and 90th percentile, in
microseconds), and the whole chain of the doorbell with the median time to
the next one. The same pair of stack events (netif_rx then netif_receive_skb,
say) runs the same kernel code under either driver: compare those across
drivers as well as the drivers' own steps.
"""
import argparse
import os
import re
import statistics

LINE = re.compile(r'\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+):\s+(\w+):\s*(.*)')


def label(name, rest):
    """A short label for an event: what it is and the one field that tells it apart."""
    def field(key):
        m = re.search(key + r'=(\S+)', rest)
        return m.group(1) if m else '?'
    if name in ('kmalloc', 'kfree', 'kmem_cache_alloc'):
        return f"{name}({field('call_site').split('+')[0]})"
    if name.startswith('net_dev') or name.startswith('netif'):
        return f"{name}@{field('dev')}"
    if name in ('rxe_rust_xmit', 'rxe_rust_recv'):
        return f"{name}:{field('opcode')}"
    if name == 'sched_switch':
        return f"switch>{field('next_comm')}"
    if name == 'workqueue_execute_start':
        m = re.search(r'function (\S+)', rest)
        return f"work:{m.group(1) if m else '?'}"
    return name


def parse(path, mhz):
    lines = open(path, errors='replace').read().splitlines()
    title = lines[0] if lines and lines[0].startswith('#') else path
    ev = []
    for line in lines:
        m = LINE.match(line)
        if m:
            comm, pid, cpu, ts, name, rest = m.groups()
            ev.append((int(ts) / mhz, comm, int(pid), int(cpu), name, rest))
    return title, ev


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('traces', nargs='+')
    ap.add_argument('--mhz', type=float, help='TSC rate (default: tsc.txt beside the traces)')
    ap.add_argument('--show', type=int, default=1, help='example chains to print')
    a = ap.parse_args()
    for path in a.traces:
        mhz = a.mhz
        if mhz is None:
            try:
                txt = open(os.path.join(os.path.dirname(path), 'tsc.txt')).read()
                mhz = float(re.search(r'([0-9.]+) MHz', txt).group(1))
            except (OSError, AttributeError):
                mhz = 1000.0
        title, ev = parse(path, mhz)
        print(title)
        writes = {}
        for e in ev:
            if e[4] == 'sys_enter' and e[1].startswith('ib_'):
                writes[e[2]] = writes.get(e[2], 0) + 1
        if not writes:
            print('  no perftest write(2) in the trace')
            continue
        client = max(writes, key=writes.get)
        marks = []
        for t, comm, pid, cpu, name, rest in ev:
            if name.startswith('sys_'):
                if pid != client:
                    continue
                marks.append((t, name, cpu))
            else:
                marks.append((t, label(name, rest), cpu))
        steps = {}
        for x, y in zip(marks, marks[1:]):
            steps.setdefault((x[1], y[1]), []).append(y[0] - x[0])
        n = writes[client]
        print(f'  client pid {client}, {n} doorbells; steps seen at least {n // 10} times, us:')
        for (x, y), v in sorted(steps.items(), key=lambda kv: -len(kv[1])):
            if len(v) < n // 10:
                continue
            v.sort()
            k = len(v)
            print(f'  {k:6d}  med {v[k // 2]:7.2f}  p10 {v[k // 10]:7.2f}  p90 {v[9 * k // 10]:7.2f}'
                  f'  {x} > {y}')
        starts = [i for i, m in enumerate(marks) if m[1] == 'sys_enter']
        spans = [(marks[j][0] - marks[i][0], i, j) for i, j in zip(starts, starts[1:])]
        if not spans:
            continue
        med = statistics.median(s[0] for s in spans)
        for _, i, j in sorted(spans, key=lambda s: abs(s[0] - med))[:a.show]:
            print(f'  a chain of the median length ({med:.1f} us), from the doorbell:')
            t0 = marks[i][0]
            for t, lab, cpu in marks[i:j + 1]:
                print(f'    {t - t0:8.2f}  cpu{cpu}  {lab}')


if __name__ == '__main__':
    main()
