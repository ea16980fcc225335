#!/usr/bin/env python3
"""keymap_table.py OUT.jsonl: the key map table (docs/PERFORMANCE.md) from
bench/keymap.sh's JSON lines: per (operation, load, threads) the median over
rounds of each map's ns per key, and absl / ember (> 1: ember faster), for
absl with its default allocator and with huge pages (as ember's map)."""
import json
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
absl_load = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows[(d["op"], d["load"], d["threads"], d["impl"])].append(d["ns_per_key"])
    if d["impl"] == "absl":
        absl_load[(d["op"], d["load"], d["threads"])] = d["absl_load"]
impls = ("ember", "plain", "absl", "absl_thp")
print("| operation | load | threads | ember ns/key | plain C ns/key | absl ns/key (its load) "
      "| absl, huge pages, ns/key | absl / ember | absl huge pages / ember |")
print("|---|---|---|---|---|---|---|---|---|")
for op in ("find", "upsert"):
    for load in (0.5, 0.9, 0.95):
        for threads in (1, 2):
            med = {impl: statistics.median(rows[(op, load, threads, impl)])
                   for impl in impls if rows[(op, load, threads, impl)]}
            if len(med) < len(impls):
                continue
            print(f"| {op} | {load} | {threads} | {med['ember']:.1f} | {med['plain']:.1f} | "
                  f"{med['absl']:.1f} ({absl_load[(op, load, threads)]:.2f}) | {med['absl_thp']:.1f} | "
                  f"{med['absl'] / med['ember']:.2f} | {med['absl_thp'] / med['ember']:.2f} |")
