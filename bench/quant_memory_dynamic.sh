#!/usr/bin/env bash
# quant_memory_dynamic.sh [CAPACITY] [OUT]: the memory of a served model with a
# dynamic table at each encoding (docs/inference.md, "Bundles"): one dynamic
# table of CAPACITY rows x 64 (default 1,000,000; admission on first use, LRU)
# and one small fixed table, trained on the built-in task until the dynamic
# table is full (20 keys a sample from 40 x CAPACITY distinct keys, so keys
# were evicted), exported at fp32, fp16, int8 and int4; the checkpoint and
# each bundle scored on 4,096 held-out samples by `ember predict --json`,
# which reports the table bytes the predictor holds (rows only: the key
# index is beside them) and the process's peak RSS (loading included).  JSON
# lines to OUT (default bench/out/quant_memory_dynamic.jsonl), then the table.
# About a minute; needs 1.5 GB of disk and 1 GB of memory.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cap="${1:-1000000}"
out="${2:-$repo/bench/out/quant_memory_dynamic.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
steps=$(( (cap + 20 * 2048 - 1) / (20 * 2048) + 5 )) # 2,048 samples of 20 keys a step, then 5 more
cat >"$work/m.cfg" <<EOF2
train = { steps = $steps; metrics = ""; plot = ""; eval_samples = 4096; };
tables = ( { name = "big"; kind = "dynamic"; keys = $((40 * cap)); capacity = $cap; admit_after = 1; dim = 64; },
           { name = "small"; rows = 1000; dim = 64; } );
features = ( { name = "f0"; table = "big"; pooling = 20; }, { name = "f1"; table = "small"; } );
data = { dist = "uniform"; };
EOF2
(cd "$work" && "$ember" train --config m.cfg --checkpoint-dir ck >/dev/null)
"$ember" predict "$work/ck" synthetic --samples 4096 --json |
    sed "s/^{/{\"bench\":\"quant_memory_dynamic\",\"capacity\":$cap,\"encoding\":\"checkpoint\",/" >>"$out"
for enc in fp32 fp16 int8 int4; do
    "$ember" export "$work/ck" "$work/b-$enc" --quantize "$enc" >/dev/null
    keys=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tables"][0]["rows"])' "$work/b-$enc/manifest.json")
    "$ember" predict "$work/b-$enc" synthetic --samples 4096 --json |
        sed "s/^{/{\"bench\":\"quant_memory_dynamic\",\"capacity\":$cap,\"keys\":$keys,\"encoding\":\"$enc\",/" >>"$out"
    rm -rf "$work/b-$enc"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if r["encoding"] == "fp32")
print("| model | keys | table bytes | fp32 / this | peak RSS (MiB) | fp32 / this | AUC |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s | %.2f× | %.0f | %.2f× | %.5f |" % (r["encoding"], format(r.get("keys", r["capacity"]), ","),
          format(r["table_bytes"], ","), base["table_bytes"] / r["table_bytes"], r["peak_rss_mb"],
          base["peak_rss_mb"] / r["peak_rss_mb"], r["auc"]))
PY
