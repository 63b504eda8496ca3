"""Every method config and every reading composes and trains a few steps on the synthetic stream
(issue 11, item 4). The lists are globbed from conf/, so a new method or reading is covered the
day its YAML file is added."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from omegaconf import OmegaConf

from clsuite.core.train import build
from tests.conftest import CONF_DIR, make_cfg, run_cfg

METHODS = sorted(p.stem for p in Path(CONF_DIR, "method").glob("*.yaml"))
READINGS = sorted(p.stem for p in Path(CONF_DIR, "reading").glob("*.yaml"))
REPLAYS = sorted(p.stem for p in Path(CONF_DIR, "replay").glob("*.yaml"))
UPDATES = sorted(p.stem for p in Path(CONF_DIR, "update").glob("*.yaml"))
TUNED = sorted(p.relative_to(Path(CONF_DIR, "tuned")).with_suffix("") for p in Path(CONF_DIR, "tuned").glob("*/*.yaml"))
TINY = [
    "benchmark.n_tasks=2",
    "benchmark.train_per_class=20",
    "memory=20",
    "batch_size=10",
    "replay_size=5",
]  # |R| < M: replay selects

# Keys a reading may set, each with a test in tests/core/test_options.py that fails when it is ignored.
KEYS_WITH_TESTS = {
    "memory",
    "memory_per_class",
    "batch_size",
    "replay_size",
    "replay_loss",
    "exclude_current_task",
    "candidates",
    "compare_to_old_logits",
    "scoring_updates_bn",
    "logits_on_overwrite",
    "tau",
    "lr",
    "lambda",
    "scenario",
    "eval_mask",
    "eval_split",
    "data",  # data.input_range and data.val_fraction (mir_code on the CIFAR family)
}


def test_there_are_methods_to_cover():
    assert {"adaer", "er", "mir", "gem", "icarl", "hal", "gss", "oewc", "si", "agem"} <= set(METHODS)


@pytest.mark.parametrize("method", METHODS)
def test_method_config_trains_a_few_steps(tmp_path, method):
    res = run_cfg(tmp_path, f"method={method}", *TINY)
    R = np.asarray(res["R"])
    assert R.shape == ((1, 2) if res["config"]["method"].get("joint") else (2, 2))
    assert np.isfinite(R).all() and ((R >= 0) & (R <= 100)).all()
    assert res["method"] == method
    assert all(s > 0 for s in res["steps_per_task"])
    assert all(math.isfinite(v) for v in [res["metrics"]["acc"]])


@pytest.mark.parametrize("reading", READINGS)
@pytest.mark.parametrize("method", ["adaer", "mir"])
def test_reading_trains_a_few_steps(tmp_path, reading, method):
    res = run_cfg(tmp_path, f"reading={reading}", f"method={method}", *TINY)
    assert np.isfinite(np.asarray(res["R"])).all()
    assert res.get("reading", reading) == reading


@pytest.mark.parametrize("reading", READINGS)
def test_every_key_a_reading_sets_has_an_option_test(reading):
    files = [Path(CONF_DIR, "reading", f"{reading}.yaml"), *Path(CONF_DIR, "reading_family").glob(f"{reading}_*.yaml")]
    keys = {k for f in files for k in yaml.safe_load(f.read_text()) or {}}  # its own and its per-family values
    keys -= {"defaults", "reading", "name", "cites"}  # (cites: the source lines, documentation)
    missing = {k for k in keys if k.split(".")[0] not in KEYS_WITH_TESTS}
    assert not missing, f"reading {reading} sets {sorted(missing)}: add a test to tests/core/test_options.py"
    cfg = make_cfg(f"reading={reading}")
    for k in keys:  # each key lands where the run reads it (a top-level key of the composed config)
        assert k.split(".")[0] in cfg, k


def plain_values(path: Path) -> dict:
    """A policy file's keys less those read from the reading (``${...}``)."""
    return {k: v for k, v in yaml.safe_load(path.read_text()).items() if not str(v).startswith("${")}


@pytest.mark.parametrize("replay", REPLAYS)
def test_replay_policy_config_trains_a_few_steps(tmp_path, replay):
    res = run_cfg(tmp_path, "method=er", f"replay@method.replay={replay}", *TINY)
    assert np.isfinite(np.asarray(res["R"])).all()
    own = plain_values(Path(CONF_DIR, "replay", f"{replay}.yaml"))  # its class and fixed values (task_balanced: by)
    assert {k: res["config"]["method"]["replay"][k] for k in own} == own


@pytest.mark.parametrize("update", UPDATES)
def test_update_policy_config_trains_a_few_steps(tmp_path, update):
    res = run_cfg(tmp_path, "method=er", f"update@method.update={update}", *TINY)
    assert np.isfinite(np.asarray(res["R"])).all()
    own = plain_values(Path(CONF_DIR, "update", f"{update}.yaml"))
    assert {k: res["config"]["method"]["update"][k] for k in own} == own


def flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


@pytest.mark.parametrize("tuned", TUNED, ids=str)
def test_tuned_values_reach_the_composed_method(tuned):
    """conf/tuned/<method>/<benchmark>.yaml: its values replace the method's defaults for that benchmark only."""
    method, benchmark = tuned.parts
    values = dict(flat(yaml.safe_load(Path(CONF_DIR, "tuned", f"{tuned}.yaml").read_text())))
    cfg = make_cfg(f"method={method}", f"benchmark={benchmark}")
    other = make_cfg(f"method={method}")  # the synthetic benchmark: no tuned file
    for key, value in values.items():
        assert OmegaConf.select(cfg, key) == value, key
    assert any(OmegaConf.select(other, k) != v for k, v in values.items())


@pytest.mark.parametrize("update", UPDATES)
def test_update_policy_keeps_the_memory_contract(update):
    """Seam contract (clsuite.core.memory.base): every offered sample counts in ``seen``, the memory never
    exceeds M, and every stored (x, y, t) is one of the offered samples."""
    dm, learner, _ = build(
        make_cfg("method=er", f"update@method.update={update}", "memory=15", "memory_per_class=false", "batch_size=10")
    )
    mem, policy = learner.memory, learner.update_policy
    offered = []
    for task in range(2):
        dm.set_task(task)
        learner.start_task(task)
        for x, y, t in list(dm.train_dataloader())[:6]:
            policy.update(mem, x, y, t, learner)
            offered.append((x, y, t))
            assert mem.size <= mem.capacity == 15
        policy.on_task_end(mem, learner)
    assert mem.seen == sum(len(y) for _, y, _ in offered) == 120
    assert 0 < mem.size <= 15
    xs, ys, ts = (torch.cat(a) for a in zip(*offered, strict=True))
    for i in range(mem.size):
        match = (xs == mem.x[i]).flatten(1).all(1) & (ys == mem.y[i]) & (ts == mem.t[i])
        assert match.any(), f"slot {i} holds a sample that was never offered"
