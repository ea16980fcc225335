#!/usr/bin/env bash
# bf16_auc.sh [SEEDS] [OUT]: what bf16 dense compute would cost in accuracy (docs/PERFORMANCE.md,
# "bf16 in the dense model").  Builds ember a second time in build-bf16/ (EMBER_BF16_BUILD_DIR to
# change it) with the CMake option EMBER_DENSE_BF16_ROUND, where every dense GEMM operand is
# rounded to bf16 and the products are summed in fp32 (a bf16 GEMM with fp32 accumulation), then
# trains the built-in task with the fp32 build and that one, seed by seed (default seeds 1 2 3):
#   default  the default model (13-64-16 | dot | 64-1), 3000 steps;
#   wide     bottom 512-256-16, top 512-256-1 (dot), 1500 steps.
# JSON lines (each run's summary with "build", "model" and "seed") to OUT (default
# bench/out/bf16_auc.jsonl), then a table.  About 7 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seeds="${1:-1 2 3}"
out="${2:-$repo/bench/out/bf16_auc.jsonl}"
fp32="${EMBER:-$repo/build/ember}"
build="${EMBER_BF16_BUILD_DIR:-$repo/build-bf16}"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_TESTS=OFF -DEMBER_DENSE_BF16_ROUND=ON >/dev/null
cmake --build "$build" --target ember_cli -j"$(nproc)" >/dev/null
[ -x "$fp32" ] || { echo "bf16_auc.sh: no fp32 ember at $fp32 (bash scripts/setup.sh builds it)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf 'model = { bottom = [512, 256, 16]; top = [512, 256]; };\n' >"$work/wide.cfg"
mkdir -p "$(dirname "$out")"
: >"$out"
for seed in $seeds; do
    for model in default wide; do
        args=(--seed "$seed" --json --plot none --metrics none)
        [ "$model" = wide ] && args+=(--config "$work/wide.cfg" --steps 1500)
        for b in fp32 bf16; do # alternating, so a slow spell hits both
            bin="$fp32"
            [ "$b" = bf16 ] && bin="$build/ember"
            "$bin" train "${args[@]}" | tail -1 |
                sed "s/^{/{\"bench\":\"bf16_auc\",\"build\":\"$b\",\"model\":\"$model\",\"seed\":$seed,/" >>"$out"
        done
    done
done
python3 - "$out" <<'PY'
import json, sys
from statistics import mean
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'model':8} {'seed':>4} {'AUC fp32':>10} {'AUC bf16':>10} {'diff':>9} {'logloss fp32':>13} {'logloss bf16':>13}")
for model in ("default", "wide"):
    diffs = []
    for r in rows:
        if r["model"] != model or r["build"] != "fp32":
            continue
        b = next(x for x in rows if x["model"] == model and x["seed"] == r["seed"] and x["build"] == "bf16")
        diffs.append(b["auc"] - r["auc"])
        print(f"{model:8} {r['seed']:4} {r['auc']:10.5f} {b['auc']:10.5f} {diffs[-1]:+9.5f} "
              f"{r['logloss']:13.5f} {b['logloss']:13.5f}")
    fp = [r["auc"] for r in rows if r["model"] == model and r["build"] == "fp32"]
    print(f"{model:8} mean AUC change {mean(diffs):+.5f}; fp32 AUC over seeds spans {max(fp) - min(fp):.5f}")
PY
