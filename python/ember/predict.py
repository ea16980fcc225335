"""Predictor: scores samples with a model `ember train` saved (a checkpoint
or an inference bundle), exactly as the trainer's evaluation scored them:
either ids (dense values and a JaggedBatch) or raw rows as the training file
held them, which the library hashes and transforms by the model's own input
schema (the C code that read the training file)."""
from __future__ import annotations

import json
import math

import numpy as np

from . import _ember
from .arrays import as_buffer
from .batch import JaggedBatch
from .world import world as _world


class Predictor:
    def __init__(self, path: str, threads: int = 0, world=None):
        """world: default ember.world() (under mpirun, scoring is collective)."""
        self.world = world if world is not None else _world()
        self._p = _ember.Predictor(str(path), threads=int(threads), world=self.world._capsule)
        d = self._p.describe()
        self.num_dense = d["num_dense"]
        self.feature_names = [f[0] for f in d["features"]]

    def score(self, dense, batch: JaggedBatch | None = None, out=None):
        """Click probabilities [batch_size] of dense [batch_size, num_dense]
        and the sparse batch (the model's features).

        score(rows) scores raw rows instead: a list of dicts (column name to
        the value as the training file holds it, None for an empty field, a
        list of items for a multi_hot column), a pandas DataFrame, or the
        text of a CSV/TSV file (str or bytes) in the training file's format,
        a header optional.  Keys that name no column are not read; a missing
        column or a value that does not parse raises ember.Error naming the
        row and the column.  Needs a model trained through a text schema (or
        on Criteo TSV) and a world of one."""
        if batch is None:
            return self._score_rows(dense)
        if batch.keys != self.feature_names:
            batch = batch.reordered(self.feature_names)
        lengths, values, weights = batch.buffers()
        if out is None:
            out = np.empty(batch.batch_size, dtype=np.float32)
        self._p.score(batch.batch_size, as_buffer(dense, "dense"), lengths, values, weights, as_buffer(out, "out"))
        return out

    def _score_rows(self, rows):
        fmt = 0
        if isinstance(rows, (str, bytes)):
            body = rows.encode() if isinstance(rows, str) else rows
            head = body.split(b"\n", 1)[0]
            fmt = 3 if b"\t" in head else 2
        else:
            if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
                rows = rows.to_dict(orient="records")
            body = json.dumps({"rows": [_row(r) for r in rows]}, allow_nan=False).encode()
        return np.frombuffer(self._p.score_body(body, fmt), dtype=np.float32).copy()

    def close(self) -> None:
        self._p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _value(v):
    """A value as JSON takes it: numpy scalars as Python numbers, NaN (a
    pandas missing value) as None, sequences as lists."""
    if isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim == 1):
        return [_value(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType"):
        return None
    return v


def _row(r):
    if not isinstance(r, dict):
        raise TypeError("score(rows): each row must be a dict of column name to value, not %s" % type(r).__name__)
    return {str(k): _value(v) for k, v in r.items()}


def predict(path: str, dense, batch: JaggedBatch, threads: int = 0):
    """One-shot: open the model at path, score, close."""
    with Predictor(path, threads) as p:
        return p.score(dense, batch)
