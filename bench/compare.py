#!/usr/bin/env python3
"""compare.py: ember against the peer and the memory limit, interleaved in one session.

Runs, for every chosen workload x optimizer x threads, in rounds (--rounds, default 3) so that the
noise of a shared machine shows:
  ember   `ember bench` (--ember, default build/ember), one combination per process
  peer    bench/peer_torch.py (torch.nn.EmbeddingBag, sparse gradients; Debian PyTorch, run with
          /usr/bin/python3), same flags, one combination per process
  fbgemm  bench/peer_fbgemm.py when --fbgemm is given (same flags, impl "fbgemm"; run with
          .venv-fbgemm/bin/python when that venv exists)
  limits  bench_forward_limit (bench/forward_limit.c, built by CMake beside the ember binary; --forward-limit
          to name another): plain gathers shaped like the workload (same tables, batch, pooling, id law)
          over ember's own table memory, writing the real [batch x tables*dim] output, once per thread
          count; its page mode is ember's (it reports which: 4K or 2M)
Within a round the order of ember and the peer alternates from one round to the next.

--precisions fp32,fp16 (or bf16) runs ember with every table's rows in that precision (`ember bench
--precision`), FBGEMM at the same precision where it has one (fp16: SparseType.FP16 weights, stochastic
rounding), the limits over rows of that precision (bench_forward_limit --precision), and the PyTorch peer at
fp32 only. A half-precision row of the summary compares ember with FBGEMM at its own precision and with
FBGEMM fp32 of the same run.

Raw JSON lines (one file per source, each line tagged with "round") go to bench/out/*.jsonl (--out to
choose another folder; each run rewrites them); the summary table goes to stdout and summary.md beside them.
--summarize-only rebuilds the table from those files.

Examples (from the repository root):
  /usr/bin/python3 bench/compare.py --workloads W1 --optimizers none,sgd,adagrad,adam --threads 1,2
  /usr/bin/python3 bench/compare.py --workloads quick --rounds 2           # a couple of minutes
  /usr/bin/python3 bench/compare.py --workloads W1 --optimizers rowwise_adagrad --fbgemm
  /usr/bin/python3 bench/compare.py --workloads W1,W2,W3 --optimizers none,rowwise_adagrad --threads 1 \
      --precisions fp32,fp16 --fbgemm --no-peer
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(REPO, "bench", "out")
SOURCES = ("ember", "peer", "fbgemm", "limits")

# The peer's presets, plus the small shape `ember bench` runs by default.
WORKLOADS = {
    "W1": dict(tables=8, rows=1_000_000, dim=64, batch=4096, pooling=20, dist="zipf"),
    "W2": dict(tables=26, rows=100_000, dim=128, batch=2048, pooling=1, dist="zipf"),
    "W3": dict(tables=1, rows=10_000_000, dim=128, batch=8192, pooling=10, dist="uniform"),
    "quick": dict(tables=8, rows=100_000, dim=64, batch=1024, pooling=20, dist="zipf"),
}
PEER_OPTIMIZERS = {"none", "sgd", "adagrad", "adam"}  # torch has no row-wise Adagrad (peer_torch.py skips it)
TRAIN_VS_PEER = {"sgd", "adagrad", "adam"}            # the 3x target
TARGET_FWD_OF_LIMIT = 0.80
TARGET_TRAIN_VS_PEER = 3.0
TARGET_FWD_VS_FBGEMM = 1.3   # forward at 1 thread
TARGET_STEP_VS_FBGEMM = 1.5  # training step at 1 thread, for the optimizers FBGEMM's CPU TBE has
FBGEMM_STEP_OPTIMIZERS = {"sgd", "rowwise_adagrad"}
TARGET_2T_OVER_1T = 1.6
TARGET_HALF_STEP_VS_FBGEMM_FP32 = 1.5  # fp16 rows, training step at 1 thread, vs FBGEMM with fp32 weights
TARGET_HALF_STEP_VS_FBGEMM_HALF = 1.3  # ... vs FBGEMM with fp16 weights
FBGEMM_PRECISIONS = {"fp32", "fp16"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def shape_flags(wl_name, wl, alpha):
    f = ["--workload", wl_name, "--tables", str(wl["tables"]), "--rows", str(wl["rows"]), "--dim", str(wl["dim"]),
         "--batch", str(wl["batch"]), "--pooling", str(wl["pooling"]), "--dist", wl["dist"]]
    if wl["dist"] == "zipf":
        f += ["--alpha", str(alpha)]
    return f


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over interval (this script sleeps meanwhile, so: other processes' load)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v[:8]), idle
    try:
        t0, i0 = snap()
        time.sleep(interval)
        t1, i1 = snap()
    except OSError:
        return None
    return round(1.0 - (i1 - i0) / max(1, t1 - t0), 3)


def wait_for_quiet(max_wait, threshold):
    """Waits (up to max_wait s) until other processes use less than threshold of the CPUs; returns the last
    busy fraction seen."""
    t_end = time.time() + max_wait
    busy = cpu_busy()
    while busy is not None and busy > threshold and time.time() < t_end:
        busy = cpu_busy(2.0)
    return busy


def run_lines(cmd, timeout, source, rnd, sink, quiet=(0, 0.15)):
    """Runs cmd, returns its JSON lines (dicts) tagged with source, round and the CPU load of other processes
    just before (others_busy, 0..1), and appends them to sink."""
    busy = wait_for_quiet(*quiet)
    log("  $ " + " ".join(cmd) + (f"   [others busy {100 * busy:.0f}%]" if busy is not None else ""))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        out, err, rc = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"timeout after {timeout} s", -1
    except OSError as e:
        out, err, rc = "", str(e), -1
    lines = []
    for ln in out.splitlines():
        ln = ln.strip()
        if not ln.startswith("{"):
            continue
        try:
            d = json.loads(ln)
        except json.JSONDecodeError:
            continue
        d["round"] = rnd
        d["source"] = source
        d["others_busy"] = busy
        lines.append(d)
    if rc != 0 and not any("error" in d for d in lines):
        lines.append(dict(source=source, round=rnd, error=f"exit {rc}: {err.strip()[-400:]}", cmd=" ".join(cmd)))
    for d in lines:
        sink.write(json.dumps(d) + "\n")
    sink.flush()
    for d in lines:
        if "error" in d:
            log(f"  ! {source}: {d['error']}")
    return lines


def forward_limit_exe(a, ember):
    if a.forward_limit:
        return a.forward_limit if os.path.isabs(a.forward_limit) else os.path.join(REPO, a.forward_limit)
    return os.path.join(os.path.dirname(ember), "bench_forward_limit")


def fbgemm_python():
    venv = os.path.join(REPO, ".venv-fbgemm", "bin", "python")
    return venv if os.path.exists(venv) else "/usr/bin/python3"


# ------------------------------------------------------------------------------------------------ running
def run_session(a):
    os.makedirs(OUT_DIR, exist_ok=True)
    sinks = {s: open(os.path.join(OUT_DIR, f"{s}.jsonl"), "w") for s in SOURCES}
    ember = a.ember if os.path.isabs(a.ember) else os.path.join(REPO, a.ember)
    peer = os.path.join(REPO, "bench", "peer_torch.py")
    fbgemm = os.path.join(REPO, "bench", "peer_fbgemm.py")
    use_fbgemm = a.fbgemm
    limit = None if a.no_limits else forward_limit_exe(a, ember)
    if limit and not os.access(limit, os.X_OK):
        msg = f"{limit} not found: build it (cmake --build <build dir> --target bench_forward_limit)"
        log(f"note: {msg}; skipping the limits")
        sinks["limits"].write(json.dumps(dict(source="limits", error=msg)) + "\n")
        limit = None
    quiet = (a.wait_quiet, a.quiet_threshold)
    common = ["--iters", str(a.iters), "--warmup", str(a.warmup), "--seed", str(a.seed), "--lr", str(a.lr)]
    for rnd in range(a.rounds):
        for wl_name in a.workloads:
            wl = WORKLOADS[wl_name]
            shape = shape_flags(wl_name, wl, a.alpha)
            log(f"round {rnd + 1}/{a.rounds}, {wl_name}")
            for prec in a.precisions:
                for thr in (a.threads if limit else []):
                    cmd = [limit, "--workload", wl_name, "--tables", str(wl["tables"]), "--rows", str(wl["rows"]),
                           "--dim", str(wl["dim"]), "--batch", str(wl["batch"]), "--pooling", str(wl["pooling"]),
                           "--dist", wl["dist"], "--alpha", str(a.alpha), "--seed", str(a.seed),
                           "--batches", str(a.limit_batches), "--threads", str(thr), "--precision", prec]
                    run_lines(cmd, a.timeout, "limits", rnd, sinks["limits"], quiet)
            for opt in a.optimizers:
                for thr in a.threads:
                    jobs = []
                    for prec in a.precisions:
                        pf = ["--optimizer", opt, "--threads", str(thr)]
                        jobs.append(("ember", [ember, "bench"] + shape + common + pf + ["--precision", prec]))
                        if opt in PEER_OPTIMIZERS and not a.no_peer and prec == "fp32":
                            jobs.append(("peer", ["/usr/bin/python3", peer] + shape + common + pf))
                        if use_fbgemm and prec in FBGEMM_PRECISIONS:
                            jobs.append(("fbgemm", [fbgemm_python(), fbgemm] + shape + common + pf +
                                         ["--precision", prec]))
                    if rnd % 2:
                        jobs.reverse()
                    for src, cmd in jobs:
                        run_lines(cmd, a.timeout, src, rnd, sinks[src], quiet)
    for s in sinks.values():
        s.close()


# ------------------------------------------------------------------------------------------------ summary
def load(source):
    path = os.path.join(OUT_DIR, f"{source}.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip().startswith("{")]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else None


def fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def precision_of(d):
    return d.get("precision", "fp32")


def limit_rows_per_s(limits, wl, threads, prec="fp32"):
    """Median over rounds of bench_forward_limit's limit_rows_per_s (the faster of its two gathers), and the
    page modes it ran with ("2M", "4K", or both joined by "/" when the rounds disagree)."""
    per_round, pages = {}, set()
    for d in limits:
        if d.get("bench") != "forward_limit" or d.get("workload") != wl or d.get("threads") != threads or \
                precision_of(d) != prec:
            continue
        per_round[d.get("round", 0)] = d["limit_rows_per_s"]
        pages.add(d.get("pages", "?"))
    return med(list(per_round.values())), "/".join(sorted(pages)) or None


def group(lines, wl, opt, thr, prec="fp32"):
    return [d for d in lines if d.get("workload") == wl and d.get("optimizer") == opt and d.get("threads") == thr
            and precision_of(d) == prec and "ms_per_iter_median" in d]


def mark(ok):
    return "ok" if ok else "FAIL"


def summarize(a):
    ember, peer, fbg, limits = (load(s) for s in SOURCES)
    errors = [d for d in ember + peer + fbg + limits if "error" in d or "skipped" in d]
    combos = []
    for d in ember:
        if "ms_per_iter_median" not in d:
            continue
        k = (d["workload"], d["optimizer"], d["threads"], precision_of(d))
        if k not in combos:
            combos.append(k)
    order_wl = {w: i for i, w in enumerate(list(WORKLOADS) + sorted({c[0] for c in combos}))}
    order_opt = {o: i for i, o in enumerate(["none", "sgd", "adagrad", "rowwise_adagrad", "adam"])}
    order_prec = {"fp32": 0, "fp16": 1, "bf16": 2}
    combos.sort(key=lambda c: (order_wl.get(c[0], 99), order_opt.get(c[1], 99), c[2], order_prec.get(c[3], 9)))

    ember_ms = {}
    for wl, opt, thr, prec in combos:
        ember_ms[(wl, opt, thr, prec)] = med([d["ms_per_iter_median"] for d in group(ember, wl, opt, thr, prec)])

    head = ("| workload | opt | thr | rows | ember ms med [round min-max] | fwd/bwd ms | peer ms med [min-max] | peer/ember "
            "| fbgemm ms | fbgemm/ember | fbgemm fp32/ember | ember Mids/s | ember pages | % limit (limit pages) | 2T/1T "
            "| RSS MB / target | others busy | targets |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    verdicts = []
    noisy = []
    for wl, opt, thr, prec in combos:
        e = group(ember, wl, opt, thr, prec)
        p = group(peer, wl, opt, thr, prec)
        fb = group(fbg, wl, opt, thr, prec)
        fb32 = group(fbg, wl, opt, thr, "fp32")
        ems = ember_ms[(wl, opt, thr, prec)]
        esp = spread([d["ms_per_iter_median"] for d in e])
        pms = med([d["ms_per_iter_median"] for d in p])
        psp = spread([d["ms_per_iter_median"] for d in p])
        fms = med([d["ms_per_iter_median"] for d in fb])
        f32ms = med([d["ms_per_iter_median"] for d in fb32])
        ids = med([d["ids_per_s"] for d in e])
        fwd = med([d.get("fwd_ms_median") for d in e])
        bwd = med([d.get("bwd_ms_median") for d in e])
        rss = max(d["peak_rss_mb"] for d in e)
        tgt = max(d.get("target_rss_mb", 0) for d in e)
        huge = med([d.get("anon_huge_mb") for d in e]) or 0.0
        rows_mb = e[0].get("rows_bytes", 0) / 2**20
        ember_pages = "2M" if rows_mb > 0 and huge >= 0.5 * rows_mb else "4K"
        lim, lim_pages = limit_rows_per_s(limits, wl, thr, prec)
        pct = 100 * ids / lim if lim else None
        speed = pms / ems if pms else None
        fspeed = fms / ems if fms else None
        f32speed = f32ms / ems if f32ms else None
        scale = None
        if thr == 2 and (wl, opt, 1, prec) in ember_ms:
            scale = ember_ms[(wl, opt, 1, prec)] / ems

        busy = [d.get("others_busy") for d in e + p + fb + fb32 if d.get("others_busy") is not None]
        busy += [d.get("others_busy") for d in limits if d.get("workload") == wl and d.get("others_busy") is not None]
        max_busy = max(busy) if busy else None
        if max_busy is not None and max_busy > a.quiet_threshold:
            noisy.append((wl, opt, thr, prec, max_busy))

        checks = []
        if opt == "none":
            if pct is not None and lim_pages == ember_pages:
                checks.append(f"fwd {ember_pages}>=80%:{mark(pct >= 100 * TARGET_FWD_OF_LIMIT)}")
            elif pct is not None:
                checks.append(f"fwd>=80%:n/a(pages: ember {ember_pages}, limit {lim_pages})")
            if speed is not None:
                checks.append(f">=peer:{mark(speed >= 1.0)}")
            if thr == 1 and fspeed is not None:
                checks.append(f">=1.3x fbgemm:{mark(fspeed >= TARGET_FWD_VS_FBGEMM)}")
        if opt in TRAIN_VS_PEER and speed is not None:
            checks.append(f">=3x peer:{mark(speed >= TARGET_TRAIN_VS_PEER)}")
        if opt in FBGEMM_STEP_OPTIMIZERS and thr == 1 and prec == "fp32" and fspeed is not None:
            checks.append(f">=1.5x fbgemm:{mark(fspeed >= TARGET_STEP_VS_FBGEMM)}")
        if opt in FBGEMM_STEP_OPTIMIZERS and thr == 1 and prec == "fp16":
            if f32speed is not None:
                checks.append(f">=1.5x fbgemm fp32:{mark(f32speed >= TARGET_HALF_STEP_VS_FBGEMM_FP32)}")
            if fspeed is not None:
                checks.append(f">=1.3x fbgemm fp16:{mark(fspeed >= TARGET_HALF_STEP_VS_FBGEMM_HALF)}")
        if opt != "none" and scale is not None:
            checks.append(f"2T>=1.6x:{mark(scale >= TARGET_2T_OVER_1T)}")
        if tgt:
            checks.append(f"rss:{mark(rss <= tgt)}")
        verdicts += [(wl, opt, thr, prec, c) for c in checks]

        rows.append(
            f"| {wl} | {opt} | {thr} | {prec} | {fmt(ems, '.2f')} [{fmt(esp and esp[0], '.2f')}-{fmt(esp and esp[1], '.2f')}] "
            f"| {fmt(fwd, '.2f')}/{fmt(bwd, '.2f')} "
            f"| {fmt(pms, '.2f')}" + (f" [{psp[0]:.2f}-{psp[1]:.2f}]" if psp else "") +
            f" | {fmt(speed, '.2f')}{'x' if speed else ''} | {fmt(fms, '.2f')} | {fmt(fspeed, '.2f')}{'x' if fspeed else ''} "
            f"| {fmt(f32speed, '.2f')}{'x' if f32speed else ''} "
            f"| {fmt(ids and ids / 1e6, '.2f')} | {ember_pages} | {fmt(pct, '.1f')}%" +
            (f" ({lim_pages})" if lim_pages else "") +
            f" "
            f"| {fmt(scale, '.2f')} | {rss:.0f} / {tgt:.0f} | {fmt(max_busy and 100 * max_busy, '.0f')}% "
            f"| {'NOISY ' if max_busy is not None and max_busy > a.quiet_threshold else ''}{' '.join(checks)} |")

    n_rounds = len({d.get("round") for d in ember})
    torch_v = next((d.get("torch_version") for d in peer if d.get("torch_version")), "?")
    ember_v = next((d.get("ember_version") for d in ember if d.get("ember_version")), "?")
    failed = [v for v in verdicts if v[4].endswith(":FAIL")]
    ember_isa = sorted({d.get("isa") for d in ember if d.get("isa")})
    fbgemm_isa = sorted({f"{d.get('fbgemm_gpu_isa')} (torch {d.get('cpu_capability')})" for d in fbg
                         if d.get("fbgemm_gpu_isa")})
    fbgemm_v = next((d.get("fbgemm_version") for d in fbg if d.get("fbgemm_version")), None)
    md = [
        f"# ember vs peer: {datetime.datetime.now().isoformat(timespec='seconds')}",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs; ember {ember_v}, torch {torch_v}; "
        f"{n_rounds} round(s), median over rounds of each run's median iteration; [min-max] over rounds.",
        f"Kernels: ember {', '.join(ember_isa) or '?'}" +
        (f"; FBGEMM {fbgemm_v}: {', '.join(fbgemm_isa) or '?'}" if fbgemm_v else "") + ".",
        "peer = bench/peer_torch.py: torch.nn.EmbeddingBag sparse grads (SGD / Adagrad / SparseAdam). "
        "% limit = ember ids/s / bench_forward_limit limit_rows_per_s (the faster of a table-by-table and a "
        "sample-by-sample plain gather over ember's own table memory writing the real output, same threads, "
        "median over rounds); (limit pages) = the page mode the limit's table had, ember pages = ember's "
        "(2M when at least half its table bytes are in huge pages); the 80% target is only checked when "
        "they agree. rows = the tables' row precision (fp16 and bf16 with stochastic rounding; % limit then "
        "against a gather of rows of that precision); fbgemm = FBGEMM at the same precision, fbgemm fp32 = "
        "FBGEMM with fp32 weights in the same run. "
        "fwd/bwd: ember_forward / ember_backward (optimizer fused). "
        "RSS target = 1.1 x (rows + state bytes) + 256 MB. others busy = CPU used by other processes just "
        "before a run (worst of the row).",
        "",
    ] + rows + [""]
    md.append(f"Targets checked: {len(verdicts)}, failed: {len(failed)}" +
              ("" if not failed else " (" + "; ".join(f"{w} {o} {t}T {pr} {c}" for w, o, t, pr, c in failed) + ")"))
    if noisy:
        md += ["", f"WARNING: other processes used more than {100 * a.quiet_threshold:.0f}% of the CPUs just before "
               f"some runs of {len(noisy)} row(s) (column 'others busy', the worst run of the row, limits "
               "included); on a 2-vCPU machine that ruins 2-thread numbers. Re-run on a quiet machine."]
    if errors:
        md += ["", "Errors and skips:", ""]
        for d in errors:
            md.append(f"- {d.get('source')} round {d.get('round')}: {d.get('workload', '')} {d.get('optimizer', '')} "
                      f"{d.get('threads', '')}: {d.get('error') or d.get('skipped')}")
    text = "\n".join(md) + "\n"
    print(text)
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "summary.md"), "w") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ember", default="build/ember", help="the ember binary (relative to the repo root)")
    p.add_argument("--workloads", default="W1,W2,W3", help="comma list of " + ",".join(WORKLOADS))
    p.add_argument("--optimizers", default="none,sgd,adagrad,adam",
                   help="comma list of none,sgd,adagrad,rowwise_adagrad,adam")
    p.add_argument("--threads", default="1,2", help="comma list")
    p.add_argument("--precisions", default="fp32", help="comma list of fp32,fp16,bf16 (row precision)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--alpha", type=float, default=1.05)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit-batches", type=int, default=13,
                   help="bench_forward_limit --batches (3 of them warm-up)")
    p.add_argument("--forward-limit", default=None,
                   help="the bench_forward_limit binary (default: beside --ember)")
    p.add_argument("--timeout", type=int, default=900, help="seconds for one process")
    p.add_argument("--wait-quiet", type=float, default=60,
                   help="before each process, wait up to this many seconds for other load to fall below "
                        "--quiet-threshold (0: never wait)")
    p.add_argument("--quiet-threshold", type=float, default=0.15, help="fraction of all CPUs")
    p.add_argument("--fbgemm", action="store_true", help="also run bench/peer_fbgemm.py")
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--no-limits", action="store_true")
    p.add_argument("--summarize-only", action="store_true", help="rebuild the table from bench/out/*.jsonl")
    p.add_argument("--out", default=None, help="folder for the JSON lines and summary.md (bench/out)")
    a = p.parse_args()
    global OUT_DIR
    if a.out:
        OUT_DIR = os.path.abspath(a.out)
    if a.limit_batches < 4:
        p.error("--limit-batches must be >= 4")
    a.workloads = a.workloads.split(",")
    for w in a.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w}")
    a.optimizers = a.optimizers.split(",")
    a.threads = [int(t) for t in a.threads.split(",")]
    a.precisions = a.precisions.split(",")
    for pr in a.precisions:
        if pr not in ("fp32", "fp16", "bf16"):
            p.error(f"unknown precision {pr} (fp32, fp16, bf16)")
    if not a.summarize_only:
        run_session(a)
    summarize(a)


if __name__ == "__main__":
    main()
