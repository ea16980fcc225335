#!/usr/bin/env python3
"""mpi_step.py: `ember bench` under mpirun, the measurements of docs/PERFORMANCE.md,
"Distributed step".

Runs every configuration (workload, ranks, placement, exchange) once per round, rounds
interleaved, each after waiting for the machine to be quiet (compare.py's rule: other
processes' CPU use under --quiet-threshold), and prints one markdown row per configuration:
medians over rounds of the step time (max over ranks), the exchange's time and share, bytes
sent per step per rank (max over ranks, measured and predicted by the cost model) and their
ratio.  JSON lines go to OUT/mpi.jsonl (each tagged with round and others_busy).

  /usr/bin/python3 bench/mpi_step.py --ember build/ember --rounds 5 --out bench/out/mpi
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import wait_for_quiet  # noqa: E402

# (workload, ranks, threads per rank, placement, exchange)
CONFIGS = [
    ("W1", 1, 1, "row", "rows"), ("W1", 1, 2, "row", "rows"),
    ("W1", 2, 1, "row", "rows"), ("W1", 2, 1, "row", "pooled"),
    ("W1", 4, 1, "row", "rows"), ("W1", 4, 1, "row", "pooled"),
    ("W2", 1, 1, "row", "rows"), ("W2", 1, 2, "row", "rows"),
    ("W2", 2, 1, "row", "rows"), ("W2", 2, 1, "row", "pooled"),
    ("W2", 2, 1, "column", "rows"), ("W2", 2, 1, "table", "rows"),
    ("W2", 2, 1, "table", "pooled"), ("W2", 2, 1, "replicated", "rows"),
    ("W2", 4, 1, "row", "rows"), ("W2", 4, 1, "row", "pooled"),
]

MPI_ENV = {"OMPI_MCA_btl": "self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def command(ember, wl, np_, thr, placement, exchange, optimizer, iters):
    return ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-np", str(np_),
            ember, "bench", "--preset", wl, "--optimizer", optimizer, "--threads", str(thr),
            "--placement", placement, "--exchange", exchange, "--iters", str(iters)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--workloads", default="W1,W2")
    ap.add_argument("--out", default="bench/out/mpi")
    ap.add_argument("--wait-quiet", type=float, default=60)
    ap.add_argument("--quiet-threshold", type=float, default=0.15)
    ap.add_argument("--summarize-only", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "mpi.jsonl")
    wls = a.workloads.split(",")
    configs = [c for c in CONFIGS if c[0] in wls]
    if not a.summarize_only:
        env = dict(os.environ, **MPI_ENV)
        with open(path, "w") as sink:
            for rnd in range(a.rounds):
                for c in configs:
                    cmd = command(a.ember, *c, a.optimizer, a.iters)
                    busy = wait_for_quiet(a.wait_quiet, a.quiet_threshold)
                    print(f"round {rnd}: {' '.join(cmd)}   [others busy {100 * (busy or 0):.0f}%]",
                          file=sys.stderr, flush=True)
                    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       timeout=600, env=env)
                    got = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
                    if r.returncode != 0 or not got:
                        got.append({"error": f"exit {r.returncode}: {r.stderr[-400:]}"})
                    for d in got:
                        d.update(round=rnd, others_busy=busy, cmd=" ".join(cmd))
                        sink.write(json.dumps(d) + "\n")
                    sink.flush()
    summarize(path, configs)


def summarize(path, configs):
    recs = [json.loads(ln) for ln in open(path)]
    print("| workload | ranks | thr | placement | exchange | step ms median (range) | fwd/bwd ms | "
          "exchange ms (share) | best round: step / exchange ms | sent/rank/step max: measured | "
          "predicted | ratio | sum meas/pred | others busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for wl, np_, thr, pl, ex in configs:
        rs = [r for r in recs if r.get("workload") == wl and r.get("ranks") == np_ and r.get("threads") == thr
              and r.get("placement") == pl and r.get("exchange") == ex and "error" not in r]
        if not rs:
            print(f"| {wl} | {np_} | {thr} | {pl} | {ex} | (no result) |")
            continue
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        step, comm = med("ms_per_iter_median"), med("comm_ms_median")
        sent, pred = med("bytes_sent_per_step_max"), rs[0].get("predicted_bytes_sent_per_step_max")
        spread = f"{min(r['ms_per_iter_median'] for r in rs):.1f}-{max(r['ms_per_iter_median'] for r in rs):.1f}"
        best = min(rs, key=lambda r: r["ms_per_iter_median"])  # the least disturbed round
        ratio = f"{sent / pred:.3f}" if pred else "-"
        sratio = f"{med('measured_over_predicted_sum'):.3f}" if pred else "-"
        over = " (oversubscribed)" if rs[0].get("oversubscribed") else ""
        busy = max((r.get("others_busy") or 0) for r in rs)
        print(f"| {wl} | {np_}{over} | {thr} | {pl} | {ex} | {step:.1f} ({spread}) | "
              f"{med('fwd_ms_median'):.1f}/{med('bwd_ms_median'):.1f} | {comm:.1f} ({100 * comm / step:.0f} %) | "
              f"{best['ms_per_iter_median']:.1f} / {best['comm_ms_median']:.1f} | "
              f"{sent / 1e6:.2f} MB | {(pred or 0) / 1e6:.2f} MB | {ratio} | {sratio} | {100 * busy:.0f} % |")


if __name__ == "__main__":
    main()
