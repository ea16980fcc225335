#!/usr/bin/env bash
# python_dlrm.sh [ROUNDS] [OUT] [python_dlrm.py flags...]: the Python DLRM benchmark (bench/python_dlrm.py
# says what is measured): the same PyTorch DLRM training loop with TorchRec's fused EmbeddingBagCollection
# (DistributedModelParallel, world 1, CPU), nn.EmbeddingBag(sparse=True) + torch.optim.Adagrad, and
# ember.torch.EmbeddingBagCollection, interleaved in one process, at 1 and 2 threads; ROUNDS rounds (default 5)
# of 20 steps of 2048 samples.  Makes/verifies the venv .venv-torchrec (bench/setup_torchrec.sh: torch 2.14.1,
# torchrec 1.9.2, fbgemm-gpu-cpu 1.9.0; ~1.5-2 min and 5.5 GB the first time), installs ember into it from
# ./python when that directory exists (`pip install ./python`, built in build-python-bench/ so that python/
# itself is left alone; a failed build skips ember, the other two still run), then runs the benchmark.
# JSON lines to OUT (default bench/out/python_dlrm.jsonl) and stdout; the last line has the ratios of the
# medians per thread count.  About 2 minutes after setup.  Environment: TORCHREC_VENV (default .venv-torchrec),
# MODULES (default torchrec,torch_sparse[,ember]), THREADS (default 1,2), STEPS (default 20).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-5}"
out="${2:-$repo/bench/out/python_dlrm.jsonl}"
shift $(($# < 2 ? $# : 2))
venv="${TORCHREC_VENV:-$repo/.venv-torchrec}"
say() { printf '[python_dlrm] %s\n' "$*" >&2; }

TORCHREC_VENV="$venv" bash "$repo/bench/setup_torchrec.sh" >&2
py="$venv/bin/python"

modules="torchrec,torch_sparse"
if [ -f "$repo/python/pyproject.toml" ]; then
    say "installing ember from $repo/python into $venv (build dir $repo/build-python-bench)"
    if "$py" -m pip install --disable-pip-version-check --progress-bar off --force-reinstall --no-deps \
            -C build-dir="$repo/build-python-bench/{wheel_tag}" "$repo/python" >&2 &&
        "$py" -c 'import ember, ember.torch' >&2; then
        modules="$modules,ember"
    else
        say "ember did not build or import: running without it"
    fi
else
    say "no $repo/python/pyproject.toml yet: running without ember"
fi
modules="${MODULES:-$modules}"

mkdir -p "$(dirname "$out")"
: >"$out"
"$py" "$repo/bench/python_dlrm.py" --modules "$modules" --threads "${THREADS:-1,2}" --rounds "$rounds" \
    --steps "${STEPS:-20}" "$@" | tee -a "$out"
