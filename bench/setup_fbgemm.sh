#!/usr/bin/env bash
# Create $REPO/.venv-fbgemm with PyPI's torch + fbgemm-gpu-cpu (FBGEMM_GPU CPU variant) for bench/peer_fbgemm.py.
#
# Usage:  bash bench/setup_fbgemm.sh            (idempotent: a working venv is verified and left alone)
#         FBGEMM_VENV=/some/path bash bench/setup_fbgemm.sh
#         PYTHON=/path/to/python3.11 bash bench/setup_fbgemm.sh
#         FORCE=1 bash bench/setup_fbgemm.sh    (delete and rebuild the venv)
#
# Pinned, verified together on Debian 12 x86_64 with CPython 3.11.7 (pyenv):
#   torch 2.14.1   (PyPI manylinux_2_28 wheel, 555 MB; it is the CUDA 13.0 build: "2.14.1+cu130")
#   fbgemm-gpu-cpu 1.9.0  (6.4 MB; fbgemm_gpu/__init__.py maps FBGEMM 1.9 -> PyTorch 2.14)
#   numpy 2.4.6
# Why the nvidia-* packages are installed although nothing here uses a GPU: PyPI has no CPU-only torch
# wheel for Linux x86_64 (those live on download.pytorch.org, unreachable here), and the PyPI wheel's
# libtorch_cpu.so itself has DT_NEEDED libcudart.so.13 and libcupti.so.13 (libtorch.so -> libtorch_cuda.so
# -> cublas, cudnn, nccl, cufile, ...). Installing torch with --no-deps therefore fails at `import torch`
# with "ImportError: libcufile.so.0: cannot open shared object file". About 3.0 GB is downloaded and the
# venv is about 5.5 GB (triton, cusolver, cuda-bindings, nvtx are not needed to import torch/TBE, but we
# keep pip's normal resolution so the environment is a plain, reproducible `pip install`).
# Install time measured here: ~1.5-2 min (97 s for pip at ~50 MB/s, plus venv creation and checks).
#
# Known issue reported at the end (isa_report, in bench/venv_common.sh): with a plain `import fbgemm_gpu`,
# fbgemm_gpu's own fbgemm.so reads an uninitialised copy of cpuinfo (libc10.so and libtorch.so both export
# one), detects no AVX2 and uses scalar reference kernels for what it generates (TBE backward of
# EXACT_ROWWISE_ADAGRAD). The forward is unaffected (it binds to torch's bundled FBGEMM). bench/peer_fbgemm.py
# loads libc10.so RTLD_GLOBAL first, which makes fbgemm.so see AVX2 (--no-cpuinfo-fix measures the
# out-of-the-box behaviour).
#
# Logging, Python choice, platform/disk checks, venv reuse and creation and the ISA report are shared with
# bench/setup_torchrec.sh in bench/venv_common.sh; the pins, the pip install and verify() are here.
set -euo pipefail

TORCH_VERSION=2.14.1
FBGEMM_VERSION=1.9.0
NUMPY_VERSION=2.4.6

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FBGEMM_VENV:-$REPO/.venv-fbgemm}"

SETUP_TAG=setup_fbgemm
ISA_BENCH=peer_fbgemm.py
RUN_HINT="run benchmarks with: $VENV/bin/python $REPO/bench/peer_fbgemm.py --preset W1"
# shellcheck source-path=SCRIPTDIR source=venv_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/venv_common.sh"

# ---- verification: import, versions, one tiny CPU TBE forward+backward with fused row-wise Adagrad ----
verify() {
    "$VENV/bin/python" - "$TORCH_VERSION" "$FBGEMM_VERSION" <<'EOF'
import sys
want_torch, want_fbgemm = sys.argv[1], sys.argv[2]
try:
    import torch
except Exception as e:
    sys.exit(f"import torch failed: {type(e).__name__}: {e}")
try:
    import fbgemm_gpu
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
        SplitTableBatchedEmbeddingBagsCodegen, ComputeDevice)
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
except Exception as e:
    sys.exit(f"import fbgemm_gpu failed: {type(e).__name__}: {e}")
tv = torch.__version__.split("+")[0]
if tv != want_torch:
    sys.exit(f"torch is {torch.__version__}, expected {want_torch}")
if fbgemm_gpu.__version__ != want_fbgemm or fbgemm_gpu.__variant__ != "cpu":
    sys.exit(f"fbgemm_gpu is {fbgemm_gpu.__version__} ({fbgemm_gpu.__variant__}), expected {want_fbgemm} (cpu)")
E, D, lr, eps = 16, 8, 0.1, 1e-2
emb = SplitTableBatchedEmbeddingBagsCodegen(
    [(E, D, EmbeddingLocation.HOST, ComputeDevice.CPU)] * 2,
    optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=lr, eps=eps)
with torch.no_grad():
    for w in emb.split_embedding_weights():
        w.fill_(1.0)
idx = torch.tensor([1, 1, 2, 3], dtype=torch.int64)       # table0: bag{1,1}  table1: bag{2,3}
off = torch.tensor([0, 2, 4], dtype=torch.int64)
out = emb(idx, off)
if out.shape != (1, 2 * D) or not torch.allclose(out, torch.full((1, 2 * D), 2.0)):
    sys.exit(f"TBE forward gave a wrong result: {out}")
out.backward(torch.full_like(out, 0.5))
# table0 row1 occurs twice: aggregated g = 1.0, state = mean(g^2) = 1, w = 1 - lr*g/(sqrt(1)+eps)
w0 = emb.split_embedding_weights()[0]
exp = 1.0 - lr * 1.0 / (1.0 + eps)
if abs(float(w0[1, 0]) - exp) > 1e-6:
    sys.exit(f"fused row-wise Adagrad update mismatch: {float(w0[1,0])} vs {exp}")
print(f"OK torch {torch.__version__}, fbgemm_gpu {fbgemm_gpu.__version__} ({fbgemm_gpu.__variant__}), "
      f"CPU capability {torch.backends.cpu.get_cpu_capability()}, CPU TBE forward+fused rowwise Adagrad verified")
EOF
}

check_platform
reuse_verified_venv
choose_python "$FBGEMM_VERSION"
check_free_disk 9 "3 GB download + 5.5 GB venv"
create_venv

say "installing torch==$TORCH_VERSION fbgemm-gpu-cpu==$FBGEMM_VERSION numpy==$NUMPY_VERSION from PyPI"
say "(torch's PyPI wheel pulls ~2.5 GB of nvidia-* CUDA runtime wheels it needs just to import; ~1-3 min)"
t0=$(date +%s)
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
        "torch==$TORCH_VERSION" "fbgemm-gpu-cpu==$FBGEMM_VERSION" "numpy==$NUMPY_VERSION"; then
    fail "pip install torch==$TORCH_VERSION fbgemm-gpu-cpu==$FBGEMM_VERSION failed (see pip output above; PyPI must be reachable)"
fi
t1=$(date +%s)
say "pip install took $((t1 - t0)) s; venv size $(du -sh "$VENV" | cut -f1)"

finish_verified
