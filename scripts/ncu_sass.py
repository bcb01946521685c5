#!/usr/bin/env python3
"""Instruction by instruction from an Nsight Compute source export (ncu --import REP --page source --print-source
sass --csv, of a report with the SourceCounters section): executed warp instructions by opcode and the SASS lines
with the most stall samples. Used by scripts/gpu-profile.sh and bench/gpu-profile-gemv.sh.
  ncu_sass.py FILE.csv"""
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
starts = [i for i, r in enumerate(rows) if r[0] == "Address"]  # the first row names the kernel
if not starts: sys.exit("no SASS rows")
head, rows = rows[starts[0]], rows[starts[0]:]
def col(*words):
    for i, h in enumerate(head):
        if all(w.lower() in h.lower() for w in words): return i
    return None
src, ex, st = col("source"), col("instructions executed"), col("stall sampling", "all")
if None in (src, ex): sys.exit("no Source / Instructions Executed columns: " + str(head[:14]))
def num(r, i):
    try: return float(r[i].replace(",", "")) if i is not None else 0.0
    except ValueError: return 0.0
body = rows[1:]
total = sum(num(r, ex) for r in body) or 1
samples = sum(num(r, st) for r in body) or 1
ops = collections.Counter()
for r in body: ops[r[src].split()[0].split(".")[0] if r[src].split() else "?"] += num(r, ex)
print("executed warp instructions:", int(total), " stall samples:", int(samples))
print("by opcode:", ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in ops.most_common(14)))
print("most stall samples:")
for r in sorted(body, key=lambda r: -num(r, st))[:20]:
    print(f"  {100 * num(r, st) / samples:5.1f}% {num(r, ex):9.0f} exec  {r[src][:90]}")
