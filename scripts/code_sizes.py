#!/usr/bin/env python3
"""code_sizes.py: the longest functions and files of C folders.

    python3 scripts/code_sizes.py [--max-function N] [--max-file N] DIR...

A function runs from the first line of its signature to its closing brace:
the code's style puts a definition's opening and closing braces alone at
column 0, so a '{' line at column 0 opens one, the next '}' line at column 0
closes it, and the signature is the lines above the '{' back to the line
after a blank line, a comment's end or a previous '}' / ';'.  A file's
length is its line count.  Prints the longest of each (the ten longest
functions, every file over its limit) and exits 1 when a limit is passed.
"""
import argparse
import os
import sys


def functions(path):
    """(name, first line, length) of each function definition in path."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() == "{":
            start = i
            while start > 0:
                prev = lines[start - 1].rstrip()
                if not prev or prev.endswith(("*/", ";", "}")) or prev.startswith(("#", "//")):
                    break
                start -= 1
            end = i + 1
            while end < len(lines) and lines[end].rstrip() != "}" and not lines[end].startswith("};"):
                end += 1
            head = " ".join(l.strip() for l in lines[start:i])
            name = head.split("(")[0].split()[-1].lstrip("*") if "(" in head else head[:40]
            if "(" in head:
                out.append((name, start + 1, end - start + 1))
            i = end
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-function", type=int, default=120)
    ap.add_argument("--max-file", type=int, default=1000)
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    funcs, files = [], []
    for d in a.dirs:
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            p = os.path.join(d, f)
            files.append((sum(1 for _ in open(p, encoding="utf-8", errors="replace")), p))
            funcs += [(n, p, line, name) for name, line, n in functions(p)]
    funcs.sort(reverse=True)
    files.sort(reverse=True)
    print("longest functions (lines):")
    for n, p, line, name in funcs[:10]:
        print(f"  {n:5d}  {p}:{line}  {name}")
    print("longest files (lines):")
    for n, p in files[:5]:
        print(f"  {n:5d}  {p}")
    over = [x for x in funcs if x[0] > a.max_function] + [x for x in files if x[0] > a.max_file]
    for x in over:
        print("over the limit:", x)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
