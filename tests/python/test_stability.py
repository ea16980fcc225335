"""Long-running behaviour: reference counts and resident memory stay flat
over 10,000 calls, handles are freed, and results are bit-identical for any
thread count."""
import gc
import sys

import numpy as np
import torch

import ember
import ember.torch


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def make(threads=1, seed=11):
    tables = [ember.TableConfig(f"t{i}", rows=5000, dim=16, optimizer=ember.Adagrad(lr=0.05)) for i in range(3)]
    features = [ember.FeatureConfig(f"f{i}", table=f"t{i % 3}", pooling="sum" if i < 3 else "mean")
                for i in range(4)]
    return ember.Collection(tables, features, seed=seed, threads=threads)


def batches(seed, n, b=256):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        lengths = rng.integers(0, 5, size=4 * b).astype(np.int32)
        ids = rng.zipf(1.2, size=int(lengths.sum())).astype(np.int64) % 5000
        yield ember.JaggedBatch([f"f{i}" for i in range(4)], lengths, ids), rng.standard_normal((b, 64)).astype(np.float32)


def test_references_and_memory_flat_over_10000_calls():
    coll = make()
    data = list(batches(1, 20))
    out = np.empty((256, 64), np.float32)
    lengths, values = data[0][0].lengths, data[0][0].values
    refs = (sys.getrefcount(out), sys.getrefcount(lengths), sys.getrefcount(values), sys.getrefcount(coll._c))
    for i in range(1000):  # warm: workspaces grow to their size
        b, g = data[i % 20]
        coll.forward(b, out=out)
        coll.backward(g)
    gc.collect()
    before = rss_kib()
    for i in range(10000):
        b, g = data[i % 20]
        coll.forward(b, out=out)
        coll.backward(g)
    gc.collect()
    grown = rss_kib() - before
    assert (sys.getrefcount(out), sys.getrefcount(lengths), sys.getrefcount(values),
            sys.getrefcount(coll._c)) == refs
    assert grown < 2048, f"resident memory grew {grown} KiB over 10,000 steps"
    assert coll.stats()["steps"] == 11000


def test_module_calls_and_handles_do_not_leak():
    tables = [ember.TableConfig("t", rows=1000, dim=8, optimizer=ember.SGD(lr=0.1))]
    features = [ember.FeatureConfig("f", table="t")]
    ebc = ember.torch.EmbeddingBagCollection(tables, features, seed=1)
    lengths = torch.ones(128, dtype=torch.int32)
    ids = torch.arange(128, dtype=torch.int64)
    batch = ember.JaggedBatch(["f"], lengths, ids)
    for _ in range(500):
        ebc(batch).sum().backward()
    gc.collect()
    before = rss_kib()
    refs = (sys.getrefcount(lengths), sys.getrefcount(ids), sys.getrefcount(ebc))
    for _ in range(10000):
        ebc(batch).sum().backward()
    for _ in range(300):  # create and free: the tables go back
        c = ember.Collection(tables, features)
        c.close()
        ember.Collection(tables, features)  # freed by the garbage collector alone
    gc.collect()
    assert (sys.getrefcount(lengths), sys.getrefcount(ids), sys.getrefcount(ebc)) == refs
    grown = rss_kib() - before
    assert grown < 4096, f"resident memory grew {grown} KiB"


def test_bit_identical_for_any_thread_count():
    results = []
    for threads in (1, 2, 3):
        coll = make(threads=threads)
        for b, g in batches(5, 30):
            coll.forward(b)
            coll.backward(g)
        results.append([coll.read_table(f"t{i}") for i in range(3)] + [coll.read_state(f"t{i}") for i in range(3)])
        coll.set_threads(1)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)
    assert not np.array_equal(results[0][0], make().read_table("t0"))  # training changed the tables
