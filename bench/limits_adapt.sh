#!/usr/bin/env bash
# limits_adapt.sh [OUT]: limits that follow the data against limits set once
# from the first batches (docs/PERFORMANCE.md, "Limits that follow the
# data"), with the drop policy, on a drifting workload: `ember train` on a
# synthetic task whose 400,000-row item table (20 ids a bag, Zipf 1.05)
# draws from 100,000 ranks at first and from R more every 40,960 samples
# (data.synthetic.drift, kind "grow": new ids join), global batch 2,048,
# 400 steps.  For each R and rank count (RANKS, default "1 2"), two runs:
#   first    train.limits.adapt = "first": both limits set at step 20 from
#            the first 20 steps (p99.9, no headroom: what `ember limits`
#            suggests), then kept: the planners that size once
#   running  adapt = "running": every 10 steps, the most of the last 20
#            steps plus 2 % headroom
# and a run without limits ("none", adapt = "off": nothing counted) for the
# step time; one JSON line each to OUT (default bench/out/limits_adapt.jsonl):
# the ids dropped (and their fraction of all ids), the limits' bytes at the
# end (limits_adapt_bytes: per partition 8 bytes an id and 4 x dim a unique
# id), and the least bytes that would have dropped nothing (the run's
# peaks, seen in hindsight: the floor).  Then a table with the ratio of the
# running limits' bytes to the first ones', and each run's training time
# over the run without limits (one run each: noisy).  The counts are exact:
# a rerun gives the same figures.  About a minute.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/limits_adapt.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

config() { # R RANKS MODE
  local r="$1" ranks="$2" mode="$3" limits
  if [ "$mode" = none ]; then
    limits='adapt = "off";'
  elif [ "$mode" = first ]; then
    limits='adapt = "first"; window = 20; quantile = 0.999; headroom = 0.0;'
  else
    limits='adapt = "running"; every = 10; window = 20; quantile = 1.0; headroom = 0.02;'
  fi
  cat <<CFG
name = "drift";
seed = 3;
tables = (
  { name = "items"; rows = 400000; dim = 16; optimizer = "adagrad"; alpha = 1.05; limits = { policy = "drop"; }; },
  { name = "users"; rows = 50000; dim = 16; optimizer = "adagrad"; }
);
features = (
  { name = "item"; table = "items"; pooling = 20; },
  { name = "user"; table = "users"; pooling = 1; }
);
data = { batch_size = 2048; seed = 1;
         synthetic = { drift = { kind = "grow"; every = 40960; start = 100000; rows = $r; features = 1; }; }; };
model = { emb_dim = 16; };
train = { steps = 400; eval_every = 0; eval_samples = 4096; log_every = 400; micro_batch = $((2048 / ranks));
          hot_refresh_every = 0; metrics = ""; plot = ""; limits = { $limits }; };
CFG
}

for ranks in ${RANKS:-1 2}; do
  for r in ${DRIFT_ROWS:-3000 5000 8000}; do
    for mode in none first running; do
      config "$r" "$ranks" "$mode" >"$work/run.cfg"
      "${mpi[@]}" -np "$ranks" "$ember" train --config "$work/run.cfg" --json >"$work/run.out" 2>"$work/run.err" ||
        { cat "$work/run.err" >&2; exit 1; }
      python3 - "$work/run.out" "$mode" "$r" "$ranks" >>"$out" <<'PY'
import json, sys
path, mode, r, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
summary = [json.loads(l) for l in open(path) if l.startswith("{")][-1]
line = {"bench": "limits_adapt", "mode": mode, "drift_rows": r, "ranks": ranks,
        "train_seconds": summary["train_seconds"], "samples_per_s": summary["samples_per_s"]}
if mode != "none":
    l = summary["limits"]
    line.update({"ids": l["ids"], "dropped_ids": l["dropped_ids"], "dropped_fraction": l["dropped_fraction"],
                 "limit_bytes": l["limit_bytes"], "peak_bytes": l["peak_bytes"], "changes": l["changes"],
                 "limits": l["tables"]["items"], "peak": l["peak"]["items"]})
print(json.dumps(line))
PY
    done
  done
done

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(x["ranks"], x["drift_rows"], x["mode"]): x for x in rows}
print("| ranks | R (ranks an epoch) | first: dropped | running: dropped | first: limit bytes | running: limit bytes | running / first | floor (hindsight) | step time: first, running / none |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (ranks, r, mode), x in sorted(by.items()):
    if mode != "first":
        continue
    y, z = by[(ranks, r, "running")], by[(ranks, r, "none")]
    print(f"| {ranks} | {r} | {x['dropped_fraction']:.2%} ({x['dropped_ids']}) | {y['dropped_fraction']:.2%} ({y['dropped_ids']}) "
          f"| {x['limit_bytes']:,} | {y['limit_bytes']:,} | {y['limit_bytes'] / x['limit_bytes']:.3f} | {y['peak_bytes']:,} "
          f"| {x['train_seconds'] / z['train_seconds']:.2f}, {y['train_seconds'] / z['train_seconds']:.2f} |")
PY
