#!/usr/bin/env python3
"""Peer benchmark: FBGEMM_GPU's CPU table-batched embedding (TBE) with optimizers fused into backward.

Setup (once):   bash bench/setup_fbgemm.sh          -> .venv-fbgemm (torch 2.14.1 + fbgemm-gpu-cpu 1.9.0 from PyPI)
Run with the venv's python, e.g.
  .venv-fbgemm/bin/python bench/peer_fbgemm.py --preset W1 --optimizer none,rowwise_adagrad --threads 1,2
  .venv-fbgemm/bin/python bench/peer_fbgemm.py --tables 8 --rows 1000000 --dim 64 --batch 4096 --pooling 20 \
      --dist zipf --alpha 1.05 --optimizer rowwise_adagrad --threads 1 --iters 10

Flags and output follow `ember bench` and the PyTorch peer bench/peer_torch.py (bench/compare.py runs all three):
one JSON line per measurement on stdout;
with comma lists every (optimizer, threads) combination runs in a fresh child process (per-measurement
peak_rss_mb).  All tables live in one SplitTableBatchedEmbeddingBagsCodegen module,
embedding_specs = [(rows, dim, EmbeddingLocation.HOST, ComputeDevice.CPU)] * tables, PoolingMode.SUM,
fp32 weights (--precision fp16: SparseType.FP16 weights, stochastic_rounding=True, FBGEMM's way of training
half rows: the update in fp32, written back stochastically rounded), int64 indices and offsets (offsets:
tables*batch+1, table-major).

  optimizer none            -> forward only under torch.no_grad() (module built with EXACT_SGD, no state)
  optimizer sgd             -> OptimType.EXACT_SGD
  optimizer adagrad         -> OptimType.EXACT_ADAGRAD          (element-wise state, same size as the table)
  optimizer rowwise_adagrad -> OptimType.EXACT_ROWWISE_ADAGRAD  (one float of state per row)
  optimizer momentum, ftrl  -> not available (TBE has neither; a "skipped" line as for adam)
  optimizer rowwise_adam, lamb, lars
                            -> not available: PARTIAL_ROWWISE_ADAM, LAMB and LARS_SGD are CUDA-only
                               (a "skipped" line)
  optimizer adam            -> not available: FBGEMM's CPU TBE only accepts EXACT_SGD, EXACT_ADAGRAD,
                               EXACT_ROWWISE_ADAGRAD, EMAINPLACE_ROWWISE_ADAGRAD, ROWWISE_RMSPROP_AR;
                               a JSON line with "skipped" is printed.
  Training = forward + backward(fixed random upstream gradient); TBE applies the optimizer update inside
  backward (no separate step, no gradient tensor), so step_ms_median is null and bwd_ms_median includes it.

Ids: every table gets its own ids, freshly drawn for every iteration (warm-up and timed batches are all
different).  zipf = bounded Zipf(alpha) over ranks 1..rows drawn by rejection-inversion (Hormann &
Derflinger 1996), rank k -> row ((k-1)*2654435761) % rows (hot rows scattered, as in ember's ember_synth_*;
bench/peer_torch.py imports BoundedZipf and draw_ids from here, so keep this module's top level free of torch);
uniform = uniform over rows.
ids_per_s        = tables*batch*pooling / median iteration time
row_gbytes_per_s = tables*batch*pooling*dim*4 bytes / median iteration time / 1e9

Weights are filled with uniform(-init, init) before timing (TBE leaves CPU weights at zero), so every page of
the table is real memory rather than the shared zero page.

cpuinfo fix (on by default, --no-cpuinfo-fix turns it off): with torch 2.14.1 + fbgemm-gpu-cpu 1.9.0 from PyPI
there are two copies of cpuinfo (libc10.so and libtorch.so both export cpuinfo_initialize/cpuinfo_isa) and
fbgemm_gpu's own fbgemm.so ends up reading a copy that was never initialised, so its fbgemmInstructionSet()
returns anyarch and every kernel it generates is the scalar reference code (EmbeddingSpMDM_ref,
rowwise_sparse_adagrad_ref): the backward of EXACT_ROWWISE_ADAGRAD becomes ~3x slower.  The forward is not
affected (fbgemm_gpu_tbe_common.so binds to the FBGEMM inside libtorch_cpu.so, which sees AVX2).  Loading
libc10.so with RTLD_GLOBAL before `import torch` makes every library resolve to the same, initialised copy.
The ISA that fbgemm_gpu's fbgemm.so sees is reported in "fbgemm_gpu_isa".

Threads: --threads sets torch.set_num_threads, but the fbgemm-gpu-cpu 1.9.0 wheel is built without OpenMP (no
fbgemm_gpu .so references GOMP_*/omp_*), so the at::parallel_for loops in its CPU TBE kernels run on the calling
thread only: forward and backward are single-threaded whatever --threads says (measured cpu/wall = 1.00).
"""
import argparse
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

PRESETS = {
    "W1": dict(tables=8, rows=1_000_000, dim=64, batch=4096, pooling=20, dist="zipf"),
    "W2": dict(tables=26, rows=100_000, dim=128, batch=2048, pooling=1, dist="zipf"),
    "W3": dict(tables=1, rows=10_000_000, dim=128, batch=8192, pooling=10, dist="uniform"),
    "quick": dict(tables=8, rows=100_000, dim=64, batch=1024, pooling=20, dist="zipf"),
}
OPTIMIZERS = ("none", "sgd", "adagrad", "rowwise_adagrad", "adam", "momentum", "ftrl", "rowwise_adam", "lamb", "lars")
_CPU_KINDS = "(CPU accepts EXACT_SGD, EXACT_ADAGRAD, EXACT_ROWWISE_ADAGRAD, EMAINPLACE_ROWWISE_ADAGRAD, ROWWISE_RMSPROP_AR)"
UNSUPPORTED = {"adam": "FBGEMM CPU TBE has no Adam " + _CPU_KINDS,
               "momentum": "FBGEMM TBE has no SGD with momentum " + _CPU_KINDS,
               "ftrl": "FBGEMM TBE has no FTRL " + _CPU_KINDS,
               "rowwise_adam": "FBGEMM's PARTIAL_ROWWISE_ADAM is CUDA-only " + _CPU_KINDS,
               "lamb": "FBGEMM's LAMB is CUDA-only " + _CPU_KINDS,
               "lars": "FBGEMM's LARS_SGD is CUDA-only " + _CPU_KINDS}
SCATTER = 2654435761


# ------------------------------------------------------------------------------------------------ ids
class BoundedZipf:
    """Zipf(s) on {1..n}: P(k) ~ k^-s, sampled by rejection-inversion (vectorised with numpy).

    Works with the integral H(x) = (x^(1-s) - 1) / (1-s) of the hat function x^-s (H -> log x at s = 1),
    written through log1p/expm1 helpers so that s close to 1 stays accurate.
    """

    def __init__(self, n, s):
        if n < 1 or s <= 0:
            raise ValueError("BoundedZipf needs n >= 1 and s > 0")
        self.n, self.s = int(n), float(s)
        self.a = 1.0 - self.s
        self.h_lo = self._H(1.5) - 1.0          # integral bound covering k = 1 exactly
        self.h_hi = self._H(self.n + 0.5)
        self.squeeze = 2.0 - self._Hinv(self._H(2.5) - self._h(2.0))

    @staticmethod
    def _expm1_over(t):                        # (e^t - 1) / t, -> 1 at t = 0
        t = np.asarray(t, dtype=np.float64)
        small = np.abs(t) < 1e-8
        tt = np.where(small, 1.0, t)
        return np.where(small, 1.0 + t / 2.0 * (1.0 + t / 3.0 * (1.0 + t / 4.0)), np.expm1(tt) / tt)

    @staticmethod
    def _log1p_over(t):                        # log(1 + t) / t, -> 1 at t = 0
        t = np.asarray(t, dtype=np.float64)
        small = np.abs(t) < 1e-8
        tt = np.where(small, 1.0, t)
        return np.where(small, 1.0 - t * (0.5 - t * (1.0 / 3.0 - t / 4.0)), np.log1p(tt) / tt)

    def _h(self, x):
        return np.exp(-self.s * np.log(x))

    def _H(self, x):
        lx = np.log(x)
        return self._expm1_over(self.a * lx) * lx

    def _Hinv(self, y):
        t = np.maximum(y * self.a, -1.0)
        return np.exp(self._log1p_over(t) * y)

    def ranks(self, count, rng):
        out = np.empty(count, dtype=np.int64)
        done = 0
        while done < count:
            want = count - done
            u = self.h_hi + rng.random(want + want // 4 + 32) * (self.h_lo - self.h_hi)
            x = self._Hinv(u)
            k = np.clip(np.floor(x + 0.5), 1.0, float(self.n))
            keep = (k - x <= self.squeeze) | (u >= self._H(k + 0.5) - self._h(k))
            acc = k[keep][:want].astype(np.int64)
            out[done:done + acc.size] = acc
            done += acc.size
        return out


def draw_ids(a, rng, zipf):
    n = a.batch * a.pooling
    if a.dist == "zipf":
        return ((zipf.ranks(n, rng) - 1) * SCATTER) % a.rows
    return rng.integers(0, a.rows, size=n, dtype=np.int64)


# ------------------------------------------------------------------------------------------------ helpers
ISA_NAMES = {0: "anyarch (scalar reference kernels)", 1: "avx2", 2: "avx512", 3: "avx512_ymm",
             4: "avx512_vnni", 5: "avx512_vnni_ymm", 6: "sve"}


def load_c10_global():
    """Load torch's libc10.so with RTLD_GLOBAL before torch itself (see 'cpuinfo fix' above)."""
    import ctypes
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return False
    lib = os.path.join(os.path.dirname(spec.origin), "lib", "libc10.so")
    if not os.path.exists(lib):
        return False
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    return True


def fbgemm_gpu_isa(fbgemm_gpu):
    """fbgemm::fbgemmInstructionSet() as seen by fbgemm_gpu's own fbgemm.so (not torch's bundled FBGEMM)."""
    import ctypes
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(fbgemm_gpu.__file__), "fbgemm.so"))
        f = lib._ZN6fbgemm20fbgemmInstructionSetEv
        f.restype = ctypes.c_int
        v = int(f())
        return ISA_NAMES.get(v, str(v))
    except (OSError, AttributeError) as e:
        return f"unknown ({e})"


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timing_fields(a, t_tot, ids_per_iter, distinct, baseline_rss, load_before):
    """The JSON fields every peer reports from its per-iteration times (seconds)."""
    med = float(np.median(t_tot))
    return dict(
        iters=a.iters, warmup=a.warmup,
        ms_per_iter_median=round(med * 1e3, 3),
        ms_per_iter_min=round(min(t_tot) * 1e3, 3),
        ms_per_iter_max=round(max(t_tot) * 1e3, 3),
        ids_per_iter=ids_per_iter,
        ids_per_s=round(ids_per_iter / med, 1),
        row_gbytes_per_s=round(ids_per_iter * a.dim * 4 / med / 1e9, 4),
        distinct_rows_per_table_per_iter=round(float(np.mean(distinct)), 1),
        peak_rss_mb=round(rss_mb(), 1),
        baseline_rss_mb=round(baseline_rss, 1),
        loadavg_1m_before=load_before,
    )


def est_bytes(a):
    w = a.tables * a.rows * a.dim * 4
    if a.optimizer == "adagrad":
        return 2 * w
    if a.optimizer == "rowwise_adagrad":
        return w + a.tables * a.rows * 4
    return w


def workload_name(a):
    return a.workload or a.preset or f"t{a.tables}_r{a.rows}_d{a.dim}_b{a.batch}_p{a.pooling}_{a.dist}"


def fbgemm_optim(a, OptimType):
    return {"none": OptimType.EXACT_SGD, "sgd": OptimType.EXACT_SGD, "adagrad": OptimType.EXACT_ADAGRAD,
            "rowwise_adagrad": OptimType.EXACT_ROWWISE_ADAGRAD}[a.optimizer]


# ------------------------------------------------------------------------------------------------ one run
def run_one(a):
    base = dict(
        impl="fbgemm", workload=workload_name(a), threads=a.threads, optimizer=a.optimizer,
        grad=("none" if a.optimizer == "none" else "fused"),
        tables=a.tables, rows=a.rows, dim=a.dim, batch=a.batch, pooling=a.pooling, dist=a.dist,
        alpha=(a.alpha if a.dist == "zipf" else None), precision=a.precision,
    )
    if a.precision == "fp16":
        base.update(rounding="stochastic")
    if a.optimizer in UNSUPPORTED:
        base.update(skipped=UNSUPPORTED[a.optimizer])
        print(json.dumps(base), flush=True)
        return
    if a.optimizer not in OPTIMIZERS:
        raise SystemExit(f"unknown optimizer {a.optimizer!r} (choose from {','.join(OPTIMIZERS)})")

    fix = load_c10_global() if a.cpuinfo_fix else False
    import torch
    import fbgemm_gpu
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen, ComputeDevice)
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
        EmbeddingLocation, PoolingMode, BoundsCheckMode)
    from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
    from fbgemm_gpu.split_embedding_configs import SparseType

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    base.update(torch_version=torch.__version__, fbgemm_version=fbgemm_gpu.__version__,
                cpuinfo_fix=fix, fbgemm_gpu_isa=fbgemm_gpu_isa(fbgemm_gpu))
    est = est_bytes(a)
    if est > a.max_gb * 1e9:
        base.update(skipped=f"estimated {est / 1e9:.1f} GB > --max-gb {a.max_gb}")
        print(json.dumps(base), flush=True)
        return
    baseline_rss = rss_mb()
    load_before = round(os.getloadavg()[0], 2)      # the machine is shared: a hint for noisy results

    optim = fbgemm_optim(a, OptimType)
    bounds = {"warning": BoundsCheckMode.WARNING, "none": BoundsCheckMode.NONE,
              "fatal": BoundsCheckMode.FATAL}[a.bounds_check]
    emb = SplitTableBatchedEmbeddingBagsCodegen(
        [(a.rows, a.dim, EmbeddingLocation.HOST, ComputeDevice.CPU) for _ in range(a.tables)],
        optimizer=optim, learning_rate=a.lr, eps=a.eps, pooling_mode=PoolingMode.SUM,
        bounds_check_mode=bounds, weights_precision=SparseType.FP16 if a.precision == "fp16" else SparseType.FP32,
        stochastic_rounding=True)
    init = a.init if a.init > 0 else 1.0 / math.sqrt(a.dim)
    with torch.no_grad():
        for w in emb.split_embedding_weights():     # views into weights_host
            w.uniform_(-init, init)

    rng = np.random.default_rng(a.seed)
    zipf = BoundedZipf(a.rows, a.alpha) if a.dist == "zipf" else None
    n_per_table = a.batch * a.pooling
    ids_per_iter = a.tables * n_per_table
    nb = a.warmup + a.iters
    batches, distinct = [], []
    for _ in range(nb):
        per_table = [draw_ids(a, rng, zipf) for _ in range(a.tables)]
        distinct.append(float(np.mean([np.unique(x).size for x in per_table])))
        batches.append(torch.from_numpy(np.concatenate(per_table)))
    offsets = torch.arange(0, ids_per_iter + 1, a.pooling, dtype=torch.int64)

    t_tot, t_f, t_b = [], [], []
    if a.optimizer == "none":
        emb.eval()
        with torch.no_grad():
            for it in range(nb):
                t0 = time.perf_counter()
                out = emb(batches[it], offsets)
                t1 = time.perf_counter()
                if it >= a.warmup:
                    t_tot.append(t1 - t0)
                del out
    else:
        gout = torch.randn(a.batch, a.tables * a.dim)
        for it in range(nb):
            t0 = time.perf_counter()
            out = emb(batches[it], offsets)
            t1 = time.perf_counter()
            out.backward(gout)                        # fused optimizer update happens here
            t2 = time.perf_counter()
            del out
            if it >= a.warmup:
                t_tot.append(t2 - t0)
                t_f.append(t1 - t0)
                t_b.append(t2 - t1)

    res = dict(base)
    res.update(
        fbgemm_optimizer=optim.name, pooling_mode="sum", lr=a.lr, eps=a.eps, bounds_check=a.bounds_check,
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        **timing_fields(a, t_tot, ids_per_iter, distinct, baseline_rss, load_before),
    )
    if t_f:
        res.update(
            fwd_ms_median=round(float(np.median(t_f)) * 1e3, 3),
            bwd_ms_median=round(float(np.median(t_b)) * 1e3, 3),
            step_ms_median=None,
            optimizer_fused_in_backward=True,
        )
    print(json.dumps(res), flush=True)


# ------------------------------------------------------------------------------------------------ driver
def drop_flags(argv, flags):
    out, i = [], 0
    while i < len(argv):
        x = argv[i]
        if x in flags:
            i += 2
            continue
        if any(x.startswith(f + "=") for f in flags):
            i += 1
            continue
        out.append(x)
        i += 1
    return out


def run_combos(p, a, impl, run_one, script):
    """The (optimizer, threads) combinations of a's comma lists: one runs here, several each run
    in a fresh child process of script (per-measurement peak RSS); a failed child gets an error line."""
    opts = [o.strip() for o in a.optimizer.split(",") if o.strip()]
    for o in opts:
        if o not in OPTIMIZERS:
            p.error(f"unknown optimizer {o!r} (choose from {','.join(OPTIMIZERS)})")
    thr = [int(t) for t in a.threads.split(",") if t.strip()]
    combos = list(dict.fromkeys(itertools.product(opts, thr)))
    if len(combos) == 1:
        a.optimizer, a.threads = combos[0]
        run_one(a)
        return
    rest = drop_flags(sys.argv[1:], ("--optimizer", "--threads"))
    failed = 0
    for o, t in combos:
        cmd = [sys.executable, os.path.abspath(script)] + rest + ["--optimizer", o, "--threads", str(t)]
        r = subprocess.run(cmd)
        if r.returncode != 0:
            failed += 1
            print(json.dumps(dict(impl=impl, workload=workload_name(a), optimizer=o, threads=t,
                                  error=f"exit {r.returncode}")), flush=True)
    sys.exit(1 if failed else 0)


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
    p.add_argument("--grad", default="fused", help="accepted for compatibility with the torch peer; ignored")
    p.add_argument("--threads", default="1", help="comma list, e.g. 1,2")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--eps", type=float, default=1e-8, help="Adagrad eps (FBGEMM default 1e-8)")
    p.add_argument("--init", type=float, default=0.0, help="weights ~ U(-init, init); 0 -> 1/sqrt(dim)")
    p.add_argument("--bounds-check", choices=["warning", "none", "fatal"], default="warning",
                   help="TBE bounds_check_mode (library default WARNING runs a bounds check every forward)")
    p.add_argument("--no-cpuinfo-fix", dest="cpuinfo_fix", action="store_false",
                   help="do not load libc10.so RTLD_GLOBAL first (out-of-the-box behaviour: fbgemm_gpu's "
                        "fbgemm.so falls back to scalar reference kernels on this install)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", choices=["fp32", "fp16"], default="fp32",
                   help="weights precision (fp16: SparseType.FP16, stochastic rounding)")
    p.add_argument("--max-gb", type=float, default=20.0, help="skip a measurement whose estimated memory exceeds this")
    a = p.parse_args()
    shape = dict(tables=8, rows=1_000_000, dim=64, batch=4096, pooling=20, dist="zipf")
    if a.preset:
        shape.update(PRESETS[a.preset])
    for k, v in shape.items():
        if getattr(a, k) is None:
            setattr(a, k, v)

    run_combos(p, a, "fbgemm", run_one, __file__)


if __name__ == "__main__":
    main()
