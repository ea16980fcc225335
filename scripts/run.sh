#!/usr/bin/env bash
# run.sh: the README's first command: install, build, and run ember's main
# job, `ember train` (DLRM-style CTR training on the built-in synthetic task;
# docs/training.md).  Extra arguments go to the job; its output alone is on
# stdout, the install and build's on stderr.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh" >&2 # the build's lines on stderr: stdout is the job's (--json)
exec "${EMBER_BUILD_DIR:-$repo/build}/ember" train "$@"
