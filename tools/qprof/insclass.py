#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Kernel instructions per message by kind, from two qprof dumps.

Usage: insclass.py DUMP_A DUMP_B NA NB VMLINUX [--module KO=TEXTBASE] [--where MNEMONIC]

Disassembles vmlinux (and the module, placed at TEXTBASE as the guest
printed it) with objdump, walks every translation block counted in the dumps
(each block is its instructions from its address on), and prints
(run NB - run NA) / (NB - NA) executions per message of each mnemonic, and
those that cost TCG more than their count says: an interrupt enable (sti,
popf) ends a translation block, pause leaves the execution loop, xsave and
xrstor copy the FPU state. With --where, the functions whose blocks hold
that mnemonic, by executions per message.
"""
import argparse
import bisect
import collections
import subprocess

SELECTED = ["sti", "cli", "popf", "pushf", "xsave", "xrstor", "pause", "rdtsc",
            "lock", "call", "ret", "rep", "hlt", "swapgs", "wrmsr", "rdmsr", "iretq"]


def disassemble(path, base=None):
    cmd = ["objdump", "-d", "--no-show-raw-insn"]
    if base is not None:
        cmd += ["--adjust-vma=%#x" % base, "-j", ".text"]
    out = subprocess.run(cmd + [path], capture_output=True, text=True, check=True).stdout
    insns = {}
    for line in out.splitlines():
        addr, sep, rest = line.partition(":\t")
        if not sep:
            continue
        try:
            a = int(addr.strip(), 16)
        except ValueError:
            continue
        words = rest.split()
        insns[a] = words[0] if words else "?"
    return insns


def blocks(path):
    counts = {}
    for line in open(path):
        if line.startswith("#"):
            continue
        a, n, c = line.split()
        a = int(a, 16)
        if a < 0xffffffff80000000:
            continue
        prev = counts.get(a, (int(n), 0))
        counts[a] = (int(n), prev[1] + int(c))
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("na", type=int)
    ap.add_argument("nb", type=int)
    ap.add_argument("vmlinux")
    ap.add_argument("--module", help="KO=TEXTBASE")
    ap.add_argument("--where", help="list the functions holding this mnemonic")
    opts = ap.parse_args()
    insns = disassemble(opts.vmlinux)
    if opts.module:
        ko, base = opts.module.split("=")
        insns.update(disassemble(ko, int(base, 16)))
    order = sorted(insns)
    index = {a: i for i, a in enumerate(order)}
    syms = []
    nm = subprocess.run(["nm", "-n", opts.vmlinux], capture_output=True, text=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2]))
    keys = [s[0] for s in syms]
    a, b = blocks(opts.a), blocks(opts.b)
    per_msg = collections.Counter()
    where = collections.Counter()
    unmapped = 0.0
    for addr, (n, count) in b.items():
        per = (count - a.get(addr, (n, 0))[1]) / (opts.nb - opts.na)
        if per <= 0:
            continue
        i = index.get(addr)
        if i is None:
            unmapped += n * per
            continue
        for k in range(min(n, len(order) - i)):
            mn = insns[order[i + k]]
            per_msg[mn] += per
            if opts.where and mn == opts.where:
                j = bisect.bisect_right(keys, addr) - 1
                name = syms[j][1] if addr < 0xffffffffa0000000 and j >= 0 else "(module)"
                where[name] += per
    total = sum(per_msg.values())
    print("kernel instructions per message: %.0f (in blocks not disassembled: %.0f)" % (total, unmapped))
    for mn in SELECTED:
        v = sum(c for k, c in per_msg.items() if k == mn or k.startswith(mn))
        print("  %-8s %10.1f" % (mn, v))
    for name, v in where.most_common(15):
        print("  %s in %-40s %10.1f" % (opts.where, name, v))


if __name__ == "__main__":
    main()
