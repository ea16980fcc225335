#!/usr/bin/env bash
# disk_limits.sh [DIR] [SECONDS]: the storage device's limits under the SSD
# tier's store files, with fio (installed from Debian when missing), so that
# every SSD-tier figure in docs/PERFORMANCE.md can be read as a share of
# them.  A 4 GiB test file in DIR (default .) is written, measured and
# deleted.  One JSON line per case:
#   {"case":"randread_4k_direct_qd32","iops":..,"mib_per_s":..,"lat_mean_us":..,"lat_p99_us":..,"cpu_cores":..}
# Cases: random reads of 4 KiB and of 512 bytes (one padded row record of a
# dim-64 row-wise Adagrad table) with O_DIRECT from 8 and 32 blocking threads
# (what ember's I/O pool does) and from one io_uring queue of depth 32;
# random 512-byte direct writes from 8 and 32 threads (write-backs), the
# same into space that was only reserved with fallocate; sequential
# 1 MiB reads and writes.  For bench/io_floor.py (the floor of the I/O an
# SSD-tier step issues): random 1 KiB reads and writes (a dim-128 Adagrad
# record) and 4 KiB writes (a page of the mmap baseline), 32 threads;
# sequential 4 MiB direct writes (segment appends).  CASES="name ..." runs
# only those cases (default: all).
set -euo pipefail
dir="${1:-.}"
secs="${2:-10}"
command -v fio >/dev/null || {
    sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq fio >/dev/null
}
file="$dir/ember-disk-limits.dat"
trap 'rm -f "$file"' EXIT
fio --name=prep --filename="$file" --size=4G --rw=write --bs=1M --direct=1 --ioengine=psync \
    --output-format=terse >/dev/null
want() { [ -z "${CASES:-}" ] || [[ " $CASES " == *" $1 "* ]]; }
run() { # name, fio options...
    local name="$1"; shift
    want "$name" || return 0
    fio --name="$name" --filename="$file" --size=4G --runtime="$secs" --time_based --group_reporting \
        --output-format=json "$@" | python3 -c '
import json, sys
name = sys.argv[1]
j = json.load(sys.stdin)["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
lat = d.get("clat_ns") or d.get("lat_ns")
p99 = lat.get("percentile", {}).get("99.000000", 0) / 1e3
cores = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * max(1, j.get("job options", {}).get("numjobs") and int(j["job options"]["numjobs"]) or 1)
print(json.dumps({"case": name, "iops": round(d["iops"]), "mib_per_s": round(d["bw"] / 1024, 1),
                  "lat_mean_us": round(lat["mean"] / 1e3, 1), "lat_p99_us": round(p99, 1),
                  "cpu_cores": round(cores, 2), "fio": sys.argv[2]}, separators=(",", ":")))
' "$name" "$(fio --version)"
}
run randread_4k_direct_psync8 --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=8
run randread_4k_direct_psync32 --rw=randread --bs=4k --direct=1 --ioengine=psync --numjobs=32
run randread_4k_direct_uring32 --rw=randread --bs=4k --direct=1 --ioengine=io_uring --iodepth=32
run randread_512_direct_psync8 --rw=randread --bs=512 --direct=1 --ioengine=psync --numjobs=8
run randread_512_direct_psync32 --rw=randread --bs=512 --direct=1 --ioengine=psync --numjobs=32
run randwrite_512_direct_psync8 --rw=randwrite --bs=512 --direct=1 --ioengine=psync --numjobs=8
run randwrite_512_direct_psync32 --rw=randwrite --bs=512 --direct=1 --ioengine=psync --numjobs=32
run randread_1k_direct_psync32 --rw=randread --bs=1k --direct=1 --ioengine=psync --numjobs=32
run randwrite_1k_direct_psync32 --rw=randwrite --bs=1k --direct=1 --ioengine=psync --numjobs=32
run randwrite_4k_direct_psync32 --rw=randwrite --bs=4k --direct=1 --ioengine=psync --numjobs=32
# the same into space only reserved (fallocate: unwritten extents), why store files are zero-filled
if want randwrite_512_direct_psync32_reserved; then
    rm -f "$file"
    run randwrite_512_direct_psync32_reserved --rw=randwrite --bs=512 --direct=1 --ioengine=psync --numjobs=32 \
        --fallocate=native
    rm -f "$file"
    fio --name=prep --filename="$file" --size=4G --rw=write --bs=1M --direct=1 --ioengine=psync \
        --output-format=terse >/dev/null
fi
run seqread_1m_direct --rw=read --bs=1M --direct=1 --ioengine=io_uring --iodepth=16
run seqwrite_1m_direct --rw=write --bs=1M --direct=1 --ioengine=io_uring --iodepth=16
run seqwrite_4m_direct --rw=write --bs=4M --direct=1 --ioengine=io_uring --iodepth=16
