#!/usr/bin/env bash
# fuzz.sh [SECONDS]: builds the libFuzzer targets of tests/fuzz/ with clang,
# ASan and UBSan (build-fuzz/, -DEMBER_FUZZ=ON; setup.sh installs clang) and
# runs each for SECONDS (default 300) on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/ is never written to), one after the other.
#   FUZZ_RUNS=N        run each target for N executions instead (libFuzzer's
#                      -runs; no time limit): the long runs of RELIABILITY.md
#                      take N = 10000000
#   FUZZ_JOBS=J        J targets at a time (default 1), each on one core
#   FUZZ_TARGETS="a b" those targets only
# Exits 1 when a target crashed, leaked, hit undefined behaviour, ran out of
# memory or took longer than 10 s on one input, and prints the file that
# reproduces it (build-fuzz/fuzz-artifacts/<target>/; rerun with
# `build-fuzz/tests/fuzz/<target> FILE`).  Ends with one JSON line per target:
#   {"target":"fuzz_tsv","seconds":20,"execs":..,"exec_per_s":..,"corpus":..,"crashes":0}
# docs/RELIABILITY.md ("Fuzzing") has the targets and the long-run figures.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-300}"
build="$repo/build-fuzz"

EMBER_FUZZ=1 CC=clang EMBER_BUILD_DIR="$build" \
    EMBER_CMAKE_ARGS="-DEMBER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" bash "$repo/scripts/setup.sh"

targets=(fuzz_tsv fuzz_text fuzz_ctr_bin fuzz_batch_file fuzz_config fuzz_ckpt fuzz_model fuzz_request)
[ -z "${FUZZ_TARGETS:-}" ] || read -r -a targets <<<"$FUZZ_TARGETS"
runs="${FUZZ_RUNS:-}"
jobs="${FUZZ_JOBS:-1}"
limit=(-max_total_time="$seconds")
[ -z "$runs" ] || limit=(-runs="$runs")

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo/tests/fuzz/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# fuzz_text parses on 1-3 OpenMP threads: waiting threads sleep instead of
# spinning, or a busy machine (or FUZZ_JOBS=2 on 2 cores) slows them tenfold
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# One target: its log, then its JSON line in $work/$t.json (crashes 1 when it failed).
run_target() {
    local t=$1 corpus="$work/$1" art="$build/fuzz-artifacts/$1" dict=() log="$work/$1.log" start end rc=0 crashes=0
    mkdir -p "$corpus" "$art"
    [ -d "$repo/tests/fuzz/corpus/$t" ] && cp "$repo/tests/fuzz/corpus/$t"/* "$corpus"/
    case "$t" in
        fuzz_tsv) dict=(-dict="$repo/tests/fuzz/tsv.dict") ;;
        fuzz_config) dict=(-dict="$repo/tests/fuzz/config.dict") ;;
    esac
    if [ -n "$runs" ]; then echo "fuzz: $t for $runs runs" >&2; else echo "fuzz: $t for ${seconds}s" >&2; fi
    start=$(date +%s.%N)
    "$build/tests/fuzz/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
    end=$(date +%s.%N)
    if [ "$rc" -ne 0 ]; then
        crashes=1
        tail -n 60 "$log" >&2
        found=$(grep -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //' || true)
        echo "fuzz: $t FAILED (exit $rc); reproduce with: $build/tests/fuzz/$t ${found:-<no artifact written>}" >&2
    fi
    python3 - "$t" "$log" "$start" "$end" "$corpus" "$crashes" >"$work/$t.json" <<'PY'
import json, os, re, sys
t, log, start, end, corpus, crashes = sys.argv[1:]
text = open(log, errors="replace").read()
def stat(name):
    m = re.search(r"stat::%s:\s+(\d+)" % name, text)
    return int(m.group(1)) if m else None
secs = float(end) - float(start)
execs = stat("number_of_executed_units")
eps = stat("average_exec_per_sec")
print(json.dumps({"target": t, "seconds": round(secs, 1), "execs": execs, "exec_per_s": eps,
                  "corpus": len(os.listdir(corpus)), "crashes": int(crashes)}, separators=(",", ":")))
PY
}

for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    run_target "$t" &
done
wait
failed=0
stats=()
for t in "${targets[@]}"; do
    stats+=("$(cat "$work/$t.json")")
    grep -q '"crashes":0' "$work/$t.json" || failed=1
done
printf '%s\n' "${stats[@]}"
exit "$failed"
