#!/usr/bin/env python3
"""Scores a split policy against `gemv_kernels sweep` CSVs: for every (format, batch, shape) the sweep timed, the time of
the split the policy chooses (bench/split_choices.cpp's CSV) against the best split timed, summed over a step (32
layers) as µs of loss. A choice the sweep did not time with the same chunks a split takes the time of its split count's
timed variant; one whose split count it never timed is reported, not scored.
  python3 bench/score-split-policy.py choices.csv sweep.csv [sweep2.csv ...] [--each]"""
import collections, csv, gzip, sys

args = [a for a in sys.argv[1:] if not a.startswith('--')]
if len(args) < 2:
    sys.exit(__doc__)
each = '--each' in sys.argv
opener = lambda p: gzip.open(p, 'rt') if p.endswith('.gz') else open(p)
timed = collections.defaultdict(dict)  # (format, batch, shape) -> {(splits, warps, blocks, chunks): µs}
for path in args[1:]:
    for r in csv.DictReader(opener(path)):
        key = (r['format'], int(r['batch']), r['shape'])
        split = (int(r['splits']), int(r['group_warps']), int(r['ring_blocks']), int(r['chunks_per_split']))
        timed[key][split] = float(r['us'])
loss = collections.defaultdict(float)
for r in csv.DictReader(opener(args[0])):
    key = (r['format'], int(r['batch']), r['shape'])
    if key not in timed:
        continue
    split = (int(r['splits']), int(r['group_warps']), int(r['ring_blocks']), int(r['chunks_per_split']))
    times = timed[key]
    us = times.get(split)
    if us is None:
        same = [t for s, t in times.items() if s[:3] == split[:3]]
        if not same:
            print(f"not timed: {key} {split}")
            continue
        us = min(same)
    best = min(times.values())
    loss[key[:2]] += 32 * (us - best)
    if each:
        print(f"{key[0]:22s} b{key[1]:<2d} {key[2]:8s} {split} {us:7.2f} µs, best {best:7.2f}")
for (f, b), v in sorted(loss.items()):
    print(f"{f:22s} b{b:<2d} loss {v:7.1f} µs a step")
print(f"total {sum(loss.values()):.1f} µs")
