#!/usr/bin/env python3
"""serve_framing.py: the bytes `ember serve` sends back, read off a raw socket, for every
status it can answer. Run by CTest (test `serve_framing`) as
    python3 tests/serve_framing.py path/to/ember

Every answer must be exactly one HTTP response: one status line, well-formed header lines,
one Content-Length that the body matches to the byte, and nothing after the body (read until
the server closes, or, on a connection it keeps open, for a while after the body ends). A
JSON answer must parse; an error's is {"error": reason}. An answer that closes its
connection says `Connection: close`. After each bad request, a good one on a new
connection must still be scored, with the same scores as before.

The requests: scoring (JSON, binary, chunked, with Expect: 100-continue), /health, /model,
/stats and HEAD; each client mistake the decoder names (400); more samples than one request
may hold (400); another path (404) or method (405); a body over --max-body by Content-Length
or while streaming (413); Content-Length values that are not a number of bytes (400), that
do not fit 64 bits (413), or two different ones (400); a header line without a colon (400);
a broken chunked body (400); headers larger than the server keeps (431); request lines
libmicrohttpd cannot read (its own answer, or none); and /health while draining after
SIGTERM (503).
Standard library only.
"""
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

EMBER = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="ember-serve-framing-")
ROWS = 1000
MAX_BODY = 100000
MAX_SAMPLES = 8
FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL:", what, flush=True)
    return cond


def run(*args):
    r = subprocess.run([EMBER, *args], cwd=TMP, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("ember %s failed (%d):\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))


def tsv_lines(rng, n):
    lines = []
    for _ in range(n):
        ints = [str(rng.randrange(0, 1000)) if rng.random() < 0.8 else "" for _ in range(13)]
        cats = ["%x" % rng.randrange(0, 1 << 32) if rng.random() < 0.9 else "" for _ in range(26)]
        lines.append("\t".join([str(rng.randrange(2))] + ints + cats))
    return "\n".join(lines) + "\n"


def start_server(*args):
    out = open(os.path.join(TMP, "serve.out"), "w+")
    err = open(os.path.join(TMP, "serve.err"), "w+")
    proc = subprocess.Popen([EMBER, "serve", "b8", "--port", "0", *args], cwd=TMP, stdout=out, stderr=err)
    for _ in range(300):
        out.seek(0)
        line = out.readline()
        if "http://" in line:
            return proc, int(line.split("http://127.0.0.1:")[1].split()[0]), err
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    err.seek(0)
    sys.exit("ember serve did not start: " + err.read())


class Framed:
    """One HTTP response parsed from raw bytes; problems lists what is wrong with its framing."""

    def __init__(self, raw, head_only=False, interim_ok=False):
        self.raw, self.problems = raw, []
        self.status, self.headers, self.body, self.extra = None, {}, b"", b""
        data = raw
        if interim_ok and data.startswith(b"HTTP/1.1 100 "):
            end = data.find(b"\r\n\r\n")
            data = data[end + 4:] if end >= 0 else b""
        end = data.find(b"\r\n\r\n")
        if end < 0:
            self.problems.append("no complete header section")
            return
        lines = data[:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) != 3 or parts[0] != b"HTTP/1.1" or not (len(parts[1]) == 3 and parts[1].isdigit()):
            self.problems.append("bad status line %r" % lines[0])
            return
        self.status = int(parts[1])
        counts = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or not all(33 <= c <= 126 for c in name) or b"\r" in value or b"\n" in value:
                self.problems.append("bad header line %r" % line)
                continue
            key = name.decode("ascii").lower()
            counts[key] = counts.get(key, 0) + 1
            self.headers[key] = value.strip().decode("latin-1")
        if counts.get("content-length") != 1:
            self.problems.append("%d Content-Length headers" % counts.get("content-length", 0))
            return
        if "transfer-encoding" in self.headers:
            self.problems.append("Transfer-Encoding %r" % self.headers["transfer-encoding"])
        cl = self.headers["content-length"]
        if not cl.isdigit():
            self.problems.append("Content-Length %r" % cl)
            return
        n = 0 if head_only else int(cl)
        rest = data[end + 4:]
        self.body, self.extra = rest[:n], rest[n:]
        if len(self.body) < n:
            self.problems.append("body of %d bytes, Content-Length %d" % (len(self.body), n))
        if self.extra:
            self.problems.append("%d bytes after the body: %r" % (len(self.extra), self.extra[:80]))
        if b"HTTP/1." in self.body:
            self.problems.append("a status line inside the body")


def framed_length(raw, head_only, interim_ok):
    """The bytes of the first whole response in raw (after a 100 Continue, when allowed), or None."""
    at = 0
    if interim_ok and raw.startswith(b"HTTP/1.1 100 "):
        e = raw.find(b"\r\n\r\n")
        if e < 0:
            return None
        at = e + 4
    e = raw.find(b"\r\n\r\n", at)
    if e < 0:
        return None
    n = 0
    for line in raw[at:e].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            n = int(value.strip())
    return e + 4 + (0 if head_only else n)


def exchange(port, pieces, head_only=False, interim_ok=False, sock=None, linger=0.3, timeout=10):
    """Sends pieces (bytes, or a callable given what was read so far that returns bytes to send)
    and reads until the server closes, or, when it keeps the connection, linger seconds past
    the end of the first framed answer. Returns (raw bytes, closed by the server, the socket)."""
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got, closed = b"", False
    for p in pieces:
        try:
            if callable(p):
                got = p(s, got)
            else:
                s.sendall(p)
        except (BrokenPipeError, ConnectionResetError):
            break
    deadline = time.time() + timeout
    while time.time() < deadline:
        n = framed_length(got, head_only, interim_ok)
        if n is not None and len(got) >= n:
            # whole: anything more must not come (a connection the server closes ends soon)
            s.settimeout(linger)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            if n is not None and len(got) >= n:
                break
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        got += chunk
    s.settimeout(timeout)
    return got, closed, s


def request_bytes(method, path, body=b"", headers=None, length=True):
    h = {"Host": "127.0.0.1"}
    h.update(headers or {})
    if length and "Content-Length" not in h and "Transfer-Encoding" not in h and (body or method == "POST"):
        h["Content-Length"] = str(len(body))
    head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def verify(what, raw, closed, status, json_body=True, needle=None, head_only=False, interim_ok=False,
           must_close=False, error=None, ctype=None):
    """The checks every answer gets; returns the parsed response (or None)."""
    f = Framed(raw, head_only, interim_ok)
    if not check(not f.problems, "%s: framing: %s; raw %r" % (what, "; ".join(f.problems), raw[:400])):
        return None
    check(f.status == status, "%s: status %s, want %d; raw %r" % (what, f.status, status, raw[:300]))
    if must_close:
        check(closed, "%s: the server did not close the connection" % what)
        check(f.headers.get("connection", "").lower() == "close", "%s: no Connection: close" % what)
    elif f.headers.get("connection", "").lower() == "close":
        check(closed, "%s: Connection: close, but the connection stayed open" % what)
    if ctype:
        check(f.headers.get("content-type") == ctype, "%s: Content-Type %r" % (what, f.headers.get("content-type")))
    if head_only or not json_body:
        return f
    check(f.headers.get("content-type") == "application/json", "%s: Content-Type %r, want application/json"
          % (what, f.headers.get("content-type")))
    try:
        doc = json.loads(f.body)
    except ValueError:
        check(False, "%s: the body is not JSON: %r" % (what, f.body[:200]))
        return None
    if error is None:
        error = status >= 400
    if error:
        msg = doc.get("error") if isinstance(doc, dict) else None
        check(isinstance(msg, str) and len(doc) == 1 and msg,
              "%s: the body is not {\"error\": reason}: %r" % (what, f.body[:200]))
        if needle and isinstance(msg, str):
            check(needle in msg, "%s: %r does not say %r" % (what, msg, needle))
    f.doc = doc
    return f


def main():
    seed = int(os.environ.get("EMBER_TEST_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    print("EMBER_TEST_SEED=%d tmp %s" % (seed, TMP), flush=True)
    open(os.path.join(TMP, "train.tsv"), "w").write(tsv_lines(rng, 300))
    open(os.path.join(TMP, "m.cfg"), "w").write(
        'tables = ({ name = "c%%d"; count = 26; rows = %d; dim = 8; });\n'
        'features = ({ name = "f%%d"; count = 26; table = "c%%d"; });\n'
        'data = { batch_size = 64; source = "tsv"; train_file = "train.tsv"; };\n'
        'train = { steps = 5; micro_batch = 64; metrics = ""; plot = ""; };\n' % ROWS)
    run("train", "--config", "m.cfg", "--checkpoint-dir", "ck")
    run("export", "ck", "b8", "--quantize", "int8")
    proc, port, err = start_server("--max-body", str(MAX_BODY), "--max-request-samples", str(MAX_SAMPLES))

    raw, closed, _ = exchange(port, [request_bytes("GET", "/model")])
    model = verify("GET /model", raw, closed, 200)
    names = [f["name"] for f in model.doc["features"]]
    n = 4
    dense = [[round(rng.uniform(0, 3), 3) for _ in range(13)] for _ in range(n)]
    bags = [[[rng.randrange(ROWS) for _ in range(rng.randrange(3))] for _ in range(n)] for _ in names]
    good = json.dumps({"dense": dense, "sparse": dict(zip(names, bags))}).encode()
    binary = (b"EMBQ" + struct.pack("<IIIIIQ", 1, n, 13, len(names), 0, sum(len(b) for f in bags for b in f))
              + struct.pack("<%df" % (13 * n), *[x for row in dense for x in row])
              + struct.pack("<%di" % (len(names) * n), *[len(b) for f in bags for b in f])
              + b"".join(struct.pack("<q", i) for f in bags for b in f for i in b))
    json_hdr = {"Content-Type": "application/json"}

    raw, closed, _ = exchange(port, [request_bytes("POST", "/score", good, json_hdr)])
    first = verify("POST /score (JSON)", raw, closed, 200, error=False)
    ref = first.doc["scores"]
    check(len(ref) == n and all(isinstance(x, float) for x in ref), "%d scores: %r" % (n, ref))

    def still_scores(after):  # on a new connection, closed after the answer
        raw, closed, _ = exchange(port, [request_bytes("POST", "/score", good, dict(json_hdr, Connection="close"))])
        f = verify("a good request after %s" % after, raw, closed, 200, error=False, must_close=True)
        if f is not None:
            check(f.doc["scores"] == ref, "after %s: scores %r, before %r" % (after, f.doc["scores"], ref))

    # 200s
    raw, closed, _ = exchange(port, [request_bytes("POST", "/score", binary,
                                                   {"Content-Type": "application/octet-stream"})])
    f = verify("POST /score (binary)", raw, closed, 200, json_body=False, ctype="application/octet-stream")
    if f is not None:
        check(len(f.body) == 4 * n and max(abs(a - b) for a, b in zip(struct.unpack("<%df" % n, f.body), ref))
              < 1e-6, "binary scores %r, JSON %r" % (f.body, ref))
    chunks = [good[i:i + 50] for i in range(0, len(good), 50)]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    raw, closed, _ = exchange(port, [request_bytes("POST", "/score", chunked,
                                                   dict(json_hdr, **{"Transfer-Encoding": "chunked"}))])
    f = verify("POST /score (chunked)", raw, closed, 200, error=False)
    check(f is not None and f.doc["scores"] == ref, "chunked scores")

    def after_continue(s, got):  # waits for 100 Continue, then sends the body
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        check(got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "Expect: 100-continue: %r" % got[:80])
        s.sendall(good)
        return got

    raw, closed, _ = exchange(port, [request_bytes("POST", "/score", b"", dict(
        json_hdr, **{"Content-Length": str(len(good)), "Expect": "100-continue"})), after_continue],
        interim_ok=True)
    f = verify("POST /score (Expect: 100-continue)", raw, closed, 200, interim_ok=True, error=False)
    check(f is not None and f.doc["scores"] == ref, "100-continue scores")
    for path in ("/health", "/model", "/stats"):
        raw, closed, _ = exchange(port, [request_bytes("GET", path)])
        verify("GET " + path, raw, closed, 200, error=False)
    raw, closed, _ = exchange(port, [request_bytes("HEAD", "/health")])
    verify("HEAD /health", raw, closed, 200, head_only=True)

    # 4xx from ember's own checks
    wrong = json.loads(good)
    wrong["sparse"][names[3]][1] = [ROWS]
    many = json.dumps({"dense": [dense[0]] * (MAX_SAMPLES + 1),
                       "sparse": {nm: [[1]] * (MAX_SAMPLES + 1) for nm in names}}).encode()
    mistakes = [
        ("malformed JSON", "POST", "/score", b'{"dense": [[1, 2', json_hdr, 400, "JSON: line 1"),
        ("an unknown feature", "POST", "/score", json.dumps(dict(json.loads(good), nope=1)).encode(), json_hdr,
         400, "nope"),
        ("an id out of range", "POST", "/score", json.dumps(wrong).encode(), json_hdr, 400,
         "id %d outside [0, %d)" % (ROWS, ROWS)),
        ("a truncated binary body", "POST", "/score", binary[:-3], {"Content-Type": "application/octet-stream"},
         400, "binary body"),
        ("too many samples", "POST", "/score", many, json_hdr, 400, "more than one request may hold (%d)"
         % MAX_SAMPLES),
        ("an unknown path", "GET", "/nowhere", b"", {}, 404, "no such endpoint"),
        ("GET /score", "GET", "/score", b"", {}, 405, "POST"),
        ("POST /health", "POST", "/health", b"", {}, 405, "GET only"),
        ("a streamed body over --max-body", "POST", "/score", b"".join(
            b"%x\r\n%s\r\n" % (20000, b"x" * 20000) for _ in range(6)) + b"0\r\n\r\n",
         dict(json_hdr, **{"Transfer-Encoding": "chunked"}), 413, "larger than this server takes (%d bytes"
         % MAX_BODY),
    ]
    for what, method, path, body, headers, status, needle in mistakes:
        raw, closed, _ = exchange(port, [request_bytes(method, path, body, headers)])
        f = verify(what, raw, closed, status, needle=needle)
        if f is not None and status == 405:
            check(f.headers.get("allow"), "%s: no Allow header" % what)
        still_scores(what)

    # Content-Length: over --max-body (answered before the body), not a number, not 64 bits
    too_large = "larger than this server takes (%d bytes; --max-body)" % MAX_BODY
    lengths = [
        ("%d" % (MAX_BODY + 1), 413, too_large),
        ("18446744073709551615", 413, too_large),
        ("99999999999999999999999", 413, too_large),
        ("abc", 400, "Content-Length \"abc\" is not"),
        ("-5", 400, "Content-Length \"-5\" is not"),
        ("+5", 400, "Content-Length \"+5\" is not"),
        ("0x10", 400, "Content-Length \"0x10\" is not"),
        ("1.5", 400, "Content-Length \"1.5\" is not"),
        ("", 400, "Content-Length \"\" is not"),
    ]
    for value, status, needle in lengths:
        for body in (b"", b'{"dense": []}'):
            what = "Content-Length %r%s" % (value, " and a body" if body else "")
            raw, closed, _ = exchange(port, [request_bytes("POST", "/score", body, dict(
                json_hdr, **{"Content-Length": value}))])
            verify(what, raw, closed, status, needle=needle, must_close=True)
            still_scores(what)
    # Content-Length twice: different values are refused before the body is read; the same value is one
    def twice(a, b, body):
        return (b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %s\r\n"
                b"Content-Length: %s\r\n\r\n%s" % (a, b, body))
    for a, b in [(b"%d" % len(good), b"abc"), (b"%d" % len(good), b"%d" % (len(good) - 1)), (b"-5", b"7")]:
        what = "Content-Length %s and %s" % (a.decode(), b.decode())
        raw, closed, _ = exchange(port, [twice(a, b, good)])
        verify(what, raw, closed, 400, must_close=True, needle="Content-Length given twice" if a != b"-5"
               else "Content-Length \"-5\" is not")
        still_scores(what)
    raw, closed, _ = exchange(port, [twice(b"%d" % len(good), b"%d" % len(good), good)])
    f = verify("the same Content-Length twice", raw, closed, 200, error=False)
    check(f is not None and f.doc["scores"] == ref, "the same Content-Length twice: scores")

    # a bad one after a good one on a kept-alive connection: two whole answers, then closed
    sock = None
    raw, closed, sock = exchange(port, [request_bytes("POST", "/score", good, json_hdr)])
    verify("kept alive: first, a good request", raw, closed, 200, error=False)
    check(not closed, "kept alive: the connection stays open after a 200")
    raw, closed, _ = exchange(port, [request_bytes("POST", "/score", b"", dict(json_hdr, **{"Content-Length": "-5"}))],
                              sock=sock)
    verify("kept alive: then Content-Length -5", raw, closed, 400, needle="Content-Length \"-5\"", must_close=True)
    sock.close()
    still_scores("Content-Length -5 on a kept-alive connection")

    # what libmicrohttpd refuses before ember sees the request
    protocol = [
        ("a header line without a colon", b"POST /score HTTP/1.1\r\nHost: x\r\nNo colon here\r\nContent-Length: 2"
         b"\r\n\r\n{}", 400, "syntactically incorrect"),
        ("a broken chunked body", b"POST /score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"ZZ\r\nabc\r\n0\r\n\r\n", 400, "chunked encoding"),
        ("headers of 40 kB", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", 431,
         "too big"),
    ]
    for what, req, status, needle in protocol:
        raw, closed, _ = exchange(port, [req])
        verify(what, raw, closed, status, needle=needle, must_close=True)
        still_scores(what)
    # a first request line libmicrohttpd cannot read: it answers before any request exists for ember
    # to answer (no connection is known to it yet), with its own HTML page: still one whole answer
    for what, req, status in [("a request line with no version", b"NOT HTTP\r\n\r\n", 400),
                              ("HTTP/2.0 in a request line", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505)]:
        raw, closed, _ = exchange(port, [req])
        verify(what, raw, closed, status, json_body=False, must_close=True)
        still_scores(what)
    raw, closed, _ = exchange(port, [b"GARBAGE\r\n\r\n"])
    check(raw == b"" and closed, "a request line of one word: closed without an answer: %r" % raw[:200])
    still_scores("a request line of one word")
    # the same on a kept-alive connection, after a good request: ember's JSON answer
    raw, closed, _ = exchange(port, [request_bytes("GET", "/health") + b"NOT HTTP\r\n\r\n"])
    end = framed_length(raw, False, False) or 0
    verify("kept alive: GET /health", raw[:end], False, 200, error=False)
    verify("kept alive: then a request line with no version", raw[end:], closed, 400,
           needle="syntactically incorrect", must_close=True)

    # 503: /health on a kept-alive connection once the drain has begun (a request held open keeps it going)
    raw, closed, keep = exchange(port, [request_bytes("GET", "/health")])
    verify("GET /health before SIGTERM", raw, closed, 200, error=False)
    slow = socket.create_connection(("127.0.0.1", port), timeout=10)
    slow.sendall(request_bytes("POST", "/score", good, json_hdr)[:-10])
    for _ in range(200):
        raw, closed, _ = exchange(port, [request_bytes("GET", "/stats")])
        f = Framed(raw)
        if not f.problems and json.loads(f.body)["in_flight"] >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    for _ in range(200):
        err.seek(0)
        if "draining" in err.read():
            break
        time.sleep(0.05)
    time.sleep(0.2)
    raw, closed, _ = exchange(port, [request_bytes("GET", "/health")], sock=keep)
    f = verify("GET /health while draining", raw, closed, 503, must_close=True, error=False)
    check(f is not None and f.doc == {"status": "draining"}, "draining: %r" % (f and f.body))
    slow.sendall(request_bytes("POST", "/score", good, json_hdr)[-10:])
    raw, closed, _ = exchange(port, [], sock=slow)
    f = verify("the request in flight at SIGTERM", raw, closed, 200, error=False)
    check(f is not None and f.doc["scores"] == ref, "in flight: scores")
    rc = proc.wait(timeout=60)
    check(rc == 0, "exit 0 after the drain (%d)" % rc)

    print("%d checks failed" % len(FAILED) if FAILED else "all checks passed", flush=True)
    if FAILED:
        err.seek(0)
        print("--- last lines of the server's stderr:\n" + "".join(err.readlines()[-20:]), flush=True)
    else:
        subprocess.run(["rm", "-rf", TMP])
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
