#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Attribute qprof dump counts to kernel / module symbols.

usage: symbolize.py [options] DUMP SYSTEM_MAP

DUMP is a qprof dump (<out>.N or <out>.final): a line "# total_insns T" then
lines "<vaddr hex> <n_insns> <exec_count>".  Each record contributes
n_insns*exec_count instructions to the text symbol with the greatest address
<= vaddr (System.map types t T w W; module .text symbols from nm, types t T).

With KASLR, pass --kaslr-offset (or boot the guest with nokaslr).

Origins: "user" (vaddr < --user-below, default 0xffff800000000000), one per
--module, "vmlinux", and "[unknown-kernel]" for kernel addresses outside
vmlinux's symbol range (no symbol <= vaddr, or above the highest System.map
address, e.g. modules not given with --module, vsyscall, trampolines).

stdlib only; needs `nm` (binutils) only for --module.
"""
import argparse
import bisect
import collections
import re
import subprocess
import sys

TEXT_TYPES_MAP = set("tTwW")
TEXT_TYPES_KO = set("tT")


class SymTab:
    """Sorted text symbols of one origin; lookup = greatest addr <= vaddr."""

    def __init__(self, origin):
        self.origin = origin
        self.addrs = []
        self.names = []
        self.lo = None   # origin's address range [lo, hi) used for routing
        self.hi = None

    def build(self, syms):
        # syms: iterable of (addr, name, is_global); keep one name per address,
        # preferring global symbols, then the first seen.
        best = {}
        for addr, name, glob in syms:
            cur = best.get(addr)
            if cur is None or (glob and not cur[1]):
                best[addr] = (name, glob)
        for addr in sorted(best):
            self.addrs.append(addr)
            self.names.append(best[addr][0])

    def lookup(self, vaddr):
        i = bisect.bisect_right(self.addrs, vaddr) - 1
        if i < 0:
            return None
        return self.names[i]


def load_system_map(path):
    tab = SymTab("vmlinux")
    syms = []
    max_any = 0
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) < 3:
                continue
            try:
                addr = int(parts[0], 16)
            except ValueError:
                continue
            typ, name = parts[1], parts[2]
            max_any = max(max_any, addr)
            if typ in TEXT_TYPES_MAP:
                syms.append((addr, name, typ.isupper()))
    tab.build(syms)
    if not tab.addrs:
        sys.exit("symbolize: no text symbols (t/T/w/W) in %s" % path)
    tab.lo = tab.addrs[0]
    tab.hi = max_any + 1     # highest address of any symbol (e.g. _end)
    return tab


def load_module(spec, all_text_sections):
    # NAME=TEXTBASE_HEX:KO_PATH
    m = re.match(r"^([^=]+)=(?:0x)?([0-9a-fA-F]+):(.+)$", spec)
    if not m:
        sys.exit("symbolize: bad --module '%s' (want NAME=TEXTBASE_HEX:KO_PATH)"
                 % spec)
    name, base, ko = m.group(1), int(m.group(2), 16), m.group(3)
    # `nm -n --defined-only` in SysV format also gives size and section, so
    # that symbols of other text sections (.init.text, .text.unlikely, ...),
    # whose values are relative to *their* section, are not placed at
    # TEXTBASE + value by mistake.
    cmd = ["nm", "-n", "--defined-only", "--format=sysv", ko]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("symbolize: %s failed: %s" % (" ".join(cmd), e))
    syms, end, skipped = [], 0, collections.Counter()
    for line in out.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 7 or not f[1]:
            continue
        try:
            val = int(f[1], 16)
        except ValueError:
            continue
        cls, size, sect = f[2], f[4], f[6]
        if cls not in TEXT_TYPES_KO:
            continue
        if sect != ".text" and not all_text_sections:
            skipped[sect] += 1
            continue
        syms.append((base + val, f[0], cls.isupper()))
        sz = int(size, 16) if size else 0
        end = max(end, val + max(sz, 1))
    if skipped:
        print("symbolize: module %s: ignored %d text symbols outside .text (%s);"
              " use --all-text-sections to place them at TEXTBASE+value anyway"
              % (name, sum(skipped.values()),
                 ", ".join("%s:%d" % kv for kv in skipped.most_common())),
              file=sys.stderr)
    tab = SymTab(name)
    tab.build(syms)
    if not tab.addrs:
        print("symbolize: warning: no .text symbols in %s" % ko, file=sys.stderr)
    tab.lo = base
    tab.hi = base + end
    return tab


def read_dump(path, acc):
    """Add a dump's records into acc[(vaddr, n)] (counts summed)."""
    header = None
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                p = line.split()
                if len(p) >= 3 and p[1] == "total_insns":
                    header = (header or 0) + int(p[2])
                continue
            p = line.split()
            if len(p) != 3:
                continue
            acc[(int(p[0], 16), int(p[1]))] += int(p[2])
    return header


def main():
    ap = argparse.ArgumentParser(
        description="Attribute qprof TB instruction counts to symbols.")
    ap.add_argument("dump", help="qprof dump file (<out>.N or <out>.final)")
    ap.add_argument("system_map", help="kernel System.map")
    ap.add_argument("--also", action="append", default=[], metavar="DUMP",
                    help="add the counts of another dump (repeatable)")
    ap.add_argument("--module", action="append", default=[],
                    metavar="NAME=TEXTBASE_HEX:KO_PATH",
                    help="module whose .text is loaded at TEXTBASE "
                         "(/sys/module/NAME/sections/.text); repeatable")
    ap.add_argument("--all-text-sections", action="store_true",
                    help="also use module t/T symbols outside .text "
                         "(placed at TEXTBASE+value; usually wrong)")
    ap.add_argument("-k", "--top", type=int, default=60,
                    help="number of symbols to print (default 60)")
    ap.add_argument("--per", type=float, default=None, metavar="N",
                    help="divide all counts by N and print per-unit figures")
    ap.add_argument("--grep", metavar="REGEX",
                    help="only list symbols whose name matches REGEX")
    ap.add_argument("--kaslr-offset", default="0", metavar="HEX",
                    help="runtime minus System.map address of the kernel "
                         "image (e.g. _text in /proc/kallsyms minus _text in "
                         "System.map); subtracted from non-module kernel "
                         "vaddrs. Default 0 (boot with nokaslr)")
    ap.add_argument("--user-below", default="ffff800000000000", metavar="HEX",
                    help="vaddrs below this are user space "
                         "(default ffff800000000000; 0 = none)")
    args = ap.parse_args()

    user_below = int(args.user_below, 16)
    kaslr = int(args.kaslr_offset, 16)
    vmlinux = load_system_map(args.system_map)
    modules = [load_module(s, args.all_text_sections) for s in args.module]
    modules.sort(key=lambda t: t.lo)

    recs = collections.Counter()
    header = read_dump(args.dump, recs)
    for extra in args.also:
        h = read_dump(extra, recs)
        header = None if header is None or h is None else header + h

    per_sym = collections.Counter()       # (origin, symbol) -> insns
    per_origin = collections.Counter()
    total = 0
    for (vaddr, n), cnt in recs.items():
        insns = n * cnt
        total += insns
        if vaddr < user_below:
            origin, sym = "user", "[user]"
        else:
            tab = None
            for mt in modules:
                if mt.lo <= vaddr < mt.hi:
                    tab = mt
                    break
            kv = vaddr
            if tab is None:
                kv = (vaddr - kaslr) & 0xffffffffffffffff
                if vmlinux.lo <= kv < vmlinux.hi:
                    tab = vmlinux
            if tab is None:
                origin, sym = "[unknown-kernel]", "[unknown-kernel]"
            else:
                origin = tab.origin
                sym = tab.lookup(kv) or "[%s:before-first-symbol]" % origin
        per_sym[(origin, sym)] += insns
        per_origin[origin] += insns

    if header is not None and header != total:
        print("symbolize: warning: header total_insns %d != sum of records %d"
              % (header, total), file=sys.stderr)

    div = args.per if args.per else 1.0
    unit = "insns/unit" if args.per else "insns"

    def fmt(v):
        return ("%.1f" % (v / div)) if args.per else "%d" % v

    def share(v):
        return 100.0 * v / total if total else 0.0

    print("# dump: %s%s" % (args.dump,
                            "".join(" + " + a for a in args.also)))
    print("# records: %d  total instructions: %d" % (len(recs), total))
    if args.per:
        print("# per unit (/%g): %.1f instructions" % (args.per, total / div))

    print("\n# by origin")
    print("%16s %7s  %s" % (unit, "share", "origin"))
    for origin, v in per_origin.most_common():
        print("%16s %6.2f%%  %s" % (fmt(v), share(v), origin))

    items = per_sym.most_common()
    if args.grep:
        rx = re.compile(args.grep)
        items = [it for it in items if rx.search(it[0][1])]
        sub = sum(v for _, v in items)
        print("\n# symbols matching /%s/: %d, together %s (%.2f%%)"
              % (args.grep, len(items), fmt(sub), share(sub)))
    print("\n# top %d symbols" % min(args.top, len(items)))
    print("%16s %7s %7s  %s" % (unit, "share", "cum", "symbol [origin]"))
    cum = 0
    for (origin, sym), v in items[:args.top]:
        cum += v
        where = "" if sym.startswith("[") else " [%s]" % origin
        print("%16s %6.2f%% %6.2f%%  %s%s"
              % (fmt(v), share(v), share(cum), sym, where))


if __name__ == "__main__":
    main()
