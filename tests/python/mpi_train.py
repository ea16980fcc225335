"""Run by test_mpi.py under `mpirun -np 2`: ember.train over the world of
two; rank 0 prints the summary as one JSON line."""
import json

import ember

w = ember.world()
summary = ember.train(steps=30, eval_samples=4096, eval_every=15)
assert summary["world"] == 2, summary["world"]
if w.rank == 0:
    print(json.dumps(summary))
