"""Arrays in without copies: what the C module takes is anything with the
buffer protocol; a torch tensor is handed over as a numpy view of the same
memory, and any other object with __dlpack__ through numpy.from_dlpack (also
a view).  Nothing is converted: the C module checks dtype and layout and
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
    if hasattr(x, "__dlpack__") and not isinstance(x, (bytes, bytearray, memoryview)):
        return np.from_dlpack(x)
    return x


def count(x) -> int:
    """Elements of an array-like (numpy, torch, anything with a shape)."""
    shape = getattr(x, "shape", None)
    if shape is None:
        return len(x)
    n = 1
    for s in shape:
        n *= int(s)
    return n
