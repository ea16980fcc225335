#!/usr/bin/env python3
"""peer_fbgemm_nbit.py: a PEER, not part of ember: FBGEMM's inference TBE
(IntNBitTableBatchedEmbeddingBagsCodegen, fbgemm-gpu-cpu from the venv that
bench/setup_fbgemm.sh makes) on bench/quant_pool.c's workloads: the pooled
lookup (sum, unweighted) over rows stored as fp32, fp16, int8 or int4 (fp16
scale and bias in front of each row, the layout ember's bundles use), fp32
output, on the CPU, at the given thread counts.  The same id law as
bench/peer_fbgemm.py (its BoundedZipf and draw_ids), a fresh batch per
repetition, median of the repetitions.  JSON lines like bench_quant_pool's.

    .venv-fbgemm/bin/python bench/peer_fbgemm_nbit.py --preset W1 --threads 1 --encodings int8,int4
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_fbgemm as pf  # noqa: E402  (ids, presets, the cpuinfo fix)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(pf.PRESETS), default="W1")
    p.add_argument("--threads", default="1")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--encodings", default="fp32,fp16,int8,int4")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    pf.load_c10_global()
    import numpy as np
    import torch
    import fbgemm_gpu
    from fbgemm_gpu.split_embedding_configs import SparseType
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
    from fbgemm_gpu.split_table_batched_embeddings_ops_inference import IntNBitTableBatchedEmbeddingBagsCodegen
    shape = argparse.Namespace(**pf.PRESETS[a.preset])
    types = {"fp32": SparseType.FP32, "fp16": SparseType.FP16, "int8": SparseType.INT8, "int4": SparseType.INT4}
    rng = np.random.default_rng(a.seed)
    zipf = pf.BoundedZipf(shape.rows, 1.05) if shape.dist == "zipf" else None
    batches = []
    for _ in range(a.reps):
        ids = np.concatenate([pf.draw_ids(shape, rng, zipf) for _ in range(shape.tables)])
        batches.append(torch.from_numpy(ids.astype(np.int32)))
    offsets = torch.arange(0, shape.tables * shape.batch * shape.pooling + 1, shape.pooling, dtype=torch.int32)
    for enc in a.encodings.split(","):
        specs = [(f"t{t}", shape.rows, shape.dim, types[enc], EmbeddingLocation.HOST) for t in range(shape.tables)]
        tbe = IntNBitTableBatchedEmbeddingBagsCodegen(specs, pooling_mode=PoolingMode.SUM, device="cpu",
                                                      output_dtype=SparseType.FP32)
        tbe.fill_random_weights()
        for threads in [int(t) for t in a.threads.split(",")]:
            torch.set_num_threads(threads)
            tbe(batches[0], offsets)  # warm-up
            ms = []
            for b in batches:
                t0 = time.perf_counter()
                tbe(b, offsets)
                ms.append((time.perf_counter() - t0) * 1e3)
            med = statistics.median(ms)
            print(json.dumps({"bench": "quant_pool", "impl": "fbgemm", "workload": a.preset, "encoding": enc,
                              "threads": threads, "tables": shape.tables, "rows": shape.rows, "dim": shape.dim,
                              "batch": shape.batch, "pooling": shape.pooling, "ms_median": round(med, 3),
                              "ids_per_s": shape.tables * shape.batch * shape.pooling / (med * 1e-3),
                              "reps": a.reps, "torch": torch.__version__,
                              "fbgemm_gpu": getattr(fbgemm_gpu, "__version__", "?"),
                              "fbgemm_isa": pf.fbgemm_gpu_isa(fbgemm_gpu)}), flush=True)
        del tbe


if __name__ == "__main__":
    main()
