"""Weights & Biases for an experiment: its results files pushed, a run per grid point, and its aggregate run.

    python scripts/wandb_sync.py table2           # multirun/table2/: a W&B run per grid point + the charts
    python scripts/wandb_sync.py table2 --check   # what the offline runs on disk hold (no upload)

A W&B project mirrors the results files on disk:

Only sealed, well-formed results files (``clsuite.results.read_run``) are mirrored; the others are
named (``left out``) and never synced.

1.-3. One W&B run per grid point, its name, group and what it holds: ``clsuite.wandb_run``.
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
import json
import os
import struct
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from clsuite.config import ConfigError, wandb_settings
from clsuite.io import (
    GRID_FILE,
    OVERRIDES_FILE,
    RESULTS_FILE,
    read_json,
    read_object,
    sha256,
)
from clsuite.metrics import METRICS
from clsuite.paths import safe_name
from clsuite.results import read_run
from clsuite.wandb_run import _fmt, log_from_results, mark_mirrored, mirrored, supersede

SKIP_DIRS = {"wandb", ".hydra", "csv", ".submitit", ".index"}

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
    sha = sha256(runs[["job", "key", *METRICS]].to_csv(index=False))
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
