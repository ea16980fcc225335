"""Predictor: scores samples with a model `ember train` saved (a checkpoint
or an inference bundle), exactly as the trainer's evaluation scored them."""
from __future__ import annotations


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

    def score(self, dense, batch: JaggedBatch, out=None):
        """Click probabilities [batch_size] of dense [batch_size, num_dense]
        and the sparse batch (the model's features)."""
        if batch.keys != self.feature_names:
            batch = batch.reordered(self.feature_names)
        lengths, values, weights = batch.buffers()
        if out is None:
            out = np.empty(batch.batch_size, dtype=np.float32)
        self._p.score(batch.batch_size, as_buffer(dense, "dense"), lengths, values, weights, as_buffer(out, "out"))
        return out

    def close(self) -> None:
        self._p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def predict(path: str, dense, batch: JaggedBatch, threads: int = 0):
    """One-shot: open the model at path, score, close."""
    with Predictor(path, threads) as p:
        return p.score(dense, batch)
