#!/usr/bin/env bash
# test.sh: the README's second command: install, build, and run every test
# with CTest (the naive-reference comparisons, thread determinism, limits,
# batch files and the command line), then the Python package's tests
# (scripts/python.sh; EMBER_PYTHON_TESTS=0 skips them).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh"
(cd "${EMBER_BUILD_DIR:-$repo/build}" && ctest --output-on-failure -j"$(nproc)" "$@")
[ "${EMBER_PYTHON_TESTS:-1}" = 0 ] || bash "$repo/scripts/python.sh"
