"""Half-precision training rows and optimizer state from Python:
TableConfig(precision=..., state_precision=...),
rows read as their halves exactly, state_dict in the table's dtype, a
checkpoint that resumes bit for bit, and an unknown precision named."""
import numpy as np
import pytest
import torch

import ember
import ember.torch


def tables(precision, rounding="stochastic"):
    return ([ember.TableConfig("a", rows=200, dim=16, optimizer=ember.Adagrad(lr=0.1), precision=precision,
                               rounding=rounding),
             ember.TableConfig("b", rows=50, dim=8, precision="fp32")],
            [ember.FeatureConfig("x", table="a"), ember.FeatureConfig("y", table="b", pooling="mean")])


def batch(rng, n=64):
    lengths = rng.integers(0, 4, size=2 * n).astype(np.int32)
    ids = np.concatenate([rng.integers(0, 200, size=int(lengths[:n].sum())),
                          rng.integers(0, 50, size=int(lengths[n:].sum()))]).astype(np.int64)
    return ember.JaggedBatch(["x", "y"], lengths, ids)


@pytest.mark.parametrize("precision,dtype", [("fp16", np.float16), ("bf16", None)])
def test_rows_are_halves_and_state_dict_has_the_tables_dtype(tmp_path, precision, dtype):
    rng = np.random.default_rng(7)
    t, f = tables(precision)
    a = ember.torch.EmbeddingBagCollection(t, f, seed=3)
    for _ in range(3):
        a(batch(rng)).sum().backward()
    rows = a.collection.read_table("a")
    if dtype is not None:  # every value is an fp16 exactly
        np.testing.assert_array_equal(rows.astype(dtype).astype(np.float32), rows)
    else:  # bf16: the low 16 bits of every float are zero
        assert not np.any(rows.view(np.uint32) & 0xFFFF)
    sd = a.state_dict()
    assert sd["embedding_bags.a.weight"].dtype == {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    assert sd["embedding_bags.b.weight"].dtype == torch.float32
    b = ember.torch.EmbeddingBagCollection(t, f, seed=4)
    b.load_state_dict(sd)
    np.testing.assert_array_equal(b.collection.read_table("a"), rows)
    # a checkpoint resumes exactly under the same seed (the rounding's bits
    # come from it): the same next steps, the same rounding
    a.save(str(tmp_path / "ck"), step=3)
    c = ember.torch.EmbeddingBagCollection(t, f, seed=3)
    c.load(str(tmp_path / "ck"))
    r1, r2 = np.random.default_rng(11), np.random.default_rng(11)
    for _ in range(2):
        a(batch(r1)).sum().backward()
        c(batch(r2)).sum().backward()
    np.testing.assert_array_equal(a.collection.read_table("a"), c.collection.read_table("a"))
    np.testing.assert_array_equal(a.collection.read_state("a"), c.collection.read_state("a"))


def test_unknown_precision_and_rounding_are_named():
    with pytest.raises(ValueError, match="precision 'fp8'"):
        ember.Collection([ember.TableConfig("a", rows=4, dim=2, precision="fp8")], [ember.FeatureConfig("x", "a")])
    with pytest.raises(ValueError, match="rounding 'up'"):
        ember.Collection([ember.TableConfig("a", rows=4, dim=2, precision="fp16", rounding="up")],
                         [ember.FeatureConfig("x", "a")])


@pytest.mark.parametrize("state_precision,dtype", [("fp16", np.float16), ("bf16", None)])
def test_half_optimizer_state(tmp_path, state_precision, dtype):
    """Adam's state in half precision beside fp32 rows: read as its halves
    exactly, and a checkpoint resumes bit for bit."""
    rng = np.random.default_rng(5)
    t = [ember.TableConfig("a", rows=200, dim=16, optimizer=ember.Adam(lr=0.01), state_precision=state_precision),
         ember.TableConfig("b", rows=50, dim=8, precision="fp32")]
    f = [ember.FeatureConfig("x", table="a"), ember.FeatureConfig("y", table="b", pooling="mean")]
    a = ember.torch.EmbeddingBagCollection(t, f, seed=3)
    for _ in range(3):
        a(batch(rng)).sum().backward()
    state = a.collection.read_state("a")
    assert np.any(state != 0)
    if dtype is not None:
        np.testing.assert_array_equal(state.astype(dtype).astype(np.float32), state)
    else:
        assert not np.any(state.view(np.uint32) & 0xFFFF)
    a.save(str(tmp_path / "ck"), step=3)
    c = ember.torch.EmbeddingBagCollection(t, f, seed=3)
    c.load(str(tmp_path / "ck"))
    np.testing.assert_array_equal(a.collection.read_state("a"), c.collection.read_state("a"))
    r1, r2 = np.random.default_rng(12), np.random.default_rng(12)
    for _ in range(2):
        a(batch(r1)).sum().backward()
        c(batch(r2)).sum().backward()
    np.testing.assert_array_equal(a.collection.read_table("a"), c.collection.read_table("a"))
    np.testing.assert_array_equal(a.collection.read_state("a"), c.collection.read_state("a"))


def test_half_state_refused_for_rowwise_adagrad():
    with pytest.raises(Exception, match="row-wise Adagrad"):
        ember.Collection([ember.TableConfig("a", rows=4, dim=2, optimizer=ember.RowWiseAdagrad(lr=0.1),
                                            state_precision="fp16")], [ember.FeatureConfig("x", "a")])
