#!/usr/bin/env bash
# tiers.sh [DIR] [OUT]: the SSD tier's table in docs/PERFORMANCE.md ("Memory
# tiers"): W1 (8 x 1M x 64, Zipf, row-wise Adagrad) with caches of 5, 10 and
# 25 % of the table's rows + state under LRU, LFU and lookahead (with
# Belady's offline optimum on the same ids), W3 (10M x 128, uniform,
# Adagrad) with 10 %, and each workload's memory tier in the same session.
# 60 warm-up steps: the cache is full and its rows dirty before the 20 timed.
# Store files go to DIR (default .; a local disk, not tmpfs); JSON lines to
# OUT (default bench/out/tiers.jsonl).  About 30 minutes on the project
# machine; the device's own limits: bench/disk_limits.sh.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-.}"
out="${2:-$repo/bench/out/tiers.jsonl}"
ember="${EMBER:-$repo/build/ember}"
mkdir -p "$(dirname "$out")"
: >"$out"
common=(--threads 1 --iters 20 --warmup 60)
w1=(--preset W1 --optimizer rowwise_adagrad "${common[@]}")
w3=(--preset W3 --optimizer adagrad "${common[@]}")
table_w1=$((1000000 * (64 + 1) * 4))      # one table's rows + row-wise Adagrad state
table_w3=$((10000000 * (128 + 128) * 4))   # rows + Adagrad state
"$ember" bench "${w1[@]}" >>"$out"
for pct in 5 10 25; do
    for pol in lru lfu lookahead; do
        "$ember" bench "${w1[@]}" --storage ssd --ssd-dir "$dir" --cache-bytes $((table_w1 * pct / 100)) \
            --policy "$pol" --lookahead 16 --belady 1 --workload "W1-ssd-$pct" >>"$out"
    done
done
"$ember" bench "${w3[@]}" >>"$out"
for k in 16 40; do # uniform ids come back far apart: the window must reach them
    "$ember" bench "${w3[@]}" --storage ssd --ssd-dir "$dir" --cache-bytes $((table_w3 / 10)) \
        --policy lookahead --lookahead $k --belady 1 --workload "W3-ssd-10" >>"$out"
done
"$ember" bench "${w3[@]}" --storage ssd --ssd-dir "$dir" --cache-bytes $((table_w3 / 10)) \
    --policy lru --belady 1 --workload "W3-ssd-10" >>"$out"
