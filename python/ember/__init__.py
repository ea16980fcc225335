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
from ._ember import Error, version
from .batch import JaggedBatch
from .collection import Collection
from .data import Reader, Samples
from .config import SGD, Adagrad, Adam, FeatureConfig, RowWiseAdagrad, TableConfig
from .predict import Predictor, predict

__version__ = version()
__all__ = ["Error", "JaggedBatch", "Collection", "TableConfig", "FeatureConfig", "SGD", "Adagrad",
           "RowWiseAdagrad", "Adam", "Predictor", "predict", "Reader", "Samples", "version"]
