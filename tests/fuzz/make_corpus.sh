#!/usr/bin/env bash
# make_corpus.sh EMBER [FUZZ_CKPT]: writes the fuzz targets' seed corpora
# under tests/fuzz/corpus/<target>/ (checked in; run again only to change
# them).  EMBER is a built `ember` command (ember convert makes the binary
# CTR seeds, of format versions 1 and 2; ember gen the batch files); the
# configs are configs/*.cfg.
# FUZZ_CKPT, a built build-fuzz/tests/fuzz/fuzz_ckpt, writes its own seeds
# from the checkpoint it saves (fuzz_ckpt.c).  Every seed is a small valid
# input, so the fuzzer starts from deep inside each reader.
set -euo pipefail
ember="$(realpath "$1")"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$repo/tests/fuzz/corpus"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"/{fuzz_tsv,fuzz_text,fuzz_ctr_bin,fuzz_batch_file}
mkdir -p "$out"/{fuzz_tsv,fuzz_text,fuzz_ctr_bin,fuzz_batch_file,fuzz_config}

# schema text (fuzz_text.c's schema; its first byte is the options byte): CSV with a header
# and quotes, CSV without one, TSV, gzip, and CSV with a UTF-8 byte-order mark (as Excel writes it)
python3 - "$out/fuzz_text" <<'PY'
import gzip, sys
out = sys.argv[1] + "/"
hdr = "h,m,s,z,p,n,y,extra\n"
rows = ['ab12,1|2:0.5|3,"x,y",2.5,-1.5,7,0.25,q', 'ff,,plain,,9,0,1,', '1,5:2,"a""b",1e3,0.5,-2,0,r']
csv = hdr + "\n".join(rows) + "\n"
open(out + "csv_header_skip", "wb").write(b"\x02" + csv.encode())
noh = "\n".join(["0.5,3,1.5,2,s1,4|5,abc", "1,,,-1,s2,,0ff", "x,1,2,3,4,5,6"]) + "\n"
open(out + "csv_noheader_fail_t2", "wb").write(bytes([0x01 | 0x08 | 0x40]) + noh.encode())
tsv = "\n".join(["0\t3\t1.5\t2\ts1\t4|5:1.5\tabc", "1\t\t\t-1\ts2\t\t0ff"]) + "\n"
open(out + "tsv_b4_t3", "wb").write(bytes([0x04 | 0x18 | 0x80]) + tsv.encode())
open(out + "gzip_header", "wb").write(b"\x02" + gzip.compress(csv.encode(), mtime=0))
open(out + "csv_bom_header", "wb").write(b"\x02\xef\xbb\xbf" + csv.encode())
PY

# TSV: a good line, one with empty fields, a CRLF line, a bad line; the
# first byte of a fuzz_tsv input is its options byte (fuzz_tsv.c).
python3 - "$work" <<'PY'
import sys
w = sys.argv[1]
def line(label, ints, cats):
    return "\t".join([label] + ints + cats)
full = line("1", [str(i) for i in range(13)], ["%08x" % (0x1000 * (i + 1) + i) for i in range(26)])
empty = line("0", [""] * 5 + ["-3", "7"] + [""] * 6, [""] * 10 + ["a1b2", "", "ffffffff"] + [""] * 13)
bad = line("2", ["x"] * 13, ["zz"] * 26)
open(w + "/two.tsv", "w").write(full + "\n" + empty + "\n")
open(w + "/mixed.tsv", "w").write(full + "\r\n" + bad + "\n" + empty)       # no final newline
open(w + "/many.tsv", "w").write("".join((full if i % 3 else empty) + "\n" for i in range(9)))
PY
printf '\x00' | cat - "$work/two.tsv" > "$out/fuzz_tsv/two_skip"
printf '\x03' | cat - "$work/mixed.tsv" > "$out/fuzz_tsv/mixed_fail_b2"
printf '\x5a' | cat - "$work/many.tsv" > "$out/fuzz_tsv/many_w2_b6"
# regressions: inputs fuzz_tsv once failed on, kept as seeds.  An integer with a
# point and zeros ("-000.00") is an integer (docs/ctr-format.md); the reference
# parser used to refuse it.
python3 -c 'import sys; sys.stdout.buffer.write(b"\x40" + "\t".join(["1", "-000.00"] + [""] * 38).encode() + b"\n")' \
    > "$out/fuzz_tsv/regress-int-point-zeros"

# binary CTR files from the same TSV (small vocabularies)
"$ember" convert "$work/two.tsv" "$out/fuzz_ctr_bin/two.bin" --rows 50 >/dev/null
"$ember" convert "$work/many.tsv" "$out/fuzz_ctr_bin/many.bin" --rows 7 >/dev/null
# version 3: a weighted multi-hot column (the movies example's first 20 lines)
head -21 "$repo/examples/data/movies.csv" > "$work/m20.csv"
"$ember" convert --config "$repo/examples/data/movies.cfg" "$work/m20.csv" "$out/fuzz_ctr_bin/v3_weights.bin" >/dev/null
# version 2: some categoricals kept as 64-bit keys (rows 0), the others hashed
"$ember" convert "$work/two.tsv" "$out/fuzz_ctr_bin/two_keys.bin" \
    --rows "0,0,0$(printf ',50%.0s' $(seq 22)),0" >/dev/null
"$ember" convert "$work/many.tsv" "$out/fuzz_ctr_bin/many_keys.bin" \
    --rows "7,0$(printf ',7,0%.0s' $(seq 12))" >/dev/null

# batch files: plain and weighted
"$ember" gen "$out/fuzz_batch_file/plain.batches" --tables 2 --rows 40 --batch 3 --pooling 2 \
    --batches 2 --seed 1 >/dev/null
"$ember" gen "$out/fuzz_batch_file/weighted.batches" --tables 1 --rows 9 --batch 2 --pooling 1 \
    --batches 1 --seed 2 --weighted >/dev/null

# scoring requests for the model of fuzz_request.c (2 dense; "a" 10 rows, "b" 1000, "k"
# keys): the first byte picks the decoder ('0' JSON, '1' binary)
rm -rf "$out/fuzz_request"
mkdir -p "$out/fuzz_request"
python3 - "$out/fuzz_request" <<'PY'
import json, struct, sys
o = sys.argv[1]
req = {"dense": [[0.5, -1], [2, 3.25]], "sparse": {"a": [[1, 9], 3], "b": [[], [999]], "k": [[-5], [1 << 62]]}}
open(o + "/two.json", "w").write("0" + json.dumps(req))
req["weights"] = {"a": [[0.5, 2], 1.5]}
open(o + "/weighted.json", "w").write("0" + json.dumps(req))
lengths, ids = [2, 1, 0, 1, 1, 1], [1, 9, 3, 999, -5, 1 << 62]
body = (b"EMBQ" + struct.pack("<IIIIIQ", 1, 2, 2, 3, 0, len(ids)) + struct.pack("<4f", 0.5, -1, 2, 3.25)
        + struct.pack("<6i", *lengths) + struct.pack("<6q", *ids))
open(o + "/two.bin", "wb").write(b"1" + body)
PY

cp "$repo"/configs/*.cfg "$out/fuzz_config/"
# two `ember train` configs (tables with a file source; the built-in student)
# are checked in beside them: train_criteo.cfg, train_synth.cfg

if [ -n "${2:-}" ]; then
    rm -rf "$out/fuzz_ckpt"
    mkdir -p "$out/fuzz_ckpt"
    printf '\0\1' >"$work/one"
    FUZZ_CKPT_SEEDS="$out/fuzz_ckpt" "$2" "$work/one" >/dev/null 2>&1
fi
ls -l "$out"/*
