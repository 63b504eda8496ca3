"""Weights & Biases: what a run logs, how runs are named and grouped, and pushing results files.

    python scripts/wandb_sync.py table2           # multirun/table2/: a W&B run per grid point + the charts
    python scripts/wandb_sync.py table2 --check   # what the offline runs on disk hold (no upload)

A W&B project mirrors the results files on disk:

Only sealed, well-formed results files (``clsuite.results.read_run``) are mirrored; the others are
named (``left out``) and never synced.

1. **One W&B run per grid point.** A run that trains logs live (``clsuite.loggers``); a sweep job
   that is skipped (finished before) or reused (same identity in another experiment) is logged
   from its ``results.json`` (:func:`log_from_results`, config ``source: skipped | reused``, tag
   ``from_results``), and this script does the same for every results file of an experiment that
   no W&B run mirrors yet (``source: synced``). ``<job>/wandb/mirror.json`` names the run that
   mirrors the folder's results file (by its SHA-256), so a grid point is logged once however
   often the sweep is resumed; when the results change (a rerun), the folder's earlier runs move
   to ``<job>/wandb/superseded/``, out of what ``wandb sync <job>/wandb/offline-run-*`` uploads.
2. **Names and groups.** group = one cell of a table: the experiment and every key that tells
   conditions apart (benchmark, method, M, reading, tau, lambda, lr and any other key the sweep or
   the command line sets), so the runs of a group are its seeds; job_type = the method; the name
   and the tags carry every key, the seed included (:func:`describe`); only keys the method reads:
   no M for a method without memory, tau only where a policy reads it (C-CMR, AdaER), lambda
   only when the stream is imbalanced (lambda > 0).
3. **What a run holds.** Tasks are numbered 1..T, as in the figures. Axis ``task`` (= i + 1 after
   the i-th row of R): ``acc/task<j+1>`` = R[i, j] for the tasks trained so far (a task not trained
   yet is absent, not 0) and ``acc/seen`` = their mean; axis ``train/step`` (incoming batches
   trained on, all tasks): ``train/loss`` and its parts ``train/loss_current``,
   ``train/loss_replay`` where the loss has them (a run pushed from its results file replays them
   from its folder's CSV logger output, ``csv/metrics.csv``, when that file belongs to these
   results: :func:`csv_history`); summary: ``final/<metric>`` for every metric of
   ``clsuite.metrics.METRICS``, ``b/task<j+1>``, times; the table ``accuracy_matrix`` (b, then R);
   config: the resolved config, ``source``, and the results file's ``identity`` (config, code,
   data, env), reading, versions.
4. **One aggregate run per experiment** (:func:`log_experiment`, job_type ``aggregate``; logged at
   the end of a sweep under logger=wandb, :func:`log_sweep_charts`, and by this script): native
   W&B charts from the rows ``clsuite.analysis`` reads for the report's tables, flat keys:
   ``<metric>_vs_<memory|tau|lambda>_<benchmark>``
   (Acc and BWT against M, Acc against tau or lambda: one line per method), ``first_task_<benchmark>``
   (mean R[:, 0] over seeds after each task), ``acc_<benchmark>`` (bars, when no condition varies;
   ``acc_bars_<benchmark>``: the same bars with +- one std over seeds as error bars, n per bar),
   and the tables ``summary_table`` (one row per cell: mean and std over seeds of every metric)
   and ``runs_table`` (one row per run).

Offline is the default (``WANDB_MODE`` or ``--mode online`` to upload live); offline runs are
written under each job folder (``<job>/wandb/offline-run-*``) and the aggregate run under
``results/<experiment>/wandb/``; ``wandb sync <dir>`` uploads them later.
:func:`read_offline_run` decodes an offline run (the record log of ``run-<id>.wandb``) without
network: the tests and ``--check`` use it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import struct
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from clsuite.config import ConfigError, dotted_get, wandb_settings
from clsuite.io import (
    GRID_FILE,
    OVERRIDES_FILE,
    RESULTS_FILE,
    Unreadable,
    read_json,
    read_object,
    read_regular,
    write_json_atomic,
)
from clsuite.metrics import METRICS
from clsuite.paths import safe_name
from clsuite.results import read_run

MIRROR_FILE = "mirror.json"  # <folder>/wandb/: the W&B run that mirrors the folder's results file
TASK_AXIS = "task"  # row i of R
STEP_AXIS = "train/step"  # incoming batches trained on so far (learner.train_steps)
SKIP_DIRS = {"wandb", ".hydra", "csv", ".submitit", ".index"}

# Override keys that do not tell conditions apart (where and how a run is logged, launched, resumed,
# on which device); the thread count does (it moves results), so ``trainer.threads`` stays.
_NOT_A_CONDITION = (
    "experiment",
    "resume",
    "logger",
    "launcher",
    "hydra",
    "data.root",
    "data.download",
    "data.verify_md5",
)
_NOT_A_CONDITION += ("trainer.progress_bar", "trainer.log_every_n_steps", "trainer.device_index", "trainer.accelerator")
_NAMED = ("benchmark", "method", "memory", "memory_per_class", "reading", "tau", "lambda", "lr", "seed")


# ----------------------------------------------------------------------------- naming


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def swept_keys(overrides) -> dict[str, str]:
    """``{key: value}`` of the overrides that set a condition (not logging, launching, devices)."""
    out = {}
    for o in overrides or ():
        key, sep, value = str(o).partition("=")
        key = key.lstrip("+~")
        if sep and key != "trainer" and not any(key == k or key.startswith(k + ".") for k in _NOT_A_CONDITION):
            out[key] = value
    return out


def describe(cfg: dict, overrides=()) -> dict:
    """W&B name, group, job_type and tags of a run of ``cfg`` (a resolved config as a dict).

    ``overrides`` (the job's Hydra overrides, or its folder name split at commas) adds every
    other key the sweep or the command line set (``batch_size=10``, ...) to the name, the tags
    and the group: runs that differ in anything but the seed never share a group.
    """
    method = cfg.get("method") or {}
    known = "replay" in method or "update" in method  # a results file written without them: name every key
    has_memory = not known or bool(method.get("replay") or method.get("update"))  # Online, Joint, oEWC, SI: none
    parts = [
        ("benchmark", dotted_get(cfg, "benchmark.name")),
        ("method", dotted_get(cfg, "method.name")),
        ("M", f"{cfg.get('memory')}{'/class' if cfg.get('memory_per_class') else ''}" if has_memory else None),
        ("reading", cfg.get("reading")),
        ("tau", cfg.get("tau") if not known or _reads(method, "tau") else None),  # C-CMR's: not ER's, MIR's, ...
        ("lambda", cfg.get("lambda") or None),  # the stream's imbalance: named when there is one
        ("lr", cfg.get("lr")),
    ]
    named = {"benchmark.name", "method.name", *_NAMED}
    parts += [(k, v) for k, v in sorted(swept_keys(overrides).items()) if k not in named]
    parts = [(k, _fmt(v)) for k, v in parts if v is not None]
    seed = ("seed", _fmt(cfg.get("seed")))
    exp = str(cfg.get("experiment", "default"))
    label = lambda kv: kv[1] if kv[0] in ("benchmark", "method") else f"{kv[0]}={kv[1]}"  # noqa: E731
    return {
        "parts": dict(parts),
        "name": _short(" ".join(label(kv) for kv in [*parts, seed])),
        "group": _short(" ".join([exp, *(label(kv) for kv in parts)])),
        "job_type": str(dotted_get(cfg, "method.name")),
        "tags": [exp, *(label(kv)[:64] for kv in [*parts, seed])],
    }


def _reads(node, key: str) -> bool:
    """Whether the method's resolved config (its replay, update and plugin) has ``key`` anywhere."""
    if isinstance(node, dict):
        return key in node or any(_reads(v, key) for v in node.values())
    return isinstance(node, list) and any(_reads(v, key) for v in node)


def _short(text: str, limit: int = 128) -> str:
    """W&B caps names and groups at 128 characters: a longer one keeps its start and a hash of the whole."""
    return text if len(text) <= limit else f"{text[: limit - 10]} ~{_sha(text)[:8]}"


# ----------------------------------------------------------------------------- one mirror per folder


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def results_sha(out_dir) -> str | None:
    """SHA-256 of the folder's results file (None when it has none)."""
    try:
        return _sha(read_regular(Path(out_dir) / RESULTS_FILE))
    except (OSError, Unreadable):
        return None


def mirrored(out_dir, content_sha: str | None, mode: str) -> bool:
    """Whether the folder's W&B run (``wandb/mirror.json``) already mirrors this content, in this mode."""
    m = read_object(Path(out_dir) / "wandb" / MIRROR_FILE) or {}
    return content_sha is not None and m.get("sha256") == content_sha and m.get("mode") == mode


def supersede(out_dir) -> None:
    """Move the folder's earlier W&B runs into ``wandb/superseded/`` (kept, but not synced by
    ``wandb sync <job>/wandb/offline-run-*``): a folder's runs mirror its current results only."""
    d = Path(out_dir) / "wandb"
    old = [p for p in d.glob("*run-*") if p.is_dir() and not p.is_symlink()] if d.is_dir() else []
    for p in old:
        (d / "superseded").mkdir(exist_ok=True)
        os.replace(p, d / "superseded" / p.name)
    (d / MIRROR_FILE).unlink(missing_ok=True)


def mark_mirrored(run, out_dir, content_sha: str | None, mode: str) -> None:
    if content_sha is not None:
        write_json_atomic(
            Path(out_dir) / "wandb" / MIRROR_FILE, {"run_id": run.id, "sha256": content_sha, "mode": mode}
        )


# ----------------------------------------------------------------------------- one run


def init_run(cfg: dict, out_dir, *, source: str, overrides=(), logger_cfg=None):
    """A W&B run for the job in ``out_dir`` with its name, group, tags and axes; the folder's
    earlier W&B runs are superseded."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    lc = dict(logger_cfg if logger_cfg is not None else (cfg.get("logger") or {}))
    d = describe(cfg, overrides)
    supersede(out_dir)
    tags = [*d["tags"], *(lc.get("tags") or [])] + ([] if source == "ran" else ["from_results", source])
    run = wandb.init(
        **wandb_settings(lc),
        name=lc.get("run_name") or d["name"],
        group=lc.get("group") or d["group"],
        job_type=d["job_type"],
        tags=list(dict.fromkeys(tags)),
        dir=str(out_dir),
        config={**cfg, "source": source},
        reinit="create_new",
    )
    define_axes(run)
    return run


def define_axes(run) -> None:
    """Per-task keys on the ``task`` axis, training keys on ``train/step`` (never global_step)."""
    run.define_metric(TASK_AXIS)
    run.define_metric("acc/*", step_metric=TASK_AXIS)
    run.define_metric(STEP_AXIS)
    run.define_metric("train/*", step_metric=STEP_AXIS)


def row_metrics(i: int, accs, seen: int) -> dict:
    """The keys of row i of R, tasks numbered 1..T as in the figures: ``task`` = i + 1,
    ``acc/task<j+1>`` = R[i, j] for the ``seen`` tasks trained so far (the others absent), and
    ``acc/seen`` = their mean."""
    accs = [float(a) for a in accs][:seen]
    return {TASK_AXIS: i + 1, **{f"acc/task{j + 1}": a for j, a in enumerate(accs)}, "acc/seen": float(np.mean(accs))}


def log_results(run, res: dict) -> None:
    """What a run logs at its end, from its results file: identity, b, final metrics, R table."""
    R, b = res.get("R") or [], res.get("b") or []
    meta = {
        k: res[k] for k in ("identity", "reading", "versions", "device", "memory_capacity", "reused_from") if k in res
    }
    run.config.update(meta, allow_val_change=True)
    m = res.get("metrics", {})
    run.summary.update({f"final/{k}": m.get(k) for k in METRICS})
    run.summary.update({f"b/task{j + 1}": v for j, v in enumerate(b)})
    run.summary.update({k: res[k] for k in ("wall_time_s", "train_time_s") if k in res})
    if R:
        import wandb

        cols = ["row", *(f"task{j + 1}" for j in range(len(R[0])))]
        rows = [[f"after task {i + 1}", *r] for i, r in enumerate(R)]
        rows = ([["b (init)", *b]] if len(b) == len(R[0]) else []) + rows
        run.log({"accuracy_matrix": wandb.Table(columns=cols, data=rows)})


CSV_FILE = Path("csv") / "metrics.csv"  # clsuite.loggers: the CSV logger's output in a run folder


def csv_history(out_dir, res: dict) -> list[dict]:
    """The loss rows (``train/step``, ``train/loss``, its parts) the run logged to ``csv/metrics.csv``.

    Only when the file belongs to these results: its per-task rows (``acc/seen``) must be the
    rows of R the results hold, and its steps within the run's; else (no file, another run's
    file, a run logged with logger=none) no rows.
    """
    import csv

    try:
        text = read_regular(Path(out_dir) / CSV_FILE).decode()
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except (OSError, Unreadable, csv.Error, UnicodeDecodeError):
        return []
    R, total = res.get("R") or [], sum(res.get("steps_per_task") or [])
    square = bool(R) and len(R) == len(R[0])
    want = [float(np.mean(r[: i + 1 if square else len(r)])) for i, r in enumerate(R)]
    try:
        seen = [float(r["acc/seen"]) for r in rows if r.get("acc/seen")]
        loss = [
            {k: (int(float(v)) if k == STEP_AXIS else float(v)) for k, v in r.items() if k.startswith("train/") and v}
            for r in rows
            if r.get("train/loss")
        ]
    except (TypeError, ValueError):
        return []
    same = len(seen) == len(want) and np.allclose(seen, want, rtol=0, atol=1e-6)
    if not same or any(h.get(STEP_AXIS, total + 1) > total for h in loss):
        return []
    return loss


def log_from_results(cfg: dict, out_dir, *, source: str, overrides=(), logger_cfg=None) -> bool:
    """A W&B run for a job that did not train (skipped, reused, synced), from its results file.

    Replays the loss rows its run logged (:func:`csv_history`) on the ``train/step`` axis and the
    rows of R on the ``task`` axis, then :func:`log_results`. Does nothing when the results file
    is missing or this grid point already has a W&B run. Returns whether it logged.
    """
    found, sha = read_run(Path(out_dir) / RESULTS_FILE), results_sha(out_dir)
    lc = dict(logger_cfg if logger_cfg is not None else (cfg.get("logger") or {}))
    if not found.ok or mirrored(out_dir, sha, wandb_settings(lc)["mode"]):
        return False  # no sealed results file (clsuite.results): nothing to mirror
    res = found.data
    run = init_run(cfg, out_dir, source=source, overrides=overrides, logger_cfg=lc)
    try:
        for h in csv_history(out_dir, res):
            run.log(h)
        R = res.get("R") or []
        square = len(R) == len(R[0]) if R else False
        for i, row in enumerate(R):
            run.log(row_metrics(i, row, seen=i + 1 if square else len(row)))
        log_results(run, res)
    finally:
        run.finish()
    mark_mirrored(run, out_dir, sha, wandb_settings(lc)["mode"])
    return True


def mirror_finished(cfg, out_dir, how: str, overrides=()) -> None:
    """A sweep job that did not train (``how``: skipped | reused): its W&B run, under logger=wandb.

    A W&B failure (no network in online mode, ...) is a warning: the job's results stand.
    """
    if cfg.logger.name != "wandb":
        return
    from omegaconf import OmegaConf

    try:
        log_from_results(OmegaConf.to_container(cfg, resolve=True), out_dir, source=how, overrides=overrides)
    except Exception as e:
        print(f"warning: {Path(out_dir).name}: no W&B run from its results ({type(e).__name__}: {e})", file=sys.stderr)


# ----------------------------------------------------------------------------- an experiment


def _job_dirs(exp_dir: Path) -> list[Path]:
    return sorted(
        p.parent for p in exp_dir.rglob(RESULTS_FILE) if not (SKIP_DIRS & set(p.relative_to(exp_dir).parts[:-1]))
    )


def _overrides_of(exp_dir: Path, job: Path) -> list[str]:
    """The job's overrides: its overrides.json (a hashed folder name), the sweep's grid.json, else
    its folder name (k=v,k=v)."""
    own = read_json(job / OVERRIDES_FILE)
    if isinstance(own, list):
        return own
    grid = read_object(exp_dir / GRID_FILE) or {}
    for j in grid.get("jobs") or []:
        if isinstance(j, dict) and j.get("dir") == job.name:
            return list(j["overrides"])
    return job.name.split(",")


def _py(v):
    """A numpy / pandas scalar as a plain Python value (for W&B's JSON)."""
    return v.item() if hasattr(v, "item") else v


def _label(row, keys, drop=()) -> str:
    """A cell's line in a chart: the method, then the other keys that vary between cells."""
    parts = [str(row["method"])]
    parts += [f"{'M' if k == 'memory' else k}={_fmt(_py(row[k]))}" for k in keys if k not in ("method", *drop)]
    return " ".join(parts)


def _bars_figure(data: list[list], title: str):
    """A bar chart with error bars (W&B's native bar chart has none): rows [label, mean, std, n];
    no bar for a cell of one seed (no std), its n under the label. The title wraps to the figure's
    width (a narrow chart of two or three bars clipped it)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{lab}\nn={n}" for lab, _, _, n in data]
    std = [0.0 if n < 2 or sd is None or np.isnan(sd) else sd for _, _, sd, n in data]
    width = 1.0 + 0.8 * len(data)
    fig, ax = plt.subplots(figsize=(width, 3.6))
    ax.bar(range(len(data)), [m for _, m, _, _ in data], yerr=std, capsize=4, color="tab:blue")
    ax.set_xticks(range(len(data)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("Acc (%)")
    ax.set_title(
        textwrap.fill(title, width=max(16, int(width * 11))), fontsize=8
    )  # about 11 characters an inch at 8 pt
    fig.tight_layout()
    return fig


def _bars(data: list[list], title: str):
    """:func:`_bars_figure` as an RGB array (``wandb.Image``)."""
    import matplotlib.pyplot as plt

    fig = _bars_figure(data, title)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return pixels


def experiment_charts(experiment: str, runs) -> dict:
    """``{flat key: W&B chart or table}`` of an experiment's figures and tables.

    ``runs``: one row per distinct run, as ``clsuite.analysis.load.load_runs`` reads them (the
    tables of ``make report`` use the same rows); cells and their mean and std over seeds:
    ``clsuite.analysis.stats.summarize``.
    """
    import wandb

    from clsuite.analysis.defaults import fixed_settings
    from clsuite.analysis.load import CONDITIONS, KEYS
    from clsuite.analysis.stats import summarize

    summary = summarize(runs)
    varying = [k for k in KEYS if k != "benchmark" and summary[k].nunique(dropna=False) > 1]
    held = ", ".join(fixed_settings(runs))  # a key off its default for every run: in every title
    experiment = f"{experiment}; {held}" if held else experiment
    out = {}
    for bench in sorted(summary["benchmark"].unique()):
        s = summary[summary["benchmark"] == bench]
        for cond in [c for c in CONDITIONS if c in varying]:  # Figs. 5, 6, 9, 10a, 11: one line per method
            lines: dict[str, list] = defaultdict(list)
            for _, row in s.sort_values(cond).iterrows():
                lines[_label(row, varying, drop=(cond,))].append(row)
            for key in ("acc", "bwt") if cond == "memory" else ("acc",):
                names = sorted(lines)
                out[f"{key}_vs_{cond}_{bench}"] = wandb.plot.line_series(
                    xs=[[_py(r[cond]) for r in lines[n]] for n in names],
                    ys=[[_py(r[f"{key}_mean"]) for r in lines[n]] for n in names],
                    keys=names,
                    title=f"{METRICS[key].label} against {cond} ({bench}, {experiment}, mean over seeds)",
                    xname=cond,
                )
        curves = {}  # Figs. 7, 8b, 10b: the first task through the stream, mean over seeds
        for _, grp in runs[runs["benchmark"] == bench].groupby(list(KEYS), dropna=False, sort=False):
            Rs = [R for R in grp["R"] if R.ndim == 2 and R.shape[0] == R.shape[1] > 1]
            if Rs and len({R.shape for R in Rs}) == 1:
                curves[_label(grp.iloc[0], varying)] = np.mean([R[:, 0] for R in Rs], axis=0)
        if curves:
            names = sorted(curves)
            out[f"first_task_{bench}"] = wandb.plot.line_series(
                xs=[list(range(len(curves[n]))) for n in names],
                ys=[curves[n].tolist() for n in names],
                keys=names,
                title=f"accuracy on the first task after each task ({bench}, {experiment}, mean over seeds)",
                xname="task",
            )
        if not [c for c in CONDITIONS if c in varying]:  # Table II, Figs. 8a, 9a: Acc per method
            data = [[_label(r, varying), _py(r["acc_mean"]), _py(r["acc_std"]), int(r["n"])] for _, r in s.iterrows()]
            t = wandb.Table(columns=["method", "acc", "acc_std", "n"], data=data)
            title = f"Acc ({bench}, {experiment}, mean over seeds)"
            out[f"acc_{bench}"] = wandb.plot.bar(t, "method", "acc", title=title)
            out[f"acc_bars_{bench}"] = wandb.Image(_bars(data, f"{title}, error bars: ± one std"))
    out["summary_table"] = wandb.Table(dataframe=summary)
    out["runs_table"] = wandb.Table(dataframe=runs.drop(columns=["R", "b", "flat", "versions"], errors="ignore"))
    return out


def log_experiment(experiment: str, exp_dir, out_dir, *, logger_cfg=None) -> Path | None:
    """The aggregate W&B run of an experiment (charts and tables from its results files).

    Its id hashes the runs' identities and metrics, so an unchanged experiment is logged once.
    """
    import wandb

    from clsuite.analysis.load import load_runs

    runs, _dropped = load_runs(exp_dir)
    if runs.empty:
        return None
    os.environ.setdefault("WANDB_SILENT", "true")
    sha = _sha(runs[["job", "key", *METRICS]].to_csv(index=False))
    out_dir, settings = Path(out_dir), wandb_settings(logger_cfg or {})
    if mirrored(out_dir, sha, settings["mode"]):
        return out_dir / "wandb"
    supersede(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        **settings,
        name=f"{experiment} aggregate",
        group=experiment,
        job_type="aggregate",
        tags=[experiment, "aggregate"],
        dir=str(out_dir),
        config={"experiment": experiment, "runs": len(runs)},
        reinit="create_new",
    )
    try:
        run.log(experiment_charts(experiment, runs))
    finally:
        run.finish()
    mark_mirrored(run, out_dir, sha, settings["mode"])
    return out_dir / "wandb"


def log_sweep_charts(config, out_root="results") -> None:
    """At the end of a sweep under logger=wandb: the experiment's aggregate run (a warning if it fails)."""
    if config.logger.get("name") != "wandb":
        return
    from omegaconf import OmegaConf

    exp = str(config.get("experiment"))
    try:
        lc = OmegaConf.to_container(config.logger, resolve=True)
        where = log_experiment(exp, Path(str(config.hydra.sweep.dir)), Path(out_root) / exp, logger_cfg=lc)
        if where is not None:
            print(f"  W&B charts and tables of {exp}: {where}", file=sys.stderr)
    except Exception as e:
        print(f"warning: no W&B aggregate run for {exp} ({type(e).__name__}: {e})", file=sys.stderr)


def sync_experiment(experiment: str, multirun_dir="multirun", out_root="results", logger_cfg=None) -> dict:
    """Every results file of ``multirun/<experiment>/`` without a W&B run gets one; then the aggregate run."""
    exp_dir = Path(multirun_dir) / experiment
    if not exp_dir.is_dir():
        from clsuite.analysis.paper_values import TARGETS
        from clsuite.home import hint

        first = hint("paper", experiment) if experiment in TARGETS else "its sweep"
        raise FileNotFoundError(f"no runs: {exp_dir} does not exist (run {first} first)")
    logged = present = 0
    left_out = []
    for job in _job_dirs(exp_dir):
        found = read_run(job / RESULTS_FILE)
        if not found.ok:
            left_out.append(f"{job.relative_to(exp_dir)}: {found.reason}")
            continue
        present += 1
        cfg = {**found.data["config"], "experiment": experiment}
        logged += log_from_results(
            cfg, job, source="synced", overrides=_overrides_of(exp_dir, job), logger_cfg=logger_cfg
        )
    agg = log_experiment(experiment, exp_dir, Path(out_root) / experiment, logger_cfg=logger_cfg)
    return {"results": present, "logged": logged, "already": present - logged, "aggregate": agg, "left_out": left_out}


# ----------------------------------------------------------------------------- reading offline runs


def _records(path: Path):
    """Raw records of a W&B transaction log (LevelDB log format: 32 KiB blocks, 7-byte headers)."""
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run file")
    block, pos, buf = 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:  # full
            yield chunk
        elif kind == 2:  # first
            buf = chunk
        elif kind == 3:  # middle
            buf += chunk
        elif kind == 4:  # last
            yield buf + chunk


def _nested(items) -> dict:
    out = {}
    for it in items:
        key = "/".join(it.nested_key) if len(it.nested_key) else it.key
        out[key] = json.loads(it.value_json)
    return out


def read_offline_run(run_dir) -> dict:
    """An offline run decoded: name, group, job_type, tags, config, history rows, summary, axes, charts."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = Path(run_dir).glob("run-*.wandb")
    out = {"config": {}, "history": [], "summary": {}, "axes": {}, "charts": [], "exit_code": None}
    for raw in _records(path):
        r = pb.Record()
        r.ParseFromString(raw)
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out.update(
                id=r.run.run_id,
                name=r.run.display_name,
                group=r.run.run_group,
                job_type=r.run.job_type,
                tags=list(r.run.tags),
                project=r.run.project,
            )
            out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
        elif kind == "config":
            for u in r.config.update:
                if len(u.nested_key) >= 3 and list(u.nested_key[:2]) == ["_wandb", "visualize"]:
                    out["charts"].append(u.nested_key[2])
                elif u.key:
                    out["config"][u.key] = json.loads(u.value_json)
        elif kind == "history":
            out["history"].append(_nested(r.history.item))
        elif kind == "summary":
            out["summary"].update(_nested(r.summary.update))
        elif kind == "metric":
            out["axes"][r.metric.name or r.metric.glob_name] = r.metric.step_metric or None
        elif kind == "exit":
            out["exit_code"] = r.exit.exit_code
    return out


def offline_runs(root) -> list[Path]:
    """Every current (not superseded) offline run folder under ``root``."""
    return sorted(
        p
        for p in Path(root).rglob("offline-run-*")
        if p.is_dir() and not p.is_symlink() and "superseded" not in p.parts
    )


def check(experiment: str, multirun_dir="multirun", out_root="results") -> str:
    """What the offline runs of an experiment hold: runs vs grid, groups, chart keys."""
    exp_dir = Path(multirun_dir) / experiment
    grid = read_object(exp_dir / GRID_FILE) or {}
    runs = [read_offline_run(p) for p in offline_runs(exp_dir)]
    ids = {r["id"] for r in runs}
    groups, sources = defaultdict(int), defaultdict(int)
    for r in runs:
        groups[r["group"]] += 1
        sources[r["config"].get("source")] += 1
    dirs = [j["dir"] for j in grid.get("jobs", []) if j.get("dir")]
    covered = sum(bool(offline_runs(exp_dir / d)) for d in dirs)
    lines = [
        f"{experiment}: {len(runs)} offline W&B runs ({len(ids)} distinct ids); grid {len(dirs)} jobs, "
        f"{covered} of them with a W&B run; {len(_job_dirs(exp_dir)) if exp_dir.is_dir() else 0} results files; "
        f"sources {dict(sources)}",
        f"  {len(groups)} groups (table cells), runs per group: {sorted(set(groups.values()))}",
        *(f"    {g}: {n}" for g, n in sorted(groups.items())[:40]),
    ]
    for p in offline_runs(Path(out_root) / experiment):
        a = read_offline_run(p)
        keys = sorted({k.split("/")[0] for h in a["history"] for k in h if not k.startswith("_")})
        lines.append(f"  aggregate run {a['name']!r}: charts {sorted(a['charts'])}; logged keys {keys}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Push an experiment's results files to W&B without training (a run per grid point + charts)."
    )
    ap.add_argument("experiments", nargs="+", help="experiment names (folders of multirun/), e.g. table2 memory")
    ap.add_argument("--multirun-dir", default="multirun")
    ap.add_argument("--out", default="results", help="the aggregate run goes to <out>/<experiment>/wandb/")
    ap.add_argument("--mode", choices=["offline", "online"], default=None, help="default: $WANDB_MODE or offline")
    ap.add_argument("--project", default=None, help="W&B project (default: conf/logger/wandb.yaml's)")
    ap.add_argument("--entity", default=None)
    ap.add_argument("--check", action="store_true", help="only decode and summarise the offline runs on disk")
    args = ap.parse_args(argv)
    lc = {"project": args.project, "entity": args.entity, "mode": args.mode}
    if args.mode:
        os.environ["WANDB_MODE"] = args.mode
    for exp in args.experiments:
        if args.check:
            print(check(exp, args.multirun_dir, args.out))
            continue
        try:
            safe_name(exp, "experiment")
            s = sync_experiment(exp, args.multirun_dir, args.out, logger_cfg=lc)
        except (FileNotFoundError, ConfigError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for line in s["left_out"]:
            print(f"  left out (never synced): {line}", file=sys.stderr)
        print(
            f"{exp}: {s['results']} results files, {s['logged']} new W&B runs, {s['already']} had one; "
            f"aggregate run: {s['aggregate']}"
        )
    return 0
