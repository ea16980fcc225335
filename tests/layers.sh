#!/usr/bin/env bash
# layers.sh [LIBEMBER_SO]: the house keeps its floors (docs/architecture.md).
#   1. Every #include "FOLDER/..." in src/ names its own folder or a folder on a
#      lower floor of src/floors.txt, unless an "allow" line of that file admits
#      that very include (and says why).
#   2. tools/ and python/src/ include only the public headers (include/) and
#      headers beside them in their own folder: never a path into src/.
#   3. With LIBEMBER_SO: the shared library exports exactly the calls that
#      include/ declares EMBER_API (nm -D --defined-only; the linker's own
#      markers aside): nothing internal leaks, nothing public is missing.
# Prints every breach as FILE:LINE: what, and exits 1 when there is one.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
floors="$repo/src/floors.txt"
[ -f "$floors" ] || { echo "layers: no $floors"; exit 1; }

python3 - "$repo" "$floors" <<'PY'
import os, re, sys
repo, floors_path = sys.argv[1], sys.argv[2]
floor, allow = {}, set()
for n, line in enumerate(open(floors_path), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.match(r"allow\s+(\S+)\s*->\s*(\S+)\s+\S", line)
    if m:
        allow.add((m.group(1), m.group(2)))
        continue
    parts = line.split()
    if not parts[0].isdigit():
        sys.exit("%s:%d: expected 'FLOOR FOLDER...' or 'allow FROM -> TO reason'" % (floors_path, n))
    for f in parts[1:]:
        floor[f] = int(parts[0])
src = os.path.join(repo, "src")
bad = 0
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
for d in folders:
    if d not in floor:
        print("src/%s: a folder that src/floors.txt gives no floor" % d)
        bad += 1
def scan(path):
    for n, line in enumerate(open(path, errors="replace"), 1):
        m = inc.match(line)
        if m:
            yield n, m.group(1)
for d in folders:
    for name in sorted(os.listdir(os.path.join(src, d))):
        if not name.endswith((".c", ".h")):
            continue
        rel = "src/%s/%s" % (d, name)
        for n, h in scan(os.path.join(src, d, name)):
            if "/" not in h:
                continue
            to = h.split("/", 1)[0]
            if to == d or to not in floor or d not in floor:
                continue
            if floor[to] < floor[d] or (rel, h) in allow or ("src/" + d, to) in allow:
                continue
            print("%s:%d: includes %s: floor %d (%s) over floor %d (%s)" % (rel, n, h, floor[to], to, floor[d], d))
            bad += 1
for shell in ("tools", "python/src"):
    top = os.path.join(repo, shell)
    for root, _, files in os.walk(top):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            for n, h in scan(path):
                public = "/" not in h and os.path.isfile(os.path.join(repo, "include", h))
                own = "/" not in h and os.path.isfile(os.path.join(root, h))
                if not (public or own):
                    print("%s:%d: includes %s: a shell includes the public headers (include/) and its own only" % (os.path.relpath(path, repo), n, h))
                    bad += 1
print("layers: %d folders on %d floors, %d allowed exceptions, %d breaches" % (len(folders), len(set(floor.values())), len(allow), bad))
sys.exit(1 if bad else 0)
PY
st=$?
if [ $# -ge 1 ]; then
    lib=$1
    [ -f "$lib" ] || { echo "layers: no library at $lib"; exit 1; }
    exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u)
    declared=$(grep -h '^EMBER_API ' "$repo"/include/*.h | grep -oE '\bember_[a-z0-9_]+\(' | tr -d '(' | sort -u)
    leaked=$(comm -23 <(echo "$exported") <(echo "$declared"))
    missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
    if [ -n "$leaked" ]; then
        echo "$lib exports $(echo "$leaked" | wc -l) names include/ does not declare EMBER_API, such as: $(echo "$leaked" | head -8 | tr '\n' ' ')"
        st=1
    fi
    if [ -n "$missing" ]; then
        echo "$lib lacks $(echo "$missing" | wc -l) calls include/ declares, such as: $(echo "$missing" | head -8 | tr '\n' ' ')"
        st=1
    fi
    [ -n "$leaked$missing" ] || echo "layers: $lib exports the $(echo "$declared" | wc -l) calls include/ declares, nothing else"
fi
exit $st
