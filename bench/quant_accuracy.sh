#!/usr/bin/env bash
# quant_accuracy.sh [STEPS] [OUT]: the accuracy table of docs/inference.md
# ("Accuracy"): the built-in task trained for STEPS steps (default 1500)
# three times: without simulated quantization, and with every table's
# forward quantized to 256 (int8-like) or 16 (int4-like) buckets over
# [-0.5, 0.5]; each checkpoint exported at fp32, fp16, int8
# and int4 and scored on the held-out stream (65,536 samples, the
# evaluation's) with `ember predict`.  JSON lines to OUT (default
# bench/out/quant_accuracy.jsonl), then the table.  About 3 minutes on the
# project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps="${1:-1500}"
out="${2:-$repo/bench/out/quant_accuracy.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
# the built-in task's tables as a config (rows, pooling, Zipf 1.1, Adagrad
# lr 0.1), with and without simulated quantization
rows=(20000 10000 5000 2000 1000 500 200 100)
pool=(1 1 3 1 2 1 1 1)
for mode in plain simulated-256 simulated-16; do
    q=""
    [ "$mode" != plain ] && q="quantization = { num_buckets = ${mode#simulated-}; low = -0.5; high = 0.5; };"
    {
        echo "data = { alpha = 1.1; };"
        echo "train = { steps = $steps; metrics = \"\"; plot = \"\"; };"
        echo "tables = ("
        for i in 0 1 2 3 4 5 6 7; do
            echo "  { name = \"emb_$i\"; rows = ${rows[$i]}; dim = 16; optimizer = { kind = \"adagrad\"; lr = 0.1; }; $q },"
        done | sed '$ s/,$//'
        echo ");"
        echo "features = ("
        for i in 0 1 2 3 4 5 6 7; do
            echo "  { name = \"f$i\"; table = \"emb_$i\"; pooling = ${pool[$i]}; },"
        done | sed '$ s/,$//'
        echo ");"
    } >"$work/$mode.cfg"
    "$ember" train --config "$work/$mode.cfg" --checkpoint-dir "$work/$mode" --json |
        tail -1 | sed "s/^{/{\"bench\":\"quant_accuracy\",\"mode\":\"$mode\",\"encoding\":\"train-eval\",/" >>"$out"
    for enc in fp32 fp16 int8 int4; do
        "$ember" export "$work/$mode" "$work/$mode-$enc" --quantize "$enc" >/dev/null
        bytes=$(cat "$work/$mode-$enc"/table-*.rows | wc -c)
        "$ember" predict "$work/$mode-$enc" synthetic --json |
            sed "s/^{/{\"bench\":\"quant_accuracy\",\"mode\":\"$mode\",\"encoding\":\"$enc\",\"table_bytes\":$bytes,/" >>"$out"
    done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {r["mode"]: r for r in rows if r["encoding"] == "fp32"}
print("| training | encoding | table bytes | AUC | AUC - fp32 | log loss |")
print("|---|---|---|---|---|---|")
for r in rows:
    if r["encoding"] == "train-eval":
        continue
    b = base[r["mode"]]
    print(f'| {r["mode"]} | {r["encoding"]} | {r["table_bytes"]:,} | {r["auc"]:.5f} | {r["auc"] - b["auc"]:+.5f} | {r["logloss"]:.5f} |')
PY
