#!/usr/bin/env bash
# resume.sh: `ember train` checkpoints and --resume, and `ember inspect`, run
# by CTest as
#   bash tests/resume.sh path/to/ember
# The contract (docs/training.md, "Checkpoints and resume"): 2N steps straight
# and N steps, then --resume to 2N, end in the same state bit for bit: every
# table's rows and optimizer state, the dense weights and the dense
# optimizer's state, the step, the data position.  Compared through
# `ember inspect --json`, whose digests (XXH64 over canonical rows and state,
# in row order; XXH64 of each blob) do not depend on the files' layout.
# Each check is a function; its output is shown only when it fails (as
# tests/cli.sh).
set -u

source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # EMBER, TMP, expect_status, mpi2, compare_ckpt, run_checks
# small and quick: no evaluation during the run, a small one at the end
QUICK=(--micro-batch 128 --eval-every 0 --eval-samples 512 --threads 1 --plot none --metrics none)

solo() { "$EMBER" "$@"; }

# $1: runner (solo or mpi2); $2: name; rest: train options.  2N = 16 steps
# straight, vs 8 then --resume to 16 (a checkpoint every 4, keep 2).
straight_vs_resumed() {
    local run=$1 name=$2
    shift 2
    local A="$TMP/$name.straight" B="$TMP/$name.resumed"
    expect_status 0 $run train "${QUICK[@]}" "$@" --steps 16 --checkpoint-dir "$A" || return 1
    grep -q "checkpoint: step 16 -> $A/step-000000000016" "$TMP/out" || { echo "no checkpoint line"; return 1; }
    expect_status 0 $run train "${QUICK[@]}" "$@" --steps 8 --checkpoint-dir "$B" \
        --checkpoint-every 4 --keep 2 || return 1
    [ "$(ls "$B")" = "$(printf 'step-000000000004\nstep-000000000008')" ] || { ls "$B"; return 1; }
    compare_ckpt "$A" "$B" differ || return 1 # a test that can fail: 8 steps are not 16
    expect_status 0 $run train "${QUICK[@]}" "$@" --steps 16 --checkpoint-dir "$B" \
        --checkpoint-every 4 --keep 2 --resume || return 1
    grep -q "resume: from $B/step-000000000008 (step 8" "$TMP/out" || { echo "no resume line"; return 1; }
    grep -q '"steps":16' "$TMP/out" || { echo "want 16 steps in the summary"; return 1; }
    [ "$(ls "$B")" = "$(printf 'step-000000000012\nstep-000000000016')" ] || { ls "$B"; return 1; }
    compare_ckpt "$A" "$B" same
}

# --------------------------------------------------------- exact resume

check_resume_synthetic() {
    straight_vs_resumed solo synth || return 1
    # SGD on the dense model (no optimizer state blob) and accumulation
    printf 'name = "sgd";\ntrain = { optimizer = "sgd"; };\n' >"$TMP/sgd.cfg"
    straight_vs_resumed solo synth-sgd --config "$TMP/sgd.cfg" --accumulate 2
}
CHECKS+=(resume_synthetic)

# The whole state is bit-identical whatever --threads is: the embedding
# kernels are by design, and the dense GEMMs run on one OpenBLAS thread
# (--blas-threads 1, the default; docs/training.md).
check_threads_identical() {
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 12 --checkpoint-dir "$TMP/t1.ck" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --threads 2 --steps 12 --checkpoint-dir "$TMP/t2.ck" || return 1
    compare_ckpt "$TMP/t1.ck" "$TMP/t2.ck" same-state || return 1
    # 600 samples: the dense model's three chunks (two of 256, one of 88) split over the threads
    expect_status 0 "$EMBER" train "${QUICK[@]}" --micro-batch 600 --steps 6 --checkpoint-dir "$TMP/t1c.ck" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --micro-batch 600 --threads 2 --steps 6 \
        --checkpoint-dir "$TMP/t2c.ck" || return 1
    compare_ckpt "$TMP/t1c.ck" "$TMP/t2c.ck" same-state
}
CHECKS+=(threads_identical)

# With as many threads as cores there is no spare core for the reader
# thread: trials alternate the step's team reading the batches with a
# reader thread and a thread fewer on the step (src/train/arrange.c), from
# step 9 on, 32 steps of each.  The state stays the one of --threads 1 bit
# for bit, on the synthetic task and on a shuffled file read over several
# epochs, straight and resumed halfway (the trials start over there).
check_threads_switching() {
    local cores
    cores=$(nproc)
    [ "$cores" -ge 2 ] || { echo "skipped: one core"; return 0; }
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 90 --checkpoint-dir "$TMP/sw1.ck" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --threads "$cores" --steps 90 --checkpoint-dir "$TMP/swn.ck" || return 1
    python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert s["reader_thread_steps"] >= 32, s["reader_thread_steps"]' "$TMP/out" ||
        return 1
    compare_ckpt "$TMP/sw1.ck" "$TMP/swn.ck" same-state || return 1
    for way in team thread; do # each way throughout: no trials
        expect_status 0 "$EMBER" train "${QUICK[@]}" --threads "$cores" --reader $way --steps 30 \
            --checkpoint-dir "$TMP/sw-$way.ck" || return 1
        python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert s["reader_thread_steps"] == (30 if sys.argv[2] == "thread" else 0), s["reader_thread_steps"]' "$TMP/out" $way ||
            return 1
    done
    compare_ckpt "$TMP/sw-team.ck" "$TMP/sw-thread.ck" same-state || return 1
    expect_status 0 "$EMBER" gen --task 10000 "$TMP/sw.bin" || return 1 # three blocks, an epoch of 79 steps
    printf 'train = { };\ndata = { shuffle = true; };\n' >"$TMP/sw.cfg"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/sw.cfg" --train-file "$TMP/sw.bin" --steps 90 --checkpoint-dir "$TMP/swf1.ck" ||
        return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/sw.cfg" --train-file "$TMP/sw.bin" --threads "$cores" --steps 45 \
        --checkpoint-dir "$TMP/swfn.ck" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/sw.cfg" --train-file "$TMP/sw.bin" --threads "$cores" --steps 90 \
        --checkpoint-dir "$TMP/swfn.ck" --resume || return 1
    compare_ckpt "$TMP/swf1.ck" "$TMP/swfn.ck" same-state
}
CHECKS+=(threads_switching)

# The SSD tier (a cache of about a quarter of the rows, so rows are evicted,
# written back and read again) trains bit-identically to the memory tier,
# alone and under mpirun -np 2, with every cache policy.
check_ssd_identical() {
    mkdir -p "$TMP/ssd"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 12 --checkpoint-dir "$TMP/ssd-mem.ck" || return 1
    for pol in lru lfu lookahead; do
        printf 'train = { };\nssd = { min_bytes = 1; dir = "%s/ssd"; cache_bytes = "40K"; policy = "%s"; };\n' "$TMP" "$pol" \
            >"$TMP/ssd-$pol.cfg"
        expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/ssd-$pol.cfg" --steps 12 \
            --checkpoint-dir "$TMP/ssd-$pol.ck" || return 1
        compare_ckpt "$TMP/ssd-mem.ck" "$TMP/ssd-$pol.ck" same-state || return 1
    done
    [ -z "$(ls -A "$TMP/ssd")" ] || { echo "store files left behind: $(ls "$TMP/ssd")"; return 1; }
    have_mpirun || return 0
    expect_status 0 mpi2 train "${QUICK[@]}" --steps 12 --checkpoint-dir "$TMP/ssd-mem2.ck" || return 1
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$TMP/ssd-lookahead.cfg" --steps 12 \
        --checkpoint-dir "$TMP/ssd-mpi.ck" || return 1
    compare_ckpt "$TMP/ssd-mem2.ck" "$TMP/ssd-mpi.ck" same-state
}
CHECKS+=(ssd_identical)

# Dynamic tables (configs/dynamic.cfg: admission, LFU eviction, 20x more
# keys than rows): --resume continues bit for bit, alone and under mpirun
# -np 2, and one thread or two give the same state.
check_dynamic_resume() {
    local cfg="$(dirname "${BASH_SOURCE[0]}")/../configs/dynamic.cfg"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$cfg" --steps 16 --checkpoint-dir "$TMP/dyn-a.ck" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$cfg" --steps 8 --checkpoint-dir "$TMP/dyn-b.ck" \
        --checkpoint-every 4 || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$cfg" --steps 16 --checkpoint-dir "$TMP/dyn-b.ck" \
        --resume || return 1
    compare_ckpt "$TMP/dyn-a.ck" "$TMP/dyn-b.ck" same || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$cfg" --threads 2 --steps 16 \
        --checkpoint-dir "$TMP/dyn-t2.ck" || return 1
    compare_ckpt "$TMP/dyn-a.ck" "$TMP/dyn-t2.ck" same-state || return 1
    # ember export: one record per resident key (ember inspect's count), sorted, the documented size
    expect_status 0 "$EMBER" export "$TMP/dyn-a.ck" --table c1 --out "$TMP/c1.rows" || return 1
    "$EMBER" inspect "$TMP/dyn-a.ck" --json >"$TMP/dyn.json" || return 1
    python3 - "$TMP/c1.rows" "$TMP/dyn.json" <<'PY' || return 1
import json, struct, sys
data = open(sys.argv[1], "rb").read()
magic, version, dim, n, kind = struct.unpack_from("<QIIQI", data, 0)
table = [t for t in json.load(open(sys.argv[2]))["tables"] if t["name"] == "c1"][0]
keys = [struct.unpack_from("<q", data, 64 + i * (8 + 4 * dim))[0] for i in range(n)]
assert magic == 0x53574F5252424D45 and version == 1 and kind == 1, (hex(magic), version, kind)
assert dim == table["dim"] and n == table["dynamic"]["resident"], (dim, n, table["dynamic"])
assert len(data) == 64 + n * (8 + 4 * dim) + 8, len(data)
assert keys == sorted(keys) and len(set(keys)) == n
PY
    have_mpirun || return 0
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$cfg" --steps 16 --checkpoint-dir "$TMP/dyn-m.ck" || return 1
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$cfg" --steps 8 --checkpoint-dir "$TMP/dyn-n.ck" || return 1
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$cfg" --steps 16 --checkpoint-dir "$TMP/dyn-n.ck" \
        --resume || return 1
    compare_ckpt "$TMP/dyn-m.ck" "$TMP/dyn-n.ck" same
}
CHECKS+=(dynamic_resume)

# A small Criteo TSV (random, some bad lines) and its binary conversion.
make_ctr_files() {
    [ -f "$TMP/d.ctr" ] && return 0
    python3 - "$TMP/d.tsv" <<'PY'
import random, sys
r = random.Random(5)
with open(sys.argv[1], "w") as f:
    for i in range(1500):
        if i % 401 == 17:
            f.write("2\tbad\n")  # counted and skipped
            continue
        ints = [str(r.randint(-2, 300)) if r.random() > 0.1 else "" for _ in range(13)]
        cats = ["%08x" % r.randint(0, 60 + 40 * k) if r.random() > 0.05 else "" for k in range(26)]
        f.write("\t".join([str(int(r.random() < 0.3))] + ints + cats) + "\n")
PY
    "$EMBER" convert "$TMP/d.tsv" "$TMP/d.ctr" --rows 500 >/dev/null || return 1
    printf 'name = "tsv";\ntrain = { steps = 16; };\ndata = { source = "tsv"; train_file = "%s"; hash_rows = 500; };\n' "$TMP/d.tsv" >"$TMP/tsv.cfg"
    printf 'name = "bin";\ntrain = { steps = 16; };\ndata = { source = "binary"; train_file = "%s"; };\n' "$TMP/d.ctr" >"$TMP/bin.cfg"
}

check_resume_files() { # 16 steps of 128 over 1496 samples: the resumed half crosses an epoch
    make_ctr_files || return 1
    straight_vs_resumed solo tsv --config "$TMP/tsv.cfg" || return 1
    straight_vs_resumed solo bin --config "$TMP/bin.cfg" || return 1
    # the data position: 1496 samples are 11 batches of 128 and one of 88, so 16 steps end
    # 4 batches into the second epoch
    "$EMBER" inspect "$TMP/bin.resumed" | grep -q "next sample 512, epoch 1, share \[0, 1496)" || {
        "$EMBER" inspect "$TMP/bin.resumed" | grep data.position; return 1; }
}
CHECKS+=(resume_files)

check_resume_mpi() { # the same under mpirun -np 2, and resuming on another world size
    have_mpirun || return 0
    make_ctr_files || return 1
    straight_vs_resumed mpi2 mpi-synth || return 1
    straight_vs_resumed mpi2 mpi-bin --config "$TMP/bin.cfg" || return 1
    # 2 ranks' checkpoint resumed by one: allowed, with a note, not bit-identical
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 20 --checkpoint-dir "$TMP/mpi-synth.resumed" --resume || return 1
    grep -q "note: world 2, this run 1" "$TMP/out" || { echo "no note about the world"; return 1; }
    grep -q '"steps":20' "$TMP/out" || return 1
    "$EMBER" inspect "$TMP/mpi-synth.resumed" | grep -q "saved by 1 rank," || return 1
    # a file: rank 0 of 2 had read 512 of its 748 samples (16 batches of 128 in epoch 2), so one
    # rank starts at 1024 of 1496: 3 batches of 128 and one of 88 end the epoch
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/bin.cfg" --steps 20 \
        --checkpoint-dir "$TMP/mpi-bin.resumed" --resume || return 1
    "$EMBER" inspect "$TMP/mpi-bin.resumed" | grep -q "next sample 1496, epoch 2, share \[0, 1496)" || {
        "$EMBER" inspect "$TMP/mpi-bin.resumed" | grep data.position; return 1; }
}
CHECKS+=(resume_mpi)

# Dynamic tables on file data.  A TSV (and a held-out one) whose C1..C4 feed
# dynamic tables (whole 64-bit keys: far more keys than rows, so rows are
# evicted) and C5..C26 fixed ones, converted with --rows 0 for C1..C4
# (format version 2): training on the binary files prints the same loss and
# AUC and ends in the same state, bit for bit, as training on the TSVs;
# under mpirun -np 2 too, and --resume on the binary file is exact.  A fixed
# table on key data and a dynamic one on row numbers fail naming the feature.
make_keyed_files() {
    [ -f "$TMP/k.ctr" ] && return 0
    python3 - "$TMP/k.tsv" "$TMP/k-eval.tsv" <<'PY'
import random, sys
r = random.Random(11)
for path, n in ((sys.argv[1], 1500), (sys.argv[2], 600)):
    with open(path, "w") as f:
        for i in range(n):
            ints = [str(r.randint(-2, 300)) if r.random() > 0.1 else "" for _ in range(13)]
            cats = [("%x" % r.randint(0, 2**32 - 1) if k < 4 and r.random() < 0.5 else
                     "%x" % r.randint(0, 40 + 40 * k)) if r.random() > 0.1 else "" for k in range(26)]
            f.write("\t".join([str(int(r.random() < 0.3))] + ints + cats) + "\n")
PY
    local rows="0,0,0,0$(printf ',500%.0s' $(seq 22))" f
    for f in k k-eval; do
        "$EMBER" convert "$TMP/$f.tsv" "$TMP/$f.ctr" --rows "$rows" >"$TMP/conv.out" || return 1
        grep -q "64-bit keys (format version 2) for C1,C2,C3,C4" "$TMP/conv.out" || { cat "$TMP/conv.out"; return 1; }
    done
    "$EMBER" convert "$TMP/k.tsv" "$TMP/k-rows.ctr" --rows 500 >/dev/null || return 1
    cat >"$TMP/ktables" <<'CFG'
tables = ({ name = "k%d"; count = 4; kind = "dynamic"; capacity = 200; admit_after = 2; evict = "lfu"; dim = 8; optimizer = "adagrad"; },
  { name = "c%d"; count = 22; rows = 500; dim = 8; optimizer = "adagrad"; });
features = ({ name = "K%d"; count = 4; table = "k%d"; },
  { name = "F%d"; count = 22; table = "c%d"; });
CFG
    { cat "$TMP/ktables"; printf 'data = { source = "tsv"; train_file = "%s"; eval_file = "%s"; };\n' "$TMP/k.tsv" \
        "$TMP/k-eval.tsv"; } >"$TMP/ktsv.cfg"
    { cat "$TMP/ktables"; printf 'data = { source = "binary"; train_file = "%s"; eval_file = "%s"; };\n' "$TMP/k.ctr" \
        "$TMP/k-eval.ctr"; } >"$TMP/kbin.cfg"
    { cat "$TMP/ktables"; printf 'data = { source = "binary"; train_file = "%s"; };\n' "$TMP/k-rows.ctr"; } >"$TMP/krows.cfg"
    sed -e 's/kind = "dynamic"; capacity = 200; admit_after = 2; evict = "lfu";/rows = 300;/' "$TMP/kbin.cfg" >"$TMP/kfixed.cfg"
}

# $1: runner; $2, $3: configs; $4: name.  Same loss and AUC, same state.
same_run() { # run, config a, config b, name[, "other-source": a reads text, b its binary conversion]
    local run=$1 a=$2 b=$3 name=$4 source=${5:-} s
    for s in a b; do
        local cfg=$a
        [ $s = b ] && cfg=$b
        expect_status 0 $run train "${QUICK[@]}" --config "$cfg" --steps 16 --eval-every 8 \
            --checkpoint-dir "$TMP/$name-$s.ck" || return 1
        grep -E "^(eval at step|final:)" "$TMP/out" | sed 's/, [0-9.]* s$//' >"$TMP/$name-$s.evals"
        tail -1 "$TMP/out" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["auc"], s["logloss"], s["steps"])' \
            >>"$TMP/$name-$s.evals" || return 1
    done
    [ "$(wc -l <"$TMP/$name-a.evals")" = 4 ] || { cat "$TMP/$name-a.evals"; return 1; }
    diff "$TMP/$name-a.evals" "$TMP/$name-b.evals" || return 1
    compare_ckpt "$TMP/$name-a.ck" "$TMP/$name-b.ck" same-state "$source"
}

check_dynamic_binary() {
    make_keyed_files || return 1
    [ "$(head -c 12 "$TMP/k.ctr" | tail -c 4 | od -An -tu4 | tr -d ' ')" = 2 ] || { echo "k.ctr is not version 2"; return 1; }
    same_run solo "$TMP/ktsv.cfg" "$TMP/kbin.cfg" kfile other-source || return 1
    grep -q "eval at step 16: AUC" "$TMP/kfile-b.evals" || return 1
    straight_vs_resumed solo kbin --config "$TMP/kbin.cfg" || return 1
    # the data's ids against the tables
    expect_status 1 "$EMBER" train "${QUICK[@]}" --config "$TMP/kfixed.cfg" --steps 2 || return 1
    grep -q "kfixed.cfg:[0-9]*: feature \"K0\": table \"k0\" is fixed but the data's ids are 64-bit keys ($TMP/k.ctr: C1 has rows 0)" "$TMP/err" || { cat "$TMP/err"; return 1; }
    expect_status 1 "$EMBER" train "${QUICK[@]}" --config "$TMP/krows.cfg" --steps 2 || return 1
    grep -q "krows.cfg:[0-9]*: feature \"K0\": table \"k0\" is dynamic but the data's ids are row numbers ($TMP/k-rows.ctr: C1 has 500 rows" "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'data = { source = "binary"; train_file = "%s"; };\ntrain = { steps = 2; };\n' "$TMP/k.ctr" >"$TMP/kbuiltin.cfg"
    expect_status 1 "$EMBER" train "${QUICK[@]}" --config "$TMP/kbuiltin.cfg" || return 1
    grep -q "k.ctr: feature C1 carries 64-bit keys (rows 0): train it with a config whose table for it is dynamic" "$TMP/err" || { cat "$TMP/err"; return 1; }
    have_mpirun || return 0
    same_run mpi2 "$TMP/ktsv.cfg" "$TMP/kbin.cfg" kmpi other-source
}
CHECKS+=(dynamic_binary)

# ------------------------------------------------------------- failures

check_resume_errors() {
    local D="$TMP/err.ck"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 4 --checkpoint-dir "$D" || return 1
    # already there: nothing to do, said
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 4 --checkpoint-dir "$D" --resume || return 1
    grep -q "resume: the checkpoint is at step 4, --steps is 4: no steps to take" "$TMP/out" || return 1
    # other settings: named, with both values
    expect_status 1 "$EMBER" train "${QUICK[@]}" --micro-batch 64 --steps 8 --checkpoint-dir "$D" --resume || return 1
    grep -q "checkpoint $D/step-000000000004: micro_batch 128, this run 64" "$TMP/err" || return 1
    expect_status 1 "$EMBER" train "${QUICK[@]}" --seed 9 --steps 8 --checkpoint-dir "$D" --resume || return 1
    grep -q "step-000000000004: data_seed 0, this run 9" "$TMP/err" || { cat "$TMP/err"; return 1; }
    # a corrupt data file: named, no silent restart; inspect names it too
    local f
    f=$(ls "$D/step-000000000004" | grep -v manifest.json | head -1)
    [ -n "$f" ] || return 1
    cp -r "$D" "$TMP/bad.ck"
    python3 - "$TMP/bad.ck/step-000000000004/$f" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as fp:
    n = os.path.getsize(sys.argv[1]); fp.seek(n // 2); b = fp.read(1); fp.seek(n // 2)
    fp.write(bytes([b[0] ^ 0x10]))
PY
    expect_status 1 "$EMBER" train "${QUICK[@]}" --steps 8 --checkpoint-dir "$TMP/bad.ck" --resume || return 1
    grep -q "$f" "$TMP/err" || { echo "the message does not name $f"; return 1; }
    expect_status 1 "$EMBER" inspect "$TMP/bad.ck" || return 1
    grep -q "$f" "$TMP/err" || return 1
    # nothing to resume from: said, then from scratch
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 2 --checkpoint-dir "$TMP/empty.ck" --resume || return 1
    grep -q "resume: no checkpoint under $TMP/empty.ck: starting from step 0" "$TMP/out" || return 1
    # a folder that cannot be made, options without a folder
    : >"$TMP/plain"
    expect_status 1 "$EMBER" train "${QUICK[@]}" --steps 2 --checkpoint-dir "$TMP/plain/ck" || return 1
    grep -q "$TMP/plain/ck: cannot create the checkpoint folder" "$TMP/err" || return 1
    expect_status 2 "$EMBER" train --resume || return 1
    grep -q -- "--resume needs --checkpoint-dir" "$TMP/err" || return 1
    expect_status 2 "$EMBER" train --checkpoint-every 5 || return 1
    printf 'train = { checkpoint_dir = "%s"; checkpoint_every = 2; checkpoint_keep = 1; steps = 4;\n  micro_batch = 64; eval_samples = 256; metrics = ""; plot = ""; };\n' "$TMP/cfg.ck" >"$TMP/ck.cfg"
    expect_status 0 "$EMBER" train --config "$TMP/ck.cfg" --threads 1 || return 1
    [ "$(ls "$TMP/cfg.ck")" = step-000000000004 ] || { ls "$TMP/cfg.ck"; return 1; }
    # another embedding learning rate: ember_load would take it, the settings check names it
    printf 'model = { emb_optimizer = { kind = "adagrad"; lr = 0.05; }; };\ntrain = { checkpoint_dir = "%s"; steps = 6;\n  micro_batch = 64; eval_samples = 256; metrics = ""; plot = ""; };\n' "$TMP/cfg.ck" >"$TMP/lr.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/lr.cfg" --threads 1 --resume || return 1
    grep -q "step-000000000004: table.emb_[A-Za-z0-9_]* optimizer adagrad lr 0.1,.*this run optimizer adagrad lr 0.05," "$TMP/err" || { cat "$TMP/err"; return 1; }
    printf 'train = { checkpoint_every = -1; };\n' >"$TMP/bad.cfg"
    expect_status 1 "$EMBER" train --config "$TMP/bad.cfg" || return 1
    grep -q "bad.cfg:1: train.checkpoint_every" "$TMP/err" || return 1
}
CHECKS+=(resume_errors)

check_resume_metrics() { # the metrics file continues; the summary's time split has checkpoints
    local D="$TMP/m.ck" M="$TMP/m.jsonl"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 6 --checkpoint-dir "$D" --metrics "$M" || return 1
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 12 --checkpoint-dir "$D" --metrics "$M" --resume --json || return 1
    python3 - "$M" "$TMP/out" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r["event"] for r in recs]
assert ev.count("start") == 2 and ev.count("summary") == 2 and ev.count("resume") == 1, ev
steps = [r["step"] for r in recs if r["event"] == "train"]
assert steps == sorted(steps) and steps[-1] == 12 and 6 in steps, steps
res = [r for r in recs if r["event"] == "resume"][0]
assert res["step"] == 6 and res["samples"] == 6 * 128, res
ck = [r for r in recs if r["event"] == "checkpoint"]
assert [r["step"] for r in ck] == [6, 12] and all(r["mb"] > 0 for r in ck), ck
out = [json.loads(l) for l in open(sys.argv[2])]   # --json: JSON lines only
s = out[-1]
assert s["event"] == "summary" and s["steps"] == 12 and s["samples"] == 12 * 128, s
assert s["time_s"]["checkpoint"] > 0, s["time_s"]
PY
}
CHECKS+=(resume_metrics)

# --------------------------------------------------------- ember inspect

check_inspect() {
    local D="$TMP/insp.ck"
    expect_status 0 "$EMBER" train "${QUICK[@]}" --steps 4 --checkpoint-every 2 --checkpoint-dir "$D" || return 1
    expect_status 0 "$EMBER" inspect "$D" || return 1
    grep -q "checkpoint $D/step-000000000004: step 4, saved by 1 rank, ember" "$TMP/out" || return 1
    grep -q "files (checksums verified):" "$TMP/out" || return 1
    grep -Eq "^  emb_C1: 20000 x 16 fp32, adagrad \(step 4\), row, init uniform 0.05" "$TMP/out" || return 1
    grep -q "rows never touched" "$TMP/out" || return 1
    grep -q "train.state .*trainer step 4, 512 samples" "$TMP/out" || return 1
    expect_status 0 "$EMBER" inspect "$D" --step 2 --json || return 1
    python3 - "$TMP/out" <<'PY'
import json, sys
c = json.loads(open(sys.argv[1]).read())
assert c["step"] == 2 and c["world"] == 1, c
t = {x["name"]: x for x in c["tables"]}
assert len(t) == 8, t.keys()
big = t["emb_C1"]                       # 20,000 Zipf rows: most never seen in 256 samples
assert big["rows"] == 20000 and big["dim"] == 16 and big["optimizer"] == "adagrad" and big["precision"] == "fp32", big
assert 15000 < big["untouched_rows"] < 20000, big
assert big["state_norm"] > 0 and big["max_abs"] <= 0.2501, big  # init 0.05, 2 Adagrad steps of at most lr 0.1
for x in c["tables"]:
    assert x["untouched_rows"] < x["rows"], x   # every table moved
b = {x["name"]: x for x in c["blobs"]}
assert b["train.state"]["content"]["step"] == 2, b
assert b["dense.params"]["content"]["floats"] == b["train.state"]["content"]["dense_params"], b
PY
    [ $? = 0 ] || return 1
    # a step folder works as well; errors
    expect_status 0 "$EMBER" inspect "$D/step-000000000002" --json || return 1
    expect_status 1 "$EMBER" inspect "$D" --step 3 || return 1
    grep -q "step-000000000003" "$TMP/err" || return 1
    expect_status 1 "$EMBER" inspect "$TMP/nothing" || return 1
    expect_status 2 "$EMBER" inspect || return 1
    expect_status 2 "$EMBER" inspect "$D" --step x || return 1
    expect_status 0 "$EMBER" inspect --help || return 1
}
CHECKS+=(inspect)

run_checks resume
