#!/usr/bin/env bash
# bigger_than_ram.sh [DIR]: trains a table whose rows + row-wise Adagrad
# state (52M x 128: 26.8 GB) are larger than the project machine's 24 GiB of
# memory, on the SSD tier with a 2 GiB cache, for 420 steps (20 warm-up +
# 400 timed) of 8192 samples x 20 Zipf(1.05) ids, and prints one JSON line
# (steps, step times, hit rate, I/O, peak RSS, the store file's bytes).  The
# store file (at most 40 GB: the rows' records and room for half as many
# again, reserved at creation) goes to DIR (default .) and is deleted at the
# end.  About 10 minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-.}"
exec "${EMBER:-$repo/build/ember}" bench --tables 1 --rows 52000000 --dim 128 --batch 8192 --pooling 20 \
    --dist zipf --alpha 1.05 --optimizer rowwise_adagrad --threads 1 --iters 400 --warmup 20 \
    --storage ssd --ssd-dir "$dir" --cache-bytes 2G --policy lookahead --max-gb 100 --workload bigger-than-ram
