"""Raw rows through Predictor.score(rows): a model trained by `ember train` through a
text schema scores rows given as dicts, as a pandas DataFrame or as the CSV text,
bit for bit as `ember predict` scores the same file (the reference), on fresh random
data every run; a missing column or a bad value raises ember.Error naming the row and
the column."""
import csv
import io
import os
import random
import subprocess

import numpy as np
import pytest

import ember

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("EMBER_CLI", os.path.join(REPO, "build", "ember"))
COLUMNS = ["y", "user", "n", "p", "h", "g", "k", "note"]

CONFIG = """data = {
  source = "text"; train_file = "train.csv"; eval_file = "eval.csv";
  schema = { format = "csv"; header = true; columns = (
    { name = "y"; type = "label"; },
    { name = "user"; type = "categorical"; encoding = "string"; table = "users"; },
    { name = "n"; type = "int"; transform = "log1p"; },
    { name = "p"; type = "float"; transform = "standardize"; },
    { name = "h"; type = "int"; transform = "clip"; min = 0.0; max = 23.0; },
    { name = "g"; type = "multi_hot"; separator = "|"; weights = true; table = "genres"; },
    { name = "k"; type = "categorical"; encoding = "int"; table = "small"; }
  ); };
};
tables = ({ name = "users"; rows = 997; dim = 8; }, { name = "genres"; rows = 61; dim = 8; },
          { name = "small"; rows = 13; dim = 8; });
model = { bottom = [16, 8]; top = [16]; };
train = { steps = 30; micro_batch = 64; metrics = ""; plot = ""; };
"""


def random_rows(rng, n):
    rows = []
    for _ in range(n):
        user = rng.choice(["u%d" % rng.randrange(400), "a,b%d" % rng.randrange(9), 'say "%d"' % rng.randrange(5), ""])
        g = "|".join(("g%d" % rng.randrange(40)) + (":%g" % rng.uniform(0.1, 2) if rng.random() < 0.5 else "")
                     for _ in range(rng.randrange(1, 4))) if rng.random() < 0.9 else ""
        rows.append({
            "y": str(rng.randrange(2)),
            "user": user,
            "n": rng.choice([str(rng.randrange(1000)), "%d.0" % rng.randrange(1000), ""]),
            "p": rng.choice(["%.6g" % rng.gauss(5, 3), repr(rng.uniform(-1, 1)), ""]),
            "h": str(rng.randrange(-3, 30)),
            "g": g,
            "k": str(rng.randrange(-50, 50)) if rng.random() < 0.9 else "",
            "note": rng.choice(["meh", "", "x,y"]),
        })
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    seed = int(os.environ.get("EMBER_TEST_SEED", str(random.randrange(1 << 30))))
    print("EMBER_TEST_SEED=%d" % seed)
    rng = random.Random(seed)
    d = tmp_path_factory.mktemp("rows")
    rows = random_rows(rng, 700)
    write_csv(d / "train.csv", random_rows(rng, 2000))
    write_csv(d / "eval.csv", rows)
    (d / "m.cfg").write_text(CONFIG)
    for args in (["train", "--config", "m.cfg", "--checkpoint-dir", "ck"],
                 ["predict", "ck", "eval.csv", "--out", "ref.f32"]):
        r = subprocess.run([CLI, *args], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    ref = np.fromfile(d / "ref.f32", dtype=np.float32)
    assert ref.shape == (700,)
    return d, rows, ref


def same(got, ref, what):
    assert got.dtype == np.float32 and got.shape == ref.shape, what
    bad = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
    assert bad.size == 0, "%s: %d of %d scores differ from ember predict's (first %d: %r, %r)" % (
        what, bad.size, ref.size, bad[0], got[bad[0]], ref[bad[0]])


def test_rows_score_as_predict_scored_the_file(model):
    d, rows, ref = model
    with ember.Predictor(str(d / "ck")) as p:
        same(p.score(rows), ref, "dicts of strings")
        typed = [{"user": r["user"] or None, "n": float(r["n"]) if r["n"] else None,
                  "p": float(r["p"]) if r["p"] else None, "h": int(r["h"]),
                  "g": r["g"].split("|") if r["g"] else [], "k": int(r["k"]) if r["k"] else None,
                  "ticket": 7} for r in rows]  # "ticket" names no column: not read
        same(p.score(typed), ref, "typed dicts")
        text = (d / "eval.csv").read_text()
        same(p.score(text), ref, "the CSV text")
        # without a header: the training file's fields in order (the model keeps its header), the
        # label's optional
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([[r[c] for c in COLUMNS] for r in rows])
        same(p.score(out.getvalue().encode()), ref, "CSV bytes without a header")
        out = io.StringIO()
        csv.writer(out, lineterminator="\r\n").writerows([[r[c] for c in COLUMNS[1:]] for r in rows])
        same(p.score(out.getvalue()), ref, "CSV without a header or the label, CRLF")
        # another batch composition: the dense model's matrix products may round the last bits
        # differently (docs/inference.md), never more than that
        some = p.score(rows[100:103])
        assert np.abs(some - ref[100:103]).max() < 1e-6, (some, ref[100:103])


def test_dataframe_scores_as_predict(model):
    pd = pytest.importorskip("pandas")  # scripts/python.sh installs it: this runs in CI
    d, rows, ref = model
    # round_trip: pandas' default float parser may round the last bit unlike strtod
    df = pd.read_csv(d / "eval.csv", float_precision="round_trip", keep_default_na=False, na_values=[""])
    with ember.Predictor(str(d / "ck")) as p:
        same(p.score(df), ref, "a DataFrame")


def test_bad_rows_are_named(model):
    d, rows, _ = model
    with ember.Predictor(str(d / "ck")) as p:
        good = dict(rows[0])
        with pytest.raises(ember.Error, match='row 1, column "h" is missing'):
            p.score([good, {c: v for c, v in good.items() if c != "h"}])
        with pytest.raises(ember.Error, match='row 0, column "n": "2.5" is not an integer'):
            p.score([dict(good, n=2.5)])
        with pytest.raises(ember.Error, match='row 0, column "k": "x" is not an integer'):
            p.score([dict(good, k="x")])
        with pytest.raises(ember.Error, match='line 3, column "p": "abc" is not a number'):
            p.score(",".join(COLUMNS) + "\n" + "\n".join(
                ",".join(['0', 'u1', '1', v, '2', 'g1', '3', '']) for v in ["1.5", "abc"]) + "\n")
        with pytest.raises(TypeError, match="each row must be a dict"):
            p.score([["0", "u1"]])


def test_predict_reads_files_without_labels_or_header(model):
    """`ember predict` of the same rows without the label column, without a header, or both, scores
    them alike (no AUC without labels); --format csv --id COLUMN names each score by that column's
    field of its line (an unlisted header field included), in file order."""
    d, rows, ref = model
    variants = {"nolabel.csv": (COLUMNS[1:], True), "noheader.csv": (COLUMNS, False),
                "neither.csv": (COLUMNS[1:], False), "nonote.csv": (COLUMNS[1:-1], True)}
    for name, (cols, header) in variants.items():
        with open(d / name, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            if header:
                w.writerow(cols)
            w.writerows([[r[c] for c in cols] for r in rows])
        r = subprocess.run([CLI, "predict", "ck", name, "--out", name + ".f32", "--json"], cwd=d, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        same(np.fromfile(d / (name + ".f32"), dtype=np.float32), ref, name)
        labeled = "y" in cols
        assert ('"labeled":true' in r.stdout) == labeled and (('"auc":null' in r.stdout) != labeled), r.stdout
    for name, column in (("eval.csv", "note"), ("neither.csv", "note"), ("noheader.csv", "y"), ("nonote.csv", "k")):
        r = subprocess.run([CLI, "predict", "ck", name, "--out", "ids.csv", "--format", "csv", "--id", column],
                           cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        got = list(csv.reader(open(d / "ids.csv", newline="")))
        assert got[0][:2] == [column, "score"] and len(got) == len(rows) + 1, got[:2]
        assert [g[0] for g in got[1:]] == [row[column] for row in rows], name
        same(np.array([float(g[1]) for g in got[1:]], dtype=np.float32), ref, name + " as CSV")
    r = subprocess.run([CLI, "predict", "ck", "neither.csv", "--out", "x.csv", "--format", "csv", "--id", "y"],
                       cwd=d, capture_output=True, text=True)
    assert r.returncode == 1 and "--id y: no such column in the file (it has no header" in r.stderr, r.stderr
    assert not (d / "x.csv").exists()
    # a file of another layout (the schema's columns without the training file's "note", no
    # header): its lines do not parse, and predict stops on the first instead of scoring none
    with open(d / "other.csv", "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([[r[c] for c in COLUMNS[:-1]] for r in rows])
    r = subprocess.run([CLI, "predict", "ck", "other.csv"], cwd=d, capture_output=True, text=True)
    assert r.returncode == 1 and "bad lines in the first" in r.stderr and "other.csv:1: field" in r.stderr, r.stderr


def test_convert_with_the_model_scores_as_the_text(model):
    """`ember convert --model` reads the text with the model's schema and the statistics of its
    training file: the binary file scores bit for bit as the CSV (a --config without statistics
    would scale by the eval file's own)."""
    d, rows, ref = model
    for args in (["convert", "--model", "ck", "eval.csv", "eval.bin"], ["predict", "ck", "eval.bin", "--out", "b.f32"]):
        r = subprocess.run([CLI, *args], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    same(np.fromfile(d / "b.f32", dtype=np.float32), ref, "the --model conversion")
    r = subprocess.run([CLI, "convert", "--model", "ck", "--config", "m.cfg", "eval.csv", "x.bin"], cwd=d,
                       capture_output=True, text=True)
    assert r.returncode == 1 and "name one" in r.stderr and not (d / "x.bin").exists(), r.stderr
