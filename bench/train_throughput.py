#!/usr/bin/env python3
"""train_throughput.py: `ember train` samples/s and time split, the measurements of
docs/PERFORMANCE.md, "Training".

Runs each configuration once per round, rounds interleaved, each after waiting for the
machine to be quiet (compare.py's rule), on the built-in synthetic task, and prints one
markdown row per configuration: medians over rounds of samples/s and of each phase's share
of the run, and the final AUC beside the teacher's.  The summaries (the last JSON line of
each run, tagged with round and config) go to OUT/train.jsonl.

  /usr/bin/python3 bench/train_throughput.py --ember build/ember --rounds 3 --steps 1000
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import wait_for_quiet  # noqa: E402

# (label, ranks, threads per rank, extra environment, extra arguments)
CONFIGS = [
    ("1 process, 1 thread (+ reader thread)", 1, 1, {}, []),
    ("1 process, 2 threads (BLAS 1 thread, the default)", 1, 2, {}, []),
    ("1 process, 2 threads, --blas-threads 2", 1, 2, {}, ["--blas-threads", "2"]),
    ("1 process, 2 threads, --blas-threads 2, OMP_WAIT_POLICY=passive", 1, 2, {"OMP_WAIT_POLICY": "passive"},
     ["--blas-threads", "2"]),
    ("mpirun -np 2, 1 thread each", 2, 1, {}, []),
]
PHASES = ["data", "emb_forward", "exchange", "dense", "emb_backward", "reduce", "eval"]
MPI_ENV = {"OMPI_MCA_btl": "self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def run_one(ember, ranks, threads, extra, args, steps):
    cmd = [ember, "train", "--json", "--steps", str(steps), "--threads", str(threads),
           "--plot", "none", "--metrics", "none"] + args
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", str(ranks)] + cmd
    env = dict(os.environ, **MPI_ENV, **extra)
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--out", default="bench/out/train")
    ap.add_argument("--quiet-threshold", type=float, default=0.03)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {c[0]: [] for c in CONFIGS}
    with open(os.path.join(a.out, "train.jsonl"), "w") as log:
        for r in range(a.rounds):
            for label, ranks, threads, extra, args in CONFIGS:
                busy = wait_for_quiet(30, a.quiet_threshold)
                s = run_one(a.ember, ranks, threads, extra, args, a.steps)
                s.update(round=r, config=label, others_busy=busy)
                log.write(json.dumps(s) + "\n")
                results[label].append(s)
    print("| configuration | samples/s | " + " | ".join(PHASES) + " | AUC (teacher) |")
    print("|---|---:|" + "---:|" * len(PHASES) + "---|")
    for label, runs in results.items():
        sps = statistics.median(x["samples_per_s"] for x in runs)
        shares = []
        for p in PHASES:
            shares.append(statistics.median(x["time_s"][p] / x["seconds"] for x in runs))
        auc = statistics.median(x["auc"] for x in runs)
        print(f"| {label} | {sps / 1e3:.0f}k | " + " | ".join(f"{100 * v:.0f}%" for v in shares) +
              f" | {auc:.4f} ({runs[0]['teacher_auc']:.4f}) |")


if __name__ == "__main__":
    main()
