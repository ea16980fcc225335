#!/usr/bin/env python3
"""train_threads.py: how `ember train` scales with --threads on this machine, the synthetic task and the same
task read from a file, side by side in one run (docs/PERFORMANCE.md, "Training"; docs/training.md, "Threads and
ranks per machine").

  /usr/bin/python3 bench/train_threads.py --ember build/ember --rounds 5 --steps 1000 [--threads 1,2] [--ways team,thread]

Writes the first steps*2048 samples of the built-in task once with `ember gen --task` (OUT/task.bin: training on
it is the same run as on the task itself, bit for bit), then runs, in rounds whose order rotates, each after
waiting for the machine to be quiet (compare.py's rule), every thread count on both sources:
  synthetic  `ember train --json --steps N --threads T --plot none --metrics none`
  file       the same with `--train-file OUT/task.bin`
and, for the largest thread count (all the cores: no core spare for the reader thread), also each of --ways
forced with `--reader WAY` (team: the step's threads read the batches; thread: a reader thread beside a step one
thread smaller; the default, auto, picks one by trials: docs/training.md, "Threads and ranks per machine").
Prints one markdown row per configuration: the median samples/s over rounds [min-max], the median seconds of
the phases (data: what the loop waited for its batch) per run and the median steps run with the reader thread,
then, per source, each configuration's ratio of medians to the first thread count's, with the per-round ratios.
Every summary (the run's last JSON line, tagged with round, source, threads, reader and others_busy) goes to
OUT/train_threads.jsonl.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import wait_for_quiet  # noqa: E402

PHASES = ["data", "emb_forward", "dense", "emb_backward"]


def run(a, threads, reader, task_file):
    cmd = [a.ember, "train", "--json", "--steps", str(a.steps), "--threads", str(threads), "--plot", "none",
           "--metrics", "none", "--reader", reader] + (["--train-file", task_file] if task_file else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return json.loads(out[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ways", default="team,thread", help="--reader ways also forced at the largest thread count")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--quiet-threshold", type=float, default=0.03)
    ap.add_argument("--quiet-wait", type=float, default=30)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    threads = [int(t) for t in a.threads.split(",") if t.strip()]
    task = os.path.join(a.out, "task.bin")
    subprocess.run([a.ember, "gen", "--task", str(a.steps * 2048), task], check=True, stdout=subprocess.DEVNULL)
    ways = [w for w in a.ways.split(",") if w.strip()]
    configs = [(src, t, "auto") for src in ("synthetic", "file") for t in threads]
    configs += [(src, threads[-1], w) for src in ("synthetic", "file") for w in ways]
    res = {c: [] for c in configs}
    with open(os.path.join(a.out, "train_threads.jsonl"), "w") as log:
        for r in range(a.rounds):
            for k in range(len(configs)):
                src, t, w = configs[(k + r) % len(configs)]
                busy = wait_for_quiet(a.quiet_wait, a.quiet_threshold)
                s = run(a, t, w, task if src == "file" else None)
                s.update(round=r, source=src, threads=t, reader=w, others_busy=busy)
                log.write(json.dumps(s) + "\n")
                log.flush()
                res[(src, t, w)].append(s)
    print("| source | threads | --reader | samples/s (median) | [min-max] | " +
          " | ".join(f"{p} s" for p in PHASES) + " | reader steps |")
    print("|---|---:|---|---:|---|" + "---:|" * (len(PHASES) + 1))
    for (src, t, w), runs in res.items():
        v = [x["samples_per_s"] for x in runs]
        ph = [statistics.median(x["time_s"][p] for x in runs) for p in PHASES]
        rs = statistics.median(x["reader_thread_steps"] for x in runs)
        print(f"| {src} | {t} | {w} | {statistics.median(v):,.0f} | [{min(v):,.0f}-{max(v):,.0f}] | " +
              " | ".join(f"{x:.3f}" for x in ph) + f" | {rs:.0f} |")
    print()
    for (src, t, w), runs in res.items():
        base = res[(src, threads[0], "auto")]
        if runs is base:
            continue
        m = statistics.median(x["samples_per_s"] for x in runs) / statistics.median(x["samples_per_s"] for x in base)
        per = ", ".join(f"{x['samples_per_s'] / y['samples_per_s']:.2f}" for x, y in zip(runs, base))
        print(f"{src}: --threads {t} --reader {w} / --threads {threads[0]} = {m:.2f} (per round {per})")


if __name__ == "__main__":
    main()
