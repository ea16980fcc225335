"""The trainer from Python: ember.train equals `ember train` (the same
library call, so the same numbers), its events and errors; a predictor on
its checkpoint scores as its evaluation did; and a PyTorch DLRM with
ember's module (examples/python/dlrm.py) reaches the C trainer's AUC."""
import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest

import ember

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("EMBER_CLI", os.path.join(REPO, "build", "ember"))


def load_example():
    spec = importlib.util.spec_from_file_location("dlrm_example", os.path.join(REPO, "examples", "python", "dlrm.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_train_equals_the_cli(tmp_path):
    events = []
    summary = ember.train(steps=60, eval_every=30, eval_samples=8192, threads=1, on_event=events.append,
                          metrics="none", plot="none")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds.count("eval") == 2 and "train" in kinds
    assert summary["event"] == "summary" and summary["steps"] == 60
    assert 0.6 < summary["auc"] < summary["teacher_auc"]
    assert os.path.exists(CLI), f"the ember CLI is needed beside the package: {CLI} (set EMBER_CLI)"
    out = subprocess.run([CLI, "train", "--steps", "60", "--eval-every", "30", "--eval-samples", "8192", "--json",
                          "--metrics", "none", "--plot", "none"], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    cli = json.loads(out.strip().splitlines()[-1])
    for k in ("auc", "logloss", "teacher_auc", "samples", "steps"):
        assert summary[k] == cli[k], k
    evals = [e for e in map(json.loads, out.splitlines()) if e["event"] == "eval"]
    assert [e["auc"] for e in evals] == [e["auc"] for e in events if e["event"] == "eval"]


def test_train_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'stepz'"):
        ember.train(stepz=3)
    with pytest.raises(ValueError, match="steps"):
        ember.train(steps="many")
    with pytest.raises(ember.Error, match="no-such.cfg"):
        ember.train("no-such.cfg")

    def fails(event):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        ember.train(steps=5, eval_samples=1024, on_event=fails, metrics="none", plot="none")


def test_train_stops_when_the_loss_diverges(tmp_path):
    cfg = tmp_path / "div.cfg"
    cfg.write_text('model = { emb_optimizer = { kind = "sgd"; lr = 1e6; }; };\n'
                   'train = { optimizer = { kind = "sgd"; lr = 1e6; }; };\n')
    with pytest.raises(ember.Error, match=r"step \d+: the training loss is nan: the model diverged"):
        ember.train(str(cfg), steps=40, eval_samples=256, metrics="none", plot="none")


def auc(scores, labels):
    return load_example().auc(scores, labels)


def test_predictor_scores_as_the_trainer_evaluated(tmp_path):
    ck = tmp_path / "ck"
    summary = ember.train(steps=40, eval_samples=4096, checkpoint_dir=str(ck), metrics="none", plot="none")
    reader = ember.Reader(eval=True)
    s = reader.next(4096)
    with ember.Predictor(str(ck)) as p:
        scores = p.score(s.dense, s.sparse)
    assert scores.shape == (4096,) and np.all((scores > 0) & (scores < 1))
    assert abs(auc(scores, s.labels) - summary["auc"]) < 1e-6
    assert abs(auc(s.teacher, s.labels) - summary["teacher_auc"]) < 1e-6
    with pytest.raises(ember.Error, match="nowhere"):
        ember.Predictor(str(tmp_path / "nowhere"))


def test_pytorch_dlrm_reaches_the_c_trainers_auc():
    """The example's PyTorch DLRM (ember's module for the tables, torch for
    the rest) and `ember train`'s built-in student, 300 steps each on the
    same batches: their held-out AUCs agree within 0.005."""
    c = ember.train(steps=300, metrics="none", plot="none")
    py = load_example().train(steps=300, threads=1)
    assert abs(py["auc"] - c["auc"]) < 0.005, (py["auc"], c["auc"])
