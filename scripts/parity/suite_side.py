"""The suite's side of a parity run: its config, the materials the reference is driven with (split,
initial weights, batches, read from the suite itself), and its own R and Acc, trained or read from a record's
sealed run of the same cell (docs/notes/PARITY.md, "Making the record", "MIR's code"). Nothing here imports
the reference: tests run it on synthetic data (tests/analysis/test_parity.py, test_parity_mir.py).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from omegaconf import OmegaConf

from clsuite import api
from clsuite.analysis.load import flat_config, load_experiment
from clsuite.core.errors import ConfigError
from clsuite.core.train import build
from clsuite.run import archive as rec
from clsuite.run.experiment import run_experiment

THREADS = ["trainer.threads=1", "logger=none", "trainer.progress_bar=false"]


def compose(method: str, benchmark: str, seed: int, reading: str = "mir_code", extra=()):
    """The suite's config of one parity cell (validated as the CLI validates it)."""
    return api.compose([f"reading={reading}", f"method={method}", f"benchmark={benchmark}", f"seed={seed}",
                        *THREADS, *extra])  # fmt: skip


@dataclass
class Task:
    classes: list[int]
    train: tuple[torch.Tensor, torch.Tensor]  # x [n, *shape] in [0, 1], y [n]
    test: tuple[torch.Tensor, torch.Tensor]
    batches: list[tuple[torch.Tensor, torch.Tensor]]  # the suite's stream of this task, in order


@dataclass
class Materials:
    cfg: object
    tasks: list[Task]
    init: dict[str, torch.Tensor]  # the suite network's initial state_dict
    memory_capacity: int  # M in slots (per class x classes under memory_per_class)
    batch_size: int
    replay_size: int
    lr: float
    num_classes: int
    extra: dict = field(default_factory=dict)


def materials(cfg) -> Materials:
    """Samples, initial weights and batches of ``cfg``'s run, from the suite's own data module and net."""
    dm, learner, _ = build(cfg)
    tasks = []
    for k in range(dm.n_tasks):
        dm.set_task(k)
        x, y, _ = dm.split(k, "train")
        batches = [(bx.clone(), by.clone()) for bx, by, _ in dm.train_dataloader()]
        tasks.append(Task(dm.tasks[k].classes, (x.clone(), y.clone()), dm.split(k, "test")[:2], batches))
    return Materials(
        cfg=cfg,
        tasks=tasks,
        init={k: v.detach().clone() for k, v in learner.net.state_dict().items()},
        memory_capacity=learner.memory.capacity,
        batch_size=int(cfg.batch_size),
        replay_size=int(learner.replay_size),
        lr=float(learner.lr),
        num_classes=dm.num_classes,
    )


def suite_acc(cfg, out_dir: str | Path | None = None) -> dict:
    """The suite's run of ``cfg``: {"acc": final Acc, "R": R, "b": b}."""
    with tempfile.TemporaryDirectory() as tmp:
        res = run_experiment(cfg, Path(out_dir or tmp))
    return {"acc": float(res["metrics"]["acc"]), "R": res["R"], "b": res["b"]}


def recorded_runs(records: Path, experiment: str) -> pd.DataFrame:
    """The runs of the record ``experiment`` in the records folder ``records``, read with every check of
    ``clsuite.run.archive`` (the manifest's sha256 of each archive, each member)."""
    manifest = rec.read_manifest(Path(records))[0]
    if experiment not in manifest["archives"]:
        raise ConfigError(f"--suite-from {experiment}: no such record in {records} "
                          f"(it holds {', '.join(sorted(manifest['archives']))})")  # fmt: skip
    data = rec.verified(Path(records), manifest)[experiment]
    with tempfile.TemporaryDirectory() as tmp:
        rec.unpack(data, str(Path(records) / manifest["archives"][experiment]["file"]), Path(tmp) / experiment)
        return load_experiment(Path(tmp) / experiment).runs


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def recorded(runs: pd.DataFrame, cfg, experiment: str) -> dict:
    """The suite's side of ``cfg``'s cell from its sealed run in ``runs`` (of the record ``experiment``):
    {"acc", "R", "from": the record, job, code, commit, CPU and kernels of the run}. Its settings must be
    ``cfg``'s, every key of the run's config (its kernels aside: the run names its own); ``ConfigError``
    when no run of the cell at ``cfg``'s seed has them."""
    want = {k: v for k, v in flat_config(OmegaConf.to_container(cfg, resolve=True)).items() if k != "trainer.numerics"}
    nan = float("nan")
    want.update({k: nan if cfg.get(k) is None else float(cfg[k]) for k in ("tau", "lambda")}, memory=int(cfg.memory))
    cell = runs[(runs["benchmark"] == cfg.benchmark.name) & (runs["method"] == cfg.method.name)
                & (runs["reading"] == cfg.reading) & (runs["seed"] == cfg.seed)]  # fmt: skip
    where = f"{cfg.method.name} {cfg.benchmark.name} {cfg.reading} seed {cfg.seed}"
    differ = []
    for _, run in cell.iterrows():
        have = {**{k: v for k, v in run["flat"].items() if k != "trainer.numerics"},
                **{k: run[k] for k in ("memory", "tau", "lambda")}}  # fmt: skip
        keys = [k for k in sorted(set(want) | set(have)) if not _same(want.get(k), have.get(k))]
        if not keys:
            return {"acc": float(run["acc"]), "R": run["R"].tolist(),
                    "from": {"record": experiment, "job": run["job"], "code": run["code"], "commit": run["commit"],
                             "cpu": run["cpu"], "numerics": run["numerics"]}}  # fmt: skip
        differ.append(f"{run['job']} ({', '.join(f'{k}={have.get(k)!r}, not {want.get(k)!r}' for k in keys[:3])})")
    raise ConfigError(f"--suite-from {experiment}: no sealed run of {where} in these settings"
                      + (f": {'; '.join(differ)}" if differ else ""))  # fmt: skip
