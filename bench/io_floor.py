#!/usr/bin/env python3
"""io_floor.py DISK_JSONL [LINES_JSONL ...]: the device's floor for the I/O a
step issues, beside the step's measured time.

DISK_JSONL: bench/disk_limits.sh's lines (fio).  LINES_JSONL: `ember bench
--storage ssd` lines (and bench_mmap_baseline's; other lines are skipped),
from stdin when no file is given.  One JSON line per measured line:

  floor_ms = read_floor_ms + write_floor_ms, the device doing one after the
  other (a lower bound on the step's time only where the step waits for both)
  read_floor_ms  = reads per step / random-read IOPS at the record's size
  write_floor_ms = appended bytes per step / sequential-write bandwidth
                   (segment appends, log-structured), or
                   random writes per step / random-write IOPS at the record's size

What is read from an ember line (the first field present wins):
  record      "record_bytes"; else computed: 4 or 2 bytes a value (precision
              fp32 or fp16/bf16) x dim + the optimizer state (sgd 0,
              rowwise_adagrad one 4-byte float, adagrad dim, adam 2 x dim,
              2 bytes each under a half state_precision)
  I/O size    under O_DIRECT (the default) the 512-byte blocks around a
              record: the record padded to 512, one block more when the store
              is a log (records packed, so one may start anywhere in a block);
              the record itself when buffered
  reads       "reads_per_iter"; else "read_bytes_per_iter" / record
  appends     "file_written_bytes_per_iter" (a store that is a log: every
              byte its segments wrote, compaction's included), at the
              sequential-write bandwidth of fio's seqwrite_4m_direct (else
              seqwrite_1m_direct)
  random      otherwise (builds that wrote rows in place): "writes_per_iter";
              else "written_bytes_per_iter" / record, at the random-write IOPS
              of the I/O size
For a bench_mmap_baseline line: reads = "majflt_per_iter" 4 KiB pages,
random writes = "io_write_bytes_per_iter" / 4096 pages (dirtied pages the
kernel writes back), both at the 4 KiB cases.

The fio case for a size is randread_<size>_direct_psync32 (32 blocking
threads: ember's I/O pool), 512, 1k or 4k; a size without a case takes the
next larger one, scaled by nothing (the device's IOPS barely change under
4 KiB).
"""
import json
import sys

SIZES = [(512, "512"), (1024, "1k"), (4096, "4k")]


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def disk_table(lines):
    return {d["case"]: d for d in lines if "case" in d}


def iops(disk, kind, size):
    """IOPS of fio's random `kind` (read, write) case of the smallest size >= size."""
    for s, name in SIZES:
        case = "rand%s_%s_direct_psync32" % (kind, name)
        if s >= size and case in disk:
            return disk[case]["iops"], case
    raise SystemExit("io_floor.py: no fio case rand%s_*_direct_psync32 for %d bytes" % (kind, size))


def seq_write_bw(disk):
    for case in ("seqwrite_4m_direct", "seqwrite_1m_direct"):
        if case in disk:
            return disk[case]["mib_per_s"] * 1048576.0, case
    raise SystemExit("io_floor.py: no fio case seqwrite_4m_direct or seqwrite_1m_direct")


def record_bytes(l):
    if "record_bytes" in l:
        return l["record_bytes"]
    dim, opt = l["dim"], l.get("optimizer", "sgd")
    half = lambda p: p in ("fp16", "bf16")
    ev = 2 if half(l.get("precision", "fp32")) else 4
    es = 2 if half(l.get("state_precision", "fp32")) else 4
    state = {"sgd": 0, "none": 0, "rowwise_adagrad": 4, "adagrad": es * dim, "adam": 2 * es * dim}[opt]
    return ev * dim + state


def floor_of(l, disk):
    out = {k: l.get(k) for k in ("workload", "kind", "round", "threads", "written", "policy", "cache_bytes")
           if k in l}
    step = l["ms_per_iter_median"]
    if l.get("bench") == "mmap_baseline":
        size, reads = 4096, l["majflt_per_iter"]
        writes = l["io_write_bytes_per_iter"] / 4096.0
        appended = None
    else:
        rec = record_bytes(l)
        log = "file_written_bytes_per_iter" in l  # a store that is a log: packed records, segment writes
        if l.get("io") == "buffered":
            size = rec
        else:  # under O_DIRECT: the 512-byte blocks around the record (a packed one may start anywhere)
            size = (rec + 511) // 512 * 512 + (512 if log else 0)
        reads = l["reads_per_iter"] if "reads_per_iter" in l else l["read_bytes_per_iter"] / rec
        appended = l["file_written_bytes_per_iter"] if log else None
        writes = None
        if appended is None:
            writes = l["writes_per_iter"] if "writes_per_iter" in l else l["written_bytes_per_iter"] / rec
    r_iops, r_case = iops(disk, "read", size)
    read_ms = reads / r_iops * 1e3
    if appended is not None:
        bw, w_case = seq_write_bw(disk)
        write_ms = appended / bw * 1e3
        out.update(write_mode="segments", appended_bytes_per_iter=round(appended))
    else:
        w_iops, w_case = iops(disk, "write", size)
        write_ms = writes / w_iops * 1e3
        out.update(write_mode="random", writes_per_iter=round(writes, 1))
    floor = read_ms + write_ms
    out.update(io_bytes=size, reads_per_iter=round(reads, 1), read_case=r_case, write_case=w_case,
               read_floor_ms=round(read_ms, 1), write_floor_ms=round(write_ms, 1), floor_ms=round(floor, 1),
               step_ms=round(step, 1), step_over_floor=round(step / floor, 2) if floor > 0 else None)
    return out


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    disk = disk_table(load(sys.argv[1]))
    lines = []
    if len(sys.argv) > 2:
        for p in sys.argv[2:]:
            lines += load(p)
    else:
        lines = [json.loads(x) for x in sys.stdin if x.strip().startswith("{")]
    for l in lines:
        ssd = l.get("storage") == "ssd" and "ms_per_iter_median" in l
        mm = l.get("bench") == "mmap_baseline" and l.get("kind", "mmap") == "mmap" and "majflt_per_iter" in l
        if ssd or mm:
            print(json.dumps(floor_of(l, disk), separators=(",", ":")))


if __name__ == "__main__":
    main()
