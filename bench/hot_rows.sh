#!/usr/bin/env bash
# hot_rows.sh [OUT]: bytes per step with hot-row replication
# (docs/PERFORMANCE.md, "Hot rows").  JSON lines to OUT (default
# bench/out/hot_rows.jsonl), then the tables.  About 5 minutes.
#
#   measured  `ember bench --preset W1|W2 --optimizer sgd` under mpirun -np 2
#             and 4 (one thread per rank; 4 ranks oversubscribe 2 cores, so
#             only the bytes count there), row placement, rows exchange,
#             every table with hot_rows K in {0, 64, 256}, chosen from the 3
#             warm-up steps' counts: the busiest rank's bytes sent per step
#             (measured, and the cost model's prediction) and the step's time.
#   model     `ember plan` on the same tables pinned row-wise (configs/w1.cfg,
#             configs/w2.cfg), for 2 to 64 ranks: the busiest rank's larger of
#             bytes sent and received, with K in {0, 64, 256}, and with the K
#             `ember plan --hot-rows` picks.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/hot_rows.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
export OMP_NUM_THREADS=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
for preset in W1 W2; do
    for np in 2 4; do
        for k in 0 64 256; do
            (cd "$work" && mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$np" "$ember" bench \
                --preset "$preset" --optimizer sgd --threads 1 --iters 10 --warmup 3 --hot-rows "$k") |
                python3 -c '
import json, sys
j = json.loads([l for l in sys.stdin if l.startswith("{")][-1])
print(json.dumps({"bench": "measured", "workload": sys.argv[1], "ranks": j["ranks"], "hot_rows": j["hot_rows"],
                  "bytes_sent_max": j["bytes_sent_per_step_max"],
                  "predicted_sent_max": j["predicted_bytes_sent_per_step_max"], "step_ms": j["ms_per_iter_median"]}))' \
                    "$preset" >>"$out"
        done
    done
done
for w in w1 w2; do
    for k in 0 64 256 choose; do
        sed 's/optimizer = "[a-z_]*";/optimizer = "sgd"; placement = "row"; exchange = "rows";/' \
            "$repo/configs/$w.cfg" >"$work/$w.cfg"
        flag=()
        if [ "$k" = choose ]; then
            flag=(--hot-rows)
        elif [ "$k" != 0 ]; then
            sed -i "s/exchange = \"rows\";/exchange = \"rows\"; hot_rows = $k;/" "$work/$w.cfg"
        fi
        for W in 2 4 8 16 32 64; do
            "$ember" plan "$work/$w.cfg" --world "$W" --json "${flag[@]}" | python3 -c '
import json, sys
j = json.load(sys.stdin)
busiest = max(max(r["bytes_sent"], r["a2a_received"] + r["ag_received"]) for r in j["ranks"])
print(json.dumps({"bench": "model", "workload": sys.argv[1].upper(), "ranks": int(sys.argv[2]), "hot_rows": sys.argv[3],
                  "chosen": sorted({t["hot_rows"] for t in j["tables"]}), "busiest_bytes": busiest}))' \
                "$w" "$W" "$k" >>"$out"
        done
    done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| workload | ranks | hot rows per table | busiest rank's bytes sent (measured) | predicted | vs none | step ms |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if r["bench"] != "measured":
        continue
    base = next(b for b in rows if b["bench"] == "measured" and b["workload"] == r["workload"]
                and b["ranks"] == r["ranks"] and b["hot_rows"] == 0)
    print(f'| {r["workload"]} | {r["ranks"]} | {r["hot_rows"]} | {r["bytes_sent_max"] / 1e6:.2f} MB | '
          f'{r["predicted_sent_max"] / 1e6:.2f} MB | {100 * (r["bytes_sent_max"] / base["bytes_sent_max"] - 1):+.1f} % | '
          f'{r["step_ms"]:.1f} |')
print()
print("| workload | hot rows per table | " + " | ".join(f"{W} ranks" for W in (2, 4, 8, 16, 32, 64)) + " |")
print("|---|---|" + "---|" * 6)
for wl in ("W1", "W2"):
    for k in ("0", "64", "256", "choose"):
        cells = []
        for W in (2, 4, 8, 16, 32, 64):
            r = next(x for x in rows if x["bench"] == "model" and x["workload"] == wl and x["ranks"] == W
                     and x["hot_rows"] == k)
            base = next(x for x in rows if x["bench"] == "model" and x["workload"] == wl and x["ranks"] == W
                        and x["hot_rows"] == "0")
            c = f'{r["busiest_bytes"] / 1e6:.2f} MB'
            if k != "0":
                c += f' ({100 * (r["busiest_bytes"] / base["busiest_bytes"] - 1):+.0f} %)'
            if k == "choose":
                c += " K=" + "/".join(str(v) for v in r["chosen"])
            cells.append(c)
        print(f'| {wl} | {"planner" if k == "choose" else k} | ' + " | ".join(cells) + " |")
PY
