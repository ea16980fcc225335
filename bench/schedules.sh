#!/usr/bin/env bash
# schedules.sh [REPS] [OUT]: the step's schedules side by side
# (docs/PERFORMANCE.md, "Schedules"): blocking, overlap and stale under
# mpirun -np 2 with one thread per rank, over shared memory and over TCP
# (loopback, shared memory off), runs alternating schedule by schedule,
# REPS rounds (default 5); medians per schedule.  JSON lines to OUT
# (default bench/out/schedules.jsonl), then the tables.  About 12 minutes.
#
#   train      `ember train` on a Criteo-shaped synthetic task (26 tables of
#              100 to 200,000 rows, dim 16, Adagrad; the default dense model),
#              300 steps of 2 x 2048: samples/s, the step's time (the
#              trainer's phases, without data and evaluation) and the time
#              inside the embedding exchanges per step (its "exchange" phase).
#              hidden = 1 - exchange time / blocking's, same transport.
#   bench      `ember bench --preset W2 --optimizer rowwise_adagrad` with a
#              stand-in for the dense model (--dense-ms 5: arithmetic that
#              takes 5 ms alone, the same amount on both ranks), a barrier
#              before every step: step and exchange medians over 40 steps.
#   accuracy   AUC and log loss of the built-in task (3,000 steps) and of a
#              Criteo-format file (bench/criteo_like.py, one pass) under each
#              schedule, shared memory, once (the results do not depend on
#              the transport or the timing).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reps="${1:-5}"
out="${2:-$repo/bench/out/schedules.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
export OMP_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { # transport args...
    local btl=self,vader
    [ "$1" = tcp ] && btl=self,tcp
    shift
    (cd "$work" && OMPI_MCA_btl=$btl OMPI_MCA_btl_tcp_if_include=lo mpirun --oversubscribe --allow-run-as-root \
        --bind-to none -np 2 "$@")
}
rows="200000 100000 50000 20000 10000 5000 2000 1000 500 200 100 200000 50000 10000 2000 500 100000 20000 5000 1000 200 150000 30000 3000 300 100"
tables_cfg() { # the 26 tables and their features
    local -a r=($rows)
    local i
    echo "tables = ("
    for ((i = 0; i < 26; i++)); do
        echo "  { name = \"emb_$i\"; rows = ${r[$i]}; dim = 16; optimizer = { kind = \"adagrad\"; lr = 0.1; }; },"
    done | sed '$ s/,$//'
    echo ");"
    echo "features = ("
    for ((i = 0; i < 26; i++)); do echo "  { name = \"f$i\"; table = \"emb_$i\"; },"; done | sed '$ s/,$//'
    echo ");"
}
{
    echo "data = { alpha = 1.05; };"
    echo "train = { steps = 300; eval_samples = 8192; metrics = \"\"; plot = \"\"; };"
    tables_cfg
} >"$work/c26.cfg"
summary() { # bench transport schedule < train JSON lines: one JSON line
    python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin if l.startswith("{")]
s = lines[-1]
t = s["time_s"]
print(json.dumps({"bench": sys.argv[1], "transport": sys.argv[2], "schedule": sys.argv[3],
                  "samples_per_s": s["samples_per_s"], "steps": s["steps"],
                  "exchange_ms_per_step": 1e3 * t["exchange"] / s["steps"],
                  "step_ms": 1e3 * sum(t[k] for k in ("emb_forward", "exchange", "dense", "emb_backward", "reduce")) / s["steps"],
                  "auc": s["auc"], "logloss": s["logloss"]}))' "$@"
}
for transport in shm tcp; do
    for ((rep = 0; rep < reps; rep++)); do
        for schedule in blocking overlap stale; do
            mpi "$transport" "$ember" train --config "$work/c26.cfg" --threads 1 --schedule "$schedule" --json |
                summary train "$transport" "$schedule" >>"$out"
            mpi "$transport" "$ember" bench --preset W2 --optimizer rowwise_adagrad --iters 40 --warmup 5 \
                --dense-ms 5 --schedule "$schedule" |
                python3 -c '
import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print(json.dumps({"bench": "bench", "transport": sys.argv[1], "schedule": j["schedule"],
                  "step_ms": j["ms_per_iter_median"], "exchange_ms_per_step": j["comm_ms_median"]}))' \
                    "$transport" >>"$out"
        done
    done
done
# accuracy: the built-in task, and a Criteo-format file (one pass of 195 steps of 2 x 1024)
python3 "$repo/bench/criteo_like.py" "$work/train.tsv" 400000 7 1
python3 "$repo/bench/criteo_like.py" "$work/test.tsv" 65536 7 2
{
    echo "data = { source = \"tsv\"; train_file = \"$work/train.tsv\"; eval_file = \"$work/test.tsv\"; };"
    echo "train = { steps = 195; micro_batch = 1024; metrics = \"\"; plot = \"\"; };"
    tables_cfg
} >"$work/tsv.cfg"
for schedule in blocking overlap stale; do
    mpi shm "$ember" train --threads 1 --schedule "$schedule" --metrics none --plot none --json |
        summary accuracy-builtin shm "$schedule" >>"$out"
    mpi shm "$ember" train --config "$work/tsv.cfg" --threads 1 --schedule "$schedule" --json |
        summary accuracy-criteo-tsv shm "$schedule" >>"$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(bench, transport, schedule, key):
    v = [r[key] for r in rows if (r["bench"], r["transport"], r["schedule"]) == (bench, transport, schedule)]
    return statistics.median(v) if v else float("nan")
print("| run | transport | schedule | step ms | exchange ms per step | hidden | samples/s | step vs blocking |")
print("|---|---|---|---|---|---|---|---|")
for bench in ("train", "bench"):
    for transport in ("shm", "tcp"):
        base_x, base_t = med(bench, transport, "blocking", "exchange_ms_per_step"), med(bench, transport, "blocking", "step_ms")
        for schedule in ("blocking", "overlap", "stale"):
            x, t = med(bench, transport, schedule, "exchange_ms_per_step"), med(bench, transport, schedule, "step_ms")
            sps = med(bench, transport, schedule, "samples_per_s") if bench == "train" else float("nan")
            hidden = "" if schedule == "blocking" else f"{100 * (1 - x / base_x):.0f} %"
            print(f"| {bench} | {transport} | {schedule} | {t:.2f} | {x:.2f} | {hidden} | "
                  f"{'' if sps != sps else f'{sps:,.0f}'} | {t / base_t:.2f}x |")
print()
print("| task | schedule | AUC | log loss |")
print("|---|---|---|---|")
for r in rows:
    if r["bench"].startswith("accuracy"):
        print(f'| {r["bench"][9:]} | {r["schedule"]} | {r["auc"]:.5f} | {r["logloss"]:.5f} |')
PY
