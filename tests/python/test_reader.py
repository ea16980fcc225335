"""ember.Reader: the samples of a text file read by its schema equal those
of its binary conversion (`ember convert`), sample for sample; the built-in
task's first batches are the trainer's; bad input names file and line."""
import gzip
import os
import shutil
import subprocess

import numpy as np
import pytest

import ember

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("EMBER_CLI", os.path.join(REPO, "build", "ember"))
DATA = os.path.join(REPO, "examples", "data")


def read_all(reader, batch):
    """(labels, dense, lengths [F, N], values and weights by feature): the
    same whatever the batch size."""
    parts = list(reader.batches(batch))
    assert parts, "no samples"
    F = len(reader.features)
    values, weights = [[] for _ in range(F)], [[] for _ in range(F)]
    for p in parts:
        lengths = np.asarray(p.sparse.lengths).reshape(F, -1)
        ends = np.cumsum(lengths.sum(axis=1))
        for f in range(F):
            lo = ends[f - 1] if f else 0
            values[f].append(np.asarray(p.sparse.values)[lo:ends[f]])
            if p.sparse.weights is not None:
                weights[f].append(np.asarray(p.sparse.weights)[lo:ends[f]])
    return (np.concatenate([p.labels for p in parts]), np.concatenate([p.dense for p in parts]),
            np.concatenate([np.asarray(p.sparse.lengths).reshape(F, -1) for p in parts], axis=1),
            [np.concatenate(v) for v in values], [np.concatenate(w) if w else None for w in weights])


def test_text_equals_its_binary_conversion(tmp_path):
    cfg = os.path.join(DATA, "movies.cfg")
    for f in ("movies.cfg", "movies.csv", "movies_eval.csv"):
        shutil.copy(os.path.join(DATA, f), tmp_path / f)
    subprocess.run([CLI, "convert", "--config", str(tmp_path / "movies.cfg"), str(tmp_path / "movies_eval.csv"),
                    str(tmp_path / "eval.bin")], check=True, capture_output=True)
    text = ember.Reader(cfg, path=os.path.join(DATA, "movies_eval.csv"), eval=True)
    binary = ember.Reader(cfg, path=str(tmp_path / "eval.bin"), eval=True)
    assert text.features == binary.features and text.num_dense == binary.num_dense == 3  # age, price, hour
    a, b = read_all(text, 37), read_all(binary, 64)
    labels, dense, lengths, values, weights = a
    np.testing.assert_array_equal(labels, b[0])
    np.testing.assert_array_equal(dense, b[1])
    np.testing.assert_array_equal(lengths, b[2])
    for f in range(len(values)):
        np.testing.assert_array_equal(values[f], b[3][f])
        if weights[f] is not None or b[4][f] is not None:
            np.testing.assert_array_equal(weights[f], b[4][f])
    assert lengths.sum() == sum(len(v) for v in values) and len(labels) > 100
    assert np.all((labels == 0) | (labels == 1))


def test_builtin_task_and_shares():
    whole = ember.Reader().next(64)
    assert whole.teacher is not None and whole.dense.shape == (64, 13)
    halves = [ember.Reader(world=ember.World(rank=r, size=2)).next(32) for r in (0, 1)]
    # the synthetic stream's global sample k goes to rank k's share: the two
    # halves together are the first 64 samples
    got = np.sort(np.concatenate([h.teacher for h in halves]))
    np.testing.assert_array_equal(got, np.sort(whole.teacher))


def test_errors_name_the_file_and_line(tmp_path):
    cfg = tmp_path / "bad.cfg"
    cfg.write_text(open(os.path.join(DATA, "movies.cfg")).read().replace("shuffle = true;", "bad_lines = \"fail\";"))
    (tmp_path / "movies.csv").write_text("clicked,user,age,gender,price,hour,genres,comment\n"
                                         "0,u1,30,Female,1.0,3,Drama,x\n"
                                         "1,u2,old,Male,2.0,4,Drama,y\n")
    r = ember.Reader(str(cfg))
    with pytest.raises(ember.Error, match=r"movies.csv:3: field 2 \(age\)"):
        r.next(16)
    with pytest.raises(ember.Error, match="no-such-file.csv"):
        ember.Reader(str(cfg), path=str(tmp_path / "no-such-file.csv"))
    # shuffled text reads in blocks of 4,096 lines; a gzip file cannot be, and says why
    with open(os.path.join(DATA, "movies.csv"), "rb") as f:
        (tmp_path / "movies.csv.gz").write_bytes(gzip.compress(f.read()))
    gz = tmp_path / "gz.cfg"
    gz.write_text(open(os.path.join(DATA, "movies.cfg")).read().replace('"movies.csv"', '"movies.csv.gz"')
                  .replace('"movies_eval.csv"', '"%s"' % os.path.join(DATA, "movies_eval.csv")))
    with pytest.raises(ember.Error, match="movies.csv.gz: a gzip file cannot be shuffled"):
        ember.Reader(str(gz))
    # a CSV without a config is not read as Criteo TSV (every line a bad one): refused, with the way out
    with pytest.raises(ember.Error, match=r"movies.csv: not a Criteo TSV .*a CSV\?.*data.schema"):
        ember.Reader(path=os.path.join(DATA, "movies.csv"))


def test_threads_share_a_reader_safely():
    """Threads on one reader: each call either runs alone or raises 'in
    use'; every batch that comes back is whole (lengths add up to its ids)."""
    import threading
    r = ember.Reader(world=ember.World())
    bad, busy, good = [], [], []

    def work():
        for _ in range(30):
            try:
                s = r.next(8192)
            except ember.Error as e:
                (busy if "in use" in str(e) or "closed" in str(e) else bad).append(str(e))
                continue
            (good if np.asarray(s.sparse.lengths).sum() == len(s.sparse.values) else bad).append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad and good, (bad[:3], len(good))
    r.close()
    with pytest.raises(ember.Error, match="closed"):
        r.next(1)
