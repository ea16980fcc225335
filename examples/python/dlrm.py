"""A DLRM in PyTorch whose embedding tables are ember's.

The model is ordinary PyTorch: a bottom MLP over the dense features, a dot
interaction, a top MLP, BCE loss and torch.optim.Adam for the dense
parameters.  The one ember line is the embedding module,
ember.torch.EmbeddingBagCollection, whose backward updates the tables with
its fused Adagrad (no dense gradient, no torch optimizer for the tables).
--embeddings torch swaps in nn.EmbeddingBag(sparse=True) + torch.optim.Adagrad
to compare.  The data is ember's reader: the built-in synthetic task of
`ember train` (whose hidden teacher's AUC is the best achievable), or a
config's files (--config).  The model mirrors `ember train`'s built-in
student, so the two reach the same AUC.

    python examples/python/dlrm.py --steps 3000
"""
import argparse
import json
import time

import numpy as np
import torch
from torch import nn

import ember
import ember.torch


class DLRM(nn.Module):
    def __init__(self, num_dense, num_sparse, embeddings, dim=16, bottom=(64,), top=(64,)):
        super().__init__()
        self.embeddings = embeddings
        widths = [num_dense, *bottom, dim]
        self.bottom = nn.Sequential(*[m for i in range(len(widths) - 1)
                                      for m in (nn.Linear(widths[i], widths[i + 1]), nn.ReLU())])
        f = num_sparse + 1
        widths = [dim + f * (f - 1) // 2, *top]
        layers = [m for i in range(len(widths) - 1) for m in (nn.Linear(widths[i], widths[i + 1]), nn.ReLU())]
        self.top = nn.Sequential(*layers, nn.Linear(widths[-1], 1))
        self.pairs = torch.triu_indices(f, f, offset=1)
        self.dim = dim
        for m in self.modules():  # Glorot uniform, zero biases: as ember's dense model
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        pooled = self.embeddings(sparse)                     # [B, F * dim]
        v = torch.cat([x, pooled], dim=1).view(len(x), -1, self.dim)
        dots = torch.bmm(v, v.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


class TorchBags(nn.Module):
    """The same embeddings from nn.EmbeddingBag(sparse=True), for comparison."""

    def __init__(self, rows, dim):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(r, dim, mode="sum", sparse=True) for r in rows)
        for b in self.bags:
            nn.init.uniform_(b.weight, -0.05, 0.05)

    def forward(self, batch):
        lengths = torch.as_tensor(np.asarray(batch.lengths), dtype=torch.int64).view(len(self.bags), -1)
        values = torch.as_tensor(np.asarray(batch.values))
        ends = torch.cumsum(lengths.sum(1), 0)
        out = []
        for f, bag in enumerate(self.bags):
            start = int(ends[f - 1]) if f else 0
            out.append(bag(values[start:int(ends[f])], torch.cumsum(lengths[f], 0) - lengths[f]))
        return torch.cat(out, dim=1)


def auc(scores, labels):
    """Area under the ROC curve: the Mann-Whitney statistic, ties averaged."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = y > 0.5
    n_pos, n_neg = pos.sum(), len(y) - pos.sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(model, reader, samples, batch_size=2048):
    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for s in reader.batches(batch_size, limit=(samples + batch_size - 1) // batch_size):
            scores.append(torch.sigmoid(model(torch.from_numpy(s.dense), s.sparse)).numpy())
            labels.append(s.labels)
    model.train()
    scores, labels = np.concatenate(scores)[:samples], np.concatenate(labels)[:samples]
    return auc(scores, labels)


def train(steps=3000, batch_size=2048, config=None, embeddings="ember", threads=1, seed=None, eval_samples=65536,
          on_log=None):
    """Trains and returns {"auc", "samples_per_s", ...}."""
    torch.manual_seed(0 if seed is None else seed)
    torch.set_num_threads(threads)
    reader = ember.Reader(config)
    evals = ember.Reader(config, eval=True)
    names = [name for name, _ in reader.features]
    rows = [r for _, r in reader.features]
    dim = 16
    if embeddings == "ember":
        tables = [ember.TableConfig(f"table_{n}", rows=r, dim=dim, optimizer=ember.Adagrad(lr=0.1))
                  for n, r in reader.features]
        features = [ember.FeatureConfig(n, table=f"table_{n}") for n in names]
        emb = ember.torch.EmbeddingBagCollection(tables, features, threads=threads, seed=seed)
    else:
        emb = TorchBags(rows, dim)
    model = DLRM(reader.num_dense, len(names), emb, dim=dim)
    dense_opt = torch.optim.Adam([p for n, p in model.named_parameters() if not n.startswith("embeddings.")],
                                 lr=0.004)
    sparse_opt = torch.optim.Adagrad(emb.parameters(), lr=0.1) if embeddings == "torch" else None
    loss_fn = nn.BCEWithLogitsLoss()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        s = reader.next(batch_size)
        if s is None:
            reader.rewind()
            s = reader.next(batch_size)
        dense_opt.zero_grad()
        if sparse_opt:
            sparse_opt.zero_grad()
        loss = loss_fn(model(torch.from_numpy(s.dense), s.sparse), torch.from_numpy(s.labels))
        loss.backward()          # ember's tables are updated here, inside backward
        dense_opt.step()
        if sparse_opt:
            sparse_opt.step()
        if on_log and (step % 100 == 0 or step == steps):
            on_log({"step": step, "loss": float(loss)})
    seconds = time.perf_counter() - start
    return {"auc": evaluate(model, evals, eval_samples), "steps": steps,
            "samples_per_s": steps * batch_size / seconds, "embeddings": embeddings}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--config", default=None, help="an ember config (data and schema); default: the built-in task")
    ap.add_argument("--embeddings", choices=["ember", "torch"], default="ember")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps(train(a.steps, a.batch, a.config, a.embeddings, a.threads,
                           on_log=lambda e: print(json.dumps(e), flush=True))))


if __name__ == "__main__":
    main()
