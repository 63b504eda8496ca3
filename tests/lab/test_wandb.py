"""W&B logging, decoded from offline runs (no network): what a run logs, runs made from results
files (skipped / reused / synced grid points), names and groups, the aggregate charts; and the
feedback of runs and sweeps (progress bar, sweep count, run.log)."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf, open_dict

from clsuite.analysis.wandb_sync import sync_experiment
from clsuite.core.metrics import METRICS
from clsuite.run.io import sha256
from clsuite.run.progress import keep_report, sweep_progress
from clsuite.run.wandb_run import describe, log_from_results
from tests.conftest import make_cfg
from tests.results_fixtures import fake_R, write_run
from tests.wandb_offline import offline_runs, read_offline_run

ROOT = Path(__file__).resolve().parents[2]
TWO_TASKS = ("benchmark.n_tasks=2", "benchmark.synthetic.num_classes=4", "trainer.log_every_n_steps=5")


def train_logged(out, *overrides, logger="wandb"):
    from clsuite.run.experiment import run_experiment

    return run_experiment(make_cfg(f"logger={logger}", *TWO_TASKS, *overrides), out)


def the_run(folder) -> dict:
    (d,) = offline_runs(folder)
    return read_offline_run(d)


def task_rows(run) -> list[dict]:
    return [h for h in run["history"] if "acc/seen" in h]


def aggregate_run(root) -> tuple[dict, dict]:
    """The one aggregate run under ``root``: (the run, ``{logged key: its file's fields}``), the
    fields of an image or a table (``_type``, ``path`` in the run's files/, ``sha256``, ...)."""
    (d,) = offline_runs(root)
    run, logged = read_offline_run(d), {}
    for h in run["history"]:
        for k, v in h.items():
            key, _, field = k.partition("/")
            logged.setdefault(key, {"dir": d / "files"})[field] = v
    return run, {k: v for k, v in logged.items() if not k.startswith("_")}


def of_type(logged: dict, kind: str) -> set[str]:
    return {k for k, v in logged.items() if v.get("_type") == f"{kind}-file"}


def rows_of(logged: dict, key: str) -> list[dict]:
    table = json.loads((logged[key]["dir"] / logged[key]["path"]).read_text())
    return [dict(zip(table["columns"], row)) for row in table["data"]]


@pytest.mark.parametrize(
    "form, total, every",
    [("concat", lambda c, r: (c + r) / 2, 1), ("split", lambda c, r: c + r, 5)],  # |B_t| = |R| = 20
)
def test_trained_run_logs_loss_rows_b_metrics_identity(wandb_env, tmp_path, form, total, every):
    # paper_text: replay from all of M, so only the first batch (empty memory) has no replay part
    over = ("reading=paper_text", "method=er", f"replay_loss={form}", f"trainer.log_every_n_steps={every}")
    res = train_logged(tmp_path / "run", *over)
    run = the_run(tmp_path / "run")
    hist = run["history"]
    assert not any("global_step" in k for h in hist for k in h)  # no mislabelled Lightning axis
    assert run["axes"]["acc/*"] == "task" and run["axes"]["train/*"] == "train/step"

    # the loss every log_every_n_steps incoming batches, with its two parts once replay starts
    loss = [h for h in hist if "train/loss" in h]
    assert [h["train/step"] for h in loss] == list(range(every, sum(res["steps_per_task"]) + 1, every))
    parts = [h for h in loss if "train/loss_replay" in h]
    assert len(loss) - len(parts) == (every == 1)  # no replay while the memory is empty (the first batch)
    for h in parts:
        assert h["train/loss"] == pytest.approx(total(h["train/loss_current"], h["train/loss_replay"]), rel=1e-5)

    # after each task: the row of R on the task axis, and the accuracy over the tasks seen so far
    rows = task_rows(run)
    assert [h["task"] for h in rows] == [1, 2]  # tasks numbered as in the figures
    for i, h in enumerate(rows):
        assert [h[f"acc/task{j + 1}"] for j in range(i + 1)] == res["R"][i][: i + 1]
        assert h["acc/seen"] == pytest.approx(np.mean(res["R"][i][: i + 1]))
    assert rows[0]["acc/seen"] == res["R"][0][0] and "acc/task2" not in rows[0]  # task 2 not trained yet: absent

    s = run["summary"]
    for key in METRICS:
        assert s[f"final/{key}"] == pytest.approx(res["metrics"][key], nan_ok=True)
    assert [s["b/task1"], s["b/task2"]] == res["b"]
    assert s["accuracy_matrix/nrows"] == 3  # b, then the two rows of R

    cfg = run["config"]
    assert cfg["source"] == "ran" and cfg["method"]["name"] == "er" and cfg["replay_loss"] == form
    assert cfg["identity"] == json.loads(json.dumps(res["identity"]))  # config, code, data, env
    assert run["job_type"] == "er" and run["exit_code"] == 0
    assert "seed=0" in run["name"] and "seed" not in run["group"]


def test_the_yaml_s_name_group_and_tags_win_and_w_and_b_leaves_r_as_it_is(wandb_env, tmp_path):
    """conf/logger/wandb.yaml's null name and group are computed at the run's start (describe); a value
    given there wins, its tags are added to the automatic ones; the run's R is that of a run without a logger."""
    res = train_logged(tmp_path / "a", "method=er", "logger.name=mine", "logger.group=g", "logger.tags=[t1]")
    run = the_run(tmp_path / "a")
    assert (run["name"], run["group"]) == ("mine", "g") and {"t1", "seed=0", "default"} <= set(run["tags"])
    assert res["R"] == train_logged(tmp_path / "b", "method=er", logger="none")["R"]


def test_a_rerun_continues_its_w_and_b_run_until_its_results_are_sealed(wandb_env, tmp_path):
    """The run's W&B id (conf/logger/wandb.yaml, ``id: null``) is a hash of its experiment and identity
    key: a rerun of a stopped run (no mirror record yet) continues the same W&B run (``resume: allow``),
    its earlier folder kept beside; a rerun after its results were sealed and mirrored gets another id,
    a hash of the mirror's too, and supersedes the earlier folders; an id given in the yaml wins."""
    from clsuite.run.wandb_run import run_id

    out = tmp_path / "run"
    key = train_logged(out, "method=er", "experiment=exp")["identity"]["key"]
    first = the_run(out)["id"]
    assert first == run_id(tmp_path / "elsewhere", "exp", key) == sha256(f"exp\n{key}\n")[:16]
    (out / "wandb" / "mirror.json").unlink()  # as a stopped process leaves it
    train_logged(out, "method=er", "experiment=exp")
    assert [read_offline_run(p)["id"] for p in offline_runs(out)] == [first, first]
    assert not (out / "wandb" / "superseded").exists()
    train_logged(out, "method=er", "experiment=exp")  # the results were sealed and mirrored
    assert the_run(out)["id"] == sha256(f"exp\n{key}\n{first}")[:16]
    assert len(list((out / "wandb" / "superseded").iterdir())) == 2
    train_logged(tmp_path / "given", "method=er", "logger.id=myid")
    assert the_run(tmp_path / "given")["id"] == "myid"


def test_csv_logger_gets_the_same_rows(tmp_path):
    res = train_logged(tmp_path, "method=er", logger="csv")
    with open(tmp_path / "csv" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    seen = [float(r["acc/seen"]) for r in rows if r.get("acc/seen")]
    assert seen == pytest.approx([res["R"][0][0], np.mean(res["R"][1])])
    assert sum(bool(r.get("train/loss")) for r in rows) == sum(res["steps_per_task"]) // 5


def test_names_and_groups():
    cfg = {
        "experiment": "tau",
        "benchmark": {"name": "split_mnist"},
        "method": {"name": "adaer", "replay": {"tau": 0.3}, "update": {"_target_": "E-BRS"}},
        "memory": 100,
        "tau": 0.3,
        "lambda": 0.0,
        "lr": 0.1,
        "seed": 2,
        "reading": "mir_code",
    }
    # the keys a run's identity leaves out (results.IGNORED_KEYS) name no cell, but for the thread count
    overrides = ["benchmark=split_mnist", "tau=0.3", "seed=2", "batch_size=10", "logger=wandb", "trainer=cpu"]
    overrides += ["checkpoint_every=2", "keep_weights=true", "data.cache_dir=/c", "trainer.threads=2", "reuse=false"]
    overrides += ["checkpoint_dir=/k"]
    d = describe(cfg, overrides)
    assert d["group"] == "tau split_mnist adaer M=100 reading=mir_code tau=0.3 lr=0.1 batch_size=10 trainer.threads=2"
    assert d["name"] == "split_mnist adaer M=100 reading=mir_code tau=0.3 lr=0.1 batch_size=10 trainer.threads=2 seed=2"
    assert d["job_type"] == "adaer" and {"tau", "tau=0.3", "seed=2", "batch_size=10"} <= set(d["tags"])
    # seeds share a group; any other key (tau here) makes another cell
    assert describe({**cfg, "seed": 3})["group"] == describe(cfg)["group"]
    assert describe({**cfg, "tau": 0.5})["group"] != describe(cfg)["group"]
    # only keys the method reads: ER has no tau, Online no memory; lambda only when the stream is imbalanced
    er = {**cfg, "method": {"name": "er", "replay": {"exclude_current_task": True}, "update": {"_target_": "R"}}}
    assert describe(er)["group"] == "tau split_mnist er M=100 reading=mir_code lr=0.1"
    online = {**cfg, "method": {"name": "online", "replay": None, "update": None}, "lambda": 0.5}
    assert describe(online)["group"] == "tau split_mnist online reading=mir_code lambda=0.5 lr=0.1"


def test_skipped_grid_point_is_logged_from_its_results_once(wandb_env, tmp_path):
    from clsuite.run.experiment import run_experiment

    job = tmp_path / "multirun" / "exp" / "method=er,seed=0"
    cfg = make_cfg("logger=wandb", *TWO_TASKS, "method=er", "experiment=exp")
    res = run_experiment(make_cfg(*TWO_TASKS, "method=er", "experiment=exp"), job)  # trained with logger=none
    c = OmegaConf.to_container(cfg, resolve=True)
    assert log_from_results(c, job, source="skipped", overrides=["method=er", "seed=0"])
    assert not log_from_results(c, job, source="skipped")  # the grid point has its W&B run already
    run = the_run(job)
    assert "from_results" in run["tags"] and run["config"]["source"] == "skipped"
    assert [[h.get("acc/task1"), h.get("acc/task2")] for h in task_rows(run)] == [[res["R"][0][0], None], res["R"][1]]
    assert not [h for h in run["history"] if "train/loss" in h]  # trained with logger=none: no loss was logged
    assert run["summary"]["final/acc"] == pytest.approx(res["metrics"]["acc"])
    assert run["config"]["identity"]["key"] == res["identity"]["key"]
    assert run["group"] == describe(c)["group"]
    # results that change (a rerun) get a new run; the old one is superseded, kept out of the mirror
    run_experiment(make_cfg(*TWO_TASKS, "method=er", "experiment=exp", "seed=1"), job)
    assert log_from_results(c, job, source="skipped")
    assert len(offline_runs(job)) == 1 and len(list((job / "wandb" / "superseded").iterdir())) == 1


def test_a_disabled_wandb_logs_nothing_at_a_sweep_s_end(wandb_env, tmp_path, monkeypatch):
    """Issue 41: a sweep under logger.mode=disabled ended with `clsuite wandb`'s usage text (its --mode
    knows no 'disabled'), and a skipped job's W&B mirror moved the folder's runs aside."""
    from clsuite.run.experiment import run_experiment
    from clsuite.run.wandb_run import log_sweep_aggregate, mirror_finished

    monkeypatch.delenv("WANDB_MODE")
    job = tmp_path / "multirun" / "exp" / "method=er"
    run_experiment(make_cfg(*TWO_TASKS, "method=er", "experiment=exp"), job)
    calls = []  # the child processes a sweep's end starts (`clsuite wandb`)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))  # fmt: skip
    (job / "wandb" / "offline-run-1").mkdir(parents=True)  # an earlier W&B run of the folder
    for mode in ("disabled", "offline"):
        cfg = make_cfg("logger=wandb", f"logger.mode={mode}", *TWO_TASKS, "method=er", "experiment=exp")
        with open_dict(cfg):
            cfg.hydra = {"sweep": {"dir": str(job.parent)}}
        log_sweep_aggregate(cfg)
        if mode == "disabled":
            mirror_finished(cfg, job, "skipped")
            assert calls == [] and os.listdir(job / "wandb") == ["offline-run-1"]
    assert len(calls) == 1 and calls[0][3:] == ["wandb", "exp", "--multirun-dir", str(job.parent.parent),
                                                "--project=adaer-suite", "--mode=offline"]  # fmt: skip


def test_a_csv_run_pushed_later_carries_its_loss_curve(wandb_env, tmp_path):
    from clsuite.run.wandb_run import csv_history

    job = tmp_path / "multirun" / "exp" / "method=er,seed=0"
    res = train_logged(job, "method=er", logger="csv")  # log_every_n_steps=5
    with open(job / "csv" / "metrics.csv") as f:
        logged = [(int(float(r["train/step"])), float(r["train/loss"])) for r in csv.DictReader(f) if r["train/loss"]]
    assert len(logged) == sum(res["steps_per_task"]) // 5
    cfg = json.loads((job / "results.json").read_text())["config"]
    assert log_from_results(cfg, job, source="synced")
    hist = the_run(job)["history"]
    pushed = [(h["train/step"], h["train/loss"]) for h in hist if "train/loss" in h]
    assert [s for s, _ in pushed] == [s for s, _ in logged] and [v for _, v in pushed] == pytest.approx(
        [v for _, v in logged]
    )
    assert sum("train/loss_replay" in h for h in hist) > 0  # the replay part too
    # a CSV that is not this run's (its rows of R differ) is not pushed as its history
    assert csv_history(job, res | {"R": [[r + 1 for r in row] for row in res["R"]]}) == []
    assert csv_history(job, res | {"steps_per_task": [1, 1]}) == []  # steps past the run's


def test_a_reused_job_carries_its_loss_curve_to_its_folder_and_to_wandb(wandb_env, tmp_path):
    """A sweep in experiment A (CSV logger), then the same grid point with logger=wandb in B: the job
    copies A's results and its ``csv/metrics.csv``, and its W&B run holds A's loss rows."""
    from clsuite.run.wandb_run import mirror_finished
    from clsuite.sweep.job import Job

    mr = tmp_path / "multirun"
    first = Job(make_cfg("logger=csv", *TWO_TASKS, "method=er", "experiment=a"), mr / "a" / "job", mr / "a")
    train_logged(first.out_dir, "method=er", "experiment=a", logger="csv")
    first.succeeded(1.0)
    logged = (first.out_dir / "csv" / "metrics.csv").read_bytes()
    cfg = make_cfg("logger=wandb", *TWO_TASKS, "method=er", "experiment=b")
    other = Job(cfg, mr / "b" / "job", mr / "b")
    _, how = other.finished()
    assert how == "reused" and (other.out_dir / "csv" / "metrics.csv").read_bytes() == logged
    mirror_finished(cfg, other.out_dir, how, ["method=er"])
    run = the_run(other.out_dir)
    assert run["config"]["source"] == "reused"
    with open(other.out_dir / "csv" / "metrics.csv") as f:
        steps = [int(float(r["train/step"])) for r in csv.DictReader(f) if r["train/loss"]]
    assert steps and [h["train/step"] for h in run["history"] if "train/loss" in h] == steps


def test_aggregate_tables_have_error_bars(wandb_env, tmp_path):
    """The aggregate run logs the tables and figures ``clsuite aggregate`` makes (an ad-hoc sweep's
    table of every setting, mean ± std and n per row; its heatmaps), the same files."""
    from clsuite.analysis.wandb_sync import log_experiment

    root = tmp_path / "multirun" / "t2"
    for method in ("er", "mir"):
        for seed in (0, 1, 2):
            write_run(root, method=method, seed=seed, R=fake_R(3, 60.0 + 2 * seed))
    log_experiment("t2", root, tmp_path / "results")
    agg, logged = aggregate_run(tmp_path / "results")
    assert (agg["name"], agg["config"]["experiment"]) == ("t2 aggregate", "t2")
    table = "table1_t2_every_swept_setting_reading_paper_text_m_in_total"
    assert of_type(logged, "table") == {table, "summary_table", "runs_table"}
    assert {(r["method"], r["Acc (%)"], r["n"]) for r in rows_of(logged, table)} == {
        ("ER", "62.0 ± 2.0 [86.4]", "3"), ("MIR", "62.0 ± 2.0 [88.0]", "3"),
    }  # fmt: skip  # mean ± std over the seeds, n per row, as results/t2/t2.md
    rows = rows_of(logged, "summary_table")
    assert {(r["method"], r["acc_mean"], round(r["acc_std"], 6), r["n"]) for r in rows} == {
        ("er", 62.0, 2.0, 3), ("mir", 62.0, 2.0, 3),
    }  # fmt: skip
    (image,) = of_type(logged, "image")
    png = tmp_path / "results" / "t2" / f"{image}.png"  # the report's figure, byte for byte
    assert image == "accuracy_matrix_split_mnist_paper_text" and logged[image]["sha256"] == sha256(png.read_bytes())


def test_logger_config_overrides_group_name_tags(wandb_env, tmp_path):
    job = write_run(tmp_path / "multirun" / "exp", R=fake_R(3, 70.0))
    cfg = json.loads((job / "results.json").read_text())["config"]
    lc = {"group": "my group", "name": "my run", "tags": ["mine"], "project": "p2"}
    assert log_from_results(cfg, job, source="synced", logger_cfg=lc)
    run = the_run(job)
    assert (run["group"], run["name"], run["project"]) == ("my group", "my run", "p2")
    assert {"mine", "from_results", "synced", "seed=0"} <= set(run["tags"])


def test_sync_an_experiment_and_its_charts(wandb_env, tmp_path):
    root = tmp_path / "multirun" / "memory"
    for m in (50, 100):
        for method, final in (("er", 60.0), ("mir", 70.0)):
            for seed in (0, 1):
                write_run(root, method=method, memory=m, seed=seed, R=fake_R(3, final + m / 10 + seed, 60.0))
    (root / "broken").mkdir()
    (root / "broken" / "results.json").write_text("{}")
    out = tmp_path / "results"
    s = sync_experiment("memory", tmp_path / "multirun", out)
    assert (s["results"], s["logged"]) == (8, 8) and s["left_out"] == ["broken: status None, not 'finished'"]
    runs = [read_offline_run(p) for p in offline_runs(root)]
    assert len(runs) == 8 and {r["config"]["source"] for r in runs} == {"synced"}
    assert len({r["group"] for r in runs}) == 4  # (method, M) cells, two seeds each
    assert sync_experiment("memory", tmp_path / "multirun", out)["logged"] == 0  # mirrored already

    agg, logged = aggregate_run(out / "memory")
    assert agg["job_type"] == "aggregate" and agg["name"] == "memory aggregate"
    assert of_type(logged, "image") == {"fig5_fig6_memory_acc", "fig5_fig6_memory_bwt"}  # Figs. 5, 6 of the report
    acc, bwt = (
        "table1_fig_5_acc_against_m_reading_paper_text_m_in_total",
        "table2_fig_6_bwt_points_against_m_reading_paper_text_m_in_total",
    )
    assert of_type(logged, "table") == {"summary_table", "runs_table", acc, bwt}
    rows = rows_of(logged, "summary_table")
    points = {(r["method"], r["memory"]): r["acc_mean"] for r in rows}  # (method, M) -> mean Acc over seeds
    assert points[("er", 50)] == pytest.approx(np.mean([60 + 5 + 0, 60 + 5 + 1]))
    assert points[("mir", 100)] == pytest.approx(np.mean([70 + 10 + 0, 70 + 10 + 1]))
    assert [r["split-MNIST M=50"] for r in rows_of(logged, acc)] == [
        "65.5 ± 0.7",
        "75.5 ± 0.7",
    ]  # ER, MIR: Fig. 5's table


def test_tau_and_lambda_sweep(wandb_env, tmp_path):
    from clsuite.analysis.wandb_sync import log_experiment

    root = tmp_path / "multirun" / "sens"
    for tau in (0.1, 0.5):
        for lam in (0.0, 0.5):
            write_run(root, method="adaer", tau=tau, lam=lam, R=fake_R(3, 50 + 10 * tau + lam))
    log_experiment("sens", root, tmp_path / "results")
    agg, logged = aggregate_run(tmp_path / "results")
    assert agg["name"] == "sens aggregate"
    assert of_type(logged, "image") == {"accuracy_matrix_split_mnist_paper_text"}  # a panel per tau x lambda
    table = "table1_sens_every_swept_setting_reading_paper_text_m_in_total"
    assert of_type(logged, "table") == {"summary_table", "runs_table", table}
    rows = rows_of(logged, "summary_table")  # a cell per (tau, lambda)
    assert {(r["tau"], r["lambda"], round(r["acc_mean"], 6)) for r in rows} == {
        (0.1, 0.0, 51.0), (0.5, 0.0, 55.0),
        (0.1, 0.5, 51.5), (0.5, 0.5, 55.5),
    }  # fmt: skip
    assert {(r["τ"], r["λ"], r["Acc (%)"]) for r in rows_of(logged, table)} == {
        ("0.1", "0", "51.0"), ("0.5", "0", "55.0 [89.6]"), ("0.1", "0.5", "51.5"), ("0.5", "0.5", "55.5"),
    }  # fmt: skip


def test_sweep_progress_line(tmp_path):
    grid = {"experiment": "t2", "sweep_id": "abc", "created": "2026-01-01T10:00:00", "n_jobs": 10}
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    lines = [{"sweep_id": "abc", "status": s} for s in ("ran", "skipped", "failed", "reused")]
    lines.append({"sweep_id": "old", "status": "ran"})  # another invocation: not counted
    (tmp_path / "sweep_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    from datetime import datetime

    now = datetime.fromisoformat("2026-01-01T10:04:00").timestamp()  # 2 jobs took 240 s (skip, reuse: none), 6 left
    assert sweep_progress(tmp_path, "abc", now=now) == "sweep t2: 3/10 done, 1 failed, about 12m left"
    assert sweep_progress(tmp_path, "other", now=now) is None
    # a restarted sweep: 9 jobs skipped at once, then one trained in 15 minutes; 15 left take 15 x 15 minutes
    grid.update(sweep_id="re", n_jobs=25)
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    lines = [{"sweep_id": "re", "status": "skipped"}] * 9 + [{"sweep_id": "re", "status": "ran"}]
    (tmp_path / "sweep_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    now = datetime.fromisoformat("2026-01-01T10:15:00").timestamp()
    assert sweep_progress(tmp_path, "re", now=now) == "sweep t2: 10/25 done, 0 failed, about 3h45m left"
    now = datetime.fromisoformat("2026-01-01T10:00:01").timestamp()
    (tmp_path / "sweep_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines[:9]))
    assert sweep_progress(tmp_path, "re", now=now) == "sweep t2: 9/25 done, 0 failed"  # no job timed yet


def test_report_kept_in_run_log(tmp_path):
    (tmp_path / "run.log").write_text("[hydra] a warning\n")
    keep_report(tmp_path, "er on synthetic\nAcc=50.00")
    assert (tmp_path / "run.log").read_text() == "[hydra] a warning\ner on synthetic\nAcc=50.00\n"


def test_the_run_summary_names_the_memory_unit_its_slots_and_why_fwt_cannot_rank(tmp_path):
    """``M=100`` alone reads as 100 slots to a Mammoth user; under mir_code it is 100 per class."""
    from clsuite.core.metrics import FWT_CLASS_IL
    from clsuite.run.experiment import format_report, run_experiment

    res = run_experiment(make_cfg(*TWO_TASKS, "method=er", "reading=mir_code"), tmp_path / "a")  # 4 classes
    lines = format_report(res).splitlines()
    assert lines[0] == "er on synthetic: M=100 per class (400 slots), seed=0, reading=mir_code"
    assert res["R"][0][1] == 0 and f"FWT: {FWT_CLASS_IL}" in lines  # class-IL: R[0, 1] = 0
    total = res | {"memory_capacity": 100, "config": res["config"] | {"memory_per_class": False}}
    assert format_report(total).startswith("er on synthetic: M=100 in total (100 slots), seed=0,")
    assert format_report(res | {"memory_capacity": 0}).startswith("er on synthetic: no memory, seed=0,")
    seen = res | {"R": [[90.0, 5.0], [80.0, 85.0]]}  # a model that scored on task 2 before training on it
    assert "FWT: " not in format_report(seen)


def test_progress_bar_names_the_task_and_shows_the_loss(tmp_path, monkeypatch):
    import clsuite.run.experiment as ex
    from tests.conftest import run_cfg

    trainers, make = [], ex.make_trainer
    monkeypatch.setattr(ex, "make_trainer", lambda *a, **k: trainers.append(make(*a, **k)) or trainers[-1])
    run_cfg(tmp_path, *TWO_TASKS, "method=er", "trainer.progress_bar=true")
    bar = trainers[0].progress_bar_callback.train_progress_bar
    assert bar.desc.startswith("task 2/2") and "loss=" in bar.postfix and "v_num" not in bar.postfix
    assert not math.isnan(float(bar.postfix.split("loss=")[1][:5]))


@pytest.mark.slow
def test_sweep_after_csv_gives_every_grid_point_a_wandb_run(wandb_env, tmp_path):
    """make table2 ARGS=logger=wandb after a CSV sweep: the skipped jobs are logged from results."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}  # not this process's wandb-core
    env |= {"PYTHONPATH": str(ROOT / "src"), "DATA_DIR": str(tmp_path)}
    args = [sys.executable, str(ROOT / "src" / "run.py"), "-m", "benchmark=synthetic", *TWO_TASKS]
    args += ["method=er,online", "trainer=cpu", "experiment=wb", f"hydra.sweep.dir={tmp_path}/multirun/wb"]
    args += ["resume=config_only"]  # (code edited between the two sweeps must not make them rerun)
    for logger in ("csv", "wandb"):
        p = subprocess.run(
            [*args, f"logger={logger}"], env=env, cwd=tmp_path, check=True, capture_output=True, text=True
        )
        assert "sweep wb: 2/2 done, 0 failed" in p.stderr
        if logger == "csv":  # it trains both: a time estimate after the first
            assert "sweep wb: 1/2 done, 0 failed, about" in p.stderr
        else:  # it trains none (no estimate to give): both skipped, their results logged
            assert "sweep wb: 0 ran, 2 skipped (results match)" in p.stderr, p.stderr[-2000:]
    logs = sorted((tmp_path / "multirun" / "wb").glob("*/run.log"))
    assert len(logs) == 2 and all("accuracy matrix R" in p.read_text() for p in logs)  # the reports of the first sweep
    runs = [read_offline_run(p) for p in offline_runs(tmp_path / "multirun" / "wb")]
    assert len(runs) == 2 and {r["config"]["source"] for r in runs} == {"skipped"}
    assert {r["job_type"] for r in runs} == {"er", "online"}
    agg, logged = aggregate_run(tmp_path / "results" / "wb")  # the sweep's tables and figures
    assert agg["job_type"] == "aggregate" and agg["name"] == "wb aggregate"
    assert of_type(logged, "image") == {"accuracy_matrix_synthetic_mir_code"}  # the heatmaps
    assert of_type(logged, "table") == {
        "table1_wb_every_swept_setting_reading_mir_code_m_per_class",
        "summary_table",
        "runs_table",
    }


@pytest.mark.parametrize("n_bars", [1, 2, 3, 14])
def test_the_bar_charts_title_fits_its_figure(n_bars, tmp_path):
    """The bar chart the aggregate run logs (``clsuite.analysis.figures.bars``, one bar per method):
    its title, long as titles are, stays inside the PNG however few bars make it narrow."""
    import matplotlib.image
    import pandas as pd
    from matplotlib.textpath import TextPath

    from clsuite.analysis import figures as fg

    title = "Fig. 9a: averaged test accuracy at λ = 0.5, a_long_experiment_name, error bars: ± one std"
    summary = pd.DataFrame(
        [{"benchmark": "split_mnist", "method": f"method{i}", "variant": "", "memory": 100, "tau": 0.5, "lambda": 0.0,
          "acc_mean": 80.0 + i, "acc_std": 1.0, "n": 3} for i in range(n_bars)]
    )  # fmt: skip
    (png, _pdf) = fg.bars(summary, "acc", title, tmp_path / "bars")
    width = TextPath((0, 0), title, size=11).get_extents().width / 72 * 150  # 11 pt at the PNG's 150 dpi
    assert matplotlib.image.imread(png).shape[1] >= width, (n_bars, width)


def test_chart_titles_name_a_key_held_off_its_default_for_every_run(wandb_env, tmp_path):
    """The experiment's aggregate run, like its tables and figures, names M = 50 held for every run."""
    from clsuite.analysis.wandb_sync import log_experiment

    root = tmp_path / "multirun" / "t2"
    for method in ("er", "mir"):
        for seed in (0, 1):
            write_run(
                root, method=method, seed=seed, memory=50, reading="mir_code", extra_cfg={"memory_per_class": True}
            )
    log_experiment("t2", root, tmp_path / "results")
    agg, _ = aggregate_run(tmp_path / "results")
    held = "Held for every run at a value other than the default: M=50 per class."
    assert agg["notes"] == held and held in (tmp_path / "results" / "t2" / "t2.md").read_text()
