#!/usr/bin/env python3
"""serve_load.py EMBER OUT [SECONDS]: `ember serve` under wrk (docs/PERFORMANCE.md, "Inference",
"Serving"). Run by bench/serve_load.sh, which builds ember and installs wrk.

A Criteo-shaped model (13 dense features, 26 one-hot categoricals of 100 to 200,000 rows, dim
16) is trained briefly on random Criteo TSV lines (so it carries the Criteo input schema) and
exported at int8. For each server configuration (--scorers 1 --threads 1, --scorers 1 --threads
2, --scorers 2 --threads 1), request batch (1, 64, 512 samples) and body, a server is started
on a free loopback port and wrk posts one fixed request for SECONDS seconds (default 8) over C
connections (16 at batch 1, 8 at 64, 4 at 512). The bodies: ids (`json`: the columnar JSON of
ids and transformed dense values; `binary`: EMBQ), and raw rows that the server hashes and
transforms itself (`rows_json`: {"rows": [{"I1": 3, "C1": "68fd1e64", ...}]}; `rows_tsv`: the
TSV lines, Content-Type text/tab-separated-values). One JSON line per run: wrk's requests/s and
latency percentiles, samples/s, the server's resident memory at the end (VmRSS), and from the
server's /stats the mean micro-batch and where a request's time went (decode, wait for its
micro-batch, score, and the rest: HTTP and the kernel). The load generator shares the
machine's cores with the server. Then bench_serve_scorers (bench/serve_scorers.c, built beside
EMBER) scores the same model through the library alone, with 1 and 2 scorers, beside how many
cores' worth of CPU the process can get at all: its JSON lines go to OUT too.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

EMBER, OUT = os.path.abspath(sys.argv[1]), sys.argv[2]
SECONDS = int(sys.argv[3]) if len(sys.argv) > 3 else 8
ROWS = [200000, 100000, 50000, 20000, 10000, 5000, 2000, 1000, 500, 200, 100, 200000, 50000, 10000, 2000, 500,
        100000, 20000, 5000, 1000, 200, 150000, 30000, 3000, 300, 100]
work = tempfile.mkdtemp(prefix="ember-serve-load-")


def ember(*args):
    subprocess.run([EMBER, *args], cwd=work, check=True, stdout=subprocess.DEVNULL)


def tsv_fields(rng):
    """One Criteo TSV line's fields, without the label: 13 ints (some empty), 26 hex ids."""
    ints = [str(rng.randrange(0, 1000)) if rng.random() < 0.8 else "" for _ in range(13)]
    return ints + ["%08x" % rng.randrange(0, 1 << 32) if rng.random() < 0.95 else "" for _ in range(26)]


def model():
    tables = ",\n".join('  { name = "emb_%d"; rows = %d; dim = 16; }' % (i, r) for i, r in enumerate(ROWS))
    feats = ",\n".join('  { name = "f%d"; table = "emb_%d"; }' % (i, i) for i in range(len(ROWS)))
    rng = random.Random(11)
    with open(os.path.join(work, "train.tsv"), "w") as f:
        for _ in range(20000):
            f.write("\t".join([str(rng.randrange(2))] + tsv_fields(rng)) + "\n")
    open(os.path.join(work, "m.cfg"), "w").write('train = { steps = 50; metrics = ""; plot = ""; };\n'
                                                 'data = { source = "tsv"; train_file = "train.tsv"; };\n'
                                                 "tables = (\n%s\n);\nfeatures = (\n%s\n);\n" % (tables, feats))
    ember("train", "--config", "m.cfg", "--checkpoint-dir", "ck")
    ember("export", "ck", "b8", "--quantize", "int8")


def bodies(batch, rng):
    dense = [[rng.gauss(0, 1) for _ in range(13)] for _ in range(batch)]
    ids = [[rng.randrange(r) for _ in range(batch)] for r in ROWS]
    js = json.dumps({"dense": dense, "sparse": {"f%d" % f: ids[f] for f in range(len(ROWS))}})
    nf = len(ROWS)
    flat = [i for f in range(nf) for i in ids[f]]
    binary = (b"EMBQ" + struct.pack("<IIIIIQ", 1, batch, 13, nf, 0, len(flat))
              + struct.pack("<%df" % (batch * 13), *[x for d in dense for x in d])
              + struct.pack("<%di" % (batch * nf), *([1] * (batch * nf))) + struct.pack("<%dq" % len(flat), *flat))
    lines = [tsv_fields(rng) for _ in range(batch)]
    names = ["I%d" % (i + 1) for i in range(13)] + ["C%d" % (i + 1) for i in range(26)]
    rows = json.dumps({"rows": [{n: (int(v) if v and n[0] == "I" else v or None) for n, v in zip(names, ln)}
                                for ln in lines]})
    tsv = "".join("\t".join(ln) + "\n" for ln in lines)
    return {"json": js.encode(), "binary": binary, "rows_json": rows.encode(), "rows_tsv": tsv.encode()}


def serve(scorers, threads):
    log = open(os.path.join(work, "serve.out"), "w+")
    p = subprocess.Popen([EMBER, "serve", "b8", "--port", "0", "--scorers", str(scorers), "--threads", str(threads)],
                         cwd=work, stdout=log,
                         stderr=subprocess.DEVNULL)
    for _ in range(400):
        log.seek(0)
        m = re.search(r"http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            return p, int(m.group(1))
        time.sleep(0.05)
    sys.exit("ember serve did not start")


CONTENT_TYPE = {"json": "application/json", "binary": "application/octet-stream", "rows_json": "application/json",
                "rows_tsv": "text/tab-separated-values"}


def rss_mb(pid):
    """The process's resident memory now, in MB (VmRSS)."""
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return None


def wrk_run(port, body_file, kind, conns):
    lua = os.path.join(work, "post.lua")
    open(lua, "w").write('local f = io.open("%s", "rb")\nwrk.method = "POST"\nwrk.body = f:read("*a")\n'
                         'f:close()\nwrk.headers["Content-Type"] = "%s"\n' % (body_file, CONTENT_TYPE[kind]))
    r = subprocess.run(["wrk", "-t1", "-c%d" % conns, "-d%ds" % SECONDS, "--latency", "-s", lua,
                        "http://127.0.0.1:%d/score" % port], capture_output=True, text=True, check=True)
    out = r.stdout
    unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    pct = {p: float(v) * unit[u] for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return rps, pct.get("50"), pct.get("99"), int(non2xx.group(1)) if non2xx else 0, errors.group(1) if errors else ""


def main():
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    model()
    rng = random.Random(7)
    out = open(OUT, "w")
    for batch in (1, 64, 512):
        data = bodies(batch, rng)
        files = {}
        for kind, body in data.items():
            files[kind] = os.path.join(work, "b%d.%s" % (batch, kind))
            open(files[kind], "wb").write(body)
            if kind.startswith("rows"):  # the body must score before it is timed
                p, port = serve(1, 1)
                req = urllib.request.Request("http://127.0.0.1:%d/score" % port, data=body,
                                             headers={"Content-Type": CONTENT_TYPE[kind]})
                n = len(json.loads(urllib.request.urlopen(req).read())["scores"])
                p.terminate()
                p.wait(timeout=60)
                assert n == batch, (kind, n)
        for scorers, threads in ((1, 1), (1, 2), (2, 1)):
            for kind in data:
                p, port = serve(scorers, threads)
                conns = {1: 16, 64: 8, 512: 4}[batch]
                rps, p50, p99, bad, sockerr = wrk_run(port, files[kind], kind, conns)
                stats = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/stats" % port).read())
                rss = rss_mb(p.pid)
                p.terminate()
                p.wait(timeout=60)
                ms = stats["ms_per_request"]
                total = sum(ms.values())
                line = {"bench": "serve_load", "batch": batch, "scorers": scorers, "threads": threads, "body": kind,
                        "connections": conns, "seconds": SECONDS, "requests_per_s": rps,
                        "samples_per_s": rps * batch, "p50_ms": p50, "p99_ms": p99, "non_2xx": bad,
                        "socket_errors": sockerr, "body_bytes": len(data[kind]),
                        "mean_micro_batch": stats["batch_size"]["mean"], "server_ms": ms, "rss_mb": rss,
                        "share": {k: round(v / total, 3) if total else 0 for k, v in ms.items()},
                        "wrk": wrk_version}
                print(json.dumps(line), file=out, flush=True)
                print("batch %4d scorers %d threads %d %-9s %8.0f req/s %9.0f samples/s p50 %7.3f ms p99 %7.3f ms "
                      "micro-batch %6.1f rss %6.1f MB  decode %4.1f%% wait %4.1f%% score %4.1f%% http %4.1f%%"
                      % (batch, scorers, threads, kind, rps, rps * batch, p50, p99, stats["batch_size"]["mean"], rss,
                         100 * line["share"]["decode"], 100 * line["share"]["wait"], 100 * line["share"]["score"],
                         100 * line["share"]["http"]), flush=True)
    direct = subprocess.run([os.path.join(os.path.dirname(EMBER), "bench_serve_scorers"), os.path.join(work, "b8"),
                             str(max(1, SECONDS // 2)), "2"], capture_output=True, text=True, check=True).stdout
    for line in direct.splitlines():
        print(line, file=out, flush=True)
        print(line, flush=True)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
