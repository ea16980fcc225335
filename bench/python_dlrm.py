#!/usr/bin/env python3
"""Python DLRM benchmark: one PyTorch DLRM training loop, three embedding modules on the same batches.

Setup and a full run:   bash bench/python_dlrm.sh          (venv .venv-torchrec, ember from ./python, JSON lines
                                                            to bench/out/python_dlrm.jsonl)
By hand, in any venv that has torch (torchrec and ember are each optional; a missing one prints a "skipped" line):
  .venv-torchrec/bin/python bench/python_dlrm.py --modules torchrec,torch_sparse,ember --threads 1,2 \
      --rounds 5 --steps 20
`ember train`'s built-in task, TorchRec only (bench/train_vs_torchrec.py runs it beside `ember train`):
  .venv-torchrec/bin/python bench/python_dlrm.py --task ember-default --threads 1,2 --rounds 3 --steps 1000

Model (identical dense part for every module, same initial dense weights):
  dense  [B, 13] -> bottom MLP 13 -> 64 -> 16 (ReLU)
  sparse 8 features f0..f7, each with its own table t0..t7 of 100_000 rows x dim 16, sum pooling -> [B, 8*16]
  dot interaction over the 9 vectors (bottom output + 8 pooled embeddings): the 36 pairwise dots (i < j),
  concatenated with the bottom output -> top MLP 52 -> 64 -> 1 -> BCE with logits
  dense optimizer torch.optim.Adagrad(lr 0.01) over the MLPs; embedding optimizer Adagrad lr 0.1 eps 1e-8
  (element-wise: s += g*g, w -= lr * g / (sqrt(s) + eps)), weights ~ U(-0.05, 0.05).
Modules (--modules):
  torchrec      torchrec.EmbeddingBagCollection built on the meta device, optimizer fused into backward with
                torch.distributed.optim._apply_optimizer_in_backward(torch.optim.Adagrad, ...) (TorchRec's
                documented way; torchrec.optim.apply_optimizer_in_backward is its deprecated alias), sharded by
                DistributedModelParallel at world 1 on CPU (gloo, file:// store) with an explicit plan: every
                table table_wise on rank 0 with the "fused" compute kernel, i.e. one FBGEMM TBE with
                EXACT_ADAGRAD whose update runs inside backward.  (TorchRec's planner left alone picks
                data_parallel + the "dense" kernel here, which is not the fused path.)
  torchrec_rowwise  the same with torchrec.optim.RowWiseAdagrad -> EXACT_ROWWISE_ADAGRAD (one state float per
                row; a different optimizer, not comparable 1:1; not in the default --modules)
  torch_sparse  one nn.EmbeddingBag(rows, 16, mode="sum", sparse=True) per table + torch.optim.Adagrad(lr 0.1,
                eps 1e-8) over them (sparse gradients; the optimizer step is separate from backward)
  ember         ember.torch.EmbeddingBagCollection(tables, features, threads=T, seed=0), ember's Adagrad fused
                into backward; input ember.JaggedBatch (lengths int32 [F*B] feature-major, values int64)
Only the embedding module differs; its output [B, 128] feeds the same DLRM dense part.

Batches: --num-batches batches are generated once (numpy, seed --seed) and reused by every module in the same
order; each module's input format (KeyedJaggedTensor / per-table values+offsets / JaggedBatch) is built from
them once, before timing.  Batch 2048; features f0..f3 one id per bag, f4..f7 uniform 4..12 ids per bag
(mean 8); ids bounded Zipf(alpha 1.05) over the rows, rank k -> row ((k-1)*2654435761) % rows (hot rows
scattered; as bench/peer_fbgemm.py); 13 dense floats ~ N(0,1); labels drawn from a fixed logistic model of
the dense features.

Timing: every (module, threads) pair is its own model instance.  After --warmup steps each, --rounds rounds
run; in each round every instance runs --steps training steps (forward, loss, backward, optimizer steps) with
torch.set_num_threads(T), the order of instances rotating from round to round, so that all modules share the
machine's state (frequency, other load) over the same period.  samples/s of a round = steps * batch / time;
one JSON line per (module, threads) with the median and min over rounds, then a last line with the ratios of
the medians (ember/torchrec, ember/torch_sparse, torchrec/torch_sparse) per thread count.

--task ember-default: the TorchRec peer of `ember train` on its built-in task (bench/train_vs_torchrec.py runs
both, interleaved).  The model is ember's default student (src/config/config_file.c cfg_train_default,
docs/training.md "The loop"), as closely as TorchRec allows:
  tables  8, one per feature, rows 20000, 10000, 5000, 2000, 1000, 500, 200, 100 (38,800), dim 16, sum pooling,
          weights ~ U(-0.05, 0.05)
  ids     bag of feature f = 1 + Poisson(pooling[f] - 1) ids, pooling = 1, 1, 3, 1, 2, 1, 1, 1 (11 ids per
          sample on average, ~22,500 per batch); bounded Zipf(1.1) ranks scattered over the table
          (rank k -> row ((k-1)*2654435761) % rows); 13 dense floats ~ N(0,1); labels from ember's hidden teacher
          (about 25% clicks)
  dense   bottom MLP 13 -> 64 -> 16 (ReLU after both), dot interaction (36 pairs), top MLP 52 -> 64 -> 1, Glorot
          uniform weights and zero biases, mean BCE with logits; torch.optim.Adam(lr 0.004, betas 0.9/0.999,
          eps 1e-8) on the dense part
  tables' optimizer  element-wise Adagrad lr 0.1 eps 1e-8 (ember's default is EMBER_OPT_ADAGRAD, not row-wise):
          module torchrec, i.e. torch.optim.Adagrad fused into backward -> FBGEMM EXACT_ADAGRAD;
          torchrec_rowwise (EXACT_ROWWISE_ADAGRAD) can be asked for, but is not ember's default
  batch   2048, micro-batch = optimizer step
Data (--data): "ember" (default) takes the first --num-batches batches of the built-in task's training stream
from ember.Reader (the samples `ember train` reads first, teacher labels included), read by a child process of
this interpreter (so ember's library is never loaded into the timed process) and kept in --batches-file
(.npz; reused when it exists); "numpy" draws batches of the same shapes and laws with numpy (labels from a fixed
logistic model of the dense features, 25% clicks) when the ember package is missing.  Either way the batches
and TorchRec's KeyedJaggedTensors are made before timing and cycled, so TorchRec's timed loop does NOT generate
data, while `ember train`'s timed loop includes generating its own synthetic data, teacher labels included (its
reader thread: on the spare core at --threads 1, on the critical path at --threads 2).  The comparison
therefore favours TorchRec.

ISA: "cpu_capability" is torch's ATen dispatch level; "fbgemm_gpu_isa" is what fbgemm_gpu's own fbgemm.so
detects.  With PyPI's torch 2.14.1 + fbgemm-gpu-cpu 1.9.0 that is "anyarch" (scalar reference kernels) on a
plain import, because of two cpuinfo copies (see "cpuinfo fix" in bench/peer_fbgemm.py); like peer_fbgemm.py
this script loads libc10.so RTLD_GLOBAL before importing torch (--no-cpuinfo-fix: out-of-the-box behaviour).
Threads: the fbgemm-gpu-cpu wheel is built without OpenMP, so TorchRec's TBE forward/backward run on the
calling thread whatever torch.set_num_threads says; only the dense part and the input handling use T threads.
"""
import argparse
import gc
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.dont_write_bytecode = True             # no bench/__pycache__ (not git-ignored) from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_fbgemm import SCATTER, BoundedZipf, fbgemm_gpu_isa, load_c10_global  # noqa: E402

MODULES = ("torchrec", "torchrec_rowwise", "torch_sparse", "ember")
DENSE_IN = 13
TASKS = ("bench", "ember-default")
# `ember train`'s built-in task (src/data/ctr_synth.c ctr_synth_config_default, src/config/config_file.c
# cfg_train_default): rows and mean bag length of each feature, its Zipf exponent and the student's settings
EMBER_ROWS = (20000, 10000, 5000, 2000, 1000, 500, 200, 100)
EMBER_POOL = (1, 1, 3, 1, 2, 1, 1, 1)
EMBER_DEFAULTS = dict(features=8, dim=16, batch=2048, alpha=1.1, lr=0.1, eps=1e-8, init=0.05,
                      dense_optimizer="adam", dense_lr=0.004, modules="torchrec", num_batches=32)
BENCH_DEFAULTS = dict(features=8, dim=16, batch=2048, alpha=1.05, lr=0.1, eps=1e-8, init=0.05,
                      dense_optimizer="adagrad", dense_lr=0.01, modules="torchrec,torch_sparse,ember",
                      num_batches=16)


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------------------------------ batches
class Batch:
    """One batch, module-neutral: dense [B,13] float32, labels [B,1] float32, lengths int32 [F*B]
    feature-major, values int64 (feature-major, bag after bag), per-feature value spans."""

    def __init__(self, dense, labels, lengths, values, spans):
        self.dense, self.labels, self.lengths, self.values, self.spans = dense, labels, lengths, values, spans


def make_batches(a, torch):
    if a.task == "ember-default":
        return make_ember_default_batches(a, torch)
    rng = np.random.default_rng(a.seed)
    zipf = BoundedZipf(a.rows, a.alpha)
    w_true = rng.standard_normal(DENSE_IN) / np.sqrt(DENSE_IN)
    out, ids = [], []
    for _ in range(a.num_batches):
        lengths = np.empty((a.features, a.batch), dtype=np.int32)
        vals, spans, pos = [], [], 0
        for f in range(a.features):
            if f < a.one_hot:
                lengths[f] = 1
            else:
                lengths[f] = rng.integers(a.pool_min, a.pool_max + 1, size=a.batch)
            n = int(lengths[f].sum())
            vals.append(((zipf.ranks(n, rng) - 1) * SCATTER) % a.rows)
            spans.append((pos, pos + n))
            pos += n
        dense = rng.standard_normal((a.batch, DENSE_IN)).astype(np.float32)
        p = 1.0 / (1.0 + np.exp(-(dense @ w_true)))
        labels = (rng.random(a.batch) < p).astype(np.float32)[:, None]
        out.append(Batch(torch.from_numpy(dense), torch.from_numpy(labels),
                         torch.from_numpy(lengths.reshape(-1).copy()),
                         torch.from_numpy(np.concatenate(vals).astype(np.int64)), spans))
        ids.append(pos)
    return out, float(np.mean(ids))


def write_ember_batches(path, num_batches, batch):
    """Child process: the first num_batches batches of `ember train`'s built-in task (ember.Reader(), its
    training stream) into path (.npz).  Imports ember, not torch."""
    import ember
    r = ember.Reader()
    labels, dense, lengths, values, counts = [], [], [], [], []
    for s in r.batches(batch, limit=num_batches):
        if s.batch_size != batch:
            sys.exit(f"ember.Reader gave a batch of {s.batch_size}, wanted {batch}")
        labels.append(s.labels)
        dense.append(s.dense)
        lengths.append(s.sparse.lengths)
        values.append(s.sparse.values)
        counts.append(s.sparse.values.size)
    r.close()
    tmp = path + ".tmp.npz"
    np.savez(tmp, labels=np.stack(labels), dense=np.stack(dense), lengths=np.stack(lengths),
             values=np.concatenate(values), counts=np.array(counts, dtype=np.int64),
             rows=np.array([f[1] for f in r.features], dtype=np.int64),
             ember_version=np.array(getattr(ember, "__version__", "unknown")))
    os.replace(tmp, path)


def ember_batches_arrays(a):
    """(labels [K,B], dense [K,B,13], lengths [K,F*B] feature-major, values per batch, source) of the task."""
    F, B, K = a.features, a.batch, a.num_batches
    if a.data == "ember":
        path, tmpdir = a.batches_file, None
        if not path:
            tmpdir = tempfile.mkdtemp(prefix="python_dlrm_batches.")
            path = os.path.join(tmpdir, "batches.npz")
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.abspath(__file__), "--write-ember-batches", path,
                            "--num-batches", str(K), "--batch", str(B)], check=True)
        z = np.load(path)
        if tmpdir:
            import shutil
            shutil.rmtree(tmpdir, ignore_errors=True)
        if (z["labels"].shape != (z["labels"].shape[0], B) or z["labels"].shape[0] < K
                or tuple(int(r) for r in z["rows"]) != EMBER_ROWS):
            sys.exit(f"{path}: not {K} batches of {B} of the built-in task (delete it to read them again)")
        ends = np.cumsum(z["counts"])
        vals = np.split(z["values"], ends[:-1])
        return (z["labels"][:K], z["dense"][:K], z["lengths"][:K], vals[:K],
                f"ember.Reader (ember {z['ember_version']}), {path if a.batches_file else 'temporary file'}")
    rng = np.random.default_rng(a.seed)
    zipf = [BoundedZipf(r, a.alpha) for r in EMBER_ROWS]
    w_true = rng.standard_normal(DENSE_IN) / np.sqrt(DENSE_IN)
    labels, dense, lengths, vals = [], [], [], []
    bias = None
    for _ in range(K):
        ln = np.empty((F, B), dtype=np.int32)
        v = []
        for f in range(F):
            ln[f] = 1 + rng.poisson(EMBER_POOL[f] - 1.0, size=B)
            v.append(((zipf[f].ranks(int(ln[f].sum()), rng) - 1) * SCATTER) % EMBER_ROWS[f])
        d = rng.standard_normal((B, DENSE_IN)).astype(np.float32)
        z = 1.75 * (d @ w_true) / max(float(np.std(d @ w_true)), 1e-6)
        if bias is None:                       # 25% clicks, as ember's task's ctr_rate
            lo, hi = -10.0, 10.0
            for _ in range(60):
                bias = (lo + hi) / 2
                lo, hi = (bias, hi) if np.mean(1 / (1 + np.exp(-(z + bias)))) < 0.25 else (lo, bias)
        labels.append((rng.random(B) < 1 / (1 + np.exp(-(z + bias)))).astype(np.float32))
        dense.append(d)
        lengths.append(ln.reshape(-1))
        vals.append(np.concatenate(v).astype(np.int64))
    return np.stack(labels), np.stack(dense), np.stack(lengths), vals, "numpy (same shapes and laws)"


def make_ember_default_batches(a, torch):
    labels, dense, lengths, vals, a.data_source = ember_batches_arrays(a)
    B, out = a.batch, []
    for k in range(a.num_batches):
        per = lengths[k].reshape(a.features, B).sum(axis=1)
        ends = np.cumsum(per)
        spans = [(int(e - n), int(e)) for n, e in zip(per, ends)]
        out.append(Batch(torch.from_numpy(np.ascontiguousarray(dense[k], dtype=np.float32)),
                         torch.from_numpy(np.ascontiguousarray(labels[k], dtype=np.float32)[:, None]),
                         torch.from_numpy(np.ascontiguousarray(lengths[k], dtype=np.int32)),
                         torch.from_numpy(np.ascontiguousarray(vals[k], dtype=np.int64)), spans))
    return out, float(np.mean([v.size for v in vals]))


# ------------------------------------------------------------------------------------------------ dense part
def make_dlrm(a, torch):
    nn = torch.nn

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE_IN, 64), nn.ReLU(), nn.Linear(64, a.dim), nn.ReLU())
            n = a.features + 1
            self.top = nn.Sequential(nn.Linear(a.dim + n * (n - 1) // 2, 64), nn.ReLU(), nn.Linear(64, 1))
            li, lj = torch.triu_indices(n, n, offset=1)
            self.register_buffer("li", li, persistent=False)
            self.register_buffer("lj", lj, persistent=False)

        def forward(self, dense, pooled):
            x = self.bottom(dense)                                     # [B, D]
            z = torch.cat([x.unsqueeze(1), pooled.view(-1, a.features, a.dim)], dim=1)   # [B, F+1, D]
            inter = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]                  # [B, (F+1)F/2]
            return self.top(torch.cat([x, inter], dim=1))

    torch.manual_seed(a.seed)                  # every module starts from the same dense weights
    m = DLRM()
    if a.task == "ember-default":              # ember's init: Glorot uniform weights, zero biases
        with torch.no_grad():
            for layer in m.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.xavier_uniform_(layer.weight)
                    nn.init.zeros_(layer.bias)
    return m


# ------------------------------------------------------------------------------------------------ modules
class TorchSparse:
    def __init__(self, a, threads, torch):
        self.torch = torch
        g = torch.Generator().manual_seed(a.seed)
        self.bags = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(a.table_rows[i], a.dim, mode="sum", sparse=True) for i in range(a.features))
        with torch.no_grad():
            for b in self.bags:
                b.weight.uniform_(-a.init, a.init, generator=g)
        self.opt = torch.optim.Adagrad(self.bags.parameters(), lr=a.lr, eps=a.eps)
        self.info = dict(optimizer="torch.optim.Adagrad over sparse gradients (step after backward)",
                         embedding="nn.EmbeddingBag(mode='sum', sparse=True) x %d" % a.features)

    def prepare(self, b):
        B = b.labels.shape[0]
        out = []
        for f, (lo, hi) in enumerate(b.spans):
            lens = b.lengths[f * B:(f + 1) * B].to(self.torch.int64)
            offsets = self.torch.zeros(B, dtype=self.torch.int64)
            offsets[1:] = self.torch.cumsum(lens, 0)[:-1]
            out.append((b.values[lo:hi], offsets))
        return out

    def forward(self, p):
        return self.torch.cat([bag(v, o) for bag, (v, o) in zip(self.bags, p)], dim=1)

    def zero_grad(self):
        self.opt.zero_grad(set_to_none=True)

    def step(self):
        self.opt.step()


class TorchRecEBC:
    def __init__(self, a, threads, torch, rowwise=False):
        import torchrec
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor, PoolingType
        from torchrec.distributed.model_parallel import DistributedModelParallel
        from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
        from torchrec.distributed.types import ShardingPlan
        from torch.distributed.optim import _apply_optimizer_in_backward as apply_optimizer_in_backward
        self.torch, self.KJT = torch, KeyedJaggedTensor
        self.keys = [f"f{i}" for i in range(a.features)]
        tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=a.dim, num_embeddings=a.table_rows[i],
                                     feature_names=[f"f{i}"], pooling=PoolingType.SUM) for i in range(a.features)]
        ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
        opt_cls = torchrec.optim.RowWiseAdagrad if rowwise else torch.optim.Adagrad
        apply_optimizer_in_backward(opt_cls, ebc.parameters(), {"lr": a.lr, "eps": a.eps})
        plan = construct_module_sharding_plan(
            ebc, {t.name: table_wise(rank=0, device="cpu", compute_kernel="fused") for t in tables},
            local_size=1, world_size=1, device_type="cpu")
        self.model = DistributedModelParallel(ebc, device=torch.device("cpu"), plan=ShardingPlan({"": plan}))
        g = torch.Generator().manual_seed(a.seed)
        with torch.no_grad():
            for name, t in self.model.state_dict().items():
                if name.endswith(".weight"):
                    for s in (t.local_shards() if hasattr(t, "local_shards") else []):
                        s.tensor.uniform_(-a.init, a.init, generator=g)
        # the FBGEMM TBE modules that do the work (ShardedEmbeddingBagCollection._lookups is a plain list)
        tbes = [m for lk in getattr(self.model.module, "_lookups", []) for m in lk.modules()
                if type(m).__name__ == "SplitTableBatchedEmbeddingBagsCodegen"]
        try:
            from fbgemm_gpu.split_table_batched_embeddings_ops_common import BoundsCheckMode
            bc = {int(v.value): v.name for v in BoundsCheckMode}
        except Exception:
            bc = {}
        self.info = dict(
            optimizer=(f"{opt_cls.__module__}.{opt_cls.__name__} fused into backward -> FBGEMM "
                       + ",".join(sorted({str(getattr(m, 'optimizer', '?')) for m in tbes}))),
            embedding=f"torchrec EBC under DMP world 1 (gloo), table_wise/fused, {len(tbes)} TBE module(s)",
            tbe_bounds_check=",".join(sorted({bc.get(getattr(m, "bounds_check_mode_int", None), "?")
                                              for m in tbes})),
        )

    def prepare(self, b):
        return self.KJT(keys=self.keys, values=b.values, lengths=b.lengths)

    def forward(self, kjt):
        out = self.model(kjt)
        if hasattr(out, "wait"):
            out = out.wait()
        return out.values()

    def zero_grad(self):
        pass

    def step(self):
        pass


class EmberEBC:
    def __init__(self, a, threads, torch):
        import ember
        import ember.torch
        self.ember = ember
        self.keys = [f"f{i}" for i in range(a.features)]
        opt = ember.Adagrad(lr=a.lr, eps=a.eps)
        tables = [ember.TableConfig(f"t{i}", rows=a.table_rows[i], dim=a.dim, optimizer=opt, init="uniform", init_value=a.init)
                  for i in range(a.features)]
        features = [ember.FeatureConfig(f"f{i}", table=f"t{i}", pooling="sum") for i in range(a.features)]
        self.ebc = ember.torch.EmbeddingBagCollection(tables, features, threads=threads, seed=a.seed)
        self.info = dict(optimizer="ember Adagrad fused into backward",
                         embedding=f"ember.torch.EmbeddingBagCollection(threads={threads})")

    def prepare(self, b):
        return self.ember.JaggedBatch(keys=self.keys, lengths=b.lengths, values=b.values, weights=None)

    def forward(self, batch):
        return self.ebc(batch)

    def zero_grad(self):
        pass

    def step(self):
        pass


# ------------------------------------------------------------------------------------------------ one instance
class Instance:
    def __init__(self, name, threads, sparse, dlrm, dense_opt, inputs, batches):
        self.name, self.threads, self.sparse, self.dlrm, self.dense_opt = name, threads, sparse, dlrm, dense_opt
        self.inputs, self.batches, self.cursor = inputs, batches, 0
        self.times, self.loss_first, self.loss_last = [], None, None

    def run(self, steps, torch, embedding_only=None):
        """embedding_only: a fixed [B, F*dim] tensor; the loss is then
        sum(pooled * it), so only the embedding module's forward, backward
        and optimizer are timed (the dense model is skipped)."""
        F = torch.nn.functional
        loss = None
        for _ in range(steps):
            i = self.cursor % len(self.batches)
            self.cursor += 1
            b = self.batches[i]
            pooled = self.sparse.forward(self.inputs[i])
            if embedding_only is not None:
                loss = (pooled * embedding_only).sum()
            else:
                loss = F.binary_cross_entropy_with_logits(self.dlrm(b.dense, pooled), b.labels)
            self.dense_opt.zero_grad(set_to_none=True)
            self.sparse.zero_grad()
            loss.backward()
            self.dense_opt.step()
            self.sparse.step()
            if self.loss_first is None:
                self.loss_first = loss.detach().item()
        self.loss_last = loss.detach().item()


def build(name, a, threads, torch, batches):
    if name == "torch_sparse":
        sparse = TorchSparse(a, threads, torch)
    elif name == "torchrec":
        sparse = TorchRecEBC(a, threads, torch)
    elif name == "torchrec_rowwise":
        sparse = TorchRecEBC(a, threads, torch, rowwise=True)
    elif name == "ember":
        sparse = EmberEBC(a, threads, torch)
    else:
        raise ValueError(name)
    dlrm = make_dlrm(a, torch)
    if a.dense_optimizer == "adam":
        dense_opt = torch.optim.Adam(dlrm.parameters(), lr=a.dense_lr, betas=(0.9, 0.999), eps=1e-8)
    else:
        dense_opt = torch.optim.Adagrad(dlrm.parameters(), lr=a.dense_lr)
    inputs = [sparse.prepare(b) for b in batches]
    return Instance(name, threads, sparse, dlrm, dense_opt, inputs, batches)


# ------------------------------------------------------------------------------------------------ main
def quiet():
    """TorchRec's planner/DMP and torch.fx print several warnings per module built (see --verbose)."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    for k, v in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1").items():
        os.environ.setdefault(k, v)


def versions(torch, fix, with_ember=True):
    """with_ember False: ember's version is not asked (importing it would load its library into this process)."""
    v = dict(torch_version=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
             cpuinfo_fix=fix, ember_version=None)
    for mod, key in (("torchrec", "torchrec_version"), ("ember", "ember_version")):
        if mod == "ember" and not with_ember:
            continue
        try:
            m = __import__(mod)
            v[key] = getattr(m, "__version__", "unknown")
        except Exception:
            v[key] = None
    try:
        import fbgemm_gpu
        v.update(fbgemm_gpu_version=fbgemm_gpu.__version__, fbgemm_gpu_variant=getattr(fbgemm_gpu, "__variant__", None),
                 fbgemm_gpu_isa=fbgemm_gpu_isa(fbgemm_gpu))
    except Exception:
        v.update(fbgemm_gpu_version=None, fbgemm_gpu_variant=None, fbgemm_gpu_isa=None)
    return v


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=TASKS, default="bench",
                   help="bench: the workload above; ember-default: `ember train`'s built-in task (see above)")
    p.add_argument("--modules", default=None, help="comma list of " + ",".join(MODULES) +
                   " (default torchrec,torch_sparse,ember; torchrec for --task ember-default)")
    p.add_argument("--threads", default="1,2", help="comma list for torch.set_num_threads (and ember's threads)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="training steps per instance per round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per instance before the rounds")
    p.add_argument("--num-batches", type=int, default=None, help="pre-generated batches, cycled (default 16; "
                   "32 for --task ember-default)")
    p.add_argument("--batch", type=int, default=None, help="samples per step (default 2048)")
    p.add_argument("--features", type=int, default=None, help="sparse features, one table each (default 8)")
    p.add_argument("--one-hot", type=int, default=4, help="the first N features have one id per bag")
    p.add_argument("--pool-min", type=int, default=4, help="ids per bag of the other features: uniform min..max")
    p.add_argument("--pool-max", type=int, default=12)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=None, help="embedding dim (default 16)")
    p.add_argument("--alpha", type=float, default=None, help="Zipf exponent of the ids (default 1.05; 1.1 for "
                   "--task ember-default)")
    p.add_argument("--lr", type=float, default=None, help="embedding Adagrad lr (default 0.1)")
    p.add_argument("--eps", type=float, default=None, help="embedding Adagrad eps (default 1e-8)")
    p.add_argument("--dense-optimizer", choices=("adagrad", "adam"), default=None,
                   help="dense optimizer (default adagrad; adam for --task ember-default)")
    p.add_argument("--dense-lr", type=float, default=None, help="dense optimizer lr (default 0.01; 0.004 for "
                   "--task ember-default)")
    p.add_argument("--init", type=float, default=None, help="embedding weights ~ U(-init, init) (default 0.05)")
    p.add_argument("--data", choices=("ember", "numpy"), default="ember",
                   help="--task ember-default: the batches from ember.Reader (default) or drawn with numpy")
    p.add_argument("--batches-file", default=None,
                   help="--task ember-default --data ember: .npz of the batches, written when missing, reused")
    p.add_argument("--write-ember-batches", metavar="NPZ", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-cpuinfo-fix", dest="cpuinfo_fix", action="store_false",
                   help="do not load libc10.so RTLD_GLOBAL before torch (fbgemm_gpu then uses scalar kernels)")
    p.add_argument("--verbose", action="store_true", help="keep TorchRec's and torch's warnings")
    p.add_argument("--embedding-only", action="store_true",
                   help="time the embedding modules alone: loss = sum(pooled * a fixed random tensor), no dense model")
    a = p.parse_args()
    for k, v in (EMBER_DEFAULTS if a.task == "ember-default" else BENCH_DEFAULTS).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.write_ember_batches:                  # the child process of ember_batches_arrays
        write_ember_batches(a.write_ember_batches, a.num_batches, a.batch)
        return
    if a.task == "ember-default":
        if a.features != len(EMBER_ROWS) or a.embedding_only:
            p.error("--task ember-default has 8 features and a dense model")
        a.table_rows = list(EMBER_ROWS)
    else:
        a.table_rows = [a.rows] * a.features
    a.data_source = "numpy"
    mods = list(dict.fromkeys(m.strip() for m in a.modules.split(",") if m.strip()))
    for m in mods:
        if m not in MODULES:
            p.error(f"unknown module {m!r} (choose from {','.join(MODULES)})")
    thr = list(dict.fromkeys(int(t) for t in a.threads.split(",") if t.strip()))
    if not mods or not thr or a.rounds < 1 or a.steps < 1:
        p.error("need at least one module, one thread count, --rounds >= 1 and --steps >= 1")

    fix = load_c10_global() if a.cpuinfo_fix else False
    import torch
    if not a.verbose:
        quiet()
    ver = versions(torch, fix, with_ember="ember" in mods)

    pg_dir = None
    if any(m.startswith("torchrec") for m in mods):
        try:
            import torch.distributed as dist
            import torchrec  # noqa: F401
            pg_dir = tempfile.mkdtemp(prefix="python_dlrm.")
            dist.init_process_group("gloo", init_method=f"file://{pg_dir}/store", rank=0, world_size=1)
        except Exception as e:
            pg_dir = None
            print(f"[python_dlrm] torchrec unavailable: {type(e).__name__}: {e}", file=sys.stderr)

    batches, ids_per_batch = make_batches(a, torch)
    dense_opt = (f"torch.optim.Adam(lr={a.dense_lr}, betas=(0.9, 0.999), eps=1e-8)" if a.dense_optimizer == "adam"
                 else f"torch.optim.Adagrad(lr={a.dense_lr})")
    if a.task == "ember-default":
        shape = dict(rows=a.table_rows, pooling="1 + Poisson(mean - 1), means " + ",".join(map(str, EMBER_POOL)),
                     data=a.data_source)
    else:
        shape = dict(rows=a.rows, pooling=f"{a.one_hot}x1 + {a.features - a.one_hot}x U{{{a.pool_min}..{a.pool_max}}}")
    base = dict(bench="python_dlrm", task=a.task, batch=a.batch, tables=a.features, dim=a.dim, **shape,
                ids_per_batch=round(ids_per_batch, 1), dist=f"zipf({a.alpha})", num_batches=a.num_batches,
                lr=a.lr, eps=a.eps, dense_optimizer=dense_opt,
                rounds=a.rounds, steps=a.steps, warmup=a.warmup, **ver)

    insts = []
    for t in thr:
        for m in mods:
            torch.set_num_threads(t)
            try:
                insts.append(build(m, a, t, torch, batches))
            except Exception as e:
                print(json.dumps(dict(base, module=m, threads=t,
                                      skipped=f"{type(e).__name__}: {e}".strip()[:500])), flush=True)
    if not insts:
        sys.exit("no module could be built")

    load_before = round(os.getloadavg()[0], 2)
    fixed = None
    if a.embedding_only:
        fixed = torch.from_numpy(np.random.default_rng(a.seed + 1).standard_normal(
            (a.batch, a.features * a.dim)).astype(np.float32) * 1e-3)
        base = dict(base, mode="embedding_only")
    for inst in insts:
        torch.set_num_threads(inst.threads)
        inst.run(a.warmup, torch, fixed)
    n = len(insts)
    for r in range(a.rounds):
        order = insts[r % n:] + insts[:r % n]
        for inst in order:
            torch.set_num_threads(inst.threads)
            gc.collect()
            t0 = time.perf_counter()
            inst.run(a.steps, torch, fixed)
            inst.times.append(time.perf_counter() - t0)
        print(f"[python_dlrm] round {r + 1}/{a.rounds}: " + ", ".join(
            f"{i.name}@{i.threads} {a.steps * a.batch / i.times[-1]:.0f}/s" for i in insts), file=sys.stderr, flush=True)

    med = {}
    for inst in insts:
        sps = [a.steps * a.batch / t for t in inst.times]
        med[(inst.name, inst.threads)] = statistics.median(sps)
        print(json.dumps(dict(
            base, module=inst.name, threads=inst.threads, torch_threads=inst.threads,
            samples_per_s_median=round(statistics.median(sps), 1), samples_per_s_min=round(min(sps), 1),
            samples_per_s_max=round(max(sps), 1), samples_per_s_rounds=[round(x, 1) for x in sps],
            ms_per_step_median=round(statistics.median(inst.times) / a.steps * 1e3, 3),
            loss_first=round(inst.loss_first, 5), loss_last=round(inst.loss_last, 5),
            loadavg_1m_before=load_before, **inst.sparse.info)), flush=True)

    ratios = {}
    for t in thr:
        r = {}
        for num, den in (("ember", "torchrec"), ("ember", "torch_sparse"), ("torchrec", "torch_sparse")):
            if (num, t) in med and (den, t) in med:
                r[f"{num}/{den}"] = round(med[(num, t)] / med[(den, t)], 3)
        ratios[str(t)] = r
    print(json.dumps(dict(bench="python_dlrm", summary="ratio of median samples/s", ratios=ratios,
                          mode="embedding_only" if a.embedding_only else "dlrm",
                          modules=sorted({i.name for i in insts}), peak_rss_mb=round(rss_mb(), 1),
                          torch_version=ver["torch_version"], torchrec_version=ver["torchrec_version"],
                          ember_version=ver["ember_version"])), flush=True)

    if pg_dir is not None:
        import shutil
        import torch.distributed as dist
        dist.destroy_process_group()
        shutil.rmtree(pg_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
