#!/usr/bin/env bash
# precision_auc.sh [SEEDS] [OUT]: what half-precision rows cost in accuracy (docs/PERFORMANCE.md,
# "Half-precision rows: accuracy"; docs/precision.md).  Trains three tasks, seed by seed (default
# seeds 1 2 3), in five settings of every table's rows, alternating the settings within a seed:
#   fp32;  fp16 + nearest;  fp16 + stochastic;  bf16 + nearest;  bf16 + stochastic
# STATE=1 measures half optimizer state instead ("Half-precision optimizer state: accuracy"): the
# tasks builtin, builtin-adam (the built-in task with Adam for the tables, lr 0.01) and criteo-tsv,
# in the settings fp32; state bf16; state fp16 (`--state-precision`, stochastic rounding); and
# fp16 rows with bf16 state (out: bench/out/state_precision_auc.jsonl; about 8 minutes).
# (`ember train --precision P --rounding R`, which sets every table, whatever its config says).
# The tasks:
#   builtin     the built-in synthetic task as `ember train` runs it without a config: eight tables
#               of 100 to 20,000 rows, dim 16, 3000 steps of 2048; AUC on the 65,536-sample held-out
#               stream;
#   criteo-tsv  a Criteo-format TSV file from bench/criteo_like.py (400,000 training lines, 65,536
#               held-out lines, teacher seed 7), 26 one-hot tables of 100 to 200,000 rows, dim 16,
#               Adagrad lr 0.1, 195 steps of 2048 (one pass), as bench/quant_accuracy.sh trains it;
#   movies      the shipped CSV example, examples/data/movies.cfg as it is (movies.csv, 8,500 lines;
#               movies_eval.csv, 1,500 held out; micro-batches of 128, evaluation every 33 steps,
#               early stopping with patience 4, the best checkpoint kept).
# Each run's AUC and log loss are its summary's (the last evaluation; for movies, the one that
# stopped the run).  One thread (`--threads 1`): the results are bit for bit the same for any
# thread count, but depend on OpenBLAS's kernels (`blas_core`, set by OPENBLAS_CORETYPE).  JSON
# lines (each run's summary with "task", "setting", "precision", "rounding", "seed" and the start
# event's "row_precision" and "blas_core") to OUT (default bench/out/precision_auc.jsonl), then a
# table: per task and setting, the mean AUC and log loss over the seeds, the mean change from
# fp32, the largest change of one seed and how many seeds fell below fp32; and for a task whose
# runs stop early (movies), the same for the best evaluation's AUC.  About 5 minutes on the
# project machine (2 vCPUs; 45 runs, 15 of them the built-in task's at about 17 s each).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seeds="${1:-1 2 3}"
out="${2:-$repo/bench/out/precision_auc.jsonl}"
ember="${EMBER:-$repo/build/ember}"
[ -x "$ember" ] || { echo "precision_auc.sh: no ember at $ember (bash scripts/setup.sh builds it)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
settings="fp32 fp16-nearest fp16-stochastic bf16-nearest bf16-stochastic"
tasks="builtin criteo-tsv movies"
if [ "${STATE:-0}" = 1 ]; then
    settings="fp32 state-bf16 state-fp16 fp16+state-bf16"
    tasks="builtin builtin-adam criteo-tsv"
    out="${2:-$repo/bench/out/state_precision_auc.jsonl}"
    : >"$out"
fi

# The Criteo-format files and the config of bench/quant_accuracy.sh's criteo-tsv task.
python3 "$repo/bench/criteo_like.py" "$work/train.tsv" 400000 7 1
python3 "$repo/bench/criteo_like.py" "$work/test.tsv" 65536 7 2
criteo_rows=(200000 100000 50000 20000 10000 5000 2000 1000 500 200 100 200000 50000 10000 2000 500
             100000 20000 5000 1000 200 150000 30000 3000 300 100)
{
    echo "data = { source = \"tsv\"; train_file = \"$work/train.tsv\"; eval_file = \"$work/test.tsv\"; };"
    echo "train = { steps = 195; };"
    echo "tables = ("
    for ((i = 0; i < 26; i++)); do
        echo "  { name = \"emb_$i\"; rows = ${criteo_rows[$i]}; dim = 16; optimizer = { kind = \"adagrad\"; lr = 0.1; }; },"
    done | sed '$ s/,$//'
    echo ");"
    echo "features = ("
    for ((i = 0; i < 26; i++)); do echo "  { name = \"f$i\"; table = \"emb_$i\"; },"; done | sed '$ s/,$//'
    echo ");"
} >"$work/criteo-tsv.cfg"
echo 'model = { emb_optimizer = { kind = "adam"; lr = 0.01; }; };' >"$work/adam.cfg"

# Trains TASK at SEED in SETTING: the summary, tagged, to $out.
run() { # task seed setting
    local task="$1" seed="$2" setting="$3" precision="${3%%-*}" rounding=""
    case "$setting" in # state-P: fp32 rows, state P; R+state-P: rows R, state P (stochastic)
        state-*) precision=fp32 ;;
        *+state-*) precision="${setting%%+*}" ;;
    esac
    local -a args=(--seed "$seed" --threads 1 --precision "$precision" --json --plot none --metrics none)
    case "$setting" in
        fp32) ;;
        *state-*) rounding=stochastic && args+=(--state-precision "${setting##*state-}") ;;
        *) rounding="${setting#*-}" && args+=(--rounding "$rounding") ;;
    esac
    case "$task" in
        criteo-tsv) args+=(--config "$work/criteo-tsv.cfg") ;;
        builtin-adam) args+=(--config "$work/adam.cfg") ;;
        movies) args+=(--config "$repo/examples/data/movies.cfg" --checkpoint-dir "$work/ckpt") ;;
    esac
    rm -rf "$work/ckpt"
    "$ember" train "${args[@]}" >"$work/run.jsonl"
    python3 - "$work/run.jsonl" "$task" "$seed" "$setting" "$precision" "$rounding" >>"$out" <<'PY'
import json, sys
path, task, seed, setting, precision, rounding = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if l.strip()]
start, summary = lines[0], lines[-1]
assert start["event"] == "start" and summary["event"] == "summary", path
tag = {"bench": "precision_auc", "task": task, "setting": setting, "precision": precision,
       "rounding": rounding or None, "seed": int(seed), "row_precision": start["row_precision"],
       "blas_core": start.get("blas_core")}
print(json.dumps({**tag, **summary}))
PY
}
for seed in $seeds; do
    for task in $tasks; do
        for setting in $settings; do # alternating, so a slow spell hits all
            run "$task" "$seed" "$setting"
        done
    done
done

python3 - "$out" "$settings" <<'PY'
import json, sys
from statistics import mean
rows = [json.loads(l) for l in open(sys.argv[1])]
settings = sys.argv[2].split()
tasks = [t for t in ("builtin", "builtin-adam", "criteo-tsv", "movies") if any(r["task"] == t for r in rows)]
by = {(r["task"], r["setting"], r["seed"]): r for r in rows}
seeds = sorted({r["seed"] for r in rows})

def label(setting):  # fp16-stochastic: fp16 + stochastic; fp16+state-bf16: fp16 rows + state bf16
    if "state-" not in setting:
        return setting.replace("-", " + ")
    return setting.replace("+", " rows + ").replace("state-", "state ")

def table(title, metric, tasks):
    print(f"{title}: means over seeds {' '.join(map(str, seeds))}")
    print(f"| task | setting | AUC | log loss | AUC − fp32 | largest \\|AUC − fp32\\| of a seed | seeds below fp32 | log loss − fp32 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for task in tasks:
        base = [by[(task, "fp32", s)] for s in seeds]
        for setting in settings:
            runs = [by[(task, setting, s)] for s in seeds]
            auc, ll = mean(metric(r)[0] for r in runs), mean(metric(r)[1] for r in runs)
            if setting == "fp32":
                print(f"| {task} | fp32 | {auc:.5f} | {ll:.5f} | | | | |")
                continue
            da = [metric(r)[0] - metric(b)[0] for r, b in zip(runs, base)]
            dl = [metric(r)[1] - metric(b)[1] for r, b in zip(runs, base)]
            print(f"| {task} | {label(setting)} | {auc:.5f} | {ll:.5f} | {mean(da):+.5f} | "
                  f"{max(abs(d) for d in da):.5f} | {sum(d < 0 for d in da)}/{len(da)} | {mean(dl):+.5f} |")
    print()

print(f"OpenBLAS kernels (blas_core): {', '.join(sorted({str(r.get('blas_core')) for r in rows}))}")
table("The run's AUC and log loss (its summary: the last evaluation)", lambda r: (r["auc"], r["logloss"]), tasks)
for task in tasks:
    fp = [by[(task, "fp32", s)]["auc"] for s in seeds]
    stops = sorted({by[(task, st, s)]["steps"] for st in settings for s in seeds})
    print(f"{task}: fp32 AUC over seeds spans {max(fp) - min(fp):.5f}; runs ended at step(s) {stops}")
stopped = [t for t in tasks if any(r["task"] == t and r["stopped_early"] for r in rows)]
if stopped:
    print()
    for task in stopped:
        print(f"{task}: best evaluation at step(s), seed by seed: " + "; ".join(
            f"{st} {[by[(task, st, s)]['best_step'] for s in seeds]}" for st in settings))
    print()
    print(f"The best evaluation's AUC (the checkpoint keep_best keeps): means over seeds {' '.join(map(str, seeds))}")
    print("| task | setting | best AUC | AUC − fp32 | largest \\|AUC − fp32\\| of a seed | seeds below fp32 |")
    print("|---|---|---:|---:|---:|---:|")
    for task in stopped:
        base = [by[(task, "fp32", s)]["best_metric"] for s in seeds]
        for setting in settings:
            best = [by[(task, setting, s)]["best_metric"] for s in seeds]
            if setting == "fp32":
                print(f"| {task} | fp32 | {mean(best):.5f} | | | |")
                continue
            da = [x - b for x, b in zip(best, base)]
            print(f"| {task} | {label(setting)} | {mean(best):.5f} | {mean(da):+.5f} | "
                  f"{max(abs(d) for d in da):.5f} | {sum(d < 0 for d in da)}/{len(da)} |")
PY
