#!/usr/bin/env bash
# cli.sh: checks of the `ember` command line, run by CTest as
#   bash tests/cli.sh path/to/ember
# Each check is a small function that returns 0 (pass) or not; its output is
# shown only when it fails.  To add one: define check_<name> and add <name>
# to CHECKS (anywhere above the runner at the bottom).  Ends with
# "N passed, N failed" and exits 1 when any failed.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # EMBER, TMP, expect_status, mpi2, run_checks

json_lines_valid() { # file: every line is a JSON object
    python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]' <"$1"
}

# ------------------------------------------------------------ ember limits

check_limits_synthetic_json() {
    expect_status 0 "$EMBER" limits --synthetic --preset W2 --batches 3 --shards 4 --json || return 1
    json_lines_valid "$TMP/out" || return 1
    python3 - "$TMP/out" <<'EOF'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
tables = [r for r in recs if r.get("record") == "table"]
assert len(tables) == 26, len(tables)            # W2: 26 tables
assert recs[-1].get("record") == "summary", recs[-1]
keys = ["table", "shards", "batches", "max_ids", "max_unique_ids", "p999_ids",
        "p999_unique_ids", "suggested_max_ids_per_partition",
        "suggested_max_unique_ids_per_partition"]
for r in tables:
    for k in keys:
        assert k in r, (k, r)
    assert r["shards"] == 4 and r["batches"] == 3, r
    # W2: pooling 1, so every bag is one unit; 2048 samples over 4 shards
    assert 2048 // 4 <= r["max_ids"] <= 2048, r
    assert 1 <= r["max_unique_ids"] <= r["max_ids"], r
    assert r["suggested_max_ids_per_partition"] == math.ceil(r["p999_ids"] - 1e-9), r
    assert r["suggested_max_ids_per_partition"] <= r["max_ids"], r
    assert r["suggested_max_unique_ids_per_partition"] <= r["max_unique_ids"], r
    assert r["ids_total"] == r["dedup_ids_total"] == 3 * 2048, r
s = recs[-1]
assert s["tables"] == 26 and s["batches"] == 3 and s["shards"] == 4, s
assert s["max_ids"] == max(r["max_ids"] for r in tables), s
EOF
}
CHECKS+=(limits_synthetic_json)

check_gen_then_limits_agree() {
    local f="$TMP/w2.bin"
    expect_status 0 "$EMBER" gen "$f" --preset W2 --batches 3 --seed 7 || return 1
    [ -f "$f" ] && [ ! -e "$f.tmp" ] || { echo "no $f, or $f.tmp left behind"; return 1; }
    expect_status 0 "$EMBER" limits "$f" --shards 4 --json || return 1
    cp "$TMP/out" "$TMP/from_file"
    expect_status 0 "$EMBER" limits --synthetic --preset W2 --batches 3 --seed 7 --shards 4 \
        --json || return 1
    python3 - "$TMP/from_file" "$TMP/out" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
for r in a + b:
    r.pop("source", None); r.pop("seconds", None)
assert len(a) == len(b) == 27, (len(a), len(b))
for x, y in zip(a, b):
    assert x == y, (x, y)
EOF
}
CHECKS+=(gen_then_limits_agree)

# The counts recomputed in Python straight from docs/batch-format.md and
# ember.h's rule (units = distinct ids per bag; shard = (offset + id) % S;
# every table here is dim 1 SGD, so stacking puts them all in one group).
check_limits_python_recount() {
    local f="$TMP/small.bin"
    expect_status 0 "$EMBER" gen "$f" --tables 3 --rows 1001 --batch 64 --pooling 6 \
        --dist zipf --alpha 1.2 --batches 5 --seed 3 --weighted || return 1
    local stack shards
    for stack in stack no-stack; do
        for shards in 1 3 8; do
            local extra=""
            [ $stack = no-stack ] && extra=--no-stack
            expect_status 0 "$EMBER" limits "$f" --shards $shards --json $extra || return 1
            python3 - "$f" "$TMP/out" $shards $stack <<'EOF' || return 1
import json, struct, sys
path, out, S, stack = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "stack"
d = open(path, "rb").read()
assert d[:8] == b"EMBBATCH" and struct.unpack_from("<I", d, 8)[0] == 1
T, F = struct.unpack_from("<ii", d, 16)
rows = struct.unpack_from("<%dq" % T, d, 24)
ftab = struct.unpack_from("<%di" % F, d, 24 + 8 * T)
pos = 24 + 8 * T + 4 * F + 8
off = [sum(rows[:t]) if stack else 0 for t in range(T)]
mx = [0] * T; mu = [0] * T; nb = 0
while True:
    marker = d[pos:pos + 4]
    if marker == b"BEND":
        assert struct.unpack_from("<q", d, pos + 4)[0] == nb
        assert pos + 20 == len(d)
        break
    assert marker == b"BREC", marker
    B, N, flags = struct.unpack_from("<iqI", d, pos + 4)
    lengths = struct.unpack_from("<%di" % (F * B), d, pos + 20)
    ids = struct.unpack_from("<%dq" % N, d, pos + 20 + 4 * F * B)
    pos += 20 + 4 * F * B + 8 * N + (4 * N if flags & 1 else 0) + 8
    cnt = {}; seen = {}
    k = 0
    for f in range(F):
        t = ftab[f]
        for b in range(B):
            bag = ids[k:k + lengths[f * B + b]]; k += lengths[f * B + b]
            for i in set(bag):
                s = (off[t] + i) % S
                cnt[t, s] = cnt.get((t, s), 0) + 1
                seen.setdefault((t, s), set()).add(i)
    for t in range(T):
        mx[t] = max(mx[t], max([cnt.get((t, s), 0) for s in range(S)]))
        mu[t] = max(mu[t], max([len(seen.get((t, s), ())) for s in range(S)]))
    nb += 1
recs = [json.loads(l) for l in open(out)]
for r in recs[:-1]:
    t = r["table"]
    assert r["batches"] == nb == 5, r
    assert (r["max_ids"], r["max_unique_ids"]) == (mx[t], mu[t]), (S, stack, r, mx[t], mu[t])
assert recs[-1]["stack_tables"] == stack
EOF
        done
    done
}
CHECKS+=(limits_python_recount)

# the note prints "  t<i>: ..." lines indented, so only the 3 table rows start with t<i>
check_limits_text() {
    expect_status 0 "$EMBER" limits --synthetic --tables 3 --rows 5000 --batch 256 --pooling 8 \
        --batches 4 --shards 2 --dedup-note || return 1
    grep -q "4 batches, 3 tables, 3 features, 2 shards, stacking on" "$TMP/out" || return 1
    grep -q "^table " "$TMP/out" || return 1
    [ "$(grep -c '^t[0-9]' "$TMP/out")" = 3 ] || { echo "want 3 table rows"; return 1; }
    grep -q "per-sample dedup removed" "$TMP/out" || return 1
    # aligned: every row of the table is as wide as the header up to the last column
    awk '/^table /{w=index($0,"suggest")} /^t[0-9]/{ if (substr($0,w-2,2) != "  ") bad=1 } END{exit bad}' \
        "$TMP/out" || { echo "columns not aligned"; return 1; }
}
CHECKS+=(limits_text)

check_limits_missing_file() {
    local f="$TMP/no-such-file.bin"
    expect_status 1 "$EMBER" limits "$f" || return 1
    grep -q "no-such-file.bin" "$TMP/err" || { echo "stderr does not name the file"; return 1; }
}
CHECKS+=(limits_missing_file)

check_limits_bad_files() {
    local f="$TMP/junk.bin" g="$TMP/cut.bin"
    head -c 100 /dev/urandom >"$f"
    expect_status 1 "$EMBER" limits "$f" || return 1
    grep -q "junk.bin" "$TMP/err" || return 1
    expect_status 0 "$EMBER" gen "$TMP/full.bin" --tables 2 --rows 100 --batch 8 --batches 3 || return 1
    head -c $(($(stat -c %s "$TMP/full.bin") - 5)) "$TMP/full.bin" >"$g"
    expect_status 1 "$EMBER" limits "$g" || return 1
    grep -q "cut.bin" "$TMP/err" && grep -qi "truncated" "$TMP/err" || return 1
}
CHECKS+=(limits_bad_files)

check_limits_usage_errors() {
    expect_status 2 "$EMBER" limits --synthetic --no-such-flag || return 1
    expect_status 2 "$EMBER" limits || return 1
    expect_status 2 "$EMBER" limits "$TMP/x.bin" --synthetic || return 1
    expect_status 2 "$EMBER" limits "$TMP/x.bin" --preset W1 || return 1   # needs --synthetic
    expect_status 2 "$EMBER" limits --synthetic --shards 0 || return 1
    expect_status 2 "$EMBER" limits --synthetic --preset W9 || return 1
    expect_status 2 "$EMBER" limits --synthetic --dist normal || return 1
    expect_status 0 "$EMBER" limits --help || return 1
}
CHECKS+=(limits_usage_errors)

# -------------------------------------------------------------- ember gen

check_gen_usage_errors() {
    expect_status 2 "$EMBER" gen || return 1
    expect_status 2 "$EMBER" gen "$TMP/a.bin" --bogus || return 1
    expect_status 2 "$EMBER" gen "$TMP/a.bin" --batches -1 || return 1
    expect_status 2 "$EMBER" gen "$TMP/a.bin" --weighted=1 || return 1
    [ ! -e "$TMP/a.bin" ] || return 1
    expect_status 1 "$EMBER" gen "$TMP/no-dir/a.bin" --batches 1 || return 1
    grep -q "no-dir" "$TMP/err" || return 1
}
CHECKS+=(gen_usage_errors)

check_gen_weighted() {
    expect_status 0 "$EMBER" gen "$TMP/w.bin" --tables 2 --rows 50 --batch 16 --pooling 3 \
        --batches 2 --weighted --dist uniform || return 1
    # weights present: flags bit 0 of the first record
    python3 - "$TMP/w.bin" <<'EOF' || return 1
import struct, sys
d = open(sys.argv[1], "rb").read()
T, F = struct.unpack_from("<ii", d, 16)
pos = 24 + 8 * T + 4 * F + 8
assert d[pos:pos + 4] == b"BREC"
B, N, flags = struct.unpack_from("<iqI", d, pos + 4)
assert (B, N, flags) == (16, 16 * 2 * 3, 1), (B, N, flags)
EOF
    expect_status 0 "$EMBER" limits "$TMP/w.bin" --json || return 1
}
CHECKS+=(gen_weighted)

check_gen_task() { # the synthetic task written once, then trained from the file: the same run, bit for bit
    expect_status 0 "$EMBER" gen --task 40960 "$TMP/task.bin" || return 1
    expect_status 0 "$EMBER" gen --task 8192 --eval "$TMP/task_eval.bin" || return 1
    grep -q "wrote 8192 samples of the built-in task's held-out stream (13 dense, 8 sparse features)" "$TMP/out" || return 1
    local seed=$((RANDOM % 1000)) a b
    printf 'data = { seed = %d; };\ntrain = { eval_every = 0; };\n' "$seed" >"$TMP/seed.cfg"
    expect_status 0 "$EMBER" gen --task 40960 "$TMP/s.bin" --config "$TMP/seed.cfg" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/seed.cfg" --steps 20 --eval-samples 4096 --eval-every 0 --json --metrics none --plot none || return 1
    a=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    expect_status 0 "$EMBER" gen --task 4096 --eval "$TMP/s_eval.bin" --config "$TMP/seed.cfg" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/seed.cfg" --train-file "$TMP/s.bin" --eval-file "$TMP/s_eval.bin" \
        --steps 20 --eval-every 0 --json --metrics none --plot none || return 1
    b=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "seed $seed: built-in task $a, from the file $b"; return 1; }
    expect_status 2 "$EMBER" gen --task 0 "$TMP/z.bin" || return 1
    expect_status 2 "$EMBER" gen --task 10 "$TMP/z.bin" --batches 3 || return 1
    expect_status 1 "$EMBER" gen --task 10 "$TMP/no-dir/z.bin" || return 1
    grep -q "no-dir" "$TMP/err" || return 1
    # a file source holds fewer samples than asked: the count printed is the count written
    printf 'data = { source = "binary"; train_file = "%s"; };\ntrain = { eval_every = 0; };\n' "$TMP/task.bin" >"$TMP/file.cfg"
    expect_status 0 "$EMBER" gen --task 50000 "$TMP/copy.bin" --config "$TMP/file.cfg" || return 1
    grep -q "wrote 40960 samples" "$TMP/out" || { cat "$TMP/out"; return 1; }
}
CHECKS+=(gen_task)

# ------------------------------------------------------------ ember bench

# $1: JSON lines of `ember bench`; $2: the (optimizer, threads) pairs wanted,
# e.g. "none:1 adagrad:1".  One line per pair, every field, min <= median <= max.
bench_lines_ok() {
    json_lines_valid "$1" || return 1
    python3 - "$1" "$2" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
want = sorted(tuple(p.split(":")) for p in sys.argv[2].split())
got = sorted((r.get("optimizer"), str(r.get("threads"))) for r in recs)
assert got == want, (got, want)
keys = ["impl", "workload", "threads", "optimizer", "ms_per_iter_median", "ms_per_iter_min",
        "ms_per_iter_max", "ids_per_s", "peak_rss_mb"]
for r in recs:
    assert "error" not in r and "skipped" not in r, r
    for k in keys:
        assert k in r, (k, r)
    assert r["impl"] == "ember", r
    assert 0 <= r["ms_per_iter_min"] <= r["ms_per_iter_median"] <= r["ms_per_iter_max"], r
    assert r["ids_per_s"] > 0 and r["peak_rss_mb"] > 0, r
EOF
}

check_bench_default() {
    expect_status 0 "$EMBER" bench || return 1
    bench_lines_ok "$TMP/out" "none:1 adagrad:1" || return 1
    python3 - "$TMP/out" <<'EOF'
import json, sys
for r in map(json.loads, open(sys.argv[1])):   # the quick shape
    shape = [r[k] for k in ("workload", "tables", "rows", "dim", "batch", "pooling", "dist")]
    assert shape == ["t8_r100000_d64_b1024_p20_zipf", 8, 100000, 64, 1024, 20, "zipf"], r
    assert (r["iters"], r["warmup"], r["alpha"], r["seed"]) == (10, 3, 1.05, 0), r
EOF
}
CHECKS+=(bench_default)

# several pairs: each one runs in a child process of its own
check_bench_pairs() {
    expect_status 0 "$EMBER" bench --optimizer sgd,adam --threads 1,2 --iters 2 --warmup 1 \
        --tables 2 --rows 10000 --batch 256 --pooling 4 || return 1
    bench_lines_ok "$TMP/out" "sgd:1 sgd:2 adam:1 adam:2" || return 1
    # half optimizer state: the line says so (only where the optimizer keeps state per element)
    expect_status 0 "$EMBER" bench --optimizer sgd,adam --state-precision bf16 --iters 1 --warmup 0 --tables 2 \
        --rows 1000 --batch 64 --pooling 2 || return 1
    grep -c '"state_precision":"bf16"' "$TMP/out" | grep -qx 1 || { cat "$TMP/out"; return 1; }
    grep '"optimizer":"adam"' "$TMP/out" | grep -q '"state_precision":"bf16"' || { cat "$TMP/out"; return 1; }
}
CHECKS+=(bench_pairs)

# the preset's shape, dim included, with flags before it overriding part of it
check_bench_preset() {
    expect_status 0 "$EMBER" bench --rows 1000 --dist uniform --preset W2 --iters 1 --warmup 0 \
        --optimizer none || return 1
    bench_lines_ok "$TMP/out" "none:1" || return 1
    python3 - "$TMP/out" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
shape = [r[k] for k in ("workload", "tables", "rows", "dim", "batch", "pooling", "dist", "alpha")]
assert shape == ["W2", 26, 1000, 128, 2048, 1, "uniform", None], r
EOF
}
CHECKS+=(bench_preset)

check_bench_usage_errors() {
    local bad
    for bad in "--dim 0" "--dim=2000" "--optimizer foo" "--optimizer sgd,foo" "--threads 0" \
        "--iters 0" "--rows 0" "--tables x" "--dist normal" "--alpha 0" "--precision fp8" "--rounding up" \
        "--state-precision fp64"; do
        expect_status 2 "$EMBER" bench $bad || return 1
        grep -q -- "${bad%%[ =]*}" "$TMP/err" || { echo "stderr does not name the flag"; return 1; }
        [ ! -s "$TMP/out" ] || { echo "stdout not empty: $bad"; return 1; }
    done
    expect_status 2 "$EMBER" bench --preset W9 || return 1
    grep -q "W9" "$TMP/err" || return 1
    expect_status 2 "$EMBER" bench --no-such-flag 1 || return 1
    expect_status 2 "$EMBER" bench --weighted 1 || return 1   # gen's flag, not bench's
    expect_status 2 "$EMBER" bench --iters || return 1
    expect_status 0 "$EMBER" bench --help || return 1
    grep -q "usage: ember bench" "$TMP/out" || return 1
}
CHECKS+=(bench_usage_errors)

# ------------------------------------------------- under mpirun
# Every subcommand under `mpirun -np 2`: same exit code on every rank (mpirun
# returns it), normal output once (rank 0), data-parallel input.  Open MPI
# on shared memory, oversubscribed, as root (as the MPI tests in CMakeLists);
# each mpirun under a timeout, so a hang fails instead of blocking.  Under
# ASan, leak checking is off here: Open MPI unloads its components before
# LeakSanitizer runs, so their allocations cannot be suppressed by name (the
# same code paths are leak-checked alone above).

check_mpi_bench() {
    have_mpirun || return 0
    expect_status 0 mpi2 bench --tables 4 --rows 10000 --batch 256 --pooling 4 --iters 2 \
        --warmup 1 --optimizer none,sgd || return 1
    bench_lines_ok "$TMP/out" "none:1 sgd:1" || return 1   # one line per pair: printed once
    python3 - "$TMP/out" <<'EOF2' || return 1
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    assert (r["ranks"], r["placement"], r["exchange"], r["batch"]) == (2, "row", "rows", 256), r
    assert r["bytes_sent_per_step_max"] > 0 and len(r["bytes_sent_per_step_by_rank"]) == 2, r
    assert r["bytes_sent_per_step_sum"] == r["bytes_received_per_step_sum"], r
    assert 0 <= r["comm_share"] <= 1, r
    if r["optimizer"] == "sgd":   # the cost model's bytes, within the 10 % target
        assert 0.9 <= r["measured_over_predicted_sum"] <= 1.1, r
    else:                         # forward only: the model predicts a whole step
        assert r["predicted_bytes_sent_per_step_sum"] is None, r
EOF2
    local p
    for p in "column" "table" "replicated" "row --exchange pooled"; do
        expect_status 0 mpi2 bench --tables 3 --rows 1000 --batch 64 --pooling 3 --iters 1 \
            --warmup 0 --optimizer adagrad --placement $p || return 1
        bench_lines_ok "$TMP/out" "adagrad:1" || { echo "placement $p"; return 1; }
    done
    expect_status 2 mpi2 bench --placement diagonal || return 1
    [ "$(grep -c "bad value 'diagonal' for --placement" "$TMP/err")" = 1 ] ||
        { echo "want the usage error once"; return 1; }
}
CHECKS+=(mpi_bench)

# limits at -np 2: each rank counts its half of the samples, the report is of
# the max over ranks per (table, shard); --shards defaults to the world size.
check_mpi_limits() {
    have_mpirun || return 0
    local f="$TMP/mpi.bin"
    expect_status 0 "$EMBER" gen "$f" --tables 3 --rows 1001 --batch 65 --pooling 6 \
        --dist zipf --alpha 1.2 --batches 4 --seed 5 || return 1
    expect_status 0 mpi2 limits "$f" --json || return 1
    python3 - "$f" "$TMP/out" <<'EOF2' || return 1
import json, struct, sys
path, out = sys.argv[1], sys.argv[2]
d = open(path, "rb").read()
T, F = struct.unpack_from("<ii", d, 16)
rows = struct.unpack_from("<%dq" % T, d, 24)
ftab = struct.unpack_from("<%di" % F, d, 24 + 8 * T)
pos = 24 + 8 * T + 4 * F + 8
off = [sum(rows[:t]) for t in range(T)]   # stacked: one group (dim 1, SGD)
W, S = 2, 2
mx = [0] * T; mu = [0] * T
while d[pos:pos + 4] == b"BREC":
    B, N, flags = struct.unpack_from("<iqI", d, pos + 4)
    lengths = struct.unpack_from("<%di" % (F * B), d, pos + 20)
    ids = struct.unpack_from("<%dq" % N, d, pos + 20 + 4 * F * B)
    pos += 20 + 4 * F * B + 8 * N + (4 * N if flags & 1 else 0) + 8
    bags = {}; k = 0
    for f in range(F):
        for b in range(B):
            bags[f, b] = ids[k:k + lengths[f * B + b]]; k += lengths[f * B + b]
    for r in range(W):                      # rank r: samples [r*B//W, (r+1)*B//W)
        cnt = {}; seen = {}
        for f in range(F):
            t = ftab[f]
            for b in range(r * B // W, (r + 1) * B // W):
                for i in set(bags[f, b]):
                    s = (off[t] + i) % S
                    cnt[t, s] = cnt.get((t, s), 0) + 1
                    seen.setdefault((t, s), set()).add(i)
        for t in range(T):
            for s in range(S):
                mx[t] = max(mx[t], cnt.get((t, s), 0))
                mu[t] = max(mu[t], len(seen.get((t, s), ())))
recs = [json.loads(l) for l in open(out)]
assert len(recs) == T + 1, len(recs)                    # printed once
assert recs[-1]["record"] == "summary" and recs[-1]["ranks"] == 2, recs[-1]
for r in recs[:-1]:
    t = r["table"]
    assert r["shards"] == 2 and r["batches"] == 4, r
    assert (r["max_ids"], r["max_unique_ids"]) == (mx[t], mu[t]), (r, mx[t], mu[t])
    assert r["ids_total"] == 4 * 65 * 6, r               # totals of the global batches
EOF2
    expect_status 0 mpi2 limits --synthetic --tables 2 --rows 500 --batch 32 --batches 2 || return 1
    [ "$(grep -c '^ember limits:' "$TMP/out")" = 1 ] || { echo "want one header"; return 1; }
    grep -q "over 2 ranks" "$TMP/out" || return 1
    expect_status 1 mpi2 limits "$TMP/no-such.bin" || return 1
    grep -q "rank 0: .*no-such.bin" "$TMP/err" || return 1
    expect_status 2 mpi2 limits --synthetic --shards 0 || return 1
}
CHECKS+=(mpi_limits)

# gen at -np 2: rank 0 writes (the same bytes as alone), the others wait for its status
check_mpi_gen() {
    have_mpirun || return 0
    expect_status 0 mpi2 gen "$TMP/g2.bin" --tables 2 --rows 100 --batch 8 --batches 3 \
        --seed 9 || return 1
    [ "$(grep -c '^ember gen: wrote 3 batches' "$TMP/out")" = 1 ] || { echo "want one line"; return 1; }
    expect_status 0 "$EMBER" gen "$TMP/g1.bin" --tables 2 --rows 100 --batch 8 --batches 3 \
        --seed 9 || return 1
    cmp "$TMP/g1.bin" "$TMP/g2.bin" || return 1
    [ ! -e "$TMP/g2.bin.tmp" ] || return 1
    expect_status 1 mpi2 gen "$TMP/no-dir/a.bin" --batches 1 || return 1
    [ "$(grep -c "no-dir" "$TMP/err")" = 1 ] || { echo "want the error once"; return 1; }
}
CHECKS+=(mpi_gen)

# ------------------------------------------------------------ ember plan
PLAN_CONFIGS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../configs" && pwd)"

check_plan_workloads() { # W1-W3 and the cluster plan: text, one line per rank
    local c
    for c in w1 w2 w3 cluster64 tiny; do
        expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/$c.cfg" || return 1
        grep -q "^imbalance" "$TMP/out" || { echo "$c: no imbalance line"; return 1; }
    done
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/w1.cfg" --world 8 || return 1
    [ "$(grep -cE '^ +[0-7]  ' "$TMP/out")" = 8 ] || { echo "W1: not 8 rank lines"; return 1; }
    [ "$(grep -cE '^t[0-7] .* table ' "$TMP/out")" = 8 ] || { echo "W1 at 8: not table-wise"; return 1; }
}
CHECKS+=(plan_workloads)

check_plan_json() { # --json, --world and --memory-per-rank override the config
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/cluster64.cfg" --world 1024 \
        --memory-per-rank 32G --json || return 1
    python3 - "$TMP/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["world"] == 1024 and p["memory_per_rank"] == 32 << 30, p["world"]
assert len(p["ranks"]) == 1024 and len(p["tables"]) == 123
for t in p["tables"]:
    assert t["placement"] in ("row", "column", "table", "replicated"), t
    assert t["reason"], t
    if t["placement"] == "table":
        assert 0 <= t["owner"] < 1024, t
for r in p["ranks"]:
    assert r["row_bytes"] + r["state_bytes"] <= 32 << 30, r
    assert r["bytes_sent"] == r["a2a_sent"] + r["ag_sent"], r
tot = p["totals"]
assert abs(tot["bytes_sent"] - sum(r["bytes_sent"] for r in p["ranks"])) <= 1024, tot
assert p["imbalance"]["ids_served"] >= 1 and p["seconds"] < 2, p["imbalance"]
big = {t["name"]: t for t in p["tables"]}["user_id"]
assert big["placement"] == "row", big          # 481 GiB fits no rank
PY
}
CHECKS+=(plan_json)

check_plan_tiers() { # over the budget: the SSD tier, its cache sized to the rest, a hit rate
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/w3.cfg" --world 1 --memory-per-rank 4G --json || return 1
    python3 - "$TMP/out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
t = p["tables"][0]
assert t["storage"] == "ssd" and t["cache_bytes"] == 4 << 30, t
assert t["ssd_bytes"] == 10000000 * 1024, t            # rows x (128 + 128) floats, padded to 512
assert 0.38 < t["expected_lru_hit_rate"] < 0.42, t     # uniform ids, 4 GiB of 1102-byte slots
r = p["ranks"][0]
# the cache's DRAM by its rule (docs/tiers.md): the rows 4 GiB hold after the bitmap, less than a row short
slot, bitmap = 4 * 256 + 38 + 16 + 24, 8 * ((10000000 + 63) // 64)
rows = ((4 << 30) - bitmap) // slot
assert r["row_bytes"] + r["state_bytes"] == rows * slot + bitmap and r["ssd_bytes"] == t["ssd_bytes"], r
PY
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/w3.cfg" --world 1 --memory-per-rank 4G || return 1
    grep -q "SSD tier (docs/tiers.md): per rank at most 4.00 GiB in DRAM" "$TMP/out" || return 1
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/w3.cfg" --world 1 --memory-per-rank 16G --json || return 1
    python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["tables"][0]; assert t["storage"] == "memory", t' \
        "$TMP/out" || return 1
}
CHECKS+=(plan_tiers)

check_plan_pins() { # pins in the config win; small tables replicated where it pays
    cat >"$TMP/pins.cfg" <<'CFG'
tables = (
  { name = "a"; rows = 100000; dim = 32; optimizer = "adagrad"; placement = "table"; owner = 1; },
  { name = "b"; rows = 100000; dim = 32; placement = "column"; },
  { name = "c"; rows = 100000; dim = 32; placement = "row"; exchange = "pooled"; },
  { name = "d"; rows = 4000;   dim = 64; dist = "uniform"; optimizer = "sgd"; }
);
features = (
  { name = "fa"; table = "a"; pooling = 4; }, { name = "fb"; table = "b"; pooling = 4; },
  { name = "fc"; table = "c"; pooling = 4; }, { name = "fd"; table = "d"; pooling = 20; }
);
data = { batch_size = 64; };
planner = { world = 2; };
CFG
    expect_status 0 "$EMBER" plan "$TMP/pins.cfg" --json || return 1
    python3 - "$TMP/out" <<'PY'
import json, sys
t = {x["name"]: x for x in json.load(open(sys.argv[1]))["tables"]}
assert t["a"]["placement"] == "table" and t["a"]["owner"] == 1 and t["a"]["pinned"], t["a"]
assert t["b"]["placement"] == "column" and t["b"]["pinned"], t["b"]
assert t["c"]["placement"] == "row" and t["c"]["exchange"] == "pooled", t["c"]
assert t["d"]["placement"] == "replicated" and not t["d"]["pinned"], t["d"]
PY
}
CHECKS+=(plan_pins)

check_plan_data() { # id statistics measured on a batch file
    expect_status 0 "$EMBER" gen "$TMP/w2.bin" --preset W2 --batches 2 || return 1
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/w2.cfg" --data "$TMP/w2.bin" || return 1
    grep -q "measured on" "$TMP/out" || return 1
    expect_status 1 "$EMBER" plan "$PLAN_CONFIGS/w1.cfg" --data "$TMP/w2.bin" || return 1
    grep -q "26 tables" "$TMP/err" || return 1
}
CHECKS+=(plan_data)

check_plan_errors() { # messages name the file, the line and the key
    printf 'tables = (\n  { name = "t"; rows = 10; dim = 2000; }\n);\nfeatures = ({ name = "f"; table = "t"; });\n' >"$TMP/bad1.cfg"
    expect_status 1 "$EMBER" plan "$TMP/bad1.cfg" || return 1
    grep -q "bad1.cfg:2: tables\[0\].dim: must be in 1..1024" "$TMP/err" || return 1
    printf 'tables = ({ name = "t"; rows = 10; dim = 4; colour = 1; });\nfeatures = ();\n' >"$TMP/bad2.cfg"
    expect_status 1 "$EMBER" plan "$TMP/bad2.cfg" || return 1
    grep -q "bad2.cfg:1: tables\[0\].colour: unknown key" "$TMP/err" || return 1
    printf 'tables = ({ name = "t";\n rows = 5000000000; dim = 4; });\n' >"$TMP/bad3.cfg"
    expect_status 1 "$EMBER" plan "$TMP/bad3.cfg" || return 1
    grep -q "bad3.cfg:2: .*5000000000L" "$TMP/err" || return 1
    printf 'tables = ({ name = "t"; rows = 10; dim = 4; });\nfeatures = ({ name = "f"; table = "u"; });\n' >"$TMP/bad4.cfg"
    expect_status 1 "$EMBER" plan "$TMP/bad4.cfg" || return 1
    grep -q "bad4.cfg:2: features\[0\].table: no table named \"u\"" "$TMP/err" || return 1
    printf 'tables = ({ name = "t"; rows = ; });\n' >"$TMP/bad5.cfg"
    expect_status 1 "$EMBER" plan "$TMP/bad5.cfg" || return 1
    grep -q "bad5.cfg:1: syntax error" "$TMP/err" || return 1
    # over the budget, tables go to the SSD tier; pinned to memory, nothing fits
    expect_status 0 "$EMBER" plan "$PLAN_CONFIGS/cluster64.cfg" --world 8 || return 1
    grep -q "SSD tier (docs/tiers.md)" "$TMP/out" || return 1
    printf 'tables = ({ name = "big"; rows = 100000000; dim = 64; storage = "memory"; });\nfeatures = ({ name = "f"; table = "big"; });\n' >"$TMP/pinmem.cfg"
    expect_status 1 "$EMBER" plan "$TMP/pinmem.cfg" --memory-per-rank 1G || return 1
    grep -q "nothing fits: table 'big'" "$TMP/err" || { cat "$TMP/err"; return 1; }
    expect_status 1 "$EMBER" plan "$TMP/missing.cfg" || return 1
    grep -q "missing.cfg: cannot open" "$TMP/err" || return 1
    expect_status 2 "$EMBER" plan "$PLAN_CONFIGS/w1.cfg" --world 0 || return 1
    expect_status 2 "$EMBER" plan "$PLAN_CONFIGS/w1.cfg" --memory-per-rank lots || return 1
    expect_status 2 "$EMBER" plan || return 1
    expect_status 0 "$EMBER" plan --help || return 1
    grep -q "usage: ember plan CONFIG" "$TMP/out" || return 1
}
CHECKS+=(plan_errors)

check_plan_limits_dynamic() { # dynamic tables: memory with the key index, keys against capacity, limits --config agrees
    local cfg="$PLAN_CONFIGS/dynamic.cfg"
    expect_status 0 "$EMBER" plan "$cfg" --world 2 || return 1
    grep -q "^memory: at most .* of rows + state + key indexes on a rank" "$TMP/out" || return 1
    grep -qE "^c1 +40000 +16 adagrad +row .* dynamic: row-wise by key hash \(mix64\(key\) mod 2\)" "$TMP/out" || return 1
    grep -qE "^warning: dynamic table 'c1': [0-9.]+k distinct keys per rank over 3000 steps, [0-9.]+x its capacity of 20000 rows per rank: its rows fill after about [0-9]+ steps, then about [0-9]+ keys per step per rank find no row" "$TMP/out" || return 1
    expect_status 0 "$EMBER" plan "$cfg" --world 2 --horizon 30 --json || return 1
    cp "$TMP/out" "$TMP/plan.json"
    expect_status 0 "$EMBER" limits --config "$cfg" --shards 2 --batches 30 --json || return 1
    cp "$TMP/out" "$TMP/limits.json"
    python3 - "$TMP/plan.json" "$TMP/limits.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
lim = {r["name"]: r for r in map(json.loads, open(sys.argv[2])) if r.get("record") == "table"}
tables = {t["name"]: t for t in plan["tables"]}
c1 = tables["c1"]  # rows + state of 20000 rows (dim 16, Adagrad), and the key index: ember_dynamic_bytes
assert c1["max_rank_bytes"] == 20000 * 32 * 4 + c1["dynamic"]["index_bytes_per_rank"] > 20000 * 32 * 4, c1
for r in plan["ranks"]:
    assert r["index_bytes"] == sum(t["dynamic"]["index_bytes_per_rank"] for t in plan["tables"] if t["kind"] == "dynamic"), r
assert plan["totals"]["max_rank_memory"] == max(r["row_bytes"] + r["state_bytes"] + r["index_bytes"] for r in plan["ranks"])
for name in ("c1", "c2", "c3", "c4"):
    t, l = tables[name], lim[name]
    d = t["dynamic"]
    assert t["kind"] == "dynamic" and t["placement"] == "row" and l["kind"] == "dynamic", (t, l)
    assert d["capacity"] == l["capacity"] and l["owners"] == 2 and d["horizon_steps"] == 30, (d, l)
    # the law's distinct keys per rank against the data's (the busiest owner), per step and over 30 steps
    assert abs(d["keys_over_horizon"] - l["distinct_keys_per_owner"]) <= 0.05 * l["distinct_keys_per_owner"], (name, d, l)
    assert abs(d["keys_per_step"] - l["mean_keys_per_owner_per_batch"]) <= 0.05 * l["mean_keys_per_owner_per_batch"], (name, d, l)
    assert l["over_capacity"] == d["over_capacity_over_horizon"], (name, d, l)
assert not lim["c1"]["over_capacity"] and lim["c3"]["over_capacity"], lim
for name in ("c5", "c8"):
    assert tables[name]["kind"] == "fixed" and "dynamic" not in tables[name] and "capacity" not in lim[name]
PY
    expect_status 0 "$EMBER" limits --config "$cfg" --shards 2 --batches 30 || return 1
    grep -q "^dynamic tables: distinct keys by owner (mix64(key) mod 2)" "$TMP/out" || return 1
    grep -qE "^warning: dynamic table 'c3': [0-9]+ distinct keys on one owner over the data, [0-9.]+x its capacity of 5000 rows per rank" "$TMP/out" || return 1
    grep -q "dynamic table 'c1'" "$TMP/out" && { echo "c1 fits over 30 steps"; return 1; }
    expect_status 2 "$EMBER" limits --config "$cfg" --synthetic || return 1
    expect_status 2 "$EMBER" limits "$TMP/limits.json" --batch 8 || return 1
    if have_mpirun; then # two ranks: the same keys by owner (each reads the global batches)
        expect_status 0 mpi2 limits --config "$cfg" --batches 30 --json || return 1
        python3 - "$TMP/limits.json" "$TMP/out" <<'PY'
import json, sys
keys = ("capacity", "owners", "max_keys_per_owner_per_batch", "distinct_keys_per_owner", "distinct_keys")
one, two = ([r for r in map(json.loads, open(p)) if r.get("kind") == "dynamic"] for p in sys.argv[1:])
assert len(one) == len(two) == 4
for a, b in zip(one, two):
    assert all(a[k] == b[k] for k in keys), (a, b)
PY
    fi
}
CHECKS+=(plan_limits_dynamic)

check_config_scale() { # a million tables or features: checks in n log n (fuzz_config found n^2: hours)
    printf 'tables = ({ name = "t%%d"; count = 999999; rows = 1; dim = 1; },\n  { name = "t999998"; rows = 1; dim = 1; });\nfeatures = ({ name = "f"; table = "t0"; });\n' >"$TMP/many_tables.cfg"
    expect_status 1 timeout 60 "$EMBER" plan "$TMP/many_tables.cfg" || return 1
    grep -q 'many_tables.cfg:2: tables\[1\].name: table "t999998" is defined twice (also on line 1)' "$TMP/err" || return 1
    printf 'tables = ({ name = "t"; rows = 1; dim = 1; });\nfeatures = ({ name = "f%%d"; count = 999999; table = "t"; },\n  { name = "f5"; table = "t"; });\n' >"$TMP/many_features.cfg"
    expect_status 1 timeout 60 "$EMBER" plan "$TMP/many_features.cfg" || return 1
    grep -q 'many_features.cfg:3: features\[1\]: feature "f5" is defined twice (also on line 2)' "$TMP/err" || return 1
}
CHECKS+=(config_scale)

check_bad_input_messages() { # docs/RELIABILITY.md: each bad input's message, as the user sees it
    local a
    for a in "--steps abc" "--steps -5" "--micro-batch 0" "--threads 1x" "--accumulate 99999999999" \
             "--eval-every 1.5"; do
        # shellcheck disable=SC2086
        expect_status 2 "$EMBER" train $a || return 1
        grep -q "ember train: bad value for ${a% *}: '${a#* }'" "$TMP/err" || { cat "$TMP/err"; return 1; }
    done
    # the range is named; an overflowing, padded or octal-looking number is no number
    expect_status 2 "$EMBER" train --steps abc || return 1
    grep -q "ember train: bad value for --steps: 'abc' (not an integer in 0..1099511627776)" "$TMP/err" || return 1
    for a in "99999999999999999999" " 7" "7 "; do
        expect_status 2 "$EMBER" train --seed "$a" || return 1
        grep -q "ember train: bad value for --seed: '$a' (not an integer in 0..9223372036854775807)" "$TMP/err" \
            || { cat "$TMP/err"; return 1; }
    done
    printf 'tables = ({ name = "t";\n  rows = "ten"; dim = 4; });\nfeatures = ({ name = "f"; table = "t"; });\n' >"$TMP/type.cfg"
    expect_status 1 "$EMBER" plan "$TMP/type.cfg" || return 1
    grep -q 'type.cfg:2: tables\[0\].rows: must be an integer, got a string' "$TMP/err" || return 1
    printf 'train = { steps = 10;\n  micro_batch = 0; };\n' >"$TMP/range.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/range.cfg" || return 1
    grep -q 'range.cfg:2: train.micro_batch: must be in 1..16777216, got 0' "$TMP/err" || return 1
    : >"$TMP/empty.tsv"
    printf 'data = { source = "tsv"; train_file = "%s/empty.tsv"; hash_rows = 100; };\ntrain = { steps = 2; micro_batch = 4; eval_every = 0; eval_samples = 0; metrics = ""; plot = ""; };\n' "$TMP" >"$TMP/empty.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/empty.cfg" --threads 1 --checkpoint-dir "$TMP/ck_failed" || return 1
    grep -q 'empty.tsv: no training samples' "$TMP/err" || return 1
    [ ! -e "$TMP/ck_failed" ] || { echo "a failed run left its new checkpoint folder behind"; return 1; }
    # refused before any step: a checkpoint folder that is a file, a plot that cannot be written
    : >"$TMP/a_file"
    expect_status 1 "$EMBER" train --steps 2 --micro-batch 64 --checkpoint-dir "$TMP/a_file" --metrics none --plot none || return 1
    grep -q "a_file: the checkpoint folder is an existing file, not a folder" "$TMP/err" || return 1
    ! grep -q '"event":"step"\|step 1' "$TMP/out" || { echo "steps ran before the refusal"; return 1; }
    expect_status 1 "$EMBER" train --steps 2 --micro-batch 64 --metrics none --plot "$TMP/none/x.png" || return 1
    grep -q "none/x.png: cannot write the plot: cannot open the folder $TMP/none: it does not exist" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    # the dense optimizer's shard groups against a world of one: the option, or the config's key and line
    expect_status 2 "$EMBER" train --steps 1 --optimizer-shards 3 --metrics none --plot none || return 1
    grep -qx "ember train: --optimizer-shards 3: groups of 3 ranks do not divide the world of 1 rank (0: replicated state)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'train = { steps = 1; metrics = ""; plot = "";\n  optimizer_shards = 2; };\n' >"$TMP/shards.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/shards.cfg" || return 1
    grep -qx "ember train: $TMP/shards.cfg:2: train.optimizer_shards: groups of 2 ranks do not divide the world of 1 rank (0: replicated state)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # a schema without data.train_file serves ember convert; ember train needs the file (a config's fault)
    printf 'data = { schema = { columns = ({ name = "y"; type = "label"; }, { name = "c"; type = "categorical"; }); };\n};\ntrain = { steps = 1; };\n' \
        >"$TMP/schema_only.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/schema_only.cfg" || return 1
    grep -qx "ember train: $TMP/schema_only.cfg:1: data.train_file: missing (data.source = \"text\" reads a file): set it, or give --train-file" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # a file with neither tables nor a train group: the message says both ways out
    printf 'data = { batch_size = 64; };\n' >"$TMP/onlydata.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/onlydata.cfg" --steps 1 || return 1
    grep -q "tables: missing: a list of tables.*a file with a train = { ... } or model = { ... } group and no tables trains the built-in task's" "$TMP/err" || return 1
    # a dense model that cannot fit: refused before it is allocated, with its size and the machine's
    printf 'model = { bottom = [65536, 65536, 16]; };\n' >"$TMP/huge.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/huge.cfg" --steps 1 --metrics none --plot none || return 1
    grep -q "the dense model needs [0-9.]* GiB of this machine (parameters, gradients, optimizer state and the activations of a micro-batch of 2048, times its 1 ranks), more than its" "$TMP/err" || return 1
}
CHECKS+=(bad_input_messages)

check_ssd_folders() { # ssd.dir and a table's path that are a file or missing: the key and its line, status 1,
    # before anything is created (no checkpoint folder, no store file)
    mkdir -p "$TMP/ssdf"
    : >"$TMP/ssdf/afile"
    local q='train = { steps = 2; micro_batch = 64; eval_samples = 64; metrics = ""; plot = ""; };'
    printf '%s\nssd = { min_bytes = 1;\n  dir = "afile"; cache_bytes = "40K"; };\n' "$q" >"$TMP/ssdf/file.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/ssdf/file.cfg" --checkpoint-dir "$TMP/ssdf/ck" || return 1
    grep -qx "ember train: $TMP/ssdf/file.cfg:3: ssd.dir: \"$TMP/ssdf/afile\" is not a folder" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    printf '%s\nssd = { min_bytes = 1;\n  dir = "/nonexistent-ember-folder"; };\n' "$q" >"$TMP/ssdf/none.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/ssdf/none.cfg" --checkpoint-dir "$TMP/ssdf/ck" || return 1
    grep -qx "ember train: $TMP/ssdf/none.cfg:3: ssd.dir: \"/nonexistent-ember-folder\" does not exist" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    printf 'tables = ({ name = "t%%d"; count = 2; rows = 1000; dim = 16; storage = "ssd";\n    path = "nodir"; });\nfeatures = ({ name = "f%%d"; count = 2; table = "t%%d"; });\n%s\n' "$q" >"$TMP/ssdf/table.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/ssdf/table.cfg" --checkpoint-dir "$TMP/ssdf/ck" || return 1
    grep -qx "ember train: $TMP/ssdf/table.cfg:2: tables\[0\].path: \"$TMP/ssdf/nodir\" does not exist" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    [ "$(ls "$TMP/ssdf")" = "$(printf 'afile\nfile.cfg\nnone.cfg\ntable.cfg')" ] || { echo "created: $(ls "$TMP/ssdf")"; return 1; }
    # ember plan does not need the folders (it plans for another machine as well)
    expect_status 0 "$EMBER" plan "$TMP/ssdf/table.cfg" || return 1
}
CHECKS+=(ssd_folders)

check_train_header() { # the header says what the run will do: no "every 0 steps" when evaluation is only at the end
    expect_status 0 "$EMBER" train --steps 1 --micro-batch 64 --eval-every 0 --eval-samples 64 --metrics none --plot none || return 1
    grep -q "evaluation: at the end, on 64 held-out samples" "$TMP/out" || return 1
    expect_status 0 "$EMBER" train --steps 1 --micro-batch 64 --eval-every 5 --eval-samples 64 --metrics none --plot none || return 1
    grep -q "evaluation: every 5 steps and at the end, on 64 held-out samples" "$TMP/out" || return 1
    # resumed: the totals are the whole run's, the time and the rate this run's, and said so
    local c=(--micro-batch 64 --eval-every 0 --eval-samples 64 --metrics none --plot none --checkpoint-dir "$TMP/hdr")
    expect_status 0 "$EMBER" train --steps 4 "${c[@]}" || return 1
    expect_status 0 "$EMBER" train --steps 6 "${c[@]}" --resume || return 1
    grep -q "done: 6 steps, 384 samples in all; this run 2 steps, 128 samples in" "$TMP/out" || return 1
    expect_status 0 "$EMBER" train --steps 8 "${c[@]}" --resume --json || return 1
    tail -1 "$TMP/out" | grep -q '"steps":8,"samples":512,"run_steps":2,"run_samples":128' || return 1
}
CHECKS+=(train_header)

check_train_files() { # --train-file/--eval-file, the whole eval file by default, config paths relative to the config
    local bench ember
    bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
    ember="$(cd "$(dirname "$EMBER")" && pwd)/$(basename "$EMBER")" # the runs below change folder
    mkdir -p "$TMP/data/sub"
    python3 "$bench/criteo_like.py" "$TMP/data/sub/train.tsv" 3000 7 1 >/dev/null || return 1
    python3 "$bench/criteo_like.py" "$TMP/data/sub/test.tsv" 300 7 2 >/dev/null || return 1
    (cd "$TMP/data" && "$ember" train --train-file sub/train.tsv --eval-file sub/test.tsv --steps 3 --micro-batch 64 \
        --json --metrics none --plot none) >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; return 1; }
    tail -1 "$TMP/out" | grep -q '"eval_samples":300,' || { echo "not the whole eval file"; tail -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --train-file "$TMP/data/sub/train.tsv" --eval-file "$TMP/data/sub/test.tsv" --steps 3 \
        --micro-batch 64 --eval-samples 100 --json --metrics none --plot none || return 1
    tail -1 "$TMP/out" | grep -q '"eval_samples":100,' || return 1
    printf 'data = { source = "tsv"; train_file = "train.tsv"; eval_file = "test.tsv"; };\ntrain = { steps = 3; micro_batch = 64; metrics = ""; plot = ""; };\n' \
        >"$TMP/data/sub/rel.cfg"
    (cd / && "$ember" train --config "$TMP/data/sub/rel.cfg" --json) >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; return 1; }
    tail -1 "$TMP/out" | grep -q '"eval_samples":300,' || return 1
    expect_status 2 "$EMBER" train --eval-file "$TMP/data/sub/test.tsv" || return 1
    grep -q "eval-file needs training data too" "$TMP/err" || return 1
}
CHECKS+=(train_files)

check_lr_schedule() { # the learning-rate schedule from the command line and the config, and its errors
    expect_status 0 "$EMBER" train --steps 4 --micro-batch 64 --eval-samples 64 --lr-warmup 2 --lr-decay cosine \
        --json --metrics none --plot none || return 1
    head -1 "$TMP/out" | grep -q '"lr_schedule":{"warmup":2,"decay":"cosine"' || { head -1 "$TMP/out"; return 1; }
    printf 'train = { steps = 4; micro_batch = 64; eval_samples = 64; metrics = ""; plot = "";\n  lr_schedule = { decay = "step"; every = 2; gamma = 0.5; }; };\n' >"$TMP/lr.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/lr.cfg" --json || return 1
    head -1 "$TMP/out" | grep -q '"decay":"step","final":0.0,"every":2,"gamma":0.5' || { head -1 "$TMP/out"; return 1; }
    printf 'train = { lr_schedule = { decay = "exp"; }; };\n' >"$TMP/lrbad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/lrbad.cfg" || return 1
    grep -q 'lrbad.cfg:1: train.lr_schedule.decay' "$TMP/err" || return 1
    expect_status 2 "$EMBER" train --lr-decay sometimes || return 1
    grep -q "bad value for --lr-decay: 'sometimes'" "$TMP/err" || return 1
}
CHECKS+=(lr_schedule)

check_train_precision() { # --precision/--rounding set every table's, a config's own setting too; the header,
    # the start event and ember inspect say so; a bad value is named
    printf 'tables = ( { name = "a"; rows = 500; dim = 8; precision = "fp16"; },\n  { name = "b"; rows = 300; dim = 8; } );\nfeatures = ( { name = "fa"; table = "a"; }, { name = "fb"; table = "b"; } );\ntrain = { steps = 4; micro_batch = 64; eval_samples = 64; metrics = ""; plot = ""; };\n' >"$TMP/prec.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/prec.cfg" --checkpoint-dir "$TMP/prec_a" || return 1
    grep -q "rows: fp16 in 1, fp32 in 1 tables; rounding stochastic in 1" "$TMP/out" || { head -5 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect "$TMP/prec_a" || return 1
    grep -q "  a: 500 x 8 fp16," "$TMP/out" && grep -q "  b: 300 x 8 fp32," "$TMP/out" || { cat "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/prec.cfg" --precision bf16 --rounding nearest --json \
        --checkpoint-dir "$TMP/prec_b" || return 1
    head -1 "$TMP/out" | grep -q '"row_precision":{"bf16":2,"rounding":{"nearest":2}}' || { head -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect --json "$TMP/prec_b" || return 1
    [ "$(grep -o '"precision": *"bf16"' "$TMP/out" | wc -l)" = 2 ] || { cat "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/prec.cfg" --precision fp32 --json || return 1
    head -1 "$TMP/out" | grep -q '"row_precision":{"fp32":2}' || { head -1 "$TMP/out"; return 1; }
    expect_status 2 "$EMBER" train --precision fp8 || return 1
    grep -q "bad value for --precision: 'fp8' (not fp32, fp16 or bf16)" "$TMP/err" || return 1
    expect_status 2 "$EMBER" train --rounding up || return 1
    grep -q "bad value for --rounding: 'up' (not stochastic or nearest)" "$TMP/err" || return 1
}
CHECKS+=(train_precision)

# $1: a config of 6 steps; $2: a folder.  The config run 3 steps into $2, then resumed, must end with
# the digests of `ember inspect` of the whole run, which $TMP/out holds on entry.
resumes_exactly() {
    local want
    want=$(grep digest "$TMP/out")
    expect_status 0 "$EMBER" train --config "$1" --checkpoint-dir "$2" --steps 3 || return 1
    expect_status 0 "$EMBER" train --config "$1" --checkpoint-dir "$2" --resume || return 1
    expect_status 0 "$EMBER" inspect "$2" || return 1
    [ "$(grep digest "$TMP/out")" = "$want" ] || { echo "resumed digests: $(grep digest "$TMP/out"), want $want"; return 1; }
}

check_train_state_precision() { # half optimizer state: a table's own setting, model.emb_state_precision for the
    # Adagrad and Adam tables that say nothing, --state-precision over all of them (row-wise Adagrad stays fp32);
    # the header, the start event and ember inspect say so; a resumed run ends bit for bit where one run does
    printf 'model = { emb_state_precision = "fp16"; };\ntables = ( { name = "a"; rows = 500; dim = 8; state_precision = "bf16"; optimizer = "adagrad"; },\n  { name = "b"; rows = 300; dim = 8; optimizer = "rowwise_adagrad"; },\n  { name = "c"; rows = 200; dim = 8; optimizer = "adam"; } );\nfeatures = ( { name = "fa"; table = "a"; }, { name = "fb"; table = "b"; }, { name = "fc"; table = "c"; } );\ntrain = { steps = 6; micro_batch = 64; eval_samples = 64; metrics = ""; plot = ""; };\n' >"$TMP/sprec.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/sprec.cfg" --checkpoint-dir "$TMP/sprec_a" || return 1
    grep -q "rows: fp32 in 3 tables; state bf16 in 1, fp16 in 1; rounding stochastic in 2" "$TMP/out" ||
        { head -5 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect "$TMP/sprec_a" || return 1
    grep -q "state: 8 bf16 per row" "$TMP/out" && grep -q "state: 1 floats per row" "$TMP/out" &&
        grep -q "state: 16 fp16 per row" "$TMP/out" || { cat "$TMP/out"; return 1; }
    resumes_exactly "$TMP/sprec.cfg" "$TMP/sprec_r" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/sprec.cfg" --state-precision bf16 --json --checkpoint-dir "$TMP/sprec_b" ||
        return 1
    head -1 "$TMP/out" | grep -q '"row_precision":{"fp32":3,"state":{"bf16":2},"rounding":{"stochastic":2}}' ||
        { head -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect --json "$TMP/sprec_b" || return 1
    [ "$(grep -o '"state_precision": *"bf16"' "$TMP/out" | wc -l)" = 2 ] || { cat "$TMP/out"; return 1; }
    expect_status 2 "$EMBER" train --state-precision fp64 || return 1
    grep -q "bad value for --state-precision: 'fp64' (not fp32, fp16 or bf16)" "$TMP/err" || return 1
    sed 's/optimizer = "rowwise_adagrad"; }/optimizer = "rowwise_adagrad"; state_precision = "fp16"; }/' "$TMP/sprec.cfg" \
        >"$TMP/sprec_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/sprec_bad.cfg" || return 1
    grep -q "table 'b': fp16 optimizer state does not go with row-wise Adagrad" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(train_state_precision)

check_train_optimizers() { # momentum (Nesterov), adamw, decoupled decay, ftrl, rowwise_adam, lamb and lars by
    # name in a config (row-wise Adam refusing half state), and
    # the dense optimizers momentum and adamw: the manifest keeps them, ember inspect counts FTRL's exact
    # zeros, a resumed run ends bit for bit where one run does, bad settings name the table or key
    local dense
    for dense in adamw momentum; do check_optimizers_with "$dense" || return 1; done
}
check_optimizers_with() { # $1: the dense optimizer
    local dense=$1 A="$TMP/opts_a_$1" R="$TMP/opts_r_$1"
    printf 'tables = ( { name = "a"; rows = 500; dim = 8; optimizer = { kind = "adamw"; lr = 0.01; weight_decay = 0.01; }; },\n  { name = "b"; rows = 300; dim = 8; optimizer = { kind = "momentum"; momentum = 0.5; nesterov = true; }; },\n  { name = "c"; rows = 200; dim = 8; optimizer = { kind = "adagrad"; weight_decay = 0.001; weight_decay_mode = "decoupled"; }; },\n  { name = "d"; rows = 100; dim = 8; init = "zeros"; optimizer = { kind = "ftrl"; lr = 0.05; l1 = 0.5; l2 = 0.01; }; },\n  { name = "e"; rows = 150; dim = 8; optimizer = { kind = "rowwise_adam"; lr = 0.01; }; },\n  { name = "f"; rows = 150; dim = 8; optimizer = { kind = "lamb"; lr = 0.01; weight_decay = 0.01; weight_decay_mode = "decoupled"; }; },\n  { name = "g"; rows = 150; dim = 8; optimizer = { kind = "lars"; lr = 0.5; eta = 0.02; momentum = 0.8; weight_decay = 0.001; }; } );\nfeatures = ( { name = "fa"; table = "a"; }, { name = "fb"; table = "b"; }, { name = "fc"; table = "c"; }, { name = "fd"; table = "d"; },\n  { name = "fe"; table = "e"; }, { name = "ff"; table = "f"; }, { name = "fg"; table = "g"; } );\ntrain = { steps = 6; micro_batch = 64; eval_samples = 64; metrics = ""; plot = ""; optimizer = { kind = "%s"; lr = 0.002; }; };\n' "$dense" >"$TMP/opts.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/opts.cfg" --checkpoint-dir "$A" || return 1
    local label=$([ "$dense" = adamw ] && echo AdamW || echo momentum)
    grep -q "parameters), $label lr 0.002$" "$TMP/out" || { head -3 "$TMP/out"; return 1; }
    local m="$A/step-000000000006/manifest.json"
    [ "$(grep -o '"weight_decay_mode": *"decoupled"' "$m" | wc -l)" = 3 ] && grep -q '"nesterov": *true' "$m" &&
        grep -q '"momentum": *0.5' "$m" && grep -q '"l1": *0.5' "$m" && grep -q '"kind": *"rowwise_adam"' "$m" &&
        grep -q '"kind": *"lamb"' "$m" && grep -q '"eta": *0.0199999' "$m" || { cat "$m"; return 1; }
    expect_status 0 "$EMBER" inspect "$A" || return 1
    grep -A3 "^  d: 100 x 8 fp32, ftrl" "$TMP/out" | grep -Eq "^    zeros: [0-9]+ of 800 values \([0-9.]+%\); [0-9]+ rows entirely$" ||
        { cat "$TMP/out"; return 1; }
    resumes_exactly "$TMP/opts.cfg" "$R" || return 1
    sed 's/momentum = 0.5;/momentum = 1.0;/' "$TMP/opts.cfg" >"$TMP/opts_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/opts_bad.cfg" || return 1
    grep -q "table 'b': momentum 1 must be in \[0, 1)" "$TMP/err" || { cat "$TMP/err"; return 1; }
    sed 's/weight_decay_mode = "decoupled"/weight_decay_mode = "l1"/' "$TMP/opts.cfg" >"$TMP/opts_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/opts_bad.cfg" || return 1
    grep -q 'tables\[2\].optimizer.weight_decay_mode: unknown value "l1" (one of: l2, decoupled)' "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    sed 's/eta = 0.02;/eta = 0.0;/' "$TMP/opts.cfg" >"$TMP/opts_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/opts_bad.cfg" || return 1
    grep -q "table 'g': LARS eta 0 must be > 0" "$TMP/err" || { cat "$TMP/err"; return 1; }
    sed 's/name = "e"; rows = 150;/name = "e"; rows = 150; state_precision = "bf16";/' "$TMP/opts.cfg" >"$TMP/opts_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/opts_bad.cfg" || return 1
    grep -q "table 'e': bf16 optimizer state does not go with row-wise Adam" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(train_optimizers)

check_train_diverged() { # a loss that is not finite stops the run at that step (status 1), before that step's
    # checkpoint: the newest is the step's before it
    printf 'model = { emb_optimizer = { kind = "sgd"; lr = 1e6; }; };\ntrain = { steps = 40; metrics = ""; plot = ""; eval_samples = 256;\n  optimizer = { kind = "sgd"; lr = 1e6; }; };\n' >"$TMP/div.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/div.cfg" --checkpoint-dir "$TMP/div_ck" --checkpoint-every 1 || return 1
    local at
    at=$(grep -o "^ember train: step [0-9]*: the training loss is nan: the model diverged" "$TMP/err" | grep -o "step [0-9]*" |
        grep -o "[0-9]*") || { cat "$TMP/err"; return 1; }
    [ "$at" -gt 1 ] && [ "$(ls "$TMP/div_ck" | tail -1)" = "$(printf 'step-%012d' $((at - 1)))" ] ||
        { echo "diverged at $at, saved: $(ls "$TMP/div_ck" | tr '\n' ' ')"; return 1; }
}
CHECKS+=(train_diverged)

check_early_stop() { # patience runs out (min_delta 1: no AUC can improve by that), keep_best keeps the best
    # evaluation's checkpoint, and a run resumed before the stop stops at the same step with the same AUC
    printf 'train = { steps = 20; micro_batch = 64; eval_every = 2; eval_samples = 256; metrics = ""; plot = "";\n  early_stop = { patience = 1; min_delta = 1.0; }; keep_best = true; };\n' >"$TMP/es.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_a" --checkpoint-every 2 || return 1
    grep -q "stopped early after step 4: the AUC has not improved since step 2" "$TMP/out" || return 1
    [ -d "$TMP/es_a/best/step-000000000002" ] && [ "$(ls "$TMP/es_a/best")" = step-000000000002 ] ||
        { echo "best: $(ls "$TMP/es_a/best" 2>&1)"; return 1; }
    local want
    expect_status 0 "$EMBER" train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_b" --checkpoint-every 2 --json || return 1
    want=$(tail -1 "$TMP/out" | grep -o '"auc":[0-9.]*')
    tail -1 "$TMP/out" | grep -q '"steps":4,.*"stopped_early":true,"best_step":2,' || { tail -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_c" --checkpoint-every 2 --steps 3 || return 1
    expect_status 0 "$EMBER" train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_c" --checkpoint-every 2 --resume --json || return 1
    tail -1 "$TMP/out" | grep -q "$want,.*\"steps\":4,.*\"stopped_early\":true,\"best_step\":2," ||
        { echo "resumed: $(tail -1 "$TMP/out" | cut -c1-300), want $want"; return 1; }
    # a stopped run resumed again stays stopped: no step, the same verdict
    expect_status 0 "$EMBER" train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_b" --checkpoint-every 2 --resume --json ||
        return 1
    tail -1 "$TMP/out" | grep -q '"steps":4,.*"run_steps":0,.*"stopped_early":true,"best_step":2,' ||
        { echo "resumed after the stop: $(tail -1 "$TMP/out" | cut -c1-300)"; return 1; }
    # keep_best without a checkpoint folder: ember-checkpoints in the working folder (as the metrics
    # and the plot), said; the command line's fault when --checkpoint-dir '' takes the config's away (status 2)
    printf 'train = { steps = 2; eval_every = 1; eval_samples = 256; metrics = ""; plot = "";\n  keep_best = true; };\n' >"$TMP/kb.cfg"
    mkdir -p "$TMP/kbwd"
    (cd "$TMP/kbwd" && expect_status 0 "$EMBER" train --config "$TMP/kb.cfg") || return 1
    grep -q "ember-checkpoints/kb" "$TMP/out" && [ -d "$TMP/kbwd/ember-checkpoints/kb/best" ] ||
        { echo "no best checkpoint in ./ember-checkpoints"; ls -R "$TMP/kbwd" | head; return 1; }
    printf 'train = { steps = 2; checkpoint_dir = "kb.ck";\n  keep_best = true; };\n' >"$TMP/kb2.cfg"
    expect_status 2 "$EMBER" train --config "$TMP/kb2.cfg" --checkpoint-dir '' || return 1
    grep -qx "ember train: --checkpoint-dir '': no checkpoint folder, but train.keep_best ($TMP/kb2.cfg:2) needs one" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # patience 0 is no early stopping: refused, as a group without patience (leaving the group out turns it off)
    printf 'train = { steps = 2;\n  early_stop = { patience = 0; }; };\n' >"$TMP/p0.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/p0.cfg" || return 1
    grep -qx "ember train: $TMP/p0.cfg:2: train.early_stop.patience: must be in 1..1099511627776, got 0 (leave train.early_stop out to train without early stopping)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'train = { steps = 2;\n  early_stop = { metric = "logloss"; }; };\n' >"$TMP/pnone.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/pnone.cfg" || return 1
    grep -q "^ember train: $TMP/pnone.cfg:2: train.early_stop.patience: missing: the evaluations in a row without a better metric before the run stops, 1 or more" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # two ranks decide alike: rank 0's figures are every rank's
    have_mpirun || return 0
    expect_status 0 mpi2 train --config "$TMP/es.cfg" --checkpoint-dir "$TMP/es_mpi" --checkpoint-every 2 --json || return 1
    tail -1 "$TMP/out" | grep -q '"steps":4,.*"stopped_early":true,"best_step":2,' || { tail -1 "$TMP/out"; return 1; }
    [ "$(ls "$TMP/es_mpi/best")" = step-000000000002 ] || { echo "two ranks, best: $(ls "$TMP/es_mpi/best")"; return 1; }
}
CHECKS+=(early_stop)

check_epochs_shuffle() { # train.epochs sets the steps from the file; data.shuffle reorders a binary file's blocks per
    # epoch, deterministically, and a run resumed mid-epoch ends as the uninterrupted one; a plain text
    # file shuffles exactly as its conversion, a gzip one is refused
    local bench
    bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
    python3 "$bench/criteo_like.py" "$TMP/ep.tsv" 20000 7 1 >/dev/null || return 1
    python3 "$bench/criteo_like.py" "$TMP/ep_test.tsv" 500 7 2 >/dev/null || return 1
    expect_status 0 "$EMBER" convert "$TMP/ep.tsv" "$TMP/ep.bin" --rows 1000 || return 1
    expect_status 0 "$EMBER" convert "$TMP/ep_test.tsv" "$TMP/ep_test.bin" --rows 1000 || return 1
    ep_cfg() { # shuffle
        printf 'tables = ({ name = "c%%%%d"; count = 26; rows = 1000; dim = 8; });\nfeatures = ({ name = "f%%%%d"; count = 26; table = "c%%%%d"; });\n'
        printf 'data = { source = "binary"; train_file = "ep.bin"; eval_file = "ep_test.bin"; shuffle = %s; };\n' "$1"
        printf 'train = { epochs = 3; micro_batch = 512; eval_every = 0; metrics = ""; plot = ""; };\n'
    }
    ep_cfg false >"$TMP/ep_plain.cfg"
    ep_cfg true >"$TMP/ep_shuf.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/ep_plain.cfg" --json || return 1
    tail -1 "$TMP/out" | grep -q '"steps":120,.*"epochs":3.0,' || { echo "epochs: $(tail -1 "$TMP/out" | cut -c1-300)"; return 1; }
    local plain shuf
    plain=$(auc_logloss)
    expect_status 0 "$EMBER" train --config "$TMP/ep_shuf.cfg" --json || return 1
    shuf=$(auc_logloss)
    [ "$shuf" != "$plain" ] || { echo "shuffled equals file order: $shuf"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/ep_shuf.cfg" --json || return 1
    [ "$(auc_logloss)" = "$shuf" ] || { echo "shuffle not deterministic: $(auc_logloss) vs $shuf"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/ep_shuf.cfg" --steps 57 --checkpoint-dir "$TMP/ep_ck" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/ep_shuf.cfg" --checkpoint-dir "$TMP/ep_ck" --resume --json || return 1
    [ "$(auc_logloss)" = "$shuf" ] || { echo "resumed mid-epoch: $(auc_logloss), uninterrupted $shuf"; return 1; }
    # the text file shuffles as its conversion does, block for block: the same run, resumed too
    sed -e 's/"binary"/"tsv"/' -e 's/ep\.bin/ep.tsv/' -e 's/ep_test\.bin/ep_test.tsv/' "$TMP/ep_shuf.cfg" >"$TMP/ep_text.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/ep_text.cfg" --json || return 1
    [ "$(auc_logloss)" = "$shuf" ] || { echo "shuffled text: $(auc_logloss), shuffled binary $shuf"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/ep_text.cfg" --steps 57 --checkpoint-dir "$TMP/ep_tck" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/ep_text.cfg" --checkpoint-dir "$TMP/ep_tck" --resume --json || return 1
    [ "$(auc_logloss)" = "$shuf" ] || { echo "shuffled text resumed mid-epoch: $(auc_logloss), binary $shuf"; return 1; }
    gzip -c "$TMP/ep.tsv" >"$TMP/ep.tsv.gz"
    printf 'data = { source = "tsv"; train_file = "ep.tsv.gz"; shuffle = true; };\ntrain = { steps = 2; };\n' >"$TMP/ep_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/ep_bad.cfg" || return 1
    grep -q "ep.tsv.gz: a gzip file cannot be shuffled" "$TMP/err" || return 1
    printf 'train = { epochs = 2; };\n' >"$TMP/ep_syn.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/ep_syn.cfg" || return 1
    grep -q "train.epochs needs a training file" "$TMP/err" || return 1
}
CHECKS+=(epochs_shuffle)

check_data_source_kind() { # a file the config names must be what data.source says; a file on the command line
    # is read by its first bytes (and the header says what was read)
    local bench
    bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
    mkdir -p "$TMP/dsk"
    python3 "$bench/criteo_like.py" "$TMP/dsk/d.tsv" 300 7 1 >/dev/null || return 1
    expect_status 0 "$EMBER" convert "$TMP/dsk/d.tsv" "$TMP/dsk/d.bin" || return 1
    local q='train = { steps = 2; micro_batch = 64; eval_samples = 64; metrics = ""; plot = ""; };'
    printf 'data = { source = "binary";\n  train_file = "d.tsv"; };\n%s\n' "$q" >"$TMP/dsk/bin.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/dsk/bin.cfg" || return 1
    grep -qx "ember train: $TMP/dsk/bin.cfg:2: data.train_file: $TMP/dsk/d.tsv: byte 0: not an ember CTR file (bad magic); data.source = \"binary\" (line 1) reads ember's binary format: convert text with ember convert, or set data.source to \"text\" or \"tsv\"" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    ! grep -q "binary data" "$TMP/out" || { echo "trained anyway"; return 1; }
    printf 'data = { source = "tsv"; train_file = "d.tsv";\n  eval_file = "d.bin"; };\n%s\n' "$q" >"$TMP/dsk/tsv.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/dsk/tsv.cfg" || return 1
    grep -qx "ember train: $TMP/dsk/tsv.cfg:2: data.eval_file: $TMP/dsk/d.bin is an ember binary CTR file, but data.source = \"tsv\" (line 1) reads text: set data.source = \"binary\"" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # the command line's files: by their first bytes, whatever the config says
    expect_status 0 "$EMBER" train --config "$TMP/dsk/bin.cfg" --train-file "$TMP/dsk/d.bin" || return 1
    grep -q "^ember train: bin (binary data: " "$TMP/out" || { head -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/dsk/bin.cfg" --train-file "$TMP/dsk/d.tsv" || return 1
    grep -q "^ember train: bin (tsv data: " "$TMP/out" || { head -1 "$TMP/out"; return 1; }
}
CHECKS+=(data_source_kind)

check_ids_from_training_file() { # ember limits and ember plan --data read the training data's binary format
    local bench
    bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
    python3 "$bench/criteo_like.py" "$TMP/ids.tsv" 5000 7 1 >/dev/null || return 1
    expect_status 0 "$EMBER" convert "$TMP/ids.tsv" "$TMP/ids.bin" --rows 1000 || return 1
    expect_status 0 "$EMBER" limits "$TMP/ids.bin" --shards 2 --batch 1000 --json || return 1
    grep -q '"name":"C26"' "$TMP/out" && grep -q '"batches":5,' "$TMP/out" || { head -c 400 "$TMP/out"; return 1; }
    printf 'tables = ({ name = "c%%d"; count = 26; rows = 1000; dim = 8; });\nfeatures = ({ name = "f%%d"; count = 26; table = "c%%d"; });\ndata = { batch_size = 512; };\n' >"$TMP/ids.cfg"
    expect_status 0 "$EMBER" plan "$TMP/ids.cfg" --data "$TMP/ids.bin" --world 4 || return 1
    grep -q "measured on 2 batches of $TMP/ids.bin" "$TMP/out" || { head -3 "$TMP/out"; return 1; }
    printf 'tables = ({ name = "c%%d"; count = 26; rows = 100; dim = 8; });\nfeatures = ({ name = "f%%d"; count = 26; table = "c%%d"; });\n' >"$TMP/ids_small.cfg"
    expect_status 1 "$EMBER" plan "$TMP/ids_small.cfg" --data "$TMP/ids.bin" || return 1
    grep -q "ids.bin: feature C1 has ids up to 999, table 'c0' of .*ids_small.cfg has 100 rows" "$TMP/err" || return 1
}
CHECKS+=(ids_from_training_file)

# ------------------------------------------------------------ ember train
# A short run of the built-in synthetic task (a few seconds; the summary is
# stdout's last line), the metrics file and the plot, config errors with
# file and line, and missing or bad data.
train_summary() { # file: its last line is the summary; prints auc and teacher_auc
    python3 - "$1" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
s = json.loads(lines[-1])
assert s["event"] == "summary", s
for k in ["auc", "teacher_auc", "logloss", "samples_per_s", "steps", "peak_rss_mb"]:
    assert k in s, (k, s)
print(s["auc"], s["teacher_auc"], s["steps"])
PY
}

check_train_synthetic() {
    expect_status 0 "$EMBER" train --steps 400 --micro-batch 512 --eval-every 200 \
        --eval-samples 16384 --threads 1 --metrics "$TMP/m.jsonl" --plot "$TMP/p.png" || return 1
    read -r auc tauc steps < <(train_summary "$TMP/out") || return 1
    echo "auc $auc teacher $tauc steps $steps"
    [ "$steps" = 400 ] || return 1
    # 200k samples: well above chance, below the teacher (the best possible)
    python3 -c "import sys; a, t = $auc, $tauc; sys.exit(not (0.77 < a < t + 0.005 and t > 0.8))" || return 1
    json_lines_valid "$TMP/m.jsonl" || return 1
    [ "$(grep -c '"event":"eval"' "$TMP/m.jsonl")" = 2 ] || { echo "want 2 evals"; return 1; }
    tail -1 "$TMP/m.jsonl" | grep -q '"event":"summary"' || return 1
    if command -v gnuplot >/dev/null; then
        [ -s "$TMP/p.png" ] && head -c 8 "$TMP/p.png" | grep -q PNG || { echo "no PNG"; return 1; }
    fi
    # --json: JSON lines only, the summary last
    expect_status 0 "$EMBER" train --steps 20 --eval-samples 2048 --threads 1 --json \
        --metrics none --plot none || return 1
    json_lines_valid "$TMP/out" || return 1
    train_summary "$TMP/out" >/dev/null || return 1
}
CHECKS+=(train_synthetic)

check_train_dcn() { # a DCNv2 model with GELU: threads and a resume change no bit; bundle and checkpoint score alike
    printf '%s\n' 'model = { interaction = "dcn"; dcn = { layers = 2; rank = 24; }; activation = "gelu"; top = [32, 16]; };' \
        'train = { steps = 40; micro_batch = 512; eval_every = 0; eval_samples = 4096; };' >"$TMP/dcn.cfg"
    local a b c
    expect_status 0 "$EMBER" train --config "$TMP/dcn.cfg" --threads 1 --json --metrics none --plot none \
        --checkpoint-dir "$TMP/dcn1" || return 1
    head -1 "$TMP/out" | grep -q '"interaction":"dcn","cross_layers":2,"cross_rank":24,"activation":"gelu"' ||
        { head -1 "$TMP/out"; return 1; }
    a=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    expect_status 0 "$EMBER" train --config "$TMP/dcn.cfg" --threads 2 --json --metrics none --plot none || return 1
    b=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    expect_status 0 "$EMBER" train --config "$TMP/dcn.cfg" --steps 20 --json --metrics none --plot none \
        --checkpoint-dir "$TMP/dcn2" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/dcn.cfg" --resume --json --metrics none --plot none \
        --checkpoint-dir "$TMP/dcn2" || return 1
    c=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    [ "$a" = "$b" ] && [ "$a" = "$c" ] || { echo "1 thread $a, 2 threads $b, resumed $c"; return 1; }
    expect_status 0 "$EMBER" export "$TMP/dcn1" "$TMP/dcnb" --quantize fp32 || return 1
    expect_status 0 "$EMBER" gen --task 4096 --eval "$TMP/dcn_eval.bin" || return 1
    expect_status 0 "$EMBER" predict "$TMP/dcnb" "$TMP/dcn_eval.bin" --json || return 1
    b=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    expect_status 0 "$EMBER" predict "$TMP/dcn1" "$TMP/dcn_eval.bin" --json || return 1
    c=$(tail -1 "$TMP/out" | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['auc'], s['logloss'])")
    # the training run evaluated these very 4096 held-out samples: a model read back wrong would differ
    [ "$a" = "$b" ] && [ "$a" = "$c" ] || { echo "trained $a, bundle $b, checkpoint $c"; return 1; }
    python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['model']['version']; sys.exit(v != 2)" \
        "$TMP/dcnb/manifest.json" || { echo "a DCN model must be described as version 2"; return 1; }
    printf 'model = { interaction = "dot"; dcn = { layers = 2; }; };\n' >"$TMP/bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/bad.cfg" || return 1
    grep -q 'bad.cfg:1: model.dcn: needs interaction = "dcn"' "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'model = { interaction = "dcn"; dcn = { layers = 17; }; };\n' >"$TMP/bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/bad.cfg" || return 1
    grep -q 'model.dcn.layers' "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'model = { activation = "relu6"; };\n' >"$TMP/bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/bad.cfg" || return 1
    grep -q 'model.activation: unknown value "relu6"' "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(train_dcn)

check_train_config() { # a config: settings applied, unknown keys named with their line
    printf 'name = "small";\nmodel = { emb_dim = 8; bottom = [16, 8]; top = [16]; interaction = "cat"; };\ntrain = { steps = 30; micro_batch = 64; accumulate = 2;\n  eval_every = 0; eval_samples = 1024; metrics = ""; plot = ""; };\n' >"$TMP/t1.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/t1.cfg" --threads 1 --json || return 1
    grep -q '"global_batch":128' "$TMP/out" || { echo "want global batch 128"; return 1; }
    grep -q '"emb_dim":8' "$TMP/out" || return 1
    printf 'train = { steps = 10;\n  colour = 1; };\n' >"$TMP/t2.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/t2.cfg" || return 1
    grep -q "t2.cfg:2: train.colour: unknown key" "$TMP/err" || return 1
    printf 'model = { bottom = [64, 32]; };\n' >"$TMP/t3.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/t3.cfg" || return 1
    grep -q "t3.cfg:1: model.bottom: the last width must equal the embedding dim 16" "$TMP/err" || return 1
    printf 'train = { steps = 10; };\ndata = { source = "tsv"; train_file = "%s/none.tsv"; };\n' "$TMP" >"$TMP/t4.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/t4.cfg" || return 1
    grep -q "none.tsv" "$TMP/err" || return 1
    expect_status 1 "$EMBER" train --config "$TMP/missing.cfg" || return 1
    grep -q "missing.cfg: cannot open" "$TMP/err" || return 1
    expect_status 1 "$EMBER" train --steps 1 --metrics "$TMP/no-dir/m.jsonl" || return 1
    grep -q "no-dir/m.jsonl" "$TMP/err" || return 1
    expect_status 2 "$EMBER" train --steps lots || return 1
    expect_status 2 "$EMBER" train --colour || return 1
    expect_status 0 "$EMBER" train --help || return 1
    grep -q "usage: ember train" "$TMP/out" || return 1
}
CHECKS+=(train_config)

check_mpi_train() { # two ranks: one summary line, the same task, an AUC as good
    have_mpirun || return 0
    expect_status 0 mpi2 train --steps 300 --micro-batch 256 --eval-every 0 --eval-samples 16384 \
        --threads 1 --metrics none --plot none || return 1
    read -r auc tauc steps < <(train_summary "$TMP/out") || return 1
    echo "np 2: auc $auc teacher $tauc"
    [ "$(grep -c '"event":"summary"' "$TMP/out")" = 1 ] || { echo "want one summary"; return 1; }
    python3 -c "import sys; sys.exit(not (0.77 < $auc < $tauc + 0.005))" || return 1
    printf 'train = { steps = 10; };\ndata = { source = "binary"; train_file = "%s/none.bin"; };\n' "$TMP" >"$TMP/t5.cfg"
    expect_status 1 mpi2 train --config "$TMP/t5.cfg" || return 1
    [ "$(grep -c "none.bin" "$TMP/err")" = 1 ] || { echo "want the error once"; return 1; }
}
CHECKS+=(mpi_train)

check_mpi_optimizer_shards() { # the dense optimizer state sharded over the two ranks: the same run bit
    # for bit (the same AUC and log loss to 8 digits), half the state per rank; a checkpoint taken
    # sharded resumes replicated exactly as the uninterrupted run
    have_mpirun || return 0
    local common=(--micro-batch 256 --eval-every 0 --eval-samples 8192 --threads 1 --metrics none --plot none --json)
    expect_status 0 mpi2 train --steps 40 "${common[@]}" || return 1
    local want bytes1 bytes2
    want=$(auc_logloss)
    bytes1=$(grep '"dense_optimizer_bytes_per_rank"' "$TMP/out" | head -1 | sed 's/.*"dense_optimizer_bytes_per_rank":\([0-9]*\).*/\1/')
    expect_status 0 mpi2 train --steps 40 "${common[@]}" --optimizer-shards 2 || return 1
    [ "$(auc_logloss)" = "$want" ] || { echo "sharded: $(auc_logloss), replicated $want"; return 1; }
    bytes2=$(grep '"dense_optimizer_bytes_per_rank"' "$TMP/out" | head -1 | sed 's/.*"dense_optimizer_bytes_per_rank":\([0-9]*\).*/\1/')
    [ $((bytes2 * 2)) -le $((bytes1 + 8)) ] && [ "$bytes2" -gt 0 ] ||
        { echo "optimizer bytes per rank: $bytes2 sharded, $bytes1 replicated"; return 1; }
    expect_status 0 mpi2 train --steps 20 "${common[@]}" --optimizer-shards 2 --checkpoint-dir "$TMP/osh" || return 1
    expect_status 0 mpi2 train --steps 40 "${common[@]}" --checkpoint-dir "$TMP/osh" --resume || return 1
    [ "$(auc_logloss)" = "$want" ] || { echo "resumed replicated from sharded: $(auc_logloss), want $want"; return 1; }
    expect_status 2 "$EMBER" train --optimizer-shards -1 || return 1
    # groups that do not divide the world: the option (status 2) or the config's key and line (status 1)
    expect_status 2 mpi2 train --steps 2 "${common[@]}" --optimizer-shards 3 || return 1
    grep -q "^ember train: --optimizer-shards 3: groups of 3 ranks do not divide the world of 2 ranks (0: replicated state)$" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'train = { steps = 2;\n  optimizer_shards = 4; };\n' >"$TMP/osh.cfg"
    expect_status 1 mpi2 train --config "$TMP/osh.cfg" "${common[@]}" || return 1
    grep -q "^ember train: $TMP/osh.cfg:2: train.optimizer_shards: groups of 4 ranks do not divide the world of 2 ranks (0: replicated state)$" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(mpi_optimizer_shards)

check_mpi_pipeline() { # a DCN model in pipeline stages: every schedule, with and without recomputation, is
    # the unpipelined run bit for bit (the checkpoints' table, dense and optimizer digests: 2 stages on
    # 2 ranks against 1 rank, 2 stages x 2 replicas on 4 ranks against 2), also from a file whose steps
    # end short, with a cut between the cross layers and with the memory balance; each stage saves its
    # own pieces, and a checkpoint resumes into other stages, none, or a pipeline from none, as the
    # uninterrupted run
    have_mpirun || return 0
    local tables='tables = ( { name = "t0"; rows = 5000; dim = 16; optimizer = "adagrad"; placement = "row"; exchange = "rows"; },
  { name = "t1"; rows = 300; dim = 16; optimizer = "adagrad"; placement = "row"; exchange = "rows"; } );
features = ( { name = "f0"; table = "t0"; pooling = 2; }, { name = "f1"; table = "t1"; pooling = 3; } );
model = { interaction = "dcn"; dcn = { layers = 2; rank = 8; }; activation = "silu"; bottom = [16, 16]; top = [32, 16, 8]; };'
    local train='steps = 12; micro_batch = 128; accumulate = 4; eval_every = 0; eval_samples = 2048; metrics = ""; plot = "";'
    digests() { # the newest checkpoint under $1: every table's digest, the dense model's and its state's
        "$EMBER" inspect "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join([t["digest"] for t in d["tables"]] + [d["dense"]["params_digest"], d["dense"]["state_digest"]]))'
    }
    printf '%s\ntrain = { %s };\n' "$tables" "$train" >"$TMP/pl.cfg"
    local want1 want2 got sch rec
    expect_status 0 "$EMBER" train --config "$TMP/pl.cfg" --json --checkpoint-dir "$TMP/pl1" || return 1
    want1=$(digests "$TMP/pl1")
    expect_status 0 mpi2 train --config "$TMP/pl.cfg" --json --checkpoint-dir "$TMP/pl2" || return 1
    want2=$(digests "$TMP/pl2")
    piped() { # $1: the runner (mpi2, mpi4), $2: train.pipeline's settings: a run into $TMP/plp, $got its digests
        printf '%s\ntrain = { %s pipeline = { %s }; };\n' "$tables" "$train" "$2" >"$TMP/pp.cfg"
        rm -rf "$TMP/plp"
        expect_status 0 "$1" train --config "$TMP/pp.cfg" --json --checkpoint-dir "$TMP/plp" || return 1
        got=$(digests "$TMP/plp")
    }
    for sch in fill-drain 1f1b interleaved; do
        for rec in false true; do
            piped mpi2 "stages = 2; schedule = \"$sch\"; recompute = $rec;" || return 1
            [ "$got" = "$want1" ] || { echo "$sch recompute $rec, 2 stages: $got, unpipelined $want1"; return 1; }
        done
    done
    head -1 "$TMP/out" | grep -q '"pipeline":{"stages":2,"schedule":"interleaved","virtual":2,"recompute":true' ||
        { head -1 "$TMP/out"; return 1; }
    # the stages hold their own pieces: two ranks saved pieces, none a whole model; the predictor and
    # the exporter assemble them: the very scores of the unpipelined model, and the same bundle
    "$EMBER" inspect "$TMP/plp" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(not (d["dense"]["pieces"] == 2 and not [b for b in d["blobs"] if b["name"] == "dense.params"]))' ||
        { echo "want the dense model in 2 pieces"; return 1; }
    expect_status 0 "$EMBER" predict "$TMP/pl1" synthetic --samples 3000 --out "$TMP/s1.f32" || return 1
    expect_status 0 "$EMBER" predict "$TMP/plp" synthetic --samples 3000 --out "$TMP/sp.f32" || return 1
    cmp -s "$TMP/s1.f32" "$TMP/sp.f32" || { echo "scores of the pipelined checkpoint differ"; return 1; }
    rm -rf "$TMP/plb1" "$TMP/plbp"
    expect_status 0 "$EMBER" export "$TMP/pl1" "$TMP/plb1" --quantize fp32 || return 1
    expect_status 0 "$EMBER" export "$TMP/plp" "$TMP/plbp" --quantize fp32 || return 1
    cmp -s "$TMP/plb1/dense.params" "$TMP/plbp/dense.params" || { echo "exported dense models differ"; return 1; }
    # evaluations, early stopping and keep_best judge the pipelined evaluation as the unpipelined one
    local judged='keep_best = true; early_stop = { patience = 2; metric = "logloss"; };'
    printf '%s\ntrain = { %s %s };\n' "$tables" "${train/eval_every = 0;/eval_every = 3;}" "$judged" >"$TMP/plj.cfg"
    printf '%s\ntrain = { %s %s pipeline = { stages = 2; }; };\n' "$tables" "${train/eval_every = 0;/eval_every = 3;}" \
        "$judged" >"$TMP/ppj.cfg"
    rm -rf "$TMP/plj" "$TMP/ppj"
    verdict() { # the last run's summary: its metrics and what early stopping decided
        grep '"event":"summary"' "$TMP/out" | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["auc"], d["logloss"], d["best_step"], d["stopped_early"], d["steps"])'
    }
    expect_status 0 "$EMBER" train --config "$TMP/plj.cfg" --json --checkpoint-dir "$TMP/plj" || return 1
    local verdict1 verdictp
    verdict1=$(verdict)
    expect_status 0 mpi2 train --config "$TMP/ppj.cfg" --json --checkpoint-dir "$TMP/ppj" || return 1
    verdictp=$(verdict)
    [ "$verdictp" = "$verdict1" ] || { echo "judged: pipelined $verdictp, unpipelined $verdict1"; return 1; }
    [ "$(digests "$TMP/ppj/best")" = "$(digests "$TMP/plj/best")" ] || { echo "keep_best: other best checkpoints"; return 1; }
    # a cut between the two cross layers (blocks: bottom 0-1, interaction 2, cross 3-4, top 5-7, logit 8),
    # and the cuts of the memory balance
    for extra in 'cuts = [4];' 'balance = "memory";'; do
        piped mpi2 "stages = 2; $extra" || return 1
        [ "$got" = "$want1" ] || { echo "2 stages, $extra: $got, unpipelined $want1"; return 1; }
    done
    piped mpi4 "stages = 2;" || return 1
    [ "$got" = "$want2" ] || { echo "2 stages x 2 replicas: $got, 2 ranks unpipelined $want2"; return 1; }
    # each stage's optimizer state sharded over its 2 replicas: the same bits, half the state per rank
    rm -rf "$TMP/plp"
    expect_status 0 mpi4 train --config "$TMP/pp.cfg" --json --checkpoint-dir "$TMP/plp" --optimizer-shards 2 || return 1
    got=$(digests "$TMP/plp")
    [ "$got" = "$want2" ] || { echo "2 stages x 2 replicas, sharded state: $got, want $want2"; return 1; }
    head -1 "$TMP/out" | python3 -c 'import json,sys; m=json.loads(sys.stdin.readline())["dense_bytes_per_rank"]; sys.exit(not all(2 * s <= 2 * p + 8 for p, s in zip(m["params"], m["state"])))' ||
        { head -1 "$TMP/out"; echo "sharded: want at most half of Adam's 2 floats a parameter"; return 1; }
    expect_status 2 mpi4 train --config "$TMP/pp.cfg" --optimizer-shards 4 || return 1
    grep -q "optimizer-shards 4: groups of 4 ranks do not divide the 2 replicas of each of the 2 pipeline stages (a world of 4; 0: replicated state)" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    # resumed: the uninterrupted run, in the same stages, in none, from none, and in 4 stages on 4 ranks
    # (one replica group each time, so the same global batch as the 1-rank run)
    printf '%s
train = { %s pipeline = { stages = 4; }; };
' "$tables" "$train" >"$TMP/pp4.cfg"
    local first then
    for pair in "mpi2 pp mpi2 pp" "mpi2 pp ember pl" "ember pl mpi2 pp" "mpi2 pp mpi4 pp4"; do
        read -r first fcfg then tcfg <<<"$pair"
        [ "$first" = ember ] && first=$EMBER
        [ "$then" = ember ] && then=$EMBER
        rm -rf "$TMP/plp"
        expect_status 0 $first train --config "$TMP/$fcfg.cfg" --steps 6 --json --checkpoint-dir "$TMP/plp" || return 1
        expect_status 0 $then train --config "$TMP/$tcfg.cfg" --json --checkpoint-dir "$TMP/plp" --resume || return 1
        got=$(digests "$TMP/plp")
        [ "$got" = "$want1" ] || { echo "resumed ($pair): $got, want $want1"; return 1; }
    done
    # a file of 1001 samples in steps of 100: steps end short, and on 4 ranks the groups' shares differ
    expect_status 0 "$EMBER" gen --task 1001 "$TMP/pl.bin" --config "$TMP/pl.cfg" || return 1
    local ftrain='steps = 12; micro_batch = 50; accumulate = 2; eval_every = 0; metrics = ""; plot = "";'
    printf '%s\ntrain = { %s };\n' "$tables" "$ftrain" >"$TMP/plf.cfg"
    printf '%s\ntrain = { %s pipeline = { stages = 2; schedule = "interleaved"; }; };\n' "$tables" "$ftrain" >"$TMP/ppf.cfg"
    local dir
    for dir in f1 f2 fp2 fp4; do rm -rf "$TMP/$dir"; done
    expect_status 0 "$EMBER" train --config "$TMP/plf.cfg" --train-file "$TMP/pl.bin" --json --checkpoint-dir "$TMP/f1" || return 1
    expect_status 0 mpi2 train --config "$TMP/plf.cfg" --train-file "$TMP/pl.bin" --json --checkpoint-dir "$TMP/f2" || return 1
    expect_status 0 mpi2 train --config "$TMP/ppf.cfg" --train-file "$TMP/pl.bin" --json --checkpoint-dir "$TMP/fp2" || return 1
    [ "$(digests "$TMP/fp2")" = "$(digests "$TMP/f1")" ] || { echo "file, 2 stages: not the 1-rank run"; return 1; }
    expect_status 0 mpi4 train --config "$TMP/ppf.cfg" --train-file "$TMP/pl.bin" --json --checkpoint-dir "$TMP/fp4" || return 1
    [ "$(digests "$TMP/fp4")" = "$(digests "$TMP/f2")" ] || { echo "file, 2 stages x 2: not the 2-rank run"; return 1; }
    printf '%s\ntrain = { %s pipeline = { stages = 3; }; };\n' "$tables" "$train" >"$TMP/pp.cfg"
    expect_status 1 mpi2 train --config "$TMP/pp.cfg" || return 1
    grep -q "train.pipeline.stages 3 does not divide the world of 2" "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf '%s\ntrain = { %s pipeline = { stages = 2; virtual = 2; }; };\n' "$tables" "$train" >"$TMP/pp.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/pp.cfg" || return 1
    grep -q 'train.pipeline.virtual: more than 1 needs schedule = "interleaved"' "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf '%s\ntrain = { %s pipeline = { stages = 2; cuts = [99]; }; };\n' "$tables" "$train" >"$TMP/pp.cfg"
    expect_status 1 mpi2 train --config "$TMP/pp.cfg" || return 1
    grep -q "train.pipeline: pipeline: cut 1 at block 99" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(mpi_pipeline)

check_mpi_dense_cap() { # a dense model whose parameters, gradients and Adam state (29 MB) exceed the
    # per-rank budget train.dense_memory_mb = 20: refused unpipelined, naming the key, before anything
    # is allocated; trained in 2 and in 4 stages, each rank under the budget, with the checkpoint digests
    # and losses of the unbudgeted run on one rank
    have_mpirun || return 0
    local tables='tables = ( { name = "t0"; rows = 2000; dim = 16; optimizer = "adagrad"; },
  { name = "t1"; rows = 300; dim = 16; optimizer = "adagrad"; } );
features = ( { name = "f0"; table = "t0"; pooling = 2; }, { name = "f1"; table = "t1"; pooling = 3; } );
model = { interaction = "dcn"; dcn = { layers = 2; rank = 8; }; bottom = [16, 16]; top = [768, 768, 768, 768]; };'
    local train='steps = 4; log_every = 1; micro_batch = 64; accumulate = 4; eval_every = 0; eval_samples = 1024; metrics = ""; plot = ""; optimizer = { kind = "adam"; };'
    local cap='dense_memory_mb = 20;'
    printf '%s\ntrain = { %s };\n' "$tables" "$train" >"$TMP/cap.cfg"
    printf '%s\ntrain = { %s %s };\n' "$tables" "$train" "$cap" >"$TMP/cap1.cfg"
    printf '%s\ntrain = { %s %s pipeline = { stages = 2; balance = "memory"; }; };\n' "$tables" "$train" "$cap" >"$TMP/cap2.cfg"
    printf '%s\ntrain = { %s %s pipeline = { stages = 4; }; };\n' "$tables" "$train" "$cap" >"$TMP/cap4.cfg"
    state() { # digests of the checkpoint under $1, then the losses of the run's JSON lines
        "$EMBER" inspect "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join([t["digest"] for t in d["tables"]] + [d["dense"]["params_digest"], d["dense"]["state_digest"]]))'
        grep '"event":"train"' "$TMP/out" | sed 's/.*"loss":\([^,]*\).*/\1/' | tr '\n' ' '
    }
    rm -rf "$TMP/cap"*/
    expect_status 0 "$EMBER" train --config "$TMP/cap.cfg" --json --checkpoint-dir "$TMP/capw" || return 1
    local want got
    want=$(state "$TMP/capw")
    expect_status 1 "$EMBER" train --config "$TMP/cap1.cfg" --checkpoint-dir "$TMP/capx" || return 1
    grep -q "train.dense_memory_mb: the dense model's parameters, gradients and optimizer state take 2[0-9.]* MiB on every rank, more than the 20 MiB allowed: cut it into pipeline stages" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    [ ! -e "$TMP/capx" ] || { echo "a refused run left a checkpoint folder"; return 1; }
    local n
    for n in 2 4; do
        expect_status 0 "mpi$n" train --config "$TMP/cap$n.cfg" --json --checkpoint-dir "$TMP/cap$n" || return 1
        got=$(state "$TMP/cap$n")
        [ "$got" = "$want" ] || { echo "$n stages under the budget: $got; unbudgeted: $want"; return 1; }
        head -1 "$TMP/out" | python3 -c 'import json,sys; m=json.loads(sys.stdin.readline())["dense_bytes_per_rank"]; print(m); sys.exit(not all(p + g + s <= 20 << 20 for p, g, s in zip(m["params"], m["grads"], m["state"])))' ||
            { echo "$n stages: a rank holds more than the budget"; return 1; }
    done
}
CHECKS+=(mpi_dense_cap)

check_mpi_schedules() { # the split forward's schedules under two ranks: overlap is the blocking run bit
    # for bit (AUC and log loss to 8 digits, with evaluations and checkpoints between steps); stale
    # differs, and a stale run resumed from its checkpoint is the uninterrupted stale run exactly
    have_mpirun || return 0
    local common=(--micro-batch 256 --eval-samples 8192 --threads 1 --metrics none --plot none --json)
    expect_status 0 mpi2 train --steps 40 --eval-every 10 "${common[@]}" || return 1
    local want stale
    want=$(auc_logloss)
    expect_status 0 mpi2 train --steps 40 --eval-every 10 "${common[@]}" --schedule overlap || return 1
    [ "$(auc_logloss)" = "$want" ] || { echo "overlap: $(auc_logloss), blocking $want"; return 1; }
    grep -q '"schedule":"overlap"' "$TMP/out" || { echo "no schedule in the header"; return 1; }
    expect_status 0 mpi2 train --steps 40 --eval-every 0 "${common[@]}" --schedule stale \
        --checkpoint-dir "$TMP/stale_a" --checkpoint-every 20 || return 1
    stale=$(auc_logloss)
    expect_status 0 mpi2 train --steps 40 --eval-every 0 "${common[@]}" || return 1
    [ "$stale" != "$(auc_logloss)" ] || { echo "stale equals blocking: $stale"; return 1; }
    expect_status 0 mpi2 train --steps 20 --eval-every 0 "${common[@]}" --schedule stale \
        --checkpoint-dir "$TMP/stale_b" || return 1
    expect_status 0 mpi2 train --steps 40 --eval-every 0 "${common[@]}" --schedule stale \
        --checkpoint-dir "$TMP/stale_b" --checkpoint-every 20 --resume || return 1
    [ "$(auc_logloss)" = "$stale" ] || { echo "stale resumed: $(auc_logloss), uninterrupted $stale"; return 1; }
    # one rank: the same rules without exchanges
    expect_status 0 "$EMBER" train --steps 30 --eval-every 0 "${common[@]}" || return 1
    want=$(auc_logloss)
    expect_status 0 "$EMBER" train --steps 30 --eval-every 0 "${common[@]}" --schedule overlap || return 1
    [ "$(auc_logloss)" = "$want" ] || { echo "one rank, overlap: $(auc_logloss), blocking $want"; return 1; }
    expect_status 2 "$EMBER" train --schedule sometimes || return 1
    grep -q "bad value for --schedule: 'sometimes'" "$TMP/err" || return 1
}
CHECKS+=(mpi_schedules)

check_mpi_hot_rows() { # hot rows under two ranks change no result: the same AUC and log loss to 8 digits
    # with hot rows refreshed every 5 steps, blocking and stale; a run resumed from a checkpoint (whose
    # hot rows start empty) ends as the uninterrupted one
    have_mpirun || return 0
    hot_cfg() { # hot_rows
        printf 'data = { alpha = 1.1; };\ntrain = { hot_refresh_every = 5; };\ntables = (\n'
        printf '  { name = "a"; rows = 20000; dim = 16; optimizer = "adagrad"; hot_rows = %s; },\n' "$1"
        printf '  { name = "b"; rows = 3000; dim = 16; optimizer = "adagrad"; hot_rows = %s; },\n' "$1"
        printf '  { name = "c"; rows = 500; dim = 16; optimizer = "adagrad"; });\n'
        printf 'features = ({ name = "fa"; table = "a"; }, { name = "fb"; table = "b"; pooling = 3; },\n'
        printf '  { name = "fc"; table = "c"; });\n'
    }
    hot_cfg 0 >"$TMP/cold.cfg"
    hot_cfg 32 >"$TMP/hot.cfg"
    local common=(--steps 30 --micro-batch 256 --eval-every 0 --eval-samples 8192 --threads 1 --metrics none --plot none --json)
    local s want
    for s in blocking stale; do
        expect_status 0 mpi2 train --config "$TMP/cold.cfg" "${common[@]}" --schedule $s || return 1
        want=$(auc_logloss)
        expect_status 0 mpi2 train --config "$TMP/hot.cfg" "${common[@]}" --schedule $s || return 1
        [ "$(auc_logloss)" = "$want" ] || { echo "$s with hot rows: $(auc_logloss), without $want"; return 1; }
    done
    local ck=(--schedule stale --checkpoint-every 6)
    expect_status 0 mpi2 train --config "$TMP/hot.cfg" "${common[@]}" "${ck[@]}" --checkpoint-dir "$TMP/hotck_a" || return 1
    want=$(auc_logloss)
    expect_status 0 mpi2 train --config "$TMP/hot.cfg" "${common[@]}" "${ck[@]}" --steps 12 --checkpoint-dir "$TMP/hotck_b" || return 1
    expect_status 0 mpi2 train --config "$TMP/hot.cfg" "${common[@]}" "${ck[@]}" --checkpoint-dir "$TMP/hotck_b" --resume ||
        return 1
    [ "$(auc_logloss)" = "$want" ] || { echo "stale, resumed with hot rows: $(auc_logloss), want $want"; return 1; }
    printf 'tables = ({ name = "t"; rows = 10; dim = 4; placement = "column"; hot_rows = 2; });\nfeatures = ({ name = "f"; table = "t"; });\n' >"$TMP/hotbad.cfg"
    expect_status 1 mpi2 train --config "$TMP/hotbad.cfg" --steps 1 || return 1
    grep -q "table 't': hot rows need row placement" "$TMP/err" || return 1
}
CHECKS+=(mpi_hot_rows)

check_mpi_limits_adapt() { # limits that follow the data (docs/adaptive.md) under two ranks, on drifting ids: the
    # limits move at their steps ("limits" events, a text line each), nothing is dropped, the overlap schedule
    # ends bit for bit where blocking does; a checkpoint between two decisions resumes exactly; other limits
    # settings refuse the checkpoint; bad settings are named
    have_mpirun || return 0
    printf '%s\n' 'tables = ( { name = "items"; rows = 50000; dim = 8; optimizer = "adagrad"; limits = { policy = "drop"; }; },' \
        '  { name = "users"; rows = 5000; dim = 8; optimizer = "adagrad"; } );' \
        'features = ( { name = "fi"; table = "items"; pooling = 10; }, { name = "fu"; table = "users"; } );' \
        'data = { synthetic = { drift = { kind = "grow"; every = 1024; start = 20000; rows = 1000; features = 1; }; }; };' \
        'train = { steps = 6; micro_batch = 256; eval_samples = 512; metrics = ""; plot = "";' \
        '  limits = { adapt = "running"; every = 2; window = 3; quantile = 1.0; headroom = 0.1; }; };' >"$TMP/la.cfg"
    expect_status 0 mpi2 train --config "$TMP/la.cfg" --json --checkpoint-dir "$TMP/la_a" || return 1
    python3 - "$TMP/out" <<'PY' || return 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ev = [l for l in lines if l["event"] == "limits"]
assert [e["step"] for e in ev if e["table"] == "items"] == [2, 4], ev     # step 6 is the last: no decision
first = ev[0]
assert first["was"] == [0, 0] and first["max_ids_per_partition"] > 0 and first["policy"] == "drop", first
assert all(e["table"] == "items" for e in ev), ev                          # users has no limits: not adapted
lim = lines[-1]["limits"]
assert lim["changes"] == len(ev) and lim["dropped_ids"] == 0 and lim["ids"] > 0, lim
assert lim["tables"]["items"] == [ev[-1]["max_ids_per_partition"], ev[-1]["max_unique_ids_per_partition"]], lim
PY
    expect_status 0 "$EMBER" inspect "$TMP/la_a" || return 1
    local want
    want=$(grep digest "$TMP/out")
    expect_status 0 mpi2 train --config "$TMP/la.cfg" --schedule overlap --checkpoint-dir "$TMP/la_o" || return 1
    grep -q "^limits at step 2: table 'items' max_ids_per_partition 0 -> " "$TMP/out" || { cat "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect "$TMP/la_o" || return 1
    [ "$(grep digest "$TMP/out")" = "$want" ] || { echo "overlap: $(grep digest "$TMP/out"), blocking $want"; return 1; }
    expect_status 0 mpi2 train --config "$TMP/la.cfg" --checkpoint-dir "$TMP/la_r" --steps 3 || return 1
    expect_status 0 mpi2 train --config "$TMP/la.cfg" --checkpoint-dir "$TMP/la_r" --resume || return 1
    expect_status 0 "$EMBER" inspect "$TMP/la_r" || return 1
    [ "$(grep digest "$TMP/out")" = "$want" ] || { echo "resumed: $(grep digest "$TMP/out"), want $want"; return 1; }
    sed 's/headroom = 0.1;/headroom = 0.2;/' "$TMP/la.cfg" >"$TMP/la2.cfg"
    expect_status 1 mpi2 train --config "$TMP/la2.cfg" --checkpoint-dir "$TMP/la_r" --resume --steps 8 || return 1
    grep -q "limits adapt running, every 2, window 3, quantile 1, headroom 0.1.*this run adapt running" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    sed 's/quantile = 1.0;/quantile = 2;/' "$TMP/la.cfg" >"$TMP/la3.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/la3.cfg" || return 1
    grep -q "train.limits.quantile" "$TMP/err" || { cat "$TMP/err"; return 1; }
    sed 's/adapt = "running";/adapt = "sometimes";/' "$TMP/la.cfg" >"$TMP/la4.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/la4.cfg" || return 1
    grep -q "train.limits.adapt" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(mpi_limits_adapt)

check_mpi_window() { # the SSD tier's lookahead window that follows the data (ssd.lookahead_max) under two
    # ranks: the run ends bit for bit where a fixed window's does (the window only changes what is cached)
    have_mpirun || return 0
    mkdir -p "$TMP/win_a" "$TMP/win_f"
    local tabs='tables = ( { name = "a"; rows = 40000; dim = 8; optimizer = "adagrad"; storage = "ssd"; },
  { name = "b"; rows = 2000; dim = 8; optimizer = "adagrad"; } );
features = ( { name = "fa"; table = "a"; pooling = 6; }, { name = "fb"; table = "b"; } );
data = { alpha = 1.05; };
train = { steps = 120; micro_batch = 256; eval_samples = 512; metrics = ""; plot = ""; };'
    printf '%s\nssd = { dir = "%s"; cache_bytes = "200K"; lookahead = 1; lookahead_max = 16; };\n' "$tabs" "$TMP/win_a" >"$TMP/win_a.cfg"
    printf '%s\nssd = { dir = "%s"; cache_bytes = "200K"; lookahead = 1; };\n' "$tabs" "$TMP/win_f" >"$TMP/win_f.cfg"
    expect_status 0 mpi2 train --config "$TMP/win_a.cfg" --json --checkpoint-dir "$TMP/win_ack" || return 1
    tail -1 "$TMP/out" | python3 -c 'import json, sys; w = json.load(sys.stdin)["ssd_window"]; assert w[0] >= 1 and 1 < w[1] <= 16, w' ||
        { tail -1 "$TMP/out"; return 1; } # it moved
    expect_status 0 "$EMBER" inspect "$TMP/win_ack" || return 1
    local want
    want=$(grep digest "$TMP/out" | grep -v fingerprint)
    expect_status 0 mpi2 train --config "$TMP/win_f.cfg" --checkpoint-dir "$TMP/win_fck" || return 1
    expect_status 0 "$EMBER" inspect "$TMP/win_fck" || return 1
    [ "$(grep digest "$TMP/out" | grep -v fingerprint)" = "$want" ] ||
        { echo "fixed window: $(grep digest "$TMP/out"), following the data: $want"; return 1; }
    printf '%s\nssd = { dir = "%s"; lookahead = 8; lookahead_max = 4; };\n' "$tabs" "$TMP/win_f" >"$TMP/win_bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/win_bad.cfg" || return 1
    grep -q "lookahead_max 4 outside \[lookahead = 8, 63\]" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(mpi_window)

check_mpi_replan() { # the "auto" tables placed again while training (train.replan) under two ranks, on ids
    # that grow: the tables the first batches put whole on a rank move row-wise at a re-plan step, and the run
    # ends bit for bit where the run that never moved does (both placements are world-independent); a
    # checkpoint after the move resumes into the moved placement, exactly; SSD tables are refused
    have_mpirun || return 0
    printf '%s\n' 'tables = (' \
        '  { name = "items"; rows = 100000; dim = 8; optimizer = "adagrad"; alpha = 1.05; exchange = "rows"; },' \
        '  { name = "users"; rows = 100000; dim = 8; optimizer = "adagrad"; alpha = 1.05; exchange = "rows"; },' \
        '  { name = "ctx"; rows = 5000; dim = 8; optimizer = "adagrad"; alpha = 1.2; exchange = "rows"; } );' \
        'features = ( { name = "item"; table = "items"; pooling = 10; }, { name = "user"; table = "users"; pooling = 5; },' \
        '  { name = "c"; table = "ctx"; pooling = 2; } );' \
        'data = { synthetic = { drift = { kind = "grow"; every = 5120; start = 100; rows = 20000; features = 2; }; }; };' \
        'model = { emb_dim = 8; };' \
        'train = { steps = 40; micro_batch = 256; eval_samples = 512; metrics = ""; plot = "";' >"$TMP/rp_base.cfg"
    { cat "$TMP/rp_base.cfg"; echo '  replan = { every = 10; window = 2; gain = 0.05; }; };'; } >"$TMP/rp.cfg"
    { cat "$TMP/rp_base.cfg"; echo '};'; } >"$TMP/rp_static.cfg"
    expect_status 0 "$EMBER" gen --task 40000 --config "$TMP/rp.cfg" "$TMP/rp.bin" || return 1
    expect_status 0 mpi2 train --config "$TMP/rp.cfg" --train-file "$TMP/rp.bin" --json --checkpoint-dir "$TMP/rp_a" || return 1
    python3 - "$TMP/out" <<'PY' || return 1
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
start = [e for e in ev if e["event"] == "start"][0]
assert "items table/rows on rank" in start["placement"], start["placement"]
rp = [e for e in ev if e["event"] == "replan"]
assert [e["step"] for e in rp] == [10, 20, 30], rp                      # step 40 is the last: none
moved = [e for e in rp if e["moved"]]
assert moved and {t["table"] for t in moved[0]["tables"]} == {"items", "users"}, rp
assert all(t["to"] == "row/rows" for t in moved[0]["tables"]), moved
assert moved[0]["gain"] >= 0.05 and moved[0]["predicted_cost"][1] < moved[0]["predicted_cost"][0], moved
m = [e for e in ev if e["event"] == "replan_measured"]
assert m and m[0]["step"] == moved[0]["step"] + 1 and m[0]["busiest_bytes_after"] > 0, m
PY
    expect_status 0 "$EMBER" inspect "$TMP/rp_a" || return 1
    grep -q "items: 100000 x 8 fp32, adagrad (step 40), row," "$TMP/out" || { grep items "$TMP/out"; return 1; }
    local want
    want=$(grep digest "$TMP/out" | grep -v "train\.\|model.json\|data.position")
    expect_status 0 mpi2 train --config "$TMP/rp_static.cfg" --train-file "$TMP/rp.bin" --checkpoint-dir "$TMP/rp_s" || return 1
    expect_status 0 "$EMBER" inspect "$TMP/rp_s" || return 1
    [ "$(grep digest "$TMP/out" | grep -v "train\.\|model.json\|data.position")" = "$want" ] ||
        { echo "never moved: $(grep digest "$TMP/out"), re-planned: $want"; return 1; }
    want=$(expect_status 0 "$EMBER" inspect "$TMP/rp_a" && grep digest "$TMP/out")
    expect_status 0 mpi2 train --config "$TMP/rp.cfg" --train-file "$TMP/rp.bin" --steps 35 --checkpoint-dir "$TMP/rp_r" || return 1
    expect_status 0 mpi2 train --config "$TMP/rp.cfg" --train-file "$TMP/rp.bin" --checkpoint-dir "$TMP/rp_r" --resume || return 1
    expect_status 0 "$EMBER" inspect "$TMP/rp_r" || return 1
    [ "$(grep digest "$TMP/out")" = "$want" ] || { echo "resumed after the move: $(grep digest "$TMP/out"), want $want"; return 1; }
    sed 's/rows = 5000; dim = 8;/rows = 5000; dim = 8; storage = "ssd";/' "$TMP/rp.cfg" >"$TMP/rp_ssd.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/rp_ssd.cfg" --steps 1 || return 1
    grep -q "train.replan: table 'ctx' is on the SSD tier" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(mpi_replan)

# ---------------------------------------------------------- ember convert

# two Criteo lines around a bad one (C4, field 17, is not hexadecimal)
ctr_tsv_lines() {
    local ints=$'1\t\t3\t4\t5\t-1\t7\t8\t9\t10\t11\t\t13' good="" bad="" i c
    for i in $(seq 1 26); do
        c=$(printf '%08x' $((i * 2654435761 % 4294967296)))
        good+=$'\t'"$c"
        [ "$i" = 4 ] && c=zz12
        bad+=$'\t'"$c"
    done
    printf '1\t%s%s\n0\t%s%s\n0\t%s%s\n' "$ints" "$good" "$ints" "$bad" "$ints" "$good"
}

# A link planted at a name ember writes: refused by name, its target untouched (docs/RELIABILITY.md,
# "Files ember writes"; test_files and test_bundle do the same from C for every kind of file).
victim_intact() { [ "$(cat "$TMP/victim")" = precious ] || { echo "the link's target was written: $1"; return 1; }; }
check_files_links() {
    echo precious >"$TMP/victim"
    mkdir -p "$TMP/sym"
    # the SSD tier's store file, fresh and on --resume
    printf 'train = { steps = 4; micro_batch = 256; eval_samples = 256; metrics = ""; plot = ""; };\nssd = { min_bytes = 1; cache_bytes = "256K"; dir = "%s/sym"; };\n' \
        "$TMP" >"$TMP/sym.cfg"
    ln -sf "$TMP/victim" "$TMP/sym/emb_C1.rank0.ember-store"
    expect_status 1 "$EMBER" train --config "$TMP/sym.cfg" || return 1
    grep -q "sym/emb_C1.rank0.ember-store exists (a symbolic link): ember does not write through links" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    victim_intact "store file" || return 1
    rm "$TMP/sym/emb_C1.rank0.ember-store"
    expect_status 0 "$EMBER" train --config "$TMP/sym.cfg" --checkpoint-dir "$TMP/symck" || return 1
    [ -z "$(ls "$TMP/sym")" ] || { echo "a store file stayed after its run"; return 1; }
    ln -sf "$TMP/victim" "$TMP/sym/emb_C1.rank0.ember-store"
    expect_status 1 "$EMBER" train --config "$TMP/sym.cfg" --checkpoint-dir "$TMP/symck" --resume --steps 6 || return 1
    victim_intact "store file, resumed" || return 1
    rm "$TMP/sym/emb_C1.rank0.ember-store"
    echo mine >"$TMP/sym/emb_C1.rank0.ember-store" # a file that no store left: refused, kept
    expect_status 1 "$EMBER" train --config "$TMP/sym.cfg" || return 1
    grep -q "exists and it is not an ember store file" "$TMP/err" && [ "$(cat "$TMP/sym/emb_C1.rank0.ember-store")" = mine ] ||
        { cat "$TMP/err"; return 1; }
    # scores, metrics, plot: at the name and at name.tmp
    local name
    for name in s.f32 s.f32.tmp; do
        ln -sf "$TMP/victim" "$TMP/$name"
        expect_status 1 "$EMBER" predict "$TMP/symck" synthetic --samples 100 --out "$TMP/s.f32" || return 1
        grep -q "ember predict: $TMP/$name.*symbolic link" "$TMP/err" || { cat "$TMP/err"; return 1; }
        victim_intact "$name" || return 1
        rm "$TMP/$name"
    done
    for name in m.jsonl m.jsonl.tmp p.png p.png.tmp; do
        ln -sf "$TMP/victim" "$TMP/$name"
        expect_status 1 "$EMBER" train --steps 2 --micro-batch 64 --eval-samples 64 --metrics "$TMP/m.jsonl" --plot "$TMP/p.png" ||
            return 1
        grep -q "$TMP/${name%.tmp}: cannot write the .*$TMP/$name.*symbolic link" "$TMP/err" || { cat "$TMP/err"; return 1; }
        ! grep -q "step 1" "$TMP/out" || { echo "steps ran before the refusal"; return 1; }
        victim_intact "$name" || return 1
        rm "$TMP/$name"
    done
    # converted data, exported records, a bundle's folder
    ctr_tsv_lines >"$TMP/in.tsv"
    for name in c.ctr c.ctr.tmp; do
        ln -sf "$TMP/victim" "$TMP/$name"
        expect_status 1 "$EMBER" convert "$TMP/in.tsv" "$TMP/c.ctr" --rows 1000 --max-bad-fraction 1 || return 1
        grep -q "$name.*symbolic link" "$TMP/err" && victim_intact "$name" || { cat "$TMP/err"; return 1; }
        rm "$TMP/$name"
    done
    expect_status 0 "$EMBER" train --config "$PLAN_CONFIGS/dynamic.cfg" --steps 2 --checkpoint-dir "$TMP/symdyn" \
        --metrics none --plot none || return 1
    local table
    table=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tables'][0]['name'])" \
        "$(ls -d "$TMP"/symdyn/step-*)/manifest.json") || return 1
    for name in rec.bin rec.bin.tmp; do
        ln -sf "$TMP/victim" "$TMP/$name"
        expect_status 1 "$EMBER" export "$TMP/symdyn" --table "$table" --out "$TMP/rec.bin" || return 1
        grep -q "$name.*symbolic link" "$TMP/err" && victim_intact "$name" || { cat "$TMP/err"; return 1; }
        rm "$TMP/$name"
    done
    mkdir -p "$TMP/vdir"
    ln -sfn "$TMP/vdir" "$TMP/bl"
    expect_status 1 "$EMBER" export "$TMP/symck" "$TMP/bl" --quantize int8 || return 1
    grep -q "bl: it exists: bundles are not overwritten" "$TMP/err" && [ -z "$(ls "$TMP/vdir")" ] || { cat "$TMP/err"; return 1; }
}
CHECKS+=(files_links)

# A run that fails for another reason keeps the metrics lines written up to its failure: only a
# metrics file whose own write failed is taken back.
check_metrics_kept() {
    local bench
    bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
    python3 "$bench/criteo_like.py" "$TMP/mk.tsv" 2000 7 1 >/dev/null || return 1
    echo "not a line" >>"$TMP/mk.tsv"
    printf 'data = { source = "tsv"; train_file = "%s/mk.tsv"; bad_lines = "fail"; };
train = { steps = 100; micro_batch = 64; log_every = 1; };
' \
        "$TMP" >"$TMP/mk.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/mk.cfg" --metrics "$TMP/mk.jsonl" --plot none || return 1
    grep -q "mk.tsv:2001" "$TMP/err" || { cat "$TMP/err"; return 1; }
    [ "$(grep -c '"event":"train"' "$TMP/mk.jsonl")" -ge 20 ] || { echo "the metrics lines before the failure are gone"; return 1; }
}
CHECKS+=(metrics_kept)

# A full filesystem: every output fails with the OS reason, leaves nothing, and no line names it as
# written.  A tmpfs filled to its last byte where the test may mount one (root); else the fault
# shim (tests/fault/fault_shim.c, built beside ember) fails every write under the folder with
# ENOSPC, as a full disk does.
check_files_full() {
    local full="$TMP/full" shim lim=()
    shim="$(dirname "$EMBER")/libember_fault_shim.so"
    mkdir -p "$full"
    if [ -z "${EMBER_TEST_NO_MOUNT:-}" ] && mount -t tmpfs -o size=256k tmpfs "$full" 2>/dev/null; then
        dd if=/dev/zero of="$full/fill" bs=4k >/dev/null 2>&1
        : >"$full/fill.keep" 2>/dev/null || true # an inode may still be free: not needed
        rm -f "$full/fill.keep"
    elif [ -f "$shim" ]; then
        lim=(env LD_PRELOAD="$shim" EMBER_FAULT_PATH="$(realpath "$full")/" EMBER_FAULT_LOG="$TMP/fault.log"
             ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0)
        : >"$full/fill"
    else
        echo "neither a tmpfs could be mounted at $full nor is the fault shim at $shim"
        return 1
    fi
    local st=0
    files_full_cases "$full" "No space left on device" "${lim[@]}" || st=1
    mountpoint -q "$full" && umount "$full"
    return $st
}
files_full_cases() {
    local full=$1 why=$2
    shift 2
    expect_status 0 "$EMBER" train --steps 6 --micro-batch 256 --eval-samples 256 --checkpoint-dir "$TMP/fullck" \
        --metrics none --plot none || return 1
    expect_status 1 "$@" "$EMBER" train --steps 30 --micro-batch 64 --eval-samples 64 --metrics "$full/m.jsonl" --plot "$full/p.png" ||
        return 1
    grep -q "cannot write the metrics $full/m.jsonl: $why" "$TMP/err" && grep -q "no plot: cannot write $full/p.png: $why" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    ! grep -q "^metrics:" "$TMP/out" && grep -q '"plot":null' "$TMP/out" || { echo "the summary names a file not written"; return 1; }
    expect_status 1 "$@" "$EMBER" predict "$TMP/fullck" synthetic --out "$full/s.f32" || return 1
    grep -q "ember predict: cannot write $full/s.f32: $why" "$TMP/err" && ! grep -q "scores in" "$TMP/out" ||
        { cat "$TMP/err" "$TMP/out"; return 1; }
    ctr_tsv_lines >"$TMP/in.tsv"
    expect_status 1 "$@" "$EMBER" convert "$TMP/in.tsv" "$full/c.ctr" --rows 1000 --max-bad-fraction 1 || return 1
    grep -q "cannot write $full/c.ctr: $why" "$TMP/err" || { cat "$TMP/err"; return 1; }
    expect_status 1 "$@" "$EMBER" export "$TMP/fullck" "$full/b" --quantize fp32 || return 1
    grep -q "$why" "$TMP/err" || { cat "$TMP/err"; return 1; }
    [ -z "$(ls "$full" | grep -v '^fill$')" ] || { echo "left in the full folder:"; ls -la "$full"; return 1; }
}
CHECKS+=(files_full)

check_convert() {
    ctr_tsv_lines >"$TMP/in.tsv"
    expect_status 0 "$EMBER" convert "$TMP/in.tsv" "$TMP/out.ctr" --rows 1000 --max-bad-fraction 1 || return 1
    grep -q "wrote 2 samples to $TMP/out.ctr (3 lines read, 1 bad lines skipped)" "$TMP/out" || return 1
    grep -q "first bad line: $TMP/in.tsv:2: field 17 (C4): \"zz12\" is not hexadecimal" "$TMP/out" || return 1
    [ -f "$TMP/out.ctr" ] && [ ! -e "$TMP/out.ctr.tmp" ] || { echo "no out.ctr, or its .tmp left"; return 1; }
    head -c 8 "$TMP/out.ctr" | grep -q EMBERCTR || return 1
    expect_status 1 "$EMBER" convert "$TMP/in.tsv" "$TMP/fail.ctr" --bad fail || return 1
    grep -q "in.tsv:2: field 17 (C4): \"zz12\" is not hexadecimal" "$TMP/err" || return 1
    [ ! -e "$TMP/fail.ctr" ] && [ ! -e "$TMP/fail.ctr.tmp" ] || { echo "fail.ctr written"; return 1; }
    expect_status 0 "$EMBER" convert "$TMP/in.tsv" "$TMP/rows.ctr" --max-bad-fraction 1 --rows="$(seq -s, 1 26)" || return 1
    cmp -s "$TMP/out.ctr" "$TMP/rows.ctr" && { echo "--rows list ignored"; return 1; }
    # rows 0: 64-bit keys, format version 2 (version 1 without them)
    [ "$(head -c 12 "$TMP/out.ctr" | tail -c 4 | od -An -tu4 | tr -d ' ')" = 1 ] || return 1
    expect_status 0 "$EMBER" convert "$TMP/in.tsv" "$TMP/keys.ctr" --max-bad-fraction 1 --rows="0,7$(printf ',0%.0s' $(seq 24))" || return 1
    grep -q "64-bit keys (format version 2) for C1,C3,C4,C5,.*,C26$" "$TMP/out" || return 1
    [ "$(head -c 12 "$TMP/keys.ctr" | tail -c 4 | od -An -tu4 | tr -d ' ')" = 2 ] || return 1
    expect_status 2 "$EMBER" convert "$TMP/in.tsv" "$TMP/x.ctr" --rows -1 || return 1
    grep -q "or 0 (64-bit keys)" "$TMP/err" || return 1
    expect_status 1 "$EMBER" convert "$TMP/none.tsv" "$TMP/x.ctr" || return 1
    grep -q "none.tsv: cannot open" "$TMP/err" || return 1
    expect_status 2 "$EMBER" convert "$TMP/in.tsv" || return 1
    expect_status 2 "$EMBER" convert "$TMP/in.tsv" "$TMP/x.ctr" --rows 1,2 || return 1
    expect_status 2 "$EMBER" convert "$TMP/in.tsv" "$TMP/x.ctr" --bad maybe || return 1
    expect_status 0 "$EMBER" convert --help || return 1
    grep -q "usage: ember convert \[--config FILE | --model MODEL\] IN OUT.bin" "$TMP/out" || return 1
}
CHECKS+=(convert)

# "AUC log loss" of a train summary (the last line of $TMP/out) or of a predict JSON line
auc_logloss() { tail -1 "$TMP/out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["auc"], d["logloss"])'; }

# Two float32 score files: N scores each, within 1e-6 of each other
scores_close() { # a b n what
    python3 - "$1" "$2" "$3" "$4" <<'EOF2'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
n = int(sys.argv[3])
assert len(a) == len(b) == n and max(abs(x - y) for x, y in zip(a, b)) <= 1e-6, sys.argv[4]
EOF2
}

check_predict() { # the scores of a checkpoint are the trainer's own evaluation, bit for bit; a
    # TSV and a binary file of the same samples score the same; bad input is named
    expect_status 0 "$EMBER" train --steps 12 --checkpoint-dir "$TMP/pck" --json || return 1
    local want got
    want=$(auc_logloss)
    expect_status 0 "$EMBER" predict "$TMP/pck" synthetic --json --out "$TMP/p.f32" || return 1
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "predict gives AUC/log loss $got, the trainer's evaluation $want"; return 1; }
    [ "$(stat -c %s "$TMP/p.f32")" = $((65536 * 4)) ] || return 1
    # the JSON line is JSON whatever the path holds
    expect_status 0 "$EMBER" predict "$TMP/pck" synthetic --samples 64 --json --out "$TMP/q\"uo\\te.f32" || return 1
    tail -1 "$TMP/out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["out"].endswith("/q\"uo\\te.f32"), d' \
        || return 1
    expect_status 0 "$EMBER" predict "$TMP/pck" synthetic --samples 100 --format tsv --out "$TMP/p.tsv" || return 1
    python3 - "$TMP/p.tsv" "$TMP/p.f32" <<'EOF2' || return 1
import array, sys
rows = [l.split("\t") for l in open(sys.argv[1])]
f32 = array.array("f", open(sys.argv[2], "rb").read())
assert [int(r[0]) for r in rows] == list(range(100)), "index column"
assert all(float(r[2]) in (0.0, 1.0) for r in rows), "label column"
assert all(abs(float(r[1]) - f32[i]) <= 1e-6 for i, r in enumerate(rows)), "the same samples score the same"
EOF2
    # a Criteo-shaped model: the TSV and its binary conversion score alike
    printf 'tables = ({ name = "c%%d"; count = 26; rows = 1000; dim = 8; });\nfeatures = ({ name = "f%%d"; count = 26; table = "c%%d"; });\ndata = { batch_size = 2; source = "tsv"; train_file = "%s"; };\ntrain = { steps = 3; micro_batch = 2; };\n' "$TMP/pin.tsv" >"$TMP/p.cfg"
    { ctr_tsv_lines; ctr_tsv_lines; } | grep -v zz12 >"$TMP/pin.tsv"
    expect_status 0 "$EMBER" train --config "$TMP/p.cfg" --checkpoint-dir "$TMP/pck2" || return 1
    expect_status 0 "$EMBER" convert "$TMP/pin.tsv" "$TMP/pin.bin" --rows 1000 || return 1
    expect_status 0 "$EMBER" predict "$TMP/pck2" "$TMP/pin.tsv" --out "$TMP/t.f32" || return 1
    grep -q "scored 4 samples" "$TMP/out" || return 1
    expect_status 0 "$EMBER" predict "$TMP/pck2" "$TMP/pin.bin" --out "$TMP/b.f32" || return 1
    cmp -s "$TMP/t.f32" "$TMP/b.f32" || { echo "TSV and binary scores differ"; return 1; }
    expect_status 1 "$EMBER" predict "$TMP/pck2" synthetic || return 1
    grep -q "not trained on the built-in task" "$TMP/err" || return 1
    expect_status 1 "$EMBER" predict "$TMP/pck" "$TMP/pin.tsv" || return 1
    grep -q "pin.tsv: 13 dense and 26 sparse features, the model takes 13 and 8" "$TMP/err" || return 1
    expect_status 1 "$EMBER" predict "$TMP/none" synthetic || return 1
    grep -q "none" "$TMP/err" || return 1
    expect_status 2 "$EMBER" predict "$TMP/pck" || return 1
    expect_status 2 "$EMBER" predict "$TMP/pck" synthetic --format xml || return 1
    expect_status 2 "$EMBER" predict "$TMP/pck" synthetic --out "$TMP/x.csv" --id label || return 1
    # csv: the stream's samples by number, in order, as the f32 scores
    expect_status 0 "$EMBER" predict "$TMP/pck" synthetic --samples 100 --format csv --out "$TMP/p.csv" || return 1
    python3 - "$TMP/p.csv" "$TMP/p.f32" <<'EOF2' || return 1
import array, csv, sys
rows = list(csv.reader(open(sys.argv[1])))
f32 = array.array("f", open(sys.argv[2], "rb").read())
assert rows[0] == ["sample", "score", "label"], rows[0]
assert [int(r[0]) for r in rows[1:]] == list(range(100)), "sample column"
assert all(abs(float(r[1]) - f32[i]) <= 1e-6 for i, r in enumerate(rows[1:])), "the same samples score the same"
EOF2
    expect_status 1 "$EMBER" predict "$TMP/pck" synthetic --format csv --out "$TMP/x.csv" --id label || return 1
    grep -q "ids come from a text file's columns" "$TMP/err" || return 1
}
CHECKS+=(predict)

check_bundles() { # export at every encoding: fp32 scores as the checkpoint, bit for bit; int8
    # and fp16 within the documented AUC; bundles checksummed, never overwritten; bad input named
    expect_status 0 "$EMBER" train --steps 12 --checkpoint-dir "$TMP/bck" || return 1
    expect_status 0 "$EMBER" predict "$TMP/bck" synthetic --json --out "$TMP/ck.f32" || return 1
    cp "$TMP/out" "$TMP/ck.json"
    local q
    for q in fp32 fp16 int8 int4; do
        expect_status 0 "$EMBER" export "$TMP/bck" "$TMP/b-$q" --quantize "$q" || return 1
        expect_status 0 "$EMBER" predict "$TMP/b-$q" synthetic --json --out "$TMP/$q.f32" || return 1
        cp "$TMP/out" "$TMP/$q.json"
    done
    cmp -s "$TMP/ck.f32" "$TMP/fp32.f32" || { echo "an fp32 bundle scores differently from its checkpoint"; return 1; }
    python3 - "$TMP" <<'EOF2' || return 1
import json, os, sys
d = sys.argv[1]
auc = {q: json.load(open(os.path.join(d, q + ".json")))["auc"] for q in ("ck", "fp16", "int8", "int4")}
assert abs(auc["fp16"] - auc["ck"]) <= 0.0002, auc
assert abs(auc["int8"] - auc["ck"]) <= 0.001, auc
assert abs(auc["int4"] - auc["ck"]) <= 0.01, auc
row_bytes = {"fp32": lambda k: 4 * k, "fp16": lambda k: 2 * k, "int8": lambda k: 4 + k, "int4": lambda k: 4 + (k + 1) // 2}
for q in row_bytes:   # every table file: rows x the encoding's row size (fp16 scale and bias in front)
    man = json.load(open(os.path.join(d, "b-" + q, "manifest.json")))
    for t in man["tables"]:
        assert t["encoding"] == q and t["row_bytes"] == row_bytes[q](t["dim"]), t
        assert os.path.getsize(os.path.join(d, "b-" + q, t["file"])) == t["rows"] * t["row_bytes"], t
EOF2
    # from C (examples/predict.c): the same model from its checkpoint and its fp32 bundle scores
    # the same, and every score is a probability
    local ex
    ex="$(dirname "$EMBER")/example_predict"
    expect_status 0 "$ex" "$TMP/bck" || return 1
    grep "^sample" "$TMP/out" >"$TMP/ex-ck.txt"
    expect_status 0 "$ex" "$TMP/b-fp32" || return 1
    grep "^sample" "$TMP/out" | cmp -s - "$TMP/ex-ck.txt" || { echo "C: an fp32 bundle scores differently"; return 1; }
    expect_status 0 "$ex" "$TMP/b-int4" || return 1
    [ "$(awk '/^sample/ && $4 > 0 && $4 < 1' "$TMP/out" | wc -l)" = 4 ] || { echo "C: four probabilities"; return 1; }
    grep -q "model: 13 dense inputs, 8 features: C1 (table emb_C1)" "$TMP/out" || return 1
    # per-table encodings; errors: an existing folder, an unknown table or encoding
    expect_status 0 "$EMBER" export "$TMP/bck" "$TMP/b-mix" --quantize int8 --per-table emb_C1=fp32 || return 1
    expect_status 0 "$EMBER" predict "$TMP/b-mix" synthetic || return 1
    expect_status 1 "$EMBER" export "$TMP/bck" "$TMP/b-mix" --quantize int8 || return 1
    grep -q "b-mix: it exists" "$TMP/err" || return 1
    expect_status 1 "$EMBER" export "$TMP/bck" "$TMP/b-x" --quantize int8 --per-table nope=fp16 || return 1
    grep -q "per-table nope=fp16: no table of that name" "$TMP/err" || return 1
    expect_status 1 "$EMBER" export "$TMP/bck" "$TMP/b-y" --quantize int3 || return 1
    grep -q "encoding 'int3'" "$TMP/err" || return 1
    [ ! -e "$TMP/b-x" ] && [ ! -e "$TMP/b-y" ] && ! ls -d "$TMP"/b-*.tmp-* 2>/dev/null ||
        { echo "a failed export left files"; return 1; }
    mkdir "$TMP/b-z.tmp" # a folder of that name is the user's: an export never removes it
    expect_status 1 "$EMBER" export "$TMP/bck" "$TMP/b-z" --quantize int8 --per-table nope=fp16 || return 1
    [ -d "$TMP/b-z.tmp" ] || { echo "export removed a folder it did not make"; return 1; }
    expect_status 0 "$EMBER" export "$TMP/bck" "$TMP/b-slash/" --quantize fp16 || return 1
    [ -f "$TMP/b-slash/manifest.json" ] || { echo "a trailing slash"; return 1; }
    expect_status 1 "$EMBER" export "$TMP/bck" "$TMP/no/such/b" --quantize fp16 || return 1
    grep -q "the folder $TMP/no/such does not exist" "$TMP/err" || return 1
    expect_status 2 "$EMBER" export "$TMP/bck" "$TMP/b-z" || return 1
    # one edited byte of the manifest (a combiner) is refused by its checksum, the file named
    # (test_bundle damages every byte of every file of a bundle, and reseals edits)
    sed -i 's/"combiner": 0/"combiner": 1/' "$TMP/b-fp16/manifest.json"
    expect_status 1 "$EMBER" predict "$TMP/b-fp16" synthetic || return 1
    grep -q "b-fp16/manifest.json: checksum mismatch" "$TMP/err" || { cat "$TMP/err"; return 1; }
    # a corrupt table file is named
    local f
    f=$(ls "$TMP/b-int8"/table-*.rows | head -1)
    printf '\x01' | dd of="$f" bs=1 seek=10 conv=notrunc status=none
    expect_status 1 "$EMBER" predict "$TMP/b-int8" synthetic || return 1
    grep -q "$(basename "$f"): checksum mismatch" "$TMP/err" || return 1
}
CHECKS+=(bundles)

check_inspect_kinds() { # ember inspect reads checkpoints, bundles and (--samples) data files; a zero-filled or
    # empty file of any kind is refused by name with status 1, never an empty report with status 0
    local d="$TMP/ik" step rank
    mkdir -p "$d"
    expect_status 0 "$EMBER" train --steps 2 --micro-batch 64 --eval-samples 64 --metrics none --plot none \
        --checkpoint-dir "$d/ck" || return 1
    expect_status 0 "$EMBER" export "$d/ck" "$d/bundle" --quantize int8 || return 1
    expect_status 0 "$EMBER" inspect "$d/bundle" || return 1
    grep -q "^bundle $d/bundle: 8 tables, 5393 dense parameters (files verified)$" "$TMP/out" || { cat "$TMP/out"; return 1; }
    grep -q "^  emb_C1: 20000 x 16, int8, table-0000.rows .* ok$" "$TMP/out" || { cat "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect "$d/bundle" --json || return 1
    python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); assert j["verified"] and len(j["tables"]) == 8 and j["tables"][0]["encoding"] == "int8", j' \
        "$TMP/out" || return 1
    # a zero-filled or empty manifest, of a checkpoint or a bundle
    step=$(ls "$d/ck")
    cp -r "$d/ck" "$d/zck"
    head -c 1000 /dev/zero >"$d/zck/$step/manifest.json"
    expect_status 1 "$EMBER" inspect "$d/zck" || return 1
    grep -qx "ember inspect: $d/zck/$step/manifest.json: all 1000 bytes are zero (a file not written whole?): not a manifest" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    cp -r "$d/bundle" "$d/zb"
    : >"$d/zb/manifest.json"
    expect_status 1 "$EMBER" inspect "$d/zb" || return 1
    grep -qx "ember inspect: $d/zb/manifest.json: empty (0 bytes; a file not written whole?): not a manifest" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    # a zero-filled data file of a checkpoint, and of a bundle
    cp -r "$d/ck" "$d/zr"
    rank=$(cd "$d/zr/$step" && ls rank-*)
    head -c "$(stat -c %s "$d/zr/$step/$rank")" /dev/zero >"$d/zr/$step/$rank.z" && mv "$d/zr/$step/$rank.z" "$d/zr/$step/$rank"
    expect_status 1 "$EMBER" inspect "$d/zr" || return 1
    grep -qx "ember inspect: $d/zr/$step/$rank: all [0-9]* bytes are zero (a file not written whole?): not an ember checkpoint file" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    cp -r "$d/bundle" "$d/zt"
    head -c "$(stat -c %s "$d/zt/table-0000.rows")" /dev/zero >"$d/zt/t" && mv "$d/zt/t" "$d/zt/table-0000.rows"
    expect_status 1 "$EMBER" inspect "$d/zt" || return 1
    grep -qx "ember inspect: $d/zt/table-0000.rows: checksum mismatch (the file is corrupt)" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    # a file where a folder belongs
    head -c 4096 /dev/zero >"$d/zero.bin"
    : >"$d/empty.tsv"
    expect_status 1 "$EMBER" inspect "$d/zero.bin" || return 1
    grep -qx "ember inspect: $d/zero.bin: a file (4096 bytes), not a checkpoint or bundle folder (ember inspect --samples N FILE shows a data file's samples)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # data files: zero-filled, empty, nothing but bad lines
    expect_status 1 "$EMBER" inspect --samples all "$d/zero.bin" || return 1
    grep -qx "ember inspect: $d/zero.bin: all 4096 bytes are zero (a file not written whole?): neither ember's binary format nor text" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    [ ! -s "$TMP/out" ] || return 1
    expect_status 1 "$EMBER" inspect --samples 3 "$d/empty.tsv" || return 1
    grep -qx "ember inspect: $d/empty.tsv: the file is empty (0 bytes): no samples" "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'x\ty\n' >"$d/bad.tsv" # not Criteo's layout: refused at open
    expect_status 1 "$EMBER" inspect --samples all "$d/bad.tsv" || return 1
    grep -qx "ember inspect: $d/bad.tsv: not a Criteo TSV (no line of the first 1 has its 40 tab-separated fields; the last had 2): a file of another layout needs a config with data.schema (docs/data.md)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    ctr_tsv_lines | sed -n 2p >"$d/bad40.tsv" # Criteo's layout, every line bad: no samples, said
    expect_status 1 "$EMBER" inspect --samples all "$d/bad40.tsv" || return 1
    grep -q "ember inspect: $d/bad40.tsv: 1 of the 1 lines read were bad and skipped, no samples; the first: $d/bad40.tsv:1: " \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    # the same zero-filled file as training data
    expect_status 1 "$EMBER" train --train-file "$d/zero.bin" --steps 1 --metrics none --plot none || return 1
    grep -qx "ember train: $d/zero.bin: all 4096 bytes are zero (a file not written whole?): neither ember's binary format nor text" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(inspect_kinds)

check_mpi_predict() { # under mpirun: the scores of the np-2 evaluation, and the same file at np 1
    have_mpirun || return 0
    expect_status 0 mpi2 train --steps 6 --checkpoint-dir "$TMP/mck" --json || return 1
    local want got
    want=$(auc_logloss)
    expect_status 0 mpi2 predict "$TMP/mck" synthetic --samples 101 --json || return 1
    grep -q '"samples":101,' "$TMP/out" || { echo "--samples 101 at np 2"; return 1; }
    expect_status 0 mpi2 predict "$TMP/mck" synthetic --json --out "$TMP/m2.f32" || return 1
    [ "$(wc -l <"$TMP/out")" = 1 ] || { echo "printed more than once"; return 1; }
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "np 2: predict $got, the evaluation $want"; return 1; }
    expect_status 0 "$EMBER" predict "$TMP/mck" synthetic --out "$TMP/m1.f32" || return 1
    scores_close "$TMP/m1.f32" "$TMP/m2.f32" 65536 "np 1 against np 2" || return 1
    # dynamic tables: keys reshard by hash into a world of another size
    expect_status 0 mpi2 train --config "$PLAN_CONFIGS/dynamic.cfg" --steps 4 --checkpoint-dir "$TMP/dck" --json ||
        return 1
    want=$(auc_logloss)
    expect_status 0 mpi2 predict "$TMP/dck" synthetic --json --out "$TMP/d2.f32" || return 1
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "dynamic, np 2: predict $got, the evaluation $want"; return 1; }
    expect_status 0 "$EMBER" predict "$TMP/dck" synthetic --out "$TMP/d1.f32" || return 1
    scores_close "$TMP/d1.f32" "$TMP/d2.f32" 65536 "dynamic: np 1 against np 2" || return 1
    # a bundle loads at any world size: an int8 bundle at np 2 against np 1
    expect_status 0 "$EMBER" export "$TMP/mck" "$TMP/mb" --quantize int8 || return 1
    expect_status 0 mpi2 predict "$TMP/mb" synthetic --out "$TMP/mb2.f32" || return 1
    expect_status 0 "$EMBER" predict "$TMP/mb" synthetic --out "$TMP/mb1.f32" || return 1
    scores_close "$TMP/mb1.f32" "$TMP/mb2.f32" 65536 "bundle: np 1 against np 2" || return 1
    # every placement that keeps rows encoded (rows, pooled, table-wise, replicated) and one
    # decoded (column), int4 at np 2 against np 1
    printf '%s\n' 'train = { steps = 4; metrics = ""; plot = ""; eval_samples = 2048; };' \
        'tables = ( { name = "a"; rows = 3000; dim = 16; placement = "row"; exchange = "pooled"; },' \
        '  { name = "b"; rows = 500; dim = 16; placement = "table"; owner = 1; },' \
        '  { name = "c"; rows = 200; dim = 16; placement = "replicated"; },' \
        '  { name = "d"; rows = 900; dim = 16; placement = "column"; },' \
        '  { name = "e"; rows = 700; dim = 16; placement = "row"; exchange = "rows"; } );' \
        'features = ( { name = "fa"; table = "a"; }, { name = "fb"; table = "b"; pooling = 3; },' \
        '  { name = "fc"; table = "c"; combiner = "mean"; pooling = 2; }, { name = "fd"; table = "d"; },' \
        '  { name = "fe"; table = "e"; } );' >"$TMP/place.cfg"
    expect_status 0 mpi2 train --config "$TMP/place.cfg" --checkpoint-dir "$TMP/pck" || return 1
    expect_status 0 "$EMBER" export "$TMP/pck" "$TMP/pb" --quantize int4 || return 1
    expect_status 0 mpi2 predict "$TMP/pb" synthetic --samples 2048 --out "$TMP/pb2.f32" --json || return 1
    grep -q '"table_bytes":' "$TMP/out" || return 1
    expect_status 0 "$EMBER" predict "$TMP/pb" synthetic --samples 2048 --out "$TMP/pb1.f32" || return 1
    scores_close "$TMP/pb1.f32" "$TMP/pb2.f32" 2048 "int4 bundle, every placement: np 1 against np 2" || return 1
    # a text schema's model reads its eval CSV at np 2 as the np-2 evaluation did, with no config
    local ex
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    sed -e 's/shuffle = true;/shuffle = false;/' -e "s|\"movies|\"$ex/movies|g" -e 's/ mean = 8.79; std = 5.78;//' \
        "$ex/movies.cfg" >"$TMP/mps.cfg"
    expect_status 0 mpi2 train --config "$TMP/mps.cfg" --steps 30 --checkpoint-dir "$TMP/mpsck" --metrics none \
        --plot none --json || return 1
    want=$(auc_logloss)
    expect_status 0 mpi2 predict "$TMP/mpsck" "$ex/movies_eval.csv" --json --out "$TMP/mps2.f32" || return 1
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "text schema, np 2: predict $got, the evaluation $want"; return 1; }
    expect_status 0 "$EMBER" predict "$TMP/mpsck" "$ex/movies_eval.csv" --out "$TMP/mps1.f32" || return 1
    scores_close "$TMP/mps1.f32" "$TMP/mps2.f32" 1500 "text schema: np 1 against np 2" || return 1
}
CHECKS+=(mpi_predict)

check_bundles_dynamic() { # a model with dynamic tables (configs/dynamic.cfg: four of them, full after
    # training, so keys were evicted) exports at every encoding: fp32 scores as the checkpoint, bit
    # for bit; fp16, int8 and int4 within the AUC of check_bundles; the predictor holds every key's
    # row encoded (table_bytes = the bundle's table files); inspect describes the keys; a byte of a
    # keys file is refused by name
    expect_status 0 "$EMBER" train --config "$PLAN_CONFIGS/dynamic.cfg" --steps 300 --checkpoint-dir "$TMP/dyck" \
        --metrics none --plot none || return 1
    expect_status 0 "$EMBER" predict "$TMP/dyck" synthetic --json --out "$TMP/dy-ck.f32" || return 1
    cp "$TMP/out" "$TMP/dy-ck.json"
    local q
    for q in fp32 fp16 int8 int4; do
        expect_status 0 "$EMBER" export "$TMP/dyck" "$TMP/dyb-$q" --quantize "$q" || return 1
        expect_status 0 "$EMBER" predict "$TMP/dyb-$q" synthetic --json --out "$TMP/dy-$q.f32" || return 1
        cp "$TMP/out" "$TMP/dy-$q.json"
    done
    cmp -s "$TMP/dy-ck.f32" "$TMP/dy-fp32.f32" || { echo "an fp32 bundle of dynamic tables scores unlike its checkpoint"; return 1; }
    python3 - "$TMP" <<'EOF2' || return 1
import json, os, sys
d = sys.argv[1]
res = {q: json.load(open(os.path.join(d, "dy-%s.json" % q))) for q in ("ck", "fp32", "fp16", "int8", "int4")}
auc = {q: r["auc"] for q, r in res.items()}
assert abs(auc["fp16"] - auc["ck"]) <= 0.0002 and abs(auc["int8"] - auc["ck"]) <= 0.001, auc
assert abs(auc["int4"] - auc["ck"]) <= 0.01, auc
row_bytes = {"fp32": lambda k: 4 * k, "fp16": lambda k: 2 * k, "int8": lambda k: 4 + k, "int4": lambda k: 4 + (k + 1) // 2}
for q in row_bytes:
    b = os.path.join(d, "dyb-" + q)
    man = json.load(open(os.path.join(b, "manifest.json")))
    assert man["version"] == 3, man["version"]
    dyn = [t for t in man["tables"] if t["kind"] == "dynamic"]
    assert [t["name"] for t in dyn] == ["c1", "c2", "c3", "c4"], dyn
    held = 0
    for t in man["tables"]:
        assert t["encoding"] == q and t["row_bytes"] == row_bytes[q](t["dim"]), t
        assert os.path.getsize(os.path.join(b, t["file"])) == t["rows"] * t["row_bytes"], t
        held += t["rows"] * t["row_bytes"]
        if t["kind"] == "dynamic":  # full: every row of the capacity holds a key
            keys = open(os.path.join(b, t["keys"]["file"]), "rb").read()
            assert len(keys) == 8 * t["rows"] and t["rows"] == {"c1": 20000, "c2": 10000, "c3": 5000, "c4": 2000}[t["name"]], t
            k = [int.from_bytes(keys[i:i + 8], "little", signed=True) for i in range(0, len(keys), 8)]
            assert all(a < b for a, b in zip(k, k[1:])), t["name"] + ": keys ascend"
    # one process: the predictor holds exactly the bundle's rows, kept encoded
    assert res[q]["table_bytes"] == held, (q, res[q]["table_bytes"], held)
EOF2
    expect_status 0 "$EMBER" inspect "$TMP/dyb-int8" || return 1
    grep -q "^  c1: 20000 keys (dynamic) x 16, int8, table-0000.rows .* ok$" "$TMP/out" || { cat "$TMP/out"; return 1; }
    grep -q "^    its keys: table-0000.keys  *160000 bytes  xxh3 [0-9a-f]*  ok$" "$TMP/out" || { cat "$TMP/out"; return 1; }
    grep -q "^  c5: 1000 x 16, int8, table-0004.rows .* ok$" "$TMP/out" || { cat "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" inspect "$TMP/dyb-int8" --json || return 1
    python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); t = j["tables"][0]; assert j["version"] == 3 and t["kind"] == "dynamic" and t["keys"]["file"] == "table-0000.keys", t' \
        "$TMP/out" || return 1
    # one table at another encoding
    expect_status 0 "$EMBER" export "$TMP/dyck" "$TMP/dyb-mix" --quantize fp32 --per-table c2=int4 || return 1
    expect_status 0 "$EMBER" predict "$TMP/dyb-mix" synthetic --samples 4096 || return 1
    # a changed byte of a keys file
    printf '\x01' | dd of="$TMP/dyb-int8/table-0002.keys" bs=1 seek=100 conv=notrunc status=none
    expect_status 1 "$EMBER" predict "$TMP/dyb-int8" synthetic || return 1
    grep -q "dyb-int8/table-0002.keys: checksum mismatch" "$TMP/err" || { cat "$TMP/err"; return 1; }
    expect_status 1 "$EMBER" inspect "$TMP/dyb-int8" || return 1
    grep -q "table-0002.keys: checksum mismatch" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(bundles_dynamic)

check_mpi_bundles_dynamic() { # a bundle of dynamic tables at np 1, 2 and 4: each rank keeps the keys it
    # owns; fp32 scores as the checkpoint at the same world size, bit for bit (at np 2, the np-2
    # evaluation's AUC); int8 at np 2 and 4 as at np 1 (within 1e-6, the dense model's chunks)
    have_mpirun || return 0
    expect_status 0 mpi2 train --config "$PLAN_CONFIGS/dynamic.cfg" --steps 40 --checkpoint-dir "$TMP/mdck" --json \
        --metrics none --plot none || return 1
    local want got np
    want=$(auc_logloss)
    expect_status 0 "$EMBER" export "$TMP/mdck" "$TMP/mdb32" --quantize fp32 || return 1
    expect_status 0 "$EMBER" export "$TMP/mdck" "$TMP/mdb8" --quantize int8 || return 1
    expect_status 0 mpi2 predict "$TMP/mdb32" synthetic --json --out "$TMP/md32-2.f32" || return 1
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "fp32 bundle of dynamic tables, np 2: predict $got, the evaluation $want"; return 1; }
    expect_status 0 mpi2 predict "$TMP/mdck" synthetic --out "$TMP/mdck-2.f32" || return 1
    cmp -s "$TMP/mdck-2.f32" "$TMP/md32-2.f32" || { echo "np 2: the fp32 bundle scores unlike its checkpoint"; return 1; }
    expect_status 0 mpi4 predict "$TMP/mdb32" synthetic --out "$TMP/md32-4.f32" || return 1
    expect_status 0 mpi4 predict "$TMP/mdck" synthetic --out "$TMP/mdck-4.f32" || return 1
    cmp -s "$TMP/mdck-4.f32" "$TMP/md32-4.f32" || { echo "np 4: the fp32 bundle scores unlike its checkpoint"; return 1; }
    expect_status 0 "$EMBER" predict "$TMP/mdb8" synthetic --json --out "$TMP/md8-1.f32" || return 1
    local bytes1
    bytes1=$(tail -1 "$TMP/out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["table_bytes"])')
    for np in 2 4; do
        expect_status 0 "mpi$np" predict "$TMP/mdb8" synthetic --json --out "$TMP/md8-$np.f32" || return 1
        scores_close "$TMP/md8-1.f32" "$TMP/md8-$np.f32" 65536 "int8 bundle of dynamic tables: np 1 against np $np" ||
            return 1
        # the ranks hold the keys between them: the dynamic tables' rows at least once (each
        # rank's capacity is the most keys one rank owns, so a little more)
        python3 -c 'import json,sys; b = json.loads(open(sys.argv[1]).read().splitlines()[-1])["table_bytes"]; assert int(sys.argv[2]) <= b <= 1.2 * int(sys.argv[2]), (b, sys.argv[2])' \
            "$TMP/out" "$bytes1" || return 1
    done
}
CHECKS+=(mpi_bundles_dynamic)

check_serve_dynamic() { # ember serve of a bundle of dynamic tables: a dynamic feature's ids are any
    # 64-bit key (known, unknown, the extremes); the fp32 bundle answers as its checkpoint, bit for
    # bit, JSON and binary bodies alike; the int8 bundle answers probabilities; an id of a fixed
    # table is still checked against its rows
    expect_status 0 "$EMBER" train --config "$PLAN_CONFIGS/dynamic.cfg" --steps 20 --checkpoint-dir "$TMP/sdck" \
        --metrics none --plot none || return 1
    expect_status 0 "$EMBER" export "$TMP/sdck" "$TMP/sdb32" --quantize fp32 || return 1
    expect_status 0 "$EMBER" export "$TMP/sdck" "$TMP/sdb8" --quantize int8 || return 1
    python3 - "$EMBER" "$TMP" <<'EOF2' || return 1
import http.client, json, os, random, signal, struct, subprocess, sys, time
ember, tmp = sys.argv[1:3]
man = json.load(open(os.path.join(tmp, "sdb32", "manifest.json")))
tables = {t["name"]: t for t in man["tables"]}
keys = open(os.path.join(tmp, "sdb32", tables["c1"]["keys"]["file"]), "rb").read()
known = [int.from_bytes(keys[i:i + 8], "little", signed=True) for i in range(0, len(keys), 8)]
rng = random.Random(7)
feats = [f["name"] for f in man["model"]["features"]]
dyn = {f["name"]: man["model"]["tables"][f["table"]]["kind"] == 1 for f in man["model"]["features"]}
rows = {f["name"]: man["model"]["tables"][f["table"]]["rows"] for f in man["model"]["features"]}
nd = man["model"]["dense"]["num_dense"]
samples = []
for s in range(40):
    bags = {}
    for f in feats:
        if dyn[f]:
            pool = [rng.choice(known), rng.getrandbits(64) - 2**63, -2**63, 2**63 - 1, 0, -1]
            bags[f] = [rng.choice(pool) for _ in range(rng.randrange(0, 4))]
        else:
            bags[f] = [rng.randrange(rows[f]) for _ in range(rng.randrange(0, 3))]
    samples.append(([rng.uniform(-1, 1) for _ in range(nd)], bags))
body = json.dumps({"dense": [d for d, _ in samples], "sparse": {f: [b[f] for _, b in samples] for f in feats}})
lengths = [len(b[f]) for f in feats for _, b in samples]
ids = [i for f in feats for _, b in samples for i in b[f]]
binary = (b"EMBQ" + struct.pack("<IIIIIQ", 1, len(samples), nd, len(feats), 0, len(ids))
          + struct.pack("<%df" % (len(samples) * nd), *[x for d, _ in samples for x in d])
          + struct.pack("<%di" % len(lengths), *lengths) + struct.pack("<%dq" % len(ids), *ids))

def serve(model):
    out = open(os.path.join(tmp, "sd.out"), "w+")
    p = subprocess.Popen([ember, "serve", model, "--port", "0"], stdout=out, stderr=subprocess.STDOUT)
    for _ in range(300):
        out.seek(0)
        line = out.readline()
        if "http://" in line:
            port = int(line.split("http://127.0.0.1:")[1].split()[0])
            break
        assert p.poll() is None, open(out.name).read()
        time.sleep(0.05)
    got = {}
    for kind, data, ctype in (("json", body, "application/json"), ("binary", binary, "application/octet-stream")):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/score", body=data, headers={"Content-Type": ctype})
        r = c.getresponse()
        ans = r.read()
        assert r.status == 200, (model, kind, r.status, ans[:300])
        got[kind] = json.loads(ans)["scores"] if kind == "json" else list(struct.unpack("<%df" % len(samples), ans))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/model")
    m = json.loads(c.getresponse().read())
    assert [f["rows"] for f in m["features"]] == [0, 0, 0, 0, 1000, 500, 200, 100], m["features"]
    bad = json.dumps({"dense": [samples[0][0]], "sparse": {f: [[5000] if f == "f5" else []] for f in feats}})
    c.request("POST", "/score", body=bad, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    err = r.read()
    assert r.status == 400 and b"f5" in err, (r.status, err)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 0
    return got

ck, b32, b8 = serve(os.path.join(tmp, "sdck")), serve(os.path.join(tmp, "sdb32")), serve(os.path.join(tmp, "sdb8"))
for kind in ("json", "binary"):
    assert b32[kind] == ck[kind], (kind, "the fp32 bundle answers unlike its checkpoint")
    assert all(0 < x < 1 for x in b8[kind]), b8[kind]
    assert max(abs(a - b) for a, b in zip(b8[kind], ck[kind])) < 0.01, kind
assert b32["json"] == [float("%.9g" % x) for x in b32["binary"]]
EOF2
}
CHECKS+=(serve_dynamic)

check_quantization() { # simulated quantization from a config: trains; a bad group is named; the
    # fingerprint records it, so resuming with another setting fails
    printf 'tables = ({ name = "t"; rows = 500; dim = 8; quantization = { num_buckets = 16; low = -0.1; high = 0.1; }; });\nfeatures = ({ name = "f"; table = "t"; });\n' >"$TMP/q.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/q.cfg" --steps 3 --checkpoint-dir "$TMP/qck" --json || return 1
    sed 's/num_buckets = 16/num_buckets = 32/' "$TMP/q.cfg" >"$TMP/q2.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/q2.cfg" --steps 4 --checkpoint-dir "$TMP/qck" --resume || return 1
    grep -q "table.t.quantization" "$TMP/err" || return 1
    sed 's/low = -0.1; high = 0.1;/low = 0.1; high = -0.1;/' "$TMP/q.cfg" >"$TMP/q3.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/q3.cfg" --steps 1 || return 1
    grep -q "q3.cfg:1: tables\[0\].quantization: low (0.1) must be below high (-0.1)" "$TMP/err" || return 1
    sed 's/ high = 0.1;//' "$TMP/q.cfg" >"$TMP/q4.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/q4.cfg" --steps 1 || return 1
    grep -q "tables\[0\].quantization.high: missing" "$TMP/err" || return 1
}
CHECKS+=(quantization)

check_schema_example() { # the movies example of docs/data.md: convert (1 and 2 threads alike), then
    # train from the binary and from the CSV itself: the same result to the last digit; a
    # gzip copy reads the same; a bad value names file, line, field and column
    local ex
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    expect_status 0 "$EMBER" convert --config "$ex/movies.cfg" "$ex/movies.csv" "$TMP/m1.bin" --threads 1 || return 1
    grep -q "feature genres: 8 distinct keys" "$TMP/out" || return 1
    expect_status 0 "$EMBER" convert --config "$ex/movies.cfg" "$ex/movies.csv" "$TMP/m2.bin" --threads 2 || return 1
    cmp -s "$TMP/m1.bin" "$TMP/m2.bin" || { echo "threads 1 and 2 wrote different files"; return 1; }
    # as docs/data.md runs it: shuffled, stopped early, the best checkpoint kept
    expect_status 0 "$EMBER" train --config "$ex/movies.cfg" --train-file "$TMP/m1.bin" --checkpoint-dir "$TMP/sx_mck" \
        --metrics none --plot none || return 1
    grep -q "stopped early after step" "$TMP/out" && [ -d "$TMP/sx_mck/best" ] || { echo "no early stop or best"; return 1; }
    expect_status 0 "$EMBER" train --config "$ex/movies.cfg" --train-file "$TMP/m1.bin" --checkpoint-dir "$TMP/sx_mck2" \
        --metrics none --plot none --json || return 1
    grep '"event":"summary"' "$TMP/out" | sed 's/.*"auc":\([0-9.]*\).*/\1/' >"$TMP/auc_shuf_bin"
    # the example as written: the CSV itself, shuffled, trains as its shuffled conversion
    expect_status 0 "$EMBER" train --config "$ex/movies.cfg" --checkpoint-dir "$TMP/c3" --metrics none --plot none \
        --json || return 1
    grep '"event":"summary"' "$TMP/out" | sed 's/.*"auc":\([0-9.]*\).*/\1/' >"$TMP/auc_shuf_text"
    [ -s "$TMP/auc_shuf_text" ] && cmp -s "$TMP/auc_shuf_bin" "$TMP/auc_shuf_text" ||
        { echo "shuffled binary and text trained differently"; return 1; }
    # unshuffled, the CSV itself trains as its binary conversion does
    sed -e 's/shuffle = true;/shuffle = false;/' -e "s|\"movies|\"$ex/movies|g" "$ex/movies.cfg" >"$TMP/ns.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/ns.cfg" --train-file "$TMP/m1.bin" --checkpoint-dir "$TMP/c1" \
        --metrics none --plot none --json || return 1
    grep '"event":"summary"' "$TMP/out" | sed 's/.*"auc":\([0-9.]*\).*/\1/' >"$TMP/auc_bin"
    expect_status 0 "$EMBER" train --config "$TMP/ns.cfg" --checkpoint-dir "$TMP/c2" --metrics none --plot none --json || return 1
    grep '"event":"summary"' "$TMP/out" | sed 's/.*"auc":\([0-9.]*\).*/\1/' >"$TMP/auc_text"
    cmp -s "$TMP/auc_bin" "$TMP/auc_text" || { echo "binary and text trained differently"; return 1; }
    # standardize statistics computed on one file are not applied to another's scale
    sed 's/ mean = 8.79; std = 5.78;//' "$TMP/ns.cfg" >"$TMP/nostats.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/nostats.cfg" --train-file "$TMP/m1.bin" --checkpoint-dir "$TMP/c4" || return 1
    grep -q "movies_eval.csv: column price: standardize has no mean and std, and the training data is not text" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/nostats.cfg" --steps 3 --checkpoint-dir "$TMP/c5" || return 1
    gzip -c "$ex/movies.csv" >"$TMP/movies.csv.gz"
    expect_status 0 "$EMBER" inspect --samples all "$TMP/movies.csv.gz" --config "$ex/movies.cfg" || return 1
    cp "$TMP/out" "$TMP/s_gz"
    expect_status 0 "$EMBER" inspect --samples all "$TMP/m1.bin" || return 1
    cmp -s "$TMP/out" "$TMP/s_gz" || { echo "gzip text and binary samples differ"; return 1; }
    sed '5s/^\([01]\),\(u[0-9]*\),[0-9]*,/\1,\2,4.5,/' "$ex/movies.csv" >"$TMP/bad.csv"
    cp "$ex/movies.cfg" "$TMP/bad.cfg"
    expect_status 1 "$EMBER" convert --config "$TMP/bad.cfg" "$TMP/bad.csv" "$TMP/m3.bin" --bad fail || return 1
    grep -q 'bad.csv:5: field 2 (age): "4.5" is not an integer' "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(schema_example)

check_predict_schema() { # a model trained through a text schema reads text as training read it: the
    # checkpoint and its fp32 bundle score the eval CSV as the trainer's own evaluation did (AUC and log
    # loss to the last digit), gzip and the binary conversion of the same rows score bit for bit alike,
    # and the standardize statistics computed on the training file travel with the model
    local ex want got
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    sed -e 's/shuffle = true;/shuffle = false;/' -e "s|\"movies|\"$ex/movies|g" -e 's/ mean = 8.79; std = 5.78;//' \
        "$ex/movies.cfg" >"$TMP/ps.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/ps.cfg" --steps 40 --checkpoint-dir "$TMP/psck" --metrics none \
        --plot none --json || return 1
    want=$(auc_logloss)
    expect_status 0 "$EMBER" predict "$TMP/psck" "$ex/movies_eval.csv" --json --out "$TMP/ps.f32" || return 1
    got=$(auc_logloss)
    [ "$want" = "$got" ] || { echo "predict on the CSV gives $got, the trainer's evaluation $want"; return 1; }
    gzip -c "$ex/movies_eval.csv" >"$TMP/ps_eval.csv.gz"
    expect_status 0 "$EMBER" predict "$TMP/psck" "$TMP/ps_eval.csv.gz" --out "$TMP/psz.f32" || return 1
    cmp -s "$TMP/ps.f32" "$TMP/psz.f32" || { echo "gzip and plain CSV score differently"; return 1; }
    expect_status 0 "$EMBER" export "$TMP/psck" "$TMP/psb" --quantize fp32 || return 1
    expect_status 0 "$EMBER" predict "$TMP/psb" "$ex/movies_eval.csv" --out "$TMP/psb.f32" || return 1
    cmp -s "$TMP/ps.f32" "$TMP/psb.f32" || { echo "the fp32 bundle scores the CSV differently"; return 1; }
    python3 - "$TMP/psb/manifest.json" <<'EOF2' || return 1
import json, sys
s = json.load(open(sys.argv[1]))["model"]["input_schema"]
assert s["source"] == "text" and s["format"] == "csv" and s["header"] is True, s
price = [c for c in s["columns"] if c["name"] == "price"][0]
assert price["transform"] == "standardize" and abs(price["mean"] - 8.79) < 0.05 and price["std"] > 0, price
genres = [c for c in s["columns"] if c["name"] == "genres"][0]
assert genres["separator"] == "|" and genres["weights"] is True and genres["rows"] == 64, genres
EOF2
    # the binary conversion of the eval rows, scaled by the statistics the model carries, scores alike
    python3 - "$TMP/psb/manifest.json" "$TMP/ps.cfg" >"$TMP/ps_stats.cfg" <<'EOF2' || return 1
import json, re, sys
price = [c for c in json.load(open(sys.argv[1]))["model"]["input_schema"]["columns"] if c["name"] == "price"][0]
cfg = open(sys.argv[2]).read()
print(cfg.replace('transform = "standardize";', 'transform = "standardize"; mean = %.17g; std = %.17g;' % (price["mean"], price["std"])))
EOF2
    expect_status 0 "$EMBER" convert --config "$TMP/ps_stats.cfg" "$ex/movies_eval.csv" "$TMP/ps_eval.bin" || return 1
    expect_status 0 "$EMBER" predict "$TMP/psck" "$TMP/ps_eval.bin" --out "$TMP/psbin.f32" || return 1
    cmp -s "$TMP/ps.f32" "$TMP/psbin.f32" || { echo "the CSV and its binary conversion score differently"; return 1; }
}
CHECKS+=(predict_schema)

check_not_criteo() { # a file of another layout read without data.schema is refused at open, with the way
    # out, instead of skipping every line as a bad Criteo line; a Criteo TSV whose first lines are
    # bad still opens (its bad lines counted)
    local ex n
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    for cmd in "train --train-file $ex/movies.csv --steps 2" "convert $ex/movies.csv $TMP/nc.bin" \
               "inspect --samples 3 $ex/movies.csv"; do
        # shellcheck disable=SC2086
        expect_status 1 "$EMBER" $cmd || return 1
        grep -q "movies.csv: not a Criteo TSV (no line of the first 100 has its 40 tab-separated fields; the last had 1 and commas: a CSV?)" "$TMP/err" ||
            { echo "$cmd:"; cat "$TMP/err"; return 1; }
    done
    [ ! -e "$TMP/nc.bin" ] || { echo "convert left a file"; return 1; }
    n=$((RANDOM % 99 + 1)) # bad first lines, then a good one within the first 100
    { for _ in $(seq "$n"); do echo "not,a,criteo,line"; done; ctr_tsv_lines; } >"$TMP/nc.tsv"
    expect_status 0 "$EMBER" convert "$TMP/nc.tsv" "$TMP/nc2.bin" --max-bad-fraction 1 || return 1
    grep -q "$((n + 1)) bad lines skipped" "$TMP/out" || { echo "expected $n + 1 bad lines counted"; cat "$TMP/out"; return 1; }
    { for _ in $(seq 100); do echo "not,a,criteo,line"; done; ctr_tsv_lines; } >"$TMP/nc3.tsv"
    expect_status 1 "$EMBER" convert "$TMP/nc3.tsv" "$TMP/nc3.bin" || return 1
    grep -q "nc3.tsv: not a Criteo TSV" "$TMP/err" || return 1
}
CHECKS+=(not_criteo)

check_config_include() { # @include "x" is found beside the including config, as its data paths are,
    # whatever the working folder; a missing one is named
    mkdir -p "$TMP/inc/sub" "$TMP/inc/elsewhere"
    printf 'tables = ({ name = "t%%d"; count = 8; rows = 1000; dim = 16; });\nfeatures = ({ name = "f%%d"; count = 8; table = "t%%d"; });\n' \
        >"$TMP/inc/sub/tables.cfg"
    printf '@include "tables.cfg"\ntrain = { steps = 2; metrics = ""; plot = ""; eval_samples = 256; };\n' >"$TMP/inc/sub/a.cfg"
    (cd "$TMP/inc/elsewhere" && expect_status 0 "$EMBER" train --config ../sub/a.cfg) || return 1
    grep -q '8 tables' "$TMP/out" || { head -5 "$TMP/out"; return 1; }
    # a file of that name in the working folder is not the one beside the config
    cp "$TMP/inc/sub/tables.cfg" "$TMP/inc/elsewhere/nothere.cfg"
    printf '@include "nothere.cfg"\n' >"$TMP/inc/sub/b.cfg"
    (cd "$TMP/inc/elsewhere" && expect_status 1 "$EMBER" train --config ../sub/b.cfg) || return 1
    grep -q "b.cfg:1: @include \"../sub/nothere.cfg\": No such file or directory" "$TMP/err" || { cat "$TMP/err"; return 1; }
    # a folder, or an empty name (the config's folder), is refused by name (libconfig would exit the process)
    printf 'tables = ();\n@include ""\n' >"$TMP/inc/sub/c.cfg"
    (cd "$TMP/inc/elsewhere" && expect_status 1 "$EMBER" train --config ../sub/c.cfg) || return 1
    grep -q "c.cfg:2: @include \"../sub/\": not a file" "$TMP/err" || { cat "$TMP/err"; return 1; }
    # an absolute path is taken as it is
    printf '@include "%s"\ntrain = { steps = 2; metrics = ""; plot = ""; eval_samples = 256; };\n' \
        "$TMP/inc/sub/tables.cfg" >"$TMP/inc/abs.cfg"
    (cd "$TMP/inc/elsewhere" && expect_status 0 "$EMBER" train --config ../abs.cfg) || return 1
}
CHECKS+=(config_include)

check_file_length() { # a file and no train.steps or train.epochs: one pass over it, said; more than 20
    # passes are warned of, with the count; steps or epochs given: as given
    local ex
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    sed -e 's/shuffle = true;/shuffle = false;/' -e "s|\"movies|\"$ex/movies|g" -e 's/epochs = 10;//' \
        -e 's/keep_best = true;//' -e 's/early_stop = [^;]*; [^;]*; };//' "$ex/movies.cfg" >"$TMP/len.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/len.cfg" --metrics none --plot none || return 1
    grep -q "length: 67 steps, 1.01 passes over the training file's 8500 samples (neither train.steps nor train.epochs given: train.epochs = 1)" \
        "$TMP/out" || { grep -i 'batch\|length' "$TMP/out"; return 1; }
    tail -1 "$TMP/out" | grep -q '"steps":67,.*"epochs":1.0,' || { tail -1 "$TMP/out" | cut -c1-300; return 1; }
    ! grep -q "warning" "$TMP/err" || { cat "$TMP/err"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/len.cfg" --steps 1400 --eval-every 0 --metrics none --plot none || return 1
    grep -q "ember train: warning: 1400 steps are 21.1 passes over the training file's 8500 samples (more than 20)" \
        "$TMP/err" || { cat "$TMP/err"; return 1; }
    ! grep -q "length:" "$TMP/out" || return 1
    expect_status 0 "$EMBER" train --config "$TMP/len.cfg" --steps 1320 --eval-every 0 --metrics none --plot none || return 1
    ! grep -q "warning" "$TMP/err" || { echo "19.9 passes warned of"; return 1; }
    # the default length without eval_every: one evaluation, at the end of its epoch; eval_every given: as given
    sed 's/micro_batch = 128; eval_every = 33;/micro_batch = 128;/' "$TMP/len.cfg" >"$TMP/len1.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/len1.cfg" --metrics none --plot none || return 1
    [ "$(grep -c '^eval at step' "$TMP/out")" = 1 ] && grep -q '^eval at step 67:' "$TMP/out" && grep -q '^final: AUC' "$TMP/out" || { grep '^eval\|^final' "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" train --config "$TMP/len1.cfg" --eval-every 50 --metrics none --plot none || return 1
    grep -q '^eval at step 50:' "$TMP/out" || { grep '^eval' "$TMP/out"; return 1; }
}
CHECKS+=(file_length)

check_text_bom() { # a UTF-8 byte-order mark before the text (Excel, pandas' encoding="utf-8-sig") is skipped:
    # with a header and without, plain, gzip and zstd, the samples are those of the file without it
    local ex f
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    expect_status 0 "$EMBER" inspect --samples all "$ex/movies.csv" --config "$ex/movies.cfg" || return 1
    cp "$TMP/out" "$TMP/want_csv"
    printf '\xef\xbb\xbf' | cat - "$ex/movies.csv" >"$TMP/bom.csv"
    ctr_tsv_lines >"$TMP/nobom.tsv"
    expect_status 0 "$EMBER" inspect --samples all "$TMP/nobom.tsv" || return 1
    cp "$TMP/out" "$TMP/want_tsv"
    printf '\xef\xbb\xbf' | cat - "$TMP/nobom.tsv" >"$TMP/bom.tsv"
    local z=zst
    command -v zstd >/dev/null || { echo "no zstd program: zstd input not checked"; z=gz; }
    for f in bom.csv bom.tsv; do
        gzip -c "$TMP/$f" >"$TMP/$f.gz"
        [ $z = gz ] || zstd -q -c "$TMP/$f" >"$TMP/$f.zst" || return 1
    done
    for f in bom.csv bom.csv.gz bom.csv.$z; do
        expect_status 0 "$EMBER" inspect --samples all "$TMP/$f" --config "$ex/movies.cfg" || return 1
        cmp -s "$TMP/out" "$TMP/want_csv" || { echo "$f: other samples than without the mark"; return 1; }
    done
    for f in bom.tsv bom.tsv.gz bom.tsv.$z; do
        expect_status 0 "$EMBER" inspect --samples all "$TMP/$f" || return 1
        cmp -s "$TMP/out" "$TMP/want_tsv" || { echo "$f: other samples than without the mark"; return 1; }
    done
}
CHECKS+=(text_bom)

check_compressed_errors() { # a damaged gzip or zstd file names the file and the line being read, as plain text does
    local n
    python3 "$(dirname "${BASH_SOURCE[0]}")/../bench/criteo_like.py" "$TMP/z.tsv" 100 7 1 >/dev/null || return 1
    gzip -c "$TMP/z.tsv" >"$TMP/z.tsv.gz"
    n=$(stat -c %s "$TMP/z.tsv.gz")
    head -c $((n - 8)) "$TMP/z.tsv.gz" >"$TMP/cut.tsv.gz" # its CRC and size cut off: the 100 lines are whole
    expect_status 1 "$EMBER" train --train-file "$TMP/cut.tsv.gz" --steps 1 --micro-batch 8 --metrics none --plot none || return 1
    grep -qx "ember train: $TMP/cut.tsv.gz:101: gzip: the file ends inside a member (truncated)" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    if command -v zstd >/dev/null; then
        zstd -q -c "$TMP/z.tsv" >"$TMP/z.tsv.zst" || return 1 # with a content checksum, the zstd program's default
        n=$(stat -c %s "$TMP/z.tsv.zst")
        head -c $((n - 4)) "$TMP/z.tsv.zst" >"$TMP/cut.tsv.zst"
        expect_status 1 "$EMBER" convert "$TMP/cut.tsv.zst" "$TMP/cut.bin" || return 1
        grep -qx "ember convert: $TMP/cut.tsv.zst:101: zstd: the file ends inside a frame (truncated)" "$TMP/err" ||
            { cat "$TMP/err"; return 1; }
    else
        echo "no zstd program: zstd input not checked"
    fi
    # a flipped byte: the line where the reader found it
    python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[len(d) // 2] ^= 0x55; open(sys.argv[2], "wb").write(d)' \
        "$TMP/z.tsv.gz" "$TMP/flip.tsv.gz"
    expect_status 1 "$EMBER" inspect --samples all "$TMP/flip.tsv.gz" || return 1
    grep -qx "ember inspect: $TMP/flip.tsv.gz:[0-9]*: gzip: .* (found while reading this line)" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
}
CHECKS+=(compressed_errors)

check_train_plans() { # ember train places "auto" tables as ember plan does for the same run
    # (world, global batch, measured ids), text or binary; a saved plan is applied, or refused
    # for another world
    local ex
    ex="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/data" && pwd)"
    expect_status 0 "$EMBER" convert --config "$ex/movies.cfg" "$ex/movies.csv" "$TMP/pm.bin" || return 1
    { awk '/^train = \{/ { exit } { print }' "$ex/movies.cfg"; echo 'train = { epochs = 1; micro_batch = 128; };'; } \
        >"$TMP/pm.cfg" # the example without its early stopping and best checkpoint
    sed -i "s|\"movies|\"$ex/movies|g" "$TMP/pm.cfg"
    expect_status 0 "$EMBER" plan "$TMP/pm.cfg" --data "$TMP/pm.bin" --world 2 --json || return 1
    cp "$TMP/out" "$TMP/plan_bin.json"
    expect_status 0 "$EMBER" plan "$TMP/pm.cfg" --data "$ex/movies.csv" --world 2 --json || return 1
    python3 - "$TMP/plan_bin.json" "$TMP/out" <<'PY' || return 1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["global_batch"] == 256, a["global_batch"]   # the trainer's: 128 x 1 x 2
assert a["tables"] == b["tables"], "plans from the binary file and from the CSV differ"
PY
    expect_status 0 mpi2 train --config "$TMP/pm.cfg" --train-file "$TMP/pm.bin" --steps 2 --metrics none --plot none || return 1
    want=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['tables']; print(', '.join('%s %s' % (x['name'], x['placement'] + ('/' + x['exchange'] if 'exchange' in x else '')) for x in t))" "$TMP/plan_bin.json")
    grep -qE "placement: planned on [0-9]+ batch(es)? of $TMP/pm.bin, global batch 256: $want" "$TMP/out" || { echo "want: $want"; grep placement "$TMP/out"; return 1; }
    # a saved plan: its placements are used; another world is refused
    python3 - "$TMP/plan_bin.json" "$TMP/saved.json" <<'PY' || return 1
import json, sys
p = json.load(open(sys.argv[1]))
for t in p["tables"]:
    t["placement"], t["exchange"] = "column", "rows"
json.dump(p, open(sys.argv[2], "w"))
PY
    sed "s|^train = { epochs = 1;|train = { plan = \"$TMP/saved.json\"; epochs = 1;|" "$TMP/pm.cfg" >"$TMP/ps.cfg"
    expect_status 0 mpi2 train --config "$TMP/ps.cfg" --train-file "$TMP/pm.bin" --steps 2 --metrics none --plot none || return 1
    grep -q "placement: from $TMP/saved.json: users column/rows, small column/rows, genres column/rows" "$TMP/out" || { grep placement "$TMP/out"; return 1; }
    # synthetic data: the law's plan, with a table the planner replicates (not the row default)
    printf '%s\n' 'tables = ( { name = "big"; rows = 100000; dim = 16; optimizer = "sgd"; },' \
        '  { name = "small"; rows = 500; dim = 16; optimizer = "sgd"; dist = "uniform"; } );' \
        'features = ( { name = "fb"; table = "big"; pooling = 4; }, { name = "fs"; table = "small"; pooling = 20; } );' \
        'train = { steps = 2; micro_batch = 256; };' >"$TMP/syn.cfg"
    expect_status 0 "$EMBER" plan "$TMP/syn.cfg" --world 2 --json || return 1
    want=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['tables']; print(', '.join('%s %s' % (x['name'], x['placement'] + ('/' + x['exchange'] if 'exchange' in x else '')) for x in t))" "$TMP/out")
    case "$want" in *replicated*) ;; *) echo "the plan replicates nothing: $want"; return 1 ;; esac
    expect_status 0 mpi2 train --config "$TMP/syn.cfg" --metrics none --plot none || return 1
    grep -q "placement: planned on the synthetic law, global batch 512: $want" "$TMP/out" || { echo "want: $want"; grep placement "$TMP/out"; return 1; }
    expect_status 1 "$EMBER" train --config "$TMP/ps.cfg" --train-file "$TMP/pm.bin" --steps 2 --metrics none --plot none || return 1
    grep -q "saved.json: train.plan: a plan for 2 ranks, this run has 1" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(train_plans)

run_checks cli
