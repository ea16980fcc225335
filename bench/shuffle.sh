#!/usr/bin/env bash
# shuffle.sh [ROUNDS] [OUT]: training throughput on the binary format with
# and without data.shuffle (docs/PERFORMANCE.md, "Shuffling"): a
# Criteo-format file of 400,000 lines (bench/criteo_like.py) converted to
# the binary format, `ember train` for 2 epochs of 2048-sample steps on one
# thread, the two settings alternating ROUNDS times (default 3).  JSON lines
# to OUT (default bench/out/shuffle.jsonl), then the medians.  About 2
# minutes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-3}"
out="${2:-$repo/bench/out/shuffle.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
python3 "$repo/bench/criteo_like.py" "$work/train.tsv" 400000 7 1
"$ember" convert "$work/train.tsv" "$work/train.bin" --rows 100000 >/dev/null
for shuffle in false true; do
    {
        echo 'tables = ({ name = "c%d"; count = 26; rows = 100000; dim = 16; optimizer = "adagrad"; });'
        echo 'features = ({ name = "f%d"; count = 26; table = "c%d"; });'
        echo "data = { source = \"binary\"; train_file = \"train.bin\"; shuffle = $shuffle; };"
        echo 'train = { epochs = 2; eval_every = 0; metrics = ""; plot = ""; };'
    } >"$work/$shuffle.cfg"
done
for ((i = 0; i < rounds; i++)); do
    for shuffle in false true; do
        "$ember" train --config "$work/$shuffle.cfg" --threads 1 --json | tail -1 |
            python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
print(json.dumps({"bench": "shuffle", "shuffle": sys.argv[1] == "true", "samples_per_s": s["samples_per_s"],
                  "data_s": s["time_s"]["data"], "steps": s["steps"], "epochs": s["epochs"]}))' "$shuffle" >>"$out"
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {k: statistics.median(r["samples_per_s"] for r in rows if r["shuffle"] == k) for k in (False, True)}
data = {k: statistics.median(r["data_s"] for r in rows if r["shuffle"] == k) for k in (False, True)}
print("| data.shuffle | samples/s (median) | data time s (median) | runs |")
print("|---|---|---|---|")
for k in (False, True):
    print(f"| {str(k).lower()} | {med[k]:,.0f} | {data[k]:.2f} | {sum(r['shuffle'] == k for r in rows)} |")
print(f"shuffled / file order: {med[True] / med[False]:.3f}")
PY
