#!/usr/bin/env python3
"""data_schema.py: `ember convert --config` and `ember inspect` against a naive reference.

    python3 tests/data_schema.py PATH/TO/ember [--seed S] [--keep]
    python3 tests/data_schema.py --self-test [--seed S]     (no ember: checks the harness only)

Every run writes fresh random CSV/TSV files (seeded by the time unless --seed is given; the
seed is printed so a failure reproduces), reads them with the small, deliberately naive
reference reader below (python3 stdlib only; XXH64 through ctypes on libxxhash.so.0) and
compares what ember makes of the same files:

  * `ember convert --config CFG IN OUT.bin`: the printed counts (samples written, data lines
    read, bad lines skipped), the first bad line's FILE:LINE, the distinct 64-bit keys per
    sparse feature and the computed standardize statistics (exact: %.17g of the same Welford
    sums in file order);
  * `ember inspect --samples all` on OUT.bin and on the text itself (`--config CFG`): every
    sample's label and ids EXACTLY, and its dense values and weights to a RELATIVE TOLERANCE
    OF 1e-6 (both sides are float32; the reference rounds with struct.pack('<f')); a float
    label is compared exactly as a float32;
  * gzip and zstd compressed copies of the input give the same samples;
  * the input with a UTF-8 byte-order mark before it (pandas' encoding="utf-8-sig", Excel),
    plain, gzip and zstd, converts to the same file as without it;
  * `--threads 1` and `--threads 2` write byte-identical files;
  * `--bad fail` exits 1 and names the first bad line as FILE:LINE:, leaving an existing OUT
    untouched;
  * the bad-line limit (--max-bad-fraction, --max-bad-lines; data.max_bad_fraction = 1 in the
    configs, as the cases mix in ~5% bad lines): the reference predicts whether and at which
    bad line the conversion stops (more than K bad lines, or more than F of the lines read
    counted as at least min(4096, all lines)), and ember must stop there, naming the counts
    and the first bad line, leaving no OUT; K = the bad lines passes, K - 1 stops at the last; a schema column missing from the header and a standardize column with std 0
    are fatal and leave OUT untouched;
  * a mutation of the reference (another hash seed) must disagree with ember, so the
    harness itself can fail.

Malformed lines (about 5%) of every kind are mixed in: wrong field count, bad int, bad float
("1e", "nan", "0x10", ...), bad hex, label 2, empty multi-hot item, bad weight, empty id,
unterminated quote, text after a closing quote, an overlong line (and a line of exactly
max_line bytes, which is good), a NUL byte, an empty line, too many multi-hot items.

The rules the reference implements are those of docs/data.md, made exact:
  - lines split on '\\n'; one trailing '\\r' is dropped; a last line without '\\n' counts; the
    empty segment after a final '\\n' is not a line; line numbers are 1-based and count the
    header; a line longer than max_line bytes or containing a NUL byte is bad;
  - TSV fields split on '\\t', no quoting; CSV fields split on ','; a field STARTING with '"'
    is quoted up to the next '"' not followed by '"' ('""' is one '"'), after which must come
    ',' or the end of the line; an unterminated quote is bad; a '"' elsewhere is ordinary;
  - without a header a line has exactly len(columns) fields; with one, columns are found by
    name (missing: fatal), and a line has exactly as many fields as the header;
  - label binary: exactly "0" or "1"; float: the float grammar below, 0 <= x <= 1;
  - int [+-]?[0-9]+ in int64, or [+-]?[0-9]+\\.0+ (a float's export of an integer) with
    |v| < 2^53, read as the exact integer (columns and int-encoded ids alike); float [+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)? then
    strtod; empty field = 0; transforms in double, stored as float32; standardize statistics
    (when not given) by Welford over the good lines in file order, std = sqrt(m2 / n);
  - key = XXH64(bytes, seed = index among the sparse columns): string: the unquoted bytes;
    int: int64 as 8 little-endian bytes; hex: 1..8 hex digits as a u32, 4 little-endian
    bytes; id = key % rows (rows >= 1) or the key as int64 (rows = 0);
  - categorical: empty = empty bag; multi_hot: empty = empty bag, else split on separator,
    an empty item is bad, with weights the item splits at its LAST ':' (no ':' = weight 1,
    empty id text is bad), more than 65535 items is bad; when any feature is weighted every
    id carries a weight (1 for unweighted features).
"""

import argparse
import ctypes
import gzip
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

REL_TOL = 1e-6  # dense values and weights; labels and ids are compared exactly
MAX_ITEMS = 65535

# ---------------------------------------------------------------------------- XXH64

_xx = ctypes.CDLL("libxxhash.so.0")
_xx.XXH64.restype = ctypes.c_ulonglong
_xx.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_ulonglong]


def xxh64(data, seed):
    return _xx.XXH64(data, len(data), seed)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def fma(a, b, c):
    """a * b + c rounded once (exact rationals, then one correct rounding)."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def s64(u):
    return u - (1 << 64) if u >= (1 << 63) else u


class Mismatch(Exception):
    pass


# ---------------------------------------------------------------------------- the reference

INT_RE = re.compile(rb"[+-]?[0-9]+")
INT_POINT_RE = re.compile(rb"([+-]?[0-9]+)\.0+")  # 84.0: an integer exported through a float column
JUDGE_LINES = 4096  # the bad-line fraction is judged over at least this many lines (or all of them)
FLOAT_RE = re.compile(rb"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
HEX_RE = re.compile(rb"[0-9A-Fa-f]{1,8}")


class Bad(Exception):
    """The line is bad (skipped or fatal, by --bad)."""


class Fatal(Exception):
    """The file cannot be read with this schema at all."""


def ref_lines(data):
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [p[:-1] if p.endswith(b"\r") else p for p in parts]


def ref_fields(line, fmt):
    if fmt == "tsv":
        return line.split(b"\t")
    out, i, n = [], 0, len(line)
    while True:
        if line[i:i + 1] == b'"':
            j, buf = i + 1, bytearray()
            while True:
                k = line.find(b'"', j)
                if k < 0:
                    raise Bad("unterminated quote")
                buf += line[j:k]
                if line[k + 1:k + 2] == b'"':
                    buf += b'"'
                    j = k + 2
                    continue
                break
            out.append(bytes(buf))
            i = k + 1
            if i == n:
                return out
            if line[i:i + 1] != b",":
                raise Bad("text after the closing quote")
            i += 1
        else:
            k = line.find(b",", i)
            if k < 0:
                out.append(line[i:])
                return out
            out.append(line[i:k])
            i = k + 1


def ref_int(b):
    m = INT_POINT_RE.fullmatch(b)
    if m:
        v = int(m.group(1))
        if abs(v) >= (1 << 53):
            raise Bad("%r is 2^53 or beyond with a point" % b)
        return v
    if not INT_RE.fullmatch(b):
        raise Bad("%r is not an integer" % b)
    v = int(b)
    if not -(1 << 63) <= v < (1 << 63):
        raise Bad("%r is out of int64" % b)
    return v


def ref_float(b):
    if not FLOAT_RE.fullmatch(b):
        raise Bad("%r is not a number" % b)
    return float(b.decode("ascii"))


def ref_key(text, enc, seed):
    if enc == "string":
        return xxh64(text, seed)
    if enc == "int":
        return xxh64(struct.pack("<q", ref_int(text)), seed)
    if not HEX_RE.fullmatch(text):
        raise Bad("%r is not 1 to 8 hex digits" % text)
    return xxh64(struct.pack("<I", int(text, 16)), seed)


class RefResult:
    pass


def reference(schema, data, seed_offset=0):
    """Reads `data` (bytes, decompressed) with `schema`; returns a RefResult or raises Fatal."""
    cols = schema["columns"]
    fmt = schema["format"]
    max_line = schema.get("max_line") or 65536
    lines = ref_lines(data)
    if schema.get("header"):
        if not lines:
            raise Fatal("no header line")
        try:
            hdr = ref_fields(lines[0], fmt)
        except Bad as e:
            raise Fatal("header: %s" % e)
        nfields = len(hdr)
        where = []
        for c in cols:
            nm = c["name"].encode()
            if nm not in hdr:
                raise Fatal("column %s is not in the header" % c["name"])
            where.append(hdr.index(nm))
        body, first_no = lines[1:], 2
    else:
        nfields = len(cols)
        where = list(range(len(cols)))
        body, first_no = lines, 1
    sparse = [c for c in cols if c["type"] in ("categorical", "multi_hot")]
    dense = [c for c in cols if c["type"] in ("int", "float")]
    weighted = any(c.get("weights") for c in sparse)

    good, bad, first_bad, bad_at = [], 0, None, []
    for no, line in enumerate(body, first_no):
        try:
            if len(line) > max_line:
                raise Bad("longer than max_line")
            if b"\0" in line:
                raise Bad("NUL byte")
            fields = ref_fields(line, fmt)
            if len(fields) != nfields:
                raise Bad("%d fields, expected %d" % (len(fields), nfields))
            label, xs, keys, wts = None, [], [], []
            for c, w in zip(cols, where):
                t, b = c["type"], fields[w]
                if t == "label":
                    if c.get("label", "binary") == "binary":
                        if b not in (b"0", b"1"):
                            raise Bad("label %r" % b)
                        label = float(b.decode())
                    else:
                        label = ref_float(b)
                        if not 0.0 <= label <= 1.0:
                            raise Bad("label %r out of [0, 1]" % b)
                elif t == "int":
                    xs.append(float(ref_int(b)) if b else 0.0)
                elif t == "float":
                    xs.append(ref_float(b) if b else 0.0)
                elif t == "categorical":
                    f = len(keys)
                    keys.append([ref_key(b, c.get("encoding", "string"), f + seed_offset)] if b else [])
                    wts.append([1.0] * len(keys[-1]))
                elif t == "multi_hot":
                    f = len(keys)
                    bag, bw = [], []
                    if b:
                        items = b.split(c.get("separator", "|").encode())
                        if len(items) > MAX_ITEMS:
                            raise Bad("%d items" % len(items))
                        for it in items:
                            if not it:
                                raise Bad("empty item")
                            wv = 1.0
                            if c.get("weights") and b":" in it:
                                k = it.rindex(b":")
                                it, wt = it[:k], it[k + 1:]
                                if not it:
                                    raise Bad("empty id")
                                wv = ref_float(wt)
                            bag.append(ref_key(it, c.get("encoding", "string"), f + seed_offset))
                            bw.append(wv)
                    keys.append(bag)
                    wts.append(bw)
            good.append((no, line, label, xs, keys, wts))
        except Bad as e:
            bad += 1
            bad_at.append(no - first_no)  # data line index
            if first_bad is None:
                first_bad = (no, str(e))

    # statistics of the standardize columns without mean/std, in file order
    # (stats_fma: the same with m2 += d * (x - mean) as one fused multiply-add, to recognise it)
    stats, stats_fma = {}, {}
    for j, c in enumerate(dense):
        if c.get("transform") == "standardize" and c.get("std") is None:
            for fused, out in ((False, stats), (True, stats_fma)):
                n, mean, m2 = 0, 0.0, 0.0
                for g in good:
                    x = g[3][j]
                    n += 1
                    d = x - mean
                    mean += d / n
                    m2 = fma(d, x - mean, m2) if fused else m2 + d * (x - mean)
                std = math.sqrt(m2 / n) if n else 0.0
                if std == 0.0:
                    raise Fatal("column %s: standardize with std 0" % c["name"])
                out[c["name"]] = (mean, std)

    def transform(c, x):
        tr = c.get("transform", "none")
        if tr == "log1p":
            return math.log1p(max(x, 0.0))
        if tr == "clip":
            return min(max(x, c["min"]), c["max"])
        if tr == "standardize":
            mean, std = stats[c["name"]] if c.get("std") is None else (c["mean"], c["std"])
            return (x - mean) / std
        return x

    res = RefResult()
    res.lines, res.bad, res.first_bad, res.stats, res.stats_fma = len(body), bad, first_bad, stats, stats_fma
    res.bad_at = bad_at
    res.weighted = weighted
    res.dense_names = [c["name"] for c in dense]
    res.sparse_names = [c["name"] for c in sparse]
    res.sparse_rows = dict((c["name"], c["rows"]) for c in sparse)
    res.samples = []
    distinct = [set() for _ in sparse]
    for no, line, label, xs, keys, wts in good:
        ids = []
        for f, (c, bag) in enumerate(zip(sparse, keys)):
            distinct[f].update(bag)
            rows = c["rows"]
            ids.append([k % rows for k in bag] if rows >= 1 else [s64(k) for k in bag])
        res.samples.append({
            "line": no, "text": line, "label": f32(label),
            "dense": [f32(transform(c, x)) for c, x in zip(dense, xs)],
            "ids": ids,
            "weights": [[f32(w) for w in bw] for bw in wts] if weighted else None,
        })
    res.distinct = {c["name"]: len(s) for c, s in zip(sparse, distinct)}
    return res


# ---------------------------------------------------------------------------- the generator
# Builds a line from values it chose, and knows whether the line is good and what it holds:
# the reference must agree with it (--self-test), ember must agree with the reference.

POOL = ["a", "foo", "bar baz", " lead", "trail ", "x,y", 'q"uote', '"start', '"', '""', "café",
        "日本語", "🙂 emoji", "a:b", "semi;colon", "pipe|x", "slash/x", "∑∫", "ünï", "comma,,",
        "back\\slash", "0x10", "nan", "-0", "1e", "   "]
CHUNKS = [c.encode() for c in list("abcxyzABQ0189 ,\":;|/_-.'\\#") + ["é", "日", "🙂", "Ω"]]
CHUNKS += [b"\xff", b"\xfe\x80", b"\t", b"x\ry"]  # a '\r' inside a field is a byte like any other


def fmt_float_cfg(x):
    s = repr(float(x))
    return s if ("." in s or "e" in s) else s + ".0"


class Gen:
    def __init__(self, rng, schema, order, extras):
        """order: the fields of a line: ("col", i) or ("extra", name)."""
        self.rng, self.schema, self.order, self.extras = rng, schema, order, extras
        self.csv = schema["format"] == "csv"
        self.max_line = schema.get("max_line") or 65536
        cols = schema["columns"]
        self.fidx = {}
        for i, c in enumerate(cols):
            if c["type"] in ("categorical", "multi_hot"):
                self.fidx[i] = len(self.fidx)

    # ---- values
    def rand_string(self, forbid):
        rng = self.rng
        while True:
            if rng.random() < 0.35:
                s = rng.choice(POOL).encode()
            else:
                s = b"".join(rng.choice(CHUNKS) for _ in range(rng.randint(1, 10)))
            if s and not any(f in s for f in forbid):
                return s

    def forbid(self, extra=()):
        f = [b"\n", b"\0"] + list(extra)  # (no chunk ends with '\r': only a line's last one is dropped)
        if not self.csv:
            f.append(b"\t")
        return f

    def int_text(self, allow_empty=True):
        rng = self.rng
        r = rng.random()
        if allow_empty and r < 0.05:
            return b"", 0
        if r < 0.12:
            v = rng.choice([-(1 << 63), (1 << 63) - 1, 0, -1, (1 << 53) + 1, -(1 << 62) + 3])
        elif r < 0.3:
            v = rng.randrange(-(1 << 63), 1 << 63)
        else:
            v = rng.randint(-1000, 100000)
        s = str(v)
        sign = ""
        if s[0] == "-":
            sign, s = "-", s[1:]
        elif rng.random() < 0.1:
            sign = "+"
        if rng.random() < 0.1:
            s = "0" * rng.randint(1, 3) + s
        if v == 0 and rng.random() < 0.3:
            sign = "-"
        if abs(v) < (1 << 53) and rng.random() < 0.15:  # pandas' 84.0 (an int column with missing values)
            s += "." + "0" * rng.randint(1, 3)
        return (sign + s).encode(), v

    def float_text(self, lo=-1e6, hi=1e6, allow_empty=True):
        rng = self.rng
        r = rng.random()
        if allow_empty and r < 0.05:
            return b"", 0.0
        x = rng.uniform(lo, hi)
        form = rng.randrange(9)
        if form == 0:
            s = str(int(x))
        elif form == 1:
            s = "%.*f" % (rng.randint(0, 6), x)
        elif form == 2:
            s = "%.*e" % (rng.randint(0, 8), x)
            s = s.replace("e", rng.choice("eE")).replace("E+", rng.choice(["E+", "E"]))
        elif form == 3:
            s = repr(x)
        elif form == 4:
            s = "%d." % int(x)  # "12."
        elif form == 5:
            s = "%.*f" % (rng.randint(1, 6), abs(x) % 1)
            s = s[1:] if rng.random() < 0.7 else s  # ".25"
            if rng.random() < 0.3:
                s = rng.choice("+-") + s
        elif form == 6:
            s = rng.choice(["0", "-0", "+0", "0.0", "00.500", "1e0", "1E-3", "+.5e+2", "-.5E-2",
                            "7e-30", "12345678901234567890", "3.4e20", "-2.5e+19"])
        elif form == 7:
            s = "%de%d" % (rng.randint(-99, 99), rng.randint(-10, 10))
        else:
            s = "+" + ("%.3f" % abs(x))
        b = s.encode()
        assert FLOAT_RE.fullmatch(b), s
        return b, float(s)

    def label_text(self, kind):
        rng = self.rng
        if kind == "binary":
            v = rng.randint(0, 1)
            return str(v).encode(), float(v)
        s = rng.choice(["0", "1", "0.5", ".25", "1.", "1.0", "5e-1", "2.5E-1", "+0.125", "0.000",
                        "1e0", "0e5", "-0", "%.*f" % (rng.randint(1, 9), rng.random()),
                        repr(rng.random()), "%.3e" % rng.random()])
        v = float(s)
        assert 0.0 <= v <= 1.0
        return s.encode(), v

    def key_text(self, enc, seed, forbid):
        rng = self.rng
        if enc == "string":
            s = self.rand_string(forbid)
            return s, xxh64(s, seed)
        if enc == "int":
            t, v = self.int_text(allow_empty=False)
            return t, xxh64(struct.pack("<q", v), seed)
        v = rng.choice([rng.randrange(1 << 32), rng.randrange(256), 0, 0xffffffff])
        h = "%x" % v
        h = "0" * rng.randint(0, 8 - len(h)) + h
        h = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in h)
        return h.encode(), xxh64(struct.pack("<I", v), seed)

    def weight_text(self):
        return self.float_text(-2.0, 10.0, allow_empty=False)

    def col_value(self, i):
        """(field text before quoting, expected value) of column i for a good line."""
        c = self.schema["columns"][i]
        t, rng = c["type"], self.rng
        if t == "label":
            return self.label_text(c.get("label", "binary"))
        if t == "int":
            b, v = self.int_text()
            return b, float(v)
        if t == "float":
            return self.float_text()
        if t == "ignore":
            return self.junk(), None
        f = self.fidx[i]
        enc = c.get("encoding", "string")
        if t == "categorical":
            if rng.random() < 0.1:
                return b"", ([], [])
            s, k = self.key_text(enc, f, self.forbid())
            return s, ([k], [1.0])
        sep = c.get("separator", "|").encode()
        if rng.random() < 0.12:
            return b"", ([], [])
        items, keys, wts = [], [], []
        for _ in range(rng.randint(1, 5)):
            s, k = self.key_text(enc, f, self.forbid([sep]))
            w = 1.0
            if c.get("weights") and (b":" in s or rng.random() < 0.6):
                wt, w = self.weight_text()
                s = s + b":" + wt
            items.append(s)
            keys.append(k)
            wts.append(w)
        return sep.join(items), (keys, wts)

    def junk(self):
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            return rng.choice([b"", b"nan", b"0x10", b"1e", b"inf", b"abc", b'"q,"', b'"'])
        return self.rand_string(self.forbid())

    def quote(self, b):
        if not self.csv:
            return b
        if b"," in b or b.startswith(b'"') or self.rng.random() < 0.08:
            return b'"' + b.replace(b'"', b'""') + b'"'
        return b

    # ---- lines
    def good_fields(self):
        """[(encoded field, kind, column index or None)], truth."""
        label, xs, bags = None, [], []
        enc = []
        vals = {}
        for i in range(len(self.schema["columns"])):
            vals[i] = self.col_value(i)
        for kind, ref in self.order:
            if kind == "col":
                raw, _ = vals[ref]
                enc.append([self.quote(raw), ref])
            else:
                enc.append([self.quote(self.junk()), None])
        for i, c in enumerate(self.schema["columns"]):
            v = vals[i][1]
            if c["type"] == "label":
                label = v
            elif c["type"] in ("int", "float"):
                xs.append(v)
            elif c["type"] in ("categorical", "multi_hot"):
                bags.append(v)
        return enc, (label, xs, bags)

    def join(self, enc):
        return (b"," if self.csv else b"\t").join(e[0] for e in enc)

    def cols_of(self, pred):
        return [k for k, e in enumerate(self.order) if e[0] == "col" and pred(self.schema["columns"][e[1]])]

    def pad_slot(self):
        return self.cols_of(lambda c: c["type"] == "ignore")[0]

    def bad_line(self, kind):
        """A bad line of the kind, or None when the schema has no place for it."""
        rng = self.rng
        enc, _ = self.good_fields()
        cols = self.schema["columns"]
        slot = lambda pred: (lambda s: rng.choice(s) if s else None)(self.cols_of(pred))
        if kind == "count":
            if rng.random() < 0.5 and len(enc) > 1:
                del enc[rng.randrange(len(enc))]
            else:
                enc.insert(rng.randrange(len(enc) + 1), [b"7", None])
        elif kind == "int":
            k = slot(lambda c: c["type"] == "int")
            if k is None:
                return None
            enc[k][0] = self.quote(rng.choice([b"1.5", b"abc", b"9223372036854775808", b"-9223372036854775809",
                                               b"1e3", b"0x10", b" 1", b"1 ", b"+", b"-", b"--1", b"1-",
                                               b"84.50", b"84.", b".0", b"84.0.0", b"1.0e2", b"9007199254740993.0",
                                               b"-9007199254740993.00"]))
        elif kind == "float":
            k = slot(lambda c: c["type"] == "float")
            if k is None:
                return None
            enc[k][0] = self.quote(rng.choice([b"1e", b"nan", b"NaN", b"inf", b"-inf", b"infinity", b"0x10",
                                               b".", b"e5", b"1.2.3", b"--1", b" 1", b"1 ", b"1e+", b"+",
                                               b"1_0", b"1,5" if not self.csv else b"1;5", b"0x1p3"]))
        elif kind == "hex":
            k = slot(lambda c: c.get("encoding") == "hex")
            if k is None:
                return None
            badv = rng.choice([b"g1", b"123456789", b"0x10", b"-1", b"+a", b"1 2", b"0000000001", b"x"])
            c = cols[self.order[k][1]]
            if c["type"] == "multi_hot":
                sep = c["separator"].encode()
                badv = b"a" + sep + badv if sep not in badv else b"zz"
            enc[k][0] = self.quote(badv)
        elif kind == "intkey":
            k = slot(lambda c: c.get("encoding") == "int")
            if k is None:
                return None
            enc[k][0] = self.quote(rng.choice([b"12a", b"1.5", b"7.01", b"99999999999999999999", b"0x10", b"a"]))
        elif kind == "label":
            k = slot(lambda c: c["type"] == "label")
            c = cols[self.order[k][1]]
            if c.get("label", "binary") == "binary":
                v = rng.choice([b"2", b"01", b"1.0", b"+1", b" 1", b"-1", b"", b"true", b"0.5"])
            else:
                v = rng.choice([b"2", b"1.0000001", b"-0.5", b"1e1", b"nan", b"x", b"1e", b"-1e-9"])
            enc[k][0] = self.quote(v)
        elif kind == "emptyitem":
            k = slot(lambda c: c["type"] == "multi_hot")
            if k is None:
                return None
            c = cols[self.order[k][1]]
            sep = c["separator"].encode()
            good_item = {"string": b"q", "int": b"5", "hex": b"a"}[c.get("encoding", "string")]
            enc[k][0] = self.quote(rng.choice([sep, sep + good_item, good_item + sep,
                                               good_item + sep + sep + good_item]))
        elif kind == "weight":
            k = slot(lambda c: c.get("weights"))
            if k is None:
                return None
            c = cols[self.order[k][1]]
            sep = c["separator"].encode()
            good_item = {"string": b"q", "int": b"5", "hex": b"a"}[c.get("encoding", "string")]
            bad_item = rng.choice([good_item + b":x", good_item + b":", good_item + b":nan",
                                   good_item + b":1e", b":1.5", good_item + b":0x10", good_item + b": 1"])
            enc[k][0] = self.quote(rng.choice([bad_item, good_item + sep + bad_item]))
        elif kind == "unterminated":
            if not self.csv:
                return None
            # no '"' may follow: a later quoted field could close the quote and restore the count
            k = rng.choice([k for k in range(len(enc)) if not any(b'"' in e[0] for e in enc[k + 1:])])
            enc[k][0] = b'"abc' + rng.choice([b"", b",d", b'""e'])
        elif kind == "afterquote":
            if not self.csv:
                return None
            k = rng.randrange(len(enc))
            enc[k][0] = rng.choice([b'"abc"x', b'"a""b" ', b'""x', b'"a"\t'])
        elif kind == "overlong":
            k = self.pad_slot()
            enc[k][0] = b""
            n = self.max_line + 1 - len(self.join(enc))
            enc[k][0] = b"x" * (max(n, 0) + rng.choice([0, 0, 1, 50]))
        elif kind == "nul":
            line = self.join(enc)
            p = rng.randrange(len(line) + 1)
            return line[:p] + b"\0" + line[p:]
        elif kind == "empty":
            return b""
        else:
            raise AssertionError(kind)
        return self.join(enc)

    def exact_line(self):
        """A good line of exactly max_line bytes (None when the line is already longer)."""
        enc, truth = self.good_fields()
        k = self.pad_slot()
        enc[k][0] = b""
        n = self.max_line - len(self.join(enc))
        if n < 0:
            return None
        enc[k][0] = b"y" * n
        return self.join(enc), truth

    def make(self, nlines, bad_frac=0.05, kinds=None, extra=None):
        """text bytes and [(line number, truth or None for bad)] of a file."""
        rng = self.rng
        kinds = kinds or ["count", "int", "float", "hex", "intkey", "label", "emptyitem", "weight",
                          "unterminated", "afterquote", "overlong", "nul", "empty"]
        out, truth, no, n_over = [], [], 0, 0
        eol = lambda: b"\r\n" if rng.random() < 0.1 else b"\n"
        if self.schema.get("header"):
            names = [self.schema["columns"][r]["name"].encode() if k == "col" else r.encode()
                     for k, r in self.order]
            names = [b'"' + n + b'"' if self.csv and rng.random() < 0.2 else n for n in names]
            out.append(self.join([[n] for n in names]) + eol())
            no += 1
        specials = {}
        for _ in range(3):
            specials[rng.randrange(nlines)] = "exact"
        for pos, (line, tr) in (extra or {}).items():
            specials[pos] = (line, tr)
        for i in range(nlines):
            no += 1
            sp = specials.get(i)
            if sp == "exact":
                r = self.exact_line()
                if r is not None:
                    out.append(r[0] + b"\n")
                    truth.append((no, r[1]))
                    continue
            elif sp is not None:
                out.append(sp[0] + b"\n")
                truth.append((no, sp[1]))
                continue
            if rng.random() < bad_frac:
                while True:
                    kind = rng.choice(kinds)
                    if kind == "overlong" and n_over >= 4:  # they are big: a few are enough
                        continue
                    line = self.bad_line(kind)
                    if line is not None:
                        n_over += kind == "overlong"
                        break
                out.append(line + eol())
                truth.append((no, None))
            else:
                enc, tr = self.good_fields()
                line = self.join(enc)
                if len(line) > self.max_line:
                    tr = None
                out.append(line + eol())
                truth.append((no, tr))
        if out and rng.random() < 0.5 and out[-1].rstrip(b"\r\n"):
            out[-1] = out[-1].rstrip(b"\n")  # a last line without '\n' (its '\r' is still dropped)
        return b"".join(out), truth


# ---------------------------------------------------------------------------- schemas

def config_text(schema, bad="skip", train_file=None, train_group=False, max_bad_fraction=1.0, max_bad_lines=None):
    cols = []
    for c in schema["columns"]:
        p = ['name = "%s";' % c["name"], 'type = "%s";' % c["type"]]
        if c["type"] == "label":
            p.append('label = "%s";' % c.get("label", "binary"))
        if c["type"] in ("int", "float") and "transform" in c:
            p.append('transform = "%s";' % c["transform"])
            for k in ("min", "max", "mean", "std"):
                if c.get(k) is not None:
                    p.append("%s = %s;" % (k, fmt_float_cfg(c[k])))
        if c["type"] in ("categorical", "multi_hot"):
            if "encoding" in c:
                p.append('encoding = "%s";' % c["encoding"])
            p.append("rows = %d;" % c["rows"])
        if c["type"] == "multi_hot":
            p.append('separator = "%s";' % c["separator"])
            p.append("weights = %s;" % ("true" if c.get("weights") else "false"))
        cols.append("      { " + " ".join(p) + " }")
    s = ['data = {', '  source = "text";', '  bad_lines = "%s";' % bad]
    if max_bad_fraction is not None:  # the cases mix in ~5% bad lines; the limit has its own checks
        s.append('  max_bad_fraction = %r;' % float(max_bad_fraction))
    if max_bad_lines is not None:
        s.append('  max_bad_lines = %dL;' % max_bad_lines)
    if train_file:  # a data file named in the config too, as ember train would read it
        s.append('  train_file = "%s";' % train_file)
    s += ['  schema = {',
         '    format = "%s";' % schema["format"], '    header = %s;' % ("true" if schema.get("header") else "false")]
    if schema.get("max_line"):
        s.append("    max_line = %d;" % schema["max_line"])
    s.append("    columns = (\n" + ",\n".join(cols) + "\n    );")
    s += ["  };", "};"]
    if train_group:  # without tables, ember's config loader wants a train group
        s.append("train = { epochs = 1; };")
    s.append("")
    return "\n".join(s)


# A config holds the schema alone (no data.train_file, no tables, no train group): IN and OUT
# come from ember convert's command line.
WORKAROUND = {}


def schema_csv_header(rng):
    cols = [
        {"name": "y", "type": "label", "label": "binary"},
        {"name": "i_none", "type": "int"},
        {"name": "i_log", "type": "int", "transform": "log1p"},
        {"name": "i_clip", "type": "int", "transform": "clip", "min": -50.0, "max": 5000.5},
        {"name": "i_std", "type": "int", "transform": "standardize"},
        {"name": "f_none", "type": "float", "transform": "none"},
        {"name": "f_log", "type": "float", "transform": "log1p"},
        {"name": "f_clip", "type": "float", "transform": "clip", "min": -1.0, "max": 2.5},
        {"name": "f_std", "type": "float", "transform": "standardize"},
        {"name": "c_str", "type": "categorical", "encoding": "string", "rows": 1000},
        {"name": "c_str0", "type": "categorical", "rows": 0},
        {"name": "c_int", "type": "categorical", "encoding": "int", "rows": 7},
        {"name": "c_hex", "type": "categorical", "encoding": "hex", "rows": 0},
        {"name": "m_strw", "type": "multi_hot", "encoding": "string", "separator": "|", "weights": True, "rows": 0},
        {"name": "m_int", "type": "multi_hot", "encoding": "int", "separator": ";", "rows": 100},
        {"name": "m_hexw", "type": "multi_hot", "encoding": "hex", "separator": " ", "weights": True, "rows": 1},
        {"name": "z", "type": "ignore"},
        {"name": "z2", "type": "ignore"},
    ]
    rng.shuffle(cols)
    schema = {"format": "csv", "header": True, "columns": cols}  # max_line: the default
    extras = ["extra1", "note", "x y"]
    order = [("col", i) for i in range(len(cols))] + [("extra", e) for e in extras]
    rng.shuffle(order)
    return schema, order, extras


def schema_csv_noheader(rng):
    cols = [
        {"name": "soft", "type": "label", "label": "float"},
        {"name": "f_given", "type": "float", "transform": "standardize", "mean": 12.5, "std": 3.25},
        {"name": "i_std", "type": "int", "transform": "standardize"},
        {"name": "i_clip", "type": "int", "transform": "clip", "min": 0.0, "max": 23.0},
        {"name": "f_plain", "type": "float"},
        {"name": "c_hex", "type": "categorical", "encoding": "hex", "rows": 1 << 20},
        {"name": "m_str", "type": "multi_hot", "separator": "/", "rows": 0},
        {"name": "m_intw", "type": "multi_hot", "encoding": "int", "separator": "|", "weights": True, "rows": 50},
        {"name": "ign", "type": "ignore"},
    ]
    rng.shuffle(cols)
    schema = {"format": "csv", "header": False, "max_line": 400, "columns": cols}
    return schema, [("col", i) for i in range(len(cols))], []


def schema_tsv(rng):
    cols = [
        {"name": "label", "type": "label"},
        {"name": "n", "type": "int", "transform": "none"},
        {"name": "fl", "type": "float", "transform": "log1p"},
        {"name": "fs", "type": "float", "transform": "standardize"},
        {"name": "cs", "type": "categorical", "encoding": "string", "rows": 0},
        {"name": "ci", "type": "categorical", "encoding": "int", "rows": 0},
        {"name": "ch", "type": "categorical", "encoding": "hex", "rows": 1000},
        {"name": "ms", "type": "multi_hot", "encoding": "string", "separator": ",", "rows": 1 << 30},
        {"name": "mi", "type": "multi_hot", "encoding": "int", "separator": "|", "rows": 0},
        {"name": "ig", "type": "ignore"},
    ]
    rng.shuffle(cols)
    header = rng.random() < 0.5
    schema = {"format": "tsv", "header": header, "max_line": 1 << 18, "columns": cols}  # fits 65535 items
    extras = ["tsv_extra"] if header else []
    order = [("col", i) for i in range(len(cols))] + [("extra", e) for e in extras]
    if header:
        rng.shuffle(order)
    return schema, order, extras


def big_multi_hot_lines(gen):
    """A good line whose "mi" has 65535 items and a bad one with 65536."""
    cols = gen.schema["columns"]
    mi = next(i for i, c in enumerate(cols) if c["name"] == "mi")
    f = gen.fidx[mi]
    out = []
    for n in (MAX_ITEMS, MAX_ITEMS + 1):
        enc, (label, xs, bags) = gen.good_fields()
        vals = [gen.rng.randint(0, 99) for _ in range(n)]
        k = next(k for k, e in enumerate(gen.order) if e == ("col", mi))
        enc[k][0] = b"|".join(str(v).encode() for v in vals)
        sparse = [i for i in range(len(cols)) if i in gen.fidx]
        bags = list(bags)
        bags[sparse.index(mi)] = ([xxh64(struct.pack("<q", v), f) for v in vals], [1.0] * n)
        out.append((gen.join(enc), (label, xs, bags) if n == MAX_ITEMS else None))
    return out


def build_cases(rng):
    cases = []
    for name, mk, n in (("csv_header", schema_csv_header, 3000),
                        ("csv_noheader", schema_csv_noheader, 2000),
                        ("tsv", schema_tsv, 9000)):
        schema, order, extras = mk(rng)
        gen = Gen(rng, schema, order, extras)
        extra = None
        if name == "tsv":
            big = big_multi_hot_lines(gen)
            extra = {rng.randrange(n): big[0], rng.randrange(n): big[1]}
        text, truth = gen.make(n, extra=extra)
        cases.append({"name": name, "schema": schema, "text": text, "truth": truth})
    return cases


# ---------------------------------------------------------------------------- self-test

def check_truth(case, ref):
    """The generator's intent against the reference's reading."""
    schema = case["schema"]
    goods = [(no, t) for no, t in case["truth"] if t is not None]
    nbad = sum(1 for _, t in case["truth"] if t is None)
    if ref.bad != nbad or len(ref.samples) != len(goods) or ref.lines != len(case["truth"]):
        gl = {no for no, _ in goods}
        rl = {s["line"] for s in ref.samples}
        diff = sorted(gl ^ rl)[:5]
        raise Mismatch("%s: generator %d good / %d bad, reference %d good / %d bad; lines differing: %s"
                       % (case["name"], len(goods), nbad, len(ref.samples), ref.bad, diff))
    sparse = [c for c in schema["columns"] if c["type"] in ("categorical", "multi_hot")]
    for s, (no, (label, xs, bags)) in zip(ref.samples, goods):
        if s["line"] != no:
            raise Mismatch("%s: reference sample at line %d, generator %d" % (case["name"], s["line"], no))
        if s["label"] != f32(label):
            raise Mismatch("%s line %d: label %r vs %r" % (case["name"], no, s["label"], label))
        for c, (keys, wts), ids, rw in zip(sparse, bags, s["ids"], s["weights"] or [None] * len(sparse)):
            want = [k % c["rows"] for k in keys] if c["rows"] else [s64(k) for k in keys]
            if ids != want:
                raise Mismatch("%s line %d: %s ids %r vs generator %r" % (case["name"], no, c["name"], ids, want))
            if rw is not None and rw != [f32(w) for w in wts]:
                raise Mismatch("%s line %d: %s weights %r vs %r" % (case["name"], no, c["name"], rw, wts))
    return len(goods)


def unit_checks():
    assert xxh64(b"", 0) == 0xEF46DB3751D8E999
    F = lambda s: ref_fields(s, "csv")
    assert F(b'a,"b,c","d""e",') == [b"a", b"b,c", b'd"e', b""]
    assert F(b'""') == [b""] and F(b'"",""') == [b"", b""] and F(b"") == [b""]
    assert F(b'a"b,c"') == [b'a"b', b'c"'] and F(b'"a"""') == [b'a"']
    for bad in (b'"abc', b'"abc"x', b'x,"a""', b'"a"\t', b'"a" ,b'):
        try:
            F(bad)
        except Bad:
            continue
        raise AssertionError(bad)
    assert ref_fields(b'"a\t"b', "tsv") == [b'"a', b'"b']
    assert ref_lines(b"a\r\nb\n\nc") == [b"a", b"b", b"", b"c"]
    assert ref_lines(b"a\n") == [b"a"] and ref_lines(b"") == [] and ref_lines(b"\n") == [b""]
    assert ref_lines(b"a\r\r\n") == [b"a\r"]
    for g in (b"1.", b".5", b"1e5", b"+1.5E-3", b"-0", b"007"):
        ref_float(g)
    for b in (b"1e", b".", b"nan", b"inf", b"0x10", b"1e+", b" 1", b"1_0", b"", b"+"):
        try:
            ref_float(b)
        except Bad:
            continue
        raise AssertionError(b)
    assert ref_int(b"-9223372036854775808") == -(1 << 63) and ref_int(b"+007") == 7
    assert ref_int(b"84.0") == 84 and ref_int(b"-3.000") == -3 and ref_int(b"-0.0") == 0
    assert ref_int(b"9007199254740991.0") == (1 << 53) - 1 and ref_int(b"9007199254740993") == (1 << 53) + 1
    for b in (b"9223372036854775808", b"1.5", b"84.", b".0", b"1e2", b"9007199254740992.0", b"-9007199254740992.0",
              b"", b" 1"):
        try:
            ref_int(b)
        except Bad:
            continue
        raise AssertionError(b)
    assert ref_key(b"fFfF", "hex", 3) == xxh64(struct.pack("<I", 0xffff), 3)
    for b in (b"", b"123456789", b"0x1", b"-1"):
        try:
            ref_key(b, "hex", 0)
        except Bad:
            continue
        raise AssertionError(b)
    sch = {"format": "csv", "header": False, "columns": [
        {"name": "y", "type": "label"},
        {"name": "m", "type": "multi_hot", "separator": "|", "weights": True, "rows": 0},
        {"name": "s", "type": "float", "transform": "standardize"}]}
    r = reference(sch, b'1,a:b:0.5|c,1\n0,,3\n1,x||y,5\n0,:1,5\n0,p"q"|r:2e0,')
    assert r.lines == 5 and r.bad == 2 and r.first_bad[0] == 3 and len(r.samples) == 3
    assert r.samples[0]["ids"] == [[s64(xxh64(b"a:b", 0)), s64(xxh64(b"c", 0))]]
    assert r.samples[0]["weights"] == [[0.5, 1.0]]
    assert r.samples[2]["ids"] == [[s64(xxh64(b'p"q"', 0)), s64(xxh64(b"r", 0))]]  # '"' inside: ordinary
    mean, std = r.stats["s"]
    assert abs(mean - 4.0 / 3) < 1e-15 and abs(std - math.sqrt(((1 - mean) ** 2 + (3 - mean) ** 2 + mean ** 2) / 3)) < 1e-12


# ---------------------------------------------------------------------------- running ember

def run(cmd, timeout=60):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Mismatch("%s: %s" % (" ".join(cmd), e))
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def inspect(ember, path, cfg=None):
    cmd = [ember, "inspect", "--samples", "all", path] + (["--config", cfg] if cfg else [])
    rc, out, err = run(cmd)
    if rc != 0:
        raise Mismatch("%s: exit %d\n%s%s" % (" ".join(cmd), rc, out, err[-2000:]))
    recs = []
    for l in out.splitlines():
        if l.startswith("{"):
            try:
                recs.append(json.loads(l))
            except ValueError as e:
                raise Mismatch("%s: not JSON (%s): %s" % (" ".join(cmd), e, l[:300]))
    return recs


def close(a, b):
    return a == b or abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def compare_samples(ref, recs, what):
    def where(i):
        s = ref.samples[i]
        t = s["text"]
        return "%s: sample %d (input line %d: %r)" % (what, i, s["line"], t[:160] + (b"..." if len(t) > 160 else b""))

    for i, (s, g) in enumerate(zip(ref.samples, recs)):
        if g.get("sample") != i:
            raise Mismatch("%s: \"sample\" %r, expected %d" % (where(i), g.get("sample"), i))
        if not isinstance(g.get("label"), (int, float)) or f32(float(g["label"])) != s["label"]:
            raise Mismatch("%s: label %r, reference %r" % (where(i), g.get("label"), s["label"]))
        dense = g.get("dense")
        if not isinstance(dense, list) or len(dense) != len(s["dense"]):
            raise Mismatch("%s: dense %r, reference %r" % (where(i), dense, s["dense"]))
        for j, (a, b) in enumerate(zip(dense, s["dense"])):
            if not isinstance(a, (int, float)) or not close(float(a), b):
                raise Mismatch("%s: dense[%d] (%s) = %r, reference %r" % (where(i), j, ref.dense_names[j], a, b))
        ids = g.get("ids")
        if not isinstance(ids, list) or len(ids) != len(s["ids"]):
            raise Mismatch("%s: ids %r, reference %r" % (where(i), ids, s["ids"]))
        for f, (a, b) in enumerate(zip(ids, s["ids"])):
            if a != b:
                raise Mismatch("%s: ids[%d] (%s) = %r, reference %r" % (where(i), f, ref.sparse_names[f], a[:20] if isinstance(a, list) else a, b[:20]))
        if ref.weighted:
            w = g.get("weights")
            if not isinstance(w, list) or len(w) != len(s["weights"]):
                raise Mismatch("%s: weights %r, reference %r" % (where(i), w, s["weights"]))
            for f, (a, b) in enumerate(zip(w, s["weights"])):
                if not isinstance(a, list) or len(a) != len(b) or not all(close(float(x), y) for x, y in zip(a, b)):
                    raise Mismatch("%s: weights[%d] (%s) = %r, reference %r" % (where(i), f, ref.sparse_names[f], a, b))
        elif "weights" in g:
            raise Mismatch("%s: \"weights\" present but no feature is weighted" % where(i))
    if len(recs) != len(ref.samples):
        raise Mismatch("%s: %d samples, reference %d%s" % (
            what, len(recs), len(ref.samples),
            "" if len(recs) > len(ref.samples) else "; first missing: input line %d" % ref.samples[len(recs)]["line"]))


def convert(ember, cfg, src, out, *opts):
    cmd = [ember, "convert", "--config", cfg, src, out] + list(opts)
    rc, o, e = run(cmd)
    return cmd, rc, o, e


def check_convert_output(ref, cmd, rc, out, err, src, dst):
    what = " ".join(cmd)
    if rc != 0:
        raise Mismatch("%s: exit %d\n%s%s" % (what, rc, out, err[-2000:]))
    m = re.search(r"ember convert: wrote (\d+) samples to (.*) \((\d+) lines read, (\d+) bad lines skipped\)", out)
    if not m:
        raise Mismatch("%s: no 'wrote N samples' line in:\n%s" % (what, out))
    n, to, lines, bad = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    want = (len(ref.samples), ref.lines, ref.bad)
    if (n, lines, bad) != want or to != dst:
        raise Mismatch("%s: wrote %d to %s (%d lines read, %d bad), reference %d to %s (%d lines, %d bad)"
                       % (what, n, to, lines, bad, want[0], dst, want[1], want[2]))
    if ref.bad:
        m = re.search(r"ember convert: first bad line: " + re.escape(src) + r":(\d+): ", out)
        if not m:
            raise Mismatch("%s: no 'first bad line: %s:LINE: ...' in:\n%s" % (what, src, out))
        if int(m.group(1)) != ref.first_bad[0]:
            raise Mismatch("%s: first bad line %s, reference %d (%s)"
                           % (what, m.group(1), ref.first_bad[0], ref.first_bad[1]))
    elif "first bad line" in out:
        raise Mismatch("%s: prints a first bad line but the reference found none" % what)
    got = dict((a, int(b)) for a, b in re.findall(r"ember convert: feature (\S+): (\d+) distinct keys", out))
    if got != ref.distinct:
        raise Mismatch("%s: distinct keys %r, reference %r" % (what, got, ref.distinct))
    # the expected share of keys that share a row: d keys hashed uniformly into R rows, a key's row
    # holds none of the other d - 1 with probability (1 - 1/R)^(d - 1); 64-bit keys: none
    for name, d in ref.distinct.items():
        R = ref.sparse_rows[name]
        m = re.search(r"ember convert: feature %s: \d+ distinct keys(.*)" % re.escape(name), out)
        tail = m.group(1) if m else ""
        if R == 0:
            if "64-bit keys, a row each" not in tail:
                raise Mismatch("%s: feature %s (64-bit keys): %r" % (what, name, tail))
            continue
        m = re.match(r"; in (\d+) rows about (\S+) % of them share a row with another key$", tail)
        want = 0.0 if d <= 1 else 100.0 * (1.0 - (1.0 - 1.0 / R) ** (d - 1))  # printed to 3 digits: 0.5 % of it
        if not m or int(m.group(1)) != R or abs(float(m.group(2)) - want) > 0.005 * want + 1e-12:
            raise Mismatch("%s: feature %s in %d rows: %r, reference about %.4g %%" % (what, name, R, tail, want))
    got = dict((a, (float(b), float(c))) for a, b, c in
               re.findall(r"ember convert: field (\S+): standardize with mean (\S+) std (\S+)", out))
    if got != ref.stats and got == ref.stats_fma:
        deviation("fma", "standardize statistics: ember's equal Welford's with m2 += d * (x - mean) rounded ONCE "
                  "(a fused multiply-add: the build is gnu11 with -march=native, which lets the compiler "
                  "contract it; src/data/ctr_text.c), not with the product rounded first: e.g. %s"
                  % "; ".join("%s std %.17g, rules %.17g" % (k, got[k][1], ref.stats[k][1])
                              for k in got if got[k] != ref.stats[k]))
    elif got != ref.stats:
        raise Mismatch("%s: standardize statistics %r, reference (%%.17g) %r"
                       % (what, got, {k: ("%.17g" % a, "%.17g" % b) for k, (a, b) in ref.stats.items()}))


DEVIATIONS = []


def deviation(kind, msg):
    """A difference from the rules that does not stop the other checks; the run still fails."""
    if kind not in (k for k, _ in DEVIATIONS):
        DEVIATIONS.append((kind, msg))
        print("  DEVIATION: " + msg)


def slurp(p):
    with open(p, "rb") as f:
        return f.read()


def run_case(ember, tmp, case, ref):
    name = case["name"]
    src = os.path.join(tmp, name + (".csv" if case["schema"]["format"] == "csv" else ".tsv"))
    cfg = os.path.join(tmp, name + ".cfg")
    with open(src, "wb") as f:
        f.write(case["text"])
    with open(cfg, "w") as f:
        f.write(config_text(case["schema"], **WORKAROUND, train_file=os.path.basename(src)))
    out = os.path.join(tmp, name + ".bin")
    check_convert_output(ref, *convert(ember, cfg, src, out), src, out)
    compare_samples(ref, inspect(ember, out), "inspect %s" % out)
    compare_samples(ref, inspect(ember, src, cfg), "inspect %s --config %s" % (src, cfg))
    recs = inspect_n(ember, out, 5)
    if len(recs) != min(5, len(ref.samples)):
        raise Mismatch("inspect --samples 5 %s: %d records" % (out, len(recs)))

    # threads: the same bytes
    blobs = {"default": slurp(out)}
    for t in ("1", "2"):
        o = os.path.join(tmp, "%s.t%s.bin" % (name, t))
        check_convert_output(ref, *convert(ember, cfg, src, o, "--threads", t), src, o)
        blobs[t] = slurp(o)
    if not blobs["1"] == blobs["2"] == blobs["default"]:
        raise Mismatch("%s: --threads 1, --threads 2 and the default write different files (%d, %d, %d bytes)"
                       % (name, len(blobs["1"]), len(blobs["2"]), len(blobs["default"])))

    # compressed copies: the same samples
    comp = []
    gz = src + ".gz"
    with open(gz, "wb") as f:
        f.write(gzip.compress(case["text"]))
    comp.append(gz)
    if shutil.which("zstd"):
        zs = src + ".zst"
        r = subprocess.run(["zstd", "-q", "-f", "-o", zs, src])
        if r.returncode != 0:
            raise Mismatch("zstd failed")
        comp.append(zs)
    else:
        print("  WARNING: no zstd program: zstd input not checked")
    for c in comp:
        o = c + ".bin"
        check_convert_output(ref, *convert(ember, cfg, c, o), c, o)
        compare_samples(ref, inspect(ember, o), "inspect %s (from %s)" % (o, c))
        if slurp(o) != blobs["1"]:
            raise Mismatch("%s: converting %s writes a file different from the plain input's" % (name, c))
    compare_samples(ref, inspect(ember, comp[-1], cfg), "inspect %s --config %s" % (comp[-1], cfg))

    # a UTF-8 byte-order mark before the text: skipped, plain or compressed
    bom = src + ".bom"
    with open(bom, "wb") as f:
        f.write(b"\xef\xbb\xbf" + case["text"])
    boms = [bom, bom + ".gz"]
    with open(bom + ".gz", "wb") as f:
        f.write(gzip.compress(b"\xef\xbb\xbf" + case["text"]))
    if shutil.which("zstd"):
        if subprocess.run(["zstd", "-q", "-f", "-o", bom + ".zst", bom]).returncode != 0:
            raise Mismatch("zstd failed")
        boms.append(bom + ".zst")
    for c in boms:
        o = c + ".bin"
        check_convert_output(ref, *convert(ember, cfg, c, o), c, o)
        if slurp(o) != blobs["1"]:
            raise Mismatch("%s: converting %s (a byte-order mark before the text) writes a file different from "
                           "the plain input's" % (name, c))

    # --bad fail: exit 1 at the first bad line, OUT untouched
    if ref.bad:
        old = b"previous contents of OUT\n"
        o = os.path.join(tmp, name + ".fail.bin")
        with open(o, "wb") as f:
            f.write(old)
        cmd, rc, so, se = convert(ember, cfg, src, o, "--bad", "fail")
        want = "%s:%d:" % (src, ref.first_bad[0])
        if rc != 1 or want not in so + se:
            raise Mismatch("%s: exit %d (expected 1), output should name %s (reference: %s):\n%s%s"
                           % (" ".join(cmd), rc, want, ref.first_bad[1], so, se))
        if slurp(o) != old:
            raise Mismatch("%s: a failed conversion changed the existing OUT" % " ".join(cmd))
        if os.path.exists(o + ".tmp"):
            print("  WARNING: %s.tmp left behind by the failed conversion" % o)
    return blobs["1"]


def inspect_n(ember, path, n):
    rc, out, err = run([ember, "inspect", "--samples", str(n), path])
    if rc != 0:
        raise Mismatch("inspect --samples %d %s: exit %d %s" % (n, path, rc, err))
    return [l for l in out.splitlines() if l.startswith("{")]


def fatal_checks(ember, tmp, rng):
    # a schema column missing from the header
    schema = {"format": "csv", "header": True, "columns": [
        {"name": "y", "type": "label"}, {"name": "a", "type": "int"},
        {"name": "c", "type": "categorical", "rows": 10}, {"name": "missing_col", "type": "float"}]}
    src, cfg, o = (os.path.join(tmp, "fatal" + s) for s in (".csv", ".cfg", ".bin"))
    with open(src, "wb") as f:
        f.write(b"y,a,c,b\n1,2,x,3\n0,5,y,6\n")
    with open(cfg, "w") as f:
        f.write(config_text(schema, **WORKAROUND, train_file=os.path.basename(src)))
    old = b"untouched\n"
    with open(o, "wb") as f:
        f.write(old)
    cmd, rc, so, se = convert(ember, cfg, src, o)
    if rc == 0 or "missing_col" not in so + se or slurp(o) != old:
        raise Mismatch("%s: a column missing from the header must be fatal, name it and leave OUT: exit %d\n%s%s"
                       % (" ".join(cmd), rc, so, se))
    # standardize with std 0 (every good line has the same value; the bad one differs)
    schema = {"format": "tsv", "header": False, "columns": [
        {"name": "y", "type": "label"}, {"name": "s", "type": "float", "transform": "standardize"},
        {"name": "c", "type": "categorical", "rows": 0}]}
    with open(src, "wb") as f:
        f.write(b"1\t2.5\ta\n0\t2.50\tb\n2\t7\tc\n1\t25e-1\t\n")
    with open(cfg, "w") as f:
        f.write(config_text(schema, **WORKAROUND, train_file=os.path.basename(src)))
    try:
        reference(schema, slurp(src))
        raise AssertionError("reference: std 0 not fatal")
    except Fatal:
        pass
    cmd, rc, so, se = convert(ember, cfg, src, o)
    if rc == 0 or slurp(o) != old:
        raise Mismatch("%s: standardize with std 0 must be fatal and leave OUT: exit %d\n%s%s"
                       % (" ".join(cmd), rc, so, se))


def ref_limit(ref, frac, count):
    """Where the bad-line limit stops a read of all of ref's lines: (bad lines, lines read, key),
    or None.  Judged at each bad line: more than count (>= 0), or more than frac of the lines
    read counted as at least min(JUDGE_LINES, all lines)."""
    judge0 = min(JUDGE_LINES, ref.lines)
    for b, i in enumerate(ref.bad_at, 1):
        if count >= 0 and b > count:
            return b, i + 1, "max_bad_lines"
        if frac < 1 and b > frac * max(i + 1, judge0):
            return b, i + 1, "max_bad_fraction"
    return None


def limit_checks(ember, tmp, rng, case, ref):
    """The bad-line limit against ref_limit: draws of fraction and count around the case's own
    bad lines (some pass, some stop), the count's exact boundary, and the config's keys."""
    name = case["name"]
    src = os.path.join(tmp, name + (".csv" if case["schema"]["format"] == "csv" else ".tsv"))
    cfg = os.path.join(tmp, name + ".cfg")
    B, share = ref.bad, ref.bad / ref.lines
    draws = [(1.0, B), (1.0, B - 1), (1.0, rng.randrange(B)), (0.0, -1), (1.0, 0)]
    draws += [(share * rng.uniform(0.3, 2.0), -1) for _ in range(4)]
    draws += [(share * rng.uniform(0.5, 1.5), rng.randrange(B + B // 2)) for _ in range(2)]
    stops = 0
    for k, (frac, count) in enumerate(draws + [(None, None)]):
        out = os.path.join(tmp, "%s.limit%d.bin" % (name, k))
        if frac is None:  # the config's keys instead of the options
            frac, count = share * rng.uniform(0.5, 1.5), rng.randrange(B + B // 2)
            c2 = os.path.join(tmp, name + ".limit.cfg")
            with open(c2, "w") as f:
                f.write(config_text(case["schema"], max_bad_fraction=frac, max_bad_lines=count))
            cmd, rc, so, se = convert(ember, c2, src, out)
        else:
            cmd, rc, so, se = convert(ember, cfg, src, out, "--max-bad-fraction", repr(frac),
                                      "--max-bad-lines", str(count))
        want = ref_limit(ref, frac, count)
        what = "%s (fraction %r, count %d: %s)" % (" ".join(cmd), frac, count,
                                                   "stops at %d bad of %d read by %s" % want if want else "passes")
        if want is None:
            check_convert_output(ref, cmd, rc, so, se, src, out)
            continue
        stops += 1
        head = "ember convert: %s: %d bad lines in the first %d read: more than data.%s" % (src, want[0], want[1],
                                                                                             want[2])
        first = "; the first: %s:%d: " % (src, ref.first_bad[0])
        left = [f for f in os.listdir(tmp) if f.startswith(os.path.basename(out))]
        if rc != 1 or head not in se or first not in se or left:
            raise Mismatch("%s: exit %d, want 1 with '%s' and '%s', no OUT (left: %s)\n%s%s"
                           % (what, rc, head, first, left, so, se))
    if B >= 2 and stops < 2:
        raise Mismatch("%s: only %d of the limit draws stop (the draws are blind)" % (name, stops))


def minimal_config_check(ember, tmp, case):
    """The config of docs/data.md's schema alone (no data.train_file, no tables, no train group)
    is enough for convert: IN names the file and each column's rows the table."""
    name = case["name"]
    src = os.path.join(tmp, name + ".csv")
    cfg = os.path.join(tmp, name + ".minimal.cfg")
    with open(cfg, "w") as f:
        f.write(config_text(case["schema"]))
    o = os.path.join(tmp, name + ".minimal.bin")
    cmd, rc, so, se = convert(ember, cfg, src, o, "--threads", "1")
    if rc != 0:
        deviation("config", "%s: a config with data.schema but no data.train_file and no train group (docs/data.md's "
                  "example) is refused: %s" % (" ".join(cmd), (so + se).strip()))
    elif slurp(o) != slurp(os.path.join(tmp, name + ".t1.bin")):
        raise Mismatch("%s: the minimal config writes another file than the full one" % " ".join(cmd))
    else:
        print("  minimal cfg   ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ember", nargs="?")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--keep", action="store_true", help="keep the temporary files")
    ap.add_argument("--self-test", action="store_true", help="check the generator and reference only")
    ap.add_argument("--allow", action="append", default=[], choices=["fma", "config"],
                    help="report this known deviation without failing (fma: standardize statistics "
                         "with a fused multiply-add; config: the schema-only config refused)")
    a = ap.parse_args()
    if not a.ember and not a.self_test:
        ap.error("PATH/TO/ember is required (or --self-test)")
    seed = a.seed if a.seed is not None else int(time.time() * 1000) % (1 << 31)
    print("data_schema.py: seed %d (rerun with --seed %d)" % (seed, seed))
    sys.stdout.flush()
    t0 = time.time()
    unit_checks()
    rng = random.Random(seed)
    cases = build_cases(rng)
    refs = {}
    for c in cases:
        refs[c["name"]] = reference(c["schema"], c["text"])
        n = check_truth(c, refs[c["name"]])
        r = refs[c["name"]]
        print("  %-13s %5d lines, %4d good-line samples, %3d bad (first at line %d: %s)"
              % (c["name"], r.lines, n, r.bad, r.first_bad[0] if r.first_bad else 0,
                 r.first_bad[1] if r.first_bad else "-"))
    if a.self_test:
        print("data_schema.py: self-test passed (%.1f s)" % (time.time() - t0))
        return 0

    ember = os.path.abspath(a.ember)
    tmp = tempfile.mkdtemp(prefix="ember_data_schema_")
    try:
        for c in cases:
            run_case(ember, tmp, c, refs[c["name"]])
            print("  %-13s ok" % c["name"])
            sys.stdout.flush()
        fatal_checks(ember, tmp, rng)
        print("  fatal errors  ok")
        for c in cases:
            limit_checks(ember, tmp, rng, c, refs[c["name"]])
        print("  bad-line limit ok")
        # the harness can fail: a reference with other hash seeds must disagree with ember
        c = cases[0]
        mutant = reference(c["schema"], c["text"], seed_offset=1)
        try:
            compare_samples(mutant, inspect(ember, os.path.join(tmp, c["name"] + ".bin")), "mutant")
        except Mismatch:
            print("  mutation      ok (a reference hashing with seed f+1 disagrees)")
        else:
            raise Mismatch("harness: the mutated reference (seed f+1) agrees with ember: the comparison is blind")
        minimal_config_check(ember, tmp, cases[0])
    except Mismatch as e:
        print("FAIL (seed %d): %s" % (seed, e))
        print("files kept in %s" % tmp)
        return 1
    allowed = [d for d in DEVIATIONS if d[0] in a.allow]
    for _, d in allowed:
        print("  allowed by --allow: " + d[:120] + "...")
    DEVIATIONS[:] = [d for d in DEVIATIONS if d[0] not in a.allow]
    if DEVIATIONS:
        print("FAIL (seed %d): %d deviation(s) from the rules:" % (seed, len(DEVIATIONS)))
        for _, d in DEVIATIONS:
            print("  - " + d)
        print("files kept in %s" % tmp)
        return 1
    if a.keep:
        print("files kept in %s" % tmp)
    else:
        shutil.rmtree(tmp)
    print("data_schema.py: all checks passed (%.1f s)" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
