#!/usr/bin/env bash
# python.sh: the Python package's part of the README's test command (test.sh
# runs it after CTest): installs Debian's python3-venv, python3-torch,
# python3-numpy and python3-pytest (only those missing), makes a virtual
# environment that sees them (--system-site-packages: Debian's python3 is
# "externally managed"), installs ember into it with `pip install ./python`
# (scikit-build-core builds the extension over libember) and runs
# tests/python with pytest.  The environment is $EMBER_VENV (default
# build/venv); extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${EMBER_VENV:-${EMBER_BUILD_DIR:-$repo/build}/venv}"
packages=(python3 python3-venv python3-dev python3-pip python3-torch python3-numpy python3-pandas python3-pytest)
bash "$repo/scripts/apt_install.sh" "${packages[@]}"
# Debian's interpreter, whatever python3 is first on PATH: python3-torch is built for it
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$repo/python" >&2
cd "$repo"
# test_train.py compares ember.train with the ember command built beside it
export EMBER_CLI="${EMBER_BUILD_DIR:-$repo/build}/ember"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
