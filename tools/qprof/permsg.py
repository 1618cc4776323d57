#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Per-message instructions: (window B - window A) / (NB - NA), by symbol.
usage: permsg.py DUMP_A DUMP_B NA NB SYSTEM_MAP [--module N=BASE:KO ...] [-k TOP]"""
import argparse, collections, importlib.util, os, sys
spec = importlib.util.spec_from_file_location("sym", os.path.join(os.path.dirname(__file__), "symbolize.py"))
S = importlib.util.module_from_spec(spec); spec.loader.exec_module(S)
ap = argparse.ArgumentParser()
ap.add_argument("a"); ap.add_argument("b"); ap.add_argument("na", type=int); ap.add_argument("nb", type=int)
ap.add_argument("system_map"); ap.add_argument("--module", action="append", default=[])
ap.add_argument("-k", "--top", type=int, default=50)
args = ap.parse_args()
vm = S.load_system_map(args.system_map)
mods = [S.load_module(m, False) for m in args.module]
def attribute(path):
    recs = collections.Counter(); S.read_dump(path, recs)
    per = collections.Counter(); org = collections.Counter()
    for (va, n), c in recs.items():
        ins = n * c
        if va < 0xffff800000000000:
            o, s = "user", "[user]"
        else:
            t = next((m for m in mods if m.lo <= va < m.hi), None)
            if t is None and vm.lo <= va < vm.hi: t = vm
            if t is None: o, s = "?", "[unknown]"
            else: o, s = t.origin, (t.lookup(va) or "?")
        per[(o, s)] += ins; org[o] += ins
    return per, org
pa, oa = attribute(args.a); pb, ob = attribute(args.b)
d = args.nb - args.na
print("# per message (%d msgs difference)" % d)
for o in sorted(set(oa) | set(ob)):
    print("%10.0f  %s" % ((ob[o] - oa[o]) / d, o))
k = sum((ob[o] - oa[o]) for o in ob if o != "user") / d
print("%10.0f  kernel total" % k)
diff = {s: (pb[s] - pa[s]) / d for s in set(pa) | set(pb)}
print("\n# top symbols (kernel), insns/msg")
for (o, s), v in sorted(diff.items(), key=lambda kv: -kv[1])[:args.top]:
    if o == "user": continue
    print("%10.1f  %s [%s]" % (v, s, o))
