"""Arrays in without copies: what the C module takes is anything with the
buffer protocol; a torch tensor is handed over as a numpy view of the same
memory; any other object with __dlpack__ is read by the C module from its
DLPack capsule (the same memory, writable).  Nothing is converted: the C module checks dtype and layout and
names the argument when they are wrong.
"""
from __future__ import annotations

import sys

import numpy as np


def as_buffer(x, name: str):
    """x as an object with the buffer protocol over the same memory."""
    if x is None or isinstance(x, np.ndarray):
        return x
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: a tensor on {x.device}; ember runs on the CPU")
        return x.detach().numpy()
    return x  # the buffer protocol, or __dlpack__ (read by the C module)


def count(x, name: str = "array") -> int:
    """Elements of an array-like (numpy, torch, DLPack, a sequence)."""
    shape = getattr(x, "shape", None)
    if shape is None and hasattr(x, "__dlpack__"):
        shape = np.from_dlpack(x).shape
    if shape is None:
        try:
            return len(x)
        except TypeError:
            raise TypeError(f"{name}: expected an array, got {type(x).__name__}") from None
    n = 1
    for s in shape:
        n *= int(s)
    return n
