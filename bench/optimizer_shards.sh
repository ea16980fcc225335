#!/usr/bin/env bash
# optimizer_shards.sh [STEPS] [OUT]: the dense optimizer's state per rank,
# replicated and sharded (docs/PERFORMANCE.md, "Sharded dense optimizer
# state"): `ember train` on the built-in task with its default dense model
# (5,393 parameters) and with a wide one (bottom 512-256-16, top
# 1024-1024-512: 1.77M parameters), Adam, under mpirun -np 2 and 4 (one
# thread per rank; 4 ranks oversubscribe a 2-core machine), state replicated
# (--optimizer-shards 0) and sharded over the world.  JSON lines to OUT
# (default bench/out/optimizer_shards.jsonl), then the table: state bytes
# per rank from the run's header, samples/s and the dense update's time
# (the "reduce" phase) from its summary.  STEPS per run (default 200):
# about 6 minutes, most of it the wide model.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps="${1:-200}"
out="${2:-$repo/bench/out/optimizer_shards.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
printf 'model = { bottom = [512, 256, 16]; top = [1024, 1024, 512]; };\n' >"$work/wide.cfg"
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1
for model in default wide; do
    cfg=()
    [ "$model" = wide ] && cfg=(--config "$work/wide.cfg")
    for np in 2 4; do
        for g in 0 "$np"; do
            (cd "$work" && mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$np" "$ember" train \
                "${cfg[@]}" --steps "$steps" --eval-samples 8192 --threads 1 --metrics none --plot none --json \
                --optimizer-shards "$g") >"$work/run.jsonl"
            python3 - "$work/run.jsonl" "$model" "$np" "$g" >>"$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
head = next(l for l in lines if "dense_optimizer_bytes_per_rank" in l)
summ = lines[-1]
print(json.dumps({"bench": "optimizer_shards", "model": sys.argv[2], "ranks": int(sys.argv[3]),
                  "shards": int(sys.argv[4]), "dense_params": head["dense_params"],
                  "optimizer_bytes_per_rank": head["dense_optimizer_bytes_per_rank"],
                  "samples_per_s": summ["samples_per_s"], "reduce_s": summ["time_s"]["reduce"],
                  "dense_s": summ["time_s"]["dense"], "auc": summ["auc"], "logloss": summ["logloss"]}))
PY
        done
    done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| dense model | parameters | ranks | state | optimizer bytes per rank | samples/s | dense update s | AUC |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    state = "replicated" if r["shards"] == 0 else "sharded over %d" % r["shards"]
    print("| %s | %s | %d | %s | %s | %.0f | %.3f | %.5f |" % (r["model"], format(r["dense_params"], ","), r["ranks"],
          state, format(r["optimizer_bytes_per_rank"], ","), r["samples_per_s"], r["reduce_s"], r["auc"]))
PY
