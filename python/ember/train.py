"""ember.train: `ember train` in-process (include/ember-train.h): the same
set-up, loop, evaluation and checkpoints, the same events.  Overrides are
the command line's options with underscores (steps=300, train_file=...,
resume=True); on_event gets every event as a dict."""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional

from . import _ember
from .world import world as _world


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def train(config: Optional[str] = None, on_event: Optional[Callable[[Dict[str, Any]], None]] = None, *,
          world=None, **overrides) -> Dict[str, Any]:
    """Trains the config (None: the built-in synthetic task) and returns the
    summary (the "summary" line of `ember train --json`) as a dict.  Every
    other event (start, train, progress, eval, checkpoint, resume) goes to
    on_event as a dict; an exception it raises is raised when the run ends.
    Under mpirun every rank calls it alike (world: default ember.world())."""
    w = world if world is not None else _world()
    callback = None if on_event is None else (lambda text: on_event(json.loads(text)))
    summary = _ember.train(None if config is None else str(config),
                           {k: _text(v) for k, v in overrides.items() if v is not None}, callback, w._capsule)
    return json.loads(summary)
