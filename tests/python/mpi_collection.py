"""Run by test_mpi.py under `mpirun -np 2`: a collection spread over the
ranks (row, table, column and replicated placements) trains on each rank's
share of fresh random global batches; a local collection on every rank
trains on the whole global batch.  Their outputs and tables must be equal
bit for bit (the rows exchange's contract).  Exit 0 on success."""
import dataclasses
import sys

import numpy as np

import ember

w = ember.world()
assert w.size == 2, f"expected a world of 2, got {w}"
seed = int(sys.argv[1])
tables = [ember.TableConfig("r", rows=97, dim=8, optimizer=ember.Adagrad(lr=0.1), placement="row"),
          ember.TableConfig("t", rows=31, dim=4, optimizer=ember.SGD(lr=0.2), placement="table", owner=1),
          ember.TableConfig("c", rows=20, dim=6, optimizer=ember.Adagrad(lr=0.1), placement="column"),
          ember.TableConfig("p", rows=13, dim=4, optimizer=ember.SGD(lr=0.1), placement="replicated")]
features = [ember.FeatureConfig("fr", "r"), ember.FeatureConfig("ft", "t", pooling="mean"),
            ember.FeatureConfig("fc", "c"), ember.FeatureConfig("fp", "p")]
rows = [97, 31, 20, 13]
spread = ember.Collection(tables, features, seed=3, world=w)
# in a world of one every placement is the same local table (owner 0)
local = ember.Collection([dataclasses.replace(t, owner=0) for t in tables], features, seed=3, world=ember.World())
rng = np.random.default_rng(seed)  # the same on both ranks: both know the global batch
B = 24
for step in range(5):
    lengths = rng.integers(0, 4, size=(4, 2 * B)).astype(np.int32)
    ids = [rng.integers(0, rows[f], size=int(lengths[f].sum())) for f in range(4)]
    grad = rng.standard_normal((2 * B, 22)).astype(np.float32)
    whole = ember.JaggedBatch([f.name for f in features], lengths.reshape(-1), np.concatenate(ids).astype(np.int64))
    mine_l = lengths[:, w.rank * B:(w.rank + 1) * B]
    mine_i = [ids[f][lengths[f, :w.rank * B].sum():lengths[f, :(w.rank + 1) * B].sum()] for f in range(4)]
    mine = ember.JaggedBatch(whole.keys, np.ascontiguousarray(mine_l).reshape(-1),
                             np.concatenate(mine_i).astype(np.int64))
    out_spread = spread.forward(mine)
    out_local = local.forward(whole)
    assert np.array_equal(out_spread, out_local[w.rank * B:(w.rank + 1) * B]), f"step {step}: outputs differ"
    spread.backward(grad[w.rank * B:(w.rank + 1) * B])
    local.backward(grad)
for t in tables:
    assert np.array_equal(spread.read_table(t.name), local.read_table(t.name)), f"table {t.name} differs"
print(f"rank {w.rank}: ok")
