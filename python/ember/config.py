"""Table, feature and optimizer configs: the Python shape of ember_table_config,
ember_feature_config and ember_optimizer (include/ember.h has every field's
meaning).  Plain dataclasses, checked when the collection is created: the
library's own checks name the table or feature at fault.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union


@dataclass(frozen=True, kw_only=True)
class _Shared:
    """What every optimizer takes, by keyword: weight_decay_mode "l2" (g +=
    weight_decay * w) or "decoupled" (w *= 1 - lr * weight_decay), and
    gradient clipping before the update: clip_value > 0 clips each element
    of a row's gradient to +-clip_value, clip_norm > 0 scales the row's
    gradient down to that L2 norm (0: off)."""
    weight_decay_mode: str = "l2"
    clip_value: float = 0.0
    clip_norm: float = 0.0


@dataclass(frozen=True)
class SGD(_Shared):
    """w -= lr * (g + weight_decay * w)"""
    lr: float = 0.01
    weight_decay: float = 0.0
    _kind = 0


@dataclass(frozen=True)
class Adagrad(_Shared):
    """s += g*g; w -= lr * g / (sqrt(s) + eps), per element (torch.optim.Adagrad)."""
    lr: float = 0.01
    eps: float = 1e-8
    weight_decay: float = 0.0
    _kind = 1


@dataclass(frozen=True)
class RowWiseAdagrad(_Shared):
    """s += mean(g*g) over the row; one accumulator per row (FBGEMM's)."""
    lr: float = 0.01
    eps: float = 1e-8
    weight_decay: float = 0.0
    _kind = 2


@dataclass(frozen=True)
class Adam(_Shared):
    """Lazy Adam (torch.optim.SparseAdam): untouched rows keep m and v; the
    bias correction uses the collection's step count."""
    lr: float = 0.001
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    _kind = 3


@dataclass(frozen=True)
class AdamW(Adam):
    """Lazy Adam with decoupled weight decay (torch.optim.AdamW on the
    batch's rows): w *= 1 - lr * weight_decay, then Adam's step on g."""
    weight_decay: float = 0.01
    weight_decay_mode: str = field(default="decoupled", kw_only=True)
    _kind = 3


@dataclass(frozen=True)
class Momentum(_Shared):
    """b = momentum * b + g; w -= lr * b (nesterov: lr * (g + momentum * b)),
    torch.optim.SGD's rule on the batch's rows: rows the batch does not touch
    keep b and do not move."""
    lr: float = 0.01
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 0.0
    _kind = 4


@dataclass(frozen=True)
class FTRL(_Shared):
    """FTRL-Proximal (McMahan et al.), per coordinate, lr = alpha:
    n' = n + g*g; z += g - (n'^-p - n^-p) / lr * w; n = n';
    w = 0 if |z| <= l1 else -(z - sign(z) l1) / ((beta + n^-p) / lr + l2),
    p = lr_power.  State z then n."""
    lr: float = 0.05
    beta: float = 1.0
    l1: float = 0.0
    l2: float = 0.0
    lr_power: float = -0.5
    weight_decay: float = 0.0
    _kind = 5


@dataclass(frozen=True)
class RowWiseAdam(Adam):
    """FBGEMM's partial row-wise Adam, Adam's settings: m per element, v one
    per row (v = beta2 v + (1 - beta2) mean(g*g)); w -= lr * m / (1 - beta1^t)
    / (sqrt(v / (1 - beta2^t)) + eps).  Lazy: untouched rows keep m and v."""
    _kind = 6


@dataclass(frozen=True)
class LAMB(Adam):
    """FBGEMM's LAMB, Adam's settings: Adam's direction r (plus weight_decay
    * w under weight_decay_mode "decoupled"), then w -= lr * |w| / |r| * r,
    the norms over the row.  Lazy, state m then v."""
    _kind = 7


@dataclass(frozen=True)
class LARS(_Shared):
    """FBGEMM's LARS-SGD: q = eta |w| / (|g| + weight_decay |w|) per row;
    b = momentum b + lr q (g + weight_decay w); w -= b.  Lazy, state b."""
    lr: float = 0.01
    eta: float = 0.001
    momentum: float = 0.9
    weight_decay: float = 0.0
    _kind = 8


Optimizer = Union[SGD, Adagrad, RowWiseAdagrad, Adam, AdamW, Momentum, FTRL, RowWiseAdam, LAMB, LARS]

_INITS = {"uniform": 0, "normal": 1, "zeros": 2, "constant": 3}
_PLACEMENTS = {"row": 0, "column": 1, "table": 2, "replicated": 3}
_KINDS = {"fixed": 0, "dynamic": 1}
_EVICT = {"lru": 0, "lfu": 1, "ttl": 2, "none": 3}
_STORAGE = {"auto": 0, "memory": 1, "ssd": 2}
_LIMIT_POLICY = {"error": 0, "drop": 1, "minibatch": 2}
_EXCHANGE = {"rows": 0, "pooled": 1}
_PRECISION = {"fp32": 0, "fp16": 1, "bf16": 2}
_ROUNDING = {"stochastic": 0, "nearest": 1}
_DECAY_MODES = {"l2": 0, "decoupled": 1}
POOLINGS = {"sum": 0, "mean": 1, "sqrtn": 2, "none": 3}


def _int(table: str, what: str, value, bits: int) -> int:
    """value as a signed integer of `bits` bits, or ValueError naming the table and field."""
    v = int(value)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"table {table!r}: {what} {v} is out of range")
    return v


def _choice(table: str, what: str, value: str, choices: dict) -> int:
    try:
        return choices[value]
    except KeyError:
        raise ValueError(f"table {table!r}: {what} {value!r} is not one of {', '.join(choices)}") from None


@dataclass(frozen=True)
class TableConfig:
    """One embedding table.  rows: ids 0..rows-1 (0 for a dynamic table,
    whose ids are any int64 key and which holds `capacity` rows per rank)."""
    name: str
    rows: int
    dim: int
    optimizer: Optimizer = field(default_factory=SGD)
    init: str = "uniform"          # uniform, normal, zeros, constant
    init_value: float = 0.05       # uniform bound, normal sigma or the constant
    placement: str = "row"         # row, column, table, replicated (under MPI)
    owner: int = 0                 # the rank of a "table" placement
    kind: str = "fixed"            # fixed, dynamic
    capacity: int = 0              # dynamic: rows per rank
    admit_after: int = 0           # dynamic: occurrences before a key gets a row
    evict: str = "lru"             # dynamic: lru, lfu, ttl, none
    ttl_steps: int = 0
    storage: str = "auto"          # auto, memory, ssd
    cache_bytes: int = 0           # ssd: the DRAM row cache per rank
    path: Optional[str] = None     # ssd: the store file's folder
    max_ids_per_partition: int = 0
    max_unique_ids_per_partition: int = 0
    limit_policy: str = "error"    # error, drop, minibatch
    exchange: str = "rows"         # rows, pooled
    precision: str = "fp32"        # the rows' training precision: fp32, fp16, bf16
    rounding: str = "stochastic"   # half rows and state: stochastic, nearest
    state_precision: str = "fp32"  # per-element state (not row-wise kinds'): fp32, bf16 (fp16 underflows)

    def _tuple(self) -> tuple:
        o = self.optimizer
        betas = getattr(o, "betas", (0.9, 0.999))
        n = self.name
        return (n, _int(n, "rows", self.rows, 64), _int(n, "dim", self.dim, 32), _choice(n, "init", self.init, _INITS),
                float(self.init_value), o._kind, float(o.lr), float(getattr(o, "eps", 1e-8)),
                float(o.weight_decay), float(betas[0]), float(betas[1]),
                _choice(n, "placement", self.placement, _PLACEMENTS), _int(n, "owner", self.owner, 32),
                _choice(n, "kind", self.kind, _KINDS), _int(n, "capacity", self.capacity, 64),
                _int(n, "admit_after", self.admit_after, 32), _choice(n, "evict", self.evict, _EVICT),
                _int(n, "ttl_steps", self.ttl_steps, 32), _choice(n, "storage", self.storage, _STORAGE),
                _int(n, "cache_bytes", self.cache_bytes, 64), self.path,
                _int(n, "max_ids_per_partition", self.max_ids_per_partition, 64),
                _int(n, "max_unique_ids_per_partition", self.max_unique_ids_per_partition, 64),
                _choice(self.name, "limit_policy", self.limit_policy, _LIMIT_POLICY),
                _choice(self.name, "exchange", self.exchange, _EXCHANGE),
                _choice(self.name, "precision", self.precision, _PRECISION),
                _choice(self.name, "rounding", self.rounding, _ROUNDING),
                _choice(self.name, "state_precision", self.state_precision, _PRECISION),
                float(getattr(o, "momentum", 0.9)), int(bool(getattr(o, "nesterov", False))),
                _choice(n, "weight_decay_mode", getattr(o, "weight_decay_mode", "l2"), _DECAY_MODES),
                float(getattr(o, "beta", 1.0)), float(getattr(o, "l1", 0.0)),
                float(getattr(o, "l2", 0.0)), float(getattr(o, "lr_power", -0.5)),
                float(o.clip_value), float(o.clip_norm), float(getattr(o, "eta", 0.001)))


@dataclass(frozen=True)
class FeatureConfig:
    """One input feature, looked up in `table` and pooled: sum, mean, sqrtn,
    or none (one output row per id: a sequence feature)."""
    name: str
    table: str
    pooling: str = "sum"
