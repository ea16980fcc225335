#!/usr/bin/env bash
# pipeline_memory.sh [STEPS] [OUT]: what a pipeline stage holds against the
# unpipelined model (docs/PERFORMANCE.md, "Pipeline stages: memory per
# rank"): `ember train` on the built-in task (13 dense features, 8 sparse of
# dim 16) with a wide DCN model (bottom 512-256-16, six full-rank cross
# layers over the 144-wide concat, nine top layers of 1024: 8.8M dense
# parameters, 20 blocks), Adam, micro-batches of 64, 8 per step, one thread
# per rank:
#   1 rank unpipelined, 2 ranks in 2 stages, 4 ranks in 4 stages (1f1b; the
#   cuts of the balance rule by time and by memory), and 2 ranks data
#   parallel for scale.  The pipelined runs also carry a budget,
#   train.dense_memory_mb = 72 (parameters, gradients and Adam's state: 134.5
#   MiB whole), which refuses the unpipelined model: that refusal is a line
#   too.
# Every pipelined run has one replica group, so its global batch is the
# one-rank run's: the same model, the same AUC.  Per run one JSON line to
# OUT (default bench/out/pipeline_memory.jsonl): the start event's
# dense_bytes_per_rank (parameters, gradients, optimizer state, kept
# activations), each rank's parameters + state over the one-rank run's,
# peak RSS per rank and samples/s from the summary; then a table.
# With EMBER_BASE=/path/to/another/ember the 2-stage runs alternate with
# that build, two rounds (its step time beside this one's).  Four ranks
# oversubscribe a 2-core machine: their times say nothing, their bytes do.
# STEPS per run (default 40): about 5 minutes.  TOP (the top layers' widths,
# default nine of 1024), MICRO_BATCH (64) and CAP_MB (72) give another
# model: TOP=512,512,512,512,512,512,512,512 MICRO_BATCH=256 CAP_MB=24 is one
# whose activations weigh as much as its parameters.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps="${1:-40}"
out="${2:-$repo/bench/out/pipeline_memory.jsonl}"
ember="${EMBER:-$repo/build/ember}"
base="${EMBER_BASE:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
top="${TOP:-1024,1024,1024,1024,1024,1024,1024,1024,1024}"
model="model = { interaction = \"dcn\"; dcn = { layers = 6; rank = 0; }; bottom = [512, 256, 16]; top = [${top//,/, }]; };"
train="steps = $steps; micro_batch = ${MICRO_BATCH:-64}; accumulate = 8; eval_every = 0; eval_samples = 16384;
  optimizer = { kind = \"adam\"; }; metrics = \"\"; plot = \"\";"
cfg() { # $1: name, $2: extra train settings
    printf '%s\ntrain = { %s %s };\n' "$model" "$train" "$2" >"$work/$1.cfg"
}
cap="dense_memory_mb = ${CAP_MB:-72};"
cfg one ''
cfg capped "$cap"
cfg s2 "$cap pipeline = { stages = 2; };"
cfg s2base 'pipeline = { stages = 2; };' # an EMBER_BASE build may not know the budget
cfg s2m "$cap pipeline = { stages = 2; balance = \"memory\"; };"
cfg s4 "$cap pipeline = { stages = 4; };"
cfg s4m "$cap pipeline = { stages = 4; balance = \"memory\"; };"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
run() { # $1: label, $2: ranks, $3: config, $4: the ember binary
    (cd "$work" && mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$2" "$4" train \
        --config "$work/$3.cfg" --threads 1 --json) >"$work/run.jsonl"
    python3 - "$work/run.jsonl" "$1" "$2" "$4" >>"$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
head, summ = lines[0], lines[-1]
print(json.dumps({"bench": "pipeline_memory", "run": sys.argv[2], "ranks": int(sys.argv[3]), "ember": sys.argv[4],
                  "dense_params": head["dense_params"], "pipeline": head.get("pipeline"),
                  "dense_bytes_per_rank": head.get("dense_bytes_per_rank"),
                  "peak_rss_mb_per_rank": summ.get("peak_rss_mb_per_rank", [summ.get("peak_rss_mb")]),
                  "samples_per_s": summ["samples_per_s"], "dense_s": summ["time_s"]["dense"],
                  "auc": summ["auc"]}))
PY
}
run "1 rank" 1 one "$ember"
# the budget refuses the whole model, before anything is allocated
(cd "$work" && "$ember" train --config "$work/capped.cfg" --threads 1 --json >/dev/null 2>"$work/err") &&
    { echo "the budget did not refuse the unpipelined model" >&2; exit 1; }
python3 -c 'import json,sys; print(json.dumps({"bench": "pipeline_memory", "run": "1 rank, " + sys.argv[2].rstrip(";"), "refused": open(sys.argv[1]).read().strip()}))' \
    "$work/err" "$cap" >>"$out"
run "2 ranks, data parallel" 2 one "$ember"
for round in 1 2; do
    run "2 stages, balance time" 2 s2 "$ember"
    [ -n "$base" ] && run "2 stages, balance time (EMBER_BASE)" 2 s2base "$base"
done
run "2 stages, balance memory" 2 s2m "$ember"
run "4 stages, balance time" 4 s4 "$ember"
run "4 stages, balance memory" 4 s4m "$ember"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
one = next(r for r in rows if r["run"] == "1 rank")["dense_bytes_per_rank"]
whole = one["params"][0] + one["state"][0]
print("| run | cuts | params + state per rank, MB | ÷ 1 rank | kept activations, MB | peak RSS, MB | samples/s | AUC |")
print("|---|---|---|---|---|---|---:|---|")
for r in rows:
    if "refused" in r:
        print("| %s | refused: %s |" % (r["run"], r["refused"]))
        continue
    m = r["dense_bytes_per_rank"] or {"params": [0], "state": [0], "activations": [0]}
    ps = [p + s for p, s in zip(m["params"], m["state"])]
    cuts = r["pipeline"].get("cuts", "?") if r["pipeline"] else "–"
    f = lambda xs: ", ".join("%.1f" % (x / 1e6) for x in xs)
    print("| %s | %s | %s | %s | %s | %s | %.0f | %.6f |" % (
        r["run"] + (" [base]" if "EMBER_BASE" in r["run"] else ""), cuts, f(ps),
        ", ".join("%.3f" % (x / whole) for x in ps), f(m["activations"]),
        ", ".join("%.1f" % x for x in r["peak_rss_mb_per_rank"]), r["samples_per_s"], r["auc"]))
PY
