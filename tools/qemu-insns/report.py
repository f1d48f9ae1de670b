#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Kernel instructions per RPC, by function, two clients side by side.

The bench's PROFILER=insns (scripts/bench.sh): the QEMU plugin beside this
file snapshots how often each translation block of the guest's kernel ran,
at the start and the end of a fio job; the guest sends the RPCs of that
window and where its transport module's sections sit. This names each
block's code (System.map for the kernel, the module's own symbol table for
the module) and prints, per RPC, the instructions of the kernel, of the
transport module, and of the functions that differ most.

usage: report.py SYSTEM_MAP JOB NAME=DIR:KO NAME=DIR:KO [TOP]
"""

import bisect
import collections
import re
import subprocess
import sys


def kernel_symbols(path):
    syms = []
    with open(path) as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if kind in "tTwW":
                syms.append((int(addr, 16), name))
    syms.sort()
    return syms


def module_symbols(ko, bases):
    """FUNC symbols of KO placed at the guest's section BASES."""
    out = subprocess.run(["readelf", "-SW", ko], capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        line = line.replace("[ ", "[")
        if line.strip().startswith("["):
            parts = line.split()
            idx = parts[0].strip("[]")
            if idx.isdigit():
                names[idx] = parts[1]
    out = subprocess.run(["readelf", "-sW", ko], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        p = line.split()
        if len(p) < 8 or p[3] != "FUNC":
            continue
        sect = names.get(p[6])
        if sect in bases:
            syms.append((bases[sect] + int(p[1], 16), p[7]))
    syms.sort()
    return syms


def load_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            va, n, c = line.split()
            counts[(int(va, 16), int(n))] = int(c)
    return counts


def window(d, job):
    start = load_counts(f"{d}/insns-client-{job}_start.txt")
    stop = load_counts(f"{d}/insns-client-{job}_stop.txt")
    meta = open(f"{d}/insns-meta.txt").read().split("\n")
    rpcs, bases = 0, {}
    for line in meta:
        p = line.split()
        if len(p) == 3 and p[0] == "rpcs" and p[1] == job:
            rpcs = int(p[2])
        if len(p) == 5 and p[0] == "sect" and p[1] == job:
            bases[p[3]] = int(p[4], 16)
    return start, stop, rpcs, bases


def by_function(start, stop, syms):
    addrs = [a for a, _ in syms]
    per = collections.Counter()
    for (va, n), c in stop.items():
        ran = c - start.get((va, n), 0)
        if ran <= 0:
            continue
        i = bisect.bisect_right(addrs, va) - 1
        name = syms[i][1] if i >= 0 else "?"
        per[name] += ran * n
    return per


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines()))


def main():
    sysmap, job = sys.argv[1], sys.argv[2]
    sides = []
    for arg in sys.argv[3:5]:
        name, rest = arg.split("=", 1)
        d, ko = rest.split(":", 1)
        sides.append((name, d, ko))
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    ksyms = kernel_symbols(sysmap)
    results = []
    for name, d, ko in sides:
        start, stop, rpcs, bases = window(d, job)
        msyms = module_symbols(ko, bases)
        syms = sorted(ksyms + msyms)
        per = by_function(start, stop, syms)
        mod = {s for _, s in msyms}
        results.append((name, rpcs, per, mod))
    print(f"kernel instructions per RPC ({job}; QEMU plugin, exact counts)")
    for name, rpcs, per, mod in results:
        total = sum(per.values())
        own = sum(v for k, v in per.items() if k in mod)
        print(f"  {name:12} RPCs {rpcs:7}  kernel {total / max(rpcs, 1):9.0f}"
              f"  its module {own / max(rpcs, 1):7.0f}")
    (an, ar, ap, am), (bn, br, bp, bm) = results
    a = {k: v / max(ar, 1) for k, v in ap.items()}
    b = {k: v / max(br, 1) for k, v in bp.items()}
    keys = set(a) | set(b)
    diff = sorted(keys, key=lambda k: b.get(k, 0) - a.get(k, 0))
    names = demangle(sorted(keys))

    def show(title, sel):
        print(f"  {title}")
        for k in sel:
            x, y = a.get(k, 0), b.get(k, 0)
            print(f"  {y - x:+9.0f} {x:9.0f} {y:9.0f}  {short(names.get(k, k))}")

    print(f"  {'':>9} {an:>9} {bn:>9}")
    show(f"more under {bn}:", list(reversed(diff[-top:])))
    show(f"fewer under {bn}:", diff[:top // 2])
    show(f"{bn}'s own functions:", sorted((k for k in bm if b.get(k)), key=lambda k: -b[k])[:top])
    show(f"{an}'s own functions:", sorted((k for k in am if a.get(k)), key=lambda k: -a[k])[:top])


def short(name):
    """A demangled Rust name without its crate hashes."""
    return re.sub(r"\[[0-9a-f]*\]", "", name).replace("rpcrdma_rs_main::", "")


if __name__ == "__main__":
    main()
