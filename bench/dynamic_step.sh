#!/usr/bin/env bash
# dynamic_step.sh [OUT]: the training-step table of docs/PERFORMANCE.md
# ("Dynamic tables"): W1 (8 tables, 1M rows x 64 each, Zipf 1.05, batch 4096
# x pooling 20, row-wise Adagrad, one thread) on fixed tables against the
# same step on dynamic tables of 1M rows each whose keys are drawn from
# 2^20, 2^24 and 2^40 keys with the same law (admission on first use, and
# at 2^40 also admit_after 2), and fixed against 2^40 at two threads,
# alternating fixed and dynamic runs in one session, two rounds; and
# bench_dynamic_model (a model of the dynamic part's memory traffic on the
# same keys: a minimal serial implementation, not a bound) for the 2^40 runs.
# The warm-up (35 steps) fills the dynamic tables first.  JSON lines to OUT
# (default bench/out/dynamic_step.jsonl).  About 3 minutes on the project
# machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/dynamic_step.jsonl}"
ember="${EMBER:-$repo/build/ember}"
model="${EMBER_BUILD_DIR:-$repo/build}/bench_dynamic_model"
mkdir -p "$(dirname "$out")"
: >"$out"
w1=(--preset W1 --optimizer rowwise_adagrad --iters 20 --warmup 35)
for round in 1 2; do
    "$ember" bench "${w1[@]}" --threads 1 --workload W1-fixed >>"$out"
    for bits in 20 24 40; do
        "$ember" bench "${w1[@]}" --threads 1 --table-kind dynamic --key-space "$bits" \
            --workload "W1-dynamic-2^$bits" >>"$out"
    done
    "$ember" bench "${w1[@]}" --threads 1 --table-kind dynamic --key-space 40 --admit-after 2 \
        --workload "W1-dynamic-2^40-admit2" >>"$out"
    # the model of the dynamic part: the memory a minimal serial step touches
    # for the same keys (distinct keys, repeats) and the keys the runs above
    # admitted per step
    for w in "W1-dynamic-2^40" "W1-dynamic-2^40-admit2"; do
        admits=$(python3 -c "import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d.get('workload') == sys.argv[2] and d.get('threads') == 1: a = d['dyn_admitted'] // (d['iters'] + d['warmup'])
print(a)" "$out" "$w")
        "$model" --admits "$admits" | sed "s/^{/{\"workload\":\"model:$w\",/" >>"$out"
    done
    "$ember" bench "${w1[@]}" --threads 2 --workload W1-fixed >>"$out"
    "$ember" bench "${w1[@]}" --threads 2 --table-kind dynamic --key-space 40 --workload "W1-dynamic-2^40" >>"$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
from collections import defaultdict
ms = defaultdict(list)
extra = {}
model = defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("bench") == "dynamic_model":
        model[d["workload"][len("model:"):]].append(d["ms_median"])
        extra["model:" + d["workload"][len("model:"):]] = d
        continue
    key = (d["workload"], d["threads"])
    ms[key].append(d["ms_per_iter_median"])
    extra[key] = d
print("| workload | threads | ms per step (median of steps, then of rounds) | speed vs fixed | keys admitted per step "
      "| distinct keys per step | model of the dynamic part, ms | modelled speed vs fixed (no overlap) |")
print("|---|---|---|---|---|---|---|---|")
for (w, t), v in ms.items():
    m = statistics.median(v)
    fixed = statistics.median(ms[("W1-fixed", t)])
    d = extra[(w, t)]
    steps = d.get("iters", 20) + d.get("warmup", 35)
    adm = d.get("dyn_admitted")
    fl = statistics.median(model[w]) if t == 1 and model[w] else None
    dk = extra["model:" + w]["distinct_keys_per_step"] if fl is not None else None
    print(f"| {w} | {t} | {m:.1f} | {fixed / m:.2f} | {'' if adm is None else f'{adm // steps}'} | "
          f"{'' if dk is None else dk} | {'' if fl is None else f'{fl:.1f}'} | "
          f"{'' if fl is None else f'{fixed / (fixed + fl):.2f}'} |")
PY
