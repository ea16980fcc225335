#!/usr/bin/env python3
"""tiers_table.py [TIERS.jsonl] [DISK.jsonl]: the markdown table of
docs/PERFORMANCE.md ("Memory tiers") from bench/tiers.sh's JSON lines and
bench/disk_limits.sh's (defaults: bench/out/tiers.jsonl, bench/out/disk.jsonl).

Per SSD run: the cache budget as a share of the table's rows + state bytes
(the bench's workload label) and the rows it holds (the budget pays for the
bookkeeping too), hit rate and Belady's offline
optimum on the same ids, step time and its ratio to the memory tier's step
time measured in the same run, loads and write-backs per step, the I/O
operations per second while the step did I/O (reads + writes over the time
spent in synchronous I/O and waiting for background reads; a segment of the
store's log is one write), and that rate as a share of the disk's random
512-byte read limit with 32 threads."""
import json
import sys

tiers = sys.argv[1] if len(sys.argv) > 1 else "bench/out/tiers.jsonl"
disk = sys.argv[2] if len(sys.argv) > 2 else "bench/out/disk.jsonl"
limit = None
try:
    for line in open(disk):
        j = json.loads(line)
        if j["case"] == "randread_512_direct_psync32":
            limit = j["iops"]
except OSError:
    pass
memory = {}
rows = []
for line in open(tiers):
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    base = j["workload"].split("-")[0]
    if j.get("storage") != "ssd":
        memory[base] = j["ms_per_iter_median"]
        continue
    rows.append((base, j))
print("| workload | cache budget (rows held) | policy | hit rate | Belady | step ms | × memory step | loads/step "
      "(read ahead) | written rows/step | I/O ops/s | of the read limit |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for base, j in rows:
    rec = (j["dim"] + (j["dim"] if j["optimizer"] == "adagrad" else 1 if j["optimizer"] == "rowwise_adagrad" else 0)) * 4
    table_rows = j["tables"] * j["rows"]
    loads = j["demand_loads_per_iter"] + j["prefetch_loads_per_iter"]
    reads = j.get("reads_per_iter", j["read_bytes_per_iter"] / rec)
    writes = j["written_bytes_per_iter"] / rec
    # the store's log writes whole segments (older builds: one write per row)
    write_ops = j.get("segment_writes_per_iter", writes)
    io_s = (j["io_sync_ms_per_iter"] + j["io_wait_ms_per_iter"]) / 1e3
    ops = (reads + write_ops) / io_s if io_s > 0 else 0
    mem = memory.get(base)
    share = "%.0f %%" % (100 * ops / limit) if limit and ops else "-"
    pct = j["workload"].split("-")[-1]
    policy = j["policy"] + (" (window %d)" % j["lookahead"] if j["policy"] == "lookahead" else "")
    print("| %s | %s %% (%.1f %%: %s rows) | %s | %.1f %% | %.1f %% | %.0f | %s | %s (%s) | %s | %s | %s |" % (
        base, pct, 100.0 * j["cache_rows"] / table_rows, format(j["cache_rows"], ","), policy,
        100 * j["hit_rate"], 100 * j["belady_hit_rate"] if j.get("belady_hit_rate") is not None else float("nan"),
        j["ms_per_iter_median"], "%.3f" % (mem / j["ms_per_iter_median"]) if mem else "-",
        format(round(loads), ","), format(round(j["prefetch_loads_per_iter"]), ","), format(round(writes), ","),
        format(round(ops), ","), share))
for base, ms in memory.items():
    print("\nmemory tier, %s: %.1f ms per step" % (base, ms))
if limit:
    print("disk limit (random 512-byte direct reads, 32 threads): %s per second" % format(limit, ","))
