#!/usr/bin/env bash
# lookahead_window.sh [DIR] [OUT]: the SSD tier's lookahead window fixed and
# following the data (docs/PERFORMANCE.md, "A lookahead window that follows
# the data"; docs/tiers.md).  `ember bench`'s quick shape (8 tables x 100,000
# rows x 64, batch 1024 x 20 Zipf 1.05 ids, row-wise Adagrad) on the SSD
# tier with the lookahead policy, a cache of 2.6 steps' rows per table, 200
# timed steps after 20 of warm-up; then the same with ids that drift (the
# hot set moves 20,000 ranks every 50 batches).  Windows fixed at 1, 2, 4,
# 16 and 63, and following the data from 1 and from 16 up to 63
# (--lookahead-max), each with Belady's offline hit rate on the same ids.
# Store files go to DIR (default .; a local disk); JSON lines to OUT
# (default bench/out/lookahead_window.jsonl), then a table.  About 5 minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-.}"
out="${2:-$repo/bench/out/lookahead_window.jsonl}"
ember="${EMBER:-$repo/build/ember}"
mkdir -p "$(dirname "$out")"
: >"$out"
common=(--storage ssd --ssd-dir "$dir" --policy lookahead --cache-bytes 5404270 --belady 1 --buffered 1
        --optimizer rowwise_adagrad --threads 1 --iters 200 --warmup 20)
for drift in none rotate; do
    extra=()
    [ "$drift" = rotate ] && extra=(--drift rotate --drift-every 50 --drift-rows 20000)
    for w in "1" "2" "4" "16" "63" "1 63" "16 63"; do
        set -- $w
        args=(--lookahead "$1")
        [ $# -gt 1 ] && args+=(--lookahead-max "$2")
        "$ember" bench "${common[@]}" "${extra[@]}" "${args[@]}" --workload "quick-ssd-$drift" >>"$out"
    done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| ids | window | hit rate | Belady | window over the run (mean, min-max) | cold reloads / step | ms / step |")
print("|---|---|---:|---:|---|---:|---:|")
for r in rows:
    w = f"{r['lookahead']}" + (f" .. {r['lookahead_max']}, following" if r.get("lookahead_max") else ", fixed")
    ids = "drifting" if r.get("drift") else "Zipf"
    print(f"| {ids} | {w} | {r['hit_rate']:.4f} | {r['belady_hit_rate']:.4f} | {r['window_mean']:.1f}, {r['window_min']}-{r['window_max']} "
          f"| {r['cold_reloads_per_iter']:.0f} | {r['ms_per_iter_median']:.1f} |")
PY
