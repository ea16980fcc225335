#!/usr/bin/env bash
# setup.sh: installs ember's build dependencies from Debian (only those
# missing) and builds it in build/ (or $EMBER_BUILD_DIR, with EMBER_CMAKE_ARGS
# added to cmake's; EMBER_FUZZ=1 also installs clang for scripts/fuzz.sh).
# Sourced by the README's two commands, run.sh and test.sh; safe to run again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${EMBER_BUILD_DIR:-$repo/build}"
packages=(build-essential cmake pkg-config libxxhash-dev libjansson-dev libconfig-dev libmicrohttpd-dev
          libopenmpi-dev openmpi-bin libopenblas-dev zlib1g-dev libzstd-dev zstd gnuplot-nox python3 iproute2)
# EMBER_FUZZ=1 (scripts/fuzz.sh): clang, libFuzzer and clang's OpenMP runtime too
[ "${EMBER_FUZZ:-0}" = 1 ] && packages+=(clang libclang-rt-dev libomp-dev)
bash "$repo/scripts/apt_install.sh" "${packages[@]}"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release ${EMBER_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
