# shellcheck shell=bash
# bench/venv_common.sh: shell functions shared by bench/setup_fbgemm.sh and bench/setup_torchrec.sh, which
# source it (it is not meant to be run). Both build a venv with PyPI's torch + fbgemm-gpu-cpu; shared here:
# logging (say/fail), the choice of Python, the platform and free-disk checks, FORCE=1 and "a working venv is
# verified and left alone", venv creation, the final verification and the report on which ISA fbgemm_gpu's
# own fbgemm.so detects. Pins, package lists, pip commands and verify() stay in each setup script.
#
# The sourcing script sets (read when the functions run):
#   SETUP_TAG  log prefix: messages read "[$SETUP_TAG] ..."
#   VENV       the venv directory
#   ISA_BENCH  the benchmark script that loads libc10.so RTLD_GLOBAL first by default (named in isa_report)
#   RUN_HINT   what to run once the venv is ready, printed after "nothing to do; " or "done; "
# and defines verify(): run "$VENV/bin/python", print one "OK ..." line, or exit non-zero with the reason.

say()  { printf '[%s] %s\n' "$SETUP_TAG" "$*"; }
fail() { printf '[%s] FAILED: %s\n' "$SETUP_TAG" "$*" >&2; exit 1; }

# ---- pick a Python the wheels exist for (cp310..cp314; fbgemm-gpu-cpu 1.9.0 has no cp39 wheel) ----
pick_python() {
    local c
    for c in "${PYTHON:-}" python3.11 python3.12 python3.13 python3.10 python3 /usr/bin/python3; do
        [ -n "$c" ] || continue
        command -v "$c" >/dev/null 2>&1 || continue
        if "$c" -c 'import sys, venv; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,14) else 1)' 2>/dev/null; then
            command -v "$c"; return 0
        fi
    done
    return 1
}

# choose_python FBGEMM_VERSION: set PY to pick_python's choice (or fail) and say which one it is
choose_python() {
    PY="$(pick_python)" || fail "no Python 3.10-3.14 with the venv module found (fbgemm-gpu-cpu $1 ships cp310..cp314 wheels only); set PYTHON=..."
    say "using $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
}

# ---- which ISA fbgemm_gpu's own fbgemm.so detects, without and with libc10.so loaded RTLD_GLOBAL first ----
# (informational; see "cpuinfo fix" in bench/peer_fbgemm.py: two cpuinfo copies, libc10.so and libtorch.so)
isa_report() {
    local mode out
    for mode in plain c10_global; do
        out="$("$VENV/bin/python" - "$mode" 2>&1 <<'PYEOF' | tail -1
import ctypes, importlib.util, os, sys
if sys.argv[1] == "c10_global":
    d = os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib")
    ctypes.CDLL(os.path.join(d, "libc10.so"), mode=ctypes.RTLD_GLOBAL)
import torch, fbgemm_gpu
f = ctypes.CDLL(os.path.join(os.path.dirname(fbgemm_gpu.__file__), "fbgemm.so"))._ZN6fbgemm20fbgemmInstructionSetEv
f.restype = ctypes.c_int
print({0: "anyarch (scalar reference kernels)", 1: "avx2", 2: "avx512", 3: "avx512_ymm",
       4: "avx512_vnni", 5: "avx512_vnni_ymm"}.get(f(), "unknown"))
PYEOF
)"
        if [ "$mode" = plain ]; then
            say "fbgemm_gpu's fbgemm.so ISA, plain import: $out"
        else
            say "fbgemm_gpu's fbgemm.so ISA with libc10.so loaded RTLD_GLOBAL first ($ISA_BENCH default): $out"
        fi
    done
}

check_platform() {
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) ;;
        *) fail "only Linux x86_64 is supported (fbgemm-gpu-cpu wheels are manylinux_2_28 x86_64; this is $(uname -s)-$(uname -m))" ;;
    esac
}

# FORCE=1 removes the venv. An existing venv that verifies: report, say "nothing to do" and exit 0;
# one that does not verify is reported and returns, so the caller (re)installs into it.
reuse_verified_venv() {
    local msg
    if [ "${FORCE:-0}" = 1 ] && [ -d "$VENV" ]; then
        say "FORCE=1: removing $VENV"
        rm -rf "$VENV"
    fi
    if [ -x "$VENV/bin/python" ]; then
        say "found $VENV, verifying"
        if msg="$(verify 2>&1)"; then
            say "$msg"
            isa_report
            say "nothing to do; $RUN_HINT"
            exit 0
        fi
        say "existing venv does not verify ($msg); (re)installing pinned packages"
    fi
}

# check_free_disk GB WHY: fail unless GB GiB are free on the file system that will hold $VENV
check_free_disk() {
    local avail_kb
    avail_kb=$(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}')
    if [ "${avail_kb:-0}" -lt $(($1 * 1024 * 1024)) ]; then
        fail "need about $1 GB free disk ($2) near $VENV; only $((avail_kb / 1024)) MB available"
    fi
}

# create $VENV with $PY (set by choose_python) unless it already has a python
create_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating venv $VENV"
        "$PY" -m venv "$VENV" || fail "python -m venv failed (on Debian's python install python3-venv)"
    fi
}

# after the install: verify, report and exit 0, or fail
finish_verified() {
    local msg
    if msg="$(verify 2>&1)"; then
        say "$msg"
        isa_report
        say "done; $RUN_HINT"
        exit 0
    fi
    fail "installed but verification failed: $msg"
}
