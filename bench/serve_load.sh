#!/usr/bin/env bash
# serve_load.sh [SECONDS] [OUT]: `ember serve` under a real HTTP load generator (Debian's
# wrk, installed here when missing) on loopback: requests/s, samples/s, p50/p99 latency and
# where a request's time goes, at batch 1, 64 and 512, for 1 scorer of 1 and 2 threads and 2
# scorers of 1 thread, bodies of ids (JSON, binary) and of raw rows (JSON rows, TSV lines),
# with the server's resident memory; then the scorer alone by scoring threads
# (bench/serve_load.py says how).  JSON lines to OUT (default bench/out/serve_load.jsonl) and
# a table on stdout; SECONDS per run (default 8): about 6 minutes in all.  The table in
# docs/PERFORMANCE.md ("Serving") comes from this script.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-8}"
out="${2:-$repo/bench/out/serve_load.jsonl}"
bash "$repo/scripts/setup.sh"
if ! command -v wrk >/dev/null; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq wrk >/dev/null
fi
mkdir -p "$(dirname "$out")"
python3 "$repo/bench/serve_load.py" "${EMBER:-$repo/build/ember}" "$out" "$seconds"
