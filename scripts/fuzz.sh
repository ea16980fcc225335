#!/usr/bin/env bash
# fuzz.sh [SECONDS]: builds the libFuzzer targets of tests/fuzz/ with clang,
# ASan and UBSan (build-fuzz/, -DEMBER_FUZZ=ON; setup.sh installs clang) and
# runs each for SECONDS (default 300) on a copy of its seed corpus
# (tests/fuzz/corpus/<target>/ is never written to), one after the other.
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

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo/tests/fuzz/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
failed=0
stats=()
for t in "${targets[@]}"; do
    corpus="$work/$t"
    mkdir -p "$corpus"
    [ -d "$repo/tests/fuzz/corpus/$t" ] && cp "$repo/tests/fuzz/corpus/$t"/* "$corpus"/
    art="$build/fuzz-artifacts/$t"
    mkdir -p "$art"
    dict=()
    case "$t" in
        fuzz_tsv) dict=(-dict="$repo/tests/fuzz/tsv.dict") ;;
        fuzz_config) dict=(-dict="$repo/tests/fuzz/config.dict") ;;
    esac
    log="$work/$t.log"
    echo "fuzz: $t for ${seconds}s" >&2
    start=$(date +%s.%N)
    rc=0
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$corpus" >"$log" 2>&1 || rc=$?
    end=$(date +%s.%N)
    crashes=0
    if [ "$rc" -ne 0 ]; then
        crashes=1
        failed=1
        tail -n 60 "$log" >&2
        found=$(grep -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //' || true)
        echo "fuzz: $t FAILED (exit $rc); reproduce with: $build/tests/fuzz/$t ${found:-<no artifact written>}" >&2
    fi
    stats+=("$(python3 - "$t" "$log" "$start" "$end" "$corpus" "$crashes" <<'PY'
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
)")
done
printf '%s\n' "${stats[@]}"
exit "$failed"
