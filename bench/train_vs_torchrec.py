#!/usr/bin/env python3
"""train_vs_torchrec.py: `ember train` on its built-in task against TorchRec training the same model, samples/s
at 1 and 2 threads, interleaved in one run (docs/PERFORMANCE.md, "Training").

  /usr/bin/python3 bench/train_vs_torchrec.py --ember build/ember --rounds 3 --steps 1000

Each round runs four configurations, each its own process, in an order that rotates from round to round, each
after waiting for the machine to be quiet (compare.py's rule):
  ember    `ember train --json --steps N --threads T --plot none --metrics none` (the built-in task and student:
           docs/training.md); samples/s is the summary's (training samples over the training loop's seconds,
           evaluation excluded; the loop includes drawing the synthetic samples and the teacher's labels, on the
           reader thread)
  ember-file the same run reading the same samples from a file made once by `ember gen --task` (OUT/
           ember_default_task.bin; the same run bit for bit, docs/training.md), so that, as TorchRec's, its loop
           generates no data
  torchrec `python_dlrm.py --task ember-default --modules torchrec --threads T --rounds 1 --steps N` in the
           TorchRec venv (bench/setup_torchrec.sh): TorchRec's EmbeddingBagCollection under
           DistributedModelParallel (world 1, gloo, CPU), every table table_wise with the fused kernel,
           element-wise Adagrad fused into backward (ember's default table optimizer), torch.optim.Adam on the
           same DLRM; torch.set_num_threads(T).  Its batches are the first --num-batches batches of ember's
           task (ember.Reader), read once before the rounds into OUT/ember_default_batches.npz, cycled; its
           timed loop (N steps after --warmup untimed ones) generates no data, so the comparison favours
           TorchRec.  Without the ember package in that venv, numpy batches of the same shapes and laws.  python_dlrm.py's docstring lists what differs from ember's model.
Prints one markdown row per configuration (median samples/s over rounds, [min-max]) and the ratio of the
medians ember / TorchRec per thread count, for each ember side (the target is >= 4); ember's lines record the
OpenBLAS kernels in use (blas_core, from the start event); every run's JSON line, tagged with round,
config and others_busy, and a summary line go to OUT/train_vs_torchrec.jsonl.  The TorchRec lines carry the
torch, torchrec and fbgemm_gpu versions and fbgemm_gpu_isa.
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_ember(a, threads, task_file=None):
    cmd = [a.ember, "train", "--json", "--steps", str(a.steps), "--threads", str(threads),
           "--plot", "none", "--metrics", "none"] + (["--train-file", task_file] if task_file else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    s = json.loads(out[-1])
    s["blas_core"] = json.loads(out[0]).get("blas_core")
    return s["samples_per_s"], s


def run_torchrec(a, threads):
    cmd = [a.python, os.path.join(REPO, "bench", "python_dlrm.py"), "--task", "ember-default",
           "--modules", "torchrec", "--threads", str(threads), "--rounds", "1", "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--num-batches", str(a.num_batches), "--data", a.data, "--batches-file", a.batches_file]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    runs = [x for x in lines if x.get("module") == "torchrec" and "samples_per_s_median" in x]
    if r.returncode or not runs:
        sys.exit(f"torchrec peer failed (exit {r.returncode}):\n{r.stderr[-3000:]}\n{r.stdout[-2000:]}")
    return runs[0]["samples_per_s_median"], runs[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--python", default=os.path.join(REPO, ".venv-torchrec", "bin", "python"),
                    help="the TorchRec venv's python (bench/setup_torchrec.sh makes it)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1000, help="optimizer steps per run, both sides")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=5, help="TorchRec's untimed steps before its timed ones")
    ap.add_argument("--num-batches", type=int, default=32, help="ember's batches TorchRec cycles through")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--quiet-threshold", type=float, default=0.03)
    ap.add_argument("--quiet-wait", type=float, default=30, help="seconds to wait for a quiet machine per run")
    a = ap.parse_args()
    if not os.path.exists(a.python):
        sys.exit(f"{a.python}: no TorchRec venv (bash bench/setup_torchrec.sh)")
    threads = [int(t) for t in a.threads.split(",") if t.strip()]
    os.makedirs(a.out, exist_ok=True)
    a.batches_file = os.path.join(a.out, "ember_default_batches.npz")
    if os.path.exists(a.batches_file):        # always the current ember package's samples
        os.remove(a.batches_file)
    a.data = "ember"
    if subprocess.run([a.python, os.path.join(REPO, "bench", "python_dlrm.py"), "--task", "ember-default",
                       "--write-ember-batches", a.batches_file, "--num-batches", str(a.num_batches)]).returncode:
        a.data = "numpy"
        print("[train_vs_torchrec] the ember package did not read the task in the TorchRec venv (bash "
              "bench/python_dlrm.sh installs it): TorchRec trains on numpy batches of the same shapes and laws",
              file=sys.stderr)
    a.task_file = os.path.join(a.out, "ember_default_task.bin")
    subprocess.run([a.ember, "gen", "--task", str(a.steps * 2048), a.task_file], check=True, stdout=subprocess.DEVNULL)
    sides = ("ember", "ember-file", "torchrec")
    configs = [(side, t) for t in threads for side in sides]
    label = {("ember", t): f"ember train, --threads {t}" + (" (+ reader thread)" if t == 1 else "")
             for t in threads}
    label.update({("ember-file", t): f"ember train --train-file (the task from a file), --threads {t}"
                  for t in threads})
    label.update({("torchrec", t): f"TorchRec, torch threads {t}" for t in threads})
    sps = {c: [] for c in configs}
    peer_info = None
    path = os.path.join(a.out, "train_vs_torchrec.jsonl")
    with open(path, "w") as log:
        for r in range(a.rounds):
            k = r % len(configs)
            for side, t in configs[k:] + configs[:k]:
                busy = wait_for_quiet(a.quiet_wait, a.quiet_threshold)
                v, rec = (run_torchrec(a, t) if side == "torchrec" else
                          run_ember(a, t, a.task_file if side == "ember-file" else None))
                if side == "torchrec":
                    peer_info = rec
                sps[(side, t)].append(v)
                rec = dict(rec, round=r, side=side, threads=t, config=label[(side, t)], others_busy=busy,
                           samples_per_s=v)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                print(f"[train_vs_torchrec] round {r + 1}/{a.rounds}: {label[(side, t)]}: {v:,.0f} samples/s"
                      + (f" (others busy {100 * busy:.0f}%)" if busy is not None else ""), file=sys.stderr, flush=True)
        print(f"| configuration | samples/s (median of {a.rounds}) | [min-max] |")
        print("|---|---:|---|")
        for c in configs:
            v = sps[c]
            print(f"| {label[c]} | {statistics.median(v):,.0f} | [{min(v):,.0f}-{max(v):,.0f}] |")
        print()
        print("| threads | ember side | ember / TorchRec (ratio of medians) | per round | target |")
        print("|---|---|---:|---|---|")
        ratios = {}
        for t in threads:
            for side in ("ember", "ember-file"):
                e, p = sps[(side, t)], sps[("torchrec", t)]
                key = f"{side} {t}"
                ratios[key] = statistics.median(e) / statistics.median(p)
                per = [x / y for x, y in zip(e, p)]
                print(f"| {t} | {side} | **{ratios[key]:.2f}** | {', '.join(f'{x:.2f}' for x in per)} | >= 4: "
                      f"{'met' if ratios[key] >= 4 else 'not met'} |")
        keys = ("torch_version", "torchrec_version", "fbgemm_gpu_version", "fbgemm_gpu_variant", "fbgemm_gpu_isa",
                "cpu_capability", "data", "optimizer", "dense_optimizer")
        info = {k: peer_info.get(k) for k in keys}
        print()
        print("TorchRec side: " + ", ".join(f"{k} {v}" for k, v in info.items()))
        log.write(json.dumps(dict(summary="ember train vs TorchRec, ratio of median samples/s",
                                  ratios={t: round(x, 3) for t, x in ratios.items()}, rounds=a.rounds, steps=a.steps,
                                  medians={label[c]: round(statistics.median(v), 1) for c, v in sps.items()},
                                  **info)) + "\n")
    os.remove(a.task_file)
    print(f"JSON lines: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
