"""JaggedBatch: a batch of sparse features, shaped like TorchRec's
KeyedJaggedTensor.  For feature keys[f] and sample b the bag is
values[off(f, b) : off(f, b) + lengths[f * batch_size + b]], offsets walking
lengths feature-major; weights (optional) has one float per value.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .arrays import as_buffer, count


class JaggedBatch:
    """keys: feature names; lengths: int32 [F * B] (or [F, B]); values:
    int64 ids; weights: float32 per id, or None.  Arrays are kept as given
    (numpy arrays or CPU torch tensors): nothing is copied."""

    def __init__(self, keys: Sequence[str], lengths, values, weights=None, batch_size: Optional[int] = None):
        self.keys = list(keys)
        if not self.keys:
            raise ValueError("JaggedBatch: no keys")
        n = count(lengths, "lengths")
        if batch_size is None:
            if n % len(self.keys):
                raise ValueError(f"JaggedBatch: {n} lengths do not split into {len(self.keys)} features")
            batch_size = n // len(self.keys)
        self.batch_size = int(batch_size)
        self.lengths = lengths
        self.values = values
        self.weights = weights

    @classmethod
    def from_kjt(cls, kjt) -> "JaggedBatch":
        """From a torchrec.KeyedJaggedTensor: keys, values and weights as they
        are; lengths become int32 (TorchRec's are often int64: that one array
        of F * B entries is converted, the ids never are)."""
        import torch

        lengths = kjt.lengths()
        if lengths.dtype != torch.int32:
            lengths = lengths.to(torch.int32)
        return cls(kjt.keys(), lengths, kjt.values(), kjt.weights_or_none(), batch_size=kjt.stride())

    def buffers(self):
        """(lengths, values, weights) as buffer-protocol views."""
        return (as_buffer(self.lengths, "lengths"), as_buffer(self.values, "values"),
                as_buffer(self.weights, "weights"))

    def reordered(self, order: Sequence[str]) -> "JaggedBatch":
        """The same batch with its features in `order` (a copy of lengths,
        values and weights); ValueError naming a key that is missing or extra."""
        missing = [k for k in order if k not in self.keys]
        extra = [k for k in self.keys if k not in order]
        if missing or extra:
            raise ValueError("JaggedBatch: " + "; ".join(
                ([f"no key for feature(s) {missing}"] if missing else []) +
                ([f"key(s) {extra} are not features of the collection"] if extra else [])))
        lengths, values, weights = (np.asarray(a) if a is not None else None for a in self.buffers())
        b = self.batch_size
        lengths = lengths.reshape(len(self.keys), b)
        ends = np.cumsum(lengths.sum(axis=1))
        starts = ends - lengths.sum(axis=1)
        idx = [self.keys.index(k) for k in order]
        new_values = np.concatenate([values[starts[i]:ends[i]] for i in idx]) if idx else values[:0]
        new_weights = None if weights is None else np.concatenate([weights[starts[i]:ends[i]] for i in idx])
        return JaggedBatch(list(order), np.ascontiguousarray(lengths[idx].reshape(-1)), new_values, new_weights,
                           batch_size=b)
