"""Weights & Biases for an experiment: its results files pushed, a run per grid point, and its aggregate run.

The commands, what the runs hold, where they are written and how they are uploaded: docs/WANDB.md.

1. every results file the report reads (``clsuite.analysis.load.read_runs``) and no W&B run mirrors
   yet gets one (``clsuite.wandb_run.log_from_results``, ``source: synced``); the others are named;
2. the aggregate run (:func:`log_experiment`) logs what ``clsuite.analysis.report.aggregate`` wrote
   (:func:`aggregate_outputs`). A sweep under logger=wandb ends with this command in a child process.

:func:`read_offline_run` decodes an offline run without network, for the tests and ``--check``. By
hand: the installed wandb (0.31) reads these files only in its Go core (its Python ``DataStore``
reader is gone) and has no command that prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
from collections import Counter
from pathlib import Path

from clsuite.config import ConfigError, wandb_settings
from clsuite.io import OVERRIDES_FILE, RESULTS_FILE, Unreadable, os_error_line, read_json, sha256
from clsuite.metrics import METRICS
from clsuite.paths import dirname_text, safe_name
from clsuite.results import read_run
from clsuite.wandb_run import finishing, log_from_results, mirrored, open_run

# ----------------------------------------------------------------------------- an experiment


def _overrides_of(job: Path, grid: dict | None) -> list[str]:
    """The job's overrides: its overrides.json (a hashed folder name), the sweep's grid.json, else
    its folder name (k=v,k=v)."""
    own = read_json(job / OVERRIDES_FILE)
    if isinstance(own, list):
        return own
    from clsuite.analysis.load import split_items

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
    from clsuite.analysis.defaults import caption, fixed_settings
    from clsuite.analysis.load import load_runs
    from clsuite.analysis.report import aggregate

    exp_dir = Path(exp_dir)
    runs, _dropped = load_runs(exp_dir)
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
    exp_dir = Path(multirun_dir) / experiment
    if not exp_dir.is_dir():
        from clsuite.analysis.paper_values import TARGETS
        from clsuite.home import hint

        first = hint("paper", experiment) if experiment in TARGETS else "its sweep"
        raise FileNotFoundError(f"no runs: {exp_dir} does not exist (run {first} first)")
    from clsuite.analysis.load import grid_jobs, read_grid, read_runs

    grid = grid_jobs(read_grid(exp_dir))
    rows, rejected = read_runs(exp_dir, grid)
    logged = 0
    for job in sorted(exp_dir / r["job"] for r in rows):
        cfg = {**read_run(job / RESULTS_FILE).data["config"], "experiment": experiment}
        logged += log_from_results(cfg, job, source="synced", overrides=_overrides_of(job, grid), logger_cfg=logger_cfg)
    agg = log_experiment(experiment, exp_dir, out_root, logger_cfg=logger_cfg)
    left_out, n = [f"{r['job']}: {r['reason']}" for r in rejected], len(rows)
    return {"results": n, "logged": logged, "already": n - logged, "aggregate": agg, "left_out": left_out}


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
        buf = (b"" if kind in (1, 2) else buf) + data[pos + 7 : pos + 7 + length]  # full, first | middle, last
        pos += 7 + length
        if kind in (1, 4):
            yield buf


def _nested(items) -> dict:
    return {"/".join(it.nested_key) or it.key: json.loads(it.value_json) for it in items}


def read_offline_run(run_dir) -> dict:
    """An offline run decoded: name, group, job_type, tags, notes, config, history rows, summary, axes."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = Path(run_dir).glob("run-*.wandb")
    out = {"config": {}, "history": [], "summary": {}, "axes": {}, "exit_code": None}
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
                notes=r.run.notes,
                project=r.run.project,
            )
            out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in r.config.update if u.key})
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
    """What the offline runs of an experiment hold: runs vs grid, groups, the aggregate run's keys."""
    from clsuite.analysis.load import files, grid_jobs, read_grid

    exp_dir = Path(multirun_dir) / experiment
    runs = [read_offline_run(p) for p in offline_runs(exp_dir)]
    ids = {r["id"] for r in runs}
    groups, sources = Counter(r["group"] for r in runs), Counter(r["config"].get("source") for r in runs)
    dirs = list(grid_jobs(read_grid(exp_dir)) or {})
    covered = sum(bool(offline_runs(exp_dir / d)) for d in dirs)
    lines = [
        f"{experiment}: {len(runs)} offline W&B runs ({len(ids)} distinct ids); grid {len(dirs)} jobs, "
        f"{covered} of them with a W&B run; {len(files(exp_dir, RESULTS_FILE))} results files; "
        f"sources {dict(sources)}",
        f"  {len(groups)} groups (table cells), runs per group: {sorted(set(groups.values()))}",
        *(f"    {g}: {n}" for g, n in sorted(groups.items())[:40]),
    ]
    for p in offline_runs(Path(out_root) / experiment):
        a = read_offline_run(p)
        keys = sorted({k.split("/")[0] for h in a["history"] for k in h if not k.startswith("_")})
        lines.append(f"  aggregate run {a['name']!r}: logged keys {keys}")
    return "\n".join(lines)


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
    ap.add_argument("--check", action="store_true", help="only decode and summarise the offline runs on disk")
    args = ap.parse_args(argv)
    lc = {"project": args.project, "entity": args.entity, "mode": args.mode}
    if args.mode:
        os.environ["WANDB_MODE"] = args.mode
    for exp in args.experiments:
        try:
            safe_name(exp, "experiment")
            if args.check:
                print(check(exp, args.multirun_dir, args.out))
                continue
            s = sync_experiment(exp, args.multirun_dir, args.out, logger_cfg=lc)
        except (FileNotFoundError, ConfigError, Unreadable) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except OSError as e:  # an output folder cannot be written (read-only, a full disk)
            print(f"error: {os_error_line(e)}; the sync of {exp} stopped", file=sys.stderr)
            return 1
        for line in s["left_out"]:
            print(f"  left out (never synced): {line}", file=sys.stderr)
        print(
            f"{exp}: {s['results']} results files, {s['logged']} new W&B runs, {s['already']} had one; "
            f"aggregate run: {s['aggregate']}"
        )
    return 0
