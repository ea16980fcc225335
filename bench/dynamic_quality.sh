#!/usr/bin/env bash
# dynamic_quality.sh [OUT]: the quality table of docs/PERFORMANCE.md
# ("Dynamic tables"): `ember train` on the synthetic CTR task whose four
# largest features draw from 20 times more keys than their tables hold:
# configs/dynamic.cfg (admit_after 2, LFU; and the same with LRU) against
# configs/hashed.cfg (fixed tables of the same memory that hash the keys
# into their rows), and, as the ceiling, tables that hold every key (fixed,
# and dynamic with capacity = keys).  1500 steps each; the AUC and log loss
# on the held-out stream.  JSON lines (ember train's summary, with a
# "variant" field) to OUT (default bench/out/dynamic_quality.jsonl).  About
# 2 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/bench/out/dynamic_quality.jsonl}"
ember="${EMBER:-$repo/build/ember}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
cp "$repo/configs/dynamic.cfg" "$tmp/dynamic-lfu.cfg"
sed 's/evict = "lfu"/evict = "lru"/' "$repo/configs/dynamic.cfg" >"$tmp/dynamic-lru.cfg"
cp "$repo/configs/hashed.cfg" "$tmp/hashed.cfg"
sed -e 's/keys = \([0-9]*\); rows = [0-9]*;/rows = \1;/' "$repo/configs/hashed.cfg" >"$tmp/fixed-all-keys.cfg"
sed -e 's/keys = \([0-9]*\); *capacity = [0-9]*; *admit_after = 2/keys = \1; capacity = \1; admit_after = 1/' \
    "$repo/configs/dynamic.cfg" >"$tmp/dynamic-all-keys.cfg"
for v in hashed dynamic-lfu dynamic-lru fixed-all-keys dynamic-all-keys; do
    (cd "$tmp" && "$ember" train --config "$tmp/$v.cfg" --steps 1500 --plot none --metrics none) |
        grep '^{"event":"summary"' | sed "s/^{/{\"variant\":\"$v\",/" >>"$out"
done
python3 - "$out" <<'PY'
import json, sys
print("| tables | AUC | log loss | teacher AUC |")
print("|---|---|---|---|")
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(f"| {d['variant']} | {d['auc']:.4f} | {d['logloss']:.4f} | {d['teacher_auc']:.4f} |")
PY
