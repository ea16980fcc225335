"""Forward, backward and every optimizer of ember's Python module against
PyTorch: torch.nn.functional.embedding_bag and torch.optim (dense gradients
from autograd), or numpy where torch has no equivalent (sqrtn pooling,
weighted mean, row-wise Adagrad).  Fresh random batches every run (the seed
is printed on failure); tolerances are stated per check.

Documented differences, checked as such: weight decay touches only the rows
in the batch (torch's dense optimizers decay every row); Adam is lazy with
the collection's step count (torch.optim.SparseAdam's semantics); momentum
moves only the batch's rows.
"""
import os

import numpy as np
import pytest
import torch

import ember
import ember.torch

SEED = int(os.environ.get("EMBER_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))
RTOL, ATOL = 1e-5, 1e-6  # float32 sums in a different order


def random_batch(rng, features, rows, batch_size, max_len=6, weighted=False):
    """lengths feature-major, ids per feature in [0, rows of its table)."""
    lengths = rng.integers(0, max_len + 1, size=(len(features), batch_size)).astype(np.int32)
    ids = np.concatenate([rng.integers(0, rows[f], size=int(lengths[i].sum()))
                          for i, f in enumerate(features)]).astype(np.int64)
    weights = rng.uniform(0.5, 1.5, size=ids.size).astype(np.float32) if weighted else None
    return ember.JaggedBatch(features, lengths.reshape(-1), ids, weights)


def reference_pool(tables, batch, feature_tables, poolings):
    """Pooled [B, sum dims] from torch (sum, mean) or numpy (sqrtn, weighted mean)."""
    lengths = np.asarray(batch.lengths).reshape(len(batch.keys), batch.batch_size)
    ids = torch.from_numpy(np.asarray(batch.values))
    w = None if batch.weights is None else torch.from_numpy(np.asarray(batch.weights))
    outs, start = [], 0
    for f, name in enumerate(batch.keys):
        n = int(lengths[f].sum())
        fid, fw = ids[start:start + n], None if w is None else w[start:start + n]
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths[f])[:-1]]).astype(np.int64))
        W = tables[feature_tables[name]]
        mode = poolings[name]
        if mode == "sum" or (mode == "mean" and fw is None):
            outs.append(torch.nn.functional.embedding_bag(fid, W, offsets, mode=mode, per_sample_weights=fw))
        else:  # sqrtn, or mean with weights: sum(w row) / divisor
            ww = torch.ones(n) if fw is None else fw
            seg = torch.repeat_interleave(torch.arange(batch.batch_size), torch.from_numpy(lengths[f].astype(np.int64)))
            s = torch.zeros(batch.batch_size, W.shape[1]).index_add(0, seg, W[fid] * ww[:, None])
            div = torch.zeros(batch.batch_size).index_add(0, seg, ww if mode == "mean" else ww * ww)
            div = div if mode == "mean" else div.sqrt()
            outs.append(torch.where(div[:, None] > 0, s / torch.where(div > 0, div, 1)[:, None], 0))
        start += n
    return torch.cat(outs, dim=1)


def sum_pooled_step(rng, coll, rows, batch_size, max_len):
    """A step of one sum-pooled feature "f" over table rows [0, rows) with a
    random upstream gradient; returns each row's summed gradient (float64,
    rows x dim) and the rows the batch touched, ascending."""
    batch = random_batch(rng, ["f"], {"f": rows}, batch_size, max_len=max_len)
    out = coll.forward(batch)
    grad = rng.standard_normal(out.shape).astype(np.float32)
    coll.backward(grad)
    g = np.zeros((rows, out.shape[1]))
    ids = np.asarray(batch.values)
    np.add.at(g, ids, grad[np.repeat(np.arange(batch_size), np.asarray(batch.lengths))].astype(np.float64))
    return g, np.unique(ids)


def make(optimizer, poolings, rows=(50, 30), dim=(8, 4), threads=1, seed=7):
    tables = [ember.TableConfig(f"t{i}", rows=rows[i], dim=dim[i], optimizer=optimizer) for i in range(2)]
    # f0 and f2 share table t0: their gradients add up on its rows
    ft = {"f0": "t0", "f1": "t1", "f2": "t0"}
    features = [ember.FeatureConfig(n, table=ft[n], pooling=poolings[n]) for n in ft]
    return ember.Collection(tables, features, seed=seed, threads=threads), ft


@pytest.mark.parametrize("pooling", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_forward_matches_torch(pooling, weighted):
    rng = np.random.default_rng([SEED, 1])
    poolings = {"f0": pooling, "f1": "sum", "f2": pooling}
    coll, ft = make(ember.SGD(lr=0.1), poolings)
    W = {t.name: torch.from_numpy(coll.read_table(t.name)) for t in coll.tables}
    for _ in range(3):
        batch = random_batch(rng, ["f0", "f1", "f2"], {"f0": 50, "f1": 30, "f2": 50}, 37, weighted=weighted)
        got = coll.forward(batch)
        want = reference_pool(W, batch, ft, poolings).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"seed {SEED}")


def torch_step(opt_name, params, lr, wd=0.0):
    if opt_name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    if opt_name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, eps=1e-8, weight_decay=wd)
    raise ValueError(opt_name)


@pytest.mark.parametrize("opt_name", ["sgd", "adagrad"])
@pytest.mark.parametrize("pooling", ["sum", "mean", "sqrtn"])
def test_backward_and_optimizer_match_torch(opt_name, pooling):
    """Three steps of ember's fused update against autograd's dense gradient
    and torch.optim on the same tables and upstream gradients."""
    rng = np.random.default_rng([SEED, 2])
    opt = ember.SGD(lr=0.3) if opt_name == "sgd" else ember.Adagrad(lr=0.3, eps=1e-8)
    poolings = {"f0": pooling, "f1": "sum", "f2": "mean"}
    coll, ft = make(opt, poolings)
    W = {t.name: torch.from_numpy(coll.read_table(t.name).copy()).requires_grad_() for t in coll.tables}
    topt = torch_step(opt_name, list(W.values()), 0.3)
    for _ in range(3):
        batch = random_batch(rng, ["f0", "f1", "f2"], {"f0": 50, "f1": 30, "f2": 50}, 29, weighted=True)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        topt.zero_grad()
        (reference_pool(W, batch, ft, poolings) * torch.from_numpy(grad)).sum().backward()
        topt.step()
        for name, w in W.items():
            np.testing.assert_allclose(coll.read_table(name), w.detach().numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"table {name}, seed {SEED}")
    if opt_name == "adagrad":  # the state is torch's sum of squares
        np.testing.assert_allclose(coll.read_state("t0"), topt.state[W["t0"]]["sum"].numpy(), rtol=1e-5, atol=1e-7)


def test_weight_decay_touches_only_the_batch_rows():
    """SGD with L2: the rows in the batch equal torch's update; the others are
    unchanged (torch's dense SGD would decay them too)."""
    rng = np.random.default_rng([SEED, 3])
    poolings = {"f0": "sum", "f1": "sum", "f2": "sum"}
    coll, ft = make(ember.SGD(lr=0.2, weight_decay=0.1), poolings)
    before = {t.name: coll.read_table(t.name) for t in coll.tables}
    W = {n: torch.from_numpy(v.copy()).requires_grad_() for n, v in before.items()}
    topt = torch.optim.SGD(list(W.values()), lr=0.2, weight_decay=0.1)
    batch = random_batch(rng, ["f0", "f1", "f2"], {"f0": 50, "f1": 30, "f2": 50}, 5, max_len=2)
    grad = rng.standard_normal(coll.forward(batch).shape).astype(np.float32)
    coll.backward(grad)
    (reference_pool(W, batch, ft, poolings) * torch.from_numpy(grad)).sum().backward()
    topt.step()
    lengths = np.asarray(batch.lengths).reshape(3, -1).sum(axis=1)
    ids = np.split(np.asarray(batch.values), np.cumsum(lengths)[:-1])
    touched = {"t0": set(ids[0]) | set(ids[2]), "t1": set(ids[1])}
    for name in W:
        got = coll.read_table(name)
        for r in range(got.shape[0]):
            want = W[name][r].detach().numpy() if r in touched[name] else before[name][r]
            np.testing.assert_allclose(got[r], want, rtol=1e-5, atol=1e-6, err_msg=f"{name} row {r}")


def test_adam_is_sparse_adam():
    """ember's lazy Adam equals torch.optim.SparseAdam over nn.EmbeddingBag(sparse=True)."""
    rng = np.random.default_rng([SEED, 4])
    t = ember.TableConfig("t", rows=40, dim=6, optimizer=ember.Adam(lr=0.05, betas=(0.8, 0.95), eps=1e-6))
    coll = ember.Collection([t], [ember.FeatureConfig("f", table="t")], seed=3)
    bag = torch.nn.EmbeddingBag(40, 6, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(coll.read_table("t")))
    topt = torch.optim.SparseAdam(bag.parameters(), lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    for _ in range(4):
        batch = random_batch(rng, ["f"], {"f": 40}, 9, max_len=3)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        lengths = torch.from_numpy(np.asarray(batch.lengths).astype(np.int64))
        offsets = torch.cumsum(lengths, 0) - lengths
        topt.zero_grad()
        (bag(torch.from_numpy(batch.values), offsets) * torch.from_numpy(grad)).sum().backward()
        topt.step()
        np.testing.assert_allclose(coll.read_table("t"), bag.weight.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"seed {SEED}")


def torch_bag_step(bag, topt, ids, lengths, grad):
    """One step of torch's optimizer on an nn.EmbeddingBag (sum) for the bags
    (ids, lengths) with upstream gradient grad."""
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
    topt.zero_grad()
    (bag(torch.from_numpy(ids), offsets) * torch.from_numpy(grad)).sum().backward()
    topt.step()


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_is_torch_sgd_momentum(nesterov):
    """ember's momentum equals torch.optim.SGD(momentum, nesterov, weight_decay)
    when every row is in every batch (then lazy and dense updates agree); a
    row left out of a batch keeps its weights and its velocity (torch would
    move it by its velocity)."""
    rng = np.random.default_rng([SEED, 5, int(nesterov)])
    rows, dim = 12, 5
    opt = ember.Momentum(lr=0.05, momentum=0.8, nesterov=nesterov, weight_decay=0.01)
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=opt)],
                            [ember.FeatureConfig("f", table="t")], seed=5)
    bag = torch.nn.EmbeddingBag(rows, dim, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(coll.read_table("t")))
    topt = torch.optim.SGD(bag.parameters(), lr=0.05, momentum=0.8, nesterov=nesterov, weight_decay=0.01)

    def run(ids_of_bags):
        lengths = np.array([len(b) for b in ids_of_bags], dtype=np.int32)
        ids = np.concatenate(ids_of_bags).astype(np.int64)
        batch = ember.JaggedBatch(["f"], lengths, ids)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        return ids, lengths, grad

    for _ in range(4):  # every row in every batch, in random bags
        perm = rng.permutation(rows)
        extra = rng.integers(0, rows, size=7)
        cuts = np.sort(rng.integers(0, rows + 7, size=3))
        torch_bag_step(bag, topt, *run(np.split(np.concatenate([perm, extra]), cuts)))
        np.testing.assert_allclose(coll.read_table("t"), bag.weight.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"seed {SEED}")
    np.testing.assert_allclose(coll.read_state("t"), topt.state[bag.weight]["momentum_buffer"].numpy(),
                               rtol=1e-5, atol=1e-6, err_msg=f"seed {SEED}")
    before_w, before_b = coll.read_table("t"), coll.read_state("t")
    run([np.array([0, 1, 1], dtype=np.int64)])  # rows 2.. untouched
    np.testing.assert_array_equal(coll.read_table("t")[2:], before_w[2:])
    np.testing.assert_array_equal(coll.read_state("t")[2:], before_b[2:])
    assert not np.array_equal(coll.read_table("t")[:2], before_w[:2])


def test_adamw_is_torch_adamw():
    """ember's AdamW equals torch.optim.AdamW when every row is in every batch
    (lazy and dense agree then): decay w *= 1 - lr * wd, then Adam on g.
    eps is tiny: ember's Adam adds eps to sqrt(v) as SparseAdam does, torch's
    AdamW to sqrt(v / (1 - beta2^t)), a difference of order eps."""
    rng = np.random.default_rng([SEED, 6])
    rows, dim = 10, 6
    opt = ember.AdamW(lr=0.05, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.3)
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=opt)],
                            [ember.FeatureConfig("f", table="t")], seed=6)
    bag = torch.nn.EmbeddingBag(rows, dim, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(coll.read_table("t")))
    topt = torch.optim.AdamW(bag.parameters(), lr=0.05, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.3)
    for _ in range(4):
        ids = np.concatenate([rng.permutation(rows), rng.integers(0, rows, size=5)]).astype(np.int64)
        lengths = np.array([4, 3, len(ids) - 7], dtype=np.int32)
        batch = ember.JaggedBatch(["f"], lengths, ids)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        torch_bag_step(bag, topt, ids, lengths, grad)
        np.testing.assert_allclose(coll.read_table("t"), bag.weight.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"seed {SEED}")


def test_clip_value_is_torch_clip_grad_value():
    """SGD with clip_value equals torch's clip_grad_value_ then SGD (clipping
    elements is the same on the dense gradient, whose untouched rows are 0);
    ember's statistics count the clipped elements."""
    rng = np.random.default_rng([SEED, 9])
    rows, dim, clip = 15, 6, 0.4
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=ember.SGD(lr=0.3, clip_value=clip))],
                            [ember.FeatureConfig("f", table="t")], seed=10)
    bag = torch.nn.EmbeddingBag(rows, dim, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(coll.read_table("t")))
    topt = torch.optim.SGD(bag.parameters(), lr=0.3)
    clipped = 0
    for _ in range(3):
        batch = random_batch(rng, ["f"], {"f": rows}, 9, max_len=4)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        ids, lengths = np.asarray(batch.values), np.asarray(batch.lengths)
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64))
        topt.zero_grad()
        (bag(torch.from_numpy(ids), offsets) * torch.from_numpy(grad)).sum().backward()
        clipped += int((bag.weight.grad.abs() > clip).sum())
        torch.nn.utils.clip_grad_value_(bag.parameters(), clip)
        topt.step()
        np.testing.assert_allclose(coll.read_table("t"), bag.weight.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"seed {SEED}")
    assert coll.stats()["clipped_values"] == clipped > 0, (coll.stats()["clipped_values"], clipped)


def test_ftrl_matches_numpy():
    """FTRL-Proximal against a numpy transcription of McMahan et al.'s
    per-coordinate update, lazily on the rows of each batch (sum pooling, so
    a row's gradient is the sum of its bags' upstream rows); l1 large enough
    that some weights are exactly zero, and stay so."""
    rng = np.random.default_rng([SEED, 7])
    rows, dim, lr, beta, l1, l2 = 30, 4, 0.3, 1.0, 0.4, 0.05
    opt = ember.FTRL(lr=lr, beta=beta, l1=l1, l2=l2)
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=opt, init="zeros")],
                            [ember.FeatureConfig("f", table="t")], seed=8)
    w = np.zeros((rows, dim), np.float32)
    z = np.zeros((rows, dim), np.float32)
    n = np.zeros((rows, dim), np.float32)
    for _ in range(6):
        batch = random_batch(rng, ["f"], {"f": rows}, 11, max_len=4)
        out = coll.forward(batch)
        grad = rng.standard_normal(out.shape).astype(np.float32)
        coll.backward(grad)
        g = np.zeros((rows, dim), np.float32)
        touched = np.zeros(rows, bool)
        bag_of = np.repeat(np.arange(11), np.asarray(batch.lengths))
        for i, r in zip(bag_of, np.asarray(batch.values)):
            g[r] += grad[i]
            touched[r] = True
        n1 = n + g * g
        sigma = (np.sqrt(n1) - np.sqrt(n)) / lr
        z = np.where(touched[:, None], z + g - sigma * w, z)
        n = np.where(touched[:, None], n1, n)
        new_w = np.where(np.abs(z) <= l1, 0.0, -(z - np.sign(z) * l1) / ((beta + np.sqrt(n)) / lr + l2))
        w = np.where(touched[:, None], new_w, w).astype(np.float32)
        np.testing.assert_allclose(coll.read_table("t"), w, rtol=1e-5, atol=1e-6, err_msg=f"seed {SEED}")
        assert np.array_equal(coll.read_table("t") == 0, w == 0), f"seed {SEED}: exact zeros differ"
    assert (w == 0).any() and (w != 0).any(), f"seed {SEED}: l1 made no weight zero, or every one"
    np.testing.assert_allclose(coll.read_state("t"), np.concatenate([z, n], axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["l2", "decoupled"])
def test_rowwise_adagrad_weight_decay_modes_match_fbgemm_formula(mode):
    """Row-wise Adagrad's two weight-decay modes against FBGEMM's TBE formula
    (weight_decay_mode L2 / DECOUPLE) written out in numpy: the mean of
    (g + wd w)^2 (L2) or of g^2 (decoupled) joins s, m = lr / (sqrt(s) + eps),
    then w = (1 - m wd) w - m g (L2) or (1 - lr wd) w - m g (decoupled)."""
    rng = np.random.default_rng([SEED, 8, mode == "l2"])
    rows, dim, lr, wd, eps = 25, 8, 0.1, 0.05, 1e-8
    opt = ember.RowWiseAdagrad(lr=lr, eps=eps, weight_decay=wd, weight_decay_mode=mode)
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=opt)],
                            [ember.FeatureConfig("f", table="t")], seed=9)
    w = coll.read_table("t").astype(np.float64)
    s = np.zeros(rows)
    for _ in range(4):
        g, touched = sum_pooled_step(rng, coll, rows, 7, 4)
        for r in touched:
            gg = g[r] + wd * w[r] if mode == "l2" else g[r]
            s[r] += (gg * gg).mean()
            m = lr / (np.sqrt(s[r]) + eps)
            w[r] = (1 - m * wd if mode == "l2" else 1 - lr * wd) * w[r] - m * g[r]
        np.testing.assert_allclose(coll.read_table("t"), w, rtol=1e-5, atol=1e-6, err_msg=f"seed {SEED}")


def _fbgemm_step(kind, w, st, g, t, lr, wd, eps=1e-8, b1=0.9, b2=0.999, eta=0.5, mu=0.9):
    """One row's update as FBGEMM's TBE kernels write it (fbgemm_gpu's
    genscript/optimizers.py: partial_rowwise_adam, lamb, lars_sgd), float64."""
    if kind == "rowwise_adam":
        m, v = st
        v[0] = b2 * v[0] + (1 - b2) * (g * g).mean()
        m[:] = b1 * m + (1 - b1) * g
        w -= lr * (m / (1 - b1 ** t) / (np.sqrt(v[0] / (1 - b2 ** t)) + eps) + wd * w)
    elif kind == "lamb":
        m, v = st
        m[:] = b1 * m + (1 - b1) * g
        v[:] = b2 * v + (1 - b2) * g * g
        r = m / (1 - b1 ** t) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * w
        w -= lr * np.linalg.norm(w) / np.linalg.norm(r) * r
    else:  # lars_sgd
        (b,) = st
        q = eta * np.linalg.norm(w) / (np.linalg.norm(g) + wd * np.linalg.norm(w))
        b[:] = mu * b + lr * q * (g + wd * w)
        w -= b


@pytest.mark.parametrize("kind", ["rowwise_adam", "lamb", "lars"])
def test_fbgemm_only_optimizers_match_fbgemm_formula(kind):
    """Row-wise Adam, LAMB and LARS against FBGEMM's TBE formulas written out
    in numpy (its kernels for these are CUDA-only: there is no CPU kernel to
    run beside ember here).  Weight decay in FBGEMM's form: decoupled for
    row-wise Adam (w -= lr (step + wd w)) and LAMB (wd w inside r), L2 for
    LARS (g + wd w, and |g| + wd |w| in the local rate).  Lazy on the batch's
    rows, t = the step count; rows start random (FBGEMM's LAMB and LARS
    divide by |w| and |r| unguarded)."""
    rng = np.random.default_rng([SEED, 9, len(kind)])
    rows, dim, lr, wd = 25, 8, 0.05, 0.1
    opt = {"rowwise_adam": ember.RowWiseAdam(lr=lr, weight_decay=wd, weight_decay_mode="decoupled"),
           "lamb": ember.LAMB(lr=lr, weight_decay=wd, weight_decay_mode="decoupled"),
           "lars": ember.LARS(lr=lr, eta=0.5, momentum=0.9, weight_decay=wd)}[kind]
    coll = ember.Collection([ember.TableConfig("t", rows=rows, dim=dim, optimizer=opt)],
                            [ember.FeatureConfig("f", table="t")], seed=10)
    w = coll.read_table("t").astype(np.float64)
    widths = {"rowwise_adam": (dim, 1), "lamb": (dim, dim), "lars": (dim,)}[kind]
    st = [[np.zeros(n) for n in widths] for _ in range(rows)]
    for t in range(1, 6):
        g, touched = sum_pooled_step(rng, coll, rows, 7, 4)
        for r in touched:
            _fbgemm_step(kind, w[r], st[r], g[r], t, lr, wd)
        np.testing.assert_allclose(coll.read_table("t"), w, rtol=1e-5, atol=1e-6, err_msg=f"seed {SEED} step {t}")
    state = np.array([np.concatenate(s) for s in st])
    np.testing.assert_allclose(coll.read_state("t"), state, rtol=1e-5, atol=1e-6, err_msg=f"seed {SEED}")


def test_rowwise_adagrad_matches_numpy():
    rng = np.random.default_rng([SEED, 5])
    t = ember.TableConfig("t", rows=20, dim=4, optimizer=ember.RowWiseAdagrad(lr=0.1, eps=1e-8))
    coll = ember.Collection([t], [ember.FeatureConfig("f", table="t")], seed=5)
    w = coll.read_table("t").astype(np.float64)
    s = np.zeros(20)
    for _ in range(3):
        g, rows = sum_pooled_step(rng, coll, 20, 11, 3)
        s[rows] += (g[rows] ** 2).mean(axis=1)
        w[rows] -= 0.1 * g[rows] / (np.sqrt(s[rows])[:, None] + 1e-8)
        np.testing.assert_allclose(coll.read_table("t"), w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(coll.read_state("t")[:, 0], s, rtol=1e-5, atol=1e-7)


def test_module_matches_nn_embedding_bag():
    """ember.torch.EmbeddingBagCollection inside autograd: the output, the
    gradient reaching the rest of the model, and the tables after a step
    equal nn.EmbeddingBag(sparse=True) with torch.optim.Adagrad."""
    rng = np.random.default_rng([SEED, 6])
    tables = [ember.TableConfig("t", rows=30, dim=5, optimizer=ember.Adagrad(lr=0.2, eps=1e-8))]
    ebc = ember.torch.EmbeddingBagCollection(tables, [ember.FeatureConfig("f", table="t")], seed=9)
    bag = torch.nn.EmbeddingBag(30, 5, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(ebc.collection.read_table("t")))
    topt = torch.optim.Adagrad(bag.parameters(), lr=0.2, eps=1e-8)
    head = torch.nn.Linear(5, 1)
    for _ in range(3):
        batch = random_batch(rng, ["f"], {"f": 30}, 16, max_len=4)
        lengths = torch.from_numpy(np.asarray(batch.lengths).astype(np.int64))
        x = torch.from_numpy(rng.standard_normal(16).astype(np.float32))
        out = ebc(batch)
        ref = bag(torch.from_numpy(batch.values), torch.cumsum(lengths, 0) - lengths)
        torch.testing.assert_close(out, ref, rtol=RTOL, atol=ATOL)
        head.zero_grad()
        ((head(out).squeeze(1) - x) ** 2).mean().backward()
        g_ember = head.weight.grad.clone()
        head.zero_grad()
        topt.zero_grad()
        ((head(ref).squeeze(1) - x) ** 2).mean().backward()
        torch.testing.assert_close(g_ember, head.weight.grad, rtol=RTOL, atol=ATOL)
        topt.step()
        np.testing.assert_allclose(ebc.collection.read_table("t"), bag.weight.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
