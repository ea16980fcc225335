#!/usr/bin/env bash
# replan.sh [OUT]: re-planning while training against the plan made once
# (docs/PERFORMANCE.md, "Re-planning while training"; docs/adaptive.md).
# `ember train` at 4 ranks on a synthetic task whose first table (400,000
# rows x 16, bags of 20, Zipf 1.05) draws from 300 ids at first and from
# 40,000 more every 40,960 samples (data.synthetic.drift, kind "grow": a
# feature that grows), beside three small tables (2,000 rows, bags of 2);
# global batch 4096, 120 steps.  The "auto" tables are planned at start on
# the task's first 16 batches, then every 20 steps on the last 4 steps' ids:
#   static     train.replan with gain 1: it weighs and reports, never moves
#   replanned  gain 0.1: it moves when the planner's cost drops by a tenth
# Per re-plan step, one JSON line to OUT (default bench/out/replan.jsonl):
# the busiest rank's bytes sent, measured in that step and predicted by the
# cost model for the placements in force; the replanned run's move seconds
# against its median step.  Then a table: replanned over static at each
# step.  Four ranks oversubscribe a 2-core machine: bytes are exact, times
# noisy (three replanned runs; each move's steps).  About a minute.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/replan.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
mpi=(mpirun --oversubscribe -np 4)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
config() { # gain
  cat <<CFG
tables = (
  { name = "grows"; rows = 400000; dim = 16; optimizer = "adagrad"; alpha = 1.05; exchange = "rows"; },
  { name = "t%d"; count = 3; rows = 2000; dim = 16; optimizer = "adagrad"; alpha = 1.05; exchange = "rows"; }
);
features = ( { name = "g"; table = "grows"; pooling = 20; }, { name = "f%d"; count = 3; table = "t%d"; pooling = 2; } );
data = { synthetic = { drift = { kind = "grow"; every = 40960; start = 300; rows = 40000; features = 1; }; }; };
model = { emb_dim = 16; };
train = { steps = 120; micro_batch = 1024; eval_samples = 4096; metrics = ""; plot = ""; hot_refresh_every = 0;
          replan = { every = 20; window = 4; gain = $1; }; };
CFG
}
run() { # name gain
  config "$2" >"$work/$1.cfg"
  OMP_NUM_THREADS=1 "${mpi[@]}" "$ember" train --config "$work/$1.cfg" --threads 1 --json >"$work/$1.out" 2>"$work/$1.err" ||
    { cat "$work/$1.err" >&2; exit 1; }
  python3 - "$work/$1.out" "$1" >>"$out" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    e = json.loads(l)
    if e["event"] == "start":
        print(json.dumps({"bench": "replan", "run": sys.argv[2], "start_placement": e["placement"]}))
    if e["event"] in ("replan", "replan_measured"):
        e["bench"], e["run"] = "replan", sys.argv[2]
        print(json.dumps(e))
PY
}
run static 1.0
for k in 1 2 3; do run "replanned$k" 0.1; done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ev = lambda run, kind: {e["step"]: e for e in rows if e.get("run") == run and e.get("event") == kind}
st, rp = ev("static", "replan"), ev("replanned1", "replan")
print("| step | static: measured (predicted) | replanned: measured (predicted) | replanned / static, measured (predicted) |")
print("|---:|---:|---:|---:|")
for step in sorted(st):
    a, b = st[step], rp[step]
    print(f"| {step} | {a['measured_busiest_bytes']:,.0f} ({a['predicted_busiest_bytes'][0]:,.0f}) "
          f"| {b['measured_busiest_bytes']:,.0f} ({b['predicted_busiest_bytes'][0]:,.0f}) "
          f"| {b['measured_busiest_bytes'] / a['measured_busiest_bytes']:.3f} "
          f"({b['predicted_busiest_bytes'][0] / a['predicted_busiest_bytes'][0]:.3f}) |")
for k in (1, 2, 3):
    for step, e in sorted(ev(f"replanned{k}", "replan").items()):
        if e["moved"]:
            moved = ", ".join(f"{t['table']} {t['from']} -> {t['to']}" for t in e["tables"])
            print(f"run {k}, step {step}: moved {moved}; {e['move_seconds'] * 1e3:.1f} ms, "
                  f"{e['move_seconds'] / e['step_seconds']:.1f} steps of {e['step_seconds'] * 1e3:.1f} ms")
PY
