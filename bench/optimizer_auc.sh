#!/usr/bin/env bash
# optimizer_auc.sh [SEEDS] [OUT]: the held-out AUC of every embedding optimizer on the built-in
# synthetic task (docs/PERFORMANCE.md, "Embedding optimizers: accuracy"; docs/optimizers.md).
# For each optimizer, three or four learning rates run with the first seed (`model.emb_optimizer`, every
# table; the dense model keeps its Adam), the best of them is kept, and the other seeds run
# with it (default seeds 1 2 3).  The task is `ember train` without a data config: eight tables
# of 100 to 20,000 rows, dim 16, 3000 steps of 2048, AUC on the 65,536-sample held-out stream
# (the hidden teacher's own AUC is printed beside).  One thread: results are bit for bit the same
# for any thread count.  JSON lines (each run's summary with "optimizer", "lr", "seed") to OUT
# (default bench/out/optimizer_auc.jsonl), then a table: per optimizer the chosen lr, the mean
# AUC and log loss over the seeds and the spread.  About 4 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seeds="${1:-1 2 3}"
out="${2:-$repo/bench/out/optimizer_auc.jsonl}"
ember="${EMBER:-$repo/build/ember}"
[ -x "$ember" ] || { echo "optimizer_auc.sh: no ember at $ember (bash scripts/setup.sh builds it)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
# optimizer: its group's fixed settings | the learning rates tried
grid=(
    "sgd||0.2 0.5 1 2"
    "adagrad||0.01 0.03 0.1"
    "rowwise_adagrad||0.01 0.03 0.1"
    "adam||0.0003 0.001 0.003"
    "adamw|weight_decay = 0.01;|0.0003 0.001 0.003"
    "momentum|momentum = 0.9;|0.03 0.1 0.3"
    "ftrl|l1 = 0.0001;|0.01 0.03 0.1"
)

# $1 optimizer, $2 fixed settings, $3 lr, $4 seed: appends the run's summary to OUT; prints its AUC.
run() {
    printf 'model = { emb_optimizer = { kind = "%s"; lr = %s; %s }; };\n' "$1" "$3" "$2" >"$work/opt.cfg"
    "$ember" train --config "$work/opt.cfg" --seed "$4" --threads 1 --json --metrics none --plot none \
        >"$work/run.jsonl"
    tail -1 "$work/run.jsonl" | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
s.update(optimizer=sys.argv[1], lr=float(sys.argv[2]), seed=int(sys.argv[3]))
open(sys.argv[4], "a").write(json.dumps(s) + "\n")
print(s["auc"])' "$1" "$3" "$4" "$out"
}

first="${seeds%% *}"
for entry in "${grid[@]}"; do
    IFS='|' read -r opt fixed lrs <<<"$entry"
    best="" best_auc=-1
    for lr in $lrs; do
        auc=$(run "$opt" "$fixed" "$lr" "$first")
        echo "$opt lr $lr seed $first: AUC $auc" >&2
        if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$auc" "$best_auc"; then
            best=$lr best_auc=$auc
        fi
    done
    for seed in $seeds; do
        [ "$seed" = "$first" ] && continue
        echo "$opt lr $best seed $seed: AUC $(run "$opt" "$fixed" "$best" "$seed")" >&2
    done
    echo "{\"optimizer\": \"$opt\", \"chosen_lr\": $best}" >>"$out"
done

python3 - "$out" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
chosen = {l["optimizer"]: l["chosen_lr"] for l in lines if "chosen_lr" in l}
print("| optimizer | lr (best of the grid, first seed) | AUC, mean over seeds | spread | log loss | teacher AUC |")
print("|---|---:|---:|---:|---:|---:|")
for opt, lr in chosen.items():
    runs = [l for l in lines if l.get("optimizer") == opt and l.get("lr") == lr and "auc" in l]
    aucs = [r["auc"] for r in runs]
    print(f"| {opt} | {lr:g} | {statistics.mean(aucs):.5f} | {max(aucs) - min(aucs):.5f} | "
          f"{statistics.mean(r['logloss'] for r in runs):.5f} | {statistics.mean(r['teacher_auc'] for r in runs):.5f} |")
EOF
