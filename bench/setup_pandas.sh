#!/usr/bin/env bash
# setup_pandas.sh: the Python environment of bench/convert_peer.py (the pandas peer of
# `ember convert`, run by bench/convert.sh): a venv at bench/.venv-pandas with pandas and
# pyarrow from PyPI, pinned to the versions measured (pandas 3.1.1, pyarrow 26.0.1, which
# need Python >= 3.11; numpy comes with pandas).  Idempotent: a venv that already has them
# is left alone.  Prints the versions, one JSON line on stdout:
#   {"setup": "pandas", "python": "3.11.7", "pandas": "3.1.1", "pyarrow": "26.0.1", "numpy": "2.4.6"}
# Environment: PANDAS_VERSION, PYARROW_VERSION (the pins; "latest": PyPI's newest),
# PANDAS_VENV (default bench/.venv-pandas), PYTHON (default python3), FORCE=1 (delete and
# rebuild the venv).  Debian's python3 needs python3-venv for `python3 -m venv`; it is
# installed when missing (root, or sudo).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PANDAS_VENV:-$repo/bench/.venv-pandas}"
py="${PYTHON:-python3}"
pandas_v="${PANDAS_VERSION:-3.1.1}"
pyarrow_v="${PYARROW_VERSION:-26.0.1}"
spec() { if [ "$2" = latest ]; then echo "$1"; else echo "$1==$2"; fi; }
say() { printf '[setup_pandas] %s\n' "$*" >&2; }

versions() { # fails unless the venv has the pinned versions
    "$venv/bin/python" - "$pandas_v" "$pyarrow_v" <<'PY'
import json, platform, sys
import numpy, pandas, pyarrow
for mod, want in ((pandas, sys.argv[1]), (pyarrow, sys.argv[2])):
    if want != "latest" and mod.__version__ != want:
        sys.exit("%s is %s, not %s" % (mod.__name__, mod.__version__, want))
print(json.dumps({"setup": "pandas", "python": platform.python_version(), "pandas": pandas.__version__,
                  "pyarrow": pyarrow.__version__, "numpy": numpy.__version__}))
PY
}

if [ "${FORCE:-0}" = 1 ] && [ -d "$venv" ]; then
    say "FORCE=1: removing $venv"
    rm -rf "$venv"
fi
if [ -x "$venv/bin/python" ] && out="$(versions 2>/dev/null)"; then
    say "$venv already has pandas $pandas_v and pyarrow $pyarrow_v"
    echo "$out"
    exit 0
fi

if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
    say "$py has no working venv module: installing python3-venv"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq python3-venv >/dev/null
fi
if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv with $py ($("$py" -c 'import sys; print(sys.version.split()[0])'))"
    rm -rf "$venv"
    "$py" -m venv "$venv"
fi
say "installing $(spec pandas "$pandas_v") $(spec pyarrow "$pyarrow_v") from PyPI"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off \
    "$(spec pandas "$pandas_v")" "$(spec pyarrow "$pyarrow_v")" >&2
versions
