"""Whole runs on synthetic data: every task trains, seeds reproduce, results are complete."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import make_cfg, run_cfg


@pytest.mark.parametrize("method", ["er", "online"])
def test_every_task_trains(tmp_path, method):
    # Guards the reused-Trainer pitfall: a Trainer(max_epochs=1) re-fit trains 0 steps.
    res = run_cfg(tmp_path, f"method={method}")
    cfg = make_cfg()
    per_task = cfg.benchmark.train_per_class * cfg.benchmark.classes_per_task
    assert res["steps_per_task"] == [per_task // cfg.batch_size] * cfg.benchmark.n_tasks
    R = np.asarray(res["R"])
    # each task is learned right after it is trained (chance over the 6-way head: 17%)
    assert all(R[k, k] > 40 for k in range(len(R)))


def test_results_file_complete(tmp_path):
    res = run_cfg(tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["R"] == res["R"]
    for key in (
        "R",
        "b",
        "metrics",
        "per_class",
        "config",
        "seed",
        "versions",
        "wall_time_s",
        "cpu_time_s",
        "train_time_s",
        "R_task_il",
        "peak_ram_mb",
        "peak_gpu_mb",
        "identity",
        "reading",
        "digest",
    ):
        assert key in on_disk
    assert set(on_disk["metrics"]) == {"acc", "forget", "bwt", "fwt", "acc_task_il", "forget_task_il", "bwt_task_il"}
    assert on_disk["config"]["method"]["name"] == "adaer"  # the default method
    assert on_disk["cpu_time_s"] > 0 and 0 < on_disk["train_time_s"] < on_disk["wall_time_s"]
    assert not list(tmp_path.glob(".*.tmp"))  # no stray temporary file


def test_task_il_matrix_beside_class_il_and_in_the_summary(tmp_path):
    """Masking to the evaluated task's classes only removes competitors: every entry of R_task_il is
    at least R's; its metrics are its own; the summary prints its last row and metrics."""
    from clsuite.core.metrics import task_il_metrics
    from clsuite.run.experiment import format_report

    res = run_cfg(tmp_path, "method=er", "reading=paper_text")
    R, Rt = np.asarray(res["R"]), np.asarray(res["R_task_il"])
    assert Rt.shape == R.shape and (Rt >= R).all() and (Rt > R).any()
    assert {k: res["metrics"][k] for k in task_il_metrics(Rt)} == task_il_metrics(Rt)
    lines = format_report(res).splitlines()
    row = " ".join(f"{v:6.1f}" for v in Rt[-1])
    assert f"task-IL (the logits masked to the evaluated task's classes), after the last task: {row}" in lines
    m = res["metrics"]
    assert f"task-IL: Acc={m['acc_task_il']:.2f} Forget={m['forget_task_il']:.2f} BWT={m['bwt_task_il']:.2f}" in lines


def test_peak_memory_is_the_runs_own(tmp_path):
    """A process that held 400 MB more before the run (a sweep's earlier job) does not lend the run
    its peak; the summary names it; on the CPU there is no GPU peak."""
    import mmap
    import resource

    from clsuite.run.experiment import format_report

    with mmap.mmap(-1, 400 * 2**20) as ballast:  # anonymous pages, touched (resident), then unmapped
        ballast[:: mmap.PAGESIZE] = b"x" * len(range(0, len(ballast), mmap.PAGESIZE))
        held_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res = run_cfg(tmp_path, "method=er")
    assert 0 < res["peak_ram_mb"] < held_mb - 300 and res["peak_gpu_mb"] is None
    assert (
        format_report(res).splitlines()[-1]
        == f"wall time {res['wall_time_s']:.1f}s, peak RAM {res['peak_ram_mb']:.0f} MB"
    )


def test_same_seed_same_matrix_different_seed_differs(tmp_path):
    small = "reading=paper_text"  # |B_t| = 20, M = 100 in total: the synthetic stream does not fit, seeds show
    a = run_cfg(tmp_path / "a", "seed=3", small)["R"]
    b = run_cfg(tmp_path / "b", "seed=3", small)["R"]
    c = run_cfg(tmp_path / "c", "seed=4", small)["R"]
    assert a == b
    assert a != c


def test_joint_is_one_pass_over_the_union(tmp_path):
    res = run_cfg(tmp_path, "method=joint")
    cfg = make_cfg()
    n = cfg.benchmark.train_per_class * cfg.benchmark.classes_per_task * cfg.benchmark.n_tasks
    assert res["steps_per_task"] == [n // cfg.batch_size]
    assert len(res["R"]) == 1 and len(res["R"][0]) == cfg.benchmark.n_tasks
    assert res["metrics"]["acc"] > 60
    assert np.isnan(res["metrics"]["bwt"])


def test_task_end_hook_runs_before_the_row_is_measured(tmp_path, monkeypatch):
    """A plugin's task-end work (Fisher, herding, anchors) must be in place when R[k] is measured."""
    from clsuite.core.callbacks import AccuracyMatrix
    from clsuite.core.methods.base import Plugin

    events = []
    monkeypatch.setattr(Plugin, "on_task_end", lambda self, learner, task, dm: events.append(("task_end", task)))
    original = AccuracyMatrix.on_fit_end

    def logged(self, trainer, learner):
        events.append(("row", len(self.rows)))
        original(self, trainer, learner)

    monkeypatch.setattr(AccuracyMatrix, "on_fit_end", logged)
    run_cfg(tmp_path, "method=er")
    assert events == [("task_end", 0), ("row", 0), ("task_end", 1), ("row", 1), ("task_end", 2), ("row", 2)]


def test_debug_smoke_is_a_run_in_seconds_on_no_data_set(tmp_path):
    """`debug=smoke` (conf/debug/smoke.yaml, lightning-hydra-template's `debug=fdr`): the synthetic
    stream, a few batches per task, CPU, no logger, no checkpoint, its own experiment; any method; a
    command-line key still wins over it."""
    from clsuite import api
    from clsuite.config.schema import logger_kind

    cfg = api.compose(["debug=smoke"])
    assert (cfg.benchmark.name, logger_kind(cfg.logger), cfg.checkpoint, cfg.experiment) == (
        "synthetic",
        "none",
        "off",
        "smoke",
    )
    assert cfg.benchmark.train_per_class == 20 and cfg.trainer.accelerator == "cpu" and cfg.method.name == "adaer"
    er = api.compose(["method=er", "debug=smoke", "seed=3"])
    assert (er.method.name, er.seed, er.benchmark.name) == ("er", 3, "synthetic")
    res = api.run(er, tmp_path / "run")
    assert np.asarray(res["R"]).shape == (3, 3) and res["steps_per_task"] and max(res["steps_per_task"]) <= 10
    assert not list((tmp_path / "run").rglob("*.ckpt"))


def test_a_stock_lightning_callback_added_on_the_command_line_runs_in_the_trainer(tmp_path, monkeypatch):
    """`+callbacks.timer._target_=lightning.pytorch.callbacks.Timer`, checked as the command line checks
    it (clsuite.config.check.check_overrides), is built into the run's Trainer (conf/trainer/, instantiated
    by clsuite.run.experiment.make_trainer) and times the training; its node is in the run's identity."""
    import lightning.pytorch.callbacks as lcb

    from clsuite import api
    from clsuite.run import experiment as ex

    trainers, make = [], ex.make_trainer
    monkeypatch.setattr(ex, "make_trainer", lambda *a, **k: trainers.append(make(*a, **k)) or trainers[-1])
    res = api.run(["debug=smoke", "method=er", "+callbacks.timer._target_=lightning.pytorch.callbacks.Timer"], tmp_path)
    (trainer,) = trainers
    (timer,) = [cb for cb in trainer.callbacks if isinstance(cb, lcb.Timer)]
    assert timer.time_elapsed("train") > 0 and np.asarray(res["R"]).shape == (3, 3)
    assert res["identity"]["config"]["callbacks"] == {"timer": {"_target_": "lightning.pytorch.callbacks.Timer"}}
    assert (trainer.log_every_n_steps, trainer.num_sanity_val_steps, trainer.limit_val_batches) == (10, 0, 0)


def test_the_trainer_is_the_node_of_conf_trainer_less_the_suite_keys(tmp_path):
    """conf/trainer/ is instantiated (its ``_target_`` and the Trainer's own arguments, a command-line value
    included), its suite keys (clsuite.run.experiment.SUITE_KEYS) taken out; a recorded config made before
    the node named the Trainer (none of its keys) gets today's defaults."""
    import torch
    from lightning.pytorch.callbacks import ModelSummary, Timer
    from omegaconf import OmegaConf

    from clsuite.run.experiment import SUITE_KEYS, make_trainer, trainer_node

    cfg = make_cfg("trainer.log_every_n_steps=7", "trainer.enable_model_summary=true", "trainer.num_sanity_val_steps=3")
    assert SUITE_KEYS == ("device_index", "numerics", "progress_bar", "threads")
    assert not set(SUITE_KEYS) & set(trainer_node(cfg)) and set(SUITE_KEYS) < set(cfg.trainer)
    timer = Timer()
    trainer = make_trainer(cfg, torch.device("cpu"), [timer], None)
    assert (trainer.log_every_n_steps, trainer.num_sanity_val_steps, trainer.max_epochs) == (7, 3, 0)
    assert any(isinstance(cb, ModelSummary) for cb in trainer.callbacks) and timer in trainer.callbacks
    assert trainer.logger is None and trainer.checkpoint_callback is None and not trainer.progress_bar_callback
    old = OmegaConf.create({"trainer": {"accelerator": "cpu", "deterministic": False, "precision": "32-true",
                                        "log_every_n_steps": 5, "numerics": "native", "threads": 1}})  # fmt: skip
    node = trainer_node(old)
    assert node._target_ == "lightning.pytorch.Trainer" and node.log_every_n_steps == 5 and node.max_epochs == 0
    assert make_trainer(old, torch.device("cpu"), [], None).log_every_n_steps == 5


def test_a_bad_callback_argument_is_one_config_error_before_training(tmp_path):
    """A stock callback's argument that its class refuses (Lightning's Timer: interval 'step' or 'epoch') is a
    ConfigError naming the node (the command line prints it as one error: line, exit 2), raised while the
    bookkeeping is built, before any task trains; the suite's own declared argument (save_top_k >= -1) is
    refused by the schema; good values train."""
    from clsuite import api
    from clsuite.core.errors import ConfigError

    timer = ["+callbacks.timer._target_=lightning.pytorch.callbacks.Timer"]
    with pytest.raises(ConfigError, match=r"^callbacks\.timer: .*interval=weekly"):
        api.run(["debug=smoke", "method=er", *timer, "+callbacks.timer.interval=weekly"], tmp_path / "bad")
    assert not (tmp_path / "bad" / "results.json").exists()
    with pytest.raises(ConfigError, match=r"^callbacks\.checkpoint\.save_top_k must be a whole number >= -1, got -2"):
        api.run(["debug=smoke", "method=er", "callbacks.checkpoint.save_top_k=-2"], tmp_path / "bad2")
    res = api.run(["debug=smoke", "method=er", *timer, "+callbacks.timer.interval=epoch"], tmp_path / "good")
    assert np.asarray(res["R"]).shape == (3, 3)
