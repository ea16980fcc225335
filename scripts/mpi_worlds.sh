#!/usr/bin/env bash
# mpi_worlds.sh [BUILD_DIR]: runs every MPI test program (tests/mpi_*.c) at
# world sizes beyond CTest's -np 1..4: np 6 and 8 by default, or the sizes in
# $EMBER_MPI_WORLDS (e.g. "5 6 7 8").  Builds nothing: BUILD_DIR (default
# build/) must hold the programs (cmake --build first); an ASan build
# (-DEMBER_SANITIZE=ON) is what catches overruns.
#
# Each program runs as CTest runs its NAME_np1..4 (CMakeLists.txt): no
# arguments, OMP_NUM_THREADS=1, OMP_WAIT_POLICY=passive, LeakSanitizer with
# tests/mpi_lsan.supp, and for Open MPI shared memory only; here always
# oversubscribed and unbound (`mpiexec --allow-run-as-root --oversubscribe
# --bind-to none -np N`), under a 300 s timeout per run, CTest's TIMEOUT.
# tests/ckpt_reshard.sh then saves and loads checkpoints between those same
# world sizes (mpi_ckpt's save and load modes).  $EMBER_TEST_SEED fixes
# the seed of every run; otherwise each run draws its own.
#
# Prints one JSON line per (test, np) on stdout, e.g.
#   {"test":"mpi_dynamic","np":6,"status":"pass","seconds":12.3,"seed":123}
# (status pass, fail or timeout; np "6,8" for the resharding pairs), the
# log of every run that did not pass on stderr, and a total on stderr.
# Exits 1 when any run did not pass, 2 when a program is missing.
# docs/RELIABILITY.md ("World sizes") has the results of a run.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
build="$(cd "$build" 2>/dev/null && pwd)" || { echo "mpi_worlds: no build directory ${1:-build}" >&2; exit 2; }
read -r -a worlds <<< "${EMBER_MPI_WORLDS:-6 8}"

mpiexec="$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null)"
[ -n "$mpiexec" ] && [ -x "$mpiexec" ] || mpiexec="$(command -v mpiexec)" ||
    { echo "mpi_worlds: no mpiexec" >&2; exit 2; }

# CMakeLists.txt's environment of the MPI tests
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export LSAN_OPTIONS="suppressions=$repo/tests/mpi_lsan.supp:print_suppressions=0"
flags=()
if "$mpiexec" --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
    flags=(--allow-run-as-root --oversubscribe --bind-to none)
    export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_rmaps_base_oversubscribe=1
fi

tests=()
for src in "$repo"/tests/mpi_*.c; do
    name="$(basename "$src" .c)"
    if [ ! -x "$build/$name" ]; then
        echo "mpi_worlds: $build/$name is missing (build it first: cmake --build $build)" >&2
        exit 2
    fi
    tests+=("$name")
done

work="$(mktemp -d "${TMPDIR:-/tmp}/ember_mpi_worlds_XXXXXX")"
trap 'rm -rf "$work"' EXIT
failed=0
runs=0
start_all=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# report NAME NP STATUS SECONDS LOG: the JSON line, and the log unless it passed
report() {
    local seed
    seed="$(grep -o -m1 'seed [0-9]*' "$5" | head -n1 | cut -d' ' -f2)"
    printf '{"test":"%s","np":%s,"status":"%s","seconds":%.1f,"seed":%s}\n' "$1" "$2" "$3" "$4" "${seed:-null}"
    runs=$((runs + 1))
    if [ "$3" != pass ]; then
        failed=$((failed + 1))
        echo "---- $1 at np $2: $3; its output:" >&2
        tail -n 60 "$5" >&2
    fi
}

# run NAME NP LOG CMD...: CMD under the timeout, then its report
run() {
    local name="$1" np="$2" log="$3" t0 rc status
    shift 3
    t0=$(date +%s.%N)
    timeout -k 10 300 "$@" > "$log" 2>&1
    rc=$?
    status=pass
    [ "$rc" = 0 ] || status=fail
    [ "$rc" = 124 ] && status=timeout
    report "$name" "$np" "$status" "$(since "$t0")" "$log"
}

for t in "${tests[@]}"; do
    for np in "${worlds[@]}"; do
        run "$t" "$np" "$work/$t.$np.log" "$mpiexec" "${flags[@]}" -np "$np" "$build/$t"
    done
done
sizes="$(IFS=,; echo "${worlds[*]}")"
EMBER_RESHARD_WORLDS="${worlds[*]}" run ckpt_reshard "\"$sizes\"" "$work/ckpt_reshard.log" \
    bash "$repo/tests/ckpt_reshard.sh" "$build/mpi_ckpt" "$mpiexec" "${flags[@]}" -np

printf 'mpi_worlds: %d runs at np %s in %s, %d did not pass, %.0f s in all\n' "$runs" "$sizes" "$build" \
    "$failed" "$(since "$start_all")" >&2
[ "$failed" = 0 ]
