#!/usr/bin/env bash
# dense_gemm.sh [REPS] [OUT]: the dense part's GEMMs of docs/PERFORMANCE.md ("Training"):
# installs oneDNN and libxsmm from Debian if missing (root, or sudo), builds the optional
# target bench_dense_gemm in build-gemm/ (EMBER_GEMM_BUILD_DIR to change it) and runs it:
# JSON lines to OUT (default bench/out/dense_gemm.jsonl), then a table of the summaries.
# About 10 s with the default 300 repetitions.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reps="${1:-300}"
out="${2:-$repo/bench/out/dense_gemm.jsonl}"
build="${EMBER_GEMM_BUILD_DIR:-$repo/build-gemm}"
missing=()
for p in libdnnl-dev libxsmm-dev libopenblas-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}"
fi
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_dense_gemm -j2 >/dev/null
mkdir -p "$(dirname "$out")"
"$build/bench_dense_gemm" "$reps" 2 >"$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'lib':28} thr chunk  fwd us (min)      fwd+bwd us (min)   max rel err")
for d in rows:
    if not d.get("summary"):
        continue
    fb = (f"{d['fwd_bwd_us_median']:7.0f} ({d['fwd_bwd_us_min']:.0f})"
          if "fwd_bwd_us_median" in d else "      -")
    print(f"{d['lib']:28} {d['threads']:3} {d['chunk']:5} {d['fwd_us_median']:7.0f} ({d['fwd_us_min']:.0f})"
          f"   {fb:18} {d['max_rel_err']:.2g}")
print("(microseconds for the GEMMs of one 2048-sample micro-batch: 8 chunks of 256 or 1 of 2048)")
PY
