"""Collections over MPI from Python: tests/python/mpi_collection.py really
runs under mpirun with two ranks and checks itself against a local
collection."""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun(script, *args, np_=2, timeout=300):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found (Debian's openmpi-bin)"
    env = dict(os.environ, OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMP_NUM_THREADS="1")
    cmd = [mpirun, "--oversubscribe", "--allow-run-as-root", "-np", str(np_), sys.executable,
           os.path.join(HERE, script), *map(str, args)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_collection_over_two_ranks_equals_one():
    seed = int(np.random.SeedSequence().entropy % (2**31))
    r = mpirun("mpi_collection.py", seed)
    assert r.returncode == 0, f"seed {seed}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.count(": ok") == 2
