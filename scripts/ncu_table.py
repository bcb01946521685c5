#!/usr/bin/env python3
"""One line a kernel from an Nsight Compute raw CSV (ncu --page raw --csv with the SpeedOfLight, WarpStateStats,
Occupancy, LaunchStats and SchedulerStats sections; dram__bytes_read/write.sum if collected): grid, registers,
dynamic shared memory, duration, DRAM and SM throughput, issue-slot use, warps a multiprocessor and the top stall
reasons. Used by scripts/gpu-profile.sh and bench/gpu-profile-gemv.sh.
  ncu_table.py FILE.csv"""
import csv, re, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
if len(rows) < 2: sys.exit("no ncu rows")
head = rows[0]; K = {h: i for i, h in enumerate(head)}
def num(r, k):
    try: return float(r[K[k]].replace(",", ""))
    except (KeyError, ValueError): return float("nan")
stall_cols = [(m.group(1), i) for i, h in enumerate(head)
              for m in [re.fullmatch(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio", h)] if m]
print(f'{"kernel":34} {"grid":>6} {"regs":>4} {"smem":>6} {"us":>7} {"dram%":>6} {"GB/s":>6} {"sm%":>5} {"iss%":>5} {"warps":>5}  top stalls (warps stalled per issue)')
for r in rows[1:]:
    if not r[K["ID"]].strip().isdigit(): continue
    name = re.sub(r"\(.*", "", r[K["Kernel Name"]]).replace("pareto::kernels::", "").replace("detail::", "")
    m = re.search(r"<[^,<]*?(\w+Format)<(\d)[^>]*>, (\d+)", r[K["Kernel Name"]])
    name = (m.group(1) + f"<{m.group(2)}> B={m.group(3)}") if m else name[:34]
    st = []
    for s, i in stall_cols:
        try: st.append((float(r[i].replace(",", "")), s))
        except ValueError: pass
    st = sorted(st, reverse=True)[:5]
    us = num(r, "gpu__time_duration.sum") / 1000
    dram = num(r, "dram__bytes_read.sum") + num(r, "dram__bytes_write.sum")
    print(f'{name[:34]:34} {num(r,"launch__grid_size"):6.0f} {num(r,"launch__registers_per_thread"):4.0f} '
          f'{num(r,"launch__shared_mem_per_block_dynamic")/1024:5.0f}K {us:7.2f} '
          f'{num(r,"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"):6.1f} {dram/us/1e3 if us else 0:6.0f} '
          f'{num(r,"sm__throughput.avg.pct_of_peak_sustained_elapsed"):5.1f} '
          f'{num(r,"smsp__issue_active.avg.pct_of_peak_sustained_active"):5.1f} '
          f'{num(r,"sm__warps_active.avg.per_cycle_active"):5.1f}  ' + " ".join(f"{s}={v:.2f}" for v, s in st))
