"""Reader: the labelled CTR samples `ember train` reads, for a training loop
written in Python: the built-in synthetic task, ember's binary files, or
text files by a config's data.schema (docs/data.md).  Each batch is copied
out of the reader into numpy arrays the caller owns (once, in C).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import numpy as np

from . import _ember
from .batch import JaggedBatch
from .world import world as _world


@dataclass
class Samples:
    labels: np.ndarray            # [batch_size] float32
    dense: np.ndarray             # [batch_size, num_dense] float32
    sparse: JaggedBatch           # the reader's features, in order
    teacher: Optional[np.ndarray] # the synthetic task's true click probability, else None

    @property
    def batch_size(self) -> int:
        return self.sparse.batch_size


class Reader:
    """config: a config file, or None for the built-in synthetic task;
    path: a file to read instead of the config's data.train_file (or
    data.eval_file with eval=True); world: whose share this rank reads
    (default ember.world(): under mpirun each rank its own share, as
    `ember train` reads it)."""

    def __init__(self, config: Optional[str] = None, path: Optional[str] = None, eval: bool = False, world=None):
        w = world if world is not None else _world()
        self._r = _ember.Reader(config=None if config is None else str(config),
                                path=None if path is None else str(path), eval=bool(eval), rank=w.rank, world=w.size)
        d = self._r.describe()
        self.num_dense: int = d["num_dense"]
        self.features: List[Tuple[str, int]] = [tuple(f) for f in d["features"]]  # (name, rows)

    def next(self, batch_size: int) -> Optional[Samples]:
        """The next up-to-batch_size samples, or None when the share is read."""
        got = self._r.next(int(batch_size))
        if got is None:
            return None
        b, labels, dense, lengths, values, weights, teacher = got
        arr = lambda v, t: np.frombuffer(v, dtype=t)  # bytearrays the C module filled: already ours
        sparse = JaggedBatch([f[0] for f in self.features], arr(lengths, np.int32), arr(values, np.int64),
                             None if weights is None else arr(weights, np.float32), batch_size=b)
        return Samples(arr(labels, np.float32), arr(dense, np.float32).reshape(b, self.num_dense), sparse,
                       None if teacher is None else arr(teacher, np.float32))

    def batches(self, batch_size: int, limit: Optional[int] = None) -> Iterator[Samples]:
        """Batches until the share ends (the synthetic task never does) or
        `limit` batches."""
        n = 0
        while limit is None or n < limit:
            s = self.next(batch_size)
            if s is None:
                return
            yield s
            n += 1

    def rewind(self) -> None:
        self._r.rewind()

    def close(self) -> None:
        self._r.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def synthetic_batches(tables: int, rows: int, batch_size: int, pooling: int, count: int = 1, *,
                      zipf: bool = True, alpha: float = 1.05, weighted: bool = False, seed: int = 0,
                      prefix: str = "f"):
    """The benchmark workloads' batches (`ember bench`'s ids for the same
    shape and seed): `tables` features named prefix0.., every bag `pooling`
    ids, bounded Zipf(alpha) or uniform over rows.  A list of JaggedBatch."""
    out = []
    for lengths, ids, weights in _ember.synth_batches(tables=tables, rows=rows, batch_size=batch_size,
                                                      pooling=pooling, zipf=zipf, alpha=alpha, weighted=weighted,
                                                      seed=seed, count=count):
        out.append(JaggedBatch([f"{prefix}{t}" for t in range(tables)], np.frombuffer(lengths, np.int32).copy(),
                               np.frombuffer(ids, np.int64).copy(),
                               None if weights is None else np.frombuffer(weights, np.float32).copy(),
                               batch_size=batch_size))
    return out
