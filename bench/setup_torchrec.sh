#!/usr/bin/env bash
# Create $REPO/.venv-torchrec with PyPI's torch + TorchRec + fbgemm-gpu-cpu for bench/python_dlrm.py
# (the TorchRec side of the Python DLRM benchmark; bench/python_dlrm.sh calls this script).
#
# Usage:  bash bench/setup_torchrec.sh            (idempotent: a working venv is verified and left alone)
#         TORCHREC_VENV=/some/path bash bench/setup_torchrec.sh
#         PYTHON=/path/to/python3.11 bash bench/setup_torchrec.sh
#         FORCE=1 bash bench/setup_torchrec.sh    (delete and rebuild the venv)
#
# Pinned, verified together on Debian 12 x86_64 with CPython 3.11.7 (pyenv):
#   torch 2.14.1          PyPI manylinux_2_28 wheel, the CUDA 13.0 build ("2.14.1+cu130"; see setup_fbgemm.sh
#                         for why PyPI's torch drags ~2.5 GB of nvidia-* wheels onto a CPU-only machine)
#   torchrec 1.9.2        the newest TorchRec; pure Python (py311-none-any). TorchRec 1.9.x is the release
#                         paired with FBGEMM_GPU 1.9 and PyTorch 2.14 (fbgemm_gpu/__init__.py maps 1.9 -> 2.14).
#                         Its metadata says Requires-Dist: fbgemm-gpu (unpinned), tensordict,
#                         torchmetrics==1.0.3, tqdm, pyre-extensions.
#   fbgemm-gpu-cpu 1.9.0  the CPU variant of FBGEMM_GPU (6.4 MB)
#   fbgemm-gpu 1.9.0      pulled in by torchrec's metadata: the CUDA variant (498 MB). Its files are then
#                         overwritten by fbgemm-gpu-cpu (see below)
#   tensordict 0.15.3, torchmetrics 1.0.3, numpy 2.4.6, pytest 9.2.0
#
# Why fbgemm-gpu-cpu is force-reinstalled with --no-deps at the end: `pip install torchrec` requires the
# distribution "fbgemm-gpu", i.e. the CUDA build. fbgemm-gpu and fbgemm-gpu-cpu ship the very same 154 file
# names (the fbgemm_gpu/ package), so whichever is installed last wins; with the CUDA files in place
# `import fbgemm_gpu` (and so `import torchrec`) fails on this machine with
#   OSError: Could not load this library: .../fbgemm_gpu/fbgemm_gpu_py.so
# Reinstalling fbgemm-gpu-cpu==1.9.0 --force-reinstall --no-deps puts the CPU files back. Both dist-infos stay
# registered, which keeps `pip check` clean and stops a later `pip install torchrec` from fetching fbgemm-gpu
# again; the files on disk are the CPU build (verified below: fbgemm_gpu.__variant__ == "cpu"). Do not
# `pip uninstall fbgemm-gpu` in this venv: it would delete the CPU files too. (Installing torchrec --no-deps
# instead avoids the 498 MB download, but leaves `pip check` reporting the missing fbgemm-gpu.)
#
# Verification at the end: import torchrec; a world-1 CPU DistributedModelParallel (gloo, file:// store)
# over an EmbeddingBagCollection whose optimizer is fused into backward the way TorchRec documents it
# (torch.distributed.optim._apply_optimizer_in_backward(torch.optim.Adagrad, ebc.parameters(), {...});
# torchrec.optim.apply_optimizer_in_backward is the deprecated alias of the same), sharded table_wise with the
# "fused" compute kernel (FBGEMM TBE, EXACT_ADAGRAD), one forward/backward, checked against the Adagrad
# formula. Note: without an explicit plan, TorchRec's planner picks data_parallel + "dense" kernel for tiny
# tables at world 1, which is not the fused path.
# Install time measured here: ~1.5-2 min; venv about 5.5 GB.
#
# Logging, Python choice, platform/disk checks, venv reuse and creation and the report on which ISA
# fbgemm_gpu's fbgemm.so detects are shared with bench/setup_fbgemm.sh in bench/venv_common.sh; the pins,
# the pip installs and verify() are here.
set -euo pipefail

TORCH_VERSION=2.14.1
TORCHREC_VERSION=1.9.2
FBGEMM_VERSION=1.9.0
TENSORDICT_VERSION=0.15.3
TORCHMETRICS_VERSION=1.0.3
NUMPY_VERSION=2.4.6
PYTEST_VERSION=9.2.0

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TORCHREC_VENV:-$REPO/.venv-torchrec}"

SETUP_TAG=setup_torchrec
ISA_BENCH=python_dlrm.py
RUN_HINT="run the benchmark with: bash $REPO/bench/python_dlrm.sh"
# shellcheck source-path=SCRIPTDIR source=venv_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/venv_common.sh"

# ---- verification: versions, CPU fbgemm_gpu, world-1 CPU DMP over a fused-Adagrad EBC, one fwd+bwd ----
verify() {
    "$VENV/bin/python" - "$TORCH_VERSION" "$TORCHREC_VERSION" "$FBGEMM_VERSION" <<'EOF'
import logging, os, sys, tempfile, warnings
want_torch, want_torchrec, want_fbgemm = sys.argv[1:4]
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
for k, v in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1").items():
    os.environ.setdefault(k, v)
try:
    import torch
    import torch.distributed as dist
except Exception as e:
    sys.exit(f"import torch failed: {type(e).__name__}: {e}")
try:
    import fbgemm_gpu
except Exception as e:
    sys.exit(f"import fbgemm_gpu failed (CUDA fbgemm-gpu files over the CPU ones?): {type(e).__name__}: {e}")
try:
    import torchrec
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor, PoolingType
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.sharding_plan import construct_module_sharding_plan, table_wise
    from torchrec.distributed.types import ShardingPlan
    from torch.distributed.optim import _apply_optimizer_in_backward as apply_optimizer_in_backward
except Exception as e:
    sys.exit(f"import torchrec failed: {type(e).__name__}: {e}")
if torch.__version__.split("+")[0] != want_torch:
    sys.exit(f"torch is {torch.__version__}, expected {want_torch}")
if torchrec.__version__ != want_torchrec:
    sys.exit(f"torchrec is {torchrec.__version__}, expected {want_torchrec}")
if fbgemm_gpu.__version__ != want_fbgemm or fbgemm_gpu.__variant__ != "cpu":
    sys.exit(f"fbgemm_gpu is {fbgemm_gpu.__version__} ({fbgemm_gpu.__variant__}), expected {want_fbgemm} (cpu)")

d = tempfile.mkdtemp(prefix="setup_torchrec.")
dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
try:
    E, D, lr, eps = 16, 8, 0.1, 1e-2
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=D, num_embeddings=E, feature_names=[f"f{i}"],
                                 pooling=PoolingType.SUM) for i in range(2)]
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    apply_optimizer_in_backward(torch.optim.Adagrad, ebc.parameters(), {"lr": lr, "eps": eps})
    plan = construct_module_sharding_plan(
        ebc, {t.name: table_wise(rank=0, device="cpu", compute_kernel="fused") for t in tables},
        local_size=1, world_size=1, device_type="cpu")
    model = DistributedModelParallel(ebc, device=torch.device("cpu"), plan=ShardingPlan({"": plan}))

    def local(name):
        t = model.state_dict()[f"embedding_bags.{name}.weight"]
        return t.local_shards()[0].tensor if hasattr(t, "local_shards") else t

    with torch.no_grad():
        for t in tables:
            local(t.name).fill_(1.0)
    # f0: bag0 = {1, 1}, bag1 = {};  f1: bag0 = {2}, bag1 = {3}
    kjt = KeyedJaggedTensor(keys=["f0", "f1"], values=torch.tensor([1, 1, 2, 3]),
                            lengths=torch.tensor([2, 0, 1, 1], dtype=torch.int32))
    out = model(kjt)
    out = out.wait() if hasattr(out, "wait") else out
    vals = out.values()
    want = torch.tensor([[2.0] * D + [1.0] * D, [0.0] * D + [1.0] * D])
    if vals.shape != (2, 2 * D) or not torch.allclose(vals, want):
        sys.exit(f"DMP forward gave a wrong result: {vals}")
    gf = vals.grad_fn.name() if vals.grad_fn is not None else "None"
    vals.backward(torch.full_like(vals, 0.5))
    # t0 row 1 occurs twice in one bag: g = 1.0, Adagrad state = g^2 = 1, w = 1 - lr * g / (sqrt(1) + eps)
    exp = 1.0 - lr * 1.0 / (1.0 + eps)
    got = float(local("t0")[1, 0])
    if abs(got - exp) > 1e-6:
        sys.exit(f"fused Adagrad update mismatch: {got} vs {exp} (grad_fn {gf})")
    if float(local("t0")[0, 0]) != 1.0:
        sys.exit("fused Adagrad touched a row that was not looked up")
    kernels = sorted({ps.compute_kernel for ps in plan.values()})
finally:
    dist.destroy_process_group()
    import shutil
    shutil.rmtree(d, ignore_errors=True)
print(f"OK torch {torch.__version__}, torchrec {torchrec.__version__}, fbgemm_gpu {fbgemm_gpu.__version__} "
      f"({fbgemm_gpu.__variant__}), CPU capability {torch.backends.cpu.get_cpu_capability()}; world-1 CPU DMP "
      f"(gloo) over a table_wise/{','.join(kernels)} EBC, fused Adagrad ({gf}) forward+backward verified")
EOF
}

check_platform
reuse_verified_venv
choose_python "$FBGEMM_VERSION"
check_free_disk 10 "3.5 GB download + 5.5 GB venv"
create_venv

PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off)
say "installing torch==$TORCH_VERSION torchrec==$TORCHREC_VERSION (+ fbgemm-gpu==$FBGEMM_VERSION it requires) from PyPI"
say "(torch's PyPI wheel pulls ~2.5 GB of nvidia-* CUDA runtime wheels it needs just to import; ~1-3 min)"
t0=$(date +%s)
if ! "${PIP[@]}" "torch==$TORCH_VERSION" "torchrec==$TORCHREC_VERSION" "fbgemm-gpu==$FBGEMM_VERSION" \
        "tensordict==$TENSORDICT_VERSION" "torchmetrics==$TORCHMETRICS_VERSION" \
        "numpy==$NUMPY_VERSION" "pytest==$PYTEST_VERSION"; then
    fail "pip install torch==$TORCH_VERSION torchrec==$TORCHREC_VERSION failed (see pip output above; PyPI must be reachable)"
fi
say "putting the CPU build of fbgemm_gpu back: fbgemm-gpu-cpu==$FBGEMM_VERSION --force-reinstall --no-deps"
if ! "${PIP[@]}" --force-reinstall --no-deps "fbgemm-gpu-cpu==$FBGEMM_VERSION"; then
    fail "pip install fbgemm-gpu-cpu==$FBGEMM_VERSION failed"
fi
t1=$(date +%s)
say "pip install took $((t1 - t0)) s; venv size $(du -sh "$VENV" | cut -f1)"

finish_verified
