#!/usr/bin/env python3
"""Peer benchmark: PyTorch's torch.nn.EmbeddingBag(mode='sum', sparse=True), one module per table.

Run with the Debian PyTorch (torch 1.13, `import torch` works with /usr/bin/python3), e.g.
  /usr/bin/python3 bench/peer_torch.py --preset quick --optimizer none,sgd --threads 1,2 --iters 5
  /usr/bin/python3 bench/peer_torch.py --tables 8 --rows 1000000 --dim 64 --batch 4096 --pooling 20 \\
      --dist zipf --alpha 1.05 --optimizer adagrad --threads 1 --iters 10

Flags and JSON fields follow `ember bench` and bench/peer_fbgemm.py (bench/compare.py runs all three with the
same flags): one JSON line per measurement on stdout; with comma lists every (optimizer, threads) combination
runs in a fresh child process (per-measurement peak_rss_mb).  Every table is its own
EmbeddingBag(rows, dim, mode='sum', sparse=True) with fp32 weights; a bag is `pooling` int64 ids (1-D ids and
offsets per table); the tables' pooled outputs are concatenated into the [batch x tables*dim] output that
ember writes.

  optimizer none            -> forward only under torch.no_grad()
  optimizer sgd             -> torch.optim.SGD (no momentum)
  optimizer adagrad         -> torch.optim.Adagrad       (element-wise state, same size as the table)
  optimizer adam            -> torch.optim.SparseAdam    (m and v, each the size of the table)
  optimizer rowwise_adagrad -> not available: torch has no row-wise Adagrad; a JSON line with "skipped".
  Training = forward + backward(fixed random upstream gradient) + optimizer.step() (+ zero_grad, which
  drops the gradients), with sparse gradients.  fwd_ms_median = forward (with the concatenation);
  bwd_ms_median = backward + optimizer.step() + zero_grad; step_ms_median = optimizer.step() + zero_grad.

Ids: the law and generator of bench/peer_fbgemm.py (imported from it): every table gets its own ids, freshly
drawn for every iteration (warm-up and timed batches are all different, all generated before timing).
zipf = bounded Zipf(alpha) over ranks 1..rows by rejection-inversion (Hormann & Derflinger 1996), rank k ->
row ((k-1)*2654435761) % rows; uniform = uniform over rows.  ember's own generator (ember_synth_*) draws from
the same law, not the same draws.
ids_per_s        = tables*batch*pooling / median iteration time
row_gbytes_per_s = tables*batch*pooling*dim*4 bytes / median iteration time / 1e9

Weights are filled with uniform(-init, init) before timing, so every page of the tables is real memory.
Threads: --threads sets torch.set_num_threads (reported back as "num_threads", with torch's CPU capability).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_fbgemm import (BoundedZipf, draw_ids, rss_mb, run_combos, timing_fields,  # noqa: E402  (numpy only)
                         workload_name)

PRESETS = {
    "W1": dict(tables=8, rows=1_000_000, dim=64, batch=4096, pooling=20, dist="zipf"),
    "W2": dict(tables=26, rows=100_000, dim=128, batch=2048, pooling=1, dist="zipf"),
    "W3": dict(tables=1, rows=10_000_000, dim=128, batch=8192, pooling=10, dist="uniform"),
    "quick": dict(tables=8, rows=100_000, dim=64, batch=1024, pooling=20, dist="zipf"),
}
OPTIMIZERS = ("none", "sgd", "adagrad", "rowwise_adagrad", "adam")
UNSUPPORTED = {"rowwise_adagrad": "torch has no row-wise Adagrad (torch.optim has no optimizer with one state "
                                  "value per row)"}


def est_bytes(a):
    w = a.tables * a.rows * a.dim * 4
    return {"adagrad": 2 * w, "adam": 3 * w}.get(a.optimizer, w)


def cpu_capability(torch):
    """torch.backends.cpu.get_cpu_capability() where it exists (torch >= 2.0), else the line of
    torch.__config__.show() that names it (torch 1.13)."""
    try:
        import torch.backends.cpu as tbc
        return tbc.get_cpu_capability()
    except (ImportError, AttributeError):
        pass
    for ln in torch.__config__.show().splitlines():
        if "CPU capability usage:" in ln:
            return ln.split(":", 1)[1].strip()
    return None


# ------------------------------------------------------------------------------------------------ one run
def run_one(a):
    base = dict(
        impl="torch", workload=workload_name(a), threads=a.threads, optimizer=a.optimizer,
        grad=("none" if a.optimizer == "none" else "sparse"),
        tables=a.tables, rows=a.rows, dim=a.dim, batch=a.batch, pooling=a.pooling, dist=a.dist,
        alpha=(a.alpha if a.dist == "zipf" else None),
    )
    if a.optimizer in UNSUPPORTED:
        base.update(skipped=UNSUPPORTED[a.optimizer])
        print(json.dumps(base), flush=True)
        return
    if a.optimizer not in OPTIMIZERS:
        raise SystemExit(f"unknown optimizer {a.optimizer!r} (choose from {','.join(OPTIMIZERS)})")

    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    base.update(torch_version=torch.__version__, cpu_capability=cpu_capability(torch),
                num_threads=torch.get_num_threads())
    est = est_bytes(a)
    if est > a.max_gb * 1e9:
        base.update(skipped=f"estimated {est / 1e9:.1f} GB > --max-gb {a.max_gb}")
        print(json.dumps(base), flush=True)
        return
    baseline_rss = rss_mb()
    load_before = round(os.getloadavg()[0], 2)      # the machine is shared: a hint for noisy results

    init = a.init if a.init > 0 else 1.0 / math.sqrt(a.dim)
    embs = []
    for _ in range(a.tables):
        e = torch.nn.EmbeddingBag(a.rows, a.dim, mode="sum", sparse=True)
        with torch.no_grad():
            e.weight.uniform_(-init, init)
        embs.append(e)
    params = [e.weight for e in embs]
    opt = None
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=a.lr)
    elif a.optimizer == "adagrad":
        opt = torch.optim.Adagrad(params, lr=a.lr, eps=a.eps)
    elif a.optimizer == "adam":
        opt = torch.optim.SparseAdam(params, lr=a.lr)

    rng = np.random.default_rng(a.seed)
    zipf = BoundedZipf(a.rows, a.alpha) if a.dist == "zipf" else None
    n_per_table = a.batch * a.pooling
    ids_per_iter = a.tables * n_per_table
    nb = a.warmup + a.iters
    batches, distinct = [], []
    for _ in range(nb):
        per_table = [draw_ids(a, rng, zipf) for _ in range(a.tables)]
        distinct.append(float(np.mean([np.unique(x).size for x in per_table])))
        batches.append([torch.from_numpy(x) for x in per_table])
    offsets = torch.arange(0, n_per_table, a.pooling, dtype=torch.int64)

    def forward(ids):
        return torch.cat([e(x, offsets) for e, x in zip(embs, ids)], dim=1)

    t_tot, t_f, t_b, t_s = [], [], [], []
    if opt is None:
        with torch.no_grad():
            for it in range(nb):
                t0 = time.perf_counter()
                out = forward(batches[it])
                t1 = time.perf_counter()
                if it >= a.warmup:
                    t_tot.append(t1 - t0)
                del out
    else:
        gout = torch.randn(a.batch, a.tables * a.dim)
        opt.zero_grad(set_to_none=True)
        for it in range(nb):
            t0 = time.perf_counter()
            out = forward(batches[it])
            t1 = time.perf_counter()
            out.backward(gout)                        # sparse gradients, one per table
            t2 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t3 = time.perf_counter()
            del out
            if it >= a.warmup:
                t_tot.append(t3 - t0)
                t_f.append(t1 - t0)
                t_b.append(t3 - t1)
                t_s.append(t3 - t2)

    res = dict(base)
    res.update(
        torch_optimizer=(type(opt).__name__ if opt is not None else None), pooling_mode="sum", lr=a.lr,
        eps=(a.eps if a.optimizer == "adagrad" else None),
        **timing_fields(a, t_tot, ids_per_iter, distinct, baseline_rss, load_before),
    )
    if t_f:
        res.update(
            fwd_ms_median=round(float(np.median(t_f)) * 1e3, 3),
            bwd_ms_median=round(float(np.median(t_b)) * 1e3, 3),
            step_ms_median=round(float(np.median(t_s)) * 1e3, 3),
            optimizer_fused_in_backward=False,
        )
    print(json.dumps(res), flush=True)


# ------------------------------------------------------------------------------------------------ driver
def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="W1/W2/W3/quick defaults (explicit flags override)")
    p.add_argument("--workload", default=None, help="name put in the JSON 'workload' field")
    p.add_argument("--tables", type=int)
    p.add_argument("--rows", type=int)
    p.add_argument("--dim", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--pooling", type=int)
    p.add_argument("--dist", choices=["zipf", "uniform"])
    p.add_argument("--alpha", type=float, default=1.05)
    p.add_argument("--optimizer", default="none", help="comma list of " + ",".join(OPTIMIZERS))
    p.add_argument("--grad", default="sparse", choices=["sparse"], help="gradients are always sparse")
    p.add_argument("--threads", default="1", help="comma list, e.g. 1,2")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--eps", type=float, default=1e-10, help="Adagrad eps (torch default 1e-10)")
    p.add_argument("--init", type=float, default=0.0, help="weights ~ U(-init, init); 0 -> 1/sqrt(dim)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-gb", type=float, default=20.0, help="skip a measurement whose estimated memory exceeds this")
    a = p.parse_args()
    shape = dict(PRESETS["W1"])
    if a.preset:
        shape.update(PRESETS[a.preset])
    for k, v in shape.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if min(a.tables, a.rows, a.dim, a.batch, a.pooling, a.iters) < 1 or a.warmup < 0:
        p.error("tables, rows, dim, batch, pooling and iters must be >= 1, warmup >= 0")

    run_combos(p, a, "torch", run_one, __file__)


if __name__ == "__main__":
    main()
