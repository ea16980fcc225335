#!/usr/bin/env bash
# public_headers.sh: the shells include only the public headers.  Every
# #include "X" of a C file or header in tools/ and python/src/ must name a
# header of include/ or a file beside it in its own folder (the shell's
# own); a path into src/ (or up and out of the folder) is a failure, named
# by file and line.  The library's internals are reached through the
# public calls of include/*.h only.
# Usage: public_headers.sh SOURCE_DIR
set -u
src=${1:?usage: bash $0 path/to/source}
fail=0 checked=0
for dir in tools python/src; do
    for f in "$src/$dir"/*.c "$src/$dir"/*.h; do
        [ -e "$f" ] || continue
        while IFS=: read -r line inc; do
            checked=$((checked + 1))
            name=$(printf '%s' "$inc" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/')
            if [[ "$name" == */* ]] || { [ ! -f "$src/include/$name" ] && [ ! -f "$src/$dir/$name" ]; }; then
                echo "$dir/$(basename "$f"):$line: #include \"$name\" is not a public header (include/) nor the shell's own"
                fail=$((fail + 1))
            fi
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
    done
done
echo "public_headers: $checked includes checked, $fail not public"
[ "$fail" -eq 0 ] && [ "$checked" -gt 0 ]
