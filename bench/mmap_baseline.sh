#!/usr/bin/env bash
# mmap_baseline.sh [DIR] [OUT]: the SSD tier against the baseline a user has
# for free, in one session: the same table as a file mapped with
# mmap(MAP_SHARED) (bench_mmap_baseline), trained under a memory limit
# equal to the SSD tier's cache budget, so that the kernel's page cache
# does the caching, alternated with `ember bench --storage ssd` at that
# budget; W1 and W3 at a 10 % cache, as bench/tiers.sh.
#
#   budget    = the --cache-bytes tiers.sh gives each table (10 % of its rows
#               + optimizer state), times the tables (a stacked SSD store's
#               cache is the sum of its tables'): W1 8 x 26,000,000 bytes,
#               W3 1,024,000,000 bytes
#   allowance = the mmap program's own memory, measured: the same program
#               and workload on a table of 4096 rows per table, in a memory
#               cgroup without a limit; its peak (memory.max_usage_in_bytes,
#               or memory.peak under cgroup v2: anonymous memory, the small
#               table's page cache, the binary's pages) rounded up to a MiB
#   limit     = budget + allowance, on a memory cgroup holding the mmap
#               process alone.  The cgroup counts the mapped file's page
#               cache (clean and dirty), which is the point: the kernel must
#               evict and write back pages to stay under it.
#
# ember's runs are not in a cgroup (O_DIRECT: no page cache; their cache is
# cache_bytes, their own memory beside it is in peak_rss_mb).  Each ember
# run twice: as ember bench does by default (rows never written are
# computed, not read: a fresh table) and with --written 1 (every row in the
# store first, as after loading a checkpoint: every load reads, as every
# mmap fault does).  Page cache dropped (sync; drop_caches) before every
# run.  Cgroup v1 (/sys/fs/cgroup/memory) or v2 (cgroup.controllers); root.
#
# DIR: a folder on the disk to measure (not tmpfs; default .): the mapped
# files (W1 2.1 GB, W3 10.2 GB) and ember's store files (W1 4.1 GB, W3
# 10.2 GB) go there, one at a time, deleted at the end.  OUT: JSON lines
# (default bench/out/mmap_baseline.jsonl): the check, the allowance, then
# per round and workload the mmap line (with the cgroup's figures merged)
# and ember's two; a summary per workload at the end.
# Environment: ROUNDS (2), ITERS (10), WARMUP_W1 (10), WARMUP_W3 (15): until
# ember's cache is full (W1: ~8 steps, W3: ~12; the page cache fills in 1-3),
# MMAP_THREADS ("32 1": the mmap program's OpenMP threads, each run; 32
# fault in parallel as ember's 32 I/O threads read, 1 is ember bench's
# --threads), WORKLOADS ("W1 W3"), EMBER (build/ember), BENCH
# (build/bench_mmap_baseline), DEV (the block device under DIR, for the
# device's own byte counts).  About 40 minutes on the project machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$(cd "${1:-.}" && pwd)"
out="${2:-$repo/bench/out/mmap_baseline.jsonl}"
ember="${EMBER:-$repo/build/ember}"
bench="${BENCH:-$repo/build/bench_mmap_baseline}"
rounds="${ROUNDS:-2}" iters="${ITERS:-10}" workloads="${WORKLOADS:-W1 W3}" mthreads="${MMAP_THREADS:-32 1}"
declare -A warmup=([W1]="${WARMUP_W1:-10}" [W3]="${WARMUP_W3:-15}")
export OMP_WAIT_POLICY=PASSIVE # 32 threads on few cores: sleep, not spin, at the loops' ends
dev="${DEV:-$(basename "$(df --output=source "$dir" | tail -1)")}"
[ -e "/sys/class/block/$dev/stat" ] || dev=""
mkdir -p "$(dirname "$out")"
: >"$out"
[ "$(id -u)" -eq 0 ] || { echo "mmap_baseline.sh: needs root (cgroups, drop_caches)" >&2; exit 1; }

# ---------------------------------------------------------------- cgroups
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    cgv=2 cgroot=/sys/fs/cgroup
    grep -qw memory "$cgroot/cgroup.subtree_control" || echo +memory >"$cgroot/cgroup.subtree_control"
else
    cgv=1 cgroot=/sys/fs/cgroup/memory
fi
[ -w "$cgroot" ] || { echo "mmap_baseline.sh: $cgroot is not writable" >&2; exit 1; }
cg="$cgroot/ember-mmap-$$"
cg_make() { # limit in bytes, or "max"
    mkdir "$cg"
    if [ $cgv = 1 ]; then
        [ "$1" = max ] || echo "$1" >"$cg/memory.limit_in_bytes"
    else
        echo "$1" >"$cg/memory.max"
        echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
    fi
}
cg_peak() { if [ $cgv = 1 ]; then cat "$cg/memory.max_usage_in_bytes"; else cat "$cg/memory.peak"; fi; }
cg_failcnt() { if [ $cgv = 1 ]; then cat "$cg/memory.failcnt"; else awk '$1=="max"{print $2}' "$cg/memory.events"; fi; }
cg_oom() { if [ $cgv = 1 ]; then awk '$1=="oom_kill"{print $2}' "$cg/memory.oom_control"; else awk '$1=="oom_kill"{print $2}' "$cg/memory.events"; fi; }
cg_drop() {
    [ -d "$cg" ] || return 0
    [ $cgv = 1 ] && { echo 0 >"$cg/memory.force_empty" 2>/dev/null || true; }
    rmdir "$cg" 2>/dev/null || true
}
cg_run() { # command...: run inside $cg
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "mmap_baseline.sh: cannot drop caches" >&2; }

file() { echo "$dir/ember-mmap-baseline-$1.dat"; }
cleanup() { for w in $workloads; do rm -f "$(file "$w")"; done; rm -f "$dir"/t0.rank0.ember-store; cg_drop; }
trap cleanup EXIT

# ---------------------------------------------------------------- workloads
shape() { # workload -> the mmap program's shape flags
    case "$1" in
    W1) echo "--tables 8 --rows 1000000 --dim 64 --batch 4096 --pooling 20 --dist zipf --alpha 1.05 --optimizer rowwise_adagrad" ;;
    W3) echo "--tables 1 --rows 10000000 --dim 128 --batch 8192 --pooling 10 --dist uniform --optimizer adagrad" ;;
    esac
}
ember_flags() { # workload -> ember bench's
    case "$1" in
    W1) echo "--preset W1 --optimizer rowwise_adagrad" ;;
    W3) echo "--preset W3 --optimizer adagrad" ;;
    esac
}
cache_bytes() { # per table, as bench/tiers.sh: 10 % of one table's rows + state
    case "$1" in
    W1) echo $((1000000 * (64 + 1) * 4 / 10)) ;;
    W3) echo $((10000000 * (128 + 128) * 4 / 10)) ;;
    esac
}
ntables() { case "$1" in W1) echo 8 ;; W3) echo 1 ;; esac; }
small() { sed -E 's/--rows [0-9]+/--rows 4096/' <<<"$1"; }
devflag=(); [ -n "$dev" ] && devflag=(--dev "$dev")
merge() { # JSON line on stdin, then key=value pairs (numbers or JSON) to add
    python3 -c '
import json, sys
line = sys.stdin.read().strip().splitlines()
d = json.loads(line[-1]) if line else {"error": "no output"}
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    try: d[k] = json.loads(v)
    except ValueError: d[k] = v
print(json.dumps(d, separators=(",", ":")))' "$@"
}

# the plain loops against ember's memory tier, once per workload's optimizer and dim
for w in $workloads; do
    "$bench" --file "$(file "$w")" $(small "$(shape "$w")") --iters 2 --warmup 1 --check 1 --workload "$w-check" |
        merge kind=check >>"$out"
done

declare -A allowance
for w in $workloads; do # the program's own memory, measured (the most over the thread counts)
    allowance[$w]=0
    for th in $mthreads; do
        drop_caches
        cg_make max
        line=$(cg_run "$bench" --file "$(file "$w")" $(small "$(shape "$w")") --threads "$th" --iters "$iters" \
            --warmup "${warmup[$w]}" --check 0 --workload "$w-allowance" || true)
        peak=$(cg_peak)
        cg_drop
        a=$(((peak + 1048575) / 1048576 * 1048576))
        [ "$a" -gt "${allowance[$w]}" ] && allowance[$w]=$a
        echo "$line" | merge kind=allowance cgroup_version=$cgv cgroup_peak_bytes="$peak" >>"$out"
        echo "mmap_baseline.sh: $w, $th threads: the program's own memory peaks at $peak bytes" >&2
    done
    echo "mmap_baseline.sh: $w: allowance ${allowance[$w]} bytes" >&2
done

for round in $(seq 1 "$rounds"); do
    for w in $workloads; do
        cb=$(cache_bytes "$w") nt=$(ntables "$w")
        budget=$((cb * nt)) limit=$((cb * nt + allowance[$w]))
        create=1
        for th in $mthreads; do
            drop_caches
            cg_make "$limit"
            rc=0
            line=$(cg_run "$bench" --file "$(file "$w")" $(shape "$w") --threads "$th" --iters "$iters" \
                --warmup "${warmup[$w]}" --check 0 --create $create --keep 1 --workload "$w-mmap-10" \
                "${devflag[@]}") || rc=$?
            echo "$line" | merge kind=mmap round="$round" exit_status=$rc cgroup_version=$cgv budget_bytes=$budget \
                allowance_bytes="${allowance[$w]}" limit_bytes=$limit cgroup_peak_bytes="$(cg_peak)" \
                cgroup_failcnt="$(cg_failcnt)" cgroup_oom_kills="$(cg_oom)" >>"$out"
            cg_drop
            create=0
        done
        rm -f "$(file "$w")"
        for written in 0 1; do
            drop_caches
            "$ember" bench $(ember_flags "$w") --threads 1 --iters "$iters" --warmup "${warmup[$w]}" --storage ssd \
                --ssd-dir "$dir" --cache-bytes "$cb" --policy lookahead --lookahead 16 --written $written \
                --workload "$w-ssd-10" | merge kind=ember round="$round" budget_bytes=$budget >>"$out"
        done
    done
done

python3 - "$out" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for w in sorted({l["workload"].split("-")[0] for l in lines if l.get("kind") == "mmap"}):
    row = {"summary": w}
    em = {}
    for wr in (False, True):
        em[wr] = [l["ms_per_iter_median"] for l in lines if l.get("kind") == "ember" and l["workload"].startswith(w + "-")
                  and l.get("written") == wr and "ms_per_iter_median" in l]
        row["ember_written_ms" if wr else "ember_ms"] = [round(x, 1) for x in em[wr]]
    for th in sorted({l["threads"] for l in lines if l.get("kind") == "mmap" and "threads" in l}):
        mm = [l["ms_per_iter_median"] for l in lines if l.get("kind") == "mmap" and l["workload"].startswith(w + "-")
              and l.get("threads") == th and "ms_per_iter_median" in l]
        row["mmap_t%d_ms" % th] = [round(x, 1) for x in mm]
        for wr in (False, True):
            if mm and em[wr]:
                row["speedup_vs_mmap_t%d%s" % (th, "_written" if wr else "")] = round(
                    statistics.median(mm) / statistics.median(em[wr]), 2)
    print(json.dumps(row))
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(row, separators=(",", ":")) + "\n")
EOF
