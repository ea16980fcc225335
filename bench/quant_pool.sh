#!/usr/bin/env bash
# quant_pool.sh [OUT]: the quantized lookup table of docs/PERFORMANCE.md
# ("Inference"): bench_quant_pool (ember's pooled lookup over fp32, fp16,
# int8 and int4 rows, and a plain gather of the same rows) against
# FBGEMM's IntNBitTableBatchedEmbeddingBagsCodegen (bench/peer_fbgemm_nbit.py,
# in the venv bench/setup_fbgemm.sh makes), W1 and W2, one thread, three
# rounds alternating ember and the peer in one session.  JSON lines to OUT
# (default bench/out/quant_pool.jsonl), then the medians over rounds and the
# ratios.  About 6 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/quant_pool.jsonl}"
build="${EMBER_BUILD_DIR:-$repo/build}"
venv="${FBGEMM_VENV:-$repo/.venv-fbgemm}"
[ -x "$venv/bin/python" ] || bash "$repo/bench/setup_fbgemm.sh"
mkdir -p "$(dirname "$out")"
: >"$out"
for round in 1 2 3; do
    for w in W1 W2; do
        "$build/bench_quant_pool" --preset "$w" --threads 1 --reps 10 2>/dev/null | sed "s/}$/,\"round\":$round}/" >>"$out"
        "$venv/bin/python" "$repo/bench/peer_fbgemm_nbit.py" --preset "$w" --threads 1 --reps 10 |
            sed "s/}$/,\"round\":$round}/" >>"$out"
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys
from collections import defaultdict
ms, lim = defaultdict(list), defaultdict(list)
for l in open(sys.argv[1]):
    d = json.loads(l)
    k = (d["workload"], d["encoding"])
    ms[k + (d["impl"],)].append(d["ms_median"])
    if d["impl"] == "ember":
        lim[k].append(d["gather_ms_median"])
print("| workload | encoding | ember ms | FBGEMM ms | FBGEMM / ember | plain gather ms | gather / ember |")
print("|---|---|---|---|---|---|---|")
for (w, e) in sorted(lim):
    a, b, l = (statistics.median(ms[(w, e, "ember")]), statistics.median(ms[(w, e, "fbgemm")]),
               statistics.median(lim[(w, e)]))
    print(f"| {w} | {e} | {a:.2f} | {b:.2f} | {b / a:.2f} | {l:.2f} | {l / a:.2f} |")
PY
