"""The cost of calling ember from Python: the W2 training step (forward and
backward with fused Adagrad; 26 tables x 100,000 x 128, batch 2048, pooling
1, Zipf 1.05) through ember.Collection against the same step in C
(`ember bench`), on the same ids (ember.synthetic_batches gives `ember
bench`'s batches for the same shape and seed).  Rounds alternate C and
Python in one session; each prints a JSON line, and the last line has the
median ratio per thread count.  Target: Python at most 5 % slower.

    python bench/python_overhead.py --ember build/ember --threads 1,2 --rounds 5
"""
import argparse
import json
import statistics
import subprocess
import time

import numpy as np

import ember

W2 = dict(tables=26, rows=100_000, dim=128, batch=2048, pooling=1, alpha=1.05)


def c_round(binary, threads, iters, warmup):
    out = subprocess.run([binary, "bench", "--preset", "W2", "--optimizer", "adagrad", "--threads", str(threads),
                          "--iters", str(iters), "--warmup", str(warmup), "--lr", "0.01", "--seed", "0"],
                         capture_output=True, text=True, check=True).stdout
    line = [json.loads(l) for l in out.splitlines() if l.startswith("{")][-1]
    return line["ms_per_iter_median"]


def python_round(coll, batches, grads, iters, warmup):
    times = []
    out = np.empty((W2["batch"], W2["tables"] * W2["dim"]), np.float32)
    for n in range(warmup + iters):
        t0 = time.perf_counter()
        coll.forward(batches[n], out=out)
        coll.backward(grads[n % len(grads)])
        if n >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def per_call_us(n=3000):
    """Microseconds per forward + backward on a one-sample batch (8 one-id
    features, dim 16): the bare _ember calls, ember.Collection, and (with
    torch) ember.torch.EmbeddingBagCollection under autograd."""
    tables = [ember.TableConfig(f"t{i}", rows=1000, dim=16, optimizer=ember.Adagrad(lr=0.1)) for i in range(8)]
    features = [ember.FeatureConfig(f"f{i}", table=f"t{i}") for i in range(8)]
    keys = [f.name for f in features]
    coll = ember.Collection(tables, features, threads=1)
    lengths, ids = np.ones(8, np.int32), np.arange(8, dtype=np.int64)
    out, grad = np.empty((1, 128), np.float32), np.ones((1, 128), np.float32)
    batch = ember.JaggedBatch(keys, lengths, ids)

    def timed(step):
        for _ in range(200):
            step()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return round((time.perf_counter() - t0) / n * 1e6, 2)

    res = {"bare_us": timed(lambda: (coll._c.forward(1, lengths, ids, None, out, None), coll._c.backward(grad, None))),
           "collection_us": timed(lambda: (coll.forward(batch, out=out), coll.backward(grad)))}
    try:
        import torch
        import ember.torch as et
        ebc = et.EmbeddingBagCollection(tables, features, threads=1)
        tl, ti, tg = torch.from_numpy(lengths), torch.from_numpy(ids), torch.from_numpy(grad)
        res["module_us"] = timed(lambda: ebc(ember.JaggedBatch(keys, tl, ti)).backward(tg))
    except ImportError:
        pass
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps({"bench": "python_overhead", "per_call": "one-sample batch, forward + backward",
                      **per_call_us()}), flush=True)
    n = a.iters + a.warmup
    batches = ember.synthetic_batches(W2["tables"], W2["rows"], W2["batch"], W2["pooling"], count=n,
                                      alpha=W2["alpha"], seed=0)
    rng = np.random.default_rng(0)
    grads = [rng.uniform(-1, 1, (W2["batch"], W2["tables"] * W2["dim"])).astype(np.float32) for _ in range(2)]
    summary = {}
    for threads in map(int, a.threads.split(",")):
        tables = [ember.TableConfig(f"t{i}", rows=W2["rows"], dim=W2["dim"], optimizer=ember.Adagrad(lr=0.01))
                  for i in range(W2["tables"])]
        features = [ember.FeatureConfig(f"f{i}", table=f"t{i}") for i in range(W2["tables"])]
        coll = ember.Collection(tables, features, seed=0, threads=threads)
        ratios = []
        for r in range(a.rounds):
            c_ms = c_round(a.ember, threads, a.iters, a.warmup)
            py_ms = python_round(coll, batches, grads, a.iters, a.warmup)
            ratios.append(py_ms / c_ms)
            print(json.dumps({"bench": "python_overhead", "workload": "W2", "optimizer": "adagrad",
                              "threads": threads, "round": r, "c_ms_median": round(c_ms, 3),
                              "python_ms_median": round(py_ms, 3), "python_over_c": round(py_ms / c_ms, 4)}),
                  flush=True)
        coll.close()
        summary[threads] = statistics.median(ratios)
    print(json.dumps({"bench": "python_overhead", "summary": True, "ember_version": ember.__version__,
                      "python_over_c_median": {str(k): round(v, 4) for k, v in summary.items()},
                      "target": 1.05}))


if __name__ == "__main__":
    main()
