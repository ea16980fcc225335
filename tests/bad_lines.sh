#!/usr/bin/env bash
# bad_lines.sh: the bad-line limit (data.max_bad_fraction, data.max_bad_lines) and the int rule
# (84.0 reads as 84) through `ember train` and `ember convert`, run by CTest as
#   bash tests/bad_lines.sh path/to/ember
# (EMBER_CHECKS="name ..." runs some).  Every run draws fresh random files; the seed is printed
# by a check that fails.  The expected outcome comes from limit_ref below, an independent
# statement of docs/data.md's rule: judged at each bad line in line order, more than
# max_bad_lines bad lines, or more than max_bad_fraction of the lines read counted as at least
# min(4096, the file's lines), stop the read.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh" # EMBER, TMP, expect_status, run_checks

SEED=${EMBER_SEED:-$(( $(date +%s%N) % 1000000007 ))}

# $1 file, $2 rows, $3 bad fraction, $4 seed: a CSV (clicked, age int, price float, user int
# categorical, tag string categorical) with about that share of bad lines of mixed kinds at
# random places; writes $1.bad (the data line index of every bad line, one a line).
make_csv() {
    python3 - "$@" <<'PY'
import random, sys
path, rows, frac, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
bad = sorted(rng.sample(range(rows), int(round(rows * frac))))
badset = set(bad)
with open(path, "w") as f:
    f.write("clicked,age,price,user,tag\n")
    for i in range(rows):
        age, price = rng.randint(18, 90), rng.random() * 10
        fields = [str(int(rng.random() < 0.3)), str(age), "%.3f" % price, str(rng.randint(0, 999)),
                  "t%d" % rng.randint(0, 20)]
        if i in badset:
            k = rng.randrange(4)
            if k == 0:
                fields[1] = "%d.5" % age      # not an integer
            elif k == 1:
                fields.pop()                   # a field short
            elif k == 2:
                fields[0] = "2"                # not a binary label
            else:
                fields[2] = "nan"              # not a number
        f.write(",".join(fields) + "\n")
with open(path + ".bad", "w") as f:
    f.write("".join("%d\n" % i for i in bad))
PY
}

# $1 file.bad, $2 data lines, $3 fraction, $4 count: "bad read key" where the read stops, or
# "pass".
limit_ref() {
    python3 - "$@" <<'PY'
import sys
bad = [int(l) for l in open(sys.argv[1])]
lines, frac, count = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
judge0 = min(4096, lines)
for b, i in enumerate(bad, 1):
    if count >= 0 and b > count:
        print(b, i + 1, "max_bad_lines"); break
    if frac < 1 and b > frac * max(i + 1, judge0):
        print(b, i + 1, "max_bad_fraction"); break
else:
    print("pass")
PY
}

# $1 config path, $2 fraction, $3 count (-1: none): the config of make_csv's files.
make_cfg() {
    cat >"$1" <<EOF
data = {
  max_bad_fraction = $2;
  max_bad_lines = $3;
  schema = { format = "csv"; header = true; columns = (
    { name = "clicked"; type = "label"; },
    { name = "age";     type = "int"; transform = "log1p"; },
    { name = "price";   type = "float"; },
    { name = "user";    type = "categorical"; encoding = "int"; table = "users"; },
    { name = "tag";     type = "categorical"; table = "tags"; }
  ); };
};
tables = ( { name = "users"; rows = 1024; dim = 8; }, { name = "tags"; rows = 64; dim = 8; } );
train = { epochs = 1; micro_batch = 256; eval_every = 0; };
EOF
}

# $1 file, $2 the limit_ref verdict, $3 what: the stop ember reported in $TMP/err matches.
expect_stop() {
    local b r k first
    read -r b r k <<<"$2"
    grep -q "$1: $b bad lines in the first $r read: more than data.$k" "$TMP/err" ||
        { echo "$3: want '$b bad lines in the first $r read: more than data.$k' (seed $SEED)"; cat "$TMP/err"; return 1; }
    first=$(( $(head -1 "$1.bad") + 2 )) # the header is line 1
    grep -q "; the first: $1:$first: " "$TMP/err" ||
        { echo "$3: the first bad line ($1:$first) is not named (seed $SEED)"; cat "$TMP/err"; return 1; }
}

# train and convert below and above a random fraction; the summary counts the skipped lines
check_bad_limit_fraction() {
    local rows frac v i f
    for i in 1 2 3; do
        rows=$(( 1500 + (SEED * i) % 5000 ))
        for frac in 0.004 0.03; do
            f="$TMP/d$i-$frac.csv"
            make_csv "$f" "$rows" "$frac" $((SEED + i)) || return 1
            make_cfg "$TMP/c.cfg" 0.01 -1
            v=$(limit_ref "$f.bad" "$rows" 0.01 -1)
            if [ "$v" = pass ]; then
                expect_status 0 "$EMBER" train --config "$TMP/c.cfg" --train-file "$f" --json --metrics none --plot none || return 1
                python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); n=len(open(sys.argv[2]).read().split()); assert s["lines"]==int(sys.argv[3]) and s["bad_lines"]==n, (s.get("lines"), s.get("bad_lines"), n)' \
                    "$TMP/out" "$f.bad" "$rows" || { echo "seed $SEED"; return 1; }
                expect_status 0 "$EMBER" convert --config "$TMP/c.cfg" "$f" "$TMP/o.bin" || return 1
                grep -q "($rows lines read, $(wc -l <"$f.bad") bad lines skipped)" "$TMP/out" || { cat "$TMP/out"; return 1; }
            else
                expect_status 1 "$EMBER" train --config "$TMP/c.cfg" --train-file "$f" --metrics none --plot none || return 1
                expect_stop "$f" "$v" "train" || return 1
                rm -f "$TMP/o.bin"
                expect_status 1 "$EMBER" convert --config "$TMP/c.cfg" "$f" "$TMP/o.bin" || return 1
                expect_stop "$f" "$v" "convert" || return 1
                ! ls "$TMP" | grep -q '^o\.bin' || { echo "convert left $(ls "$TMP" | grep '^o\.bin')"; return 1; }
            fi
        done
    done
}
CHECKS+=(bad_limit_fraction)

# max_bad_lines at its exact boundary: k bad lines pass, k - 1 stop at the last of them
check_bad_limit_count() {
    local rows=$(( 800 + SEED % 3000 )) f="$TMP/cnt.csv" k v
    make_csv "$f" "$rows" 0.02 "$SEED" || return 1
    k=$(wc -l <"$f.bad")
    make_cfg "$TMP/k.cfg" 1 "$k"
    expect_status 0 "$EMBER" train --config "$TMP/k.cfg" --train-file "$f" --json --metrics none --plot none || return 1
    grep -q "\"bad_lines\":$k," "$TMP/out" || { tail -1 "$TMP/out"; return 1; }
    expect_status 0 "$EMBER" convert --config "$TMP/k.cfg" "$f" "$TMP/k.bin" || return 1
    make_cfg "$TMP/k0.cfg" 0.01 -1 # the options override the config's keys
    expect_status 0 "$EMBER" convert --config "$TMP/k0.cfg" "$f" "$TMP/k2.bin" --max-bad-fraction 1 --max-bad-lines "$k" || return 1
    cmp -s "$TMP/k.bin" "$TMP/k2.bin" || { echo "the options wrote another file than the keys"; return 1; }
    make_cfg "$TMP/k1.cfg" 1 $((k - 1))
    v=$(limit_ref "$f.bad" "$rows" 1 $((k - 1)))
    [ "$v" = "$k $(( $(tail -1 "$f.bad") + 1 )) max_bad_lines" ] || { echo "reference: $v"; return 1; }
    expect_status 1 "$EMBER" train --config "$TMP/k1.cfg" --train-file "$f" --metrics none --plot none || return 1
    expect_stop "$f" "$v" "train, max_bad_lines $((k - 1))" || return 1
    expect_status 1 "$EMBER" convert --config "$TMP/k.cfg" "$f" "$TMP/k3.bin" --max-bad-lines $((k - 1)) || return 1
    expect_stop "$f" "$v" "convert --max-bad-lines $((k - 1))" || return 1
    [ ! -e "$TMP/k3.bin" ] || { echo "convert left its output"; return 1; }
    # 0: the first bad line stops the read, with the limit's message
    v=$(limit_ref "$f.bad" "$rows" 1 0)
    expect_status 1 "$EMBER" convert --config "$TMP/k.cfg" "$f" "$TMP/k3.bin" --max-bad-lines 0 || return 1
    expect_stop "$f" "$v" "convert --max-bad-lines 0" || return 1
    # bad_lines = "fail" is unchanged: the first bad line, by itself
    sed 's/^data = {/data = { bad_lines = "fail";/' "$TMP/k.cfg" >"$TMP/kf.cfg"
    expect_status 1 "$EMBER" convert --config "$TMP/kf.cfg" "$f" "$TMP/k3.bin" || return 1
    grep -q "^ember convert: $f:$(( $(head -1 "$f.bad") + 2 )): " "$TMP/err" || { cat "$TMP/err"; return 1; }
    # out of range keys
    make_cfg "$TMP/bad.cfg" 1.5 -1
    expect_status 1 "$EMBER" convert --config "$TMP/bad.cfg" "$f" "$TMP/k3.bin" || return 1
    grep -q "data.max_bad_fraction" "$TMP/err" || { cat "$TMP/err"; return 1; }
    make_cfg "$TMP/bad.cfg" 0.01 -2
    expect_status 1 "$EMBER" convert --config "$TMP/bad.cfg" "$f" "$TMP/k3.bin" || return 1
    grep -q "data.max_bad_lines" "$TMP/err" || { cat "$TMP/err"; return 1; }
}
CHECKS+=(bad_limit_count)

# pandas writes an int column with missing values as 84.0: it reads as 84, in a dense column
# and as an int id; 84.5 stops the read within the first block, naming the column and the fix
check_bad_pandas_ints() {
    python3 - "$TMP" "$SEED" <<'PY' || return 1
import random, sys
tmp, rng = sys.argv[1], random.Random(int(sys.argv[2]))
rows = [(int(rng.random() < 0.3), rng.choice([None] + list(range(-5, 100))), rng.randint(0, 2**53 - 1),
         "t%d" % rng.randint(0, 20)) for _ in range(20000)]
def write(name, fmt, ufmt=None):
    with open("%s/%s.csv" % (tmp, name), "w") as f:
        f.write("clicked,age,price,user,tag\n")
        for y, age, user, tag in rows:
            f.write("%d,%s,1.5,%s,%s\n" % (y, "" if age is None else fmt(age), (ufmt or fmt)(user), tag))
write("ints", str)
write("pandas", lambda v: "%d.0" % v)               # float64's repr of an integer
write("zeros", lambda v: "%d.%s" % (v, "0" * (1 + v % 3)))
write("halves", lambda v: "%d.5" % v, str)
PY
    make_cfg "$TMP/p.cfg" 0.01 -1
    local f
    expect_status 0 "$EMBER" convert --config "$TMP/p.cfg" "$TMP/ints.csv" "$TMP/ints.bin" || return 1
    for f in pandas zeros; do
        expect_status 0 "$EMBER" convert --config "$TMP/p.cfg" "$TMP/$f.csv" "$TMP/$f.bin" || return 1
        grep -q "(20000 lines read, 0 bad lines skipped)" "$TMP/out" || { cat "$TMP/out"; return 1; }
        cmp "$TMP/ints.bin" "$TMP/$f.bin" || { echo "$f.csv converts to other bytes than ints.csv"; return 1; }
    done
    expect_status 0 "$EMBER" train --config "$TMP/p.cfg" --train-file "$TMP/pandas.csv" --json --metrics none --plot none || return 1
    tail -1 "$TMP/out" | grep -q '"lines":20000,"bad_lines":0' || { tail -1 "$TMP/out"; return 1; }
    # 84.5: not an integer; both commands stop within the first block and say what to do
    local hint='column age holds numbers that are not integers: declare it type = "float"'
    expect_status 1 "$EMBER" convert --config "$TMP/p.cfg" "$TMP/halves.csv" "$TMP/halves.bin" || return 1
    grep -q "halves.csv: [0-9]* bad lines in the first [0-9]* read: more than data.max_bad_fraction = 0.01 of 4096 lines; the first: $TMP/halves.csv:[0-9]*: field 1 (age): \"-\?[0-9]*.5\" is not an integer; $hint" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    [ ! -e "$TMP/halves.bin" ] && [ ! -e "$TMP/halves.bin.tmp" ] || { echo "convert left its output"; return 1; }
    expect_status 1 "$EMBER" train --config "$TMP/p.cfg" --train-file "$TMP/halves.csv" --metrics none --plot none || return 1
    grep -q "step 1: .*$hint" "$TMP/err" || { cat "$TMP/err"; return 1; }
    # ... and as an evaluation file: at open, before the first step
    expect_status 1 "$EMBER" train --config "$TMP/p.cfg" --train-file "$TMP/ints.csv" --eval-file "$TMP/halves.csv" --metrics none --plot none || return 1
    grep -q "^ember train: $TMP/halves.csv: [0-9]* bad lines in the first" "$TMP/err" || { cat "$TMP/err"; return 1; }
    ! grep -q "step 1" "$TMP/out" "$TMP/err" || { echo "the bad eval file was found after the run began"; return 1; }
    # an int id that is not an integer: the hint names the encoding
    sed 's/^\([0-9]*\),\([^,]*\),1.5,\([0-9]*\),/\1,\2,1.5,\3.25,/' "$TMP/ints.csv" >"$TMP/uid.csv"
    expect_status 1 "$EMBER" convert --config "$TMP/p.cfg" "$TMP/uid.csv" "$TMP/uid.bin" || return 1
    grep -q 'column user holds ids that are not integers: encoding = "string" reads them as text' "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
}
CHECKS+=(bad_pandas_ints)

run_checks bad_lines
