#!/usr/bin/env bash
# install.sh: the install target, the pkg-config file and the CMake package
# work the ordinary way: install into a temporary prefix, build
# examples/quickstart.c with only `pkg-config --cflags --libs ember`, and
# with a CMake project that calls find_package(ember)
# (tests/find_package), and run it (shared and static).
# Usage: install.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]   (the sanitizer build passes its
# -fsanitize flags: its installed library needs their runtime)
set -euo pipefail
build="$1" src="$(cd "$2" && pwd)" extra="${3:-}"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pass=0 fail=0
check() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $*" >&2; fi; }
for h in ember.h ember-mpi.h ember-train.h ember-data.h ember-plan.h ember-bench.h ember-serve.h; do check test -f "$prefix/include/$h"; done
check test -x "$prefix/bin/ember"
check pkg-config --exists ember
cc $extra "$src/examples/quickstart.c" $(pkg-config --cflags --libs ember) -o "$prefix/qs_shared"
check grep -q "physical table" <(LD_LIBRARY_PATH="$prefix/lib" "$prefix/qs_shared")
cc $extra "$src/examples/quickstart.c" $(pkg-config --cflags ember) "$prefix/lib/libember.a" \
    $(pkg-config --static --libs-only-other --libs-only-l ember | sed 's/-lember//') -o "$prefix/qs_static"
check grep -q "refused: feature 'viewed_items' sample 0: id 5000" <("$prefix/qs_static")
# find_package(ember): the sanitizer build's flags go to the consumer too
cmake -S "$src/tests/find_package" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DQUICKSTART="$src/examples/quickstart.c" -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
check grep -q "physical table" <(LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer/qs_shared")
check grep -q "refused: feature 'viewed_items' sample 0: id 5000" <("$prefix/consumer/qs_static")
echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
