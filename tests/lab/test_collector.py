"""clsuite.run.runtime.collect_and_freeze: one collection, then the survivors frozen, at the start of every run."""

from __future__ import annotations

import gc
import weakref

import pytest

from clsuite.run import experiment, record, runtime
from tests.conftest import run_cfg


class Node:
    pass


def test_earlier_cycles_are_freed_and_the_survivors_frozen():
    gone = Node()
    gone.me = gone  # cyclic garbage: only the cyclic collector can free it
    ref = weakref.ref(gone)
    del gone
    kept = Node()
    kept.me = kept
    try:
        runtime.collect_and_freeze()
        assert gc.get_freeze_count() > 0
        assert ref() is None  # collected before the freeze: frozen garbage would never be freed
        assert not any(o is kept for o in gc.get_objects())  # in the permanent generation: passes skip it
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


class Built(Exception):
    pass


def test_every_run_collects_and_freezes_first(tmp_path, monkeypatch):
    calls = []

    def build(cfg, source=None):
        calls.append("built")
        raise Built

    monkeypatch.setattr(record, "collect_and_freeze", lambda: calls.append("frozen"))
    monkeypatch.setattr(experiment, "build", build)
    with pytest.raises(Built):
        run_cfg(tmp_path, "method=online")
    assert calls == ["frozen", "built"]
