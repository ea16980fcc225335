"""ember.torch.EmbeddingBagCollection: ember's tables as a PyTorch module,
shaped like TorchRec's fused EmbeddingBagCollection.  forward returns the
pooled embeddings; autograd's backward hands the output gradient to ember,
whose fused optimizer updates the touched rows in place.  The module has no
nn.Parameter: no dense gradient is made and a torch optimizer over
model.parameters() leaves the tables to ember.
"""
from __future__ import annotations

import weakref
from typing import Dict, Sequence, Union

import torch

from ._ember import Error
from .batch import JaggedBatch
from .collection import Collection
from .config import FeatureConfig, TableConfig


class _Lookup(torch.autograd.Function):
    """forward: ember_forward; backward: ember_backward (the optimizer step).
    `anchor` is a zero-size tensor that requires grad, so autograd calls
    backward although no input of the lookup is differentiable."""

    @staticmethod
    def forward(ctx, anchor, module, batch):
        pending = module._pending() if module._pending is not None else None
        if pending is not None and pending.grad_fn is not None:
            raise Error("EmbeddingBagCollection: a training forward while the last one's output still waits "
                        "for its backward; ember updates the rows of the last forward's batch only (call "
                        "backward, or drop that output, before the next training forward)")
        out = torch.empty((batch.batch_size, module.collection.width), dtype=torch.float32)
        module.collection.forward(batch, out=out)
        module._forwards += 1
        ctx.module = module
        ctx.forward_index = module._forwards
        return out

    @staticmethod
    def backward(ctx, grad):
        module = ctx.module
        if ctx.forward_index != module._forwards:
            raise Error("EmbeddingBagCollection: backward of an older forward; ember updates the rows of the "
                        "last forward's batch only (call backward before the next forward)")
        if grad.dtype != torch.float32:
            raise TypeError(f"grad: expected float32, got {grad.dtype}")
        module.collection.backward(grad.contiguous())
        module._pending = None
        return None, None, None


class EmbeddingBagCollection(torch.nn.Module):
    """Pooled embeddings of a batch, [batch_size, sum of dims] in feature
    order, or a dict by feature (output="dict").  Takes an ember.JaggedBatch
    or a torchrec.KeyedJaggedTensor.  Each table's optimizer is ember's,
    fused into backward; options go to ember.Collection."""

    def __init__(self, tables: Sequence[TableConfig], features: Sequence[FeatureConfig], *,
                 output: str = "tensor", **options):
        super().__init__()
        if output not in ("tensor", "dict"):
            raise ValueError(f"output {output!r} is not 'tensor' or 'dict'")
        seq = [f.name for f in features if f.pooling == "none"]
        if seq:
            raise ValueError(f"features {seq}: pooling 'none' (sequences) is ember.Collection's, not this module's")
        self.collection = Collection(tables, features, **options)
        self.output = output
        dims = {t.name: t.dim for t in tables}
        self._splits = [(f.name, dims[f.table]) for f in features]
        self._anchor = torch.zeros(0, requires_grad=True)
        self._forwards = 0
        self._pending = None  # a weak reference to the output whose backward is due

    def forward(self, batch) -> Union[torch.Tensor, Dict[str, torch.Tensor]]:
        if not isinstance(batch, JaggedBatch):
            batch = JaggedBatch.from_kjt(batch)
        if torch.is_grad_enabled() and self.training:
            out = _Lookup.apply(self._anchor, self, batch)
            self._pending = weakref.ref(out)
        else:
            out = torch.empty((batch.batch_size, self.collection.width), dtype=torch.float32)
            self.collection.forward(batch, out=out)
            self._forwards += 1
        if self.output == "tensor":
            return out
        parts = torch.split(out, [d for _, d in self._splits], dim=1)
        return {name: p for (name, _), p in zip(self._splits, parts)}

    def train(self, mode: bool = True):
        """Evaluation mode also stops dynamic tables admitting keys."""
        super().train(mode)
        self.collection.set_training(mode)
        return self

    # ---------------------------------------------------------- state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # in the table's dtype: a half-precision table's rows are halves exactly
        dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        for t in self.collection.tables:
            if t.kind == "fixed":
                destination[f"{prefix}embedding_bags.{t.name}.weight"] = torch.from_numpy(
                    self.collection.read_table(t.name)).to(dtypes[t.precision])

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # torch's own part: the load pre-hooks, and with strict every key under
        # prefix that names no parameter, buffer or child is unexpected (ours too)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        ours = {f"{prefix}embedding_bags.{t.name}.weight" for t in self.collection.tables if t.kind == "fixed"}
        unexpected_keys[:] = [k for k in unexpected_keys if k not in ours]
        loads, failed = [], False
        for t in self.collection.tables:  # every shape first: a failed load writes nothing
            if t.kind != "fixed":
                continue
            key = f"{prefix}embedding_bags.{t.name}.weight"
            if key not in state_dict:
                missing_keys.append(key)
                failed = True
                continue
            w = state_dict[key]
            if tuple(w.shape) != (t.rows, t.dim):
                error_msgs.append(f"{key}: shape {tuple(w.shape)}, the table is ({t.rows}, {t.dim})")
                failed = True
                continue
            loads.append((t.name, w))
        if failed and (strict or error_msgs):
            return
        for name, w in loads:
            self.collection.write_table(name, w.detach().to(torch.float32).contiguous())

    def save(self, root: str, step: int = 0, keep: int = 0) -> None:
        """ember's checkpoint: rows and optimizer state (state_dict has rows only)."""
        self.collection.save(root, step, keep)

    def load(self, path: str) -> None:
        self.collection.load(path)

    def stats(self):
        return self.collection.stats()
