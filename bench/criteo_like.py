#!/usr/bin/env python3
"""criteo_like.py OUT.tsv SAMPLES SEED STREAM: writes SAMPLES lines in Criteo's display-advertising
TSV format (label, 13 integers, 26 hexadecimal categoricals; docs/ctr-format.md) from a hidden
logistic teacher, for measurements that need a Criteo-shaped *file* (bench/quant_accuracy.sh).

Categorical f draws a value index k from a Zipf(1.05) law over VOCAB[f] values and writes it as
8 hex digits of a fixed scramble of (f, k); one value in ten is left empty, as in the real
logs. The integers are geometric counts (empty now and then). The teacher's logit is a sum of
one weight per (feature, value), N(0, 0.5) each, plus a weight per integer on log(1 + x), and
a bias that puts the click rate near 0.25. The teacher depends on SEED alone, the samples on
(SEED, STREAM): a training file and a held-out file share SEED and differ in STREAM. Standard
library only.
"""
import bisect
import math
import random
import sys

VOCAB = [200000, 100000, 50000, 20000, 10000, 5000, 2000, 1000, 500, 200, 100, 200000, 50000, 10000, 2000,
         500, 100000, 20000, 5000, 1000, 200, 150000, 30000, 3000, 300, 100]


def zipf_cdf(n, alpha=1.05):
    acc, out = 0.0, []
    for k in range(1, n + 1):
        acc += k ** -alpha
        out.append(acc)
    return [x / acc for x in out]


def weight(seed, f, k):
    return random.Random((seed * 1000003 + f) * 4294967311 + k).gauss(0.0, 0.5)


def main():
    out, n, seed, stream_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    stream = random.Random(seed * 7919 + stream_id * 104729 + 1)
    cdfs = [zipf_cdf(v) for v in VOCAB]
    dense_w = [random.Random(seed + 17 * j).gauss(0.0, 0.3) for j in range(13)]
    cache = {}
    with open(out, "w") as fo:
        for _ in range(n):
            logit, cats, ints = -1.4, [], []
            for j in range(13):
                x = int(stream.expovariate(0.2)) if stream.random() < 0.9 else None
                ints.append("" if x is None else str(x))
                logit += dense_w[j] * math.log1p(x or 0) * 0.3
            for f, cdf in enumerate(cdfs):
                if stream.random() < 0.1:
                    cats.append("")
                    continue
                k = bisect.bisect_left(cdf, stream.random())
                w = cache.get((f, k))
                if w is None:
                    w = cache[(f, k)] = weight(seed, f, k)
                logit += w
                cats.append("%08x" % (((f + 1) * 2654435761 + k * 40503) & 0xFFFFFFFF))
            label = 1 if stream.random() < 1.0 / (1.0 + math.exp(-logit)) else 0
            fo.write("\t".join([str(label)] + ints + cats) + "\n")


if __name__ == "__main__":
    main()
