"""ember: embedding tables with fused sparse optimizers, from Python.

    import ember
    tables = [ember.TableConfig("users", rows=1_000_000, dim=64, optimizer=ember.Adagrad(lr=0.1))]
    features = [ember.FeatureConfig("user_id", table="users")]
    coll = ember.Collection(tables, features)
    pooled = coll.forward(ember.JaggedBatch(["user_id"], lengths, ids))
    coll.backward(d_pooled)

ember.torch.EmbeddingBagCollection is the same as a PyTorch module;
ember.train runs the CTR trainer of `ember train`; ember.Predictor scores
with a trained model.  docs/python.md is the guide.
"""
import os as _os

if any(k in _os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")):
    # Under mpirun: Open MPI's plugins need libmpi's symbols global, which a
    # Python extension's libraries are not; load libmpi so first.
    import ctypes as _ctypes
    for _name in ("libmpi.so.40", "libmpi.so"):
        try:
            _ctypes.CDLL(_name, mode=_ctypes.RTLD_GLOBAL)
            break
        except OSError:
            pass

from ._ember import Error, version
from .batch import JaggedBatch
from .collection import Collection
from .data import Reader, Samples, synthetic_batches
from .config import (FTRL, LAMB, LARS, SGD, Adagrad, Adam, AdamW, FeatureConfig, Momentum, RowWiseAdagrad,
                     RowWiseAdam, TableConfig)
from .predict import Predictor, predict
from .train import train
from .world import World, world

__version__ = version()
__all__ = ["Error", "JaggedBatch", "Collection", "TableConfig", "FeatureConfig", "SGD", "Adagrad",
           "RowWiseAdagrad", "Adam", "AdamW", "Momentum", "FTRL", "RowWiseAdam", "LAMB", "LARS", "Predictor", "predict", "train", "Reader", "Samples", "synthetic_batches", "World", "world", "version"]
