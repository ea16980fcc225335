"""Collection: ember's embedding tables from Python.  forward pools a
JaggedBatch into a caller-owned or new float32 array; backward applies the
fused sparse optimizer to the rows that batch touched (no dense gradient is
ever made).  Every call goes straight to libember (include/ember.h) with the
GIL released; the arrays are the caller's memory.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from . import _ember
from .arrays import as_buffer
from .arrays import count as _elements
from .batch import JaggedBatch
from .config import POOLINGS, FeatureConfig, TableConfig
from .world import world as _world

_BOUNDS = {"error": 0, "drop": 1}


class Collection:
    """Tables and features, as ember_collection_create makes them.

    Options: seed (the initializer's), threads (OpenMP; 0: all), dedup,
    bounds ("error" or "drop"), stack_tables, debug_checks, ssd_dir,
    memory_budget, ssd_min_bytes, ssd_cache_bytes (docs/tiers.md), world
    (default ember.world(): under mpirun the tables are spread over the
    ranks, and forward and backward are collective; ember.World() keeps a
    collection local).
    """

    def __init__(self, tables: Sequence[TableConfig], features: Sequence[FeatureConfig], *,
                 seed: Optional[int] = None, threads: int = 0, dedup: bool = False, bounds: str = "error",
                 stack_tables: bool = True, debug_checks: bool = False, ssd_dir: Optional[str] = None,
                 memory_budget: int = 0, ssd_min_bytes: int = 0, ssd_cache_bytes: int = 0, world=None):
        self.tables = list(tables)
        self.features = list(features)
        index = {}
        for i, t in enumerate(self.tables):
            if not isinstance(t, TableConfig):
                raise TypeError(f"tables[{i}]: expected ember.TableConfig, got {type(t).__name__}")
            index.setdefault(t.name, i)
        ftuples = []
        for i, f in enumerate(self.features):
            if not isinstance(f, FeatureConfig):
                raise TypeError(f"features[{i}]: expected ember.FeatureConfig, got {type(f).__name__}")
            if f.table not in index:
                raise ValueError(f"feature {f.name!r}: no table named {f.table!r}")
            if f.pooling not in POOLINGS:
                raise ValueError(f"feature {f.name!r}: pooling {f.pooling!r} is not one of {', '.join(POOLINGS)}")
            ftuples.append((f.name, index[f.table], POOLINGS[f.pooling]))
        if bounds not in _BOUNDS:
            raise ValueError(f"bounds {bounds!r} is not one of {', '.join(_BOUNDS)}")
        self.world = world if world is not None else _world()
        kwargs = dict(threads=int(threads), dedup=int(bool(dedup)), bounds=_BOUNDS[bounds],
                      stack_tables=int(bool(stack_tables)), debug_checks=int(bool(debug_checks)), ssd_dir=ssd_dir,
                      memory_budget=int(memory_budget), ssd_min_bytes=int(ssd_min_bytes),
                      ssd_cache_bytes=int(ssd_cache_bytes), world=self.world._capsule)
        if seed is not None:
            kwargs["seed"] = int(seed)
        self._c = _ember.Collection(tuple(t._tuple() for t in self.tables), tuple(ftuples), **kwargs)
        self._index = index
        self.feature_names = [f.name for f in self.features]
        self.width = self._c.pooled_width()
        self.has_sequence = any(f.pooling == "none" for f in self.features)

    # ------------------------------------------------------------ the step
    def _batch(self, batch: JaggedBatch) -> JaggedBatch:
        if not isinstance(batch, JaggedBatch):
            raise TypeError(f"batch: expected ember.JaggedBatch, got {type(batch).__name__}")
        return batch if batch.keys == self.feature_names else batch.reordered(self.feature_names)

    def forward(self, batch: JaggedBatch, out=None, sequence=None):
        """Pooled embeddings [batch_size, width] (float32) into out (a new
        numpy array when None).  With sequence features (pooling "none") it
        returns (pooled, sequence), sequence one row per id."""
        batch = self._batch(batch)
        lengths, values, weights = batch.buffers()
        b = batch.batch_size
        if out is None:
            out = np.empty((b, self.width), dtype=np.float32)
        if self.has_sequence and sequence is None:
            n = self._c.sequence_size(b, lengths, values)
            sequence = np.empty(n, dtype=np.float32)
        self._c.forward(b, lengths, values, weights, as_buffer(out, "out"),
                        as_buffer(sequence, "sequence") if self.has_sequence else None)
        return (out, sequence) if self.has_sequence else out

    __call__ = forward

    def backward(self, grad, sequence_grad=None) -> None:
        """The fused optimizer step for the last forward's batch: grad has
        the pooled output's shape (and sequence_grad the sequence's)."""
        self._c.backward(as_buffer(grad, "grad"), as_buffer(sequence_grad, "sequence_grad"))

    # ------------------------------------------------------------ rows
    def _table(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no table named {name!r}") from None

    def _rows(self, name: str, first: int, count: Optional[int]):
        """(table index, count) of rows [first, first+count) of a table, checked."""
        t = self._table(name)
        rows = self.tables[t].rows
        count = rows - first if count is None else count
        if first < 0 or count < 0 or first + count > rows:
            raise IndexError(f"table {name!r}: rows [{first}, {first + count}) are outside [0, {rows})")
        return t, count

    def read_table(self, name: str, first: int = 0, count: Optional[int] = None, out=None):
        """Rows [first, first+count) of a fixed table as [count, dim] float32."""
        t, count = self._rows(name, first, count)
        if out is None:
            out = np.empty((count, self.tables[t].dim), dtype=np.float32)
        self._c.read_rows(t, first, count, as_buffer(out, "out"))
        return out

    def write_table(self, name: str, values, first: int = 0) -> None:
        """Overwrites rows from first on with values [count, dim] (state kept)."""
        t = self._table(name)
        v = as_buffer(values, "values")
        self._c.write_rows(t, first, _elements(v, "values") // self.tables[t].dim, v)

    def read_state(self, name: str, first: int = 0, count: Optional[int] = None):
        """Optimizer state of rows [first, first+count): [count, floats per row]
        (Adagrad dim, row-wise Adagrad 1, Adam 2*dim: m then v, SGD 0)."""
        t, count = self._rows(name, first, count)
        out = np.empty((count, self._c.state_floats(t)), dtype=np.float32)
        self._c.read_state(t, first, count, out)
        return out

    def write_state(self, name: str, values, first: int = 0) -> None:
        t = self._table(name)
        v = as_buffer(values, "values")
        per = self._c.state_floats(t)
        self._c.write_state(t, first, _elements(v, "values") // per if per else 0, v)

    # ------------------------------------------------------------ checkpoints
    def save(self, root: str, step: int = 0, keep: int = 0) -> None:
        """A checkpoint root/step-<step>: rows, optimizer state and step count
        (atomic; keep: complete checkpoints kept, 0 all)."""
        self._c.save(str(root), int(step), int(keep))

    def load(self, path: str) -> None:
        """Tables from a checkpoint root (its newest) or step folder, at any
        world size; nothing changes on error."""
        self._c.load(str(path))

    # ------------------------------------------------------------ the rest
    def stats(self) -> Dict[str, float]:
        """Counters (steps, drops, last batch's ids, bytes exchanged) and memory."""
        return self._c.stats()

    def set_threads(self, threads: int) -> None:
        self._c.set_threads(threads)

    def set_lr_scale(self, scale: float) -> None:
        """Every table's learning rate times scale from the next backward on."""
        self._c.set_lr_scale(scale)

    def set_training(self, training: bool) -> None:
        """False: forwards admit and evict no dynamic key (evaluation)."""
        self._c.set_training(1.0 if training else 0.0)

    def close(self) -> None:
        self._c.close()

    @property
    def closed(self) -> bool:
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
