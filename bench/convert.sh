#!/usr/bin/env bash
# convert.sh [MB]: `ember convert` throughput against a pandas peer (bench/convert_peer.py:
# pandas.read_csv with the pyarrow engine, then the same transforms and hashing, vectorised).
#
# Inputs, generated in a temporary folder under /tmp that is removed at the end (also on error
# or Ctrl-C):
#   criteo_tsv    about MB megabytes (default 2048; 10^6 bytes) of Criteo-shaped TSV
#                 (bench/criteo_like.py, seed 7), converted with ember's built-in Criteo schema;
#   multihot_csv  about MB/4 megabytes of CSV with a header, a label, 3 ints, 2 floats, 2 string
#                 categoricals and a multi-hot column of 1-20 items (bench/multihot_like.py,
#                 seed 7), converted with `--config` and the config `multihot_like.py --schema`
#                 prints (a data.schema alone; ROWS rows per sparse column).
# Both are written by one generator process per core, as parts concatenated.
#
# Measured:
#   (a) each file's sequential read bandwidth: `dd if=FILE of=/dev/null bs=1M` after a first read
#       (`cat`), i.e. from a WARM page cache, median of 3: the ceiling for a converter reading a
#       cached file.  Every conversion below also reads a warm file (the files are written just
#       before and fit in memory).  A cold read is not measured: that needs dropping the page
#       cache (echo 3 > /proc/sys/vm/drop_caches), which this script does not do; the device's own
#       sequential bandwidth is shown instead by one `dd iflag=direct` (O_DIRECT, no cache).
#   (b) build/ember convert IN OUT.bin --threads T (the CSV with --config CFG), T = 1, 2;
#   (c) the pandas peer at T = 1, 2 (pyarrow.set_cpu_count(T); pandas itself uses one thread),
#       writing its result to a file too (convert_peer.py --out).
# ROUNDS rounds (default 3), ember and pandas alternating; outputs are deleted and `sync` run
# between measurements (outside the timing).  ember's time is the process's wall time; the
# peer's is its own, from read_csv to the end of its write: Python's start and imports are left
# out (they are in "process_seconds").  ember's outputs at 1 and 2 threads are compared in round
# 1 (`cmp`: docs/data.md says the file does not depend on the thread count).
#
# stdout: one JSON line per measurement ("bench": "convert", input, tool, threads, round,
# seconds, MB_per_s, lines_per_s, ...), then one summary line ("summary": true) with the medians,
# the ratios ember/pandas (of MB/s, i.e. pandas seconds / ember seconds; > 1: ember is faster)
# per input and thread count, ember's fraction of the warm read bandwidth and of the O_DIRECT
# one, whether ember's files at 1 and 2 threads were the same, whether ember's distinct keys per
# feature and the peer's distinct values agree, the versions, and how idle the machine was:
# every measurement has the tool's CPU time ("cpu_s") and the CPU time the rest of the machine
# used meanwhile ("others_cpu_s", from /proc/stat: 0 on an idle machine).  Progress and a table
# on stderr (a warning when the machine was not idle before the measurements).  2048 MB: about
# 12 minutes on 2 idle cores (3.5 of them generating the data); `bash bench/convert.sh 64` about
# a minute.  Needs about 3.5 x MB of free disk under /tmp and, for the peer, about 4 x MB of RAM.
#
# Environment: EMBER (default build/ember), ROUNDS (3), ROWS (100000, every sparse feature's
# rows), PANDAS_VENV (bench/setup_pandas.sh's venv, made when missing).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mb="${1:-2048}"
rounds="${ROUNDS:-3}"
rows="${ROWS:-100000}"
ember="${EMBER:-$repo/build/ember}"
venv="${PANDAS_VENV:-$repo/bench/.venv-pandas}"
say() { printf '[convert] %s\n' "$*" >&2; }

[ -x "$ember" ] || { echo "convert.sh: no $ember (build ember first: scripts/setup.sh)" >&2; exit 1; }
if ! "$ember" convert --help 2>&1 | grep -q -- --threads; then
    echo "convert.sh: $ember convert has no --threads option (rebuild ember)" >&2
    exit 1
fi
PANDAS_VENV="$venv" bash "$repo/bench/setup_pandas.sh" >/dev/null

work="$(mktemp -d /tmp/ember-convert-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
parts="$(nproc)"
avail_mb=$(($(df -Pk "$work" | awk 'NR==2 {print $4}') / 1024))
need_mb=$((mb * 3 + mb / 2))  # the inputs, while parts are joined, and two outputs
[ "$avail_mb" -ge "$need_mb" ] || { echo "convert.sh: need about $need_mb MB free in /tmp, have $avail_mb" >&2; exit 1; }

# gen NAME SCRIPT MB: writes $work/NAME from PARTS processes of SCRIPT (seed 7, streams 1..PARTS),
# sized from the mean line length of a 2,000-line sample.  Prints the number of samples.
gen() {
    local name="$1" script="$2" want_mb="$3" probe n per i hdr
    probe="$work/probe"
    python3 "$script" "$probe" 2000 7 99 --no-header
    n=$(python3 -c 'import os, sys; print(max(1, round(float(sys.argv[1]) * 1e6 / (os.path.getsize(sys.argv[2]) / 2000))))' \
        "$want_mb" "$probe")
    rm -f "$probe"
    per=$(((n + parts - 1) / parts))
    for ((i = 1; i <= parts; i++)); do
        hdr=--no-header
        [ "$i" = 1 ] && hdr=""
        python3 "$script" "$work/$name.part$i" $((i < parts ? per : n - per * (parts - 1))) 7 "$i" $hdr &
    done
    wait
    for ((i = 1; i <= parts; i++)); do
        cat "$work/$name.part$i" >>"$work/$name"
        rm -f "$work/$name.part$i"
    done
    echo "$n"
}

t0=$(date +%s)
say "generating ~$mb MB of Criteo-shaped TSV and ~$((mb / 4)) MB of multi-hot CSV in $work ($parts processes)"
n_tsv=$(gen criteo.tsv "$repo/bench/criteo_like.py" "$mb")
n_csv=$(gen multihot.csv "$repo/bench/multihot_like.py" "$((mb / 4))")
python3 "$repo/bench/multihot_like.py" --schema "$rows" >"$work/multihot.cfg"
say "generated in $(($(date +%s) - t0)) s: criteo.tsv $(stat -c %s "$work/criteo.tsv") bytes, $n_tsv lines;" \
    "multihot.csv $(stat -c %s "$work/multihot.csv") bytes, $n_csv samples"

# (a) read bandwidth: warm (median of 3 dd after a cat) and O_DIRECT (the device, once)
dd_mbps() { # dd args...: MB/s (10^6 bytes) from dd's summary line
    LC_ALL=C dd "$@" of=/dev/null bs=1M 2>&1 | awk '/bytes/ && /copied/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^copied/) s = $(i + 1); printf "%.1f\n", $1 / 1e6 / s }'
}
for name in criteo.tsv multihot.csv; do
    input="${name/./_}"
    cat "$work/$name" >/dev/null
    warm=()
    for i in 1 2 3; do warm+=("$(dd_mbps if="$work/$name")"); done
    direct="$(dd_mbps if="$work/$name" iflag=direct)"
    python3 -c '
import json, statistics, sys
w = [float(x) for x in sys.argv[3:]]
print(json.dumps({"bench": "convert", "input": sys.argv[1], "tool": "dd", "what": "sequential read, bs=1M",
                  "warm_MB_per_s": statistics.median(w), "warm_runs_MB_per_s": w, "page_cache": "warm (after a first read)",
                  "direct_MB_per_s": float(sys.argv[2]), "direct": "iflag=direct: O_DIRECT, the device without the page cache",
                  "cold": "not measured: needs dropping the page cache"}))' "$input" "$direct" "${warm[@]}" |
        tee -a "$work/dd.jsonl"
done

# (b), (c): the rounds, and the summary
python3 - "$ember" "$venv/bin/python" "$repo/bench/convert_peer.py" "$work" "$rounds" "$rows" "$mb" "$n_tsv" "$n_csv" <<'PY'
import json, os, re, statistics, subprocess, sys, time

ember, peer_py, peer, work, rounds, rows, mb, n_tsv, n_csv = sys.argv[1:]
rounds, n_samples = int(rounds), {"criteo_tsv": int(n_tsv), "multihot_csv": int(n_csv)}
inputs = {"criteo_tsv": (os.path.join(work, "criteo.tsv"), ["--rows", rows], "criteo"),
          "multihot_csv": (os.path.join(work, "multihot.csv"), ["--config", os.path.join(work, "multihot.cfg")], "multihot")}
out_bin = os.path.join(work, "out.bin")


HZ = os.sysconf("SC_CLK_TCK")


def busy_cpu_s():
    """CPU seconds the whole machine has been busy (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / HZ


def run(cmd):
    """Runs cmd; returns (wall seconds, {peak_rss_MB, cpu_s: its CPU time, others_cpu_s: the CPU
    time the rest of the machine used meanwhile}, its stdout and stderr)."""
    b0, t0 = busy_cpu_s(), time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    secs, b1 = time.perf_counter() - t0, busy_cpu_s()
    p.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit("convert.sh: %s failed (exit %d):\n%s" % (" ".join(cmd), code, out))
    cpu = ru.ru_utime + ru.ru_stime
    return secs, {"peak_rss_MB": round(ru.ru_maxrss / 1024), "cpu_s": round(cpu, 2),
                  "others_cpu_s": round(max(0.0, b1 - b0 - cpu), 2)}, out


def cleanup(path):
    if os.path.exists(path):
        os.remove(path)
    subprocess.run(["sync"])


rows_out = []
b0 = busy_cpu_s()
time.sleep(2)
idle0 = round(1 - (busy_cpu_s() - b0) / 2 / os.cpu_count(), 3)
if idle0 < 0.9:
    print("[convert] warning: the machine was %.0f %% idle before the measurements: other work disturbs them"
          % (100 * idle0), file=sys.stderr)
for r in range(1, rounds + 1):
    for name, (path, extra, fmt) in inputs.items():
        nbytes = os.path.getsize(path)
        for threads in (1, 2):
            # ember
            secs, use, text = run([ember, "convert", *extra, path, out_bin, "--threads", str(threads)])
            m = re.search(r"wrote (\d+) samples", text)
            samples = int(m.group(1)) if m else None
            if samples != n_samples[name]:
                sys.exit("convert.sh: ember convert wrote %s samples of %s, expected %d:\n%s" % (samples, name, n_samples[name], text))
            rec = {"bench": "convert", "input": name, "tool": "ember", "threads": threads, "round": r,
                   "seconds": round(secs, 4), "MB_per_s": round(nbytes / 1e6 / secs, 2),
                   "lines_per_s": round(samples / secs, 1), "samples": samples, "bytes": nbytes,
                   "out_bytes": os.path.getsize(out_bin), **use}
            if r == 1:
                rec["output"] = text.strip().splitlines()[0]
                rec["distinct"] = {m.group(1): int(m.group(2)) for m in re.finditer(r"feature (\S+): (\d+) distinct", text)}
                if threads == 1:
                    os.rename(out_bin, out_bin + ".t1")
                else:
                    rec["same_file_as_threads_1"] = subprocess.run(["cmp", "-s", out_bin + ".t1", out_bin]).returncode == 0
                    cleanup(out_bin + ".t1")
            cleanup(out_bin)
            print(json.dumps(rec), flush=True)
            rows_out.append(rec)
            # pandas
            peer_out = os.path.join(work, "peer.bin")
            psecs, use, ptext = run([peer_py, peer, "--format", fmt, path, "--threads", str(threads), "--rows", rows,
                                "--out", peer_out, "--input", name])
            rec = json.loads(ptext.strip().splitlines()[-1])
            if rec["samples"] != n_samples[name]:
                sys.exit("convert.sh: the peer read %d samples of %s, expected %d" % (rec["samples"], name, n_samples[name]))
            rec["round"] = r
            rec["process_seconds"] = round(psecs, 4)
            rec["cpu_s"], rec["others_cpu_s"] = use["cpu_s"], use["others_cpu_s"]
            cleanup(peer_out)
            print(json.dumps(rec), flush=True)
            rows_out.append(rec)

dd = {}
for line in open(os.path.join(work, "dd.jsonl")):
    d = json.loads(line)
    dd[d["input"]] = d
med, ratio, frac, frac_direct = {}, {}, {}, {}
versions = {}
for name in inputs:
    med[name], ratio[name], frac[name], frac_direct[name] = {}, {}, {}, {}
    for threads in (1, 2):
        for tool in ("ember", "pandas"):
            sel = [x for x in rows_out if x["input"] == name and x["tool"] == tool and x["threads"] == threads]
            med[name]["%s_t%d" % (tool, threads)] = {k: round(statistics.median(x[k] for x in sel), 4 if k == "seconds" else 2)
                                                     for k in ("seconds", "MB_per_s", "lines_per_s")}
            if tool == "pandas":
                versions = {"pandas": sel[0]["pandas"], "pyarrow": sel[0]["pyarrow"], "numpy": sel[0]["numpy"]}
        e, p = med[name]["ember_t%d" % threads], med[name]["pandas_t%d" % threads]
        ratio[name]["t%d" % threads] = round(p["seconds"] / e["seconds"], 3)
        frac[name]["t%d" % threads] = round(e["MB_per_s"] / dd[name]["warm_MB_per_s"], 4)
        frac_direct[name]["t%d" % threads] = round(e["MB_per_s"] / dd[name]["direct_MB_per_s"], 3)
# ember's distinct keys (its XXH64 of the value; of the hex value for Criteo) and the peer's
# distinct strings count the same thing: a check that both read the same values
distinct_agree = {}
for name in inputs:
    e = [x["distinct"] for x in rows_out if x["input"] == name and x["tool"] == "ember" and "distinct" in x]
    p = [x["distinct"] for x in rows_out if x["input"] == name and x["tool"] == "pandas"]
    distinct_agree[name] = bool(e and p) and all(d == p[0] for d in e + p)
summary = {"bench": "convert", "summary": True, "MB": int(mb), "rounds": rounds, "rows": int(rows), "cores": os.cpu_count(),
           "medians": med, "ember_over_pandas": ratio,
           "ember_over_pandas_means": "median pandas seconds / median ember seconds (= MB/s ratio); > 1: ember is faster",
           "read_MB_per_s_warm": {n: dd[n]["warm_MB_per_s"] for n in inputs},
           "read_MB_per_s_direct": {n: dd[n]["direct_MB_per_s"] for n in inputs},
           "ember_fraction_of_warm_read": frac, "ember_fraction_of_direct_read": frac_direct,
           "same_output_threads_1_2": {x["input"]: x["same_file_as_threads_1"] for x in rows_out if "same_file_as_threads_1" in x},
           "distinct_counts_agree": distinct_agree, **versions,
           "idle_before": idle0,
           "others_cpu_s_max": max(x["others_cpu_s"] for x in rows_out),
           "others_cpu_s_note": "CPU seconds other processes used during a measurement (0: undisturbed)"}
print(json.dumps(summary), flush=True)
w = sys.stderr.write
w("\n| input | threads | ember MB/s | pandas MB/s | ember lines/s | pandas lines/s | ember / pandas | ember / warm read | ember / O_DIRECT read | others' CPU s (max) |\n")
w("|---|---|---|---|---|---|---|---|---|---|\n")
for name in inputs:
    for threads in (1, 2):
        e, p = med[name]["ember_t%d" % threads], med[name]["pandas_t%d" % threads]
        t = "t%d" % threads
        others = max(x["others_cpu_s"] for x in rows_out if x["input"] == name and x["threads"] == threads)
        w("| %s | %d | %.1f | %.1f | %s | %s | %.2f | %.3f | %.2f | %.1f |\n" % (name, threads, e["MB_per_s"], p["MB_per_s"],
          format(round(e["lines_per_s"]), ","), format(round(p["lines_per_s"]), ","), ratio[name][t], frac[name][t],
          frac_direct[name][t], others))
w("(medians of %d rounds; read bandwidth: dd bs=1M, warm page cache %s MB/s, O_DIRECT %s MB/s)\n" % (
  rounds, "/".join("%.0f" % dd[n]["warm_MB_per_s"] for n in inputs), "/".join("%.0f" % dd[n]["direct_MB_per_s"] for n in inputs)))
PY
say "done in $(($(date +%s) - t0)) s"
