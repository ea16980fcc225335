#!/usr/bin/env bash
# quant_accuracy.sh [STEPS] [OUT]: the accuracy table of docs/inference.md
# ("Accuracy"): two synthetic tasks (below) trained for STEPS steps
# (default 1500), with and without simulated quantization; each checkpoint
# exported at fp32, fp16, int8 and int4 and scored on the held-out stream
# (65,536 samples, the evaluation's) with `ember predict`; and a third
# task from a Criteo-format file (below).  JSON lines to OUT (default
# bench/out/quant_accuracy.jsonl), then the table.  About 5 minutes on the
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
# Trains $work/TASK-MODE.cfg, exports the checkpoint at every encoding and
# scores each bundle on DATA (`synthetic`, or a held-out file): JSON lines to $out.
train_and_score() { # task mode data
    local task="$1" mode="$2" data="$3" enc bytes
    local tag="\"task\":\"$task\",\"mode\":\"$mode\""
    "$ember" train --config "$work/$task-$mode.cfg" --checkpoint-dir "$work/$task-$mode" --json |
        tail -1 | sed "s/^{/{\"bench\":\"quant_accuracy\",$tag,\"encoding\":\"train-eval\",/" >>"$out"
    for enc in fp32 fp16 int8 int4; do
        "$ember" export "$work/$task-$mode" "$work/$task-$mode-$enc" --quantize "$enc" >/dev/null
        bytes=$(cat "$work/$task-$mode-$enc"/table-*.rows | wc -c)
        "$ember" predict "$work/$task-$mode-$enc" "$data" --json |
            sed "s/^{/{\"bench\":\"quant_accuracy\",$tag,\"encoding\":\"$enc\",\"bundle_bytes\":$bytes,/" >>"$out"
    done
}
# Two tasks, as configs of the synthetic teacher task (Adagrad lr 0.1, dim 16):
#   builtin:  the built-in task's eight tables (100 to 20,000 rows, Zipf 1.1,
#             two multi-hot), plain and with simulated quantization to 256 and
#             16 buckets over [-0.5, 0.5];
#   criteo26: Criteo's shape, 13 dense features and 26 one-hot categoricals
#             of 100 to 200,000 rows (Zipf 1.05), plain and with 256 buckets.
# Each trained, exported at every encoding and scored on the held-out stream.
run_task() { # task mode rows-array pool-array alpha
    local task="$1" mode="$2" alpha="$5" q="" i n
    local -a rows=($3) pool=($4)
    n=${#rows[@]}
    [ "$mode" != plain ] && q="quantization = { num_buckets = ${mode#simulated-}; low = -0.5; high = 0.5; };"
    {
        echo "data = { alpha = $alpha; };"
        echo "train = { steps = $steps; metrics = \"\"; plot = \"\"; };"
        echo "tables = ("
        for ((i = 0; i < n; i++)); do
            echo "  { name = \"emb_$i\"; rows = ${rows[$i]}; dim = 16; optimizer = { kind = \"adagrad\"; lr = 0.1; }; $q },"
        done | sed '$ s/,$//'
        echo ");"
        echo "features = ("
        for ((i = 0; i < n; i++)); do
            echo "  { name = \"f$i\"; table = \"emb_$i\"; pooling = ${pool[$i]}; },"
        done | sed '$ s/,$//'
        echo ");"
    } >"$work/$task-$mode.cfg"
    train_and_score "$task" "$mode" synthetic
}
builtin_rows="20000 10000 5000 2000 1000 500 200 100"
builtin_pool="1 1 3 1 2 1 1 1"
for mode in plain simulated-256 simulated-16; do
    run_task builtin "$mode" "$builtin_rows" "$builtin_pool" 1.1
done
criteo_rows="200000 100000 50000 20000 10000 5000 2000 1000 500 200 100 200000 50000 10000 2000 500 100000 20000 5000 1000 200 150000 30000 3000 300 100"
criteo_pool="$(printf '1 %.0s' $(seq 26))"
for mode in plain simulated-256; do
    run_task criteo26 "$mode" "$criteo_rows" "$criteo_pool" 1.05
done
# criteo-tsv: the same tables trained on a Criteo-format TSV file (bench/criteo_like.py: 400,000
# training lines, 65,536 held-out lines from a hidden logistic teacher), 195 steps of 2048 (one
# pass), each bundle scored on the held-out file: the data path of real Criteo logs (hashing,
# the integers' transform, empty fields)
python3 "$repo/bench/criteo_like.py" "$work/train.tsv" 400000 7 1
python3 "$repo/bench/criteo_like.py" "$work/test.tsv" 65536 7 2
run_file_task() { # mode
    local mode="$1" task=criteo-tsv q="" i
    local -a rows=($criteo_rows)
    [ "$mode" != plain ] && q="quantization = { num_buckets = ${mode#simulated-}; low = -0.5; high = 0.5; };"
    {
        echo "data = { source = \"tsv\"; train_file = \"$work/train.tsv\"; eval_file = \"$work/test.tsv\"; };"
        echo "train = { steps = 195; metrics = \"\"; plot = \"\"; };"
        echo "tables = ("
        for ((i = 0; i < 26; i++)); do
            echo "  { name = \"emb_$i\"; rows = ${rows[$i]}; dim = 16; optimizer = { kind = \"adagrad\"; lr = 0.1; }; $q },"
        done | sed '$ s/,$//'
        echo ");"
        echo "features = ("
        for ((i = 0; i < 26; i++)); do echo "  { name = \"f$i\"; table = \"emb_$i\"; },"; done | sed '$ s/,$//'
        echo ");"
    } >"$work/$task-$mode.cfg"
    train_and_score "$task" "$mode" "$work/test.tsv"
}
for mode in plain simulated-256; do
    run_file_task "$mode"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {(r["task"], r["mode"]): r for r in rows if r["encoding"] == "fp32"}
print("| task | training | encoding | bundle's table bytes | predictor's table bytes | AUC | AUC - fp32 | log loss |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["encoding"] == "train-eval":
        continue
    b = base[(r["task"], r["mode"])]
    print(f'| {r["task"]} | {r["mode"]} | {r["encoding"]} | {r["bundle_bytes"]:,} | {r["table_bytes"]:,} | {r["auc"]:.5f} | '
          f'{r["auc"] - b["auc"]:+.5f} | {r["logloss"]:.5f} |')
PY
