"""ember over MPI from Python, really under mpirun with two ranks:
mpi_collection.py checks a spread collection against a local one, and
mpi_train.py's ember.train must equal `mpirun -np 2 ember train`."""
import json
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


def test_train_over_two_ranks_equals_the_cli(tmp_path):
    r = mpirun("mpi_train.py")
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    py = json.loads(r.stdout.strip().splitlines()[-1])
    cli = os.environ.get("EMBER_CLI", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "ember"))
    env = dict(os.environ, OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMP_NUM_THREADS="1")
    c = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "--allow-run-as-root", "-np", "2", cli, "train",
                        "--steps", "30", "--eval-samples", "4096", "--eval-every", "15", "--json", "--metrics", "none",
                        "--plot", "none"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    ref = json.loads(c.stdout.strip().splitlines()[-1])
    for k in ("auc", "logloss", "samples", "global_batch", "world"):
        assert py[k] == ref[k], k
