#!/usr/bin/env bash
# install.sh: the install target and pkg-config file work the ordinary way:
# install into a temporary prefix, build examples/quickstart.c with only
# `pkg-config --cflags --libs ember`, and run it (shared and static).
# Usage: install.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]   (the sanitizer build passes its
# -fsanitize flags: its installed library needs their runtime)
set -euo pipefail
build="$1" src="$2" extra="${3:-}"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pass=0 fail=0
check() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $*" >&2; fi; }
check test -f "$prefix/include/ember.h"
check test -x "$prefix/bin/ember"
check pkg-config --exists ember
cc $extra "$src/examples/quickstart.c" $(pkg-config --cflags --libs ember) -o "$prefix/qs_shared"
check grep -q "physical table" <(LD_LIBRARY_PATH="$prefix/lib" "$prefix/qs_shared")
cc $extra "$src/examples/quickstart.c" $(pkg-config --cflags ember) "$prefix/lib/libember.a" \
    $(pkg-config --static --libs-only-other --libs-only-l ember | sed 's/-lember//') -o "$prefix/qs_static"
check grep -q "refused: feature 'viewed_items' sample 0: id 5000" <("$prefix/qs_static")
echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
