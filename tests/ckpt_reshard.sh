#!/bin/bash
# ckpt_reshard.sh: checkpoints saved by a world of N ranks load into a world
# of M ranks, with other placements, for every N, M in 1..4, or in the world
# sizes listed in $EMBER_RESHARD_WORLDS (scripts/mpi_worlds.sh: "6 8")
# (tests/mpi_ckpt.c save and load modes: bit-identical rows and state, blobs
# of every saving rank, and the next training step when the config is
# world-independent).
# Usage: ckpt_reshard.sh MPI_CKPT MPIEXEC [FLAGS...] -np (the flag that takes the
# number of processes comes last); SEED from
# $EMBER_TEST_SEED, else random (printed).  CTest sets the Open MPI
# environment of the other MPI tests.
set -u
bin=$1
shift
seed=${EMBER_TEST_SEED:-$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ^ $$ ))}
echo "ckpt_reshard: seed $seed (rerun: EMBER_TEST_SEED=$seed $0 $bin $*)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/ember_reshard_XXXXXX")
trap 'rm -rf "$dir"' EXIT
worlds=${EMBER_RESHARD_WORLDS:-1 2 3 4}
fail=0
for n in $worlds; do
    s=$(( seed + n ))   # odd and even seeds: exact and mixed placements
    mkdir -p "$dir/n$n"
    if ! "$@" "$n" "$bin" save "$dir/n$n" "$s" > "$dir/log" 2>&1; then
        echo "FAIL: save with $n ranks (seed $s)"; cat "$dir/log"; fail=1; continue
    fi
    for m in $worlds; do
        if "$@" "$m" "$bin" load "$dir/n$n" "$s" > "$dir/log" 2>&1; then
            echo "ok: $n ranks -> $m ranks (seed $s)"
        else
            echo "FAIL: $n ranks -> $m ranks (seed $s)"; cat "$dir/log"; fail=1
        fi
    done
done
exit $fail
