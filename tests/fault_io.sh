#!/usr/bin/env bash
# fault_io.sh: `ember train` with its tables on the SSD tier, under the fault shim
# (tests/fault/fault_shim.c, preloaded), run by CTest as
#   bash tests/fault_io.sh path/to/ember path/to/libember_fault_shim.so
# Real system calls fail (ENOSPC, EIO, a short write) in the store's write-backs during the
# steps, in the store's flush at a save, and in every write, fsync and close of the
# checkpoint's own files and folders (docs/RELIABILITY.md, "The SSD tier").  Each faulted run
# must exit 1 with a message that names the file and the system's reason, leave no store file
# and no step-* folder of a failed save; its newest checkpoint must be the last one it printed
# and verify (`ember inspect`); resumed without the shim, the run must end in the same state,
# bit for bit, as one that never met a fault (compare_ckpt: every table's, optimizer state's
# and blob's digest).  A fault that the shim never injected fails the check.
set -u

SHIM=${2:?usage: bash $0 path/to/ember path/to/libember_fault_shim.so}
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # EMBER, TMP, expect_status, mpi2, compare_ckpt, run_checks
[ -f "$SHIM" ] || { echo "no shim at $SHIM"; exit 1; }
QUICK=(--micro-batch 128 --eval-every 0 --eval-samples 512 --threads 1 --plot none --metrics none)
RUN=(--steps 12 --checkpoint-every 4) # checkpoints at 4, 8, 12
# a sanitizer build: the shim is preloaded before the sanitizer's runtime (it wraps no allocation)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
SHIM=$(realpath "$SHIM") # LD_PRELOAD takes a path or a library name
# $1: name; $2: store folder; $3: cache_bytes; $4: policy.  Writes $TMP/$1.cfg.  36K per
# table (288K for the 8 stacked tables: 152K of index for their 38800 rows, then about 800
# rows) is barely more than one step's rows,
# so from the sixth step on every step evicts dirty rows and writes them back.
ssd_cfg() {
    mkdir -p "$2"
    printf 'train = { };\nssd = { min_bytes = 1; dir = "%s"; cache_bytes = "%s"; policy = "%s"; io_threads = 4; };\n' \
        "$2" "$3" "$4" >"$TMP/$1.cfg"
}

# $1: config name.  The run without faults, once: $TMP/$1.straight.
straight() {
    [ -d "$TMP/$1.straight" ] && return 0
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/$1.cfg" "${RUN[@]}" \
        --checkpoint-dir "$TMP/$1.straight" || return 1
}

# $1: log; then VAR=VALUE settings of the shim; then a command (or a function), run with the
# shim preloaded.  EMBER_FAULT_NO_TMPFILE is 1 unless given: ember's outputs then take their
# NAME.tmp way (a file system without O_TMPFILE), whose names the save cases match and arm on;
# unnamed outputs show in /proc as "#inode (deleted)" whatever their name (check_save_unnamed).
shimmed() {
    local log=$1
    shift
    : >"$log"
    (
        export EMBER_FAULT_LOG="$log" EMBER_FAULT_NO_TMPFILE=1
        while [ $# -gt 0 ] && [[ $1 == EMBER_FAULT_* ]]; do
            export "$1"
            shift
        done
        export LD_PRELOAD="$SHIM${LD_PRELOAD:+:$LD_PRELOAD}"
        "$@"
    )
}

# $1: run name; $2: config name; $3: store folder; $4: the expected message (an ERE for the whole
# line of stderr); then the shim's settings.  The faulted run, its leftovers, the newest
# checkpoint, and the resume without the shim against the straight run.
faulted() {
    local name=$1 cfg=$2 store=$3 want=$4
    shift 4
    local D="$TMP/$name.ck" L="$TMP/$name.log"
    straight "$cfg" || return 1
    rm -rf "$D"
    expect_status 1 shimmed "$L" "$@" timeout -k 5 60 "$EMBER" train "${QUICK[@]}" --config "$TMP/$cfg.cfg" "${RUN[@]}" \
        --checkpoint-dir "$D" || { cat "$L" | head -5; return 1; }
    grep -q "^ember-fault: injected" "$L" || { echo "$name: the shim injected no fault"; cat "$L"; return 1; }
    grep -Eq "^$want\$" "$TMP/err" || { echo "$name: want the line /$want/, got:"; cat "$TMP/err"; return 1; }
    echo "$name: $(cat "$TMP/err")"
    echo "$name: $(grep -m1 "^ember-fault: injected" "$L")"
    # the newest checkpoint is the last one the run printed, it verifies, and nothing newer is there
    local last
    last=$(grep -o "^checkpoint: step [0-9]*" "$TMP/out" | tail -1 | awk '{print $3}')
    [ -n "$last" ] || { echo "$name: no checkpoint before the fault"; return 1; }
    local want_dir
    want_dir=$(printf 'step-%012d' "$last")
    [ "$(ls "$D" | grep '^step-' | tail -1)" = "$want_dir" ] || { echo "$name: want $want_dir newest:"; ls -a "$D"; return 1; }
    [ -z "$(ls -A "$store")" ] || { echo "$name: store files left: $(ls -A "$store")"; return 1; }
    expect_status 0 "$EMBER" inspect "$D" || return 1
    grep -q "checkpoint $D/$want_dir: step $last, saved by 1 rank" "$TMP/out" || { head -3 "$TMP/out"; return 1; }
    grep -q "files (checksums verified):" "$TMP/out" || return 1
    # resumed without the shim: the straight run's state, bit for bit; the next save cleans up
    expect_status 0 "$EMBER" train "${QUICK[@]}" --config "$TMP/$cfg.cfg" "${RUN[@]}" --checkpoint-dir "$D" \
        --resume || return 1
    grep -q "resume: from $D/$want_dir (step $last" "$TMP/out" || { echo "$name: no resume line"; grep resume "$TMP/out"; return 1; }
    [ -z "$(ls -A "$D" | grep -E '^\.(tmp|trash)-')" ] || { echo "$name: leftovers after the resume:"; ls -A "$D"; return 1; }
    compare_ckpt "$TMP/$cfg.straight" "$D" same
}

# ------------------------------------------------------------- the shim itself

# Plain writes from Python (os.write, os.pwrite, os.writev, os.fsync): only the chosen file,
# the chosen calls, after N, for M; a short write; arming; a suffix; bad settings refused.
check_shim() {
    cat >"$TMP/shim.py" <<'PY'
import errno, os, sys
d = sys.argv[1]
hit = os.open(os.path.join(d, "hit.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
other = os.open(os.path.join(d, "other.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
def do(f):
    try:
        r = f()
        return "ok" if r is None else str(r)
    except OSError as e:
        return errno.errorcode[e.errno]
out = []
for i in range(4):
    for fd, tag in ((hit, "h"), (other, "o")):
        out.append(tag + ":" + do(lambda: os.pwrite(fd, b"x" * 100, 0) if i % 2 else os.write(fd, b"y" * 100)))
out.append("sync:" + do(lambda: os.fsync(hit)))
out.append("v:" + do(lambda: os.writev(hit, [b"ab", b"cd"])))
print(" ".join(out))
PY
    local L="$TMP/shim.log"
    s() { shimmed "$L" "$@" python3 "$TMP/shim.py" "$TMP"; }
    [ "$(s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_AFTER=1 EMBER_FAULT_COUNT=2 EMBER_FAULT_ERRNO=EIO)" = \
      "h:100 o:100 h:EIO o:100 h:EIO o:100 h:100 o:100 sync:ok v:4" ] || { s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_AFTER=1 EMBER_FAULT_COUNT=2 EMBER_FAULT_ERRNO=EIO; return 1; }
    [ "$(grep -c "^ember-fault: injected EIO into" "$L")" = 2 ] || { cat "$L"; return 1; }
    grep -q "^ember-fault: injected EIO into pwrite(fd [0-9]* $(realpath "$TMP")/hit.dat, 100 bytes at 0) (failure 1, matching call 1)$" "$L" || { cat "$L"; return 1; }
    grep -q "^ember-fault: pid [0-9]*: 5 matching calls, 2 failed$" "$L" || { cat "$L"; return 1; }
    [ "$(s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_CALLS=fsync,writev)" = \
      "h:100 o:100 h:100 o:100 h:100 o:100 h:100 o:100 sync:ENOSPC v:ENOSPC" ] || return 1
    [ "$(s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_SHORT=1 EMBER_FAULT_AFTER=2)" = \
      "h:100 o:100 h:100 o:100 h:50 o:100 h:ENOSPC o:100 sync:ok v:ENOSPC" ] || return 1
    grep -q "injected a short write (50 of 100 bytes) into write(" "$L" || { cat "$L"; return 1; }
    [ "$(s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_ARM_PATH=other.dat EMBER_FAULT_ARM_AFTER=3)" = \
      "h:100 o:100 h:100 o:100 h:100 o:100 h:ENOSPC o:100 sync:ok v:ENOSPC" ] || return 1
    grep -q "^ember-fault: armed by write(fd [0-9]* .*/other.dat) (arming call 3)$" "$L" || { cat "$L"; return 1; }
    [ "$(s EMBER_FAULT_PATH=hit.dat$ EMBER_FAULT_CALLS=all)" = \
      "h:ENOSPC o:100 h:ENOSPC o:100 h:ENOSPC o:100 h:ENOSPC o:100 sync:ENOSPC v:ENOSPC" ] || return 1
    [ "$(s EMBER_FAULT_PATH=hit.da$)" = "h:100 o:100 h:100 o:100 h:100 o:100 h:100 o:100 sync:ok v:4" ] || return 1
    [ ! -s "$L" ] || { echo "a shim that matched nothing logged:"; cat "$L"; return 1; }
    s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_CALLS=bogus >/dev/null
    [ $? = 97 ] && grep -q 'EMBER_FAULT_CALLS: unknown call "bogus"' "$L" || { cat "$L"; return 1; }
    s EMBER_FAULT_PATH=hit.dat EMBER_FAULT_ERRNO=ENOPE >/dev/null
    [ $? = 97 ] && grep -q 'EMBER_FAULT_ERRNO: "ENOPE"' "$L" || { cat "$L"; return 1; }
}
CHECKS+=(shim)

# ------------------------------------------------------------- write-back during the steps

# After the first checkpoint is complete (armed by its manifest's fsync), every write to the
# store file fails: the store's writer keeps the segment and retries it at the next step, which
# fails, naming the file (or the next save does, when the writer thread's failure comes after
# the last step before it).  One failed write alone is retried with success: the run ends where
# the straight run does.
check_writeback() {
    local arm=(EMBER_FAULT_ARM_PATH=manifest.json EMBER_FAULT_ARM_CALLS=fsync)
    local S="$TMP/store-lru" err
    ssd_cfg lru "$S" 36K lru || return 1
    err="ember train: (checkpoint at )?step [0-9]+: table 'emb_C1' \(stacked with 7 more\): write-back of rows to the store file $S/emb_C1.rank0.ember-store failed"
    faulted wb-enospc lru "$S" "$err: No space left on device \(nothing was lost: the rows stay in memory until a retry succeeds\)" \
        EMBER_FAULT_PATH=.ember-store "${arm[@]}" || return 1
    straight lru || return 1
    local L="$TMP/wb-once.log" D="$TMP/wb-once.ck"
    expect_status 0 shimmed "$L" EMBER_FAULT_PATH=.ember-store EMBER_FAULT_ERRNO=EIO EMBER_FAULT_COUNT=1 "${arm[@]}" \
        timeout -k 5 60 "$EMBER" train "${QUICK[@]}" --config "$TMP/lru.cfg" "${RUN[@]}" --checkpoint-dir "$D" || return 1
    grep -q "^ember-fault: injected EIO into pwrite(" "$L" || { cat "$L"; return 1; }
    compare_ckpt "$TMP/lru.straight" "$D" same || return 1
    rm -rf "$D"
    # the default policy (lookahead: the background batches write back too)
    S="$TMP/store-la"
    ssd_cfg la "$S" 36K lookahead || return 1
    err="ember train: (checkpoint at )?step [0-9]+: table 'emb_C1' \(stacked with 7 more\): write-back of rows to the store file $S/emb_C1.rank0.ember-store failed"
    faulted wb-la-eio la "$S" "$err: Input/output error \(nothing was lost: the rows stay in memory until a retry succeeds\)" \
        EMBER_FAULT_PATH=.ember-store EMBER_FAULT_ERRNO=EIO "${arm[@]}" || return 1
}
CHECKS+=(writeback)

# A short write alone is no error: the writer goes on with the rest, the run succeeds and ends
# where the straight run does (the checkpoint's data file: 4 MiB writes; test_fault_io makes
# short writes of the store's segments).
check_short_ok() {
    ssd_cfg lru "$TMP/store-lru" 36K lru || return 1
    straight lru || return 1
    local L="$TMP/short.log" D="$TMP/short.ck"
    expect_status 0 shimmed "$L" EMBER_FAULT_PATH=.bin.tmp EMBER_FAULT_SHORT=1 EMBER_FAULT_COUNT=1 \
        timeout -k 5 60 "$EMBER" train "${QUICK[@]}" --config "$TMP/lru.cfg" "${RUN[@]}" --checkpoint-dir "$D" || return 1
    grep -q "^ember-fault: injected a short write (2097152 of 4194304 bytes) into write(" "$L" || { cat "$L"; return 1; }
    compare_ckpt "$TMP/lru.straight" "$D" same
}
CHECKS+=(short_ok)

# Interrupted writes (EINTR) are written again: the run succeeds and ends where the straight
# run does.
check_eintr() {
    ssd_cfg lru "$TMP/store-lru" 36K lru || return 1
    straight lru || return 1
    local L="$TMP/eintr.log" D="$TMP/eintr.ck"
    expect_status 0 shimmed "$L" EMBER_FAULT_PATH=.ember-store EMBER_FAULT_AFTER=3 EMBER_FAULT_COUNT=5 \
        EMBER_FAULT_ERRNO=EINTR timeout -k 5 60 "$EMBER" train "${QUICK[@]}" --config "$TMP/lru.cfg" "${RUN[@]}" \
        --checkpoint-dir "$D" || return 1
    [ "$(grep -c "^ember-fault: injected EINTR into pwrite(" "$L")" = 5 ] || { cat "$L"; return 1; }
    compare_ckpt "$TMP/lru.straight" "$D" same || return 1
    rm -rf "$D"
    expect_status 0 shimmed "$L" EMBER_FAULT_PATH=/eintr.ck/ EMBER_FAULT_CALLS=write EMBER_FAULT_COUNT=5 \
        EMBER_FAULT_ERRNO=EINTR timeout -k 5 60 "$EMBER" train "${QUICK[@]}" --config "$TMP/lru.cfg" "${RUN[@]}" \
        --checkpoint-dir "$D" || return 1
    [ "$(grep -c "^ember-fault: injected EINTR into write(" "$L")" = 5 ] || { cat "$L"; return 1; }
    compare_ckpt "$TMP/lru.straight" "$D" same
}
CHECKS+=(eintr)

# The store file's creation: its marker block cannot be written.  The run stops before its first
# step, naming the file; no store file, no checkpoint folder is left.  (Nothing else is written
# at creation: the space is reserved, and segments are written as rows leave the cache.)
check_create() {
    local S="$TMP/store-lru" D="$TMP/create.ck"
    ssd_cfg lru "$S" 36K lru || return 1
    expect_status 1 shimmed "$TMP/create.log" EMBER_FAULT_PATH=.ember-store timeout -k 5 60 "$EMBER" train \
        "${QUICK[@]}" --config "$TMP/lru.cfg" "${RUN[@]}" --checkpoint-dir "$D" || return 1
    grep -q "^ember-fault: injected ENOSPC into pwrite" "$TMP/create.log" || { cat "$TMP/create.log"; return 1; }
    grep -Eq "^ember train: table 'emb_C1' \(stacked with 7 more\): cannot write the store file $S/emb_C1.rank0.ember-store: No space left on device$" "$TMP/err" || { cat "$TMP/err"; return 1; }
    echo "create: $(cat "$TMP/err")"
    [ -z "$(ls -A "$S")" ] && [ ! -e "$D" ] || { ls -A "$S" "$D"; return 1; }
}
CHECKS+=(create)

# ------------------------------------------------------------- during a save

# Armed by the first checkpoint's manifest fsync: the next save (step 8) meets the fault.
check_save() {
    local arm=(EMBER_FAULT_ARM_PATH=manifest.json EMBER_FAULT_ARM_CALLS=fsync)
    local S="$TMP/store-lru" ck tmpdir
    ssd_cfg lru "$S" 36K lru || return 1
    ck="ember train: checkpoint at step 8:"
    tmpdir="$TMP/save-[a-z-]+.ck/\.tmp-step-000000000008-[0-9a-f]+-[0-9a-f]+"
    faulted save-data-write lru "$S" "$ck cannot write $tmpdir/rank-00000-of-00001.bin: No space left on device" \
        EMBER_FAULT_PATH=/.tmp-step- EMBER_FAULT_CALLS=write "${arm[@]}" || return 1
    faulted save-data-fsync lru "$S" "$ck cannot fsync $tmpdir/rank-00000-of-00001.bin: Input/output error" \
        EMBER_FAULT_PATH=.bin.tmp EMBER_FAULT_CALLS=fsync EMBER_FAULT_ERRNO=EIO "${arm[@]}" || return 1
    # renamed into place, then closed: a failed close takes the name back
    faulted save-data-close lru "$S" "$ck cannot close $tmpdir/rank-00000-of-00001.bin: Input/output error" \
        EMBER_FAULT_PATH=rank-00000-of-00001.bin\$ EMBER_FAULT_CALLS=close EMBER_FAULT_ERRNO=EIO "${arm[@]}" || return 1
    faulted save-manifest-short lru "$S" "$ck cannot write $tmpdir/manifest.json: No space left on device" \
        EMBER_FAULT_PATH=manifest.json.tmp EMBER_FAULT_CALLS=write EMBER_FAULT_SHORT=1 "${arm[@]}" || return 1
    faulted save-manifest-fsync lru "$S" "$ck cannot fsync $tmpdir/manifest.json: Input/output error" \
        EMBER_FAULT_PATH=manifest.json.tmp EMBER_FAULT_CALLS=fsync EMBER_FAULT_ERRNO=EIO "${arm[@]}" || return 1
    # the temporary folder's fsync after the data file's rename: armed by step 8's data file fsync
    local arm8=(EMBER_FAULT_ARM_PATH=rank-00000-of-00001.bin.tmp EMBER_FAULT_ARM_CALLS=fsync EMBER_FAULT_ARM_AFTER=2)
    faulted save-folder-fsync lru "$S" "$ck cannot fsync the folder $tmpdir: Input/output error" \
        EMBER_FAULT_PATH=/.tmp-step- EMBER_FAULT_CALLS=fsync EMBER_FAULT_ERRNO=EIO "${arm8[@]}" || return 1
    # root's fsync after the rename to step-000000000008: the rename is undone
    faulted save-root-fsync lru "$S" "$ck cannot fsync the folder $TMP/save-root-fsync.ck: Input/output error" \
        EMBER_FAULT_PATH="$(realpath "$TMP")/save-root-fsync.ck\$" EMBER_FAULT_CALLS=fsync EMBER_FAULT_ERRNO=EIO \
        "${arm8[@]}" || return 1
    # the store's flush of dirty rows at the save: a cache that holds every row, so the steps
    # write nothing back and the first store write after step 4's checkpoint is step 8's flush
    S="$TMP/store-big"
    ssd_cfg big "$S" 1M lru || return 1
    faulted save-flush big "$S" "$ck table 'emb_C1' \(stacked with 7 more\): write-back of rows to the store file $S/emb_C1.rank0.ember-store failed: No space left on device \(nothing was lost: the rows stay in memory until a retry succeeds\)" \
        EMBER_FAULT_PATH=.ember-store "${arm[@]}" || return 1
}
CHECKS+=(save)

# The same with outputs written unnamed (O_TMPFILE, ember's way where the file system has it):
# the first fsync of an unnamed file after step 4's checkpoint is published (root's fsync) is
# step 8's data file's.  test_fault_io goes through every call both ways.
check_save_unnamed() {
    local S="$TMP/store-lru" ck tmpdir root
    ssd_cfg lru "$S" 36K lru || return 1
    ck="ember train: checkpoint at step 8:"
    tmpdir="$TMP/save-unnamed.ck/\.tmp-step-000000000008-[0-9a-f]+-[0-9a-f]+"
    root="$(realpath "$TMP")/save-unnamed.ck\$"
    faulted save-unnamed lru "$S" "$ck cannot fsync $tmpdir/rank-00000-of-00001.bin: Input/output error" \
        EMBER_FAULT_NO_TMPFILE=0 EMBER_FAULT_PATH="(deleted)" EMBER_FAULT_CALLS=fsync EMBER_FAULT_ERRNO=EIO \
        EMBER_FAULT_ARM_PATH="$root" EMBER_FAULT_ARM_CALLS=fsync || return 1
}
CHECKS+=(save_unnamed)

# ------------------------------------------------------------- two ranks

# Rank 1's store fails (armed by rank 1's first data file): both ranks stop with rank 1's
# message, no hang; the checkpoint of step 4 verifies and a resume on 2 ranks is exact.
check_mpi() {
    have_mpirun || return 0
    local S="$TMP/store-mpi" D="$TMP/mpi.ck" L="$TMP/mpi.log"
    ssd_cfg mpi "$S" 34K lookahead || return 1
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$TMP/mpi.cfg" "${RUN[@]}" --checkpoint-dir "$TMP/mpi.straight" || return 1
    expect_status 1 shimmed "$L" EMBER_FAULT_PATH=.rank1.ember-store EMBER_FAULT_ERRNO=EIO \
        EMBER_FAULT_ARM_PATH=rank-00001-of-00002.bin EMBER_FAULT_ARM_CALLS=fsync mpi2 train "${QUICK[@]}" \
        --config "$TMP/mpi.cfg" "${RUN[@]}" --checkpoint-dir "$D" || return 1
    grep -q "^ember-fault: injected EIO" "$L" || { echo "no fault injected; the run said:"; cat "$L" "$TMP/err"; return 1; }
    # reported by a step, agreed by every rank, or by rank 1's save when its writer failed after the last step
    grep -Eq "^ember train: (rank 0: step [0-9]+: rank 1|rank 1: checkpoint at step [0-9]+): table 'emb_C1' \(stacked with 7 more\): write-back of rows to the store file $S/emb_C1.rank1.ember-store failed: Input/output error" "$TMP/err" || { cat "$TMP/err"; return 1; }
    echo "mpi: $(head -1 "$TMP/err")"
    [ "$(ls "$D")" = step-000000000004 ] || { ls -a "$D"; return 1; }
    [ -z "$(ls -A "$S")" ] || { echo "store files left: $(ls -A "$S")"; return 1; }
    expect_status 0 mpi2 train "${QUICK[@]}" --config "$TMP/mpi.cfg" "${RUN[@]}" --checkpoint-dir "$D" --resume || return 1
    compare_ckpt "$TMP/mpi.straight" "$D" same
}
CHECKS+=(mpi)

run_checks fault_io
