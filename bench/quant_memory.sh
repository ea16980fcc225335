#!/usr/bin/env bash
# quant_memory.sh [ROWS] [OUT]: the memory of a served model at each encoding
# (docs/inference.md, "Quantized tables"): a model with one table of ROWS x 64
# (default 4,000,000: 1 GB at fp32) and one small table, trained 20 steps on
# the built-in task, exported at fp32, fp16, int8 and int4, and each bundle
# scored on 4,096 held-out samples by `ember predict --json`, which reports
# the table bytes the predictor holds and the process's peak RSS (loading
# included).  JSON lines to OUT (default bench/out/quant_memory.jsonl), then
# the table.  About a minute; needs 3 GB of disk and 2.5 GB of memory.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows="${1:-4000000}"
out="${2:-$repo/bench/out/quant_memory.jsonl}"
ember="${EMBER:-$repo/build/ember}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$(dirname "$out")"
: >"$out"
cat >"$work/m.cfg" <<EOF
train = { steps = 20; metrics = ""; plot = ""; eval_samples = 4096; };
tables = ( { name = "big"; rows = $rows; dim = 64; }, { name = "small"; rows = 1000; dim = 64; } );
features = ( { name = "f0"; table = "big"; }, { name = "f1"; table = "small"; } );
EOF
(cd "$work" && "$ember" train --config m.cfg --checkpoint-dir ck >/dev/null)
for enc in fp32 fp16 int8 int4; do
    "$ember" export "$work/ck" "$work/b-$enc" --quantize "$enc" >/dev/null
    "$ember" predict "$work/b-$enc" synthetic --samples 4096 --json |
        sed "s/^{/{\"bench\":\"quant_memory\",\"rows\":$rows,\"encoding\":\"$enc\",/" >>"$out"
    rm -rf "$work/b-$enc"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = next(r for r in rows if r["encoding"] == "fp32")
print("| encoding | table bytes | fp32 / this | peak RSS (MiB) | fp32 / this | AUC |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %.2f× | %.0f | %.2f× | %.5f |" % (r["encoding"], format(r["table_bytes"], ","),
          base["table_bytes"] / r["table_bytes"], r["peak_rss_mb"], base["peak_rss_mb"] / r["peak_rss_mb"], r["auc"]))
PY
