#!/usr/bin/env bash
# keymap.sh [OUT]: the key map table of docs/PERFORMANCE.md ("Dynamic
# tables"): ember's map (bench_keymap), the plain C peer (in the same
# program) and absl::flat_hash_map (peer_absl_map.cc, built here against
# Debian's libabsl-dev, installed when missing), on the same keys, three
# rounds alternating ember and absl; bench/keymap_table.py prints the
# medians over rounds and the ratios.  JSON lines to OUT (default
# bench/out/keymap.jsonl).  About 4 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/keymap.jsonl}"
build="${EMBER_BUILD_DIR:-$repo/build}"
if ! [ -f /usr/include/absl/container/flat_hash_map.h ]; then
    apt-get install -y libabsl-dev >/dev/null
fi
peer="$build/peer_absl_map"
g++ -O3 -march=native -fopenmp -std=c++17 "$repo/bench/peer_absl_map.cc" -o "$peer" \
    $(pkg-config --cflags --libs absl_hash absl_raw_hash_set)
mkdir -p "$(dirname "$out")"
: >"$out"
for round in 1 2 3; do
    "$build/bench_keymap" --reps 5 | sed "s/}$/,\"round\":$round}/" >>"$out"
    "$peer" --reps 5 | sed "s/}$/,\"round\":$round}/" >>"$out"
done
python3 "$repo/bench/keymap_table.py" "$out"
