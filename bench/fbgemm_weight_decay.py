#!/usr/bin/env python3
"""fbgemm_weight_decay.py: does FBGEMM's CPU TBE apply weight decay?  (docs/optimizers.md,
"Against FBGEMM's weight-decay modes".)

Run with the FBGEMM venv (bash bench/setup_fbgemm.sh):
    .venv-fbgemm/bin/python bench/fbgemm_weight_decay.py

For EXACT_ROWWISE_ADAGRAD and EXACT_ADAGRAD, in WeightDecayMode L2 and DECOUPLE, one table
(20 rows x 8) from the same random weights takes three steps of the same bags and upstream
gradient twice: with weight_decay 0.05 and with 0.  One JSON line each: the largest change of
a weight over the steps, and the largest difference between the two runs' weights (0: the
kernel left weight_decay out).
"""
import json
import os

from peer_fbgemm import load_c10_global  # libc10 first, as the peer benchmark loads it

load_c10_global()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import fbgemm_gpu  # noqa: E402,F401
from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType  # noqa: E402
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode  # noqa: E402
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (  # noqa: E402
    ComputeDevice, EmbeddingLocation, SplitTableBatchedEmbeddingBagsCodegen, WeightDecayMode)

ROWS, DIM = 20, 8
IDS = torch.tensor([1, 3, 3, 7, 1, 12], dtype=torch.int64)
OFFSETS = torch.tensor([0, 2, 4, 6], dtype=torch.int64)


def run(optim, mode, wd, w0, grad):
    tbe = SplitTableBatchedEmbeddingBagsCodegen([(ROWS, DIM, EmbeddingLocation.HOST, ComputeDevice.CPU)],
                                                optimizer=optim, learning_rate=0.1, eps=1e-8, weight_decay=wd,
                                                weight_decay_mode=mode, pooling_mode=PoolingMode.SUM)
    with torch.no_grad():
        tbe.weights_host.copy_(torch.from_numpy(w0.reshape(-1)))
    for _ in range(3):
        tbe(IDS, OFFSETS).backward(torch.from_numpy(grad))
    return tbe.weights_host.detach().numpy().reshape(ROWS, DIM).copy()


def main():
    rng = np.random.default_rng(5)
    for name, optim in (("rowwise_adagrad", OptimType.EXACT_ROWWISE_ADAGRAD), ("adagrad", OptimType.EXACT_ADAGRAD)):
        for mode_name, mode in (("l2", WeightDecayMode.L2), ("decoupled", WeightDecayMode.DECOUPLE)):
            w0 = rng.uniform(-0.5, 0.5, (ROWS, DIM)).astype(np.float32)
            grad = rng.standard_normal((3, DIM)).astype(np.float32)
            with_wd, without = run(optim, mode, 0.05, w0, grad), run(optim, mode, 0.0, w0, grad)
            print(json.dumps({"optimizer": name, "weight_decay_mode": mode_name, "fbgemm": fbgemm_gpu.__version__,
                              "max_change": float(np.abs(with_wd - w0).max()),
                              "max_diff_wd_0.05_vs_0": float(np.abs(with_wd - without).max())}))


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    main()
