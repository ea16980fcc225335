"""The Python API's contract: bad arguments are exceptions naming the
argument (never a crash), library errors carry ember's message, arrays are
used in place (no copies), feature order, dict output, state_dict and
checkpoints, and a KeyedJaggedTensor in."""

import numpy as np
import pytest
import torch

import ember
import ember.torch


def small(threads=1, optimizer=None, seed=1, output="tensor"):
    tables = [ember.TableConfig("a", rows=100, dim=4, optimizer=optimizer or ember.Adagrad(lr=0.1)),
              ember.TableConfig("b", rows=10, dim=2)]
    features = [ember.FeatureConfig("x", table="a"), ember.FeatureConfig("y", table="b", pooling="mean")]
    return tables, features


def batch(lengths=(1, 2, 0, 1, 1, 1), ids=(3, 4, 5, 7, 1, 2)):
    return ember.JaggedBatch(["x", "y"], np.array(lengths, np.int32), np.array(ids, np.int64))


def test_wrong_dtype_layout_and_sizes_are_named():
    coll = ember.Collection(*small())
    with pytest.raises(TypeError, match="values: expected int64"):
        coll.forward(ember.JaggedBatch(["x", "y"], np.ones(6, np.int32), np.ones(6, np.int32)))
    with pytest.raises(TypeError, match="lengths: expected int32"):
        coll.forward(ember.JaggedBatch(["x", "y"], np.ones(6, np.int64), np.ones(6, np.int64)))
    with pytest.raises(TypeError, match="lengths: expected a int32 array"):
        coll.forward(ember.JaggedBatch(["x", "y"], [1, 1, 1, 1, 1, 1], np.ones(6, np.int64)))
    with pytest.raises(ValueError, match="values: not C-contiguous"):
        coll.forward(ember.JaggedBatch(["x", "y"], np.ones(6, np.int32), np.ones(12, np.int64)[::2]))
    with pytest.raises(ValueError, match="weights: 2 entries, but there are 6 values"):
        coll.forward(ember.JaggedBatch(["x", "y"], np.ones(6, np.int32), np.ones(6, np.int64), np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="out: 3 floats"):
        coll.forward(batch(), out=np.empty(3, np.float32))
    with pytest.raises(ValueError, match="out: read-only"):
        ro = np.empty((3, 6), np.float32)
        ro.flags.writeable = False
        coll.forward(batch(), out=ro)
    with pytest.raises(ValueError, match="no key for feature"):
        coll.forward(ember.JaggedBatch(["x", "z"], np.ones(6, np.int32), np.ones(6, np.int64)))
    # the library's own checks: the feature, sample and id at fault
    with pytest.raises(ember.Error, match=r"feature 'x' sample 1: id 500 outside \[0, 100\) of table 'a'") as e:
        coll.forward(batch(ids=(3, 4, 500, 7, 1, 2)))
    assert e.value.status == -3
    with pytest.raises(ember.Error, match="lengths"):
        coll.forward(ember.JaggedBatch(["x", "y"], np.array([1, 1, 1, 1, 1, 5], np.int32), np.ones(6, np.int64)))
    # a failed call changed nothing: backward has no forward to update
    with pytest.raises(ember.Error, match="no forward"):
        coll.backward(np.zeros((3, 6), np.float32))
    out = coll.forward(batch())
    with pytest.raises(ValueError, match="grad: 6 floats"):
        coll.backward(np.zeros(6, np.float32))
    with pytest.raises(TypeError, match="grad: expected float32"):
        coll.backward(np.zeros(out.shape, np.float64))
    coll.backward(np.zeros(out.shape, np.float32))
    with pytest.raises(ValueError, match="pooling 'max'"):
        ember.Collection([ember.TableConfig("a", 10, 4)], [ember.FeatureConfig("x", "a", pooling="max")])
    with pytest.raises(ValueError, match="no table named 'c'"):
        ember.Collection([ember.TableConfig("a", 10, 4)], [ember.FeatureConfig("x", "c")])
    with pytest.raises(ember.Error, match="dim"):
        ember.Collection([ember.TableConfig("a", 10, 0)], [ember.FeatureConfig("x", "a")])


def test_closed_handle_raises():
    coll = ember.Collection(*small())
    coll.close()
    assert coll.closed
    for call in (lambda: coll.forward(batch()), lambda: coll.backward(np.zeros((3, 6), np.float32)),
                 lambda: coll.read_table("a"), coll.stats, lambda: coll.save("/nonexistent")):
        with pytest.raises(ember.Error, match="closed"):
            call()
    coll.close()  # twice is fine


def test_arrays_are_used_in_place():
    coll = ember.Collection(*small())
    out = torch.full((3, 6), 7.0)
    lengths = torch.tensor([1, 2, 0, 1, 1, 1], dtype=torch.int32)
    ids = torch.tensor([3, 4, 5, 7, 1, 2])
    ret = coll.forward(ember.JaggedBatch(["x", "y"], lengths, ids), out=out)
    assert np.shares_memory(ret, out.numpy())
    np.testing.assert_array_equal(out.numpy(), coll.forward(batch()))
    assert out[2, :4].abs().sum() == 0 and out[0].abs().sum() > 0
    # a torch tensor that requires grad is read in place as well
    w = torch.ones(6, requires_grad=True)
    coll.forward(ember.JaggedBatch(["x", "y"], lengths, ids, w), out=out)
    # DLPack: any object with __dlpack__ (numpy >= 1.22 reads it without a copy)
    class Capsule:
        def __init__(self, t):
            self.t = t
        def __dlpack__(self, stream=None):
            return torch.utils.dlpack.to_dlpack(self.t)
        def __dlpack_device__(self):
            return (1, 0)
    out2 = torch.zeros(3, 6)
    coll.forward(ember.JaggedBatch(["x", "y"], Capsule(lengths), Capsule(ids)), out=Capsule(out2))
    np.testing.assert_array_equal(out2.numpy(), out.numpy())


def test_feature_order_follows_the_collection():
    coll = ember.Collection(*small())
    b = batch()
    swapped = ember.JaggedBatch(["y", "x"], np.array([1, 1, 1, 1, 2, 0], np.int32), np.array([7, 1, 2, 3, 4, 5]))
    np.testing.assert_array_equal(coll.forward(b), coll.forward(swapped))


def test_module_dict_output_and_eval_forward():
    tables, features = small()
    ebc = ember.torch.EmbeddingBagCollection(tables, features, output="dict", seed=1)
    out = ebc(batch())
    assert list(out) == ["x", "y"] and out["x"].shape == (3, 4) and out["y"].shape == (3, 2)
    loss = out["x"].sum() + out["y"].sum()
    ebc.eval()
    with torch.no_grad():
        ebc(batch())  # an evaluation forward in between ...
    ebc.train()
    with pytest.raises(ember.Error, match="older forward"):
        loss.backward()  # ... so the training forward's rows are no longer ember's current batch
    assert ebc.stats()["steps"] == 0


def test_state_dict_and_checkpoint_round_trip(tmp_path):
    tables, features = small()
    a = ember.torch.EmbeddingBagCollection(tables, features, seed=1)
    b = ember.torch.EmbeddingBagCollection(tables, features, seed=2)
    (a(batch()).sum()).backward()
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(batch()), b(batch()), rtol=0, atol=0)
    assert set(a.state_dict()) == {"embedding_bags.a.weight", "embedding_bags.b.weight"}
    # ember's checkpoint also carries the optimizer state: the next steps agree
    a.save(str(tmp_path / "ck"), step=1)
    c = ember.torch.EmbeddingBagCollection(tables, features, seed=3)
    c.load(str(tmp_path / "ck"))
    for m in (a, c):
        m(batch()).sum().backward()
    np.testing.assert_array_equal(a.collection.read_table("a"), c.collection.read_table("a"))
    np.testing.assert_array_equal(a.collection.read_state("a"), c.collection.read_state("a"))
    with pytest.raises(ember.Error, match="nothing-here"):
        c.load(str(tmp_path / "nothing-here"))


class FakeKJT:
    """The part of torchrec.KeyedJaggedTensor that from_kjt reads."""
    def __init__(self, keys, lengths, values, weights=None):
        self._k, self._l, self._v, self._w = keys, lengths, values, weights
    def keys(self): return self._k
    def lengths(self): return self._l
    def values(self): return self._v
    def weights_or_none(self): return self._w
    def stride(self): return len(self._l) // len(self._k)


def test_keyed_jagged_tensor_in():
    tables, features = small()
    ebc = ember.torch.EmbeddingBagCollection(tables, features, seed=1)
    kjt = FakeKJT(["x", "y"], torch.tensor([1, 2, 0, 1, 1, 1]), torch.tensor([3, 4, 5, 7, 1, 2]))
    with torch.no_grad():
        torch.testing.assert_close(ebc(kjt), ebc(batch()), rtol=0, atol=0)
    try:
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    except ImportError:
        return  # torchrec is optional; the fake above stands for its interface
    real = KeyedJaggedTensor.from_lengths_sync(keys=["x", "y"], values=torch.tensor([3, 4, 5, 7, 1, 2]),
                                               lengths=torch.tensor([1, 2, 0, 1, 1, 1]))
    with torch.no_grad():
        torch.testing.assert_close(ebc(real), ebc(batch()), rtol=0, atol=0)


def test_two_training_forwards_change_nothing():
    tables, features = small()
    ebc = ember.torch.EmbeddingBagCollection(tables, features, seed=1)
    before = ebc.collection.read_table("a")
    out = ebc(batch())
    with pytest.raises(ember.Error, match="still waits for its backward"):
        ebc(batch(ids=(9, 8, 7, 6, 5, 4)))
    np.testing.assert_array_equal(ebc.collection.read_table("a"), before)
    out.sum().backward()  # the first forward's backward still applies
    assert ebc.stats()["steps"] == 1
    del out
    ebc(batch())  # a dropped output frees the next forward
    ebc(batch()).sum().backward()
    assert ebc.stats()["steps"] == 2


def test_closed_and_threads_and_bounds():
    coll = ember.Collection(*small())
    coll.close()
    for call in (lambda: coll.read_state("a"), lambda: coll.write_state("a", np.zeros((1, 4), np.float32)),
                 lambda: coll.set_threads(2)):
        with pytest.raises(ember.Error, match="closed"):
            call()
    coll = ember.Collection(*small())
    with pytest.raises(IndexError, match=r"table 'a': rows \[99, 101\)"):
        coll.read_table("a", first=99, count=2)
    with pytest.raises(ValueError, match="table 'big': dim"):
        ember.Collection([ember.TableConfig("big", rows=10, dim=2**40)], [ember.FeatureConfig("x", "big")])
    with pytest.raises(TypeError):
        coll.set_threads(1e20)
    import threading
    out = coll.forward(batch())
    err = []
    t = threading.Thread(target=lambda: err.append(pytest.raises(ember.Error, coll.backward, np.zeros_like(out))))
    t.start()
    t.join()
    assert "another thread" in str(err[0].value)
    coll.backward(np.zeros_like(out))


def test_state_dict_strict_and_atomic():
    tables, features = small()
    a = ember.torch.EmbeddingBagCollection(tables, features, seed=1)
    b = ember.torch.EmbeddingBagCollection(tables, features, seed=2)
    sd = a.state_dict()
    with pytest.raises(RuntimeError, match="typo"):
        b.load_state_dict({**sd, "embedding_bags.typo.weight": torch.zeros(1)})
    before = b.collection.read_table("a")
    bad = dict(sd)
    bad["embedding_bags.b.weight"] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match="shape"):
        b.load_state_dict(bad)
    np.testing.assert_array_equal(b.collection.read_table("a"), before)  # nothing was written


def test_messages_that_are_not_utf8_still_raise_ember_error():
    with pytest.raises(ember.Error):
        ember.Reader(path="/nonexistent/x" + "\u00e9" * 400, world=ember.World())
