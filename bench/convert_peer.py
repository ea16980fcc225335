#!/usr/bin/env python3
"""convert_peer.py --format criteo|multihot IN [--threads T] [--rows R] [--out FILE] [--input NAME]:
the pandas peer of `ember convert` (bench/convert.sh runs both).  Run it with the venv of
bench/setup_pandas.sh.

It reads IN with pandas.read_csv(engine="pyarrow", dtype_backend="pyarrow") and a column spec
matching ember's schema, then does, column by column and vectorised, the work `ember convert`
does (docs/data.md):

  criteo    no header, tab-separated: label, I1..I13, C1..C26 (ember's built-in Criteo schema).
            I*: fillna(0), log1p(max(x, 0)) to float32.  C*: every value hashed, mod R.
  multihot  header, comma-separated, the columns of bench/multihot_like.py, with the transforms
            of the schema it prints (`multihot_like.py --schema`): ints log1p, price clip to
            [0, 100], score standardized with mean 50 and std 20; user and country hashed mod R;
            tags split on '|' (str.split to a pyarrow list), exploded, every item hashed mod R.

Only an empty field is missing (keep_default_na=False: "NA" is a string, as for ember).  A
categorical is hashed as pandas.factorize (pyarrow's dictionary encoding) plus
pandas.util.hash_array of the distinct values (a keyed SipHash of the UTF-8 bytes), which is what
hash_array(categorize=True) does, written out so the distinct count per feature, which ember
convert prints, comes for free.  This stands in for ember's XXH64 (for Criteo, ember parses the
hex digits and hashes the 32-bit value; here the hex string is hashed).  Empty categoricals give
empty bags.

With --out, the result is written as ember's binary format lays it out, sample-major: labels
(u8), the dense matrix (f32, N x D), the bag lengths (u16, N x S) and every id (u32) sample by
sample; without --out nothing is written.  The time measured ("seconds") runs from the call to
read_csv to the end of the write: Python's start and the imports are not in it.

pyarrow's CPU thread pool is set to T (pyarrow.set_cpu_count); read_csv and pyarrow's compute
kernels use it; pandas' own operations run on one thread whatever T.

Prints one JSON line: bench, input, tool, threads, seconds, MB_per_s (10^6 bytes of IN per
second), lines_per_s (samples per second; a header is not a sample), samples, bytes, the time of
each phase, the distinct values per sparse feature, peak RSS, pandas, pyarrow and numpy versions.
"""
import argparse
import json
import os
import resource
import time

import numpy as np
import pandas as pd
import pyarrow as pa

A = pd.ArrowDtype


def criteo_spec():
    names = ["label"] + ["I%d" % i for i in range(1, 14)] + ["C%d" % i for i in range(1, 27)]
    dtype = {"label": A(pa.int8())}
    dtype.update({"I%d" % i: A(pa.int64()) for i in range(1, 14)})
    dtype.update({"C%d" % i: A(pa.string()) for i in range(1, 27)})
    dense = [(n, "log1p", None) for n in names[1:14]]
    sparse = [(n, "categorical") for n in names[14:]]
    return dict(sep="\t", header=None, names=names, dtype=dtype), "label", dense, sparse


def multihot_spec():
    dtype = {"clicked": A(pa.int8()), "age": A(pa.int64()), "visits": A(pa.int64()),
             "days": A(pa.int64()), "price": A(pa.float64()), "score": A(pa.float64()),
             "user": A(pa.string()), "country": A(pa.string()), "tags": A(pa.string())}
    dense = [("age", "log1p", None), ("visits", "log1p", None), ("days", "log1p", None),
             ("price", "clip", (0.0, 100.0)), ("score", "standardize", (50.0, 20.0))]
    sparse = [("user", "categorical"), ("country", "categorical"), ("tags", "multi_hot")]
    return dict(sep=",", header=0, usecols=list(dtype), dtype=dtype), "clicked", dense, sparse


def dense_column(s, transform, arg):
    x = s.fillna(0).to_numpy(dtype=np.float64)
    if transform == "log1p":
        x = np.log1p(np.maximum(x, 0.0))
    elif transform == "clip":
        x = np.clip(x, arg[0], arg[1])
    elif transform == "standardize":
        x = (x - arg[0]) / arg[1]
    return x.astype(np.float32)


def hashed(values, seed, rows):
    """values: a Series of strings (NA: no id).  Returns (the id u32 of every value, garbage where
    it is missing; a bool mask of the present values; the number of distinct values)."""
    codes, uniques = pd.factorize(values)
    key = "ember%011d" % seed  # 16 bytes, one key per feature, as ember seeds XXH64 with its index
    h = pd.util.hash_array(uniques.to_numpy(dtype=object), hash_key=key, categorize=False)
    table = (h % np.uint64(rows)).astype(np.uint32) if len(uniques) else np.zeros(1, np.uint32)
    return table.take(codes, mode="wrap"), codes >= 0, len(uniques)


def scatter_sample_major(lengths, flat):
    """lengths: list of S arrays (N,) of bag lengths; flat: list of S arrays of ids, each in sample
    order.  Returns every id sample by sample (sample 0's bags in feature order, then sample 1's...)."""
    total = np.sum(lengths, axis=0, dtype=np.int64)
    start = np.cumsum(total) - total
    out = np.empty(int(total.sum()), dtype=np.uint32)
    before = np.zeros_like(total)
    for ln, ids in zip(lengths, flat):
        ln = ln.astype(np.int64)
        first = np.cumsum(ln) - ln  # where each sample's bag starts in `ids`
        pos = np.repeat(start + before - first, ln) + np.arange(len(ids), dtype=np.int64)
        out[pos] = ids
        before += ln
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--format", choices=("criteo", "multihot"), required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--out")
    ap.add_argument("--input", help="the input's name in the JSON line (default: the format)")
    a = ap.parse_args()
    pa.set_cpu_count(a.threads)
    read_kw, label, dense, sparse = criteo_spec() if a.format == "criteo" else multihot_spec()
    nbytes = os.path.getsize(a.path)
    phases = {}

    t0 = time.perf_counter()
    df = pd.read_csv(a.path, engine="pyarrow", dtype_backend="pyarrow", keep_default_na=False,
                     na_values=[""], **read_kw)
    t1 = time.perf_counter()
    phases["read_csv"] = t1 - t0
    n = len(df)

    labels = df[label].to_numpy(dtype=np.uint8)
    mat = np.empty((n, len(dense)), dtype=np.float32)
    for j, (name, transform, arg) in enumerate(dense):
        mat[:, j] = dense_column(df[name], transform, arg)
    t2 = time.perf_counter()
    phases["dense"] = t2 - t1

    lengths, flat, distinct = [], [], {}
    one_hot = all(kind == "categorical" for _, kind in sparse)
    if one_hot:
        full = np.empty((n, len(sparse)), dtype=np.uint32)
        mask = np.empty((n, len(sparse)), dtype=bool)
    for f, (name, kind) in enumerate(sparse):
        col = df[name]
        if kind == "multi_hot":
            lists = col.str.split("|")
            ln = lists.list.len().fillna(0).to_numpy(dtype=np.uint16)
            ids, present, distinct[name] = hashed(lists.explode(), f, a.rows)
            ids = ids[present]  # explode gives a missing value for an empty bag
        else:
            ids, present, distinct[name] = hashed(col, f, a.rows)
            ln = present.astype(np.uint16)
            if one_hot:
                full[:, f], mask[:, f] = ids, present
            else:
                ids = ids[present]
        lengths.append(ln)
        flat.append(ids)
    t3 = time.perf_counter()
    phases["sparse"] = t3 - t2

    if one_hot:
        # at most one id per bag: the present ids of the N x S matrix, row-major, are sample-major
        all_ids = full[mask]
        bag_len = mask.astype(np.uint16)
    else:
        all_ids = scatter_sample_major(lengths, flat)
        bag_len = np.column_stack(lengths)
    t4 = time.perf_counter()
    phases["layout"] = t4 - t3
    if a.out:
        with open(a.out, "wb") as fo:
            for arr in (labels, mat, bag_len, all_ids):
                arr.tofile(fo)
    t5 = time.perf_counter()
    phases["write"] = t5 - t4

    secs = t5 - t0
    print(json.dumps({
        "bench": "convert", "input": a.input or a.format, "tool": "pandas", "threads": a.threads,
        "seconds": round(secs, 4), "MB_per_s": round(nbytes / 1e6 / secs, 2),
        "lines_per_s": round(n / secs, 1), "samples": n, "bytes": nbytes,
        "ids": int(len(all_ids)), "phases_s": {k: round(v, 4) for k, v in phases.items()},
        "distinct": distinct, "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "pandas": pd.__version__, "pyarrow": pa.__version__, "numpy": np.__version__,
        "pyarrow_cpu_count": pa.cpu_count()}))


if __name__ == "__main__":
    main()
