"""The benchmark seam (clsuite.core.data.sources): a benchmark added from outside ``src/`` with one yaml
file in a config directory of its own and one reader registered by name, run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clsuite import api
from clsuite.config import check as config
from clsuite.config.check import ConfigError
from clsuite.core.data import sources
from clsuite.run import io

ROOT = Path(__file__).resolve().parents[2]
FAST = ["logger=none", "trainer=cpu", "trainer.progress_bar=false"]

# A data format the suite does not know: one .npz file of uint8 images and int64 labels.
BENCH_YAML = """\
name: tiny_npz
source: {source}
n_tasks: 2
classes_per_task: 2
train_per_class: 30
backbone: mlp
iters_per_batch: 1
npz: {{file: tiny/data.npz, classes: 4, train_per_class: 40}}
"""
READER = """\
from pathlib import Path

import numpy as np

from clsuite.core.data.sources import register


@register("tiny_npz", classes="npz.classes", train_per_class="npz.train_per_class", files=lambda b: [b["npz"]["file"]])
def read_npz(root, benchmark, *, download, verify):
    with np.load(Path(root) / benchmark["npz"]["file"]) as z:
        return z["xtr"], z["ytr"], z["xte"], z["yte"]
"""


def write_data(root: Path) -> Path:
    """4 well-separated classes of 8x8 images, 40 train and 10 test samples each."""
    rng = np.random.default_rng(0)
    protos = rng.uniform(0, 1, (4, 1, 8, 8))

    def draw(n):
        y = np.repeat(np.arange(4), n)
        x = np.clip(protos[y] + 0.2 * rng.standard_normal((len(y), 1, 8, 8)), 0, 1)
        return (x * 255).astype(np.uint8), y.astype(np.int64)

    (xtr, ytr), (xte, yte) = draw(40), draw(10)
    (root / "tiny").mkdir(parents=True, exist_ok=True)
    np.savez(root / "tiny" / "data.npz", xtr=xtr, ytr=ytr, xte=xte, yte=yte)
    return root / "tiny" / "data.npz"


def conf_dir(tmp: Path, source: str) -> Path:
    d = tmp / "my_conf"
    (d / "benchmark").mkdir(parents=True, exist_ok=True)
    (d / "benchmark" / "tiny_npz.yaml").write_text(BENCH_YAML.format(source=source))
    return d


@pytest.fixture
def reader_in_this_test():
    """The reader, defined here and registered by name (removed again after the test)."""
    ns: dict = {}
    exec(READER, ns)
    yield ns["read_npz"]
    sources.SOURCES.pop("tiny_npz", None)


def test_a_benchmark_from_a_yaml_and_a_reader_outside_src(tmp_path, reader_in_this_test):
    data = tmp_path / "data"
    npz = write_data(data)
    extra = conf_dir(tmp_path, "tiny_npz")
    overrides = [f"hydra.searchpath=[file://{extra}]", "benchmark=tiny_npz", f"data.root={data}", *FAST]
    with pytest.raises(ConfigError, match="unknown benchmark 'tiny_npz'"):
        api.compose(["benchmark=tiny_npz"])  # not on the search path: not an option (Hydra refuses it)
    config.check_overrides(overrides)
    res = api.run(overrides, tmp_path / "run")
    assert np.asarray(res["R"]).shape == (2, 2) and res["benchmark"] == "tiny_npz"
    assert res["steps_per_task"] == [2 * 30 // 10] * 2  # train_per_class 30 of the file's 40, |B_t| = 10
    assert res["metrics"]["acc"] > 40  # learned (chance over the 4-way head: 25%)
    from clsuite.core.data.files import md5

    assert res["identity"]["data"] == {"files": {"tiny/data.npz": md5(npz)}}  # the data identity: the reader's file
    # the config check uses the reader's sizes: more samples per class than the data have is bad input
    with pytest.raises(ConfigError, match=r"^benchmark.train_per_class must be a whole number in \[1, 40\]"):
        api.compose([*overrides, "benchmark.train_per_class=41"])
    with pytest.raises(ConfigError, match=r"^benchmark.n_tasks must be a whole number in \[1, 2\]"):
        api.compose([*overrides, "benchmark.n_tasks=3"])


def test_the_source_is_looked_up_once_per_check_and_once_per_run(tmp_path, reader_in_this_test, monkeypatch):
    """The config check binds the benchmark's source once (its sizes, then its files; also when
    train_per_class is null and the memory rule needs the source's size), the run's build once (the
    data module reads it, the identity hashes its files): none of them looks it up again."""
    data = tmp_path / "data"
    write_data(data)
    overrides = [f"hydra.searchpath=[file://{conf_dir(tmp_path, 'tiny_npz')}]", "benchmark=tiny_npz", *FAST]
    overrides += [f"data.root={data}", "benchmark.train_per_class=null"]
    looked_up, get = [], sources.get
    monkeypatch.setattr(sources, "get", lambda source: looked_up.append(source) or get(source))
    cfg = api.compose(overrides)
    assert looked_up == ["tiny_npz"]
    res = api.run(cfg, tmp_path / "run")  # (api.run validates a composed config again: one more check)
    assert looked_up == ["tiny_npz"] * 3 and res["steps_per_task"] == [2 * 40 // 10] * 2
    assert set(res["identity"]["data"]["files"]) == {"tiny/data.npz"}


@pytest.mark.parametrize("unset", ["null", "???"])
def test_a_size_key_of_the_reader_left_unset_is_named(tmp_path, reader_in_this_test, unset):
    overrides = [f"hydra.searchpath=[file://{conf_dir(tmp_path, 'tiny_npz')}]", "benchmark=tiny_npz", *FAST]
    with pytest.raises(ConfigError, match=r"^benchmark.npz.classes is missing; benchmark.source=tiny_npz needs its "):
        api.compose([*overrides, f"data.root={tmp_path}", f"benchmark.npz.classes={unset}"])


def test_an_unknown_source_lists_the_registered_ones(tmp_path):
    extra = conf_dir(tmp_path, "nope")
    with pytest.raises(ConfigError, match=r"^unknown benchmark.source 'nope'; valid choices: MNIST, FashionMNIST"):
        api.compose([f"hydra.searchpath=[file://{extra}]", "benchmark=tiny_npz", *FAST])
    (extra / "benchmark" / "tiny_npz.yaml").write_text(BENCH_YAML.format(source="no_such_module:x"))
    with pytest.raises(ConfigError, match=r"^benchmark.source 'no_such_module:x': cannot import 'no_such_module'"):
        api.compose([f"hydra.searchpath=[file://{extra}]", "benchmark=tiny_npz", *FAST])


def test_the_cli_runs_a_benchmark_whose_reader_is_a_module_outside_src(tmp_path):
    """``--config-dir my_conf benchmark=tiny_npz``, ``source: my_readers:tiny_npz`` (imported by name)."""
    data = tmp_path / "data"
    write_data(data)
    extra = conf_dir(tmp_path, "my_readers:tiny_npz")
    (tmp_path / "my_readers.py").write_text(READER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DATA_DIR": str(data)}
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), "--config-dir", str(extra), "benchmark=tiny_npz", *FAST]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (path,) = (tmp_path / "outputs").rglob(io.RESULTS_FILE)
    res = json.loads(path.read_text())
    assert res["benchmark"] == "tiny_npz" and len(res["R"]) == 2 and "tiny_npz on" not in p.stderr
    assert f"tiny_npz: M={res['memory']} " in p.stdout


def test_a_sweep_job_hands_its_source_to_the_run(tmp_path, reader_in_this_test, monkeypatch):
    """A sweep's job looks the source up for its expected identity (skip, reuse, resume) and hands
    it to the run: one lookup in the job's process, and the run's identity is the one expected."""
    from clsuite import cli
    from clsuite.sweep.job import Job

    data = tmp_path / "data"
    write_data(data)
    overrides = [f"hydra.searchpath=[file://{conf_dir(tmp_path, 'tiny_npz')}]", "benchmark=tiny_npz", *FAST]
    cfg = api.compose([*overrides, f"data.root={data}"])
    looked_up, get = [], sources.get
    monkeypatch.setattr(sources, "get", lambda source: looked_up.append(source) or get(source))
    job = Job(cfg, tmp_path / "sweep" / "job")
    expected = job.expected()
    res = cli._train(cfg, job.out_dir, checkpoint_dir=job.checkpoint_dir, source=job.source)
    assert looked_up == ["tiny_npz"] and res["identity"]["key"] == expected["key"]
