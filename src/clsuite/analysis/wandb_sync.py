"""Weights & Biases for an experiment: a run per results file that no W&B run mirrors yet, then its
aggregate run with the experiment's tables and figures (docs/GUIDE.md, "Tables and figures per experiment").
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from clsuite.analysis.defaults import caption, fixed_settings
from clsuite.analysis.load import grid_jobs, load_runs, read_grid, read_runs, split_items
from clsuite.analysis.report import aggregate, experiment_dir
from clsuite.config.check import ConfigError, wandb_settings
from clsuite.config.paths import dirname_text, safe_name
from clsuite.core.errors import fail
from clsuite.core.metrics import METRICS
from clsuite.run.io import OVERRIDES_FILE, RESULTS_FILE, Unreadable, os_error_line, read_json, sha256
from clsuite.run.results import read_run
from clsuite.run.wandb_run import finishing, log_from_results, mirrored, open_run

# ----------------------------------------------------------------------------- an experiment


def _overrides_of(job: Path, grid: dict | None) -> list[str]:
    """The job's overrides: its overrides.json (a hashed folder name), the sweep's grid.json, else
    its folder name (k=v,k=v)."""
    own = read_json(job / OVERRIDES_FILE)
    if isinstance(own, list):
        return own
    return list(grid[job.name]["overrides"]) if job.name in (grid or {}) else split_items(dirname_text(job.name))


def aggregate_outputs(built: dict) -> dict:
    """``{flat key: wandb.Image or wandb.Table}`` of what ``clsuite.analysis.report.aggregate`` made."""
    import wandb

    out = {p.stem: wandb.Image(str(p)) for p in built["figures"] if p.suffix == ".png"}
    for i, t in enumerate(built["tables"], 1):
        groups = [g for g, span in t.groups or [] for _ in range(span)]  # "Acc paper_text", as its Markdown
        columns = [f"{g} {h}" for g, h in zip(["", *groups], t.header)] if groups else t.header
        out[f"table{i}_{re.sub('[^a-z0-9]+', '_', t.title.lower()).strip('_')[:60]}"] = wandb.Table(
            columns=[c.strip() for c in columns], data=t.rows
        )
    runs = built["experiment"].runs.drop(columns=["R", "b", "flat", "versions"], errors="ignore")
    return out | {"summary_table": wandb.Table(dataframe=built["summary"]), "runs_table": wandb.Table(dataframe=runs)}


def log_experiment(experiment: str, exp_dir, out_root, *, logger_cfg=None) -> Path | None:
    """The aggregate W&B run of an experiment (``aggregate`` of ``exp_dir`` into ``out_root/<its name>/``),
    logged once while its runs' identities and metrics stay the same."""
    exp_dir = Path(exp_dir)
    runs = load_runs(exp_dir)[0]
    if runs.empty:
        return None
    sha = sha256(runs[["job", "key", *METRICS]].to_csv(index=False))
    out_dir, settings = Path(out_root) / exp_dir.name, wandb_settings(logger_cfg or {})
    if mirrored(out_dir, sha, settings["mode"]):
        return out_dir / "wandb"
    built = aggregate(exp_dir.name, exp_dir.parent, out_root, layout=experiment)
    run = open_run(
        out_dir,
        settings,
        name=f"{experiment} aggregate",
        group=experiment,
        job_type="aggregate",
        tags=[experiment, "aggregate"],
        notes=caption(fixed_settings(runs)) or None,
        config={"experiment": experiment, "runs": len(runs)},
    )
    with finishing(run, out_dir, sha, settings["mode"]):
        run.log(aggregate_outputs(built))
    return out_dir / "wandb"


def sync_experiment(experiment: str, multirun_dir="multirun", out_root="results", logger_cfg=None) -> dict:
    """Every results file of ``multirun/<experiment>/`` without a W&B run gets one; then the aggregate run."""
    exp_dir = experiment_dir(multirun_dir, experiment)
    grid = grid_jobs(read_grid(exp_dir))
    rows, rejected = read_runs(exp_dir, grid)
    logged = 0
    for job in sorted(exp_dir / r["job"] for r in rows):
        cfg = {**read_run(job / RESULTS_FILE).data["config"], "experiment": experiment}
        logged += log_from_results(cfg, job, source="synced", overrides=_overrides_of(job, grid), logger_cfg=logger_cfg)
    agg = log_experiment(experiment, exp_dir, out_root, logger_cfg=logger_cfg)
    left_out, n = [f"{r['job']}: {r['reason']}" for r in rejected], len(rows)
    return {"results": n, "logged": logged, "already": n - logged, "aggregate": agg, "left_out": left_out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Push an experiment's results files to W&B without training (a run per grid point + the "
        "aggregate run: its tables and figures)."
    )
    ap.add_argument("experiments", nargs="+", help="experiment names (folders of multirun/), e.g. table2 memory")
    ap.add_argument("--multirun-dir", default="multirun")
    ap.add_argument("--out", default="results", help="the aggregate run goes to <out>/<experiment>/wandb/")
    ap.add_argument("--mode", choices=["offline", "online"], default=None, help="default: $WANDB_MODE or offline")
    ap.add_argument("--project", default=None, help="W&B project (default: conf/logger/wandb.yaml's)")
    ap.add_argument("--entity", default=None)
    args = ap.parse_args(argv)
    lc = {"project": args.project, "entity": args.entity, "mode": args.mode}
    if args.mode:
        os.environ["WANDB_MODE"] = args.mode
    for exp in args.experiments:
        try:
            safe_name(exp, "experiment")
            s = sync_experiment(exp, args.multirun_dir, args.out, logger_cfg=lc)
        except (FileNotFoundError, ConfigError, Unreadable) as e:
            return fail(str(e))
        except OSError as e:  # an output folder cannot be written (read-only, a full disk)
            return fail(f"{os_error_line(e)}; the sync of {exp} stopped", status=1)
        for line in s["left_out"]:
            print(f"  left out (never synced): {line}", file=sys.stderr)
        print(
            f"{exp}: {s['results']} results files, {s['logged']} new W&B runs, {s['already']} had one; "
            f"aggregate run: {s['aggregate']}"
        )
    return 0
