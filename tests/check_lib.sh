# check_lib.sh: what the shell test scripts (tests/cli.sh, tests/resume.sh, tests/fault_io.sh)
# share; sourced by them after `set -u`, with the ember binary as $1.
# A script defines check_<name> functions, adds <name> to CHECKS, and ends
# with `run_checks NAME`: each check's output is shown only when it fails,
# then "NAME: N passed, N failed", exit 1 when any failed.

EMBER=${1:?usage: bash $0 path/to/ember}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ember-test-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
CHECKS=()

# $1: expected status; rest: command.  Leaves stdout/stderr in $TMP/out, $TMP/err.
expect_status() {
    local want=$1
    shift
    "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        echo "expected exit $want, got $got: $*"
        echo "--- stdout"; head -20 "$TMP/out"
        echo "--- stderr"; tail -20 "$TMP/err"
        return 1
    fi
}

# ember under mpirun -np 2.  LeakSanitizer is off there: Open MPI's own
# allocations cannot be suppressed by name (the same code paths are
# leak-checked in single-process checks).
MPIRUN=${EMBER_MPIRUN:-mpirun}
mpi2() {
    OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -k 10 120 "$MPIRUN" --oversubscribe --allow-run-as-root -np 2 "$EMBER" "$@"
}
mpi4() { # four ranks on the machine's cores, oversubscribed
    OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout -k 10 300 "$MPIRUN" --oversubscribe --allow-run-as-root -np 4 "$EMBER" "$@"
}
have_mpirun() {
    command -v "$MPIRUN" >/dev/null || { echo "skipped: no $MPIRUN"; return 1; }
}

# $1, $2: checkpoint folders (roots or step folders); $3: "same", "same-state" (all but the
# train.fingerprint blob, which records --threads) or "differ"; $4 "other-source": the runs
# read the same rows from different files (text and its binary conversion), so the model
# descriptions differ in their input_schema alone, and are compared without it.  Compares the
# step, every table's digest and every blob's, through `ember inspect --json` (which verifies
# checksums).
compare_ckpt() {
    "$EMBER" inspect "$1" --json >"$TMP/a.json" 2>"$TMP/err" || { cat "$TMP/err"; return 1; }
    "$EMBER" inspect "$2" --json >"$TMP/b.json" 2>"$TMP/err" || { cat "$TMP/err"; return 1; }
    python3 - "$TMP/a.json" "$TMP/b.json" "$3" "${4:-}" <<'PY'
import glob, json, os, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def model_json(path):  # the model.json blob's JSON, found in the rank file (the blob is its text)
    data = open(glob.glob(os.path.join(path, "rank-00000-of-*.bin"))[0], "rb").read()
    at = data.find(b'{"format":"ember-model"')
    assert at >= 0, "no model.json in " + path
    return json.JSONDecoder().raw_decode(data[at:].decode("utf-8", "replace"))[0]
if sys.argv[4] == "other-source":
    ma, mb = model_json(a["path"]), model_json(b["path"])
    sa, sb = ma.pop("input_schema")["source"], mb.pop("input_schema")["source"]
    assert sa != sb and ma == mb, "model descriptions differ beyond their input_schema (%s, %s)" % (sa, sb)
def content(c):
    d = {"step": c["step"], "world": c["world"], "optimizer_steps": c["optimizer_steps"]}
    for t in c["tables"]:
        d["table " + t["name"]] = t["digest"]
    for x in c["blobs"]:
        if x["name"] == "model.json" and sys.argv[4] == "other-source":
            continue  # compared above, without its input_schema
        if sys.argv[3] != "same-state" or x["name"] != "train.fingerprint":  # it records --threads
            d["blob " + x["name"]] = x["digest"]
    for x in c["rank_blobs"]:
        d["rank %d blob %s" % (x["rank"], x["name"])] = x["digest"]
    return d
ca, cb = content(a), content(b)
assert len(a["tables"]) > 0 and any(k.startswith("blob dense.params") for k in ca), ca
diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
if sys.argv[3] in ("same", "same-state"):
    assert not diff, "differ: " + ", ".join("%s %s vs %s" % (k, ca.get(k), cb.get(k)) for k in diff)
else:
    assert diff, "the same, expected them to differ"
print("%s: %d tables, %d blobs, %d rank blobs; %s" % (sys.argv[3], len(a["tables"]), len(a["blobs"]),
      len(a["rank_blobs"]), "differ: " + ", ".join(diff[:4]) if diff else "all digests equal"))
PY
}

run_checks() { # $1: the script's name for the last line; EMBER_CHECKS="a b" runs those checks only
    local passed=0 failed=0 c
    [ -z "${EMBER_CHECKS:-}" ] || read -r -a CHECKS <<<"$EMBER_CHECKS"
    for c in "${CHECKS[@]}"; do
        if "check_$c" >"$TMP/log.$c" 2>&1; then
            passed=$((passed + 1))
            echo "ok   $c"
        else
            failed=$((failed + 1))
            echo "FAIL $c"
            sed 's/^/     /' "$TMP/log.$c"
        fi
    done
    echo "$1: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}
